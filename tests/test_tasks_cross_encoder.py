"""minibert.CrossEncoder and minibert.rerank against sentence-transformers' ``CrossEncoder.predict`` and
``rank`` on the same folder: folders as each version of sentence-transformers saves them, several
labels, predict's and rank's keywords, the folder's prompts and processing_kwargs, its activation,
max_length, settings that cannot be followed (refused), the one model kept per folder and read
again when the folder is rewritten, and no progress bar below the log level.

Tolerance: the same order; scores within 1e-5, the model parity bound (logits within 1e-5, fp32),
which a sigmoid does not enlarge.
"""

from __future__ import annotations

import importlib
import json
import logging
import shutil

import numpy as np
import pytest
import torch

import minibert
from helpers import run_minibert
from minibert.errors import CheckpointError, TaskArgumentError
from task_checkpoints import (
    DOCUMENTS,
    SCORE_TOLERANCE,
    TEXTS,
    cross_encoder_dir,
    minilm_tokenizer_dir,
    resaved_cross_encoder,
    same,
)

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("variant", ["saved", "no st config", "legacy identity"])
def test_rerank_is_cross_encoder_rank(variant, make, tmp_path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, variant)
    theirs = sentence_transformers.CrossEncoder(str(directory))
    ours = minibert.CrossEncoder(directory)
    assert ours.max_length == ours.max_seq_length == theirs.max_seq_length == 48  # the third document is cut there
    query = "How many people live in Berlin?"
    expected = theirs.rank(query, DOCUMENTS, return_documents=True)
    same(ours.rank(query, DOCUMENTS, return_documents=True), expected, variant)
    same(minibert.rerank(query, DOCUMENTS, model=directory, top_k=2), [
        {key: value for key, value in row.items() if key != "text"} for row in expected[:2]], variant)  # fmt: skip
    pairs = [[query, document] for document in DOCUMENTS]
    np.testing.assert_allclose(ours.predict(pairs), theirs.predict(pairs), atol=SCORE_TOLERANCE, rtol=0)
    assert np.isclose(ours.predict(pairs[0]), theirs.predict(pairs[0]), atol=SCORE_TOLERANCE, rtol=0)
    scores = ours.predict(pairs)
    assert scores.max() - scores.min() > 0.1, "the documents' scores should differ: the order tests something"
    if variant == "legacy identity":  # the raw logit: outside [0, 1] for this sharpened head
        assert ours.activation_fn.endswith("Identity") and max(abs(scores)) > 1
    ours.max_seq_length = theirs.max_seq_length = 8  # sentence-transformers 6's name, set: pairs cut shorter
    np.testing.assert_allclose(ours.predict(pairs), theirs.predict(pairs), atol=SCORE_TOLERANCE, rtol=0)
    assert not np.allclose(ours.predict(pairs), scores), "cut at 8 tokens, the scores should change"


