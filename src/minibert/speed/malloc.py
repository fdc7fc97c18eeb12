"""Process-wide settings that make CPU inference faster.

PyTorch on a CPU allocates a fresh buffer for every intermediate tensor. With glibc's default
malloc, buffers of a few MB come from ``mmap`` and go back to the kernel when freed, so every
forward pass page-faults much of its working set again: embedding 1,000 texts with all-MiniLM-L6-v2
takes ~570,000 page faults, about 5% of the run time (measured in alternating processes).
``keep_freed_memory()`` tells malloc to keep freed memory for reuse instead (the process then holds
on to its peak working set, like PyTorch's GPU caching allocator does). It changes the whole
process, so the library never calls it on its own; the ``minibert`` command does, and so can a
program that embeds a lot:

    >>> import minibert.speed.malloc
    >>> minibert.speed.malloc.keep_freed_memory()      # doctest: +SKIP
    True

``bound_onednn_primitive_cache()`` caps the GEMM shapes oneDNN keeps compiled. oneDNN, one of the
backends speed/gemm.py measures and picks per CPU, keeps a primitive per GEMM shape, twice over:
in oneDNN's own cache (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, 1,024 by default) and in ideep's,
torch's wrapper around it, which the prepacked linear layers use (``LRU_CACHE_CAPACITY``, 1,024
too). The Embedder's batches each hold a new count of real tokens, so a long run fills both with
primitives it never reuses: embedding 20,000 texts held 110 MB more than 2,000 (all-MiniLM-L6-v2
on a 2-core AMD EPYC Zen 3, where oneDNN is picked), and 9 MB more with oneDNN's cache at 64; on
an Intel Xeon (family 6, model 167, where onednn-fused is picked) 600 calls of 1–4 random texts
grew 282 → 628 MB with only that cap, and stayed at 389 MB with ideep's at 64 too. The command sets
both, as ``keep_freed_memory``; they act only before the process's first oneDNN primitive, and
never over a value the user set.

(measure.py's ``settle_the_allocator``, before a measurement, changes no setting either: it frees one
block of just under 32 MiB, which raises glibc's own adaptive thresholds as freeing any large
tensor does, so that what is measured is not page faults.)

``hand_back_freed_memory()`` does the opposite once, and changes no setting: the heap's free memory
goes back to the kernel now. Loading a model in int8 calls it, so that the float32 weights it has
just freed leave the process's RSS.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_done = False


def keep_freed_memory(mmap_threshold: int = 32 * 1024 * 1024) -> bool:
    """Serve allocations up to ``mmap_threshold`` bytes from the heap and never trim it.
    Returns True when applied (Linux with glibc), False elsewhere (nothing is changed)."""
    global _done
    if _done:
        return True
    libc = _glibc()
    if libc is None:
        return False
    applied = libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1
    applied = applied and libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1) == 1
    _done = applied
    return applied


ONEDNN_PRIMITIVES = 64  # GEMM shapes oneDNN keeps compiled when the command runs (oneDNN's default: 1,024)
# oneDNN's own primitive cache, and ideep's (torch's wrapper: the prepacked linear layers' primitives)
PRIMITIVE_CACHES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def bound_onednn_primitive_cache(capacity: int = ONEDNN_PRIMITIVES) -> bool:
    """Cap oneDNN's and ideep's primitive caches at ``capacity`` shapes (``PRIMITIVE_CACHES``, read
    at the first primitive). Returns False, changing nothing, where the user set either."""
    if any(name in os.environ for name in PRIMITIVE_CACHES):
        return False
    for name in PRIMITIVE_CACHES:
        os.environ[name] = str(capacity)
    return True


def hand_back_freed_memory() -> bool:
    """Give the heap's free memory back to the kernel now (glibc's ``malloc_trim(0)``), whatever the
    trim threshold says. Loading in int8 calls it: the float32 projections it frees (three quarters
    of their bytes) would otherwise stay in the process's RSS as free heap. Returns True when memory
    was handed back, False where there was none or this is not glibc."""
    libc = _glibc()
    return libc is not None and libc.malloc_trim(0) == 1


def _glibc():
    """The C library when it is glibc (it has mallopt and malloc_trim), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
