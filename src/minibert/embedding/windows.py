"""Texts longer than the model: cut, or read in overlapping windows and put back together.

BERT reads at most ``max_length`` tokens (its position embeddings end there). A longer text is
either cut (``long_text="truncate"``) or split into windows of ``room`` pieces that overlap by
half (``long_text="window"``); each window runs as its own row ([CLS] window [SEP]), and each
piece then takes its vector from the window in which it has the most context on both sides:

    pieces 0..9, room 4:   window at 0: 0 1 2 3      a piece near a window's middle sees
                           window at 2:     2 3 4 5  both sides; near its edge, one side only
                           window at 4:         4 5 6 7
                           window at 6:             6 7 8 9

>>> cut_into_windows([[1, 2, 3, 4, 5, 6, 7]], room=4, long_text="window")
([[(0, [1, 2, 3, 4]), (2, [3, 4, 5, 6]), (4, [5, 6, 7])]], 0)
>>> cut_into_windows([[1, 2, 3, 4, 5, 6, 7]], room=4, long_text="truncate")
([[(0, [1, 2, 3, 4])]], 1)
>>> cut_into_windows([[1, 2, 3, 4, 5, 6, 7]], room=4, long_text="truncate", side="left")
([[(0, [4, 5, 6, 7])]], 1)

A cut text loses its end, or with ``side="left"`` (a tokenizer's ``truncation_side: "left"``, which
sentence-transformers follows) its start: then a pooling ``skip`` leaves out the first tokens of
what is kept, [CLS] and the start of the text's remaining pieces, as sentence-transformers masks the
first prompt-length positions of the row it was given.

Piece ids given from outside (``Embedder.embed_pieces``) are checked here before they are cut:
ints in the vocabulary (``check_piece_ids``), and a pooling ``skip`` that leaves each text, as cut,
a token to pool (``check_skip``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..tokenizer.encoding import window_starts

# A window: (its first piece's position in the text, its piece ids).
Window = tuple[int, list[int]]


def cut_into_windows(pieces: Sequence[list[int]], room: int, long_text: str,
                     side: str = "right") -> tuple[list[list[Window]], int]:  # fmt: skip
    """Each text's windows [(start, piece ids)] of at most ``room`` pieces (the model's length less
    [CLS] and [SEP]): one, unless the text is longer and ``long_text`` is "window"; and how many
    texts were truncated. ``side``: which end a truncated text loses ("right": its end, "left": its
    start, as the tokenizer's ``truncation_side`` says)."""
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left' (a tokenizer's truncation_side), got {side!r}")
    windows, truncated = [], 0
    for ids in pieces:
        if len(ids) > room and long_text == "truncate":
            ids, truncated = (ids[len(ids) - room :] if side == "left" else ids[:room]), truncated + 1
        starts = window_starts(len(ids), room, room // 2)  # windows overlap by half
        windows.append([(start, ids[start : start + room]) for start in starts])
    return windows, truncated


def assemble_tokens(parts) -> np.ndarray:
    """Token vectors of a whole text from its windows' token vectors.

    ``parts`` = [(start, states (2 + window length, dim), pooler), ...] sorted by start. Each piece
    takes its vector from the window in which it is farthest from an edge (the most context on its
    shorter side); [CLS] and [SEP] get the mean of all windows' [CLS] and [SEP].

    >>> first = np.array([[9.0], [0.0], [1.0], [2.0], [3.0], [9.0]])   # [CLS] 0 1 2 3 [SEP]
    >>> second = np.array([[7.0], [20.0], [30.0], [40.0], [50.0], [7.0]])   # [CLS] 2 3 4 5 [SEP]
    >>> assemble_tokens([(0, first, None), (2, second, None)])[:, 0].tolist()
    [8.0, 0.0, 1.0, 2.0, 30.0, 40.0, 50.0, 8.0]
    """
    if len(parts) == 1:
        return parts[0][1]
    length = parts[-1][0] + parts[-1][1].shape[0] - 2
    out = np.empty((length + 2, parts[0][1].shape[1]), dtype=np.float32)
    out[0] = np.mean([states[0] for _, states, _ in parts], axis=0)
    out[-1] = np.mean([states[-1] for _, states, _ in parts], axis=0)
    # Only the windows that cover a position compete for it (two or three, as windows overlap by
    # half): `first` is the first window not yet behind the position, so the work is linear in the
    # text's length, not its square.
    first = 0
    for position in range(length):
        while parts[first][0] + parts[first][1].shape[0] - 2 <= position:
            first += 1
        best, best_context = None, -1
        for index in range(first, len(parts)):
            start, states, _ = parts[index]
            if start > position:
                break
            size = states.shape[0] - 2
            context = min(position - start, start + size - 1 - position)
            if context > best_context:
                best, best_context = (start, states), context
        start, states = best
        out[position + 1] = states[position - start + 1]
    return out


def check_piece_ids(pieces, vocab_size: int) -> None:
    """Piece ids from outside (``embed_pieces``): a sequence of lists of ints in the vocabulary,
    checked before any forward pass (the tokenizer's own are not checked again)."""
    if isinstance(pieces, (str, bytes)) or not isinstance(pieces, Sequence):
        raise TypeError(f"pieces must be a list of texts' piece ids (lists of ints), got {type(pieces).__name__}")
    for index, ids in enumerate(pieces):
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise TypeError(f"pieces[{index}] must be a list of piece ids (ints), got {type(ids).__name__}")
        for position, piece in enumerate(ids):
            if not isinstance(piece, (int, np.integer)) or isinstance(piece, bool):
                raise TypeError(f"pieces[{index}][{position}] is {piece!r} ({type(piece).__name__}): "
                                "piece ids must be ints")  # fmt: skip
            if not 0 <= piece < vocab_size:
                raise ValueError(f"pieces[{index}][{position}] is {piece}, outside the vocabulary "
                                 f"[0, {vocab_size})")  # fmt: skip


def check_skip(skip, pieces: Sequence[list[int]], room: int, max_length: int, long_text: str) -> None:
    """Each text must keep a token to pool after the first ``skip`` are left out (a mean of
    nothing is a zero vector, a max of nothing NaN: refused, not returned)."""
    if not isinstance(skip, int) or isinstance(skip, bool):
        raise TypeError(f"skip must be an int (the leading tokens the pooling leaves out), got {skip!r}")
    if skip < 0:
        raise ValueError(f"skip (the leading tokens the pooling leaves out) must be 0 or more, got {skip}")
    if long_text == "truncate" and skip > room:
        raise ValueError(f"skip={skip} leaves out every piece a text keeps within max_length={max_length} "
                         f"({room} pieces besides [CLS] and [SEP]): skip must be from 0 to {room}")  # fmt: skip
    for index, ids in enumerate(pieces):
        kept = min(len(ids), room) if long_text == "truncate" else len(ids)
        if skip > kept + 1:  # [CLS] pieces [SEP]: position kept + 1 is [SEP]
            raise ValueError(f"text {index} is {kept + 2} tokens with [CLS] and [SEP]: skip={skip} leaves "
                             "none of them to pool")  # fmt: skip
