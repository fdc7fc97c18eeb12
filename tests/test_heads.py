"""The task heads (heads.py) against transformers' classes of the same names, loaded from what
transformers saved: logits (real tokens), the loss given labels, and the gradient of every
parameter; the loader's words when a checkpoint's heads and the class differ; and real checkpoints
(rxnfp's pre-training and 50-label classification models, antiberty's masked LM).

Tolerance: 1e-5, the parity bound of every other layer test (fp32 sums of ≤ 64 terms at values
of magnitude ≤ ~10, compared element by element); the real checkpoints' outputs (8 and 12 layers
deep) to 1e-5 from transformers in float64 beyond fp32's own rounding at that depth
(helpers.bound_from_exact: another correct GEMM order, oneDNN's, lands elsewhere in it); gradients
as test_model.py compares them, absolutely below 1 and relative to the parameter's largest gradient
above (a gradient that is zero in exact arithmetic, such as the attention keys' bias, carries only
rounding noise)."""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import logging
import re
from pathlib import Path

import pytest
import torch

import minibert
from helpers import assert_close, bound_from_exact, exact_reference
from minibert.errors import CheckpointError, InputTypeError, MissingHeadsError

transformers = pytest.importorskip("transformers")

ATOL = 1e-5
TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64, hidden_act="gelu")  # fmt: skip
HEADS = ["BertForMaskedLM", "BertForNextSentencePrediction", "BertForSequenceClassification",
         "BertForTokenClassification", "BertForQuestionAnswering", "BertForMultipleChoice",
         "BertForPreTraining"]  # fmt: skip


def saved(directory: Path, name: str, **config) -> tuple[Path, torch.nn.Module]:
    """A random transformers model of class ``name``, saved as the hub stores it."""
    torch.manual_seed(0)
    reference = getattr(transformers, name)(transformers.BertConfig(**{**TINY, **config})).eval()
    reference.save_pretrained(directory / name)
    return directory / name, reference


def batch(choices: int | None = None) -> dict[str, torch.Tensor]:
    """Three sequences of 9 tokens, two of them right-padded, segment ids for a pair."""
    generator = torch.Generator().manual_seed(1)
    rows = 3 * (choices or 1)
    input_ids = torch.randint(1, 99, (rows, 9), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1::3, 6:] = 0
    attention_mask[2::3, 4:] = 0
    input_ids[attention_mask == 0] = 0
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 3:] = 1
    token_type_ids[attention_mask == 0] = 0
    values = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    return values if choices is None else {key: value.view(3, choices, 9) for key, value in values.items()}


def labels_for(name: str, inputs: dict, num_labels: int = 3) -> dict:
    generator = torch.Generator().manual_seed(2)
    real = inputs["attention_mask"].bool()
    if name in ("BertForMaskedLM", "BertForTokenClassification", "BertForPreTraining"):
        vocab = 99 if name != "BertForTokenClassification" else num_labels
        labels = torch.randint(0, vocab, inputs["input_ids"].shape, generator=generator)
        labels[~real] = -100
        labels[:, 0] = -100  # [CLS]: no label, as a data collator leaves it
        extra = {"next_sentence_label": torch.tensor([0, 1, 0])} if name == "BertForPreTraining" else {}
        return {"labels": labels, **extra}
    if name == "BertForQuestionAnswering":  # the last one past the end: clamped and ignored
        return {"start_positions": torch.tensor([1, 2, 40]), "end_positions": torch.tensor([3, 5, 40])}
    if name == "BertForNextSentencePrediction":
        return {"labels": torch.tensor([0, 1, 1])}
    if name == "BertForMultipleChoice":
        return {"labels": torch.tensor([1, 0, 3])}
    return {"labels": torch.tensor([2, 0, 1])}


def outputs_of(name: str, out) -> dict[str, torch.Tensor]:
    if name == "BertForQuestionAnswering":
        return {"start_logits": out.start_logits, "end_logits": out.end_logits}
    if name == "BertForPreTraining":
        return {"prediction_logits": out.prediction_logits, "seq_relationship_logits": out.seq_relationship_logits}
    return {"logits": out.logits}


def compare_logits(name: str, ours, theirs, inputs: dict, label: str, exact=None) -> dict[str, float]:
    """Every output; with ``exact`` (the reference in float64) against it, within ``bound_from_exact``,
    at every position, [PAD] rows included (a head called directly computes them as transformers
    does); without it, token-level outputs at the real tokens (helpers.compare_outputs says why)."""
    report = {}
    real = inputs["attention_mask"].bool()
    for key, value in outputs_of(name, ours).items():
        expected = outputs_of(name, theirs)[key]
        truth = None if exact is None else outputs_of(name, exact)[key]
        per_token = value.dim() >= 2 and value.shape[:2] == real.shape and name != "BertForMultipleChoice"
        if truth is None and per_token:
            value, expected = value[real], expected[real]
        if truth is None:
            report[key] = assert_close(value, expected, f"{label} {key}", ATOL)
        else:
            report[key] = assert_close(value, truth, f"{label} {key} vs exact", bound_from_exact(expected, truth))
    return report