def test_without_modules_json_the_cross_encoder_reads_config_json_alone(make, tmp_path):
    """sentence-transformers reads a cross-encoder's own files (sentence_bert_config.json's length,
    config_sentence_transformers.json's activation and prompts) only beside a modules.json; minibert
    read them anyway, and cut long pairs at another length (0.53 against 0.56), without a word."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, "saved")
    (directory / "modules.json").unlink()
    (directory / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16}))
    settings = directory / "config_sentence_transformers.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "prompts": {"q": "query: "},
                                    "default_prompt_name": "q", "activation_fn": "torch.nn.modules.linear.Identity"}))
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    assert ours.max_length == theirs.max_length != 16  # the tokenizer's
    assert ours.activation_fn.endswith("Sigmoid") and type(theirs.activation_fn).__name__ == "Sigmoid"
    assert (ours.default_prompt_name, theirs.default_prompt_name) == (None, None)
    pairs = [["How many people live in Berlin?", document] for document in DOCUMENTS]
    np.testing.assert_allclose(ours.predict(pairs), theirs.predict(pairs), atol=SCORE_TOLERANCE, rtol=0)


def test_cross_encoder_predict_refuses_a_plain_string(make, tmp_path):
    """predict("") returned an empty array without a word, and predict("ab") named a pair 'a'."""
    ranker = minibert.CrossEncoder(cross_encoder_dir(make, tmp_path, "saved"))
    for text in ("", "ab", "a query and a document"):
        with pytest.raises(TypeError, match="takes text pairs, \\[query, document\\] or a list of them, got a str"):
            ranker.predict(text)


def test_rerank_keeps_one_model_per_folder_and_four_at_most(make, tmp_path, monkeypatch):
    """rerank kept every model it was called with, keyed by the path's spelling: one folder five times
    (``ce``, its absolute path, with ``/`` and ``//`` after it, ``device=None`` and ``"cpu"``), never freed."""
    module = importlib.import_module("minibert.tasks.rerank")  # (minibert.tasks.rerank is also the function)
    directory = cross_encoder_dir(make, tmp_path, "saved")
    module._cross_encoder_cached.cache_clear()
    monkeypatch.chdir(directory.parent)
    for model, device in [(directory, None), (directory, "cpu"), (f"{directory}/", None), (f"{directory}//", None),
                          (directory.name, None)]:  # fmt: skip
        minibert.rerank("q", ["a", "b"], model=model, device=device)
    assert module._cross_encoder_cached.cache_info().currsize == 1
    assert module._cross_encoder_cached.cache_info().maxsize == 4


def test_a_folder_rewritten_between_two_calls_is_read_again(make, tmp_path):
    """The tasks kept a folder's model under its path alone: after ``save_pretrained`` into the same
    folder (a second training run), classify and rerank went on giving the first model's numbers.
    Each call now compares with a reference loaded fresh from what the folder holds then."""
    folder = tmp_path / "run"
    shutil.copytree(make("BertForSequenceClassification", scale=5.0), folder)

    def rewrite(scale: float) -> None:  # the classifier's weights changed, the file saved over
        reference = transformers.BertForSequenceClassification.from_pretrained(str(folder))
        with torch.no_grad():
            reference.classifier.weight.mul_(scale)
        reference.save_pretrained(folder)

    for step in range(3):  # the first call, then after a rewrite, then after a rewrite of the same size
        if step:
            rewrite(3.0 if step == 1 else -1.0)
        theirs = transformers.pipeline("text-classification", model=str(folder))(TEXTS[0], top_k=None)
        same(minibert.classify(TEXTS[0], model=folder, top_k=None), theirs, f"classify after {step} rewrites")
    # the tokenizer's files are part of what is read: cased from now on ("Hello" becomes other pieces)
    config_file = folder / "tokenizer_config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "do_lower_case": False}))
    (folder / "tokenizer.json").unlink()  # (its normalizer would still lowercase): the vocabulary from vocab.txt
    shutil.copy(minilm_tokenizer_dir() / "vocab.txt", folder / "vocab.txt")
    theirs = transformers.pipeline("text-classification", model=str(folder))("Hello BERT", top_k=None)
    assert transformers.AutoTokenizer.from_pretrained(str(folder)).tokenize("Hello BERT") != ["hello", "bert"]
    same(minibert.classify("Hello BERT", model=folder, top_k=None), theirs, "classify after the tokenizer changed")


def test_rerank_reads_a_rewritten_folder_again(make, tmp_path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, "saved")
    before = minibert.rerank("How many people live in Berlin?", DOCUMENTS, model=directory)
    reference = sentence_transformers.CrossEncoder(str(directory))
    with torch.no_grad():
        reference.model.classifier.weight.mul_(-1.0)  # the order turned round
    reference.save_pretrained(str(directory))
    theirs = sentence_transformers.CrossEncoder(str(directory)).rank("How many people live in Berlin?", DOCUMENTS)
    ours = minibert.rerank("How many people live in Berlin?", DOCUMENTS, model=directory)
    assert [row["corpus_id"] for row in theirs] != [row["corpus_id"] for row in before]
    same(ours, theirs, "rerank after the folder was saved over")


def test_a_folder_is_kept_while_only_a_run_log_changes(make, tmp_path):
    """What is not read by a load (a run's metrics.jsonl growing) does not make the folder be read again."""
    from minibert.tasks import loading

    folder = tmp_path / "run"
    shutil.copytree(make("BertForSequenceClassification", scale=5.0), folder)
    minibert.classify("a", model=folder)
    misses = loading._load_cached.cache_info().misses
    (folder / "metrics.jsonl").write_text('{"step": 1}\n')
    minibert.classify("a", model=folder)
    assert loading._load_cached.cache_info().misses == misses

def test_cross_encoder_with_several_labels_predicts_rows(make, tmp_path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, "three labels")
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    pairs = [["a man eats", "a person eats"], ["a man eats", "nobody eats"]]
    for arguments in ({}, {"apply_softmax": True}):
        np.testing.assert_allclose(ours.predict(pairs, **arguments), theirs.predict(pairs, **arguments),
                                   atol=SCORE_TOLERANCE, rtol=0)  # fmt: skip
    with pytest.raises(ValueError, match="rank needs a model with one output"):
        ours.rank("q", ["d"])


@pytest.mark.parametrize("variant", ["saved", "three labels"])
def test_cross_encoder_predict_takes_sentence_transformers_keywords(variant, make, tmp_path, capsys):
    """sentence-transformers 6's predict keywords, each giving what it gives (type, shape, dtype,
    values), for a list of pairs, one pair and no pair: they were a TypeError 'unexpected keyword'."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, variant)
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    query = "How many people live in Berlin?"
    pairs = [[query, document] for document in DOCUMENTS]

    def same_as_theirs(got, want, label):
        assert type(got) is type(want), f"{label}: {type(got).__name__}, theirs {type(want).__name__}"
        if isinstance(want, list):
            assert len(got) == len(want), label
            for a, b in zip(got, want):
                same_as_theirs(a, b, label)
            return
        assert got.shape == want.shape and got.dtype == want.dtype, (label, got.shape, want.shape, got.dtype)
        if isinstance(want, torch.Tensor):
            assert got.device == want.device, label
            got, want = got.numpy(), want.numpy()
        np.testing.assert_allclose(got, want, atol=SCORE_TOLERANCE, rtol=0, err_msg=label)

    for arguments in (
        {"convert_to_tensor": True},
        {"convert_to_numpy": False},
        {"convert_to_numpy": True},
        {"convert_to_numpy": False, "convert_to_tensor": True},
        {"show_progress_bar": False},
        {"convert_to_tensor": True, "apply_softmax": True},
        {"device": "cpu", "prompt": None},
    ):
        # (numpy arrays of texts, as a pandas frame's .values gives them: refused as "not two texts")
        for kind, given in [("a list", pairs), ("one pair", pairs[0]), ("a 2-D array", np.array(pairs)),
                            ("a 1-D array", np.array(pairs)[0]), ("an object array", np.array(pairs, dtype=object))]:
            label = f"{arguments}, {kind}"
            same_as_theirs(ours.predict(given, **arguments), theirs.predict(given, **arguments), label)
    assert list(ours.predict([], convert_to_tensor=True)) == list(theirs.predict([], convert_to_tensor=True)) == []
    assert ours.predict([], convert_to_numpy=False) == theirs.predict([], convert_to_numpy=False) == []
    capsys.readouterr()
    ours.predict(pairs, show_progress_bar=True, batch_size=2)
    assert "Batches" in capsys.readouterr().err  # tqdm's bar, as sentence-transformers shows it
    same_as_theirs(ours.predict(sentences=pairs), theirs.predict(pairs), "sentences=, the older name of inputs")
    same_as_theirs(ours.predict(inputs=pairs), theirs.predict(inputs=pairs), "inputs=")
    for name, value, refused in [
        ("prompt_name", "query", "is not one of this model's prompts"),
        ("pool", {}, "a pool of processes"),
        ("chunk_size", 8, "uses none"),
        ("device", ["cpu", "cpu"], "a pool of processes"),
    ]:
        with pytest.raises(ValueError, match=refused):
            ours.predict(pairs, **{name: value})
    with pytest.raises(TypeError, match="unexpected keyword argument 'processing_kwargs'"):
        ours.predict(pairs, processing_kwargs={"text": {"max_length": 16}})


def test_cross_encoder_rank_takes_the_keywords_predict_takes(make, tmp_path):
    """sentence-transformers 6's rank takes predict's activation_fn, show_progress_bar, device, pool
    and chunk_size; minibert's rank took none of them (Python's bare TypeError)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, "saved")
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    query = "How many people live in Berlin?"
    for arguments in ({"activation_fn": torch.nn.Identity()}, {"show_progress_bar": False}, {"device": "cpu"},
                      {"pool": None, "chunk_size": None, "top_k": 3, "return_documents": True}):  # fmt: skip
        same(ours.rank(query, DOCUMENTS, **arguments), theirs.rank(query, DOCUMENTS, **arguments), str(arguments))
    same(ours.rank(query, np.array(DOCUMENTS)), theirs.rank(query, np.array(DOCUMENTS)), "documents as an array")
    for name, value, refused in [("pool", {}, "a pool of processes"), ("chunk_size", 8, "uses none")]:
        with pytest.raises(ValueError, match=refused):
            ours.rank(query, DOCUMENTS, **{name: value})


