"""``--task regress``: a score per text or pair (GLUE's STS-B: how alike two sentences are, 0 … 5).

The classify task with one output and Google's regression loss (as transformers' ``problem_type``
"regression"): the mean squared error over the global batch,

    score = W · dropout(pooled) + b           (B, 1)
    loss  = Σ (score − label)² / B

and its dev figures the correlations of the predicted scores with the gold ones (Pearson's and
Spearman's, the latter the main one, as the GLUE benchmark reports STS-B).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .classify import Classify
from .metrics import pearson, spearman
from .task import PieceSums, TrainingData


class Regress(Classify):
    name = "regress"

    def labels_of(self, examples, options, separator: str | None) -> None:
        return None  # a score, not labels: one output

    def sums(self, model, piece: dict[str, torch.Tensor], denominators: dict[str, float]) -> PieceSums:
        scores, labels = self.logits(model, piece).squeeze(-1), piece["label_ids"]  # (B,), (B,)
        loss = F.mse_loss(scores, labels.float(), reduction="sum") / denominators["batch_size"]
        return PieceSums(loss, {"loss": loss.detach()})

    def figures(self, sums: dict[str, float], denominators: dict[str, float]) -> dict[str, float]:
        return {"loss": sums["loss"]}  # no accuracy for a score

    def metrics(self, gold: np.ndarray, logits: np.ndarray, data: TrainingData, options) -> dict[str, float]:
        scores = logits[:, 0]
        return {"pearson": pearson(gold, scores), "spearman": spearman(gold, scores)}

    def main_metric(self, options) -> str:
        return "spearman"


TASK = Regress()
