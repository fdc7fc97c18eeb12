"""``--task multilabel``: any number of labels per text (topics, tags, toxicity kinds), read from
a label field that joins them with ``--label-separator`` (``sports|politics``).

The classify task with one independent yes/no per label (transformers' ``problem_type``
"multi_label_classification"): a sigmoid cross-entropy per label, averaged over the labels and
summed over the global batch,

    logits = W · dropout(pooled) + b                        (B, K); label_ids (B, K) multi-hot
    loss   = Σ_examples mean_labels BCE(σ(logits), labels) / B

A label is predicted where its logit is above 0 (σ > 0.5); an example counts as right when every
one of its K labels is.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .classify import Classify
from .task import PieceSums, TrainingData


class Multilabel(Classify):
    name = "multilabel"

    def label_separator(self, options) -> str:
        return options.label_separator

    def sums(self, model, piece: dict[str, torch.Tensor], denominators: dict[str, float]) -> PieceSums:
        logits, labels = self.logits(model, piece), piece["label_ids"]  # (B, K), (B, K) 0/1
        per_label = F.binary_cross_entropy_with_logits(logits, labels.float(), reduction="none")  # (B, K)
        loss = per_label.mean(-1).sum() / denominators["batch_size"]
        correct = ((logits > 0) == (labels > 0.5)).all(-1).sum()
        return PieceSums(loss, {"loss": loss.detach(), "correct": correct})

    def metrics(self, gold: np.ndarray, logits: np.ndarray, data: TrainingData, options) -> dict[str, float]:
        return {"accuracy": float(np.mean(((logits > 0) == (gold > 0.5)).all(-1)))}

    def main_metric(self, options) -> str:
        return "accuracy"


TASK = Multilabel()