def test_cross_encoder_settings_that_cannot_be_followed_are_refused(make, tmp_path, caplog):
    directory = cross_encoder_dir(make, tmp_path, "saved")
    settings = directory / "config_sentence_transformers.json"
    values = json.loads(settings.read_text())
    for activation, outcome in [("torch.nn.modules.activation.Softmax", "is not implemented"),
                                (["torch.nn.Sigmoid"], "must be a class path"),
                                ("my_package.Scorer", None)]:  # fmt: skip
        settings.write_text(json.dumps({**values, "activation_fn": activation}))
        if outcome is None:  # not trusted, as in sentence-transformers: passed over, with a warning
            with caplog.at_level(logging.WARNING, logger="minibert"):
                assert minibert.CrossEncoder(directory).activation_fn.endswith("Sigmoid")
            assert "is not a torch class and is not trusted" in caplog.text
        else:
            with pytest.raises(CheckpointError, match=outcome):
                minibert.CrossEncoder(directory)
    shutil.copy(directory / "config.json", directory / "sentence_bert_config.json")
    (directory / "sentence_bert_config.json").write_text('{"max_seq_length": "long"}')
    settings.write_text(json.dumps(values))
    with pytest.raises(CheckpointError, match="max_seq_length must be an int"):
        minibert.CrossEncoder(directory)
    # past the model's positions: cut there, with a warning naming the folder's file, as the Embedder does
    # (sentence-transformers fails on a longer pair; a shorter one scores the same). It was refused here,
    # and capped in silence by the Embedder; never a --max-length the user did not give (that was exit 2).
    (directory / "sentence_bert_config.json").write_text('{"max_seq_length": 100000}')
    limit = minibert.AutoConfig.from_pretrained(directory).max_position_embeddings
    with caplog.at_level(logging.WARNING, logger="minibert"):
        assert minibert.CrossEncoder(directory).max_length == limit
    assert f"sentence_bert_config.json: max_seq_length 100000 is more than the model's {limit} positions" in caplog.text
    result = run_minibert("rerank", "--model", str(directory), "q", "doc one")
    assert result.returncode == 0 and "--max-length" not in result.stderr, result.stderr


