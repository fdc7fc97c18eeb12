"""Which library multiplies the linear layers' matrices: chosen by measurement, on the CPU at hand.

A reader learning BERT can skip this file: it changes no number beyond float rounding, and
``BertModel(config)`` built by hand never uses it (its layers stay ``nn.Linear``).

BERT spends about three quarters of an embedding run in its linear layers (Q, K, V, the attention
output, the feed-forward network's two projections): general matrix multiplications (GEMMs) of
(tokens × H) by (H × H), (H × F) and (F × H). PyTorch ships two CPU GEMM libraries, and which one is
faster depends on the CPU:

* ``"mkl"``: ``F.linear``, as ``nn.Linear`` calls it (Intel MKL in PyTorch's x86 builds). The bias
  is copied into the output first, then the product is added to it.
* ``"onednn"``: oneDNN (``torch.ops.mkldnn._linear_pointwise``), with each weight reordered once
  into oneDNN's blocked layout ("prepacked") and the bias added inside the GEMM.
* ``"onednn-fused"``: the same, with the feed-forward activation (GELU, exact or tanh; ReLU)
  applied by oneDNN as the GEMM writes its output ("post-op"): one pass over the (tokens × F)
  tensor fewer.

Which is faster depends on the CPU. On an AMD EPYC with full-width AVX-512 units, MKL does not take
its AVX-512 path and runs at ~40% of oneDNN's speed; on a Zen 4 EPYC (AVX-512 on 256-bit units)
oneDNN is ~15% faster; on an AVX2-only EPYC the two tie and the fused GELU is slower than PyTorch's
own. No fixed choice is right everywhere, so ``choose`` measures: one encoder layer's six
projections on the model's real weights, each backend in turn, at one thread and at the process's
thread count, interleaved, within ``BUDGET_SECONDS``. The fastest wins if it beats ``"mkl"`` (the
book's plain path) by ``MARGIN``; anything closer keeps ``"mkl"``. The same
measurement says up to which sequence length attention is faster written out than through the
fused kernel (``measure_attention``; fast_path.py uses it). The verdict is cached per CPU (model
and instruction-set flags), torch version, thread count, dtype and layer shapes, in
``~/.cache/minibert/gemm.json`` (``$XDG_CACHE_HOME``, or ``$MINIBERT_CACHE_DIR``), so later
processes pay nothing; any change of those gives a new key and a new measurement.

``MINIBERT_GEMM=mkl|onednn|onednn-fused|auto`` (or ``from_pretrained(..., gemm=...)``, the CLI's
``--gemm``) overrides the measurement. oneDNN runs only where no gradient is needed (inference
under ``torch.no_grad()`` / ``inference_mode()``); a forward pass that trains falls back to
``F.linear`` with the same weights, so fine-tuning a loaded model works unchanged. So does a layer
whose weight is an inference tensor (no version counter: a change could not be seen).
``from_pretrained`` applies a backend through speed.py (what is swapped, and how to undo it).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .errors import CheckpointError
from .formats.atomic_files import write_atomically
from .formats.json_files import read_json_object

log = logging.getLogger("minibert.gemm")

BACKENDS = ("mkl", "onednn", "onednn-fused")
BUDGET_SECONDS = 0.2  # the measurement's share of a cold start (a cached verdict costs a file read)
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
CACHE_VERSION = 4  # bumped when the way of measuring or deciding changes

# hidden_act → oneDNN's post-op (attr, algorithm): the same function, as activations.py defines it.
FUSIBLE = {
    "gelu": ("gelu", "none"),  # exact: x·Φ(x) with erf
    "gelu_python": ("gelu", "none"),
    "gelu_new": ("gelu", "tanh"),
    "gelu_pytorch_tanh": ("gelu", "tanh"),
    "gelu_python_tanh": ("gelu", "tanh"),
    "gelu_fast": ("gelu", "tanh"),
    "gelu_accurate": ("gelu", "tanh"),
    "relu": ("relu", ""),
}


class PackedLinear(nn.Linear):
    """An ``nn.Linear`` that multiplies through oneDNN with its weight prepacked.

    It holds the very same ``weight`` and ``bias`` Parameters as the layer it replaces (state dicts,
    optimizers and ``.to()`` see no difference); the packed copy is a cache, rebuilt whenever the
    weight changes (a new tensor, an in-place update, another dtype). With ``post_op`` it also
    applies the feed-forward activation.
    """

    def __init__(self, linear: nn.Linear, post_op: tuple[str, str] | None = None, activation=None):
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self.post_op, self.activation = post_op, activation  # ("gelu", "none"), activations.exact_gelu
        self._packed, self._packed_for, self._inference_noted = None, None, False

    def packed_weight(self) -> torch.Tensor | None:
        """The weight in oneDNN's layout, or None where oneDNN cannot take it (e.g. a model moved
        to bfloat16 on a CPU without AVX-512 after loading), or where a change of the weight could
        not be seen: an inference tensor (a model moved or copied inside ``torch.inference_mode()``)
        keeps no version counter, so an in-place update would leave a stale packed copy; such a
        layer runs on ``F.linear`` (the same numbers; moved or copied outside, it is packed again)."""
        weight = self.weight
        if weight.is_inference():
            if not self._inference_noted:
                log.info("%s: its weight is an inference tensor (no version counter): running on F.linear", self)
                self._inference_noted = True
            return None
        key = (weight.data_ptr(), weight._version, weight.dtype, tuple(weight.shape))
        if self._packed_for != key:
            with torch.no_grad():
                try:
                    self._packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)
                except RuntimeError:
                    self._packed = None
            self._packed_for = key
        return self._packed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        training = torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad)
        usable = x.device.type == "cpu" and x.dtype == self.weight.dtype in (torch.float32, torch.bfloat16)
        packed = self.packed_weight() if usable and not training else None  # autograd needs F.linear
        if packed is None:
            y = F.linear(x, self.weight, self.bias)
            return y if self.activation is None else self.activation(y)
        attr, algorithm = self.post_op or ("none", "")
        return torch.ops.mkldnn._linear_pointwise(x, packed, self.bias, attr, [], algorithm)

    def __getstate__(self):  # pickling and deepcopy: the cache is rebuilt on first use
        state = super().__getstate__()
        state = dict(state, _packed=None, _packed_for=None, _inference_noted=False)
        return state

    def extra_repr(self) -> str:
        fused = f", post_op={self.post_op[0]}" if self.post_op else ""
        return f"{super().extra_repr()}, backend=onednn{fused}"


def _applied_already(x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    """The feed-forward activation when the intermediate GEMM has applied it as a post-op."""
    return x


def use_backend(model: nn.Module, backend: str) -> None:
    """Run ``model``'s encoder layers' projections on ``backend`` (one of BACKENDS); undoes any
    earlier choice. The heads keep ``nn.Linear``: they are a sliver of the work."""
    if backend not in BACKENDS:
        raise ValueError(f"gemm backend must be one of {', '.join(BACKENDS)} (or 'auto'), got {backend!r}")
    for layer in encoder_layers(model):
        feed_forward = layer.feed_forward
        feed_forward.activation = _activation(feed_forward)  # unfused: the original function back
        for part in (layer.attention, feed_forward):
            for name, child in list(part.named_children()):
                if isinstance(child, nn.Linear):
                    setattr(part, name, _plain(child) if backend == "mkl" else PackedLinear(child))
        act = _activation_name(feed_forward)
        if backend == "onednn-fused" and act in FUSIBLE:
            feed_forward.intermediate = PackedLinear(feed_forward.intermediate, FUSIBLE[act], feed_forward.activation)
            feed_forward.activation = _applied_already
    model.gemm_backend = backend


def encoder_layers(model: nn.Module) -> list[nn.Module]:
    """model.py's EncoderLayers (found by their parts: this module sits below model.py)."""
    return [module for module in model.modules() if hasattr(module, "attention") and hasattr(module, "feed_forward")]


