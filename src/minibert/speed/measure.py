"""The one way minibert times things: fairly, on a busy machine, within a budget.

``best_times`` runs several ways of doing the same work in interleaved rounds, each round in the
other order than the last, and keeps the best of each (the best of several is what a noisy shared
machine can be trusted for). gemm.py and attention_threshold.py time with it directly.

``time_against_float32`` is the question every dtype asks ("is X faster than float32 here?"):
one encoder layer's six projections (Q, K, V and the attention output, H→H; the feed-forward's
H→F and F→H) on seeded random weights of the model's shapes, float32 against a candidate, at the
process's thread count. bf16.py (``dtype="fastest"``), int8_check.py (``dtype="int8"``) and
training's ``--bf16`` (training/run/precision.py, forward and backward) ask it, each with its own
candidate, rows and budget; their verdicts go to one cache (cache.py).

float32 is timed on each GEMM backend a loaded model may run it on here (``gemm_backends``), the
faster counting: gemm.py picks one of them for a float32 model (by its own measurement), so a
dtype called faster here is faster than whichever it picks. On a full-width AVX-512 EPYC (Zen 5)
MKL's float32 runs at 43% of oneDNN's, and int8 timed against MKL alone read 6.2x float32 where a
whole run is 1.78x.

    >>> times = time_against_float32(8, 16, lambda linear: linear, tokens=4, budget=0.0)
    >>> times.float32 > 0 and times.candidate > 0, times.flops     # float32 against itself
    (True, 4096)
    >>> times.float32_backend in gemm_backends()                     # the faster of "mkl" and "onednn"
    True
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .packed_linear import PackedLinear, onednn_refuses

BUDGET_SECONDS = 0.2  # a measurement's share of a cold start (a cached verdict costs a file read)


def best_times(
    runs: dict, thread_counts: list[int], started: float, budget: float, max_rounds: int,
    sample_seconds: float = 0.0, grad: bool = False, min_rounds: int = 2,
) -> dict:  # fmt: skip
    """{(threads, key): best seconds} of each run at each thread count: interleaved rounds (each
    round in the other order than the last) until the next round would pass ``budget`` seconds
    since ``started`` or ``max_rounds`` are done, but at least ``min_rounds``; round 0 warms up
    (oneDNN builds its kernels, pages are touched) and is not counted. The process's thread count
    is restored.

    ``sample_seconds``: each timed sample repeats its run until it lasts about that long (as many
    times as the fastest warm-up run fits in it), so that work of microseconds is timed above the
    clock's noise. ``grad``: the runs record gradients (a training step), so they run outside
    ``torch.inference_mode()``."""
    settle_the_allocator()
    jobs = [(threads, key) for threads in thread_counts for key in runs]
    best = dict.fromkeys(jobs, float("inf"))
    warm = dict.fromkeys(jobs, float("inf"))
    rounds, repeats, previous, round_time = 0, 1, torch.get_num_threads(), 0.0
    try:
        with torch.inference_mode(not grad):
            while rounds < min_rounds or (rounds < max_rounds and time.perf_counter() - started + round_time < budget):
                round_started = time.perf_counter()
                for threads, key in jobs if rounds % 2 == 0 else reversed(jobs):
                    torch.set_num_threads(threads)
                    start = time.perf_counter()
                    for _ in range(repeats):
                        runs[key]()
                    spent = (time.perf_counter() - start) / repeats
                    if rounds > 0:
                        best[threads, key] = min(best[threads, key], spent)
                    else:
                        warm[threads, key] = spent
                if rounds == 0 and sample_seconds:
                    repeats = max(1, round(sample_seconds / max(min(warm.values()), 1e-6)))
                round_time = time.perf_counter() - round_started
                rounds += 1
    finally:
        torch.set_num_threads(previous)
    return best


# glibc serves a block this large or larger from mmap and, when one is freed, raises its threshold to it
# (its own adaptive rule, capped at 32 MiB on 64-bit): the largest size that rule still follows.
_SETTLING_BYTES = 32 * 2**20 - 2**16


def settle_the_allocator() -> None:
    """Put glibc's malloc where it settles anyway in a program that has freed one large tensor.

    By default glibc serves blocks of more than 128 KiB with ``mmap`` and hands them back when freed,
    so each run's outputs are page-faulted afresh, by an amount that depends on what ran before. It
    made timings bimodal: oneDNN's int8 projections (MiniLM's shapes, 1,024 rows, on an Intel Xeon
    with AMX) measured 4.5 ms in one process and 8.5-9 ms in the next, every round of the
    measurement alike, and picked the slower library. Freeing one block of just under 32 MiB raises
    glibc's own thresholds (mmap to that size, trim to twice it), as the first large tensor a program
    frees does; blocks below it then come from the heap, and the runs time what they compute. No
    setting is made: with ``keep_freed_memory`` (malloc.py) or a user's ``mallopt`` it changes nothing.
    Untouched, the block costs no page faults."""
    block = torch.empty(_SETTLING_BYTES, dtype=torch.uint8)
    del block


def projection_shapes(hidden: int, intermediate: int) -> list[tuple[int, int]]:
    """(out, in) of one encoder layer's six projections, as ``nn.Linear`` holds them:
    Q, K, V and the attention output (H×H), the feed-forward's H→F and F→H.

        >>> projection_shapes(4, 16)
        [(4, 4), (4, 4), (4, 4), (4, 4), (16, 4), (4, 16)]
    """
    return [(hidden, hidden)] * 4 + [(intermediate, hidden), (hidden, intermediate)]


def gemm_backends(
    make: Callable[[nn.Linear], nn.Module] | None = None, dtype: torch.dtype = torch.float32, backward: bool = False
) -> dict[str, Callable[[nn.Linear], nn.Module]]:
    """{GEMM backend: what runs a projection on it} for the backends a loaded model of ``dtype``
    may run on here (gemm.py's names): ``"mkl"``, ``F.linear`` as ``nn.Linear`` calls it, and
    ``"onednn"``, oneDNN with the weight prepacked (``PackedLinear``), where oneDNN takes the dtype
    and no gradient is recorded (``backward``: training multiplies through ``F.linear``, a packed
    layer falls back to it). ``make(linear)``, first: the projection in the candidate's form (a
    bfloat16 copy, ...).

        >>> sorted(gemm_backends(backward=True))
        ['mkl']
    """
    make = make or (lambda linear: linear)
    backends = {"mkl": make}
    if not backward and onednn_refuses(dtype) is None:
        backends["onednn"] = lambda linear: PackedLinear(make(linear))
    return backends


def _seeded_layers_and_inputs(hidden: int, intermediate: int, tokens: int) -> tuple[list[nn.Linear], dict]:
    """One layer's six projections with seeded random weights (the global random state left alone),
    and ``tokens`` rows of seeded random input for each width ({width: (tokens, width)})."""
    generator = torch.Generator().manual_seed(0)
    layers = []
    for out_features, in_features in projection_shapes(hidden, intermediate):
        linear = nn.Linear(in_features, out_features, device="meta").to_empty(device="cpu")  # no global RNG drawn
        with torch.no_grad():
            linear.weight.copy_(torch.randn(out_features, in_features, generator=generator) / in_features**0.5)
            linear.bias.copy_(torch.randn(out_features, generator=generator) * 0.02)
        layers.append(linear)
    return layers, {width: torch.randn(tokens, width, generator=generator) for width in sorted({hidden, intermediate})}


@dataclass(frozen=True)
class ProjectionTimes:
    """Best seconds of one layer's six projections, float32 (on ``float32_backend``, the faster of
    ``gemm_backends`` here) and the candidate; ``flops``: one run's work."""

    float32: float
    candidate: float
    flops: int
    float32_backend: str = "mkl"

    @property
    def speedup(self) -> float:
        """How many times faster the candidate ran: float32's seconds over the candidate's."""
        return self.float32 / self.candidate