@pytest.mark.parametrize("config_json", ["nested", "legacy", "nested null", "none"])
def test_an_untrusted_activation_falls_back_as_sentence_transformers_falls_back(make, tmp_path, config_json):
    """config_sentence_transformers.json naming a class outside torch (untrusted): sentence-transformers
    passes it over for config.json's (``sentence_transformers.activation_fn``, else the older
    ``sbert_ce_default_activation_function``; a null there is the default, the older field unread),
    then the default; minibert went straight to the default (Sigmoid where config.json said Identity:
    every score squashed)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, "saved")
    settings = directory / "config_sentence_transformers.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "activation_fn": "my_package.Scorer"}))
    config = json.loads((directory / "config.json").read_text())
    config.pop("sentence_transformers", None)
    identity = "torch.nn.modules.linear.Identity"
    config.update({"nested": {"sentence_transformers": {"activation_fn": identity}},
                   "legacy": {"sbert_ce_default_activation_function": identity},
                   "nested null": {"sentence_transformers": {"activation_fn": None},
                                   "sbert_ce_default_activation_function": identity},
                   "none": {}}[config_json])  # fmt: skip
    (directory / "config.json").write_text(json.dumps(config))
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    pairs = [["How many people live in Berlin?", document] for document in DOCUMENTS]
    expected = "Identity" if config_json in ("nested", "legacy") else "Sigmoid"
    assert type(theirs.activation_fn).__name__ == expected and ours.activation_fn.endswith(expected)
    same(ours.predict(pairs).tolist(), theirs.predict(pairs).tolist(), config_json)


def test_cross_encoder_follows_the_folders_prompts(make, tmp_path):
    """A folder saved with prompts and a default prompt: sentence-transformers puts the default
    prompt before each pair's first text; minibert scored the pairs without it (every score and
    the order differed), in predict, rank, rerank and `minibert rerank` alike."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    prompts = {"web": "Instruct: judge the relevance of a web page. Query: ", "short": "q: "}
    directory = resaved_cross_encoder(cross_encoder_dir(make, tmp_path, "saved"), tmp_path / "prompted",
                                       prompts=prompts, default_prompt_name="web")  # fmt: skip
    assert json.loads((directory / "config_sentence_transformers.json").read_text())["default_prompt_name"] == "web"
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    query = "How many people live in Berlin?"
    pairs = [[query, document] for document in DOCUMENTS]
    for arguments in ({}, {"prompt_name": "short"}, {"prompt": "Find the population: "}, {"prompt": ""}):
        np.testing.assert_allclose(ours.predict(pairs, **arguments), theirs.predict(pairs, **arguments),
                                   atol=SCORE_TOLERANCE, rtol=0, err_msg=str(arguments))  # fmt: skip
        same(ours.rank(query, DOCUMENTS, **arguments), theirs.rank(query, DOCUMENTS, **arguments), str(arguments))
    plain = minibert.CrossEncoder(cross_encoder_dir(make, tmp_path, "saved")).predict(pairs)
    assert np.abs(ours.predict(pairs) - plain).max() > 1e-3, "the prompt should change the scores"
    same(minibert.rerank(query, DOCUMENTS, model=directory), theirs.rank(query, DOCUMENTS), "rerank()")
    result = run_minibert("rerank", "--model", str(directory), query, *DOCUMENTS[:3])
    assert result.returncode == 0, result.stderr
    rows = {row["index"]: row["score"] for row in map(json.loads, result.stdout.splitlines())}
    expected = theirs.predict(pairs[:3])
    assert max(abs(rows[index] - expected[index]) for index in rows) <= SCORE_TOLERANCE
    with pytest.warns(UserWarning, match="prompt_name is ignored in favor of prompt"):  # sentence-transformers logs it
        np.testing.assert_allclose(ours.predict(pairs, prompt="a", prompt_name="web"),
                                   theirs.predict(pairs, prompt="a", prompt_name="web"), atol=SCORE_TOLERANCE, rtol=0)


