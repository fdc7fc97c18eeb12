"""Dynamic batching: many concurrent requests, one model, batches as large as the traffic allows.

A CPU runs BERT far more efficiently on a batch of texts than on one text at a time (the matrix
multiplications get wide enough to keep every core busy). A server receives texts one request at a
time, so it *merges* requests:

1. Each request's texts (already tokenized) become a ``Job`` in a bounded queue. A full queue is
   refused at once (``Overloaded``: the server answers 503 with Retry-After) rather than letting
   memory and latency grow without bound.
2. One worker takes texts of the oldest jobs, in order, while they fit in ``max_batch_tokens``
   (a text that would pass it waits for the next batch; a text longer than the whole budget is a
   batch of its own), or until the oldest job has waited ``max_wait_ms`` for company: when the
   model is busy, jobs pile up meanwhile and the next batch takes them at once. A request of more
   tokens than ``max_batch_tokens`` is so run in several batches, one after the other.
3. Each batch runs in a thread, off the event loop (which keeps accepting and answering requests),
   through ``compute`` (the Embedder, which sorts texts by length and cuts token-budgeted
   forward passes), and each job's future gets exactly its own rows, in its own order, once its
   last batch has run.

A job whose client went away is marked cancelled and its texts not yet run are skipped: a
disconnected client (or a request a stop's grace cut off) costs at most the batch already in the
model. ``stop`` waits for that one batch, never for the rest of a large request.
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
    taken: int = 0  # texts handed to the model so far (the first ``taken`` of ``pieces``)
    parts: list[np.ndarray] = field(default_factory=list)  # their rows, batch by batch

    def finish(self, rows: np.ndarray, stop: int) -> None:
        """The rows of texts up to ``stop`` are in: the future gets every row once the last text's are."""
        self.parts.append(rows)
        if stop == len(self.pieces) and not self.future.done():
            self.future.set_result(self.parts[0] if len(self.parts) == 1 else np.concatenate(self.parts))


Span = tuple[Job, int, int]  # a job's texts [start, stop) in one batch


class DynamicBatcher:
    """Merge concurrent jobs into batches of at most ``max_batch_tokens`` tokens (a longer text
    alone) for ``compute(pieces, options) -> (N, dim) array``."""

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
        """Stop taking batches, and wait for the one in the model (it cannot be interrupted)."""
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
        """The client went away: skip the job's texts that have not run yet."""
        if not job.cancelled and not job.future.done():
            job.cancelled = True

    async def _next_batch(self) -> list[Span]:
        while not self._jobs:
            self._arrived.clear()
            await self._arrived.wait()
        spans: list[Span] = []
        tokens = 0
        options = self._jobs[0].options
        deadline = self._jobs[0].enqueued + self.max_wait
        while True:
            tokens, full = self._take(options, spans, tokens)
            remaining = deadline - time.monotonic()
            if full or tokens >= self.max_batch_tokens or remaining <= 0:
                return spans
            self._arrived.clear()
            try:  # wait for company, until the oldest job has waited max_wait
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:  # (TimeoutError from Python 3.11 on)
                return spans

    def _take(self, options: Hashable, spans: list[Span], tokens: int) -> tuple[int, bool]:
        """Add to ``spans`` the texts of waiting jobs with these options, oldest first, while they fit
        in the budget (the first text of a batch always does); the batch's tokens, and whether it is
        full (a text waits that would pass the budget). Cancelled jobs leave the queue here."""
        for job in list(self._jobs):
            if job.options != options:
                continue
            if job.cancelled or job.future.done():  # (done: a batch of it failed)
                self._leave(job)
                continue
            start = stop = job.taken
            while stop < len(job.pieces):
                size = len(job.pieces[stop]) + 2  # + [CLS], [SEP]
                if tokens + size > self.max_batch_tokens and tokens > 0:
                    break
                tokens, stop = tokens + size, stop + 1
            if stop > start:
                spans.append((job, start, stop))
                job.taken = stop
                self.queued_texts -= stop - start
            if stop < len(job.pieces):
                return tokens, True
            self._jobs.remove(job)
        return tokens, False

    def _leave(self, job: Job) -> None:
        """A cancelled (or failed) job leaves the queue with its texts not yet run."""
        self._jobs.remove(job)
        self.queued_texts -= len(job.pieces) - job.taken
        job.future.cancel()  # (nothing, if it is done)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:  # a stop (cancelling this task) lands between batches, or waits for the one running
            spans = await self._next_batch()
            for job, _, _ in spans:
                if job.cancelled:  # (its client left while the batch gathered)
                    job.future.cancel()
            spans = [span for span in spans if not span[0].cancelled]
            if not spans:
                continue
            pieces = [ids for job, start, stop in spans for ids in job.pieces[start:stop]]
            if self.on_batch is not None:
                self.on_batch(len(pieces), sum(len(ids) + 2 for ids in pieces))
            try:
                vectors = await loop.run_in_executor(self._executor, self.compute, pieces, spans[0][0].options)
            except Exception as error:  # noqa: BLE001  (handed to every caller of this batch)
                for job, _, _ in spans:
                    if not job.future.done():
                        job.future.set_exception(error)
                continue
            row = 0
            for job, start, stop in spans:  # each caller gets exactly its own rows, in its own order
                if not job.cancelled:
                    job.finish(vectors[row : row + stop - start], stop)
                row += stop - start
