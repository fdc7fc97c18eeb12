"""The heads' tests' checkpoints and checks (test_heads*.py): ``saved``, a random transformers model
of a head's class saved as the hub stores it; ``batch``, three sequences (two right-padded, a pair's
segment ids); ``labels_for`` a head; ``compare_logits`` (every output, against float64 within
helpers.bound_from_exact where given it); ``checkpoint_name``, a parameter's name in transformers'
checkpoint.

ATOL is 1e-5, the parity bound of every other layer test (fp32 sums of ≤ 64 terms at values of
magnitude ≤ ~10, compared element by element).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers import assert_close, bound_from_exact

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


def checkpoint_name(our_name: str, model) -> str:
    from minibert.loading.names import HEAD_PREFIXES, minibert_to_checkpoint

    body = our_name.removeprefix("bert.")
    hub = minibert_to_checkpoint(body)
    if our_name.startswith(HEAD_PREFIXES):
        return hub
    hub = "bert." + hub
    return hub.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")


MULTI_HOT = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])  # floats: multi-label unless told
