"""What sentence-transformers 6.2 reads in a model folder beyond the recipe's modules, each compared with
``SentenceTransformer`` on the real all-MiniLM-L6-v2 weights (review r18, where each was missed):

* the tokenizer's ``truncation_side: "left"`` (a long text loses its start), also where the pooling
  leaves the prompt out (then the first tokens of what is kept are left out, as there);
* ``do_lower_case`` on a cased tokenizer with added tokens (they are matched after the lowercasing);
* a folder sentence-transformers 6 saved from such a model (refused: the references disagree on it);
* the prompts ``query`` and ``document`` every SentenceTransformer has, and the names its
  ``encode_query`` / ``encode_document`` / ``output_value="token_embeddings"`` are answered with;
* ``minibert embed`` and ``similarity`` naming the flags of a prompt that fills the max length.

Vectors are compared per text within 1e-5 of the reference vector's norm: the float32 encoders differ by
rounding only (≤ 3e-6 measured), where each defect moved them by 0.1 or more.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from helpers import run_minibert
from minibert import CheckpointError, Embedder
from minibert.errors import TransformersNameError

st = pytest.importorskip("sentence_transformers")
transformers = pytest.importorskip("transformers")
from sentence_transformers.base.modules.transformer import Transformer  # noqa: E402
from sentence_transformers.sentence_transformer.modules import Pooling  # noqa: E402

LONG = "The meeting was cancelled. " + "Background that goes on and on. " * 40 + "Final verdict: acquitted."
TEXTS = [LONG, "A man is eating food.", "Short", LONG.upper()[:400] + " the end"]
LONG_PROMPT = "Represent this sentence for searching relevant passages: "  # 8 pieces


def _same(ours: np.ndarray, theirs: np.ndarray, label: str) -> None:
    ours, theirs = np.atleast_2d(ours).astype(np.float64), np.atleast_2d(theirs).astype(np.float64)
    assert ours.shape == theirs.shape, f"{label}: shape {ours.shape} != {theirs.shape}"
    error = np.abs(ours - theirs).max(axis=1) / np.linalg.norm(theirs, axis=1)
    assert error.max() <= 1e-5, f"{label}: text {int(error.argmax())} differs by {error.max():.3g} of its norm"


def _embed(embedder: Embedder, texts, **options) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "N texts were truncated": sentence-transformers cuts them silently
        return embedder.embed(texts, **options)


def _edit(path: Path, change) -> None:
    values = json.loads(path.read_text())
    change(values)
    path.write_text(json.dumps(values))


def _copy(source: Path, target: Path) -> Path:
    """A model folder's copy whose weights are links to the original (never written through: a test
    that saves weights saves them into a folder of its own)."""
    target.mkdir(parents=True)
    for path in source.iterdir():
        if path.is_dir():
            shutil.copytree(path, target / path.name)
        elif path.suffix in (".safetensors", ".bin"):
            (target / path.name).symlink_to(path.resolve())
        else:
            shutil.copy(path, target / path.name)
    return target


@pytest.fixture(scope="module")
def prompted(tmp_path_factory, minilm_dir) -> Path:
    """MiniLM saved by sentence-transformers with the prompt left out of every pooling mode
    (instructor-style ``include_prompt: false``), prompts ``query`` and ``long``, 32 tokens a text."""
    directory = tmp_path_factory.mktemp("prompted")
    pooling = Pooling(384, pooling_mode=("cls", "mean", "max", "weightedmean", "lasttoken"), include_prompt=False)
    st.SentenceTransformer(modules=[Transformer(str(minilm_dir), max_seq_length=32), pooling], device="cpu",
                           prompts={"query": "query: ", "long": LONG_PROMPT}).save(str(directory))  # fmt: skip
    return directory


# ------------------------------------------------------------------ 1: truncation_side


@pytest.mark.parametrize("folder", ["published", "prompted"])
def test_a_tokenizer_that_cuts_on_the_left_is_followed(folder, minilm_dir, prompted, tmp_path):
    """truncation_side "left" in tokenizer_config.json: sentence-transformers keeps a long text's end;
    the Embedder kept its start (cosine 0.79). With include_prompt false the left cut takes the
    prompt away, and sentence-transformers leaves the first prompt-length tokens of what is kept
    out of the pooling ([CLS] and the text's first pieces): followed as it is."""
    directory = _copy(minilm_dir if folder == "published" else prompted, tmp_path / "model")
    _edit(directory / "tokenizer_config.json", lambda values: values.update(truncation_side="left"))
    reference = st.SentenceTransformer(str(directory), device="cpu")
    assert reference.tokenizer.truncation_side == "left"
    embedder = Embedder.from_pretrained(directory)
    for options in ({}, {"prompt_name": "query"}, {"prompt": "x "}) if folder == "prompted" else ({},):
        _same(_embed(embedder, TEXTS, **options), reference.encode(TEXTS, **options), f"{folder}, {options}")
    assert embedder.embed_with_report(TEXTS).truncated == (2 if folder == "prompted" else 1)  # still counted


# ------------------------------------------------------------------ 2: do_lower_case with added tokens


def _cased_with_lowercase_recipe(minilm_dir: Path, directory: Path) -> Path:
    """MiniLM's folder with a cased tokenizer and sentence_bert_config.json's do_lower_case (weights linked)."""
    _copy(minilm_dir, directory)
    _edit(directory / "tokenizer_config.json", lambda values: values.update(do_lower_case=False))
    _edit(directory / "tokenizer.json", lambda values: values["normalizer"].update(lowercase=False))
    _edit(directory / "sentence_bert_config.json", lambda values: values.update(do_lower_case=True))
    return directory


def test_lowercasing_first_matches_added_tokens_on_the_lowercased_text(minilm_dir, tmp_path):
    """The recipe's do_lower_case on a cased tokenizer that has added tokens: the Embedder lowercased
    the text outside the added tokens' matcher, so "COVID" missed the added ``covid`` and the words of a
    text holding one stayed cased ([UNK]): cosine 0.64. Now, as sentence-transformers' Lowercase in
    front: ordinary added tokens match the lowercased text ("SARSCOV" meets "SarsCov"), special ones
    as typed ("[E1]", not "[e1]")."""
    cased = _cased_with_lowercase_recipe(minilm_dir, tmp_path / "cased")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(cased))
    tokenizer.add_tokens(["covid", "SarsCov"])
    tokenizer.add_tokens(["[E1]"], special_tokens=True)
    bert = transformers.BertModel.from_pretrained(str(cased))
    bert.resize_token_embeddings(len(tokenizer))
    directory = tmp_path / "added"  # new weights: a folder of its own
    directory.mkdir()
    for name in ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
        shutil.copy(cased / name, directory / name)
    shutil.copytree(cased / "1_Pooling", directory / "1_Pooling")
    tokenizer.save_pretrained(str(directory))
    bert.save_pretrained(str(directory))
    texts = ["COVID Cases Rose", "Covid-19 in PARIS", "sarscov and SARSCOV", "[E1] Paris [e1] Rome", "plain Text"]
    reference = st.SentenceTransformer(str(directory), device="cpu")
    embedder = Embedder.from_pretrained(directory)
    for text in texts:
        expected = reference.preprocess([text])["input_ids"][0].tolist()
        assert embedder.tokenizer(text)["input_ids"] == expected, text
    _same(_embed(embedder, texts), reference.encode(texts), "cased + do_lower_case + added tokens")


