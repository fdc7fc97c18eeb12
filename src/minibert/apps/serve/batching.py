"""Dynamic batching: many concurrent requests, one model, batches as large as the traffic allows.

A CPU runs BERT far more efficiently on a batch of texts than on one text at a time (the matrix
multiplications get wide enough to keep every core busy). A server receives texts one request at a
time, so it *merges* requests:

1. Each request's texts (already tokenized) become a ``Job`` in a bounded queue. A full queue is
   refused at once (``Overloaded``: the server answers 503 with Retry-After) rather than letting
   memory and latency grow without bound.
2. One worker takes the oldest job and gathers more until the batch holds ``max_batch_tokens``
   tokens, or the oldest job has waited ``max_wait_ms`` for company: when the model is busy, jobs
   pile up meanwhile and the next batch takes them all without waiting.
3. The batch runs in a thread, off the event loop (which keeps accepting and answering requests),
   through ``compute`` (the Embedder, which sorts texts by length and cuts token-budgeted
   forward passes), and each job's future gets exactly its own rows, in its own order.

A job whose client went away is marked cancelled and skipped if it has not started yet: a
disconnected client costs nothing later.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np


class Overloaded(Exception):
    """The queue is full: try again later."""


@dataclass
class Job:
    pieces: list[list[int]]  # each text's piece ids
    options: Hashable  # jobs run together only with equal options (e.g. normalize)
    future: asyncio.Future
    enqueued: float = field(default_factory=time.monotonic)
    cancelled: bool = False

    @property
    def tokens(self) -> int:
        return sum(len(ids) + 2 for ids in self.pieces)  # + [CLS], [SEP]


class DynamicBatcher:
    """Merge concurrent jobs into batches for ``compute(pieces, options) -> (N, dim) array``."""

    def __init__(
        self,
        compute: Callable[[list[list[int]], Hashable], np.ndarray],
        *,
        max_batch_tokens: int = 16_384,
        max_wait_ms: float = 5.0,
        max_queue: int = 4_096,
        on_batch: Callable[[int, int], None] | None = None,
    ):
        self.compute = compute
        self.max_batch_tokens = max_batch_tokens
        self.max_wait = max_wait_ms / 1000
        self.max_queue = max_queue  # texts waiting, at most
        self.on_batch = on_batch  # (texts, tokens) of each batch run, for metrics
        self.queued_texts = 0
        self._jobs: deque[Job] = deque()
        self._arrived = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minibert-model")
        self._worker: asyncio.Task | None = None

    def start(self) -> None:
        self._worker = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=True)

    def submit(self, pieces: list[list[int]], options: Hashable) -> Job:
        """Queue a job (its ``future`` resolves to its vectors), or raise ``Overloaded``."""
        if self.queued_texts + len(pieces) > self.max_queue:
            raise Overloaded(f"the queue holds {self.queued_texts} texts (limit {self.max_queue})")
        job = Job(pieces, options, asyncio.get_running_loop().create_future())
        self._jobs.append(job)
        self.queued_texts += len(pieces)
        self._arrived.set()
        return job

    def cancel(self, job: Job) -> None:
        """The client went away: skip the job if it has not run yet."""
        if not job.cancelled and not job.future.done():
            job.cancelled = True

    async def _next_batch(self) -> list[Job]:
        while not self._jobs:
            self._arrived.clear()
            await self._arrived.wait()
        batch: list[Job] = []
        tokens = 0
        options = self._jobs[0].options
        deadline = self._jobs[0].enqueued + self.max_wait
        while True:
            # Take every waiting job with the same options, up to the token budget.
            for job in list(self._jobs):
                if tokens >= self.max_batch_tokens:
                    break
                if job.options == options:
                    self._jobs.remove(job)
                    self.queued_texts -= len(job.pieces)
                    if job.cancelled:
                        job.future.cancel()
                        continue
                    batch.append(job)
                    tokens += job.tokens
            remaining = deadline - time.monotonic()
            if tokens >= self.max_batch_tokens or remaining <= 0:
                return batch
            self._arrived.clear()
            try:  # wait for company, until the oldest job has waited max_wait
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:  # (TimeoutError from Python 3.11 on)
                return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._next_batch()
            if not batch:
                continue
            pieces = [ids for job in batch for ids in job.pieces]
            if self.on_batch is not None:
                self.on_batch(len(pieces), sum(job.tokens for job in batch))
            try:
                vectors = await loop.run_in_executor(self._executor, self.compute, pieces, batch[0].options)
            except Exception as error:  # noqa: BLE001  (handed to every caller of this batch)
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(error)
                continue
            start = 0
            for job in batch:  # each caller gets exactly its own rows, in its own order
                rows = vectors[start : start + len(job.pieces)]
                start += len(job.pieces)
                if not job.future.done():
                    job.future.set_result(rows)
