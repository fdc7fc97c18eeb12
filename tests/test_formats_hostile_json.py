"""Hostile and broken JSON in every file minibert reads: each gets a CheckpointError naming the
file (and the field), never a RecursionError, TypeError, AttributeError or IndexError from inside.

The folders are copies of the bundled all-MiniLM-L6-v2 (a sentence-transformers folder: modules.json,
1_Pooling/config.json, config_sentence_transformers.json, tokenizer.json) with one file changed."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

import minibert
from minibert.errors import CheckpointError
from minibert.formats import json_files

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECTS = '{"a":' * 50_000 + "1" + "}" * 50_000
FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "modules.json", "1_Pooling/config.json",
         "config_sentence_transformers.json", "sentence_bert_config.json"]  # fmt: skip


@pytest.fixture
def folder(tmp_path, minilm_dir):
    copy = tmp_path / "model"
    shutil.copytree(minilm_dir, copy)
    return copy


def load(directory):
    return minibert.Embedder.from_pretrained(directory)


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("text", [DEEP, DEEP_OBJECTS, "[" * 70 + "]" * 70], ids=["lists", "objects", "70 levels"])
def test_deeply_nested_json_is_refused_naming_the_file(folder, name, text):
    if not (folder / name).exists():
        pytest.skip(f"the bundled model has no {name}")
    (folder / name).write_text(text, encoding="utf-8")
    if name == "tokenizer.json":
        (folder / "vocab.txt").unlink()  # so tokenizer.json is what is read
    with pytest.raises(CheckpointError, match=r"nested (deeper|more) than 64 levels") as error:
        load(folder)
    assert name.split("/")[-1] in str(error.value)


def _tokenizer_json(folder, edit) -> None:
    path = folder / "tokenizer.json"
    values = json.loads(path.read_text(encoding="utf-8"))
    edit(values)
    path.write_text(json.dumps(values), encoding="utf-8")
    (folder / "vocab.txt").unlink()  # so tokenizer.json is what is read


ADDED_TOKENS = [
    {"a": 1},
    ["[PAD]"],
    [{"content": ["[PAD]"], "id": 0, "special": True}],
    [{"content": "[PAD]", "id": "0", "special": True}],
    [{"content": "[PAD]", "id": 0, "special": "yes"}],
]
POST_PROCESSORS = [{"type": "BertProcessing", "sep": 5, "cls": ["[CLS]", 101]},
                   {"type": "BertProcessing", "sep": [], "cls": []},
                   {"type": "BertProcessing", "sep": {"a": 1}, "cls": ["[CLS]", 101]},
                   {"type": "BertProcessing", "sep": [["[SEP]"], 102], "cls": [["[CLS]"], 101]},
                   {"type": "TemplateProcessing", "single": ["x", 1, None], "pair": []},
                   {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": ["[CLS]"]}}], "pair": None},
                   {"type": ["BertProcessing"]}, "BertProcessing"]  # fmt: skip


@pytest.mark.parametrize("value", ADDED_TOKENS, ids=lambda v: json.dumps(v)[:30])
def test_wrong_shapes_of_added_tokens(folder, value):
    _tokenizer_json(folder, lambda values: values.__setitem__("added_tokens", value))
    with pytest.raises(CheckpointError, match=r"tokenizer.json: added_tokens"):
        load(folder)


@pytest.mark.parametrize("value", POST_PROCESSORS, ids=lambda v: json.dumps(v)[:40])
def test_wrong_shapes_of_post_processor(folder, value):
    _tokenizer_json(folder, lambda values: values.__setitem__("post_processor", value))
    with pytest.raises(CheckpointError, match=r"tokenizer.json: post_processor"):
        load(folder)


@pytest.mark.parametrize(
    "name, field, value, says",
    [
        ("config_sentence_transformers.json", "default_prompt_name", ["query"], "default_prompt_name"),
        ("config_sentence_transformers.json", "similarity_fn_name", ["cosine"], "similarity_fn_name"),
        ("config_sentence_transformers.json", "prompts", ["query: "], "prompts must map names"),
        ("1_Pooling/config.json", "pooling_mode", [["mean"]], "pooling_mode"),
        ("1_Pooling/config.json", "include_prompt", "yes", "include_prompt must be true or false"),
        ("modules.json", None, [{"type": ["x"]}], "malformed"),
        ("modules.json", None, {"type": "x"}, "malformed"),
    ],
)  # fmt: skip
def test_wrong_types_in_sentence_transformers_files(folder, name, field, value, says):
    path = folder / name
    values = json.loads(path.read_text(encoding="utf-8")) if field else None
    if field:
        values[field] = value
    path.write_text(json.dumps(values if field else value), encoding="utf-8")
    with pytest.raises(CheckpointError, match=says) as error:
        load(folder)
    assert name.split("/")[-1] in str(error.value)


def test_a_dense_activation_given_as_a_list(folder):
    modules = json.loads((folder / "modules.json").read_text())
    dense = folder / "2_Dense"
    dense.mkdir()
    (dense / "config.json").write_text(json.dumps({"in_features": 384, "out_features": 4, "bias": True,
                                                   "activation_function": ["torch.nn.Tanh"]}))  # fmt: skip
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(CheckpointError, match=r"2_Dense/config.json: activation_function \['torch.nn.Tanh'\] is not"):
        load(folder)


def test_a_deep_jsonl_line_is_one_error_line(tmp_path, minilm_dir):
    from helpers import run_minibert as run

    source = tmp_path / "in.jsonl"
    source.write_text(DEEP + "\n", encoding="utf-8")
    result = run("embed", "--input", str(source), "--model", str(minilm_dir))
    assert result.returncode == 1 and "in.jsonl:1: not valid JSON (nested deeper than 64 levels)" in result.stderr


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10's int() has no digit limit: the hook is needed there")
def test_integers_stay_on_the_c_parsers_fast_path(monkeypatch):
    """A Python parse_int hook made a 4.9 MB body of token ids 4-5 times slower to read; from 3.11 on
    Python refuses long integers itself, so no Python function may be called per integer."""
    def called(text):
        raise AssertionError("a Python function was called for an integer")

    monkeypatch.setattr(json_files, "_bounded_int", called)
    assert json_files.parse_json("[[101, 2023, 102], [-1]]", strict=True) == [[101, 2023, 102], [-1]]


@pytest.mark.parametrize("lifted", [False, True], ids=["Python's limit", "a program lifted Python's limit"])
@pytest.mark.parametrize("sign", ["", "-"])
def test_a_5000_digit_integer_is_refused_in_minibert_words(lifted, sign):
    if lifted and sys.version_info >= (3, 11):
        sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(ValueError, match=r"^a number of 5000 digits, more than the 4300 an integer may have$"):
            json_files.parse_json('{"dimensions": ' + sign + "9" * 5000 + "}")
    finally:
        if sys.version_info >= (3, 11):
            sys.set_int_max_str_digits(json_files.MAX_INTEGER_DIGITS)
    assert json_files.parse_json("[" + "9" * 4300 + "]") == [int("9" * 4300)]
