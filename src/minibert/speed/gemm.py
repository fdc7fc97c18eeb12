"""Which library multiplies the linear layers' matrices: chosen by measurement, on the CPU at hand.

A reader learning BERT can skip this file: it changes no number beyond float rounding, and
``BertModel(config)`` built by hand never uses it (its layers stay ``nn.Linear``).

BERT spends about three quarters of an embedding run in its linear layers (Q, K, V, the attention
output, the feed-forward network's two projections): general matrix multiplications (GEMMs) of
(tokens × H) by (H × H), (H × F) and (F × H). PyTorch ships two CPU GEMM libraries, giving three
backends (packed_linear.py runs each): ``"mkl"`` (``F.linear``, as ``nn.Linear`` calls it),
``"onednn"`` (oneDNN with the weights prepacked) and ``"onednn-fused"`` (the same, with the
feed-forward activation applied as the GEMM writes its output).

Which is faster depends on the CPU. On an AMD EPYC with full-width AVX-512 units, MKL does not take
its AVX-512 path and runs at ~40% of oneDNN's speed; on a Zen 4 EPYC (AVX-512 on 256-bit units)
oneDNN is ~15% faster; on an AVX2-only EPYC the two tie and the fused GELU is slower than PyTorch's
own. No fixed choice is right everywhere, so ``choose`` measures: one encoder layer's six
projections on the model's real weights, each backend in turn, at one thread and at the process's
thread count, interleaved (measure.py's ``best_times``), within ``BUDGET_SECONDS``. The fastest wins if it beats
``"mkl"`` (the book's plain path) by ``MARGIN``; anything closer keeps ``"mkl"``. The same
measurement says up to which sequence length attention is faster written out than through the
fused kernel (attention_threshold.py; fast_path.py uses it). The verdict is cached per CPU (model
and instruction-set flags: cpu.py), torch version, thread count, dtype and layer shapes, in
``~/.cache/minibert/gemm.json`` (cache.py), so later processes pay nothing; any change
of those gives a new key and a new measurement.

``MINIBERT_GEMM=mkl|onednn|onednn-fused|auto`` (or ``from_pretrained(..., gemm=...)``, the CLI's
``--gemm``) overrides the measurement. ``from_pretrained`` applies a backend through seam.py (what
is swapped, and how to undo it).
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from . import BACKENDS
from .attention_threshold import measure_attention
from .cache import cache_key, read_cache, where_cached, write_cache
from .cpu import cpu_name
from .measure import BUDGET_SECONDS, best_times
from .packed_linear import (
    FUSIBLE,
    PackedLinear,
    activation_name,
    encoder_layers,
    feed_forward_activation,
    onednn_refuses,
    use_backend,
)

log = logging.getLogger("minibert.gemm")

# A backend must beat F.linear by this much on the calibration layer to replace it: the noise of
# the best of a few rounds. The layer's rows are few (to fit the budget), and few rows flatter
# oneDNN, by a different amount on each CPU, so no margin separates "ties" from "wins" on them:
#   AVX2 EPYC (Zen 3):     calibration 1.10-1.32x MKL, a real embedding run ties (10.96 s vs 10.89 s);
#   AVX-512 EPYC (Zen 4):  calibration 1.17-1.31x,     a real run 1.13x (vs ONNX Runtime 1.15x, 1.02x);
#   AVX-512 EPYC (wider):  2.3x on the GEMMs alone.
# A margin large enough to keep MKL on Zen 3 keeps it on Zen 4 too, and loses 13% there; a small
# one costs a tie at worst (and oneDNN's packed copy of the weights: MINIBERT_GEMM=mkl where
# memory matters more).
MARGIN = 0.05


@dataclass
class Choice:
    """What ``choose`` decided, and why (also the cache's record)."""

    backend: str
    reason: str  # "measured", "cached", "MINIBERT_GEMM", "gemm" (the argument), "unavailable"
    gflops: dict[str, float] = field(default_factory=dict)  # backend → GFLOP/s on the model's layer
    seconds: float = 0.0  # the measurement's wall time (0 when cached)
    short_attention: dict[int, int] = field(default_factory=dict)  # threads → written-out attention up to T
    not_cached: str | None = None  # why a new measurement could not be cached (write_cache), else None


def choose(model: nn.Module, gemm: str | None = None) -> Choice:
    """Pick and apply the backend for ``model``'s linear layers: ``gemm`` (an argument), else
    ``$MINIBERT_GEMM``, else the cached measurement for this CPU and shapes, else a new one. The
    same measurement says up to which length attention is written out (``measure_attention``)."""
    requested, source = requested_backend(gemm)
    if requested not in ("auto", "mkl") and not onednn_available(model):
        reason = _unavailable_reason(model)
        if gemm is not None:  # asked for this model: refused, naming the keyword and the command's flag
            raise ValueError(f"gemm={gemm!r} (--gemm) asks for {requested}, which cannot run here ({reason})")
        log.warning("%s asks for %s, which cannot run here (%s); this model's linear layers stay on mkl",
                    source, requested, reason)  # a process-wide wish: noted
        requested = "mkl"
    layer = _first_layer(model)
    if layer is None or next(model.parameters()).device.type != "cpu":
        use_backend(model, "mkl" if requested == "auto" else requested)
        return Choice(model.gemm_backend, "unavailable")
    key = backend_cache_key(layer)  # CPU, flags, torch, dtype: whether oneDNN runs here is in the key
    choice = _cached(key)
    if choice is None:
        choice = measure(model, layer) if onednn_available(model) else Choice("mkl", "unavailable")
        started = time.perf_counter()
        choice.short_attention = measure_attention(layer)
        choice.seconds = round(choice.seconds + time.perf_counter() - started, 3)
        choice.not_cached = write_cache(key, {"backend": choice.backend, "gflops": choice.gflops, "cpu": cpu_name(),
                           "torch": torch.__version__,
                           "short_attention": {str(k): v for k, v in choice.short_attention.items()}})  # fmt: skip
    for module in model.modules():  # the BertModel (inside a model with heads too)
        if hasattr(module, "short_attention"):
            module.short_attention = dict(choice.short_attention)
    if requested != "auto":
        use_backend(model, requested)
        return _logged(Choice(requested, source, short_attention=choice.short_attention), model, logging.DEBUG)
    use_backend(model, choice.backend)
    return _logged(choice, model, level=logging.INFO if choice.reason != "cached" else logging.DEBUG)


def requested_backend(gemm: str | None) -> tuple[str, str]:
    """(the backend asked for, lower case: "auto" or one of BACKENDS; who asked: "gemm", the
    argument, or "MINIBERT_GEMM"), ``gemm`` before ``$MINIBERT_GEMM``; a name that is neither is a ValueError."""
    if gemm is not None and not isinstance(gemm, str):
        raise ValueError(f"gemm must be one of auto, {', '.join(BACKENDS)}; got {gemm!r}")
    requested = (gemm.strip().lower() or "auto") if gemm is not None else requested_in_environment()
    source = "gemm" if gemm is not None else "MINIBERT_GEMM"  # the keyword, or the variable
    if requested != "auto" and requested not in BACKENDS:
        raise ValueError(f"{source} must be one of auto, {', '.join(BACKENDS)}; got {requested!r}")
    return requested, source


def requested_in_environment() -> str:
    """``$MINIBERT_GEMM`` as ``choose`` reads it: lower case, "auto" when unset or blank."""
    return os.environ.get("MINIBERT_GEMM", "auto").strip().lower() or "auto"


def _cached(key: str) -> Choice | None:
    """The cached choice for ``key``, or None (measure again) where the record is missing or any
    field read is damaged: ``backend`` one of BACKENDS, ``gflops`` {backend: finite number},
    ``short_attention`` {"threads": tokens}, both whole numbers ≥ 0 (an older record has none)."""
    record = read_cache().get(key)
    if not isinstance(record, dict) or record.get("backend") not in BACKENDS:
        return None
    gflops, short = record.get("gflops"), record.get("short_attention")
    if not isinstance(gflops, dict) or not all(name in BACKENDS and _is_number(rate) for name, rate in gflops.items()):
        return None
    if not isinstance(short, dict) or not all(
        isinstance(threads, str) and threads.isdecimal() and type(tokens) is int and tokens >= 0
        for threads, tokens in short.items()
    ):
        return None
    short_attention = {int(threads): tokens for threads, tokens in short.items()}
    return Choice(record["backend"], "cached", gflops, short_attention=short_attention)


def _is_number(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def onednn_available(model: nn.Module) -> bool:
    return _unavailable_reason(model) is None


def _unavailable_reason(model: nn.Module) -> str | None:
    if not torch.backends.mkldnn.is_available():
        return "torch was built without oneDNN"
    parameter = next(model.parameters(), None)
    if parameter is None or parameter.device.type != "cpu":
        return "the model is not on the CPU"
    refused = onednn_refuses(parameter.dtype)  # (a dtype oneDNN never takes says so, whatever else holds)
    if refused is None and parameter.is_inference():
        return "its weights are inference tensors (made inside torch.inference_mode(), they keep no version counter)"
    return refused


def _first_layer(model: nn.Module):
    layers = encoder_layers(model)
    return layers[0] if layers else None


def calibration_tokens(hidden: int, intermediate: int) -> int:
    """Rows of the calibration GEMMs: one layer's six projections cost ~1 GFLOP (≈ 7 ms at 150
    GFLOP/s) however large the model (272 tokens for MiniLM, 64 for bert-base and larger), so that
    the budget holds several interleaved rounds: the best of several is what a noisy shared machine
    can be trusted for."""
    return max(64, min(2048, int(1e9 / layer_flops_per_token(hidden, intermediate)) // 16 * 16))


def layer_flops_per_token(hidden: int, intermediate: int) -> int:
    """One encoder layer's projections per token: Q, K, V, output (H×H each), H→F, F→H; 2 per multiply-add."""
    return 2 * (4 * hidden * hidden + 2 * hidden * intermediate)


def measure(model: nn.Module, layer=None, budget: float = BUDGET_SECONDS) -> Choice:
    """Time one encoder layer's projections on every backend this CPU runs, at one thread and at
    the process's thread count (interleaved rounds within ``budget`` seconds; the first round
    warms up and is not counted), and pick the fastest over both (``decide``). ``gflops`` are the
    rates over both thread counts together."""
    layer = layer or _first_layer(model)
    started = time.perf_counter()
    attention, feed_forward = layer.attention, layer.feed_forward
    hidden, intermediate = feed_forward.intermediate.in_features, feed_forward.intermediate.out_features
    tokens = calibration_tokens(hidden, intermediate)
    dtype = feed_forward.intermediate.weight.dtype
    x = torch.randn(tokens, hidden, dtype=dtype)
    flops = tokens * layer_flops_per_token(hidden, intermediate)
    activation = feed_forward_activation(feed_forward)
    act = activation_name(feed_forward)
    weights = [attention.query, attention.key, attention.value, attention.output]
    # F.linear timed on contiguous weights, as it would run them (a TF kernel loads as a transposed view)
    linears = [*weights, feed_forward.intermediate, feed_forward.output]
    dense = {linear: linear.weight.contiguous() for linear in linears}

    def plain():
        for linear in weights:
            F.linear(x, dense[linear], linear.bias)
        F.linear(activation(F.linear(x, dense[feed_forward.intermediate], feed_forward.intermediate.bias)),
                 dense[feed_forward.output], feed_forward.output.bias)  # fmt: skip

    packed = {name: PackedLinear(linear) for name, linear in zip("qkvo", weights)}
    packed_in, packed_out = PackedLinear(feed_forward.intermediate), PackedLinear(feed_forward.output)
    fused_in = PackedLinear(feed_forward.intermediate, FUSIBLE[act], activation) if act in FUSIBLE else None

    def onednn(fused: bool):
        def run():
            for linear in packed.values():
                linear(x)
            hidden_states = fused_in(x) if fused else activation(packed_in(x), inplace=True)
            packed_out(hidden_states)

        return run

    candidates = {"mkl": plain, "onednn": onednn(False)}
    if fused_in is not None:
        candidates["onednn-fused"] = onednn(True)
    # Each backend is timed at one thread (how the Embedder's parallel streams run each batch) and
    # at the process's thread count (a lone batch, a bare model): it must win where it will run.
    thread_counts = sorted({1, torch.get_num_threads()})
    best = best_times(candidates, thread_counts, started, budget, max_rounds=12)
    seconds = {name: sum(best[threads, name] for threads in thread_counts) for name in candidates}
    gflops = {name: round(len(thread_counts) * flops / spent / 1e9, 1) for name, spent in seconds.items()}
    return Choice(decide(gflops), "measured", gflops, round(time.perf_counter() - started, 3))


def decide(gflops: dict[str, float]) -> str:
    """The fastest backend, if it beats ``"mkl"`` (F.linear, the book's path) by ``MARGIN``."""
    fastest = max(gflops, key=gflops.get)
    return fastest if gflops[fastest] > (1 + MARGIN) * gflops["mkl"] else "mkl"


def _logged(choice: Choice, model: nn.Module, level: int = logging.INFO) -> Choice:
    if choice.gflops:
        rates = ", ".join(f"{name} {rate:.0f}" for name, rate in choice.gflops.items())
        why = f"{choice.reason}: GFLOP/s on one layer's projections {rates}"
        if choice.seconds:
            why += f", in {choice.seconds:.2f} s; {where_cached(choice.not_cached)}"
    elif choice.reason == "unavailable":
        why = "oneDNN cannot run here"
    else:
        why = f"set by {choice.reason}"
    short = ", ".join(f"{tokens} tokens at {threads} thread{'s' * (threads > 1)}"
                      for threads, tokens in sorted(choice.short_attention.items()) if tokens)  # fmt: skip
    attention = f"; attention written out for sequences up to {short}" if short else ""
    log.log(level, "linear layers on %s (%s; %s, torch %s, %d threads)%s", choice.backend, why, cpu_name(),
            torch.__version__, torch.get_num_threads(), attention)  # fmt: skip
    return choice


def backend_cache_key(layer) -> str:
    """Everything a GEMM's speed depends on: the machine (cache.cache_key: the CPU and its
    flags, torch, threads), and the layer's dtype, shapes and activation."""
    intermediate = layer.feed_forward.intermediate
    return cache_key(str(intermediate.weight.dtype).removeprefix("torch."),
                     f"{intermediate.in_features}x{intermediate.out_features}",
                     str(activation_name(layer.feed_forward)))  # fmt: skip