@pytest.mark.parametrize(
    ("processing_kwargs", "query", "documents"),
    [({"text": {"max_length": 12}}, "How many people live in Berlin? " * 3, DOCUMENTS),
     ({"common": {"truncation": "only_second", "max_length": 16}}, "How many people live in Berlin?", DOCUMENTS),
     ({"text": {"truncation": "only_first", "max_length": 400}, "common": {"max_length": 20}},
      "How many people live in Berlin? " * 3, [d for d in DOCUMENTS if len(d) < 50])],  # the query can be cut
)  # fmt: skip
def test_cross_encoder_follows_processing_kwargs(make, tmp_path, processing_kwargs, query, documents):
    """sentence-transformers 6 calls the tokenizer with the folder's processing_kwargs (``common``
    over ``text``): its max_length cut the pairs at 12 tokens where minibert read 48, without a word."""
    sentence_transformers = pytest.importorskip("sentence_transformers")

    def change(model):
        model[0].processing_kwargs = processing_kwargs

    directory = resaved_cross_encoder(cross_encoder_dir(make, tmp_path, "saved"), tmp_path / "pk", change)
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    pairs = [[query, document] for document in documents]
    np.testing.assert_allclose(ours.predict(pairs), theirs.predict(pairs), atol=SCORE_TOLERANCE, rtol=0)
    full = minibert.CrossEncoder(cross_encoder_dir(make, tmp_path, "saved")).predict(pairs)
    assert np.abs(ours.predict(pairs) - full).max() > 1e-3, "cut shorter, the scores should change"


