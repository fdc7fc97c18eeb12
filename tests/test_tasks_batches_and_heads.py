"""The tasks whatever the folder says of its tokenizer and head, against the references that define them.

* A tokenizer that pads on the left (``padding_side: "left"``): each text's result is what the pipeline
  gives it alone, in any batch. minibert padded its batches on the tokenizer's side, which moved BERT's
  positions and cut the per-token outputs from the wrong end: a text's label changed with its batch,
  and tag lost every entity. sentence-transformers' CrossEncoder pads on the tokenizer's side, so its
  scores depend on the batch then; minibert's are its scores at ``batch_size=1``.
* A checkpoint whose config.json ``architectures`` names a classifier of another kind (a sentence
  classifier given to tag, a token classifier to classify or rerank) is refused: both heads are
  ``classifier.*``, and the wrong one loaded and labelled pieces, or texts, with nonsense.
* ``rerank(model=...)`` takes a loaded model and a (model, tokenizer) pair, as every task does (it
  failed in ``os.fspath``).
* tag warns for every text it cuts, not only the first.

Scores within task_checkpoints.py's SCORE_TOLERANCE (1e-5: the model parity bound, fp32).
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import minibert
from helpers import run_minibert
from minibert import BertTokenizer
from minibert.errors import CheckpointError
from minibert.tasks.tag import TextCutWarning
from task_checkpoints import DOCUMENTS, QA_REFERENCE, SCORE_TOLERANCE, TEXTS, cross_encoder_dir, ner_model, same

transformers = pytest.importorskip("transformers")
MIXED = [*TEXTS, "Hello there", "x"]  # lengths from 3 to 30 pieces: most rows of a batch are padded


def with_tokenizer_setting(directory: Path, target: Path, **settings) -> Path:
    """A copy of a checkpoint whose tokenizer_config.json says ``settings`` (padding_side="left")."""
    if not target.exists():
        shutil.copytree(directory, target)
        config = json.loads((target / "tokenizer_config.json").read_text(encoding="utf-8"))
        (target / "tokenizer_config.json").write_text(json.dumps({**config, **settings}), encoding="utf-8")
    return target


# ----------------------------------------------------------------------------- padding_side "left"


def test_a_left_padding_tokenizer_gives_classify_and_tag_the_pipelines_results(make, tmp_path):
    """The pipelines read each text alone, unpadded: minibert's batch of mixed lengths gives the same."""
    labels = {0: "negative", 1: "neutral", 2: "positive"}
    classifier = with_tokenizer_setting(make("BertForSequenceClassification", scale=5.0, id2label=labels),
                                        tmp_path / "classifier", padding_side="left")  # fmt: skip
    pipeline = transformers.pipeline("text-classification", model=str(classifier))
    assert pipeline.tokenizer.padding_side == "left"
    same(minibert.classify(MIXED, model=classifier, top_k=None), pipeline(MIXED, top_k=None), "classify")
    tagger = with_tokenizer_setting(ner_model(make), tmp_path / "tagger", padding_side="left")
    pipeline = transformers.pipeline("token-classification", model=str(tagger))
    theirs = pipeline(MIXED)
    assert sum(map(len, theirs)) >= 8, "the random head should find entities"
    same(minibert.tag(MIXED, model=tagger), theirs, "tag")


def test_a_left_padding_tokenizer_gives_answer_the_pipelines_answers(tmp_path):
    """Every reference case (several windows of unequal length, several questions at once) on the
    reference's model, its tokenizer set to pad on the left. (transformers 4.57.1's pipeline reads
    padding_side "left" as XLNet's order, context first; minibert keeps BERT's, question first,
    whatever the side: docs/tasks.md. The reference's answers are the question-first ones.)"""
    folder = with_tokenizer_setting(QA_REFERENCE, tmp_path / "qa", padding_side="left")
    assert BertTokenizer.from_pretrained(folder).padding_side == "left"
    reference = json.loads((QA_REFERENCE / "expected.json").read_text(encoding="utf-8"))
    for number, case in enumerate(reference["cases"]):
        arguments = dict(case["arguments"])
        question, context = arguments.pop("question"), arguments.pop("context")
        same(minibert.answer(question, context, model=folder, **arguments), case["expected"], f"case {number}")


