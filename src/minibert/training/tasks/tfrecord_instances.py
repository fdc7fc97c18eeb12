"""Google's pre-training instances, read from TFRecord files, checked, and cut into batches.

``create_pretraining_data.py`` (and ``minibert pretraining-data``) writes one ``tf.train.Example``
per instance, with these features (T = max_seq_length, P = max_predictions_per_seq)::

    input_ids             int64 (T,)   [CLS] A [SEP] B [SEP] then [PAD]s
    input_mask            int64 (T,)   1 for real tokens, 0 for padding
    segment_ids           int64 (T,)   0 for [CLS] A [SEP], 1 for B [SEP], 0 for padding
    masked_lm_positions   int64 (P,)   where the masked pieces are (0 for padding)
    masked_lm_ids         int64 (P,)   the pieces that were there (0 for padding)
    masked_lm_weights     float (P,)   1.0 for a real prediction, 0.0 for padding
    next_sentence_labels  int64 (1,)   0 = B follows A, 1 = B is a random sentence

P may be 0: Google's script writes the three masked-LM features empty under
``--max_predictions_per_seq=0``. Such instances train the next-sentence head alone: the masked-LM
loss is Google's Σ w·CE / (Σ w + 1e-5) = 0 / 1e-5 = 0, as in run_pretraining.py.

Every record of every file is read and checked before the first step (a bad record found at step
90,000 would waste a day): CRCs (formats/tfrecord.py), then each feature's presence, type and size,
then the values against the model (ids within the vocabulary, segments within type_vocab_size,
T within the position table, positions within T). A problem is a ``DataError`` naming the file, the
record (0-based) and the feature. Features not listed above are ignored, as TensorFlow's
``parse_single_example`` ignores features it is not asked for. ``minibert pretrain`` then checks the
ids against the tokenizer it saves with the model (``check_tokenizer_ids``).

Batches are taken in the files' order (the instances were shuffled when made, as Google's are):
global batch k is instances k·B … k·B+B−1, wrapping around at the end.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...config import BertConfig
from ...errors import DataError
from ...formats.tfrecord import read_examples

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")  # (T,) each
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")  # (P,) each
FEATURES = (*SEQUENCE_FEATURES, *PREDICTION_FEATURES, "next_sentence_labels")
FLOAT_FEATURES = {"masked_lm_weights"}


@dataclass
class Instances:
    """All instances of the data files, as arrays: ``arrays[name]`` is (N, T), (N, P) or (N,)."""

    arrays: dict[str, np.ndarray]
    files: list[Path]
    counts: list[int]  # records per file

    def __len__(self) -> int:
        return len(self.arrays["next_sentence_labels"])

    @property
    def sequence_length(self) -> int:  # T
        return self.arrays["input_ids"].shape[1]

    @property
    def predictions(self) -> int:  # P
        return self.arrays["masked_lm_ids"].shape[1]

    def batch(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The instances at ``rows`` (which rows: tasks/order.py ``InstanceOrder``), every feature."""
        return {name: array[rows] for name, array in self.arrays.items()}

    @functools.cached_property
    def fingerprint(self) -> str:
        """SHA-256 of every array: a run resumed on other data is refused."""
        digest = hashlib.sha256()
        for name in FEATURES:
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(self.arrays[name]).tobytes())
        return digest.hexdigest()


def read_instances(paths: list[str | os.PathLike], config: BertConfig, config_name: str = "config.json") -> Instances:
    """Read and check every record of ``paths`` (TFRecord files) for a model of ``config``; a value
    beyond one of its limits is refused naming ``config_name``, where the limit comes from (``minibert
    pretrain`` passes the --config file given)."""
    if not paths:
        raise DataError("no data: give one or more TFRecord files of pre-training instances (--data)")
    columns: dict[str, list[np.ndarray]] = {name: [] for name in FEATURES}
    shapes: dict[str, int] = {}
    first: dict[str, str] = {}  # the record that set each size, for the message
    files = [Path(path) for path in paths]
    counts = []
    for path in files:
        if path.is_dir():
            raise DataError(f"data file {path} is a directory, not a TFRecord file")
        for index, example in enumerate(read_examples(path)):
            where = f"TFRecord file {path}, record {index} (0-based)"
            for name in FEATURES:
                columns[name].append(_feature(example, name, where, shapes, first))
        counts.append(len(columns["input_ids"]) - sum(counts))
    if not columns["input_ids"]:
        raise DataError(f"no instances in {', '.join(map(str, files))}: the data files hold no records")
    arrays = {name: np.stack(values) for name, values in columns.items()}
    arrays["next_sentence_labels"] = arrays["next_sentence_labels"][:, 0]  # (N, 1) → (N,)
    instances = Instances(arrays, files, counts)
    _check_values(instances, config, config_name)
    return instances


