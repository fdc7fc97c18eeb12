"""Streams: independent batches run side by side, each on its own share of the CPU's cores.

PyTorch runs one operation at a time and splits each over all of its threads (intra-op
parallelism). For BERT on a CPU that leaves cores idle more often than it seems: every operation
ends with the threads waiting for each other, a LayerNorm or a GELU over a batch is too small to
split well, and a matmul of a few thousand tokens loses some of its speed when its blocks are
shared out. An embedding run, though, is many independent batches. So with two threads, two
batches run at once, each on one thread (data parallelism, as a server would do with two
processes), and no operation waits for another's threads:

    one stream, 2 threads:   [batch 0 ==][batch 1 ==][batch 2 ==][batch 3 ==]
    two streams, 1 each:     [batch 0 =======][batch 2 =======]
                             [batch 1 =======][batch 3 =======]

On the 2-core machine of the README's speed table this embeds 10–20% more texts per second
(``scripts/bench.py --only streams``). A single batch still gets every thread: a lone request's
latency is not traded for throughput.

Streams only pay when the work shares out evenly. A stream that runs out of batches waits for the
others, and its thread idles: 16 texts make two batches, the long texts and the short ones, and
two streams ran them 1.4× *slower* than one stream on both threads. So given each item's cost,
``map_in_streams`` first plays the schedule through (each item goes to the stream that is free
first, in order) and runs the streams only if they would finish sooner than one stream, taking
into account what a stream gains on evenly shared work (``STREAMS_GAIN``):

    (costs on one thread: long 2, short 1)
    one stream, 2 threads:   [long ==][sh]          finishes at (2 + 1) / 2 × 1.1 = 1.65
    two streams, 1 each:     [long ======]          finishes at 2
                             [short]......  (idle)

Each worker thread sets its own thread count (``torch.set_num_threads`` changes only the calling
thread's OpenMP and MKL settings, and PyTorch's default for threads started later); the caller's
count is set back at the end. Results come back in the order of the items, whichever stream ran
them; at most two per stream are computed ahead of the one the caller waits for, so memory stays
bounded by a few batches.

    >>> list(map_in_streams(lambda batch: sum(batch), [[1, 2], [3], [4, 5, 6]]))
    [3, 3, 15]
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

Item = TypeVar("Item")
Result = TypeVar("Result")

# More streams than this would hold that many batches' activations at once for little gain: a
# machine with many cores gives each stream several threads instead.
MAX_STREAMS = 4

# How much faster evenly shared work runs in streams than on one stream with every thread (about
# 1.1× on the 2-core machine, ``scripts/bench.py --only streams``): streams that would leave more
# than about a tenth of their time idle run slower than one stream.
STREAMS_GAIN = 1.1


def stream_threads(threads: int, items: int, max_streams: int = MAX_STREAMS) -> list[int]:
    """How many threads each stream gets: one stream per thread (at most ``max_streams``, at most
    one per item), the threads shared out as evenly as they go.

    >>> stream_threads(2, items=10), stream_threads(6, items=10), stream_threads(8, items=1)
    ([1, 1], [2, 2, 1, 1], [8])
    """
    streams = max(1, min(threads, items, max_streams))
    return [threads // streams + (1 if stream < threads % streams else 0) for stream in range(streams)]


def streams_pay_off(costs: Sequence[float], shares: Sequence[int]) -> bool:
    """Whether streams with these thread ``shares`` finish items of these ``costs`` sooner than one
    stream on all their threads. Each item goes, in order, to the stream that is free first (as in
    ``map_in_streams``); a stream runs at the speed of its threads, and ``STREAMS_GAIN`` faster than
    the same threads would split over one item.

    >>> streams_pay_off([1, 1, 1, 1], [1, 1]), streams_pay_off([5, 3], [1, 1])
    (True, False)
    """
    if len(shares) < 2:
        return False
    free_at = [0.0] * len(shares)  # when each stream has finished what it was given
    for cost in costs:
        stream = min(range(len(shares)), key=free_at.__getitem__)
        free_at[stream] += cost / shares[stream]
    one_stream = sum(costs) / sum(shares) * STREAMS_GAIN
    return max(free_at) < one_stream


def map_in_streams(
    function: Callable[[Item], Result],
    items: Sequence[Item],
    streams: int | None = None,
    costs: Sequence[float] | None = None,
) -> Iterator[Result]:
    """``map(function, items)``, with the items shared out among parallel streams (see the module
    doc); ``streams=1`` (or one item, or one thread) runs them one after the other in this thread,
    and so do items whose ``costs`` (their relative work, if given) would leave the streams idle
    too long (``streams_pay_off``). ``function`` must be safe to call from several threads at once
    (a model in eval mode under ``torch.inference_mode`` is: it only reads its weights)."""
    threads = torch.get_num_threads()
    shares = stream_threads(threads, len(items), streams if streams is not None else MAX_STREAMS)
    if costs is not None and not streams_pay_off(costs, shares):  # (False for one stream)
        shares = [threads]
    if len(shares) == 1:
        yield from map(function, items)
        return
    unclaimed = iter(shares)
    lock = threading.Lock()

    def claim_threads() -> None:  # each worker, as it starts: its share of the threads
        with lock:
            share = next(unclaimed)
        # A thread's first torch call sets its count from the process default, which another
        # caller may be changing right now: make that first call here, then set the share.
        torch.get_num_threads()
        torch.set_num_threads(share)

    try:
        with ThreadPoolExecutor(len(shares), "minibert-stream", initializer=claim_threads) as pool:
            yield from _in_order(pool, function, items, ahead=2 * len(shares))
    finally:
        torch.set_num_threads(threads)  # the workers changed the default for threads started later


def _in_order(pool: ThreadPoolExecutor, function, items: Iterable, ahead: int) -> Iterator:
    """Results in item order, with at most ``ahead`` items submitted beyond the one awaited."""
    pending: deque = deque()
    remaining = iter(items)
    try:
        for item in remaining:
            pending.append(pool.submit(function, item))
            if len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:  # the caller stopped early (an error, a closed generator)
            future.cancel()
