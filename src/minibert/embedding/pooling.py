"""Token vectors → one vector per text: sentence-transformers' pooling modes, and layers combined.

A BERT gives one vector per token; a sentence embedding is one per text. Pooling makes it (the
modes are listed in embedder.py's docstring; each is computed as sentence-transformers' ``Pooling``
computes it), from the tokens a mask marks: padding never, [CLS] and a prompt's pieces where the
recipe leaves them out. Several layers' token vectors first become one (``combine_layers``).

>>> import torch
>>> states = torch.tensor([[[1.0, 0.0], [3.0, 2.0], [5.0, 4.0]]])   # (B=1, T=3, dim=2)
>>> mask = torch.tensor([[[1.0], [1.0], [0.0]]])                     # the third token is padding
>>> pool(states, mask, None, ("mean", "max")).tolist()
[[2.0, 1.0, 3.0, 2.0]]
"""

from __future__ import annotations

import numpy as np
import torch

from .windows import assemble_tokens


def combine_layers(states: list[torch.Tensor], how: str) -> torch.Tensor:
    """Several layers' token vectors, each (B, T, H), as one: "concat" (B, T, H · layers), "sum" or
    "mean" (B, T, H)."""
    if len(states) == 1:
        return states[0]
    if how == "concat":
        return torch.cat(states, dim=-1)
    stacked = torch.stack(states)  # (layers, B, T, H)
    return stacked.sum(0) if how == "sum" else stacked.mean(0)


def pool(states: torch.Tensor, mask: torch.Tensor, pooler, modes: tuple[str, ...]) -> torch.Tensor:
    """states (B, T, dim), mask (B, T, 1): 1 for the tokens to pool → (B, dim · number of modes),
    each mode as sentence-transformers' Pooling computes it (``pooler``: (B, dim), for "pooler")."""
    return torch.cat([_pool_one(states, mask, pooler, mode) for mode in modes], dim=-1)


def _pool_one(states: torch.Tensor, mask: torch.Tensor, pooler, mode: str) -> torch.Tensor:
    if mode == "pooler":
        return pooler
    if mode in ("cls", "lasttoken"):  # the first (or last) pooled token: [CLS] (or [SEP])
        pooled = mask[..., 0] > 0  # (B, T)
        first = pooled.int().argmax(1)
        last = pooled.shape[1] - 1 - pooled.flip(1).int().argmax(1)
        return states[torch.arange(states.shape[0], device=states.device), first if mode == "cls" else last]  # (B, dim)
    if mode == "max":
        return states.masked_fill(mask == 0, float("-inf")).amax(1)
    if mode == "weightedmean":  # token i (from 0) weighs i + 1
        positions = torch.arange(1, states.shape[1] + 1, dtype=mask.dtype, device=mask.device)  # (T,): 1 … T
        weights = mask * positions.view(1, -1, 1)  # (B, T, 1)
        return (states * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    total, count = (states * mask).sum(1), mask.sum(1).clamp(min=1e-9)  # (B, dim), (B, 1)
    mean = total / count
    if mode == "mean":
        return mean
    if mode == "mean_sqrt_len_tokens":
        return total / count.sqrt()
    return torch.cat([mean, states.masked_fill(mask == 0, float("-inf")).amax(1)], dim=-1)  # mean_max


def pool_text(text, modes: tuple[str, ...], skip: int) -> np.ndarray:
    """A text's pooled vector (dim · number of modes,): the one computed in its batch, or pooled
    over its windows put back together (``text``: a hidden_states.TextStates; the first ``skip``
    tokens left out)."""
    if text.pooled is not None:
        return text.pooled
    tokens = torch.from_numpy(assemble_tokens(text.windows)).unsqueeze(0)  # (1, T, dim)
    pooler = None
    if "pooler" in modes:  # one pooler output per window: their mean
        pooler = torch.from_numpy(np.mean([pooler for _, _, pooler in text.windows], axis=0)).unsqueeze(0)
    mask = torch.ones(1, tokens.shape[1], 1)
    mask[:, :skip] = 0
    return pool(tokens, mask, pooler, modes)[0].numpy()
