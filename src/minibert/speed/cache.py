"""The measurements' one cache: a JSON file of verdicts, one per key, so that a measurement made once
on a machine is read back by later processes (``~/.cache/minibert/gemm.json``, under
``$XDG_CACHE_HOME`` or ``$MINIBERT_CACHE_DIR``). Every verdict lives here: the GEMM backend and
attention's threshold (gemm.py), bf16 for ``dtype="fastest"`` (bf16.py), int8's check and speed
(int8_check.py), ``pretrain --bf16``'s (training/run/precision.py).

A key holds everything the verdict depends on (``cache_key``: the machine, then what was measured,
then ``CACHE_VERSION``); a missing or damaged file only means measuring again.

    >>> cache_key("bf16 vs float32", "384x1536")                     # doctest: +SKIP
    'AMD EPYC 7B13 (family 25, model 1)|flags 3f0c2a9e1b7d|torch 2.13.0|2 threads|bf16 vs float32|384x1536|v7'
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no lock (a lost entry is only measured again)
    fcntl = None

import torch

from ..errors import CheckpointError
from ..formats.atomic_files import write_atomically
from ..formats.json_files import read_json_object
from .cpu import cpu_flags_digest, cpu_name

log = logging.getLogger("minibert.gemm")

# Bumped when a way of measuring or deciding changes (any of them: a new version measures everything
# again once). 5: one measurement rule (measure.time_against_float32) and one file for every verdict.
# 6: int8's check pools what the Embedder computes, padding skipped (int8_check.sentence_vectors).
# 7: float32 timed on the faster of its GEMM backends (measure.gemm_backends), not on MKL alone.
CACHE_VERSION = 7


def cache_key(*what: str, threads: bool = True) -> str:
    """A verdict's key: the CPU (name and instruction-set flags: two "AMD EPYC"s differ by AVX-512),
    torch, the thread count (``threads=False`` for a verdict no thread count changes, such as int8's
    cosines), then ``what`` was measured (shapes, dtype, a file, ...), and the version."""
    machine = [cpu_name(), f"flags {cpu_flags_digest()}", f"torch {torch.__version__}"]
    if threads:
        machine.append(f"{torch.get_num_threads()} threads")
    return "|".join([*machine, *what, f"v{CACHE_VERSION}"])


def cache_file() -> Path:
    root = os.environ.get("MINIBERT_CACHE_DIR")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "minibert")
    return Path(root) / "gemm.json"


def read_cache() -> dict:
    """The cache's entries ({key: record}); none yet, a damaged file, or something that is not a
    regular file (a FIFO there would block every model load in ``open``): {} (measure again)."""
    path = cache_file()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            log.debug("measurement cache %s is not a regular file: not read", path)
            return {}
        return read_json_object(path, "measurement cache")
    except (OSError, ValueError, CheckpointError):
        return {}


def write_cache(key: str, record: dict) -> str | None:
    """Add ``record`` under ``key`` (written atomically); a read-only home only means measuring again.
    None when written, else why not (for ``where_cached``: a log must not say "cached" then).

    Processes that measure at the same time (workers, CI jobs) each read the file, add their entry
    and write it back: an exclusive lock on ``gemm.json.lock`` beside it makes those turns one after
    the other, so that no process writes over another's entry. A lock held longer than
    ``LOCK_SECONDS`` (a process stopped while it holds it) only means this verdict is not cached."""
    import json

    path = cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path.with_name(path.name + ".lock")):
            entries = read_cache()
            entries[key] = record
            write_atomically(path, json.dumps(entries, indent=1, sort_keys=True).encode())
    except OSError as error:  # (TimeoutError, the lock held too long, is one)
        log.debug("measurement not cached in %s (%s)", path, error)
        return str(error) or type(error).__name__
    return None


def where_cached(failure: str | None) -> str:
    """What a log says of a measurement ``write_cache`` was given: "cached in PATH", or, when the
    write failed (``failure``, its reason), "not cached (...): measured again by the next process"."""
    if failure is None:
        return f"cached in {cache_file()}"
    return f"not cached ({cache_file()}: {failure}): measured again by the next process"


LOCK_SECONDS = 10.0


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (made if missing; never through a link, never a
    FIFO or device: OSError). TimeoutError after ``LOCK_SECONDS``. Without fcntl (Windows), no lock."""
    if fcntl is None:
        yield
        return
    descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{lock_path} is not a regular file")
        deadline = time.monotonic() + LOCK_SECONDS
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{lock_path} held by another process for {LOCK_SECONDS:.0f} s") from None
                time.sleep(0.01)
        yield  # (closing the descriptor releases the lock)
    finally:
        os.close(descriptor)
