"""From word pieces to model inputs: truncation, overflow windows and padding.

The tokenizer (bert_tokenizer.py) turns a text into a ``Pieces``: its piece ids and, when asked, where
each piece came from: its character span in the original text (``offsets``, for NER and QA) and
the index of the word it belongs to (``words``). This module cuts and pads those the way
transformers' fast tokenizers (the Rust ``tokenizers``) do:

* **Truncation** keeps ``budget`` pieces (``max_length`` minus [CLS]/[SEP]). For a pair,
  ``longest_first`` lets the shorter text keep what it can and cuts the longer; when both are too
  long, each gets half. ``only_first`` / ``only_second`` cut one text (a budget of 0 empties both,
  whatever the strategy, as in ``tokenizers``). ``side="left"`` keeps the end of a text instead of
  its start.
* **Overflow windows** (``return_overflowing_tokens``): instead of dropping what does not fit,
  cut the text into windows that share ``stride`` pieces. For a ``longest_first`` pair, both texts
  are windowed and the rows are the Rust library's combinations (see ``truncation_plan``).
* **Padding** appends (or, ``side="left"``, prepends) [PAD] up to the longest row or to
  ``max_length``, optionally rounded up to a multiple of ``pad_to_multiple_of``.

The result of a call is a ``BatchEncoding`` (batch_encoding.py).
"""

from __future__ import annotations

from dataclasses import dataclass

SIDES = ("right", "left")
TRUNCATION_STRATEGIES = ("longest_first", "only_first", "only_second")

# What each key is padded with (the private keys are the rows behind word_ids/sequence_ids).
PAD_VALUES = {
    "token_type_ids": 0,
    "attention_mask": 0,
    "special_tokens_mask": 1,
    "offset_mapping": (0, 0),
    "_word_ids": None,
    "_sequence_ids": None,
}


@dataclass
class Pieces:
    """One tokenized text: piece ids, and (when tracked) each piece's character span and word."""

    ids: list[int]
    offsets: list[tuple[int, int]] | None = None
    words: list[int] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def part(self, start: int, stop: int) -> Pieces:
        if start == 0 and stop == len(self.ids):
            return self
        return Pieces(
            self.ids[start:stop],
            None if self.offsets is None else self.offsets[start:stop],
            None if self.words is None else self.words[start:stop],
        )


def check_side(value: str, name: str) -> str:
    if value not in SIDES:
        raise ValueError(f"{name} must be 'right' or 'left', got {value!r}")
    return value


def _parts(length: int, keep: int, stride: int, side: str, overflow: bool) -> list[tuple[int, int]]:
    """(start, stop) of the kept part of a text of ``length`` pieces (of every window, with
    ``overflow``); the first is the part a row without overflow keeps. A text that must be cut to
    ``keep`` pieces needs ``stride`` below ``keep``, with or without ``overflow``, as in ``tokenizers``
    (whose ``Encoding.truncate`` always makes the windows, and panics there); a text that fits needs nothing."""
    if keep >= length:
        return [(0, length)]
    if keep == 0 and overflow:  # a pair's budget of 1 went to the other text (tokenizers: the whole text, one row)
        raise ValueError(
            f"max_length leaves this text of {length} pieces no room beside the other text of the pair: the "
            "windows of return_overflowing_tokens need at least one piece of each text"
        )
    if stride >= keep > 0:  # (no room at all and no windows: tokenizers empties the text)
        raise ValueError(
            f"stride={stride} must be smaller than the room for this text in each window ({keep} pieces = "
            "max_length minus the special tokens, shared between the texts of a pair), for a text of "
            f"{length} pieces that must be cut"
        )
    if not overflow:
        return [(0, keep)] if side == "right" else [(length - keep, length)]
    step, parts = keep - stride, []
    if side == "right":
        start = 0
        while True:
            stop = min(start + keep, length)
            parts.append((start, stop))
            if stop == length:
                return parts
            start += step
    stop = length
    while True:
        start = max(stop - keep, 0)
        parts.append((start, stop))
        if start == 0:
            return parts
        stop -= step


Span = tuple[int, int]