def test_the_lowercasing_copy_is_a_tokenizer_of_its_own(minilm_dir):
    """The copy leaves the tokenizer as it was (the Embedder's caller keeps a cased one), and has its own
    vocabulary: a token added to one is not in the other (the shallow copy shared the dict, not the
    matcher). Two added tokens that the lowercasing makes one spelling are refused, as a tokenizer with
    do_basic_tokenize=False (whose words nothing would lowercase)."""
    from minibert import BertTokenizer

    cased = BertTokenizer(minilm_dir / "vocab.txt", do_lower_case=False)
    cased.add_tokens(["FooBar"])
    lowered = cased.lowercasing_first()
    assert (cased.tokenize("FOOBAR FooBar"), lowered.tokenize("FOOBAR FooBar")) == (["[UNK]", "FooBar"],
                                                                                    ["foobar", "foobar"])  # fmt: skip
    lowered.add_tokens(["newone"])
    assert "newone" in lowered.vocab and "newone" not in cased.vocab and cased.tokenize("newone") == ["new", "##one"]
    cased.add_tokens(["foobar"])
    with pytest.raises(ValueError, match=r"^lowercasing the text first \(do_lower_case\): 'foobar' and the added "
                       "token 'FooBar' are both 'foobar' once normalized") as caught:  # fmt: skip
        cased.lowercasing_first()
    assert type(caught.value) is ValueError  # the tokenizer's tokens, not a file: no CheckpointError
    with pytest.raises(NotImplementedError, match="do_basic_tokenize=False"):
        BertTokenizer(minilm_dir / "vocab.txt", do_lower_case=False, do_basic_tokenize=False).lowercasing_first()


