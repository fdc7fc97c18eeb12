"""A long list of texts, embedded chunk by chunk: memory follows a chunk, and on a GPU the next
chunk is tokenized while the GPU computes this one.

``embed(texts)`` runs in stages (tokens → windows → hidden states → pooling). Run over a whole list
at once, every text's piece ids, windows and per-text results would be held together, about as much
again as the vectors returned (all-MiniLM-L6-v2: 1.4 kB a text beside its 1.5 kB vector). So a list
longer than one chunk (``MAX_CHUNK`` texts on a CPU, ``FIRST_CHUNK`` on a GPU, below) goes through
the stages a chunk at a time, each chunk's vectors written into the one output array; within a
chunk the texts are sorted by length and batched as before (hidden_states.py), so results differ
from one pass over the whole list only in the batching (float rounding: ≤ 1e-5 in float32, more in
half precision).

On a GPU the CPU's work and the GPU's can overlap. The GPU computes the batches queued for it while
the CPU, one Python thread, pads and queues the next one; what remained serial was tokenizing,
every text before the first batch. Here the next chunk is tokenized a share at a time between the
current chunk's batches (``TokensAhead.step``: after batch i + 1 is queued, before the loop waits
for batch i's results), so it is ready when the current chunk ends:

    CPU:  [tokens 0][queue 0.0][tokens 1, part][queue 0.1][tokens 1, part] ... [queue 1.0][tokens 2 ...
    GPU:            .........[batch 0.0 ====][batch 0.1 ====] ...          .........[batch 1.0 ===] ...

The GPU waits for the first chunk's tokens (and, between chunks, for the CPU to finish a chunk:
its long texts' windows pooled, the recipe's Dense layers, the next chunk's windows sorted and its
first batch padded), so the first chunk is small (``FIRST_CHUNK`` texts) and each next one twice
the last, up to ``MAX_CHUNK``: a chunk twice as long as the one it overlaps is ready in time when
the GPU takes at least twice as long per text as the tokenizer (a GPU faster than that waits for
the CPU anyway, whatever the plan). On a CPU nothing is idle to overlap with (tokenizing would take
a core from the batches), so the chunks are tokenized one after another and are all ``MAX_CHUNK``
long: a list of up to ``MAX_CHUNK`` texts runs as one pass.

>>> chunk_sizes(10_000, ahead=True)
[256, 512, 1024, 2048, 4096, 2064]
>>> chunk_sizes(10_000, ahead=False)
[8192, 1808]
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Sequence

import numpy as np
import torch

from .embedded import Embedded

FIRST_CHUNK = 256  # texts the GPU waits to be tokenized before its first batch
MAX_CHUNK = 8192  # texts whose pieces, windows and results are held at once

# (a chunk's piece ids, a call to make between its batches or None, progress) → that chunk's Embedded
EmbedChunk = Callable[[list[list[int]], Callable[[int, int], None] | None, bool | None], Embedded]


def tokenizes_ahead(device: torch.device) -> bool:
    """Whether a model on ``device`` computes while the CPU tokenizes (a GPU: its batches are queued)."""
    return device.type == "cuda"


def chunk_sizes(count: int, ahead: bool) -> list[int]:
    """The sizes of the chunks ``count`` texts are embedded in: growing from ``FIRST_CHUNK`` when the
    next chunk is tokenized ahead (``ahead``, on a GPU), else ``MAX_CHUNK`` each."""
    sizes, size = [], FIRST_CHUNK if ahead else MAX_CHUNK
    while count > 0:
        sizes.append(min(size, count))
        count -= sizes[-1]
        size = min(2 * size, MAX_CHUNK)
    return sizes


class TokensAhead:
    """The next chunk's texts, tokenized a share at a time as the current chunk's batches go by."""

    def __init__(self, tokenize: Callable[[str], list[int]], texts: Sequence[str]):
        self.tokenize, self.texts = tokenize, texts
        self.pieces: list[list[int]] = []

    def step(self, batch: int, batches: int) -> None:
        """Called once batch ``batch`` (from 0) of the current chunk's ``batches`` is running:
        tokenize up to this batch's share of the texts, (batch + 1) / batches of them."""
        goal = min(len(self.texts), math.ceil(len(self.texts) * (batch + 1) / batches))
        for text in self.texts[len(self.pieces) : goal]:
            self.pieces.append(self.tokenize(text))

    def finish(self) -> list[list[int]]:
        """Every text's piece ids (those not yet tokenized, now)."""
        self.step(0, 1)
        return self.pieces


def embed_in_chunks(texts: Sequence[str], tokenize: Callable[[str], list[int]], embed_chunk: EmbedChunk,
                    device: torch.device, progress: bool | None) -> Embedded:  # fmt: skip
    """``texts`` embedded chunk by chunk (``chunk_sizes``): ``tokenize`` gives a text's piece ids,
    ``embed_chunk(pieces, between, progress)`` a chunk's Embedded from its piece ids, calling
    ``between`` before it waits for each batch's results when it is given one (there the next chunk
    is tokenized, on a model's ``device`` that computes while the CPU works, and the bar moves on).
    ``progress``: a bar over the batches of a list of one chunk, over the texts of a longer one."""
    ahead = tokenizes_ahead(device)
    sizes = chunk_sizes(len(texts), ahead)
    if len(sizes) <= 1:  # one pass, as embed always ran
        return embed_chunk([tokenize(text) for text in texts], None, progress)
    starts = list(itertools.accumulate(sizes, initial=0))
    bar = _bar(progress, len(texts))
    vectors, truncated, max_length = None, 0, None
    pieces = [tokenize(text) for text in texts[: sizes[0]]]
    try:
        for number, size in enumerate(sizes):
            upcoming = TokensAhead(tokenize, texts[starts[number + 1] : starts[number + 2]]) \
                if number + 1 < len(sizes) else None  # fmt: skip
            between = _between(upcoming if ahead else None, bar, starts[number], size)
            part = embed_chunk(pieces, between, False)
            if vectors is None:  # (N, dim), filled in place: the chunks' vectors are never held twice
                vectors = np.empty((len(texts), part.vectors.shape[1]), np.float32)
            vectors[starts[number] : starts[number] + size] = part.vectors
            truncated, max_length = truncated + part.truncated, part.max_length
            pieces = part = None  # let go of this chunk's pieces and vectors before the next chunk's are made
            pieces = upcoming.finish() if upcoming else []
            if bar is not None:
                bar.update(starts[number] + size - bar.n)
    finally:
        if bar is not None:
            bar.close()
    return Embedded(vectors, truncated, max_length)


def _between(upcoming: TokensAhead | None, bar, start: int, size: int) -> Callable[[int, int], None] | None:
    """What runs between a chunk's batches: a share of the next chunk tokenized (on a GPU), and the
    bar moved on by this batch's share of the chunk's ``size`` texts (from ``start``)."""
    if upcoming is None and bar is None:
        return None

    def between(batch: int, batches: int) -> None:
        if upcoming is not None:
            upcoming.step(batch, batches)
        if bar is not None:
            bar.update(start + size * (batch + 1) // batches - bar.n)

    return between


def _bar(progress: bool | None, total: int):
    """A tqdm bar over the texts when asked, or by default when stderr is a terminal (a list of more
    than one chunk is a long run), moved on batch by batch."""
    if not (progress if progress is not None else sys.stderr.isatty()):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="embedding", unit="text", file=sys.stderr)
