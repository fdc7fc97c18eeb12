"""Run a sweep's pieces on every core of the machine: the exhaustive sweeps (all of Unicode, a whole
corpus) are single-threaded Python, and CI's machine has two cores, so one of them idled through
the longest tests of the run.

``spread(check, parts)`` calls ``check(part)`` for each part in a pool of fresh processes (spawned,
not forked: a forked child of a process that has run torch's thread pool can hang in OpenMP) and
returns the results in order. ``check`` must be a module-level function of an importable module
(the tests' folder is on ``sys.path``, so a test module's own functions are). An assertion that
fails in a worker fails the test with the worker's message.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def spread(check: Callable, parts: Sequence) -> list:
    workers = min(cores(), len(parts))
    if workers <= 1:
        return [check(part) for part in parts]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(check, parts))


def split(items: Sequence, parts: int | None = None) -> list[list]:
    """``items`` in ``parts`` interleaved slices (every ``parts``-th item), so that each slice holds a
    like mix of slow and quick items whatever the order of ``items``."""
    parts = parts or cores()
    return [list(items[start::parts]) for start in range(parts)]
