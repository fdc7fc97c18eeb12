"""``InstanceOptions``: the flags of Google's ``create_pretraining_data.py`` as one checked value.

>>> InstanceOptions(max_seq_length=64, whole_word_mask=True).max_tokens_per_pair
61
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import DataError

SMALLEST_SEQUENCE = 5  # [CLS] A [SEP] B [SEP] with one piece in A and one in B


@dataclass(frozen=True)
class InstanceOptions:
    """How instances are cut and masked; the defaults are Google's flags' defaults."""

    max_seq_length: int = 128  # pieces per instance, [CLS] and both [SEP] included; shorter ones are padded
    max_predictions_per_seq: int = 20  # masked positions per instance, at most (the features' padded length)
    masked_lm_prob: float = 0.15  # the share of an instance's pieces to predict (rounded; at least 1)
    short_seq_prob: float = 0.1  # how often a document's target length is drawn from 2..max instead
    dupe_factor: int = 10  # passes over the corpus, each with other segment cuts and masks
    whole_word_mask: bool = False  # mask all pieces of a word together (google-research/bert's later flag)

    def __post_init__(self):
        _check_int("max_seq_length", self.max_seq_length, SMALLEST_SEQUENCE,
                   "the smallest instance is [CLS] A [SEP] B [SEP] with one piece each in A and B")  # fmt: skip
        _check_int("max_predictions_per_seq", self.max_predictions_per_seq, 1, "at least one piece is masked")
        _check_int("dupe_factor", self.dupe_factor, 1, "it is the number of passes over the corpus")
        if not _is_number(self.masked_lm_prob) or not 0 < self.masked_lm_prob <= 1:
            raise DataError(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob!r}")
        if not _is_number(self.short_seq_prob) or not 0 <= self.short_seq_prob <= 1:
            raise DataError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob!r}")
        if not isinstance(self.whole_word_mask, bool):
            raise DataError(f"whole_word_mask must be True or False, got {self.whole_word_mask!r}")

    @property
    def max_tokens_per_pair(self) -> int:
        """Pieces of A and B together: the sequence less [CLS] and the two [SEP]."""
        return self.max_seq_length - 3


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN


def _check_int(name: str, value, low: int, why: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DataError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise DataError(f"{name} must be at least {low} ({why}), got {value}")
