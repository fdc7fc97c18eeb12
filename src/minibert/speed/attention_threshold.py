"""Up to which sequence length attention is faster written out (softmax(QKᵀ/√d)V, three small
GEMMs) than through PyTorch's fused kernel, on this CPU: measured with the GEMM backend's choice
(gemm.py caches both together); fast_path.py reads the verdict as ``short_attention``."""

from __future__ import annotations

import functools
import time

import torch

from .measure import best_times


def measure_attention(layer, lengths=(16, 32, 64, 128), budget: float = 0.06) -> dict[int, int]:
    """For each thread count (1, and the process's), the longest of ``lengths`` up to which the
    written-out formula (fast_path.written_out) beats the fused kernel by 10% at every length:
    512 tokens of each length, the model's heads, the best of the rounds that fit ``budget``."""
    from .fast_path import fused_kernel, written_out

    heads = layer.attention.num_heads
    hidden = layer.attention.query.in_features
    started = time.perf_counter()
    thread_counts = sorted({1, torch.get_num_threads()})
    inputs = {tokens: [torch.randn(max(1, 512 // tokens), tokens, hidden) for _ in "qkv"] for tokens in lengths}
    runs = {}
    for tokens, qkv in inputs.items():
        runs[tokens, "fused"] = functools.partial(fused_kernel, *qkv, None, heads, 0.0)
        runs[tokens, "written"] = functools.partial(written_out, *qkv, None, heads)
    best = best_times(runs, thread_counts, started, budget, max_rounds=6)
    table = {}
    for threads in thread_counts:
        table[threads] = 0
        for tokens in lengths:
            if best[threads, (tokens, "written")] * 1.1 > best[threads, (tokens, "fused")]:
                break
            table[threads] = tokens
    return table