# ------------------------------------------------------------------ 3: sentence-transformers 6's save of do_lower_case


def test_a_folder_sentence_transformers_6_saved_with_do_lower_case_is_refused_with_both_readings(minilm_dir, tmp_path):
    """sentence-transformers 6 saves do_lower_case as a Lowercase step in tokenizer.json and leaves
    tokenizer_config.json's do_lower_case false: reloading it, sentence-transformers 6.2 (through
    transformers 5) does not lowercase, where minibert did (0.20 apart). The references disagree
    (tokenizers lowercases), so the folder is refused naming both files; each edit the error gives
    makes minibert and sentence-transformers agree, on a reading that differs from the other's."""
    source = _cased_with_lowercase_recipe(minilm_dir, tmp_path / "source")
    directory = tmp_path / "saved"
    st.SentenceTransformer(str(source), device="cpu").save(str(directory))
    normalizer = json.loads((directory / "tokenizer.json").read_text())["normalizer"]
    assert normalizer["normalizers"][0] == {"type": "Lowercase"}
    assert "do_lower_case" not in json.loads((directory / "sentence_bert_config.json").read_text())
    with pytest.raises(CheckpointError) as caught:
        Embedder.from_pretrained(directory)
    assert f"{directory / 'tokenizer.json'} lowercases first" in str(caught.value)
    assert f"{directory / 'tokenizer_config.json'} says do_lower_case false" in str(caught.value)
    cased, lowered = shutil.copytree(directory, tmp_path / "cased"), shutil.copytree(directory, tmp_path / "lowered")
    _edit(cased / "tokenizer.json", lambda values: values.update(normalizer=values["normalizer"]["normalizers"][1]))
    _edit(lowered / "tokenizer_config.json", lambda values: values.update(do_lower_case=True, strip_accents=False))
    texts = ["HELLO World", "Cases Rose in Zürich", "already lower"]
    readings = []
    for folder in (cased, lowered):
        reference = st.SentenceTransformer(str(folder), device="cpu")
        readings.append(reference.encode(texts))
        _same(_embed(Embedder.from_pretrained(folder), texts), readings[-1], folder.name)
    assert np.abs(readings[0][0] - readings[1][0]).max() > 0.05  # two readings indeed


# ------------------------------------------------------------------ 4 and 7: prompts query and document