def _plain(linear: nn.Linear) -> nn.Linear:
    if type(linear) is nn.Linear:
        return linear
    plain = nn.Linear.__new__(nn.Linear)
    nn.Module.__init__(plain)
    plain.in_features, plain.out_features = linear.in_features, linear.out_features
    plain.weight, plain.bias = linear.weight, linear.bias
    return plain


def _activation(feed_forward):
    """The feed-forward's activation function, also where oneDNN applies it (``onednn-fused``)."""
    if feed_forward.activation is _applied_already:
        return feed_forward.intermediate.activation
    return feed_forward.activation


def _activation_name(feed_forward) -> str | None:
    """The config name of the feed-forward's activation function (the first name that means it)."""
    from .activations import ACTIVATIONS

    activation = _activation(feed_forward)
    return next((name for name, f in ACTIVATIONS.items() if f is activation), None)


# --- choosing by measurement ---------------------------------------------------------------------


@dataclass
class Choice:
    """What ``choose`` decided, and why (also the cache's record)."""

    backend: str
    reason: str  # "measured", "cached", "MINIBERT_GEMM", "argument", "unavailable"
    gflops: dict[str, float] = field(default_factory=dict)  # backend → GFLOP/s on the model's layer
    seconds: float = 0.0  # the measurement's wall time (0 when cached)
    short_attention: dict[int, int] = field(default_factory=dict)  # threads → written-out attention up to T


