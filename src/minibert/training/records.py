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
writer). Every file is written to a temporary beside it and renamed into place only when all of
them are complete: a failed run leaves none of them (formats/atomic_files.py).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence

from ..formats.atomic_files import atomic_output
from ..formats.tfrecord import write_examples
from .instances import TrainingInstance

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
        "input_ids": instance.input_ids + sequence_padding,
        "input_mask": [1] * length + sequence_padding,
        "segment_ids": instance.segment_ids + sequence_padding,
        "masked_lm_positions": instance.masked_lm_positions + prediction_padding,
        "masked_lm_ids": instance.masked_lm_ids + prediction_padding,
        "masked_lm_weights": [1.0] * predictions + [0.0] * (max_predictions - predictions),
        "next_sentence_labels": [1 if instance.is_random_next else 0],
    }


def write_instances(
    instances: Iterable[TrainingInstance],
    paths: Sequence[str | os.PathLike],
    max_seq_length: int,
    max_predictions: int,
) -> list[int]:
    """Write the instances round-robin over ``paths`` as TFRecords; the count written to each."""
    shards: list[list[dict]] = [[] for _ in paths]
    for number, instance in enumerate(instances):
        shards[number % len(paths)].append(instance_features(instance, max_seq_length, max_predictions))
    with contextlib.ExitStack() as stack:  # all files renamed into place together, or none
        handles = [stack.enter_context(atomic_output(path)) for path in paths]
        return [write_examples(handle, shard) for handle, shard in zip(handles, shards)]