def time_against_float32(
    hidden: int, intermediate: int, candidate: Callable[[nn.Linear], nn.Module], **options
) -> ProjectionTimes:
    """Time one encoder layer's six projections (``projection_shapes``) in float32 and as
    ``candidate`` makes them, at the process's thread count: ``best_times``' interleaved rounds
    within ``budget`` seconds (at least ``min_rounds``, the first a warm-up), the best of each.
    ``options`` are ``time_candidates_against_float32``'s (``tokens`` and ``budget`` required).

    The float32 projections are ``nn.Linear`` layers with seeded random weights (the global random
    state is left alone) and ``tokens`` rows of seeded random input, run on each of ``gemm_backends``
    (the faster counts); ``candidate(linear)`` gets a copy of each layer and returns the module that
    runs it (``Int8Linear``, a bfloat16 copy, ...), which is fed inputs of ``dtype``. ``backward``: a
    training step, forward then the gradients of inputs and weights (``flops`` three times the
    forward's)."""
    return time_candidates_against_float32(hidden, intermediate, {"candidate": candidate}, **options)["candidate"]


def time_candidates_against_float32(
    hidden: int,
    intermediate: int,
    candidates: dict[str, Callable[[nn.Linear], nn.Module]],
    *,
    tokens: int,
    budget: float,
    max_rounds: int = 12,
    dtype: torch.dtype = torch.float32,
    backward: bool = False,
    sample_seconds: float = 0.0,
    min_rounds: int = 2,
    float32_on: str | None = None,
) -> dict[str, ProjectionTimes]:
    """``time_against_float32`` for several candidates at once ({name: candidate} → {name: times}),
    all in the same interleaved rounds beside float32, so that a burst of load from elsewhere falls
    on every one of them alike (int8_check.py times its two libraries so). ``float32_on``: one of
    ``gemm_backends``, the only one float32 is timed on (a model whose GEMM library was asked for
    runs there whatever is faster); None, each of them (the faster counts)."""
    started = time.perf_counter()  # the set-up is part of the budget: a cold start pays for it

    def run(modules: list[nn.Module], inputs: dict[int, torch.Tensor]) -> Callable[[], None]:
        def forward() -> list[torch.Tensor]:
            return [module(inputs[linear.in_features]) for module, linear in zip(modules, layers)]

        if not backward:
            return forward
        return lambda: sum(output.float().sum() for output in forward()).backward()

    with torch.inference_mode(False):  # (made inside inference_mode, oneDNN's packed layers would not pack)
        layers, inputs = _seeded_layers_and_inputs(hidden, intermediate, tokens)
        float32_inputs = {width: x.requires_grad_(backward) for width, x in inputs.items()}
        candidate_inputs = {width: x.detach().to(dtype).requires_grad_(backward) for width, x in inputs.items()}
        runs = {("float32", backend): run([make(copy.deepcopy(linear)) for linear in layers], float32_inputs)
                for backend, make in gemm_backends(backward=backward).items()
                if float32_on in (None, backend)}  # fmt: skip
        if not runs:
            raise ValueError(f"float32_on={float32_on!r}: not one of {sorted(gemm_backends(backward=backward))}")
        for name, candidate in candidates.items():
            runs["candidate", name] = run([candidate(copy.deepcopy(linear)) for linear in layers], candidate_inputs)
    threads = torch.get_num_threads()
    best = best_times(runs, [threads], started, budget, max_rounds, sample_seconds, backward, min_rounds)
    float32 = {backend: seconds for (_, (kind, backend)), seconds in best.items() if kind == "float32"}
    fastest = min(float32, key=float32.get)
    flops = 2 * tokens * sum(out * inp for out, inp in projection_shapes(hidden, intermediate)) * (3 if backward else 1)
    return {name: ProjectionTimes(float32[fastest], best[threads, ("candidate", name)], flops, fastest)
            for name in candidates}  # fmt: skip