def test_a_left_padding_cross_encoder_scores_as_sentence_transformers_at_batch_size_one(make, tmp_path):
    """sentence-transformers pads a batch on the tokenizer's side: on the left, its scores depend on
    the batch. minibert's are the same in any batch: those it gives each pair alone."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder = with_tokenizer_setting(cross_encoder_dir(make, tmp_path, "saved"), tmp_path / "left", padding_side="left")
    theirs = sentence_transformers.CrossEncoder(str(folder))
    pairs = [["How many people live in Berlin?", document] for document in DOCUMENTS]
    alone = theirs.predict(pairs, batch_size=1)
    assert np.abs(theirs.predict(pairs) - alone).max() > 1e-3, "their batch should depend on the padding side"
    ours = minibert.CrossEncoder(folder)
    for batch_size in (1, 3, 32):
        np.testing.assert_allclose(ours.predict(pairs, batch_size=batch_size), alone, atol=SCORE_TOLERANCE, rtol=0)
    same(minibert.rerank(pairs[0][0], DOCUMENTS, model=folder), theirs.rank(pairs[0][0], DOCUMENTS, batch_size=1),
         "rerank")  # fmt: skip


# ----------------------------------------------------------------------------- the head's kind


def with_pooler(directory: Path, target: Path) -> Path:
    """A token classifier saved with a pooler, as older transformers saved one: every tensor a
    sentence classifier needs is there."""
    shutil.copytree(directory, target)
    tensors = load_file(target / "model.safetensors")
    hidden = tensors["classifier.weight"].shape[1]
    tensors.update({"bert.pooler.dense.weight": torch.eye(hidden), "bert.pooler.dense.bias": torch.zeros(hidden)})
    save_file(tensors, target / "model.safetensors", metadata={"format": "pt"})
    return target


def test_a_classifier_of_another_kind_is_refused_naming_the_task_that_reads_it(make, tmp_path):
    sentences = make("BertForSequenceClassification", scale=5.0, num_labels=3)
    with pytest.raises(CheckpointError, match=rf"^{sentences / 'config.json'}: architectures names "
                       r"BertForSequenceClassification, a sentence classifier \(its head reads the pooled \[CLS\] "
                       r"vector\), not a token classifier \(BertForTokenClassification\): read it with classify or "
                       r"rerank \(minibert classify, minibert rerank\)$"):  # fmt: skip
        minibert.tag("Ada Lovelace lives in London", model=sentences)
    tokens = with_pooler(ner_model(make), tmp_path / "ner-with-pooler")
    said = r"architectures names BertForTokenClassification, a token classifier .* read it with tag \(minibert tag\)$"
    with pytest.raises(CheckpointError, match=rf"^{tokens / 'config.json'}: {said}"):
        minibert.classify("Ada Lovelace lives in London", model=tokens)
    with pytest.raises(CheckpointError, match=rf"^{tokens / 'config.json'}: {said}"):
        minibert.CrossEncoder(tokens)
    loaded = minibert.BertForSequenceClassification.from_pretrained(tokens)  # the class asked for: it loads
    for call in (minibert.classify, lambda text, model: minibert.rerank(text, ["a"], model=model)):
        with pytest.raises(CheckpointError, match=rf"^the model's config \(from {tokens}\): {said}"):
            call("Ada Lovelace lives in London", model=loaded)
    result = run_minibert("tag", "--model", str(sentences), "Ada Lovelace lives in London")
    errors = [line for line in result.stderr.splitlines() if line.startswith("minibert: error:")]
    assert result.returncode == 1 and len(errors) == 1 and "read it with classify" in errors[0], result.stderr


def test_a_checkpoint_without_architectures_is_read_as_before(make, tmp_path):
    """Nothing says which kind: loaded as the task's class, as the pipeline loads it."""
    folder = tmp_path / "unnamed"
    shutil.copytree(make("BertForSequenceClassification", scale=5.0, num_labels=3), folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    del config["architectures"]
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' note on the unused pooler
        pipeline = transformers.pipeline("token-classification", model=str(folder))
    same(minibert.tag(TEXTS[0], model=folder), pipeline(TEXTS[0]), "no architectures")


# What config.json's ``architectures`` says of a head: (the field, sentence classifier?, token classifier?),
# by transformers' class names (a list of names, as transformers writes it; anything else names no head).
ARCHITECTURES = [(["BertForSequenceClassification"], True, False), (["BertForTokenClassification"], False, True),
                 (["BertForMultipleChoice"], False, False), (["BertForPreTraining"], False, False),
                 (["BertModel", "BertForTokenClassification"], False, True), ([], False, False),
                 ("BertForSequenceClassification", False, False), ([7, None, {"a": 1}], False, False),
                 (None, False, False)]  # fmt: skip


@pytest.mark.parametrize("architectures, sentences, tokens", ARCHITECTURES)
def test_each_reader_of_architectures_takes_the_same_head_from_it(tmp_path, architectures, sentences, tokens):
    """The tasks' refusal of a head of another kind, serve's choice of a classifier over an embedder,
    and fine-tuning's kind of head read ``architectures`` through one helper, and agree."""
    pytest.importorskip("starlette")
    from minibert.apps.serve.service import is_sequence_classifier
    from minibert.loading.architectures import architectures_in, classifier_kinds
    from minibert.training.tasks.head import head_kind

    config = {"hidden_size": 8} if architectures is None else {"hidden_size": 8, "architectures": architectures}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert architectures_in(str(tmp_path)) == (architectures, str(tmp_path / "config.json"))
    assert ("ForSequenceClassification" in classifier_kinds(architectures)) is sentences
    assert is_sequence_classifier(str(tmp_path)) is sentences
    assert (head_kind(config) == "token_classification") is tokens
    assert (classifier_kinds(architectures) == {"ForMultipleChoice"}) is (architectures == ["BertForMultipleChoice"])


def test_architectures_in_leaves_a_missing_or_broken_config_to_the_loader(tmp_path):
    from minibert.loading.architectures import architectures_in

    assert architectures_in(str(tmp_path)) == (None, "")
    (tmp_path / "config.json").write_text("[1, 2", encoding="utf-8")
    assert architectures_in(str(tmp_path)) == (None, str(tmp_path / "config.json"))
    (tmp_path / "config.json").write_text("[1, 2]", encoding="utf-8")
    assert architectures_in(str(tmp_path)) == (None, str(tmp_path / "config.json"))


@pytest.mark.parametrize("architectures, saved", [
    (["BertForTokenClassification", "x"], "BertForTokenClassification"),
    (None, None), ([], None), ([3], None), ("BertModel", None),
])  # fmt: skip
def test_saved_class_is_the_first_name_architectures_gives(architectures, saved):
    """The loader's advice (from_pretrained.py, strict.py) reads the saved class through one helper."""
    from minibert.loading.architectures import saved_class

    assert saved_class(architectures) == saved


# ----------------------------------------------------------------------------- rerank's model=


def test_rerank_takes_a_loaded_model_and_a_pair_with_the_folders_settings(make, tmp_path):
    """The folder's sentence-transformers settings (its length, 48: the third document is cut) are
    followed, as for rerank(model=folder)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder = cross_encoder_dir(make, tmp_path, "saved")
    query = "How many people live in Berlin?"
    expected = sentence_transformers.CrossEncoder(str(folder)).rank(query, DOCUMENTS)
    loaded = minibert.BertForSequenceClassification.from_pretrained(folder)
    same(minibert.rerank(query, DOCUMENTS, model=loaded), expected, "a loaded model")
    same(minibert.rerank(query, DOCUMENTS, model=(loaded, BertTokenizer.from_pretrained(folder))), expected, "a pair")
    with pytest.raises(TypeError, match=r"^model must be a hub id, a directory, a CrossEncoder, a "
                       r"BertForSequenceClassification or \(model, tokenizer\), got int$"):  # fmt: skip
        minibert.rerank(query, DOCUMENTS, model=3)


# ----------------------------------------------------------------------------- every cut text warned


def test_tag_warns_for_every_text_it_cuts(make, tmp_path):
    directory = ner_model(make)
    texts = ["word " * 200, "short", "word " * 200 + " more"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        minibert.tag(texts, model=directory)
    cut = [warning.message for warning in caught if isinstance(warning.message, TextCutWarning)]
    assert [(warning.number, warning.pieces, warning.limit) for warning in cut] == [(0, 202, 128), (2, 203, 128)]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    result = run_minibert("tag", "--model", str(directory), "--input", str(source))
    warned = [line for line in result.stderr.splitlines() if "warning" in line]
    assert result.returncode == 0 and len(warned) == 2, result.stderr
    assert warned[0].startswith(f"minibert: warning: line 1 of {source} is 202 pieces long")
    assert warned[1].startswith(f"minibert: warning: line 3 of {source} is 203 pieces long")


# ----------------------------------------------------------------------------- what a task is given


def test_a_model_or_tokenizer_of_another_library_is_named_by_its_module(make):
    """transformers' BertForSequenceClassification given to classify: "must be ... a
    BertForSequenceClassification ..., got BertForSequenceClassification", an error that contradicts
    itself. A (model, transformers tokenizer) pair ran classify but crashed answer and a long tag
    (AttributeError: no piece_ids): refused up front, on every task."""
    folder = make("BertForSequenceClassification", num_labels=3)
    theirs = transformers.BertForSequenceClassification.from_pretrained(str(folder))
    for model in (theirs, (theirs, BertTokenizer.from_pretrained(folder))):
        with pytest.raises(TypeError, match=r"minibert's BertForSequenceClassification.*got a transformers\.models\."
                                             r"bert\.modeling_bert\.BertForSequenceClassification \(load it with "
                                             r"minibert: BertForSequenceClassification\.from_pretrained"):  # fmt: skip
            minibert.classify("x", model=model)
    their_tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    qa_folder, ner_folder = make("BertForQuestionAnswering"), ner_model(make)
    calls = [lambda: minibert.classify("x", model=(minibert.BertForSequenceClassification.from_pretrained(folder),
                                                   their_tokenizer)),
             lambda: minibert.answer("Where?", "In Berlin", model=(
                 minibert.BertForQuestionAnswering.from_pretrained(qa_folder), their_tokenizer)),
             lambda: minibert.tag("Ada Lovelace " * 100, model=(
                 minibert.BertForTokenClassification.from_pretrained(ner_folder), their_tokenizer))]  # fmt: skip
    for call in calls:
        with pytest.raises(TypeError, match=r"^the pair's tokenizer must be minibert's BertTokenizer, got a "
                                            r"transformers\.models\.bert\.tokenization_bert"):  # fmt: skip
            call()


def test_a_dtype_given_with_a_loaded_model_is_its_own_or_refused(make, tmp_path):
    """dtype= chooses how a model given by name is loaded. With a loaded float32 model, dtype="int8"
    ran float32 in silence (and an int8 model given "float32" ran int8); "int9" was accepted. Its
    own dtype is nothing to do; another is a TaskArgumentError; a name no load takes, the load's ValueError."""
    from minibert.errors import TaskArgumentError

    folder = make("BertForSequenceClassification", num_labels=3)
    loaded = minibert.BertForSequenceClassification.from_pretrained(folder)
    assert minibert.classify("x", model=loaded, dtype="float32") == minibert.classify("x", model=loaded)
    assert minibert.classify("x", model=loaded, dtype=torch.float32) == minibert.classify("x", model=loaded)
    cross_encoder = minibert.CrossEncoder(cross_encoder_dir(make, tmp_path, "saved"))
    calls = {"classify": lambda dtype: minibert.classify("x", model=loaded, dtype=dtype),
             "pair": lambda dtype: minibert.classify("x", model=(loaded, BertTokenizer.from_pretrained(folder)),
                                                     dtype=dtype),
             "rerank": lambda dtype: minibert.rerank("q", ["a", "b"], model=cross_encoder, dtype=dtype)}  # fmt: skip
    for call in calls.values():  # classify, a pair, rerank's CrossEncoder
        for dtype in ("int8", "bf16", "auto"):
            with pytest.raises(TaskArgumentError, match=r"this model is loaded already, in float32"):
                call(dtype)
        with pytest.raises(ValueError, match="got 'int9'"):
            call("int9")
