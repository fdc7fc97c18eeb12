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


class CorpusError(MinibertError):
    """A text corpus (the input of ``minibert vocab``) cannot be used: a file is missing or
    unreadable, is not UTF-8 (the message names the file and line), holds no words, or has a run of
    text without whitespace longer than the learner holds in memory (the message names the limit)."""


class VocabularySizeError(MinibertError):
    """The requested vocabulary size cannot be met: it is below what every vocabulary learned from
    the corpus holds (the special tokens, the alphabet and its ``##`` forms); the message names both."""
