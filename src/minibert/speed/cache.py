"""The measurements' one cache: a JSON file of verdicts, one per key, so that a measurement made once
on a machine is read back by later processes (``~/.cache/minibert/gemm.json``, under
``$XDG_CACHE_HOME`` or ``$MINIBERT_CACHE_DIR``). Every verdict lives here: the GEMM backend and
attention's threshold (gemm.py), bf16 for ``dtype="fastest"`` (bf16.py), int8's check and speed
(int8_check.py), ``pretrain --bf16``'s (training/run/precision.py).

A key holds everything the verdict depends on (``cache_key``: the machine, then what was measured,
then ``CACHE_VERSION``); a missing or damaged file only means measuring again.

    >>> cache_key("bf16 vs float32", "384x1536")                     # doctest: +SKIP
    'AMD EPYC 7B13 (family 25, model 1)|flags 3f0c2a9e1b7d|torch 2.13.0|2 threads|bf16 vs float32|384x1536|v5'
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch

from ..errors import CheckpointError
from ..formats.atomic_files import write_atomically
from ..formats.json_files import read_json_object
from .cpu import cpu_flags_digest, cpu_name

log = logging.getLogger("minibert.gemm")

# Bumped when a way of measuring or deciding changes (any of them: a new version measures everything
# again once). 5: one measurement rule (measure.time_against_float32) and one file for every verdict.
CACHE_VERSION = 5


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
    """The cache's entries ({key: record}); none yet, or a damaged file: {} (measure again)."""
    try:
        return read_json_object(cache_file(), "measurement cache")
    except (OSError, ValueError, CheckpointError):
        return {}


def write_cache(key: str, record: dict) -> None:
    """Add ``record`` under ``key`` (written atomically); a read-only home only means measuring again."""
    import json

    path = cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        entries = read_cache()
        entries[key] = record
        write_atomically(path, json.dumps(entries, indent=1, sort_keys=True).encode())
    except OSError as error:
        log.debug("measurement not cached in %s (%s)", path, error)