def _feature(example: dict, name: str, where: str, shapes: dict[str, int], first: dict[str, str]) -> np.ndarray:
    """One feature of one record, checked for presence, type and size (the same size in every record)."""
    if name not in example:
        raise DataError(f"{where}: feature {name!r} is missing (a pre-training instance has {', '.join(FEATURES)})")
    value = example[name]
    expected = np.float32 if name in FLOAT_FEATURES else np.int64
    if not isinstance(value, np.ndarray) or value.dtype != expected:
        kind = "bytes" if isinstance(value, list) else ("float" if value.dtype == np.float32 else "int64")
        wanted = "float" if expected == np.float32 else "int64"
        raise DataError(f"{where}: feature {name!r} holds {kind} values, expected {wanted}")
    group = "T" if name in SEQUENCE_FEATURES else "P" if name in PREDICTION_FEATURES else "1"
    size = shapes.setdefault(group, 1 if group == "1" else len(value))
    first.setdefault(group, f"{name} of {where}")  # the record that set the size (in another file, maybe)
    if len(value) != size:
        raise DataError(f"{where}: feature {name!r} has {len(value)} values, expected {size} ({_why(group, first)})")
    if size == 0 and group == "T":  # (P = 0 is Google's --max_predictions_per_seq=0: no masked-LM predictions)
        raise DataError(f"{where}: feature {name!r} is empty: an instance without tokens")
    return value


def _why(group: str, first: dict[str, str]) -> str:
    """Why a feature's size is expected: the record that set it, named with its file."""
    if group == "1":
        return "one next-sentence label per instance"
    kind = "max_seq_length" if group == "T" else "max_predictions_per_seq"
    return f"as {first[group]}: the instances of every --data file share one {kind}"


def _check_values(instances: Instances, config: BertConfig, config_name: str) -> None:
    """The values of every instance against the model, vectorized; the first bad record is named."""
    arrays = instances.arrays
    T = instances.sequence_length
    if T > config.max_position_embeddings:
        raise DataError(
            f"{_where(instances, 0)}: instances of {T} tokens are longer than the model's "
            f"max_position_embeddings = {config.max_position_embeddings} ({config_name})"
        )
    weights = arrays["masked_lm_weights"]
    checks = [
        ("input_ids", (arrays["input_ids"] < 0) | (arrays["input_ids"] >= config.vocab_size),
         f"an id beyond the model's vocabulary (vocab_size = {config.vocab_size})"),
        ("masked_lm_ids", (arrays["masked_lm_ids"] < 0) | (arrays["masked_lm_ids"] >= config.vocab_size),
         f"an id beyond the model's vocabulary (vocab_size = {config.vocab_size})"),
        ("segment_ids", (arrays["segment_ids"] < 0) | (arrays["segment_ids"] >= config.type_vocab_size),
         f"a segment id beyond type_vocab_size = {config.type_vocab_size}"),
        ("input_mask", (arrays["input_mask"] != 0) & (arrays["input_mask"] != 1), "a value other than 0 and 1"),
        ("masked_lm_positions", (arrays["masked_lm_positions"] < 0) | (arrays["masked_lm_positions"] >= T),
         f"a position outside the {T} tokens"),
        ("masked_lm_weights", ~np.isfinite(weights) | (weights < 0), "a weight that is negative or not finite"),
        ("next_sentence_labels", (arrays["next_sentence_labels"] != 0) & (arrays["next_sentence_labels"] != 1),
         "a label other than 0 (B follows A) and 1 (B is random)"),
    ]  # fmt: skip
    for name, bad, problem in checks:
        rows = np.flatnonzero(bad.reshape(len(instances), -1).any(axis=1))
        if len(rows):
            raise DataError(f"{_where(instances, int(rows[0]))}: feature {name!r} holds {problem}")


def check_tokenizer_ids(instances: Instances, size: int, tokenizer: str, config: BertConfig) -> None:
    """Refuse ids the run's tokenizer cannot produce (``size``: its largest id + 1; ``tokenizer``: where
    it comes from, for the message). ``read_instances`` checks ids against the model's vocab_size,
    which may exceed the tokenizer's (a vocabulary padded to a round number): an id in between has an
    embedding row, so training runs, but it learns a piece the saved tokenizer never gives, and its
    predictions decode to nothing. Such instances were made with another vocab.txt."""
    for name in ("input_ids", "masked_lm_ids"):
        values = instances.arrays[name]
        rows = np.flatnonzero((values >= size).any(axis=1))
        if len(rows):
            row = int(rows[0])
            found = int(values[row][values[row] >= size][0])
            raise DataError(f"{_where(instances, row)}: feature {name!r} holds id {found:,}, which {tokenizer} cannot "
                            f"give: it has {size:,} ids (0 to {size - 1:,}) and the model's vocab_size is "
                            f"{config.vocab_size:,}; the instances were made with another vocabulary: pre-train "
                            "with the vocab.txt they were made with, or make them again with this one")  # fmt: skip


def _where(instances: Instances, row: int) -> str:
    """'TFRecord file F, record R (0-based)' for the row-th instance over all files."""
    for path, count in zip(instances.files, instances.counts):
        if row < count:
            return f"TFRecord file {path}, record {row} (0-based)"
        row -= count
    return f"instance {row} (0-based)"
