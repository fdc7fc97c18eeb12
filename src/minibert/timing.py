"""Timing several ways of doing the same work fairly on a busy machine: interleaved rounds, each in
the other order than the last, the best of each kept (the best of several is what a noisy shared
machine can be trusted for). gemm.py, attention_threshold.py and bf16_speed.py measure with it."""

from __future__ import annotations

import time

import torch

BUDGET_SECONDS = 0.2  # a measurement's share of a cold start (a cached verdict costs a file read)


def best_times(runs: dict, thread_counts: list[int], started: float, budget: float, max_rounds: int) -> dict:
    """{(threads, key): best seconds} of each run at each thread count: interleaved rounds (each
    round in the other order than the last) until the next round would pass ``budget`` seconds
    since ``started`` or ``max_rounds`` are done; round 0 warms up (oneDNN builds its kernels,
    pages are touched) and is not counted. The process's thread count is restored."""
    jobs = [(threads, key) for threads in thread_counts for key in runs]
    best = dict.fromkeys(jobs, float("inf"))
    rounds, previous, round_time = 0, torch.get_num_threads(), 0.0
    try:
        with torch.inference_mode():
            while rounds < 2 or (rounds < max_rounds and time.perf_counter() - started + round_time < budget):
                round_started = time.perf_counter()
                for threads, key in jobs if rounds % 2 == 0 else reversed(jobs):
                    torch.set_num_threads(threads)
                    start = time.perf_counter()
                    runs[key]()
                    if rounds > 0:
                        best[threads, key] = min(best[threads, key], time.perf_counter() - start)
                round_time = time.perf_counter() - round_started
                rounds += 1
    finally:
        torch.set_num_threads(previous)
    return best
