"""Batches of sequences as BERT runs fastest on a CPU: sorted longest first, cut by a budget of
padded tokens, run in parallel streams. The one batch runner of the Embedder (texts' windows) and
of the tasks (tokenized rows for a model with a head).

``batch_size`` counts texts of ``TOKENS_PER_TEXT`` tokens: the default 32 makes batches of 2,048
padded tokens, which runs fastest on a CPU (larger batches fall out of the cache; smaller ones
waste the cores). Long sequences make batches of few rows, short ones of many.

>>> batches, outputs = length_sorted_batches([3, 9, 5], lambda batch: batch, batch_size=1, config=None,
...                                          streams=1, tokens_per_text=10)
>>> batches, list(outputs)
([[1], [2, 0]], [[1], [2, 0]])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .streams import map_in_streams

TOKENS_PER_TEXT = 64


def length_sorted_batches(lengths: list[int], forward: Callable[[list[int]], object], batch_size: int, config,
                          streams: int | None = None, *, tokens_per_text: int = TOKENS_PER_TEXT,
                          ) -> tuple[list[list[int]], Iterator]:  # fmt: skip
    """The batches (lists of sequence indices, longest sequences first; at most ``batch_size`` ×
    ``tokens_per_text`` padded tokens each) and an iterator of ``forward(batch)`` over them, in
    order, computed in ``streams`` (None: as many as pay on this CPU, see streams.py; ``config``:
    the model's, for each batch's cost). Close the iterator (``contextlib.closing``) when done."""
    order = sorted(range(len(lengths)), key=lambda index: -lengths[index])
    batches = token_budget_batches(order, lengths, batch_size * tokens_per_text)
    costs = None if config is None else [batch_cost([lengths[i] for i in batch], config) for batch in batches]
    return batches, map_in_streams(forward, batches, streams, costs)


def token_budget_batches(order: list[int], lengths: list[int], budget: int) -> list[list[int]]:
    """Cut ``order`` (sequence indices, longest first) into batches of at most ``budget`` padded
    tokens: a batch of long texts holds few of them, a batch of short texts many, so every forward
    pass does a similar, large amount of work.

    >>> token_budget_batches([0, 1, 2, 3], lengths=[100, 60, 50, 10], budget=150)
    [[0], [1, 2], [3]]
    """
    batches, current = [], []
    for index in order:
        width = lengths[current[0]] if current else lengths[index]  # the batch's longest (its first)
        if current and (len(current) + 1) * width > budget:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def batch_cost(lengths: list[int], config) -> int:
    """A batch's work in multiply-adds per layer, for sharing batches out among streams: each real
    token goes through the projections (Q, K, V, output: 4 H², feed-forward: 2 H I; the padding is
    packed away), and each row's attention compares every padded position with every other (2 T² H).

    >>> from minibert.config import BertConfig
    >>> batch_cost([3, 2], BertConfig(hidden_size=4, intermediate_size=16, num_attention_heads=1))
    1104
    """
    hidden, width = config.hidden_size, max(lengths)
    per_token = 4 * hidden * hidden + 2 * hidden * config.intermediate_size
    return sum(lengths) * per_token + len(lengths) * 2 * width * width * hidden
