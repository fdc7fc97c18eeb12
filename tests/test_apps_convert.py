"""``minibert convert``'s destination and what it carries over: a read-only place, or a parent that
is a file, is one line naming the destination and why; a sentence-transformers model keeps its
recipe (modules.json, 1_Pooling/, sentence_bert_config.json, ...), so ``embed`` on the converted
folder gives the vectors it gave on the source, and a recipe embed cannot follow is refused first;
the tokenizer is written as its save_pretrained writes it (added tokens, roles, settings).
(Google's checkpoints converted: test_formats_tf_checkpoint.py; labels: test_apps_cli_tasks.py.)"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest

from helpers import run_minibert as run
from minibert.apps import convert

transformers = pytest.importorskip("transformers")

GOOGLE = "tests/data/uncased_L-2_H-32_A-2"


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and lines and lines[-1].startswith("minibert: error: "), result.stderr
    assert not any(line.startswith("minibert: error") for line in lines[:-1]), result.stderr
    return lines[-1].removeprefix("minibert: error: ")


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_a_read_only_place_names_the_destination(tmp_path, monkeypatch, code):
    # It said "[Errno 30] Read-only file system: 'romnt/.x.dqyhcw6s.partial'": the staging folder, not x.
    destination = tmp_path / "x"

    def refused(prefix, suffix, dir):
        raise OSError(code, os.strerror(code), os.path.join(dir, f"{prefix}dqyhcw6s{suffix}"))

    monkeypatch.setattr(convert.tempfile, "mkdtemp", refused)
    message = one_error_line(run("convert", GOOGLE, str(destination)))
    assert message == f"cannot write {destination}: {os.strerror(code)}"
    assert os.listdir(tmp_path) == []


def test_a_full_disk_names_the_destination_not_the_staging_folder(tmp_path, monkeypatch):
    """A full disk said "cannot write small/.out.3pvzewij.partial/model.safetensors": a file of the
    hidden staging folder, not DST (cli.md: never the temporary file). Nothing is left behind."""
    destination = tmp_path / "out"

    def full(model, folder, options):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder / "model.safetensors"))

    monkeypatch.setattr(convert, "save_pretrained", full)
    assert one_error_line(run("convert", GOOGLE, str(destination))) == (
        f"cannot write {destination}: No space left on device")
    assert os.listdir(tmp_path) == []


def test_an_existing_empty_folder_is_kept_and_filled(tmp_path, monkeypatch):
    """An empty DST was removed and the staging folder renamed in its place: a mount point (a Docker
    volume) failed with "Device or resource busy" after the work, a shared folder lost its group,
    setgid bit and mode, and `convert SRC .` said ".: Invalid argument". The folder is kept now (the
    same inode and mode) and filled; a new DST is still renamed into place whole."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2775)
    before = shared.stat()
    assert run("convert", GOOGLE, str(shared)).returncode == 0
    after = shared.stat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert {"config.json", "model.safetensors", "vocab.txt"} <= set(os.listdir(shared))
    assert not any(name.endswith(".partial") for name in os.listdir(shared))
    source, here = str(Path(GOOGLE).resolve()), tmp_path / "here"
    here.mkdir()
    (here / ".here.killed.partial").mkdir()  # a killed convert's staging folder: its own, removed
    (here / ".here.killed.partial" / "model.safetensors").write_bytes(b"half")
    monkeypatch.chdir(here)
    original = convert.tempfile.mkdtemp  # (from Python 3.12 mkdtemp gives an absolute path for a relative dir)
    monkeypatch.setattr(convert.tempfile, "mkdtemp", lambda **named: os.path.abspath(original(**named)))
    assert run("convert", source, ".").returncode == 0
    assert "model.safetensors" in os.listdir(here) and not any(name.endswith(".partial") for name in os.listdir(here))