def test_cross_encoder_refuses_processing_kwargs_it_does_not_follow(make, tmp_path):
    directory = cross_encoder_dir(make, tmp_path, "saved")
    path = directory / "sentence_bert_config.json"
    values = json.loads(path.read_text())
    for processing_kwargs, field in [
        ({"text": {"padding": "max_length"}}, "processing_kwargs.text.padding"),
        ({"chat_template": {"x": 1}}, "processing_kwargs.chat_template"),
        ({"common": {"truncation": "do_not_truncate"}}, "processing_kwargs.common.truncation"),
    ]:
        path.write_text(json.dumps({**values, "processing_kwargs": processing_kwargs}))
        with pytest.raises(CheckpointError, match=rf"sentence_bert_config\.json: {field}"):
            minibert.CrossEncoder(directory)
    path.write_text(json.dumps({**values, "processing_kwargs": {"text": {"max_length": 100000}}}))  # cut, and said
    assert minibert.CrossEncoder(directory).max_length == minibert.AutoConfig.from_pretrained(
        directory).max_position_embeddings  # fmt: skip


def test_cross_encoder_activation_by_another_path_of_its_class(make, tmp_path):
    """sentence-transformers imports the activation's path: torch.nn.Identity is
    torch.nn.modules.linear.Identity (minibert refused it as not implemented)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, "saved")
    settings = directory / "config_sentence_transformers.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "activation_fn": "torch.nn.Identity"}))
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    pairs = [["How many people live in Berlin?", document] for document in DOCUMENTS]
    assert ours.activation_fn == "torch.nn.modules.linear.Identity"
    np.testing.assert_allclose(ours.predict(pairs), theirs.predict(pairs), atol=SCORE_TOLERANCE, rtol=0)


def test_cross_encoder_max_length_is_checked_when_set(make, tmp_path):
    """The setters took 10000, 1 and 'abc'; predict failed later, naming a tokenizer call and an
    Embedder option the caller never used. Now the constructor's check, at once, by the name set."""
    ranker = minibert.CrossEncoder(cross_encoder_dir(make, tmp_path, "saved"))
    for name in ("max_length", "max_seq_length"):
        for value in (10000, 1, "abc", True):
            with pytest.raises(TaskArgumentError, match=rf"{name} must be an int from 3 to 128 .the model's positions"):
                setattr(ranker, name, value)
        assert ranker.max_length == 48
    ranker.max_seq_length = 20
    assert ranker.max_length == 20


def test_cross_encoder_shows_no_bar_for_the_log_level(make, tmp_path, capsys):
    """`minibert rerank` wrote tqdm's "Batches" bar to a file (stderr redirected), for 5 documents:
    predict showed it whenever the "minibert" logger was at INFO, which the command sets. The bar
    follows the Embedder's rule now: asked for, or a long run on a terminal."""
    directory = cross_encoder_dir(make, tmp_path, "saved")
    ranker = minibert.CrossEncoder(directory)
    logger = logging.getLogger("minibert")
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        ranker.predict([["q", document] for document in DOCUMENTS] * 10, batch_size=1)
    finally:
        logger.setLevel(level)
    assert "Batches" not in capsys.readouterr().err
    result = run_minibert("rerank", "--model", str(directory), "q", *DOCUMENTS[:5])
    assert result.returncode == 0 and "Batches" not in result.stderr and "%|" not in result.stderr, result.stderr
