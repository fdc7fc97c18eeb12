"""The exceptions minibert raises on purpose.

Every error a user can cause (a bad checkpoint, a missing model, bad input ids) is raised as one of
these, or as a plain ``ValueError`` / ``TypeError`` for malformed arguments, with a message that
names the culprit: the file, the tensor, the limit. Catch ``MinibertError`` to catch them all.
"""


class MinibertError(Exception):
    """Base class of minibert's own errors."""


class CheckpointError(MinibertError):
    """A checkpoint file (config.json, vocab.txt, weights) is missing, corrupt or does not fit."""


class ModelNotFoundError(CheckpointError):
    """Neither a local directory nor a reachable (or cached) hub repository matches the name."""


class DataError(MinibertError):
    """A data file (training text, a vocabulary to train with, pre-training instances) is missing,
    malformed or does not fit the model."""


class TFRecordError(DataError):
    """A TFRecord file is truncated, fails its CRC, or holds a record that is not a tf.train.Example."""


class TrainingStateError(MinibertError):
    """A run's training state (``training_state.pt``) is missing, truncated, altered, or belongs to
    other settings, another model config or other data than the ``--resume`` command gives."""