def test_a_parent_that_is_a_file_is_said_to_be_a_file(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("x\n")
    message = one_error_line(run("convert", GOOGLE, str(notes / "x")))
    assert message == f"the destination's parent directory {notes} is a file, not a directory"


def test_a_destination_that_is_a_link_is_written_where_it_points(tmp_path, monkeypatch):
    """A link to an empty directory was said to be "Not a directory" (rmdir of a link), not in the
    `cannot write DST: ...` form; a link to nothing was named by the staging folder's name
    (".dang.bev6m0jo.partial -> dang: Not a directory"); both after the whole model was read and
    saved. Now a link to a directory is written into, as transformers' save_pretrained writes through
    it (the link stays), and a link to nothing is refused in one line before any work."""
    target, link = tmp_path / "target", tmp_path / "link"
    target.mkdir()
    link.symlink_to(target)
    result = run("convert", GOOGLE, str(link))
    assert result.returncode == 0, result.stderr
    written = ["config.json", "model.safetensors", "special_tokens_map.json", "tokenizer_config.json", "vocab.txt"]
    assert link.is_symlink() and sorted(os.listdir(target)) == written
    assert transformers.BertForPreTraining.from_pretrained(str(link)).config.hidden_size == 32

    def no_work(*args, **kwargs):
        raise AssertionError("staged before the destination was checked")

    monkeypatch.setattr(convert.tempfile, "mkdtemp", no_work)
    dangling, taken = tmp_path / "dangling", tmp_path / "taken"
    dangling.symlink_to(tmp_path / "nowhere")
    message = one_error_line(run("convert", GOOGLE, str(dangling)))
    assert message.startswith(f"cannot write {dangling}: it is a symbolic link to {tmp_path / 'nowhere'}, which does "
                              "not exist; convert writes into the directory a link names")  # fmt: skip
    taken.symlink_to(target)  # full now
    assert one_error_line(run("convert", GOOGLE, str(taken))) == \
        f"the destination {taken} already exists and is not an empty directory"  # fmt: skip
    assert sorted(os.listdir(tmp_path)) == ["dangling", "link", "taken", "target"]
    (tmp_path / "notes.txt").write_text("mine")  # a file: said to be one (it was "not an empty directory")
    assert one_error_line(run("convert", GOOGLE, str(tmp_path / "notes.txt"))) == (
        f"the destination {tmp_path / 'notes.txt'} is a file, not a directory: convert writes a new or empty directory")


def _embedded(model, tmp_path, name) -> np.ndarray:
    output = tmp_path / f"{name}.npy"
    result = run("embed", "hello world", "A second, longer text to embed.", "--model", str(model), "--output",
                 str(output))  # fmt: skip
    assert result.returncode == 0, result.stderr
    return np.load(output)


def test_a_sentence_transformers_model_keeps_its_recipe_and_its_vectors(minilm_dir, tmp_path):
    # The converted all-MiniLM-L6-v2 embedded without its normalisation and its 256-piece limit:
    # "hello world" began -0.197446 instead of -0.034477, and nothing said so.
    converted = tmp_path / "mini"
    result = run("convert", str(minilm_dir), str(converted))
    assert result.returncode == 0, result.stderr
    assert "; the sentence-transformers recipe: 1_Pooling/, config_sentence_transformers.json, modules.json, " \
        "sentence_bert_config.json; the model card: README.md)" in result.stderr  # fmt: skip
    for name in ("modules.json", "1_Pooling/config.json", "sentence_bert_config.json",
                 "config_sentence_transformers.json"):  # fmt: skip
        assert (converted / name).read_bytes() == (minilm_dir / name).read_bytes(), name
    before, after = _embedded(minilm_dir, tmp_path, "before"), _embedded(converted, tmp_path, "after")
    print(f"max |Δ| {np.abs(before - after).max():.3e}")
    assert np.array_equal(before, after)
    assert np.allclose(np.linalg.norm(after, axis=1), 1.0, atol=1e-5)  # the Normalize module kept


def test_a_model_card_is_copied_as_a_model_card(tmp_path):
    """fortunes-mini (no modules.json) was said to carry "the sentence-transformers recipe: README.md":
    README.md was copied from any source and reported as part of a recipe it has none of. It is the
    model card (what the model is, its license): copied, and called that."""
    from minibert.loading.hub import resolve_file

    result = run("convert", "minibert/fortunes-mini", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().endswith("special_tokens_map.json; the model card: README.md)"), result.stderr
    assert "recipe" not in result.stderr and not (tmp_path / "out" / "modules.json").exists()
    card = resolve_file("minibert/fortunes-mini", "README.md").read_bytes()
    assert (tmp_path / "out" / "README.md").read_bytes() == card


def _copy_of(minilm_dir, tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for entry in minilm_dir.iterdir():
        (source / entry.name).symlink_to(entry)
    return source


def test_a_dense_module_is_copied_with_its_weights(minilm_dir, tmp_path):
    from safetensors.numpy import save_file

    source = _copy_of(minilm_dir, tmp_path)
    modules = json.loads((minilm_dir / "modules.json").read_text())
    dense = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    (source / "modules.json").unlink()
    (source / "modules.json").write_text(json.dumps(modules[:2] + [dense] + [{**modules[2], "idx": 3}]))
    (source / "2_Dense").mkdir()
    (source / "2_Dense" / "config.json").write_text(json.dumps(
        {"in_features": 384, "out_features": 8, "bias": True,
         "activation_function": "torch.nn.modules.activation.Tanh"}))  # fmt: skip
    rng = np.random.default_rng(0)
    save_file({"linear.weight": rng.standard_normal((8, 384)).astype(np.float32),
               "linear.bias": rng.standard_normal(8).astype(np.float32)},
              str(source / "2_Dense" / "model.safetensors"))  # fmt: skip
    converted = tmp_path / "converted"
    assert run("convert", str(source), str(converted)).returncode == 0
    assert sorted(os.listdir(converted / "2_Dense")) == ["config.json", "model.safetensors"]
    before, after = _embedded(source, tmp_path, "before"), _embedded(converted, tmp_path, "after")
    assert before.shape == (2, 8) and np.array_equal(before, after)


def test_a_recipe_embed_cannot_follow_is_refused_before_writing(minilm_dir, tmp_path):
    source = _copy_of(minilm_dir, tmp_path)
    (source / "modules.json").unlink()
    modules = json.loads((minilm_dir / "modules.json").read_text())
    (source / "modules.json").write_text(json.dumps(modules + [{"idx": 3, "name": "3", "path": "3_Odd",
                                                               "type": "my_package.OddModule"}]))  # fmt: skip
    message = one_error_line(run("convert", str(source), str(tmp_path / "out")))
    assert message.startswith(f"{source} is a sentence-transformers model whose recipe minibert cannot follow")
    assert "my_package.OddModule" in message
    assert sorted(os.listdir(tmp_path)) == ["source"]


def _tokenizer_with_added_tokens(minilm_dir):
    from minibert import BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(minilm_dir, model_max_length=100_000, padding_side="left",
                                              truncation_side="left", clean_up_tokenization_spaces=True)  # fmt: skip
    tokenizer.add_tokens(["zebrafish"])
    tokenizer.add_special_tokens({"extra_special_tokens": ["[E1]"], "unk_token": "[unused1]"})
    return tokenizer


def _tokenizer_without_basic_tokenization(minilm_dir):
    from minibert import BertTokenizer

    return BertTokenizer(minilm_dir / "vocab.txt", do_basic_tokenize=False, extra_special_tokens=["[E1]"])


@pytest.mark.parametrize("make", [_tokenizer_with_added_tokens, _tokenizer_without_basic_tokenization])
def test_the_converted_folder_tokenizes_as_the_source(minilm_dir, tmp_path, make):
    """convert wrote a tokenizer_config.json of its own and copied vocab.txt: added tokens, roles,
    do_basic_tokenize and the sides were lost ("a zebrafish [E1]" gave [101, 1037, 29145, 7529, 1031,
    ...] instead of [101, 1037, 30522, 30523, 102]), so the resized embedding rows were never reached.
    Now transformers and minibert read the converted folder as transformers reads the source."""
    from minibert import BertModel, BertTokenizer

    tokenizer = make(minilm_dir)
    model = BertModel.from_pretrained(minilm_dir)
    model.resize_token_embeddings(len(tokenizer))
    source, converted = tmp_path / "source", tmp_path / "converted"
    model.save_pretrained(source)
    tokenizer.save_pretrained(source)
    result = run("convert", str(source), str(converted))
    assert result.returncode == 0, result.stderr
    assert "special_tokens_map.json)" in result.stderr and "recipe" not in result.stderr  # a file of the tokenizer's
    texts = ["a zebrafish [E1]", "Hello, world!", "ZEBRAFISH [unused1] café", "x" * 30]
    reference = transformers.AutoTokenizer.from_pretrained(str(source))
    expected = reference(texts, padding=True)
    theirs = transformers.AutoTokenizer.from_pretrained(str(converted))
    ours = BertTokenizer.from_pretrained(converted)
    for loaded in (theirs, ours):
        assert loaded(texts, padding=True)["input_ids"] == expected["input_ids"], type(loaded).__name__
        assert loaded(texts, padding=True)["attention_mask"] == expected["attention_mask"]
        assert loaded.decode(expected["input_ids"][2]) == reference.decode(expected["input_ids"][2])
        assert (loaded.padding_side, loaded.truncation_side, loaded.unk_token) == \
            (reference.padding_side, reference.truncation_side, reference.unk_token)  # fmt: skip
        assert loaded.model_max_length == min(tokenizer.model_max_length, 512)  # capped at the positions
    assert expected["input_ids"][0][-3] != reference.unk_token_id  # [E1] reaches its own row


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(59)]


def _saved_by_transformers(cls_name: str, directory, pooler: bool = True):
    """A folder as transformers' ``CLASS(config).save_pretrained`` writes it (random weights), with a
    vocab.txt. ``pooler`` False: BertModel(add_pooling_layer=False); True for a token classifier: with
    bert.pooler.* added, as transformers before 3.0 saved one."""
    import torch
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37, max_position_embeddings=40,
                                     num_labels=2 if cls_name == "BertForQuestionAnswering" else 5)  # fmt: skip
    model = getattr(transformers, cls_name)(config, **({} if pooler or cls_name != "BertModel" else
                                                       {"add_pooling_layer": False}))  # fmt: skip
    model.save_pretrained(directory)
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    if pooler and cls_name == "BertForTokenClassification":
        tensors = load_file(directory / "model.safetensors")
        pooled = transformers.BertModel(config).pooler.state_dict()
        tensors.update({f"bert.pooler.{name}": value for name, value in pooled.items()})
        save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
    return directory


def _outputs(cls_name: str, directory, pooler: bool) -> list:
    """What transformers' own class computes from ``directory`` on two texts (choices for multiple choice)."""
    import torch

    keywords = {} if pooler or cls_name != "BertModel" else {"add_pooling_layer": False}
    model = getattr(transformers, cls_name).from_pretrained(str(directory), **keywords).eval()
    ids = torch.tensor([[2, 7, 9, 11, 3, 0], [2, 30, 40, 3, 50, 3]])
    mask, types = (ids != 0).long(), torch.tensor([[0] * 6, [0, 0, 0, 0, 1, 1]])
    inputs = dict(input_ids=ids, attention_mask=mask, token_type_ids=types)
    if cls_name == "BertForMultipleChoice":
        inputs = {name: value.unsqueeze(0) for name, value in inputs.items()}  # one question, two choices
    with torch.no_grad():
        out = model(**inputs)
    return [value for value in out.values() if isinstance(value, torch.Tensor)]


@pytest.mark.parametrize(("cls_name", "pooler"), [
    ("BertForMaskedLM", True), ("BertForNextSentencePrediction", True), ("BertForTokenClassification", False),
    ("BertForTokenClassification", True), ("BertForMultipleChoice", True), ("BertModel", False),
    ("BertModel", True), ("BertForPreTraining", True), ("BertForSequenceClassification", True),
    ("BertForQuestionAnswering", True)])  # fmt: skip
def test_the_converted_folder_is_of_its_class_and_computes_as_the_source(tmp_path, cls_name, pooler):
    """convert chose the class from tensor names alone, and knew four: a masked-LM, next-sentence,
    token-classification or multiple-choice checkpoint, or an encoder without a pooler, was refused
    with advice no convert flag could follow, and a token classifier saved with a pooler (transformers
    before 3.0) was written as BertForSequenceClassification, so finetune trained it as one. Now
    config.json's architectures says, the tensors otherwise; transformers' own class computes the
    same numbers, bit for bit, from the converted folder as from the source (the same float32 weights)."""
    source = _saved_by_transformers(cls_name, tmp_path / "source", pooler)
    result = run("convert", str(source), str(tmp_path / "converted"))
    assert result.returncode == 0, result.stderr
    config = json.loads((tmp_path / "converted" / "config.json").read_text())
    assert config["architectures"] == [cls_name]
    if cls_name == "BertForTokenClassification":
        assert config["id2label"] == json.loads((source / "config.json").read_text())["id2label"]
    expected, got = _outputs(cls_name, source, pooler), _outputs(cls_name, tmp_path / "converted", pooler)
    assert len(expected) == len(got) > 0
    for before, after in zip(expected, got):
        assert before.shape == after.shape and bool((before == after).all()), (cls_name, (before - after).abs().max())
    from safetensors import safe_open

    with safe_open(str(source / "model.safetensors"), "pt") as held:
        holds_a_pooler = any("pooler" in name for name in held.keys())
    if holds_a_pooler:  # kept whatever the class builds: a token classifier's (or masked-LM's, QA's) was dropped,
        # and a BertModel read from the folder (verify's reference, transformers') drew a fresh one (verify failed)
        before, after = _outputs("BertModel", source, True), _outputs("BertModel", tmp_path / "converted", True)
        assert len(after) == 2 and all(bool((a == b).all()) for a, b in zip(before, after)), cls_name


@pytest.mark.parametrize(("cls_name", "pooler", "stated", "written"), [
    ("BertForMaskedLM", True, ["BertLMHeadModel"], "BertForMaskedLM"),
    ("BertForNextSentencePrediction", True, None, "BertForNextSentencePrediction"),
    ("BertForTokenClassification", False, None, "BertForTokenClassification"),
    ("BertForTokenClassification", True, None, "BertForSequenceClassification"),
    ("BertModel", False, [], "BertModel"),
    ("BertForPreTraining", True, ["BertForMaskedLM"], "BertForPreTraining")])  # fmt: skip
def test_without_a_class_that_fits_the_tensors_choose(tmp_path, cls_name, pooler, stated, written):
    """A config.json naming no class, one minibert lacks, or one that would drop a head the file holds
    (google-bert/bert-base-uncased says BertForMaskedLM beside its next-sentence head): the heads the
    tensors hold. A classifier without a pooler is a token classifier, one on a pooler a sentence
    classifier (only architectures tells an old token classifier saved with its pooler, or a
    multiple-choice head, from one)."""
    source = _saved_by_transformers(cls_name, tmp_path / "source", pooler)
    config = json.loads((source / "config.json").read_text())
    config["architectures"] = stated
    (source / "config.json").write_text(json.dumps(config))
    assert run("convert", str(source), str(tmp_path / "converted")).returncode == 0
    assert json.loads((tmp_path / "converted" / "config.json").read_text())["architectures"] == [written]


@pytest.mark.parametrize("name", ["tiny_hub/model.safetensors", "uncased_L-2_H-32_A-2/bert_model.ckpt.index",
                                  "uncased_L-2_H-32_A-2/bert_config.json"])  # fmt: skip
def test_a_file_given_as_the_source_is_said_to_be_a_file(tmp_path, name):
    """`convert DIR/model.safetensors OUT` said "no such directory" of a file that is there."""
    source = Path(__file__).parent / "data" / name
    result = run("convert", str(source), str(tmp_path / "out"))
    assert result.returncode == 1 and not (tmp_path / "out").exists()
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"minibert: error: a file, not a directory: {source}; pass its folder: {source.parent} ("), result.stderr