@pytest.mark.parametrize("name", HEADS)
def test_every_head_matches_transformers_logits_loss_and_gradients(name, tmp_path):
    directory, reference = saved(tmp_path, name, num_labels=2 if name == "BertForQuestionAnswering" else 3)
    ours = getattr(minibert, name).from_pretrained(directory)
    inputs = batch(choices=4 if name == "BertForMultipleChoice" else None)
    labels = labels_for(name, inputs)
    theirs_out = reference(**inputs, **labels)
    ours_out = ours(**inputs, **labels)
    report = compare_logits(name, ours_out, theirs_out, inputs, name)
    report["loss"] = assert_close(ours_out.loss, theirs_out.loss, f"{name} loss", ATOL)
    theirs_out.loss.backward()
    ours_out.loss.backward()
    theirs_grads = dict(reference.named_parameters())
    worst = 0.0
    for our_name, parameter in ours.named_parameters():
        hub_name = _hub_name(our_name, ours)
        if hub_name not in theirs_grads:  # the tied decoder weight is the word embeddings
            continue
        expected = theirs_grads[hub_name].grad
        assert parameter.grad is not None and expected is not None, our_name
        scale = max(1.0, expected.abs().max().item())  # as test_model's gradients: absolute below 1, relative above
        worst = max(worst, assert_close(parameter.grad / scale, expected / scale, f"{name} grad {our_name}", ATOL))
    report["gradients"] = worst
    print(f"\n{name}: max |Δ| " + ", ".join(f"{key} {value:.1e}" for key, value in report.items()))


def _hub_name(our_name: str, model) -> str:
    from minibert.loading.names import HEAD_PREFIXES, minibert_to_checkpoint

    body = our_name.removeprefix("bert.")
    hub = minibert_to_checkpoint(body)
    if our_name.startswith(HEAD_PREFIXES):
        return hub
    hub = "bert." + hub
    return hub.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")


@pytest.mark.parametrize(
    "problem,labels",
    [
        ("single_label_classification", torch.tensor([2, 0, 1])),
        ("multi_label_classification", torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])),
        ("regression", torch.tensor([[0.5, -1.0, 2.0], [0.1, 0.2, 0.3], [1.0, 1.0, -1.0]])),
        (None, torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])),  # floats: multi-label
    ],
)
def test_sequence_classification_losses_by_problem_type(problem, labels, tmp_path):
    directory, reference = saved(tmp_path, "BertForSequenceClassification", num_labels=3, problem_type=problem)
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    inputs = batch()
    expected = reference(**inputs, labels=labels).loss
    assert_close(ours(**inputs, labels=labels).loss, expected, f"{problem} loss", ATOL)


def test_one_label_is_regression(tmp_path):
    directory, reference = saved(tmp_path, "BertForSequenceClassification", num_labels=1)
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    inputs, labels = batch(), torch.tensor([0.3, -1.2, 2.0])
    assert ours.num_labels == 1
    assert_close(ours(**inputs, labels=labels).loss, reference(**inputs, labels=labels).loss, "regression", ATOL)
    assert ours.problem_type == "regression"


def test_labels_come_from_config(tmp_path):
    labels = {0: "NEGATIVE", 1: "NEUTRAL", 2: "POSITIVE"}
    directory, _ = saved(tmp_path, "BertForSequenceClassification", id2label=labels,
                         label2id={v: k for k, v in labels.items()})  # fmt: skip
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    assert ours.labels.id2label == labels and ours.labels.label2id == {v: k for k, v in labels.items()}
    assert ours.num_labels == 3 and ours.classifier.out_features == 3


# ----------------------------------------------------------------------------- the config set after loading

MULTI_HOT = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])  # floats: multi-label unless told


@pytest.mark.parametrize(
    "problem, labels",
    [("regression", MULTI_HOT), ("multi_label_classification", MULTI_HOT),
     ("single_label_classification", torch.tensor([2, 0, 1]))],
)  # fmt: skip
def test_problem_type_set_after_loading_picks_the_loss_and_is_saved(problem, labels, tmp_path):
    """transformers' classification examples set ``model.config.problem_type`` after loading: the
    loss of the next call follows it (float labels with "regression": the mean squared error, not the
    multi-label loss float labels suggest), and save_pretrained writes it, as transformers does."""
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3)
    reference = transformers.BertForSequenceClassification.from_pretrained(directory).eval()
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    inputs = batch()
    for model in (reference, ours):
        model.config.problem_type = problem
    assert_close(ours(**inputs, labels=labels).loss, reference(**inputs, labels=labels).loss, f"{problem} loss", ATOL)
    reference.save_pretrained(tmp_path / "theirs")
    ours.save_pretrained(tmp_path / "ours")
    written = [json.loads((tmp_path / who / "config.json").read_text())["problem_type"] for who in ("theirs", "ours")]
    assert written == [problem, problem]
    assert transformers.AutoConfig.from_pretrained(tmp_path / "ours").problem_type == problem


def test_problem_type_the_first_labels_decide_is_kept_in_the_config(tmp_path):
    """With no problem_type, the first labels decide it (float labels: multi-label) and transformers
    keeps that in the config, so a later call with other labels keeps the loss; the same here."""
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3)
    reference = transformers.BertForSequenceClassification.from_pretrained(directory).eval()
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    inputs, regression = batch(), torch.tensor([[0.5, -1.0, 2.0], [0.1, 0.2, 0.3], [1.0, 1.0, -1.0]])
    for labels in (MULTI_HOT, regression):
        assert_close(ours(**inputs, labels=labels).loss, reference(**inputs, labels=labels).loss, "loss", ATOL)
    assert ours.config.problem_type == reference.config.problem_type == "multi_label_classification"
    with pytest.raises(ValueError, match="problem_type must be None or one of single_label_classification"):
        ours.config.problem_type = "ranking"


