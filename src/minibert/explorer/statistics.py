"""Summaries of the attention and the hidden states that a learner would otherwise compute by hand.

What each head does, after Clark et al. 2019 ("What Does BERT Look At?"): per head, averaged over
the query tokens, the share of attention that goes to [CLS], to [SEP], to punctuation, to the
previous token, to the next token and to the token itself, and the entropy of its attention rows
(bits: 0 = all weight on one token, log2(T) = spread evenly). The hidden states: per layer, the
cosine similarity of every two positions and each position's length (norm), which is how the
"bank" of "river bank" and of "bank account" are compared.

    >>> attention = np.full((1, 1, 4, 4), 0.25, dtype=np.float32)          # one head, uniform rows
    >>> stats = head_statistics(attention, ["[CLS]", "hi", "!", "[SEP]"], "[CLS]", "[SEP]")
    >>> float(stats["cls"][0, 0]), float(stats["punctuation"][0, 0]), float(stats["entropy"][0, 0])
    (0.25, 0.25, 2.0)
"""

from __future__ import annotations

import numpy as np

from ..tokenizer.algorithm import is_punctuation

# The columns of the head table, in the page's order, with the sentence that explains each.
HEAD_STATISTICS = {
    "cls": "attention to [CLS]",
    "sep": "attention to [SEP]",
    "punctuation": "attention to punctuation",
    "previous": "attention to the previous token",
    "next": "attention to the next token",
    "self": "attention to the token itself",
    "entropy": "entropy of a row, in bits",
}


def is_punctuation_piece(piece: str) -> bool:
    """A word piece made of punctuation only (BERT's definition of punctuation), e.g. "," or "##!"."""
    text = piece.removeprefix("##")
    return bool(text) and all(is_punctuation(char) for char in text)


def head_statistics(attention: np.ndarray, tokens: list[str], cls_token: str, sep_token: str) -> dict[str, np.ndarray]:
    """attention (L, A, T, T) → {statistic: (L, A)} for each key of ``HEAD_STATISTICS``."""
    weights = np.asarray(attention, dtype=np.float32)  # (bert-base at 512 tokens: 151 MB; no float64 copy)

    def share_to(columns: np.ndarray) -> np.ndarray:  # mean over queries of the weight on these keys
        return (weights @ columns.astype(np.float32)).mean(-1, dtype=np.float64)  # (L, A, T, T) → (L, A, T) → (L, A)

    def mean_diagonal(offset: int) -> np.ndarray:  # mean over queries i of the weight on key i + offset
        diagonal = np.diagonal(weights, offset=offset, axis1=-2, axis2=-1)  # (L, A, T - |offset|)
        return diagonal.mean(-1, dtype=np.float64) if diagonal.shape[-1] else np.zeros(weights.shape[:2])

    tokens_array = np.asarray(tokens, dtype=object)
    punctuation = np.asarray([is_punctuation_piece(token) for token in tokens], dtype=bool)
    logs = np.maximum(weights, np.float32(1e-30))  # one new array, no zero-filling: 0 · log2(1e-30) = 0
    np.log2(logs, out=logs)
    logs *= weights
    return {
        "cls": share_to(tokens_array == cls_token),
        "sep": share_to(tokens_array == sep_token),
        "punctuation": share_to(punctuation),
        "previous": mean_diagonal(-1),  # key i - 1 for query i ≥ 1
        "next": mean_diagonal(1),
        "self": mean_diagonal(0),
        "entropy": -logs.sum(-1, dtype=np.float64).mean(-1),
    }


def similarities(hidden_states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """hidden_states (L + 1, T, H) → (cosine similarity (L + 1, T, T), norms (L + 1, T))."""
    states = np.asarray(hidden_states, dtype=np.float32)
    norms = np.linalg.norm(states.astype(np.float64), axis=-1)  # (L + 1, T)
    unit = states / np.maximum(norms, 1e-12)[..., None].astype(np.float32)
    return np.clip(unit @ unit.transpose(0, 2, 1), -1.0, 1.0), norms


def lead_layers(prediction_ids: np.ndarray) -> np.ndarray:
    """prediction_ids (L + 1, T, K) → (T,): per position, the first layer from which the last
    layer's best guess is the best guess at every layer up to the last ("takes the lead")."""
    best = prediction_ids[..., 0]  # (L + 1, T)
    agrees = best == best[-1]  # (L + 1, T)
    # the first layer of the final run of agreement: one past the last layer that disagrees
    disagrees_at = np.where(~agrees, np.arange(best.shape[0])[:, None], -1)  # (L + 1, T)
    return disagrees_at.max(0) + 1
