"""The measurements' cache: a JSON file of verdicts, one per key, so that a measurement made once on
a machine is read back by later processes (``~/.cache/minibert/gemm.json``, under
``$XDG_CACHE_HOME`` or ``$MINIBERT_CACHE_DIR``). A key holds everything the verdict depends on
(``cache_key``); a missing or damaged file only means measuring again."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch

from .cpu_info import cpu_flags_digest, cpu_name
from .errors import CheckpointError
from .formats.atomic_files import write_atomically
from .formats.json_files import read_json_object

log = logging.getLogger("minibert.gemm")

CACHE_VERSION = 4  # bumped when the way of measuring or deciding changes


def cache_key(*what: str) -> str:
    """A verdict's key: the CPU (name and instruction-set flags: two "AMD EPYC"s differ by AVX-512),
    torch, the thread count, then ``what`` was measured (shapes, dtype, ...), and the version."""
    machine = [cpu_name(), f"flags {cpu_flags_digest()}", f"torch {torch.__version__}",
               f"{torch.get_num_threads()} threads"]  # fmt: skip
    return "|".join([*machine, *what, f"v{CACHE_VERSION}"])


def cache_file() -> Path:
    root = os.environ.get("MINIBERT_CACHE_DIR")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "minibert")
    return Path(root) / "gemm.json"


def read_cache(path: Path | None = None) -> dict:
    """The cache's entries ({key: record}); none yet, or a damaged file: {} (measure again)."""
    try:
        return read_json_object(path or cache_file(), "measurement cache")
    except (OSError, ValueError, CheckpointError):
        return {}


def write_cache(key: str, record: dict, path: Path | None = None) -> None:
    """Add ``record`` under ``key`` (written atomically); a read-only home only means measuring again."""
    import json

    path = path or cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        entries = read_cache(path)
        entries[key] = record
        write_atomically(path, json.dumps(entries, indent=1, sort_keys=True).encode())
    except OSError as error:
        log.debug("measurement not cached in %s (%s)", path, error)