def test_labels_named_after_loading_as_transformers(tmp_path):
    """``model.config.id2label = {...}; model.config.label2id = {...}`` before save_pretrained (a
    standard fine-tuning step): num_labels follows, the heads' labels are the new names, and the files
    transformers reads back name them; ``config.num_labels = n`` renames as transformers does; labels
    of another number than the head's outputs are an error at the next call."""
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3)
    reference = transformers.BertForSequenceClassification.from_pretrained(directory).eval()
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    names = {0: "neg", 1: "neu", 2: "pos"}
    for model in (reference, ours):
        model.config.id2label = names
        model.config.label2id = {name: index for index, name in names.items()}
    assert (ours.config.id2label, ours.config.label2id, ours.config.num_labels) == (
        reference.config.id2label, reference.config.label2id, reference.config.num_labels)  # fmt: skip
    assert ours.labels.id2label == names and ours.num_labels == 3
    ours.save_pretrained(tmp_path / "ours")
    assert transformers.AutoConfig.from_pretrained(tmp_path / "ours").id2label == names
    assert minibert.BertForSequenceClassification.from_pretrained(tmp_path / "ours").labels.id2label == names
    for count in (3, 4):  # the same number keeps the names; another gives LABEL_0 ... as transformers
        for model in (reference, ours):
            model.config.num_labels = count
        assert ours.config.id2label == reference.config.id2label and ours.config.num_labels == count
    with pytest.raises(ValueError, match="config.id2label names 4 labels but the classifier has 3 outputs"):
        ours(**batch())


@pytest.mark.parametrize("name", HEADS + ["BertModel"])
def test_transformers_model_members(name, tmp_path):
    """What transformers' users call on a model besides forward: num_parameters (every flag, and with
    the embeddings frozen), get_input_embeddings, get_output_embeddings (the masked-LM decoder: the
    word embedding matrix and the head's bias), base_model and main_input_name, as transformers answers."""
    directory, reference = saved(tmp_path, name)
    ours = getattr(minibert, name).from_pretrained(directory)
    for frozen in (False, True):
        for model in (reference, ours):
            model.get_input_embeddings().requires_grad_(not frozen)
        for only_trainable, exclude_embeddings in itertools.product((False, True), repeat=2):
            flags = dict(only_trainable=only_trainable, exclude_embeddings=exclude_embeddings)
            assert ours.num_parameters(**flags) == reference.num_parameters(**flags), (flags, frozen)
    assert torch.equal(ours.get_input_embeddings().weight, reference.get_input_embeddings().weight)
    assert type(ours.base_model).__name__ == type(reference.base_model).__name__ == "BertModel"
    assert ours.main_input_name == reference.main_input_name == "input_ids"
    decoder, their_decoder = ours.get_output_embeddings(), reference.get_output_embeddings()
    assert (decoder is None) == (their_decoder is None)
    if decoder is not None:
        assert decoder.weight is ours.get_input_embeddings().weight and decoder.bias is ours.mlm_head.bias
        assert torch.equal(decoder.weight, their_decoder.weight) and torch.equal(decoder.bias, their_decoder.bias)
        hidden = torch.randn(2, 3, 32)
        assert_close(decoder(ours.mlm_head.layer_norm(ours.mlm_head.activation(ours.mlm_head.transform(hidden)))),
                     their_decoder(reference.cls.predictions.transform(hidden)), "decoder", ATOL)  # fmt: skip
    ours.tie_weights()  # always tied: nothing to do, nothing changed
    assert ours.get_output_embeddings() is None or ours.get_output_embeddings().weight is decoder.weight


def test_set_input_embeddings_as_transformers(tmp_path):
    """A new word table: the model reads it (ids past the old vocabulary too: config.vocab_size follows),
    as transformers' does; under a masked-LM head a table of another number of rows is refused."""
    directory, reference = saved(tmp_path, "BertModel")
    ours = minibert.BertModel.from_pretrained(directory)
    torch.manual_seed(2)
    table = torch.nn.Embedding(104, 32, padding_idx=0)
    ours.set_input_embeddings(table)
    reference.set_input_embeddings(torch.nn.Embedding.from_pretrained(table.weight.detach().clone(), freeze=False))
    assert ours.get_input_embeddings() is table and ours.config.vocab_size == 104
    ids = torch.tensor([[2, 100, 103, 7, 3]])
    with torch.no_grad():
        assert_close(ours(ids).last_hidden_state, reference(ids).last_hidden_state, "new table", ATOL)
    masked_lm = minibert.BertForMaskedLM.from_pretrained(saved(tmp_path, "BertForMaskedLM")[0])
    with pytest.raises(ValueError, match="resize_token_embeddings"):
        masked_lm.set_input_embeddings(table)


def test_saved_heads_load_in_transformers_with_the_same_logits(tmp_path):
    for name in ("BertForSequenceClassification", "BertForQuestionAnswering", "BertForMaskedLM"):
        directory, _ = saved(tmp_path, name, num_labels=3 if name != "BertForQuestionAnswering" else 2)
        ours = getattr(minibert, name).from_pretrained(directory)
        ours.save_pretrained(tmp_path / f"{name}-again")
        again = getattr(transformers, name).from_pretrained(str(tmp_path / f"{name}-again")).eval()
        inputs = batch()
        with torch.no_grad():
            compare_logits(name, ours(**inputs), again(**inputs), inputs, f"{name} saved by minibert")


