"""The memory of dtype="int8" (speed/int8.py, speed/malloc.py): a measurement first settles glibc's
malloc, so timed runs are not page-faulted afresh; loading in int8 hands the freed float32 weights
back to the kernel (float32 keeps nothing to hand back); an int8 model holds a quarter of its linear
weights and no float32 copy. Memory accounting, not timing.
"""

from __future__ import annotations

import sys

import pytest

from minibert import BertModel
from minibert.speed import int8
from minibert.speed.int8 import int8_layers

LIBRARIES_HERE = [library for library in int8.LIBRARIES if int8.library_unavailable(library) is None]


def test_a_measurement_first_settles_glibcs_malloc_so_runs_are_not_page_faulted_afresh():
    """measure.settle_the_allocator: in a fresh process a 4 MiB tensor comes from mmap (glibc's
    default threshold is 128 KiB: freed, it goes back to the kernel, and the next run page-faults it
    again); after the settling block is freed, glibc's own adaptive rule serves a 16 MiB one from
    the heap."""
    import subprocess

    program = """
import ctypes, torch
from minibert.speed.measure import settle_the_allocator
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL("libc.so.6"); libc.mallinfo2.restype = Info
def mapped_for(size):  # (freeing the block at return raises glibc's threshold to its size)
    before = libc.mallinfo2().hblkhd
    block = torch.empty(size, dtype=torch.uint8)
    return libc.mallinfo2().hblkhd - before
first = mapped_for(4 * 2**20)
settle_the_allocator()
print(first, mapped_for(16 * 2**20))  # above what the first block taught glibc: only the settling explains 0
"""
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's malloc")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout.split()
    before, after = map(int, out)
    assert before >= 4 * 2**20 and after == 0, (before, after)


def _heap_in_use() -> int:
    """glibc's bytes in use (mallinfo2: small blocks + mmapped ones), after a garbage collection."""
    import ctypes
    import gc

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]  # fmt: skip

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
    except (OSError, AttributeError):
        pytest.skip("needs glibc 2.33+ (mallinfo2) to count the heap")
    gc.collect()
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


def test_loading_in_int8_hands_the_freed_float32_memory_back_and_float32_does_not(tiny_dir, int8_fresh_cache,
                                                                                   monkeypatch):
    """The float32 projections int8 frees would stay in the process's RSS as free heap (glibc keeps
    it): loading in int8 trims the heap once, after the swap; a float32 load leaves the heap alone."""
    from minibert.speed import malloc

    calls = []
    monkeypatch.setattr(malloc, "hand_back_freed_memory", lambda: calls.append("trim") or True)
    BertModel.from_pretrained(tiny_dir)
    assert calls == []
    BertModel.from_pretrained(tiny_dir, dtype="int8")
    assert len(calls) == 1


def test_hand_back_freed_memory_returns_the_heap_to_the_kernel_on_glibc():
    """Measured, not assumed: 64 MiB in small blocks freed stay in the heap (glibc keeps freed small
    blocks), and the call hands most of them back (RSS falls by at least half of them)."""
    import ctypes

    from minibert.speed.malloc import hand_back_freed_memory

    if not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "malloc_trim"):
        pytest.skip("not glibc: nothing to hand back")

    def rss() -> int:
        return int(next(line for line in open("/proc/self/status") if line.startswith("VmRSS:")).split()[1]) * 1024

    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(4096) for _ in range(16384)]  # 64 MiB below the mmap threshold: from the heap
    for block in blocks:
        ctypes.memset(block, 1, 4096)
    for block in blocks[:-1]:  # the last one stays: the heap's top is in use, so only a trim can give back
        libc.free(block)
    before = rss()
    assert hand_back_freed_memory() is True
    after = rss()
    libc.free(blocks[-1])
    print(f"RSS {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")
    assert before - after >= 32 * 2**20, (before, after)


def test_an_int8_model_holds_a_quarter_of_its_linear_weights_and_no_float32_copy(minilm_dir, int8_fresh_cache):
    """Memory accounting, not timing. (1) By content, the six projections' int8 weights with their
    per-channel scales, zero points, column sums and biases take ≤ 0.27× their float32 weights and
    biases (1 byte against 4, plus 16 bytes per output channel). (2) Measured: loading a second
    int8 all-MiniLM-L6-v2 (caches warm) grows the heap by its float32 remainder (embeddings,
    LayerNorms, pooler) plus the packed int8 layers, at most 0.40× the float32 linear weights
    (FBGEMM pads each layer's input dimension to 512 rows on AVX2: 384 → 512), and not by the
    float32 checkpoint: the file's buffer is freed once the projections are quantized (it was kept
    whole while the embeddings, slices of the same buffer, lived: 104 MiB instead of 63)."""
    float32 = BertModel.from_pretrained(minilm_dir)
    linear_bytes = sum(param.numel() * 4 for name, param in float32.named_parameters()
                       if name.startswith("layers.") and "norm" not in name.lower())  # fmt: skip
    first = BertModel.from_pretrained(minilm_dir, dtype="int8")
    int8_bytes = sum(layer.stored_bytes() for _, layer in int8_layers(first))
    other_bytes = sum(param.numel() * 4 for param in first.parameters())  # what stays float32
    print(f"int8 layers {int8_bytes / 2**20:.2f} MiB by content, float32 {linear_bytes / 2**20:.2f} MiB: "
          f"{int8_bytes / linear_bytes:.4f}x")  # fmt: skip
    assert int8_bytes <= 0.27 * linear_bytes, (int8_bytes, linear_bytes)
    del float32
    before = _heap_in_use()
    second = BertModel.from_pretrained(minilm_dir, dtype="int8")
    grown = _heap_in_use() - before
    limit = other_bytes + 0.40 * linear_bytes + 4 * 2**20  # 4 MiB: Python objects, allocator slack
    print(f"heap grew {grown / 2**20:.1f} MiB for a second int8 model (float32 part {other_bytes / 2**20:.1f} MiB, "
          f"limit {limit / 2**20:.1f} MiB)")  # fmt: skip
    assert grown <= limit, (grown, limit)
    assert first is not second
