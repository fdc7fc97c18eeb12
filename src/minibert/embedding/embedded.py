"""What ``Embedder.embed_with_report`` returns (the vectors, and what happened to the texts), and the
warning ``embed`` gives from it."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np


@dataclass
class Embedded:
    """What ``embed_with_report`` returns: the vectors and what happened to the texts."""

    vectors: np.ndarray  # (N, dim) float32
    truncated: int  # texts longer than max_length that were cut (long_text="truncate")
    max_length: int  # the limit that applied, in tokens with [CLS] and [SEP]


def warn_if_truncated(result: Embedded) -> None:
    """``embed``'s warning (and ``embed_pieces``'), from the count ``embed_with_report`` returns."""
    if result.truncated:
        warnings.warn(
            f"{result.truncated} of {len(result.vectors)} texts are longer than max_length={result.max_length} "
            "tokens and were truncated; pass long_text='window' to embed all of each text",
            stacklevel=3,
        )