def test_a_checkpoint_with_other_heads_loads_naming_them(tmp_path, caplog):
    directory, reference = saved(tmp_path, "BertForPreTraining")
    with caplog.at_level(logging.INFO, logger="minibert"):
        ours = minibert.BertForMaskedLM.from_pretrained(directory)
    lines = [record.getMessage() for record in caplog.records if "other heads" in record.getMessage()]
    assert len(lines) == 1 and "cls.seq_relationship.weight" in lines[0] and "BertForMaskedLM" in lines[0], lines
    assert "bert.pooler.dense.weight" in lines[0]  # BertForMaskedLM has no pooler, as in transformers
    inputs = batch()
    with torch.no_grad():
        mlm = ours(**inputs).logits
        expected = reference(**inputs).prediction_logits
    assert_close(mlm, expected, "MLM logits of a pre-training checkpoint (every position)", ATOL)


@pytest.mark.parametrize(
    "saved_as,loaded_as,says",
    [
        ("BertModel", "BertForMaskedLM", "has no tensors for the masked-LM head (cls.predictions.*), which "
         "BertForMaskedLM needs; it has no heads: it holds the encoder only; load it with BertModel"),
        ("BertForMaskedLM", "BertForPreTraining", "has no tensors for the pooler (bert.pooler.*) or the "
         "next-sentence head (cls.seq_relationship.*), which BertForPreTraining needs; it has the masked-LM "
         "head (cls.predictions.*); load it with BertForMaskedLM"),
        ("BertForPreTraining", "BertForSequenceClassification", "has no tensors for a classifier (classifier.*)"
         ", which BertForSequenceClassification needs; it has the masked-LM head (cls.predictions.*) and the "
         "next-sentence head (cls.seq_relationship.*); load it with BertForPreTraining"),
        # a classifier of two outputs is no BertForMultipleChoice's (one score per choice)
        ("BertForSequenceClassification", "BertForQuestionAnswering", "it has a classifier (classifier.*); load "
         "it with BertForSequenceClassification or BertForTokenClassification (or pass"),
        # one output: each class loads it; config.json's architectures first
        ("BertForMultipleChoice", "BertForQuestionAnswering", "it has a classifier (classifier.*); load it with "
         "BertForMultipleChoice, BertForSequenceClassification or BertForTokenClassification (or pass"),
    ],
)  # fmt: skip
def test_missing_heads_are_named_with_what_the_checkpoint_has(saved_as, loaded_as, says, tmp_path):
    directory, _ = saved(tmp_path, saved_as, num_labels=2)
    with pytest.raises(CheckpointError) as error:
        getattr(minibert, loaded_as).from_pretrained(directory)
    assert says in str(error.value), str(error.value)


@pytest.mark.parametrize("saved_as, num_labels", [
    ("BertForSequenceClassification", 1), ("BertForSequenceClassification", 2), ("BertForTokenClassification", 3),
    ("BertForMultipleChoice", 2), ("BertForPreTraining", 2), ("BertForQuestionAnswering", 2)])  # fmt: skip
def test_every_class_the_advice_names_loads_the_checkpoint(saved_as, num_labels, tmp_path):
    """No false advice: for each class that cannot load the checkpoint, every class its MissingHeadsError
    names loads it; and where a head of the wrong shape is the class's fault (a 2-label classifier loaded as
    BertForMultipleChoice), the error names the class config.json says, not a config.json of another model."""
    directory, reference = saved(tmp_path, saved_as, num_labels=num_labels)
    for loaded_as in HEADS:
        if loaded_as == saved_as:
            continue
        try:
            getattr(minibert, loaded_as).from_pretrained(directory)
        except MissingHeadsError as error:
            named = re.search(r"; load it with (.*) \(or pass", str(error)).group(1)
            for advised in re.split(r", | or ", named):
                getattr(minibert, advised).from_pretrained(directory)  # loads
        except (CheckpointError, ValueError) as error:
            if "wrong shape" in str(error):
                assert f"config.json says this is a {saved_as}: load it with that class" in str(error), str(error)
                assert "belongs to another model" not in str(error)


def test_a_misshaped_classifier_lists_it(tmp_path):
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3)
    config = (directory / "config.json").read_text().replace('"2": "LABEL_2"', '"2": "LABEL_2", "3": "LABEL_3"')
    (directory / "config.json").write_text(config)
    with pytest.raises(CheckpointError, match=r"classifier.weight \(3, 32\) \(expected \(4, 32\)\)"):
        minibert.BertForSequenceClassification.from_pretrained(directory)


# ----------------------------------------------------------------------------- labels: what the losses take


def _pair(tmp_path, name: str):
    """transformers' model of class ``name`` and minibert's, loaded from the same folder; the inputs and labels."""
    directory, reference = saved(tmp_path, name, num_labels=2 if name == "BertForQuestionAnswering" else 3)
    inputs = batch(choices=4 if name == "BertForMultipleChoice" else None)
    return reference, getattr(minibert, name).from_pretrained(directory), inputs, labels_for(name, inputs)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8, torch.uint8])
