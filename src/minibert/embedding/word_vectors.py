"""Word vectors: one vector per whole word, merged from the vectors of its word pieces.

BERT reads word pieces ("embeddings" → em ##bed ##ding ##s), so its token vectors are per piece; a
word's vector is its pieces' vectors merged (the tutorials' "word embeddings"): their mean, sum, the
first piece's or the last piece's.

>>> import numpy as np
>>> vectors = np.array([[1.0], [2.0], [4.0], [8.0]])   # the pieces: the em ##bed ##ding
>>> merge_pieces(vectors, [["the"], ["em", "##bed", "##ding"]], "mean").tolist()
[[1.0], [4.666666507720947]]
>>> merge_pieces(vectors, [["the"], ["em", "##bed", "##ding"]], "first").tolist()
[[1.0], [2.0]]
"""

from __future__ import annotations

import numpy as np

WORD_MERGES = ("mean", "sum", "first", "last")


def check_merge(merge: str) -> None:
    if merge not in WORD_MERGES:
        raise ValueError(f"merge must be one of {WORD_MERGES}, got {merge!r}")


def merge_pieces(vectors: np.ndarray, pieces: list[list[str]], merge: str) -> np.ndarray:
    """(words, dim) float32: each word's vector from its pieces' rows of ``vectors`` (pieces, dim),
    the words' pieces in order (``pieces``: one list per word), merged as ``merge`` says."""
    check_merge(merge)
    merged, position = [], 0
    for word_pieces in pieces:
        chunk = vectors[position : position + len(word_pieces)]
        position += len(word_pieces)
        if merge == "mean":
            merged.append(chunk.mean(axis=0))
        elif merge == "sum":
            merged.append(chunk.sum(axis=0))
        else:
            merged.append(chunk[0] if merge == "first" else chunk[-1])
    dim = vectors.shape[1]
    return (np.stack(merged) if merged else np.zeros((0, dim), np.float32)).astype(np.float32)