def test_every_model_has_the_prompts_query_and_document(minilm_dir, tmp_path):
    """sentence-transformers 6 starts every SentenceTransformer from the prompts {"query": "",
    "document": ""} and lets a folder's replace or extend them; minibert refused prompt_name="query"
    on every model without saved prompts (and `minibert embed --prompt-name query` exited 2)."""
    e5_like = _copy(minilm_dir, tmp_path / "e5")
    (e5_like / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "passage"}))  # fmt: skip
    default_only = _copy(minilm_dir, tmp_path / "default_only")
    (default_only / "config_sentence_transformers.json").write_text(json.dumps({"default_prompt_name": "document"}))
    plain = _copy(minilm_dir, tmp_path / "plain")  # no modules.json: a plain BERT, a SentenceTransformer there too
    (plain / "modules.json").unlink()
    loaded = {}  # each folder's (reference, embedder), the published one's read again below
    for directory in (minilm_dir, e5_like, default_only, plain):
        reference, embedder = loaded[directory] = (st.SentenceTransformer(str(directory), device="cpu"),
                                                   Embedder.from_pretrained(directory))  # fmt: skip
        assert embedder.recipe.prompts == reference.prompts and list(embedder.recipe.prompts) == list(reference.prompts)
        for prompt_name in (None, *reference.prompts):
            _same(_embed(embedder, TEXTS[1:], prompt_name=prompt_name),
                  reference.encode(TEXTS[1:], prompt_name=prompt_name), f"{directory.name}, {prompt_name}")  # fmt: skip
    with pytest.raises(ValueError, match=r"not one of this model's prompts \('query', 'document'\)"):
        loaded[minilm_dir][1].embed("x", prompt_name="passage")
    result = run_minibert("embed", "A man is eating food.", "--model", str(minilm_dir), "--prompt-name", "query",
                          "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = loaded[minilm_dir][0].encode_query("A man is eating food.")
    _same(np.array(json.loads(result.stdout)["embedding"]), expected, "minibert embed --prompt-name query")


def test_encode_query_and_encode_document_name_the_embed_call_that_equals_them(prompted, minilm_dir, tmp_path):
    """embedder.encode_query was a bare AttributeError (docs/migrating.md promises every
    sentence-transformers spelling names minibert's); the call it names gives encode_query's and
    encode_document's vectors, on a model with query and document prompts and on one whose folder
    has a "passage" prompt (encode_document still takes "document" there, as sentence-transformers 6 does)."""
    prompts = _copy(minilm_dir, tmp_path / "query_document")
    (prompts / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: ", "document": "passage: "}, "default_prompt_name": "query"}))  # fmt: skip
    e5_like = _copy(minilm_dir, tmp_path / "e5")
    (e5_like / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: ", "passage": "passage: "}}))  # fmt: skip
    for directory in (prompts, e5_like, prompted):
        reference = st.SentenceTransformer(str(directory), device="cpu")
        embedder = Embedder.from_pretrained(directory)
        for method, prompt_name in (("encode_query", "query"), ("encode_document", "document")):
            with pytest.raises(TransformersNameError) as caught:
                getattr(embedder, method)(TEXTS)
            assert str(caught.value).endswith(f'minibert\'s is embedder.embed(texts, prompt_name="{prompt_name}")')
            _same(_embed(embedder, TEXTS, prompt_name=prompt_name), getattr(reference, method)(TEXTS),
                  f"{directory.name}: {method}")  # fmt: skip


def test_token_vectors_with_the_prompt_as_the_output_value_message_says(minilm_dir, tmp_path):
    """encode(text, output_value="token_embeddings") puts the model's default prompt before the text,
    which embed_tokens does not (0.56 apart on every token): the message and docs/migrating.md now give
    the call with the prompt, and it equals sentence-transformers' tokens and vectors."""
    directory = _copy(minilm_dir, tmp_path / "model")
    (directory / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: "}, "default_prompt_name": "query"}))  # fmt: skip
    reference = st.SentenceTransformer(str(directory), device="cpu")
    embedder = Embedder.from_pretrained(directory)
    with pytest.raises(TypeError, match=r"embed_tokens\(embedder\.recipe\.prompt_for\(prompt, prompt_name\) \+ text\)"):
        embedder.embed("A man is eating food.", output_value="token_embeddings")
    for prompt_name in (None, "document"):
        expected = reference.encode("A man is eating food.", output_value="token_embeddings", prompt_name=prompt_name)
        tokens, vectors = embedder.embed_tokens(embedder.recipe.prompt_for(None, prompt_name) + "A man is eating food.")
        assert len(tokens) == len(expected) == (10 if prompt_name is None else 8)
        _same(vectors, expected.numpy(), f"token vectors, prompt_name={prompt_name}")


# ------------------------------------------------------------------ 5 and 6: the commands' prompt errors


def test_similarity_says_a_prompt_that_fills_max_length_with_its_flags(prompted):
    """`minibert similarity` let the library's error through (exit 1, "max_length=8", "long_text='window'"),
    where `minibert embed` names its flags (exit 2): now both do."""
    message = ("minibert: error: --prompt-name long: the prompt 'Represent this sentence for searching relevant "
               "passages: ' is 9 tokens with [CLS], and --max-length 8 holds 7 before [SEP]: no token of a text is "
               "left to pool (this model's pooling leaves the prompt out); give a larger --max-length, a shorter "
               "prompt or --long-text window")  # fmt: skip
    for command in (["embed", "x", "--json"], ["similarity", "x", "y"]):
        result = run_minibert(*command, "--model", str(prompted), "--prompt-name", "long", "--max-length", "8")
        assert result.returncode == 2 and result.stdout == "", (command, result)
        assert result.stderr.strip().splitlines()[-1] == message, command


def test_the_models_default_prompt_is_named_as_such(prompted, tmp_path):
    """Without --prompt or --prompt-name the prompt is the model's default, yet the error blamed
    --prompt, and did not say that --prompt "" turns the default off."""
    directory = _copy(prompted, tmp_path / "model")
    _edit(directory / "config_sentence_transformers.json", lambda values: values.update(default_prompt_name="long"))
    result = run_minibert("embed", "x", "--model", str(directory), "--max-length", "8", "--json")
    assert result.returncode == 2, result
    assert result.stderr.strip().splitlines()[-1] == (
        "minibert: error: the model's default prompt 'long' (default_prompt_name in config_sentence_transformers"
        ".json): the prompt 'Represent this sentence for searching relevant passages: ' is 9 tokens with [CLS], and "
        "--max-length 8 holds 7 before [SEP]: no token of a text is left to pool (this model's pooling leaves the "
        'prompt out); give a larger --max-length, another prompt (--prompt-name, or --prompt "" for none) or '
        "--long-text window"
    )
    result = run_minibert("embed", "x", "--model", str(directory), "--max-length", "8", "--json", "--prompt", "")
    assert result.returncode == 0, result.stderr
    reference = st.SentenceTransformer(str(directory), device="cpu")
    reference.max_seq_length = 8
    _same(np.array(json.loads(result.stdout)["embedding"]), reference.encode("x", prompt=""), '--prompt ""')


def test_an_older_sentence_transformers_folder_with_the_bert_in_0_transformer_says_why_it_is_refused(
    minilm_dir, tmp_path
):
    """modules.json's Transformer at "0_Transformer" (older sentence-transformers saves, which 6.2 loads):
    minibert loaded the tokenizer first and said "has neither vocab.txt nor tokenizer.json", as if the
    model were broken. modules.json is read first now: the documented CheckpointError names the file,
    the path and the move that makes the folder loadable."""
    directory = tmp_path / "old"
    sub = directory / "0_Transformer"
    sub.mkdir(parents=True)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "config.json", "tokenizer.json",
                 "sentence_bert_config.json"):  # fmt: skip
        shutil.copy(minilm_dir / name, sub)
    (sub / "model.safetensors").symlink_to((minilm_dir / "model.safetensors").resolve())
    shutil.copytree(minilm_dir / "1_Pooling", directory / "1_Pooling")
    modules = [
        {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (directory / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert st.SentenceTransformer(str(directory), device="cpu").encode(["hello"]).shape == (1, 384)
    message = r"modules.json: the Transformer module's path is '0_Transformer' .*move that folder's files to the root"
    with pytest.raises(CheckpointError, match=message):
        Embedder.from_pretrained(directory)
    result = run_minibert("embed", "hello", "--model", str(directory), "--json")
    assert result.returncode == 1 and "the Transformer module's path is '0_Transformer'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_modules_json_is_read_once_per_load(minilm_dir, monkeypatch):
    """load_parts read modules.json first (to refuse a pipeline before "no vocab.txt"), then the recipe
    read and checked it again; the recipe now takes what load_parts read."""
    from minibert.embedding import recipe

    reads = []
    real_read_json = recipe._read_json
    monkeypatch.setattr(recipe, "_read_json", lambda path: reads.append(Path(path).name) or real_read_json(path))
    Embedder.from_pretrained(minilm_dir)
    assert reads.count("modules.json") == 1, reads


# ------------------------------------------------------------------ sentence-transformers 6.3's task lengths


def test_query_length_and_document_length_cut_encode_query_and_encode_document(minilm_dir, tmp_path):
    """sentence_bert_config.json's ``query_length`` / ``document_length`` (sentence-transformers 6.3):
    ``encode_query`` cuts a text there, and minibert's name for it, ``embed(prompt_name="query")``,
    did not read them (cosine 0.58 on a long query). A max_length given wins, as a caller's does
    there; plain ``embed`` / ``encode`` keep the model's length."""
    directory = _copy(minilm_dir, tmp_path / "lengths")
    _edit(directory / "sentence_bert_config.json", lambda values: values.update(query_length=8, document_length=10))
    reference, embedder = st.SentenceTransformer(str(directory), device="cpu"), Embedder.from_pretrained(directory)
    _same(_embed(embedder, TEXTS, prompt_name="query"), reference.encode_query(TEXTS), "query_length")
    _same(_embed(embedder, TEXTS, prompt_name="document"), reference.encode_document(TEXTS), "document_length")
    _same(_embed(embedder, TEXTS), reference.encode(TEXTS), "no task: the model's length")
    _same(_embed(embedder, TEXTS, prompt_name="query", max_length=64), _embed(embedder, TEXTS, max_length=64),
          "a max_length given wins")  # fmt: skip
    assert np.abs(_embed(embedder, TEXTS[:1], prompt_name="query") - reference.encode(TEXTS[:1])).max() > 0.05


@pytest.mark.parametrize("values, says", [({"query_length": 2}, "query_length must be an int ≥ 3 or null, got 2"),
                                          ({"document_length": "long"}, "document_length must be an int"),
                                          ({"query_expansion": {"strategy": "fixed", "length": 32}},
                                           "query_expansion .*is not implemented")])  # fmt: skip
def test_task_settings_minibert_does_not_follow_are_refused(minilm_dir, tmp_path, values, says):
    directory = _copy(minilm_dir, tmp_path / "settings")
    _edit(directory / "sentence_bert_config.json", lambda config: config.update(values))
    with pytest.raises(CheckpointError, match=rf"sentence_bert_config.json: {says}"):
        Embedder.from_pretrained(directory)


def test_a_max_seq_length_beyond_the_positions_is_cut_there_and_said(minilm_dir, tmp_path, caplog):
    """max_seq_length 1024 on a 512-position model: sentence-transformers fails on a longer text, the
    CrossEncoder cuts at the positions with a warning; the Embedder cut there in silence."""
    directory = _copy(minilm_dir, tmp_path / "long")
    _edit(directory / "sentence_bert_config.json", lambda values: values.update(max_seq_length=1024))
    with caplog.at_level("WARNING", logger="minibert"):
        embedder = Embedder.from_pretrained(directory)
    assert embedder.max_length == 512
    assert "recipe says max_seq_length 1024, more than its 512 positions" in caplog.text
    reference = st.SentenceTransformer(str(directory), device="cpu")
    _same(_embed(embedder, TEXTS[1:3]), reference.encode(TEXTS[1:3]), "shorter texts as there")