@pytest.mark.parametrize("name", HEADS)
def test_integer_labels_of_any_dtype_are_class_ids(name, dtype, tmp_path):
    """Labels of any integer dtype are the same ids as in int64, as input_ids are (docs/heads.md:
    integer labels → cross-entropy): the loss and gradients are transformers' with the int64 labels.
    transformers itself fails on int32 (torch's cross-entropy takes int64 and uint8 only) and reads int16
    and uint8 classification labels as multi-label; here they are class ids, and the sequence classifier's
    problem_type, decided by them and kept, is the one int64 labels decide in transformers."""
    reference, ours, inputs, labels = _pair(tmp_path, name)
    if not dtype.is_signed:  # uint8 holds no -100: those positions get id 0 instead
        labels = {key: value.clamp(min=0) for key, value in labels.items()}
    expected = reference(**inputs, **labels).loss
    ours_out = ours(**inputs, **{key: value.to(dtype) for key, value in labels.items()})
    assert_close(ours_out.loss, expected, f"{name} loss with {dtype} labels", ATOL)
    expected.backward()
    ours_out.loss.backward()
    theirs = dict(reference.named_parameters())
    for our_name, parameter in ours.named_parameters():
        if _hub_name(our_name, ours) in theirs:
            grad = theirs[_hub_name(our_name, ours)].grad
            scale = max(1.0, float(grad.abs().max()))
            assert_close(parameter.grad / scale, grad / scale, f"{name} grad {our_name}", ATOL)
    assert ours.config.extra.get("problem_type") == reference.config.problem_type  # both None but the classifier's


# (head, labels, words of the error): each refused by transformers too
REFUSED_LABELS = [
    ("BertForTokenClassification", {"labels": torch.zeros(3, 8, dtype=torch.long)},
     "labels has shape (3, 8); for these inputs the head takes (3, 9): one label id per token"),
    ("BertForTokenClassification", {"labels": torch.full((3, 9), 3)},
     "labels contains 3; the head takes one label id per token (B, T), in [0, num_labels=3), or -100"),
    ("BertForTokenClassification", {"labels": torch.full((3, 9), -5)}, "labels contains -5"),
    ("BertForTokenClassification", {"labels": torch.ones(3, 9)}, "labels must be integer ids, got dtype "
                                                                             "torch.float32: one label id per token"),
    ("BertForMaskedLM", {"labels": torch.full((3, 9), 99)}, "in [0, vocab_size=99)"),
    ("BertForNextSentencePrediction", {"labels": torch.tensor([0, 1])},
     "labels has shape (2,); for these inputs the head takes (3,): one per pair (B,): 0 (sentence B follows A)"),
    ("BertForNextSentencePrediction", {"labels": torch.tensor([0, 1, 2])}, "labels contains 2"),
    ("BertForSequenceClassification", {"labels": torch.tensor([2, 0])},
     "labels has shape (2,); for these inputs the head takes (3,): one class id per text"),
    ("BertForSequenceClassification", {"labels": torch.tensor([5, 0, 1])},
     r"labels contains 5; the head takes one class id per text \(B,\), in \[0, num_labels=3\)"),
    ("BertForSequenceClassification", {"labels": torch.tensor([[1, 0, 1], [0, 0, 1], [1, 1, 0]])},
     "for several labels per text, floats"),
    ("BertForSequenceClassification", {"labels": torch.ones(3, 2)},
     r"labels has shape \(3, 2\); for these inputs multi_label_classification takes \(3, 3\)"),
    ("BertForMultipleChoice", {"labels": torch.tensor([1, 0, 4])},
     r"labels contains 4; the head takes the right choice's index per question \(B,\), in \[0, choices=4\)"),
    ("BertForQuestionAnswering", {"start_positions": torch.tensor([1, 2]), "end_positions": torch.tensor([1, 2, 9])},
     "start_positions has shape (2,); for these inputs the head takes (3,): one token position per question"),
    ("BertForQuestionAnswering", {"start_positions": torch.ones(3), "end_positions": torch.tensor([1, 2, 3])},
     "start_positions must be integer ids, got dtype torch.float32"),
    ("BertForPreTraining", {"labels": torch.full((3, 9), -100), "next_sentence_label": torch.tensor([0, 3, 0])},
     "next_sentence_label contains 3; the head takes one per pair"),
]  # fmt: skip


@pytest.mark.parametrize("name, labels, words", REFUSED_LABELS, ids=[f"{name}-{index}" for index, (name, _, _)
                                                                     in enumerate(REFUSED_LABELS)])  # fmt: skip
def test_labels_the_loss_cannot_take_are_refused_naming_them(name, labels, words, tmp_path):
    """Labels of the wrong shape, ids outside the head's classes, floats where ids are needed: transformers
    fails in torch's words (a batch size of 27 for 24, "Target 5 is out of bounds", a device-side assert
    on a GPU); minibert names the labels, the shape or range the head takes, before torch's loss sees
    them. A classifier's problem_type is decided by no refused call: labels that fit afterwards are read
    as transformers reads them (in transformers the failed call has already decided, and kept, the wrong one)."""
    reference, ours, inputs, _ = _pair(tmp_path, name)
    with pytest.raises(Exception):  # noqa: B017 (transformers computes nothing for these either)
        reference(**inputs, **labels)
    with pytest.raises((ValueError, InputTypeError), match=words if "\\" in words else re.escape(words)):
        ours(**inputs, **labels)
    if name == "BertForSequenceClassification":
        assert ours.config.problem_type is None
        fresh = transformers.BertForSequenceClassification.from_pretrained(tmp_path / name).eval()
        good = torch.tensor([2, 0, 1])
        assert_close(ours(**inputs, labels=good).loss, fresh(**inputs, labels=good).loss, "after the refusal", ATOL)
        assert ours.config.problem_type == fresh.config.problem_type == "single_label_classification"