def truncation_plan(
    length_a: int, length_b: int | None, budget: int, strategy: str, stride: int, side: str, overflow: bool
) -> list[tuple[Span, Span | None]]:
    """The rows a text (or pair) becomes: for each, the (start, stop) kept of each text.

    >>> truncation_plan(7, None, 4, "longest_first", 1, "right", overflow=True)
    [((0, 4), None), ((3, 7), None)]
    """
    if budget < 0:
        raise ValueError(f"max_length is too small to hold even the special tokens ({-budget} too short)")
    if budget == 0:  # as tokenizers' truncate_encodings: no room empties both texts, whatever the strategy
        return [((0, 0), None if length_b is None else (0, 0))]  # (overflow windows need room: refused before)
    if length_b is None:
        if strategy == "only_second" and length_a > budget:  # as tokenizers: only a cut that is needed fails
            raise ValueError("truncation='only_second' was asked for, but no second text was given "
                             f"(text_pair), and the text's {length_a} pieces need cutting to {budget}")  # fmt: skip
        return [(part, None) for part in _parts(length_a, budget, stride, side, overflow)]
    whole_a, whole_b = (0, length_a), (0, length_b)
    excess = length_a + length_b - budget
    if excess <= 0:
        return [(whole_a, whole_b)]
    if strategy == "longest_first":
        # As tokenizers' truncate_encodings: the shorter text keeps what it can, and if both are
        # too long each gets half (the odd piece to the longer).
        short, long_ = sorted((length_a, length_b))
        keep_short, keep_long = short, (short if short > budget else max(short, budget - short))
        if keep_short + keep_long > budget:
            keep_short = budget // 2
            keep_long = keep_short + budget % 2
        keep_a, keep_b = (keep_long, keep_short) if length_a > length_b else (keep_short, keep_long)
        parts_a = _parts(length_a, keep_a, stride, side, overflow)
        parts_b = _parts(length_b, keep_b, stride, side, overflow)
        # Encoding::merge_with's order: the first windows together, each later window of the first
        # text with the first window (then every later window) of the second, then the first
        # window of the first text with each later window of the second.
        rows = [(parts_a[0], parts_b[0])]
        for part_a in parts_a[1:]:
            rows += [(part_a, part_b) for part_b in parts_b]
        rows += [(parts_a[0], part_b) for part_b in parts_b[1:]]
        return rows
    cut_first = strategy == "only_first"
    length = length_a if cut_first else length_b
    if length <= excess:
        which, other = ("first", length_b) if cut_first else ("second", length_a)
        raise ValueError(
            f"cannot truncate only the {which} text: the other one alone has {other} pieces, "
            f"more than the {budget} that fit in max_length"
        )
    parts = _parts(length, length - excess, stride, side, overflow)
    return [(part, whole_b) if cut_first else (whole_a, part) for part in parts]


def padded_length(longest: int, mode: str, max_length: int | None, multiple: int | None) -> int:
    """The length rows are padded to: the longest row or ``max_length``, rounded up to a multiple."""
    target = longest if mode == "longest" else max(max_length, 0)
    if multiple:
        target = -(-target // multiple) * multiple
    return target


def pad_rows(columns: dict[str, list[list]], target: int, side: str, pad_id: int | None, no_pad: str = "") -> None:
    """Pad, in place, every row of every column shorter than ``target`` (``no_pad``: why there is
    no ``pad_id``, for the error a row to pad then raises)."""
    pad_values = {**PAD_VALUES, "input_ids": pad_id}
    for row_index, ids in enumerate(columns["input_ids"]):
        missing = target - len(ids)
        if missing <= 0:
            continue
        if pad_id is None:
            raise ValueError(f"cannot pad: {no_pad} (pass padding=False, or set tokenizer.pad_token to a piece of "
                             "the vocabulary)")  # fmt: skip
        for key, rows in columns.items():
            if key not in pad_values:
                continue
            filler = [pad_values[key]] * missing
            row = rows[row_index]
            rows[row_index] = row + filler if side == "right" else filler + row


def to_tensors(encoding: dict, kind: str) -> dict:
    """Rows of equal length → ``"pt"`` torch or ``"np"`` numpy int64 arrays ((B, T), offsets (B, T, 2)).
    Rows of different lengths (no padding asked for) → for ``"np"``, as transformers gives them, a
    (B,) array of objects, each row's own int64 array; for ``"pt"``, a ValueError (a tensor has one length)."""
    lengths = {len(row) for row in encoding["input_ids"]}
    if len(lengths) > 1 and kind == "np":
        return {key: _ragged_array(value) for key, value in encoding.items()}
    if len(lengths) > 1:
        raise ValueError("rows have different lengths; pass padding=True to return tensors")
    if kind == "pt":
        import torch

        convert = lambda rows: torch.tensor(rows, dtype=torch.long)  # noqa: E731
    elif kind == "np":
        import numpy as np

        convert = lambda rows: np.array(rows, dtype=np.int64)  # noqa: E731
    else:
        raise ValueError(f"return_tensors must be None, 'pt' or 'np', got {kind!r}")
    return {key: convert(value) for key, value in encoding.items()}


def _ragged_array(rows: list):
    """A column of rows of different lengths as numpy object array of int64 rows, as transformers'
    ``return_tensors="np"`` gives them unpadded (a column of one number per row, ``length``: int64)."""
    import numpy as np

    if not any(isinstance(row, (list, tuple)) for row in rows):
        return np.array(rows, dtype=np.int64)
    column = np.empty(len(rows), dtype=object)  # (filled one by one: numpy would try to broadcast the rows)
    for index, row in enumerate(rows):
        column[index] = np.array(row, dtype=np.int64)
    return column


def window_starts(length: int, size: int, stride: int) -> list[int]:
    """Where each window of ``size`` pieces starts, consecutive windows sharing ``stride`` pieces,
    the last one ending at ``length``.

    >>> window_starts(7, size=4, stride=1)
    [0, 3]
    """
    return [start for start, _ in _parts(length, size, stride, "right", overflow=True)]
