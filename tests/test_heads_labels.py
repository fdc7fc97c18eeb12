"""The labels a head's loss takes, against transformers': integer class ids of any dtype, integer
multi-hot labels with the multi-label problem type, pytorch-pretrained-bert's label keywords, labels
at padding with skip_padding; and the labels a loss cannot take, refused naming them.

Tolerance: 1e-5, the parity bound of every other layer test (fp32 sums of ≤ 64 terms at values
of magnitude ≤ ~10, compared element by element).
"""

from __future__ import annotations

import re

import pytest
import torch

import minibert
from head_checkpoints import ATOL, HEADS, MULTI_HOT, batch, checkpoint_name, labels_for, saved
from helpers import assert_close
from minibert.errors import InputTypeError

transformers = pytest.importorskip("transformers")


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
        if checkpoint_name(our_name, ours) in theirs:
            grad = theirs[checkpoint_name(our_name, ours)].grad
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