def test_integer_multi_hot_labels_with_multi_label_problem_type(tmp_path):
    """With problem_type multi_label_classification set, labels of 0 and 1 as integers or booleans are the
    same targets as floats (transformers' binary cross-entropy fails on them in torch's words): the loss
    is transformers' with the float labels."""
    directory, reference = saved(tmp_path, "BertForSequenceClassification", num_labels=3,
                                 problem_type="multi_label_classification")  # fmt: skip
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    inputs, expected = batch(), reference(**batch(), labels=MULTI_HOT).loss
    for labels in (MULTI_HOT.long(), MULTI_HOT.to(torch.uint8), MULTI_HOT.bool()):
        assert_close(ours(**inputs, labels=labels).loss, expected, f"multi-label {labels.dtype}", ATOL)


@pytest.mark.parametrize("name, keyword", [("BertForMaskedLM", "masked_lm_labels"),
                                           ("BertForNextSentencePrediction", "next_sentence_label"),
                                           ("BertForPreTraining", "masked_lm_labels")])  # fmt: skip
def test_pytorch_pretrained_berts_label_keywords_name_labels(name, keyword, tmp_path):
    """pytorch-pretrained-bert's ``masked_lm_labels=`` and ``next_sentence_label=`` (the latter taken by
    transformers 4, with a FutureWarning): transformers 5 drops them into **kwargs and returns no loss,
    without a word; minibert refuses them with an InputTypeError naming ``labels=``. BertForPreTraining's
    own ``next_sentence_label`` is today's name and is taken."""
    reference, ours, inputs, labels = _pair(tmp_path, name)
    old = {keyword: labels["labels"]}
    if name == "BertForPreTraining":
        old["next_sentence_label"] = labels["next_sentence_label"]
    assert reference(**inputs, **old).loss is None
    with pytest.raises(InputTypeError, match=f"{keyword} is pytorch-pretrained-bert's name of the .* pass labels="):
        ours(**inputs, **old)
    if name == "BertForPreTraining":
        assert_close(ours(**inputs, **labels).loss, reference(**inputs, **labels).loss, "pre-training loss", ATOL)
    with pytest.raises(InputTypeError, match="BertForMaskedLM has no next-sentence head to take them"):
        minibert.BertForMaskedLM(ours.config)(inputs["input_ids"], next_sentence_label=torch.tensor([0, 1, 1]))


@pytest.mark.parametrize("name", ["BertForMaskedLM", "BertForTokenClassification", "BertForPreTraining"])
def test_skip_padding_with_labels_at_padding_gives_transformers_loss(name, tmp_path):
    """``skip_padding=True`` leaves zeros at [PAD] rows, whose scores a label there (not -100) would bring
    into the loss (``labels = input_ids.clone()``, a common hand-made masked-LM recipe): such a call
    computes the [PAD] rows, as transformers does, and gives its loss; with padding labelled -100 the
    rows are skipped and the loss is the same."""
    from minibert.losses import labels_at_padding

    reference, ours, inputs, labels = _pair(tmp_path, name)
    everywhere = dict(labels, labels=inputs["input_ids"] % (3 if name == "BertForTokenClassification" else 99))
    for given in (everywhere, labels):
        expected = reference(**inputs, **given).loss
        assert_close(ours(**inputs, **given, skip_padding=True).loss, expected, f"{name} skip_padding", ATOL)
    assert labels_at_padding(inputs["attention_mask"], everywhere["labels"])
    assert not labels_at_padding(inputs["attention_mask"], labels["labels"])  # the [PAD] rows skipped there


# ----------------------------------------------------------------------------- real checkpoints


def _package_dir(package: str, *parts: str) -> Path:
    module = pytest.importorskip(package)
    return Path(module.__file__).parent.joinpath(*parts)


def _smiles_batch(directory: Path) -> dict[str, torch.Tensor]:
    """rxnfp's inputs are SMILES split by its regex, then WordPiece without lower-casing: fed here as
    pre-split words (the tokens of two reactions)."""
    tokenizer = minibert.BertTokenizer.from_pretrained(directory)
    words = [["C", "C", "(", "=", "O", ")", "O", ">>", "C", "C", "O"], ["c", "1", "c", "c", "c", "c", "c", "1"]]
    return tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")


def test_rxnfp_pretraining_heads_match_transformers():
    directory = _package_dir("rxnfp", "models", "transformers", "bert_pretrained")
    ours = minibert.BertForPreTraining.from_pretrained(directory)
    theirs = transformers.BertForPreTraining.from_pretrained(str(directory)).eval()
    inputs = _smiles_batch(directory)
    with torch.no_grad():
        exact = exact_reference(theirs)(**inputs)
        report = compare_logits("BertForPreTraining", ours(**inputs), theirs(**inputs), inputs, "rxnfp pre-training",
                                exact)  # fmt: skip
    print(f"\nrxnfp bert_pretrained: max |Δ| {report}")


