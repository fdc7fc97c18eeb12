"""Pre-training instances for the training tests, written as TFRecords with formats/tfrecord.py.

Random but well-formed instances in Google's layout: [CLS] A [SEP] B [SEP] then padding, a few
masked positions per instance (their count varies, so split batches have different Σ weights),
random next-sentence labels. Ids are drawn from ``low`` … vocab_size − 1 (above the special pieces).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from minibert.formats.atomic_files import atomic_output
from minibert.formats.tfrecord import write_examples


def random_instances(count: int, vocab_size: int, seq_len: int = 16, predictions: int = 4, seed: int = 0,
                     low: int = 5, cls: int = 2, sep: int = 3) -> list[dict]:  # fmt: skip
    rng = np.random.default_rng(seed)
    instances = []
    for _ in range(count):
        length = int(rng.integers(seq_len // 2, seq_len + 1))  # real tokens, [CLS] and [SEP]s included
        first = int(rng.integers(1, length - 3))  # A's pieces
        ids = np.zeros(seq_len, np.int64)
        ids[:length] = rng.integers(low, vocab_size, length)
        ids[0], ids[first + 1], ids[length - 1] = cls, sep, sep
        segments = np.zeros(seq_len, np.int64)
        segments[first + 2 : length] = 1
        mask = (np.arange(seq_len) < length).astype(np.int64)
        masked = int(rng.integers(1, predictions + 1))
        candidates = [i for i in range(1, length - 1) if i != first + 1]
        positions = np.sort(rng.choice(candidates, masked, replace=False))
        padded = np.zeros(predictions, np.int64)
        padded[:masked] = positions
        labels = np.zeros(predictions, np.int64)
        labels[:masked] = ids[positions]
        ids[positions] = 4  # [MASK] in the test vocabularies (an id like any other to the model)
        weights = np.zeros(predictions, np.float32)
        weights[:masked] = 1.0
        instances.append({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                          "masked_lm_positions": padded, "masked_lm_ids": labels, "masked_lm_weights": weights,
                          "next_sentence_labels": np.array([rng.integers(0, 2)], np.int64)})  # fmt: skip
    return instances


def write_instances(path: Path, instances: list[dict]) -> Path:
    with atomic_output(path) as handle:
        write_examples(handle, instances)
    return path
