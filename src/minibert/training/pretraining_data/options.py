"""``InstanceOptions``: the flags of Google's ``create_pretraining_data.py`` (``minibert
pretraining-data``) as one checked value, each field with its default, limits and help written once.

>>> InstanceOptions(max_seq_length=64, whole_word_mask=True).max_tokens_per_pair
61
>>> InstanceOptions(max_seq_length=4)  # doctest: +ELLIPSIS
Traceback (most recent call last):
minibert.errors.DataError: max_seq_length must be a whole number from 5 to 8192, got 4 (from the smallest instance, ...)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...errors import DataError
from ...limits import option, refuse_out_of_limits

SMALLEST_SEQUENCE = 5  # [CLS] A [SEP] B [SEP] with one piece in A and one in B
# Every config Google released (and minibert's default) has max_position_embeddings 512, but
# `minibert pretrain --config` builds a model with more positions, and instances for it are made
# here. Google's create_pretraining_data.py has no limit; its records are padded to the length, so a
# typo (1e9) would cost memory and disk without end. 8,192 is 16 times BERT's positions.
LONGEST_SEQUENCE = 8192
GOOGLE_PREDICTIONS = 20  # create_pretraining_data.py's --max_predictions_per_seq
MOST_PASSES = 100  # --dupe-factor: Google's default is 10 (5 in its README); each pass holds its instances in memory
DEFAULT_SEED = 12345  # create_pretraining_data.py's --random_seed; pretrain's and finetune's too
LARGEST_SEED = 2**63 - 1  # torch.manual_seed(seed + rank) takes up to 2**64 - 1


@dataclass(frozen=True)
class InstanceOptions:
    """How instances are cut and masked; the defaults are Google's flags' defaults."""

    max_seq_length: int = field(default=128, metadata=option(
        "pieces per instance, [CLS] and both [SEP] included; shorter ones are padded", low=SMALLEST_SEQUENCE,
        high=LONGEST_SEQUENCE,
        why=f"from the smallest instance, [CLS] A [SEP] B [SEP] with one piece each in A and B, to the "
            f"{LONGEST_SEQUENCE} positions, 16 times BERT's 512 (pretrain --config may build more)"))  # fmt: skip
    max_predictions_per_seq: int = field(default=GOOGLE_PREDICTIONS, metadata=option(
        "masked pieces per instance, at most (the features' padded length)", low=1, high=LONGEST_SEQUENCE,
        why=f"at least one piece is masked, and no instance has more than {LONGEST_SEQUENCE} pieces"))  # fmt: skip
    masked_lm_prob: float = field(default=0.15, metadata=option(
        "share of an instance's pieces masked (rounded; at least 1)", low=0.0, high=1.0, above_low=True))  # fmt: skip
    short_seq_prob: float = field(default=0.1, metadata=option(
        "how often a shorter target length is drawn from 2..max instead", low=0.0, high=1.0))  # fmt: skip
    dupe_factor: int = field(default=10, metadata=option(
        "passes over the corpus, each with other segment cuts and masks", low=1, high=MOST_PASSES,
        why=f"the number of passes over the corpus; every pass's instances are held in memory, so more than "
            f"{MOST_PASSES} is refused: shard the corpus, or run again with another random seed"))  # fmt: skip
    whole_word_mask: bool = field(default=False, metadata=option(
        "mask all pieces of a word together (google-research/bert's later flag)", action="store_true"))  # fmt: skip

    def __post_init__(self):
        refuse_out_of_limits(self, flags=False)
        if not isinstance(self.whole_word_mask, bool):
            raise DataError(f"whole_word_mask must be True or False, got {self.whole_word_mask!r}")
        most = self.most_predictions(self.max_seq_length)
        if self.max_predictions_per_seq > most:
            raise DataError(f"max_predictions_per_seq {self.max_predictions_per_seq} is more than {most}, the larger "
                            f"of max_seq_length ({self.max_seq_length}) and Google's default {GOOGLE_PREDICTIONS}: "
                            "an instance has fewer pieces than max_seq_length to predict")  # fmt: skip

    @staticmethod
    def most_predictions(max_seq_length: int) -> int:
        """The most masked pieces an instance may hold: its length, or Google's default 20 for shorter
        ones (Google's flags allow 20 with any --max_seq_length; the features are padded to it)."""
        return max(max_seq_length, GOOGLE_PREDICTIONS)

    @property
    def max_tokens_per_pair(self) -> int:
        """Pieces of A and B together: the sequence less [CLS] and the two [SEP]."""
        return self.max_seq_length - 3


def path_list(files, name: str, one: str = "a path") -> list[str]:
    """``files`` (the argument ``name``) as a list of paths: one path (str, Path) is one file, never one
    file per character (a str is a Sequence too: iterated, "corpus.txt" would be ten one-letter files);
    a list or tuple of paths is those files; anything else, bytes included, is a DataError saying
    what was given (``one``: what a single path is, "a TFRecord file's path"). Shared by
    ``create_pretraining_data``'s input and output files and ``PretrainOptions.data``.

    >>> path_list("corpus.txt", "input_files"), path_list(("a.txt", "b.txt"), "input_files")
    (['corpus.txt'], ['a.txt', 'b.txt'])
    >>> path_list(["a.txt", 7], "input_files")
    Traceback (most recent call last):
    minibert.errors.DataError: input_files must be paths (str or Path), got 7
    """
    if isinstance(files, (str, os.PathLike)):
        return [os.fspath(files)]
    if isinstance(files, bytes) or not isinstance(files, Sequence):
        raise DataError(f"{name} must be {one} or a list of paths, got {type(files).__name__}")
    for path in files:
        if not isinstance(path, (str, os.PathLike)):
            raise DataError(f"{name} must be paths (str or Path), got {path!r}")
    return [os.fspath(path) for path in files]
