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


class InputFileError(MinibertError):
    """A file a command reads or writes cannot be used: missing, a directory, not UTF-8 text,
    malformed JSON lines, a missing or mistyped field, empty, or an output that would destroy its
    input. The message names the file (and the line). The command exits 1 (2 is for usage errors)."""
