"""A task: what one training run teaches a BERT, written as one record the loop reads.

The loop (run/loop.py) is the same for every task — set up, then one step per global batch:
forward, backward, sum over processes, clip, update, log, evaluate, checkpoint. What differs
between pre-training and fine-tuning, and between one fine-tuning task and another, is what a
``Task`` says, in this order (the order the loop asks):

    prepare(options, world)           read and check the data, before the run folder is touched
    network(options, data)            the model with the task's head (new weights: from the seed)
    denominators(train, rows)         what the global batch's losses are divided by (Google's)
    sums(model, piece, denominators)  one piece of the batch: its share of the loss, the figures it adds up
    figures(sums, denominators)       the step's metrics line, from the sums over every piece and process
    evaluate(model, data, options, run)   the dev figures (fine-tuning; the main one picks best/)
    dev_fingerprint(data)             what identifies the dev set (a resume must evaluate on the same one)
    start(run, options, data)         what a new run writes and says besides its first checkpoint

Each task is one module of tasks/ (pretraining.py, classify.py, regress.py, multilabel.py, tag.py,
answer.py), as each dataset is one ``DataProcessor`` in Google's run_classifier.py, and the loop
chooses it from one table (tasks/__init__.py ``task_named``).

Shape legend: B = examples in a piece of the batch, T = tokens, K = labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch


@dataclass
class TrainingData:
    """Everything ``prepare`` read and checked: the loop's data, how many steps it makes, and the
    files the run folder gets (the tokenizer; the labels, for fine-tuning's classifiers)."""

    train: object  # Instances (pre-training) or Features: len(), .fingerprint, .batch(rows), .sequence_length
    order: object  # which rows each global batch holds: .rows(step), .ends_epoch(step) (tasks/order.py)
    steps: int  # updates the run makes (the schedule reaches 0 there)
    warmup: int  # updates that warm the rate up from 0
    tokenizer: object  # saved with every checkpoint
    dev: object | None = None  # evaluated at each epoch's end (fine-tuning with --dev)
    labels: list[str] | None = None  # the classifier's labels in id order; None: a score, or no classifier
    head_continues: bool = False  # the checkpoint's own head goes on training (else a new one is drawn)
    config: object | None = None  # pre-training: the BertConfig the instances were checked against


# A piece's arrays that are the model's inputs: they stay on the CPU (``piece_tensors``)
MODEL_INPUTS = frozenset({"input_ids", "input_mask", "segment_ids"})


def piece_tensors(arrays: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    """A piece of a batch (``train.batch(rows)``) as ``sums`` takes it: the model's inputs (ids, mask,
    segments) on the CPU, where the model checks them and lays out the mask's real tokens before it
    copies them to its device without waiting (model.py); the rest (labels, positions, weights) on
    ``device``, copied without waiting. Read on a GPU, the mask would make the CPU wait for the GPU."""
    piece = {name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in arrays.items()}
    return {name: tensor if name in MODEL_INPUTS else tensor.to(device, non_blocking=True)
            for name, tensor in piece.items()}  # fmt: skip


@dataclass
class PieceSums:
    """What one piece of a global batch adds: its share of the global loss (already divided by
    the global denominators, so the pieces' gradients add up to the whole batch's) and the figures
    the step's line is made of, summed over pieces and processes. The figures are 0-d tensors where
    the model computed them, read by the loop once a step, after every piece's backward: reading
    one as a number (``.item()``, ``float()``) makes the CPU wait for a GPU to finish the forward
    pass before it may start queuing the backward."""

    loss: torch.Tensor
    figures: dict[str, torch.Tensor]

    def stacked_figures(self) -> torch.Tensor:
        """The figures as one float64 tensor (figures,), in ``figures``' order, where they were
        computed (float32 values widened exactly: their sums over pieces and processes are float64's)."""
        return torch.stack([value.to(torch.float64) for value in self.figures.values()])


class Task:
    """The record of one task; the defaults are fine-tuning's (a subclass states what differs)."""

    name: str  # --task (fine-tuning); "pretraining"
    command: str = "finetune"  # the command that trains it (the resume advice names it)
    # the step's figures the non-finite guard checks before an update, and their names in its message
    watched: dict[str, str] = {"loss": "loss", "gradient_norm": "gradient norm"}  # noqa: RUF012

    def prepare(self, options, world) -> TrainingData:
        raise NotImplementedError

    def network(self, options, data: TrainingData) -> torch.nn.Module:
        raise NotImplementedError

    def denominators(self, train, rows: np.ndarray) -> dict[str, float]:
        """Fine-tuning's default: the per-example losses are divided by the global batch's size."""
        return {"batch_size": float(len(rows))}

    def sums(self, model, piece: dict[str, torch.Tensor], denominators: dict[str, float]) -> PieceSums:
        raise NotImplementedError

    def tokens(self, train, rows: np.ndarray) -> int:
        """What the global batch's tokens per second count, fine-tuning's default: its real tokens (the
        input masks' sum), as a batch is cut to its longest row and the step skips padding — not
        ``len(rows) × --max-seq-length``, which grows with the limit for the same data and work."""
        return int(train.input_mask[rows].sum())

    def figures(self, sums: dict[str, float], denominators: dict[str, float]) -> dict[str, float]:
        """Fine-tuning's default: the loss, and the share of the batch predicted right."""
        return {"loss": sums["loss"], "accuracy": sums["correct"] / denominators["batch_size"]}

    def main_metric(self, options) -> str | None:
        """The dev figure that picks ``best/`` (None: the task has no dev evaluation)."""
        return None

    def evaluate(self, model, data: TrainingData, options, run: Path) -> dict[str, float]:
        raise NotImplementedError

    def dev_fingerprint(self, data: TrainingData) -> dict | None:
        """What identifies the dev set, kept in the training state so that a resume evaluates on the
        same one (run/checkpoint.py): the SHA-256 of its features, as the training data's, and the
        count of its examples (said when they differ). None without a dev set."""
        if data.dev is None:
            return None
        return {"fingerprint": data.dev.fingerprint, "examples": self.examples_counted(data.dev)}

    def examples_counted(self, features) -> int:
        """The examples a set of features holds (SQuAD: its questions, not their windows)."""
        return len(features)

    def start(self, run: Path, options, data: TrainingData) -> None:
        """What a new run writes and says besides its first checkpoint (nothing by default)."""

    def describe_run(self, run: Path, options, data: TrainingData, resumed_at: int | None = None) -> None:
        """The description files ``start`` writes, those missing (a resumed run killed before them);
        ``resumed_at``: the step a resume continues from (what changed since is noted)."""

    def summary(self, last: dict) -> str:
        """The closing line's detail, from the last step's metrics line, beside the loss it already
        gives (pre-training: its two losses); none by default."""
        return ""
