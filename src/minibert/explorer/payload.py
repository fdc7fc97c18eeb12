"""The page's data: ``ExplorationData`` as one JSON object, with the big arrays packed.

bert-base on 512 tokens has 12 × 12 × 512² = 37.7 million attention weights: as JSON numbers that is
~300 MB. Each weight is in [0, 1], so it is stored as an unsigned integer ``q`` with
``weight ≈ low + q · step``: 8 bits (step 1/255, so within 1/510 ≈ 0.00196 of the exact weight) or 16
bits (within 1/131070 ≈ 7.6e-6), then deflated with zlib (Python's ``zlib.compress``; the browser's
``DecompressionStream("deflate")`` reads it natively) and written as base64. Probabilities and norms
travel as raw little-endian float32 (exact), small tables as plain JSON.

    >>> packed = pack_quantized(np.array([[0.0, 0.5, 1.0]]), low=0.0, high=1.0, bits=8)
    >>> packed["dtype"], packed["shape"], round(packed["step"] * 255, 6)
    ('uint8', [1, 3], 1.0)
"""

from __future__ import annotations

import base64
import zlib

import numpy as np

from ..errors import ExplorerInputError
from .data import ExplorationData
from .statistics import HEAD_STATISTICS, head_statistics, lead_layers, similarities

# Above this many attention weights, 8 bits a weight (bert-base at 512 tokens: 37.7 M → a page under
# 25 MB); at or below it, 16 bits (a 12 × 12 × 128² page is 2.4 M).
SIXTEEN_BITS_UP_TO = 4 * 1024 * 1024
# zlib's fastest level: on bert-base's 37.7 M weights (random, the hardest to compress) 8.4 MB in 1.4 s,
# where level 6 (the default) gives 6.0 MB in 15 s (measured under load on the Xeon of docs/explore.md)
COMPRESSION_LEVEL = 1


def pack_quantized(values: np.ndarray, *, low: float, high: float, bits: int) -> dict:
    """``values`` in [low, high] → {"dtype", "shape", "low", "step", "deflated": base64}."""
    if bits not in (8, 16):
        raise ValueError(f"bits must be 8 or 16, got {bits!r}")
    if not np.isfinite(values).all():  # the cast below would make NaN a 0 (data.refuse_what_is_not_finite)
        raise ValueError("values to quantize must be finite: a NaN would be stored as the number 0")
    levels = (1 << bits) - 1
    step = (high - low) / levels
    # float32 holds every integer up to 2^24 exactly: q is off by at most 0.5 + 65535 · 2^-24 levels
    quantized = (np.asarray(values, dtype=np.float32) - np.float32(low)) * np.float32(1 / step)
    np.rint(quantized, out=quantized)
    np.clip(quantized, 0, levels, out=quantized)
    raw = quantized.astype(np.dtype("u1" if bits == 8 else "<u2")).tobytes()
    return {"dtype": f"uint{bits}", "shape": list(values.shape), "low": low, "step": step,
            "deflated": _base64(zlib.compress(raw, COMPRESSION_LEVEL))}  # fmt: skip


def pack_exact(values: np.ndarray, dtype: str) -> dict:
    """float32 or int32 ``values`` as raw little-endian bytes, base64 (exact; small arrays only)."""
    array = np.ascontiguousarray(values, dtype={"float32": "<f4", "int32": "<i4"}[dtype])
    return {"dtype": dtype, "shape": list(array.shape), "raw": _base64(array.tobytes())}


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def check_attention_bits(requested) -> None:
    """``explore(attention_bits=...)``: 8, 16 or None (checked before the forward pass)."""
    if requested is not None and (type(requested) is not int or requested not in (8, 16)):
        raise ExplorerInputError(f"attention_bits must be 8, 16 or None, got {requested!r}")


def attention_bits(data: ExplorationData, requested: int | None) -> int:
    """8 or 16 bits a weight: as requested, else 16 for small pages and 8 for large ones."""
    if requested is not None:
        check_attention_bits(requested)
        return requested
    return 16 if data.attention.size <= SIXTEEN_BITS_UP_TO else 8


def _cut(data: ExplorationData) -> dict | None:
    """What truncate=True cut (data.py ``Cut``), with the sentence the page shows; None: nothing."""
    cut = data.cut
    if cut is None:
        return None
    return {"limit": cut.limit, "limitName": cut.limit_name, "lost": cut.lost, "textPieces": cut.text_pieces,
            "pairPieces": cut.pair_pieces, "masks": cut.masks, "said": cut.describe()}  # fmt: skip


def page_payload(data: ExplorationData, cls_token: str, sep_token: str, bits: int | None = None) -> dict:
    """Everything the page draws, as one JSON-ready object (see docs/explore.md for the fields)."""
    statistics = head_statistics(data.attention, data.tokens, cls_token, sep_token)
    cosine, norms = similarities(data.hidden_states)
    payload = {
        "format": "minibert-explore/1",
        "model": data.model_name,
        "layers": data.layers,
        "heads": data.heads,
        "tokens": data.tokens,
        "inputIds": data.input_ids.tolist(),
        "tokenTypeIds": data.token_type_ids.tolist(),
        "wordIds": data.word_ids,
        "sequenceIds": data.sequence_ids,
        "offsets": data.offsets.tolist(),
        "maskPositions": data.mask_positions,
        "truncated": data.truncated,
        "cut": _cut(data),
        "maxPositions": data.max_positions,
        "dtype": data.dtype,
        "topK": data.top_k,
        "attention": pack_quantized(data.attention, low=0.0, high=1.0, bits=attention_bits(data, bits)),
        "similarity": pack_quantized(cosine, low=-1.0, high=1.0, bits=8),  # drawn only: 1/255 is a pixel's shade
        "norms": pack_exact(norms, "float32"),
        "headStatistics": {
            "names": HEAD_STATISTICS,
            "values": {name: pack_exact(values, "float32") for name, values in statistics.items()},
        },
        "predictions": None,
    }
    if data.prediction_ids is not None:
        used = sorted(data.prediction_pieces)
        payload["predictions"] = {
            "pieces": [data.prediction_pieces[piece_id] for piece_id in used],  # the guesses' pieces, by index
            "pieceIds": used,
            "guesses": pack_exact(np.searchsorted(used, data.prediction_ids), "int32"),  # each id's index in used
            "probabilities": pack_exact(data.prediction_probabilities, "float32"),
            "leadLayers": lead_layers(data.prediction_ids).tolist(),
        }
    return payload
