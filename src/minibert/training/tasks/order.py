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

Pre-training (``InstanceOrder``): Google's ``run_pretraining.py`` reads the instances as they stand
in the TFRecord files (create_pretraining_data.py shuffled them already): batch k holds instances
kB … kB + B − 1, wrapping at the end.

    >>> [InstanceOrder(instances=5, batch_size=2).rows(step).tolist() for step in range(3)]
    [[0, 1], [2, 3], [4, 0]]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...formats.atomic_files import write_atomically

ORDER_FILE = "order.jsonl"


@dataclass(frozen=True)
class TrainingOrder:
    examples: int  # N
    batch_size: int  # B, the global batch
    seed: int

    def permutation(self, epoch: int) -> np.ndarray:
        """Epoch ``epoch``'s order (0-based): a permutation of 0 … N − 1, from (seed, epoch)."""
        return np.random.default_rng([self.seed, epoch]).permutation(self.examples)

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
        lines = (json.dumps({"step": step + 1, "examples": self.rows(step).tolist()}) for step in range(steps))
        write_atomically(run / ORDER_FILE, ("\n".join(lines) + "\n").encode("utf-8"))


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