def choose(model: nn.Module, gemm: str | None = None) -> Choice:
    """Pick and apply the backend for ``model``'s linear layers: ``gemm`` (an argument), else
    ``$MINIBERT_GEMM``, else the cached measurement for this CPU and shapes, else a new one. The
    same measurement says up to which length attention is written out (``measure_attention``)."""
    requested = gemm if gemm is not None else os.environ.get("MINIBERT_GEMM", "auto")
    source = "argument" if gemm is not None else "MINIBERT_GEMM"
    requested = requested.strip().lower() or "auto"
    if requested != "auto" and requested not in BACKENDS:
        raise ValueError(f"{source} must be one of auto, {', '.join(BACKENDS)}; got {requested!r}")
    if requested not in ("auto", "mkl") and not onednn_available(model):
        why = f"{source} asks for {requested}, which cannot run here ({_unavailable_reason(model)})"
        if gemm is not None:  # asked for this model: refused
            raise ValueError(why)
        log.warning("%s; this model's linear layers stay on mkl", why)  # a process-wide wish: noted
        requested = "mkl"
    layer = _first_layer(model)
    if layer is None or next(model.parameters()).device.type != "cpu":
        use_backend(model, "mkl" if requested == "auto" else requested)
        return Choice(model.gemm_backend, "unavailable")
    key = cache_key(model, layer)  # CPU, flags, torch, dtype: whether oneDNN runs here is in the key
    choice = _cached(key)
    if choice is None:
        choice = measure(model, layer) if onednn_available(model) else Choice("mkl", "unavailable")
        started = time.perf_counter()
        choice.short_attention = measure_attention(layer)
        choice.seconds = round(choice.seconds + time.perf_counter() - started, 3)
        write_cache(key, {"backend": choice.backend, "gflops": choice.gflops, "cpu": cpu_name(),
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


def _cached(key: str) -> Choice | None:
    record = read_cache().get(key)
    if not isinstance(record, dict) or record.get("backend") not in BACKENDS:
        return None
    gflops = record.get("gflops") if isinstance(record.get("gflops"), dict) else {}
    short = record.get("short_attention")
    if not isinstance(short, dict):
        return None  # an older record: measure again
    try:
        short_attention = {int(threads): int(tokens) for threads, tokens in short.items()}
    except (TypeError, ValueError):
        return None
    return Choice(record["backend"], "cached", gflops, short_attention=short_attention)


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


def onednn_available(model: nn.Module) -> bool:
    return _unavailable_reason(model) is None


def _unavailable_reason(model: nn.Module) -> str | None:
    if not torch.backends.mkldnn.is_available():
        return "torch was built without oneDNN"
    parameter = next(model.parameters(), None)
    if parameter is None or parameter.device.type != "cpu":
        return "the model is not on the CPU"
    if parameter.dtype not in (torch.float32, torch.bfloat16):
        return f"dtype {parameter.dtype}"
    if parameter.is_inference():
        return "its weights are inference tensors (made inside torch.inference_mode(), they keep no version counter)"
    try:  # bf16 needs AVX-512 (bw, vl, dq) or AVX-NE-CONVERT; oneDNN says so on a tiny reorder
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(8, 8, dtype=parameter.dtype), None)
    except RuntimeError as error:
        return str(error).split("\n")[0]
    return None


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
    activation = _activation(feed_forward)
    act = _activation_name(feed_forward)
    weights = [attention.query, attention.key, attention.value, attention.output]

    def plain():
        for linear in weights:
            F.linear(x, linear.weight, linear.bias)
        F.linear(activation(F.linear(x, feed_forward.intermediate.weight, feed_forward.intermediate.bias)),
                 feed_forward.output.weight, feed_forward.output.bias)  # fmt: skip

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
            why += f", in {choice.seconds:.2f} s; cached in {cache_file()}"
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


# --- the cache -----------------------------------------------------------------------------------


def cpu_name() -> str:
    """The CPU's model name, family and model numbers: "AMD EPYC (family 25, model 1)"."""
    info = _cpuinfo()
    name = info.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in info:
        name += f" (family {info['cpu family']}, model {info.get('model', '?')})"
    return name


def cpu_flags() -> set[str]:
    return set(_cpuinfo().get("flags", "").split())


def has_native_bf16() -> bool:
    """Whether the CPU multiplies bfloat16 in hardware (AVX-512 BF16 or AMX); elsewhere torch
    emulates it, slower than float32."""
    return bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})