def test_rxnfp_fifty_label_classifier_matches_its_weights():
    """config.json says num_labels 50 and id2label LABEL_0, LABEL_1 (transformers 2 left the default
    there); the classifier's weights have 50 rows. minibert takes the number written on purpose, and
    so does transformers 5 loading the folder alone (docs/heads.md said it needed num_labels=50 passed)."""
    directory = _package_dir("rxnfp", "models", "transformers", "bert_ft_10k_25s")
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    assert ours.num_labels == 50 and ours.labels.id2label[49] == "LABEL_49"
    reference = transformers.BertForSequenceClassification.from_pretrained(str(directory)).eval()  # nothing passed
    assert reference.classifier.out_features == 50 and reference.config.id2label == ours.labels.id2label
    heads_md = (Path(__file__).resolve().parents[1] / "docs" / "heads.md").read_text(encoding="utf-8")
    assert "transformers 5 does the same (50 labels" in heads_md  # what the page says of it
    inputs = _smiles_batch(directory)
    with torch.no_grad():
        exact = exact_reference(reference)(**inputs)
        report = compare_logits("BertForSequenceClassification", ours(**inputs), reference(**inputs), inputs, "rxnfp",
                                exact)  # fmt: skip
    print(f"\nrxnfp bert_ft_10k_25s: max |Δ| {report}")


def test_antiberty_masked_lm_loads_naming_its_extra_heads():
    """A BERT masked LM with three heads of its own on the pooled output (cls.species/chain/graft):
    BertForMaskedLM loads it with one warning line naming them, and computes transformers' logits."""
    directory = _package_dir("antiberty", "trained_models", "AntiBERTy_md_smooth")
    with pytest.warns(UserWarning, match="cls.species"):
        ours = minibert.BertForMaskedLM.from_pretrained(directory)
    theirs = transformers.BertForMaskedLM.from_pretrained(str(directory)).eval()
    vocab = (directory.parent / "vocab.txt").read_text().splitlines()
    assert len(vocab) == 25
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(5, 25, (2, 20), generator=generator)
    input_ids[:, 0], input_ids[:, -1] = 2, 3  # [CLS] and [SEP] of its vocabulary
    attention_mask = torch.ones_like(input_ids)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    with torch.no_grad():
        exact = exact_reference(theirs)(**inputs)
        report = compare_logits("BertForMaskedLM", ours(**inputs), theirs(**inputs), inputs, "antiberty", exact)
    print(f"\nantiberty AntiBERTy_md_smooth: max |Δ| {report}")
    with pytest.raises(CheckpointError, match="next-sentence head .*; it has the masked-LM head .* BertForMaskedLM"):
        minibert.BertForPreTraining.from_pretrained(directory)


def test_heads_are_public_names():
    for name in HEADS:
        assert getattr(minibert, name) is getattr(importlib.import_module("minibert.heads"), name)


# ----------------------------------------------------------------------------- fine-tuning


def test_one_finetuning_step_matches_transformers(tmp_path):
    """One plain step (forward with labels, backward, torch's AdamW) on minibert and on transformers,
    the same checkpoint and batch: the loss, every gradient, and every weight after the step.

    Dropout is off (probability 0) in both: the two libraries draw their dropout masks in a
    different order from one seed, so with dropout the step would differ by design, not by error.
    Tolerance: the loss and weights to 1e-5 as every parity test; gradients relative to the largest
    of each tensor (as test_every_head_... compares them). After one AdamW step a weight moves by
    about lr·sign(gradient): a gradient that is 0 in exact arithmetic (rounding noise in both) can
    move the other way, so the updated weights are compared where |gradient| is above its noise."""

    def train_step(model, optimizer, inputs: dict, labels: torch.Tensor) -> float:
        loss = model(**inputs, labels=labels).loss  # the head's cross-entropy
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    directory, reference = saved(tmp_path, "BertForSequenceClassification", num_labels=3, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)  # fmt: skip
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    ours.train()
    reference.train()
    inputs, labels = batch(), torch.tensor([2, 0, 1])
    optimizers = [torch.optim.AdamW(model.parameters(), lr=1e-3) for model in (ours, reference)]
    loss_ours = train_step(ours, optimizers[0], inputs, labels)
    loss_theirs = train_step(reference, optimizers[1], inputs, labels)
    assert abs(loss_ours - loss_theirs) <= ATOL, (loss_ours, loss_theirs)
    theirs = dict(reference.named_parameters())
    worst_gradient, worst_weight, compared = 0.0, 0.0, 0
    for name, parameter in ours.named_parameters():
        hub_name = _hub_name(name, ours)
        if hub_name not in theirs:
            continue
        expected = theirs[hub_name]
        scale = max(float(expected.grad.abs().max()), 1.0)
        worst_gradient = max(worst_gradient, float((parameter.grad - expected.grad).abs().max()) / scale)
        clear = expected.grad.abs() > 1e-6  # above the rounding noise of a zero gradient
        if clear.any():
            worst_weight = max(worst_weight, float((parameter.detach() - expected.detach())[clear].abs().max()))
        compared += 1
    assert compared >= 30, compared
    assert worst_gradient <= ATOL, worst_gradient
    assert worst_weight <= ATOL, worst_weight
    print(f"\none AdamW step: loss Δ {abs(loss_ours - loss_theirs):.1e}, gradients {worst_gradient:.1e} "
          f"(relative), weights {worst_weight:.1e}, {compared} tensors")  # fmt: skip


