"""Instances → padded features → TFRecord files, as Google's ``write_instance_to_example_files``.

Each instance becomes one ``tf.train.Example`` with Google's seven features, padded with zeros to
fixed lengths (``T`` = max_seq_length, ``P`` = max_predictions_per_seq)::

    input_ids             int64 (T,)   [CLS] A [SEP] B [SEP], masks applied, then 0s
    input_mask            int64 (T,)   1 for real pieces, 0 for padding
    segment_ids           int64 (T,)   0 for [CLS] A [SEP], 1 for B [SEP], 0 for padding
    masked_lm_positions   int64 (P,)   where the predictions are, ascending, then 0s
    masked_lm_ids         int64 (P,)   the original pieces there, then 0s
    masked_lm_weights     float (P,)   1.0 per real prediction, 0.0 for padding
    next_sentence_labels  int64 (1,)   1: B is from another document; 0: B follows A

With several output files, instance ``k`` goes to file ``k mod n`` (round-robin, as Google's
writer). Every file is written to a temporary beside it, and all of them are flushed to disk
before the first is renamed into place; should a rename fail or be interrupted, the files already
renamed are put back (formats/file_sets.py). A failed or interrupted run leaves every output file
as it was: never shards of two runs side by side.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import BinaryIO

import numpy as np

from ...formats.atomic_files import naming_the_file
from ...formats.tfrecord import encode_examples, frame_records
from .instances import TrainingInstance

# Records are encoded, framed (CRCs computed together) and written a batch at a time; a batch's
# padded arrays (and encode_examples' copies of them) take about this many bytes, whatever the lengths.
WRITE_BATCH_BYTES = 8 * 2**20

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                 "masked_lm_weights", "next_sentence_labels")  # fmt: skip


def instance_features(instance: TrainingInstance, max_seq_length: int, max_predictions: int) -> dict[str, list]:
    """The seven padded features of one instance (Google's feature names, order and dtypes)."""
    length, predictions = len(instance.input_ids), len(instance.masked_lm_positions)
    if length > max_seq_length or predictions > max_predictions:
        raise ValueError(f"an instance of {length} pieces and {predictions} predictions does not fit "
                         f"{max_seq_length} and {max_predictions}")  # fmt: skip
    sequence_padding, prediction_padding = [0] * (max_seq_length - length), [0] * (max_predictions - predictions)
    return {
        "input_ids": list(instance.input_ids) + sequence_padding,
        "input_mask": [1] * length + sequence_padding,
        "segment_ids": instance.segment_ids + sequence_padding,
        "masked_lm_positions": instance.masked_lm_positions + prediction_padding,
        "masked_lm_ids": instance.masked_lm_ids + prediction_padding,
        "masked_lm_weights": [1.0] * predictions + [0.0] * (max_predictions - predictions),
        "next_sentence_labels": [1 if instance.is_random_next else 0],
    }


def padded_columns(instances: Sequence[TrainingInstance], max_seq_length: int, max_predictions: int) -> dict:
    """The seven features of many instances as (N, T) and (N, P) arrays, rows as ``instance_features``."""
    rows = len(instances)
    columns = {name: np.zeros((rows, max_seq_length), dtype=np.int64) for name in FEATURE_NAMES[:3]}
    columns.update({name: np.zeros((rows, max_predictions), dtype=np.int64) for name in FEATURE_NAMES[3:5]})
    columns["masked_lm_weights"] = np.zeros((rows, max_predictions), dtype=np.float32)
    columns["next_sentence_labels"] = np.array([[int(i.is_random_next)] for i in instances], dtype=np.int64)
    for row, instance in enumerate(instances):
        length, predictions = len(instance.input_ids), len(instance.masked_lm_positions)
        if length > max_seq_length or predictions > max_predictions:
            instance_features(instance, max_seq_length, max_predictions)  # raises, naming the sizes
        columns["input_ids"][row, :length] = instance.input_ids
        columns["input_mask"][row, :length] = 1
        columns["segment_ids"][row, instance.a_length + 2 : length] = 1
        columns["masked_lm_positions"][row, :predictions] = instance.masked_lm_positions
        columns["masked_lm_ids"][row, :predictions] = instance.masked_lm_ids
        columns["masked_lm_weights"][row, :predictions] = 1.0
    return columns


def write_shards(
    instances: Sequence[TrainingInstance],
    handles: Sequence[BinaryIO],
    paths: Sequence[str | os.PathLike],
    max_seq_length: int,
    max_predictions: int,
) -> list[int]:
    """Write the instances round-robin as TFRecords into open files (``handles``, from
    ``files_written_together``, which renames them into place together; ``paths``: their names, for
    messages): instance k goes to file k mod n. The count written to each. Streamed: records are
    encoded together (encode_examples) in batches of about ``WRITE_BATCH_BYTES`` of padded arrays, so
    the writer's memory does not grow with ``max_seq_length``."""
    counts = [0] * len(handles)
    rows = batch_rows(max_seq_length, max_predictions)
    for shard, (path, handle) in enumerate(zip(paths, handles)):
        mine = instances[shard :: len(handles)]  # instance k goes to file k mod n
        for start in range(0, len(mine), rows):
            batch = mine[start : start + rows]
            with naming_the_file(path):  # a full disk names no file: say which
                handle.write(frame_records(encode_examples(padded_columns(batch, max_seq_length, max_predictions))))
        counts[shard] = len(mine)
    return counts


def batch_rows(max_seq_length: int, max_predictions: int) -> int:
    """Instances per write batch: as many as fit ``WRITE_BATCH_BYTES`` of padded columns (int64
    (N, T) three times, (N, P) twice, float32 (N, P), the label), counted twice for encode_examples'
    copies; at least one. 128 pieces and 20 predictions: 1,205; 512 and 80: 301 (it was 1,024 whatever
    the lengths, so 100,000 pieces took gigabytes).

    >>> batch_rows(128, 20), batch_rows(512, 80)
    (1205, 301)
    """
    row_bytes = 8 * (3 * max_seq_length + 2 * max_predictions) + 4 * max_predictions + 8
    return max(1, WRITE_BATCH_BYTES // (2 * row_bytes))
