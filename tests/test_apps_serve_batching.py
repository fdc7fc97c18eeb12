"""The server's dynamic batcher (minibert/apps/serve/batching.py) on its own: concurrent jobs merged
into one batch and each given its rows, cancelled jobs skipped, overload refused, options kept
apart, every batch within max_batch_tokens, and a stop that waits for one batch, not a request."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from minibert.apps.serve.batching import DynamicBatcher, Overloaded


def test_batcher_merges_concurrent_jobs_and_returns_each_its_rows():
    calls = []

    def compute(pieces, options):
        calls.append([ids[0] for ids in pieces])
        return np.array([[ids[0], options] for ids in pieces], dtype=np.float32)

    async def main():
        batcher = DynamicBatcher(compute, max_batch_tokens=10_000, max_wait_ms=50, max_queue=100)
        batcher.start()
        jobs = [batcher.submit([[10 * j + i] for i in range(j + 1)], 7) for j in range(5)]
        results = await asyncio.gather(*(job.future for job in jobs))
        await batcher.stop()
        return results

    results = asyncio.run(main())
    assert len(calls) == 1 and len(calls[0]) == 15  # one batch for all five jobs
    for j, rows in enumerate(results):
        assert rows[:, 0].tolist() == [10 * j + i for i in range(j + 1)] and (rows[:, 1] == 7).all()


def test_batcher_skips_cancelled_jobs_refuses_overload_and_splits_options():
    seen = []

    def compute(pieces, options):
        seen.append((options, [ids[0] for ids in pieces]))
        return np.zeros((len(pieces), 2), np.float32)

    async def main():
        batcher = DynamicBatcher(compute, max_batch_tokens=10_000, max_wait_ms=30, max_queue=6)
        batcher.start()
        gone = batcher.submit([[1], [2]], "a")
        kept = batcher.submit([[3]], "a")
        other = batcher.submit([[4]], "b")
        batcher.cancel(gone)  # its client went away before the batch ran
        with pytest.raises(Overloaded, match="limit 6"):
            batcher.submit([[5], [6], [7]], "a")
        await asyncio.gather(kept.future, other.future)
        await batcher.stop()
        return gone

    gone = asyncio.run(main())
    assert gone.future.cancelled()
    assert ("a", [3]) in seen and ("b", [4]) in seen
    assert all(1 not in ids and 2 not in ids for _, ids in seen)  # the cancelled job cost nothing


def test_batcher_keeps_each_batch_within_max_batch_tokens():
    """A job was added whole while the batch was still under the budget (two jobs of 900 tokens: one
    batch of 1,800 for --max-batch-tokens 1000), and a request of 9,000 tokens was one batch. Now a
    batch takes texts while they fit, a larger request runs in several batches, and each caller still
    gets its own rows in its order. A text longer than the whole budget is a batch alone."""
    seen = []

    def compute(pieces, options):
        seen.append(sum(len(ids) + 2 for ids in pieces))
        return np.array([[ids[0]] for ids in pieces], np.float32)

    sizes = (3, 3, 30, 1)  # texts of 300 tokens each (298 pieces, [CLS], [SEP]); then one of 2,002

    async def main():
        batcher = DynamicBatcher(compute, max_batch_tokens=1000, max_wait_ms=50, max_queue=100)
        batcher.start()
        jobs = [batcher.submit([[100 * j + i] * (298 if size > 1 else 2000) for i in range(size)], "k")
                for j, size in enumerate(sizes)]  # fmt: skip
        results = await asyncio.gather(*(job.future for job in jobs))
        await batcher.stop()
        return results, batcher.queued_texts

    results, queued = asyncio.run(main())
    assert sorted(seen) == [900] * 12 + [2002], seen  # 36 texts, 3 a batch; the long one alone
    for j, size in enumerate(sizes):
        assert results[j][:, 0].tolist() == [100 * j + i for i in range(size)]
    assert queued == 0


def test_batcher_stop_waits_for_the_batch_in_the_model_not_the_whole_request():
    """A stop waited for the whole of a request in the model (DynamicBatcher.stop), however large:
    one request of 20 x 1,000 tokens here, 20 x 0.1 s. It waits for the batch running, one of at most
    max_batch_tokens (0.1 s), and runs no other."""
    calls = []

    def compute(pieces, options):
        calls.append(len(pieces))
        time.sleep(sum(len(ids) + 2 for ids in pieces) * 1e-4)  # 0.1 ms a token
        return np.zeros((len(pieces), 1), np.float32)

    async def main():
        batcher = DynamicBatcher(compute, max_batch_tokens=1000, max_wait_ms=1, max_queue=100)
        batcher.start()
        job = batcher.submit([[5] * 998] * 20, "k")
        while not calls:  # the first batch is in the model
            await asyncio.sleep(0.005)
        started = time.monotonic()
        await batcher.stop()
        return time.monotonic() - started, job

    seconds, job = asyncio.run(main())
    assert len(calls) == 1 and calls[0] == 1 and not job.future.done(), calls
    assert seconds < 1.0, seconds  # one batch: 0.1 s (the whole request: 2 s)