def test_new_heads_start_a_classifier_on_an_encoder_for_finetuning(minilm_dir, caplog):
    with pytest.raises(CheckpointError, match="pass new_heads=True to start them from fresh weights"):
        minibert.BertForSequenceClassification.from_pretrained(minilm_dir)
    torch.manual_seed(0)
    with caplog.at_level(logging.WARNING, logger="minibert"):
        model = minibert.BertForSequenceClassification.from_pretrained(minilm_dir, new_heads=True, num_labels=6)
    assert "starts 2 tensors from fresh weights" in caplog.text and "classifier.weight" in caplog.text
    assert model.num_labels == 6 and model.labels.id2label[5] == "LABEL_5"
    assert abs(float(model.classifier.weight.detach().std()) - 0.02) < 0.005 and not model.classifier.bias.any()
    encoder = minibert.BertModel.from_pretrained(minilm_dir)
    assert torch.equal(model.bert.embeddings.word_embeddings.weight, encoder.embeddings.word_embeddings.weight)
    named = minibert.BertForSequenceClassification.from_pretrained(minilm_dir, new_heads=True,
                                                                   id2label={0: "no", 1: "yes"})  # fmt: skip
    assert named.labels.label2id == {"no": 0, "yes": 1}
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['num_label'\\]"):
        minibert.BertForSequenceClassification.from_pretrained(minilm_dir, num_label=3)


def test_transformers_trainer_trains_as_it_trains_transformers(tmp_path):
    """transformers' Trainer (which sets ``model.config.use_cache`` on every model, and needs accelerate)
    on minibert's classifier and on transformers' own, loaded from one folder, dropout off: the same
    two logged losses, the same weights after two AdamW steps, and the same evaluation loss. Trainer saves
    a model that is not transformers' own as its state dict alone (minibert's tensor names, no
    config.json): ``trainer.model.save_pretrained(folder)`` writes a folder both libraries load, and
    from_pretrained on save_model's folder says so (docs/migrating.md)."""
    pytest.importorskip("accelerate")
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)  # fmt: skip
    inputs = batch()
    rows = [{key: value[row] for key, value in inputs.items()} | {"labels": torch.tensor(row % 3)} for row in range(3)]
    rows = rows * 4  # 12 rows: two steps of 4, then an evaluation
    results = {}
    for library in (transformers, minibert):
        model = library.BertForSequenceClassification.from_pretrained(directory)
        args = transformers.TrainingArguments(str(tmp_path / library.__name__), max_steps=2, learning_rate=1e-3,
                                              per_device_train_batch_size=4, logging_steps=1, report_to=[],
                                              save_strategy="no", use_cpu=True, seed=0, data_seed=0)  # fmt: skip
        trainer = transformers.Trainer(model=model, args=args, train_dataset=rows, eval_dataset=rows)
        trainer.train()
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        results[library.__name__] = losses, trainer.evaluate()["eval_loss"], model, trainer
    (their_losses, their_eval, reference, _), (losses, evaluation, ours, trainer) = results.values()
    assert len(losses) == 2 and losses == pytest.approx(their_losses, abs=ATOL), (losses, their_losses)
    assert evaluation == pytest.approx(their_eval, abs=ATOL)
    assert ours.config.use_cache is False  # what Trainer set (TrainingArguments.use_cache)
    theirs = dict(reference.named_parameters())
    for name, parameter in ours.named_parameters():
        if _hub_name(name, ours) in theirs:
            assert_close(parameter, theirs[_hub_name(name, ours)], f"{name} after two steps", ATOL)
    trainer.save_model(tmp_path / "save_model")
    with pytest.raises(minibert.ModelNotFoundError, match=r"Trainer.save_model.*trainer.model.save_pretrained"):
        minibert.BertForSequenceClassification.from_pretrained(tmp_path / "save_model")
    trainer.model.save_pretrained(tmp_path / "save_pretrained")
    loaded = transformers.BertForSequenceClassification.from_pretrained(tmp_path / "save_pretrained").eval()
    with torch.no_grad():
        assert_close(ours.eval()(**inputs).logits, loaded(**inputs).logits, "saved, loaded in transformers", ATOL)


def test_a_classifier_of_three_labels_loaded_as_question_answering_names_the_class_it_was_saved_from(tmp_path):
    """A 3-label sequence classifier (transformers saves ``architectures``) loaded as
    BertForQuestionAnswering: transformers builds a 3-output qa_outputs from random weights, which
    every pipeline call then fails to unpack. The cause is the class, not the label count: a
    CheckpointError naming config.json, the class it was saved from, and the class that loads it."""
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3)
    with pytest.raises(CheckpointError, match=re.escape(str(directory / "config.json")) + r" was saved from "
                       r"BertForSequenceClassification .*num_labels must be 2, not 3; load it with "
                       r"BertForSequenceClassification$"):  # fmt: skip
        minibert.BertForQuestionAnswering.from_pretrained(directory)
    assert minibert.BertForSequenceClassification.from_pretrained(directory).config.num_labels == 3


def test_a_head_whose_config_asks_for_what_it_cannot_compute_says_so():
    """A question-answering head of other than 2 outputs (transformers builds it, then every call
    fails unpacking), and a one-output classifier told single_label_classification (its cross-entropy
    is 0 for every input, so training learns nothing; transformers refuses the config): each a
    ValueError naming the field, not a raw error or a silent zero."""
    config = minibert.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32)  # fmt: skip
    with pytest.raises(ValueError, match="num_labels must be 2, not 3"):
        minibert.BertForQuestionAnswering(dataclasses.replace(config, extra={"num_labels": 3}))
    one = minibert.BertForSequenceClassification(dataclasses.replace(config, extra={"num_labels": 1}))
    one.config.problem_type = "single_label_classification"
    with pytest.raises(ValueError, match="needs two labels or more"):
        one(torch.tensor([[2, 5, 3]]), labels=torch.tensor([0]))
