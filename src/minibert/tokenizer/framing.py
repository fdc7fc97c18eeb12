"""How BERT frames its input: ``[CLS] A [SEP]`` for one sequence, ``[CLS] A [SEP] B [SEP]`` for a pair.

The one home of that rule: the tokenizer's call, ``build_inputs_with_special_tokens``, the
Embedder's windows and the tasks all frame through these functions (with the tokenizer's ids).
[CLS]'s final vector is what the pooler (and a classifier) reads; [SEP] ends each sequence; the
segment ids (``token_type_ids``) say which sequence each token belongs to: 0 for [CLS], A and its
[SEP]; 1 for B and its [SEP].

    >>> frame(101, 102, [7592, 2088], [2129])
    [101, 7592, 2088, 102, 2129, 102]
    >>> segment_ids(2, 1), special_tokens_mask(2, 1)
    ([0, 0, 0, 0, 1, 1], [1, 0, 0, 1, 0, 1])
"""

from __future__ import annotations


def frame(cls_id: int, sep_id: int, ids_a: list[int], ids_b: list[int] | None = None) -> list[int]:
    """``[CLS] A [SEP]``, or ``[CLS] A [SEP] B [SEP]`` with a second sequence."""
    ids = [cls_id, *ids_a, sep_id]
    return ids if ids_b is None else [*ids, *ids_b, sep_id]


def added_by_framing(pair: bool = False) -> int:
    """How many tokens the framing adds: 2, or 3 for a pair."""
    return 3 if pair else 2


def segment_ids(length_a: int, length_b: int | None = None) -> list[int]:
    """The token types of a framed sequence (or pair) whose texts have these many pieces."""
    return [0] * (length_a + 2) + ([] if length_b is None else [1] * (length_b + 1))


def special_tokens_mask(length_a: int, length_b: int | None = None) -> list[int]:
    """1 where the framing put [CLS] or [SEP], 0 on the texts' pieces."""
    mask = [1] + [0] * length_a + [1]
    return mask if length_b is None else [*mask, *[0] * length_b, 1]
