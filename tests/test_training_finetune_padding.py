"""Padding to the batch's longest row (``Features.batch``, what ``minibert finetune`` trains on)
gives the numbers of Google's batch padded to ``max_seq_length``: the loss and every gradient of
minibert's step on the cut batch equal transformers' BertForSequenceClassification on the full
max_seq_length-wide batch (the reference), from the same weights, dropout 0.

Why it holds: a padded column is masked out of every real token's attention (its score gets
-10000 or -inf before the softmax, exp → 0 in fp32), and the classifier reads only [CLS]; so the
columns that are padding in every row change no real number. What differs is the order of fp32
sums (softmax over max_seq_length vs the longest row's columns; GEMMs of other shapes): relative ~1e-6.
Tolerance: 1e-5 of each tensor's largest |gradient| (plus 1e-9 absolute for all-zero tensors).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from helpers import assert_close  # noqa: E402
from minibert.training.run.loop import set_dropout  # noqa: E402
from minibert.training.run.optimization import hub_named_parameters  # noqa: E402
from minibert.training.tasks import task_named  # noqa: E402
from minibert.training.tasks.features import Features  # noqa: E402
from minibert.training.tasks.head import load_classifier  # noqa: E402
from tiny_hub import TINY  # noqa: E402

PROBLEM = "single_label_classification"


def padded_features(vocab: int, width: int, rows: int = 6) -> Features:
    """Rows of 5 … 40 real tokens padded with 0s to ``width`` (max_seq_length), as Google's features are."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 41, rows)
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)  # (N, T)
    ids = rng.integers(5, vocab, (rows, width)) * mask
    segments = ((np.arange(width)[None, :] >= lengths[:, None] // 2) * mask).astype(np.int64)
    return Features(ids, mask, segments, rng.integers(0, 2, rows))


def test_cut_batch_has_the_padded_batchs_loss_and_gradients(tmp_path):
    ours = set_dropout(load_classifier(str(TINY), ["a", "b"], PROBLEM, continues=False, seed=3), 0.0).train()
    ours.save_pretrained(tmp_path)
    theirs = transformers.BertForSequenceClassification.from_pretrained(
        tmp_path, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout=0.0).train()
    features = padded_features(ours.config.vocab_size, ours.config.max_position_embeddings)
    rows = np.arange(len(features))
    cut = {name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in features.batch(rows).items()}
    assert cut["input_ids"].shape[1] == features.input_mask.sum(1).max() < features.input_ids.shape[1]  # cut

    loss = task_named("classify").sums(ours, cut, {"batch_size": float(len(rows))}).loss
    loss.backward()
    reference = theirs(input_ids=torch.from_numpy(features.input_ids), attention_mask=torch.from_numpy(
        features.input_mask), token_type_ids=torch.from_numpy(features.segment_ids),
        labels=torch.from_numpy(features.label_ids)).loss  # fmt: skip
    reference.backward()

    worst = {"loss": assert_close(loss.detach(), reference.detach(), "loss", atol=1e-6)}
    expected = dict(theirs.named_parameters())
    for name, parameter in hub_named_parameters(ours):
        gradient = expected[name].grad
        bound = 1e-5 * gradient.abs().max().item() + 1e-9
        worst[name] = assert_close(parameter.grad, gradient, f"gradient of {name}", atol=bound)
    assert len(worst) == len(expected) + 1  # every parameter compared
    print(f"max |Δ| loss {worst['loss']:.2e}, gradients {max(worst.values()):.2e}")