# Rows of the bf16-vs-float32 measurement: what an embedding batch gives a GEMM (a budget of 2,048
# padded tokens, packed to the real ones). Fewer rows flatter bfloat16 (half the bytes of weight to
# read, the same arithmetic): on the Xeon above, 272 rows measured bf16 2.4x faster where 2,048 rows
# measured it 0.6x, and a real embedding run follows the latter.
BF16_TOKENS = 1024
BF16_MARGIN = 0.10  # bfloat16 must be this much faster: its numbers are approximate, float32's exact


def bf16_is_faster(hidden: int, intermediate: int, budget: float = 2 * BUDGET_SECONDS) -> bool:
    """Whether bfloat16 runs one encoder layer's projections (4 × H→H, H→F, F→H) faster than
    float32 on this CPU: ``dtype="auto"``'s question. Having bf16 instructions is not enough:
    AVX-512 BF16's ``vdpbf16ps`` does no more multiply-adds per cycle than float32's two FMA ports,
    and on an Intel Xeon without AMX (family 6, model 207) oneDNN's bf16 GEMMs ran at 0.6× float32;
    AMX, or AMD Zen 4's bf16 units (1.6× on a real embedding run), are where it pays. So: measured
    once (random weights of the layer's shapes, ``BF16_TOKENS`` rows, the process's threads, the best
    of interleaved rounds within ``budget`` seconds, at least two) and cached in gemm.json like the
    backend choice. False at once where torch would emulate bf16 (no avx512_bf16 or AMX)."""
    if not has_native_bf16():
        return False
    flags = hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:12]
    key = "|".join(["bf16 vs float32", cpu_name(), f"flags {flags}", f"torch {torch.__version__}",
                    f"{torch.get_num_threads()} threads", f"{hidden}x{intermediate}", f"v{CACHE_VERSION}"])  # fmt: skip
    record = read_cache().get(key)
    if isinstance(record, dict) and isinstance(record.get("bf16_faster"), bool):
        return record["bf16_faster"]
    float32_seconds, bfloat16_seconds = time_projections_by_dtype(hidden, intermediate, budget)
    faster = bfloat16_seconds * (1 + BF16_MARGIN) < float32_seconds  # a tie keeps float32's exact numbers
    log.info("bfloat16 %.2fx float32 on %s (%dx%d projections): dtype='auto' is %s",
             float32_seconds / bfloat16_seconds, cpu_name(), hidden, intermediate,
             "bfloat16" if faster else "float32")  # fmt: skip
    write_cache(key, {"bf16_faster": faster, "float32_seconds": float32_seconds,
                       "bfloat16_seconds": bfloat16_seconds})  # fmt: skip
    return faster


def time_projections_by_dtype(hidden: int, intermediate: int, budget: float) -> tuple[float, float]:
    """(float32, bfloat16) best seconds of one layer's six projections on random weights of its
    shapes, at the process's thread count, interleaved rounds within ``budget`` seconds."""
    started = time.perf_counter()
    tokens = BF16_TOKENS
    shapes = [(hidden, hidden)] * 4 + [(intermediate, hidden), (hidden, intermediate)]  # (out, in)

    def projections(dtype: torch.dtype):
        weights = [torch.randn(shape, dtype=dtype) / shape[1] ** 0.5 for shape in shapes]
        inputs = {width: torch.randn(tokens, width, dtype=dtype) for width in (hidden, intermediate)}
        return lambda: [F.linear(inputs[weight.shape[1]], weight) for weight in weights]

    runs = {"float32": projections(torch.float32), "bfloat16": projections(torch.bfloat16)}
    threads = torch.get_num_threads()
    best = best_times(runs, [threads], started, budget, max_rounds=12)
    return best[threads, "float32"], best[threads, "bfloat16"]


def _cpuinfo() -> dict[str, str]:
    info = {}
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    break  # the first processor is enough
                name, _, value = line.partition(":")
                info[name.strip()] = value.strip()
    except OSError:
        pass
    return info


def cache_key(model: nn.Module, layer) -> str:
    """Everything a GEMM's speed depends on: the CPU (name and instruction-set flags: two "AMD
    EPYC"s differ by AVX-512), torch, threads, dtype, and the layer's shapes and activation."""
    feed_forward = layer.feed_forward
    flags = hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:12]
    return "|".join([
        cpu_name(), f"flags {flags}", f"torch {torch.__version__}", f"{torch.get_num_threads()} threads",
        str(feed_forward.intermediate.weight.dtype).removeprefix("torch."),
        f"{feed_forward.intermediate.in_features}x{feed_forward.intermediate.out_features}",
        str(_activation_name(feed_forward)), f"v{CACHE_VERSION}",
    ])  # fmt: skip


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
