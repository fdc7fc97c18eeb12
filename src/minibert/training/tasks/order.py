"""The order the training examples are seen in, one ``rows(step)`` per global batch.

Fine-tuning (``TrainingOrder``): a new seeded shuffle each epoch, the epochs one
after another, cut into batches of B — a batch can straddle two epochs, as Google's
``d.repeat().shuffle()`` pipeline with ``drop_remainder`` lets it. Google trains
``int(N / B × epochs)`` steps (N examples), and so does this.

    >>> order = TrainingOrder(examples=5, batch_size=2, seed=0)
    >>> [order.rows(step).tolist() for step in range(3)]     # epoch 0: 2 4 3 0 1, then epoch 1 begins
    [[2, 4], [3, 0], [1, 1]]
    >>> [order.ends_epoch(step) for step in (1, 2, 3, 5)]     # after 3 steps, 6 examples: epoch 1 ended
    [False, False, True, True]

The order is a pure function of (N, B, seed), so a resumed run continues it, and ``write`` puts
it in the run folder (``order.jsonl``: one line per step, the 0-based indices of its examples in
the training file) for any reference to replay.

Each epoch's shuffle is drawn once: ``epoch_permutation`` keeps the last two (a batch may straddle
two epochs), so a step costs O(B), not O(N), and writing order.jsonl costs O(epochs × N + steps × B),
line by line to the file. What is held is two epochs' N row numbers (8 bytes each), never the features.

Pre-training (``InstanceOrder``): Google's ``run_pretraining.py`` reads the instances as they stand
in the TFRecord files (create_pretraining_data.py shuffled them already): batch k holds instances
kB … kB + B − 1, wrapping at the end.

    >>> [InstanceOrder(instances=5, batch_size=2).rows(step).tolist() for step in range(3)]
    [[0, 1], [2, 3], [4, 0]]
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...formats.atomic_files import atomic_output

ORDER_FILE = "order.jsonl"


@functools.lru_cache(maxsize=2)  # this epoch and the next: a batch straddles at most two
def epoch_permutation(examples: int, seed: int, epoch: int) -> np.ndarray:
    """Epoch ``epoch``'s order (0-based): a permutation of 0 … N − 1, drawn from (seed, epoch) once
    and kept (read-only: every caller shares it)."""
    permutation = np.random.default_rng([seed, epoch]).permutation(examples)
    permutation.flags.writeable = False
    return permutation


@dataclass(frozen=True)
class TrainingOrder:
    examples: int  # N
    batch_size: int  # B, the global batch
    seed: int

    def permutation(self, epoch: int) -> np.ndarray:
        """Epoch ``epoch``'s order (0-based): a permutation of 0 … N − 1, from (seed, epoch); read-only."""
        return epoch_permutation(self.examples, self.seed, epoch)

    def rows(self, step: int) -> np.ndarray:
        """The examples of the batch after ``step`` updates (0-based): (B,) indices."""
        positions = np.arange(step * self.batch_size, (step + 1) * self.batch_size)
        epochs = positions // self.examples
        rows = np.empty(self.batch_size, dtype=np.int64)
        for epoch in np.unique(epochs):
            chosen = epochs == epoch
            rows[chosen] = self.permutation(int(epoch))[positions[chosen] % self.examples]
        return rows

    def ends_epoch(self, step: int) -> bool:
        """Whether update ``step`` (1-based) finishes an epoch: its batch reached the last example of one."""
        return step * self.batch_size // self.examples > (step - 1) * self.batch_size // self.examples

    def write(self, run: Path, steps: int) -> None:
        """order.jsonl: ``{"step": s, "examples": [...]}`` for s = 1 … ``steps``, written line by line
        (steps run through the epochs in order, so each epoch's permutation is drawn once)."""
        with atomic_output(run / ORDER_FILE) as handle:
            for step in range(steps):
                line = json.dumps({"step": step + 1, "examples": self.rows(step).tolist()}) + "\n"
                handle.write(line.encode("utf-8"))


@dataclass(frozen=True)
class InstanceOrder:
    instances: int  # N
    batch_size: int  # B, the global batch

    def rows(self, step: int) -> np.ndarray:
        """Global batch ``step`` (0-based): instances step·B … step·B + B − 1, wrapping. (B,)"""
        return (step * self.batch_size + np.arange(self.batch_size)) % self.instances

    def ends_epoch(self, step: int) -> bool:
        """Pre-training counts steps, not epochs: no checkpoint or evaluation falls on an epoch's end."""
        return False
