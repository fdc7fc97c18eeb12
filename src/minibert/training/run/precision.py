"""A run's arithmetic, ``--precision fp32|bf16|fp16``: autocast on the run's device, fp16's loss
scaler, and whether bf16 pays on the CPU at hand (measured once, cached, said in one line when it does not).

    fp32   every product in float32 (Google's run_classifier.py and run_pretraining.py)
    bf16   the forward pass under ``torch.autocast(device, bfloat16)``: matrix products in bfloat16
           (8 bits of mantissa, float32's range); the residual stream, LayerNorm, weights,
           gradients and the optimizer float32 (tests/test_model_autocast.py)
    fp16   the same in float16 (11 bits of mantissa, a range up to 65504): small gradients would
           round to 0, so the loss is multiplied by a scale before backward and the gradients
           divided by it after (``LossScaler``, torch's GradScaler rule); a GPU only — on a CPU
           torch's float16 products are slow and there is no reason to prefer them to bf16.

``--precision bf16`` (``pretrain --bf16``) runs the forward pass under ``torch.autocast("cpu",
bfloat16)``: the matrix products take bfloat16 inputs (8 bits of mantissa), the weights and the
optimizer stay float32. Whether that is faster depends on the CPU's bf16 instructions, not on minibert:

* AMX (``amx_bf16``: Intel Xeon from Sapphire Rapids on, when the hypervisor exposes it): tile
  matrix units, several times float32's rate. This is where bf16 training on a CPU pays.
* AVX-512 BF16 alone (``avx512_bf16`` without AMX): ``vdpbf16ps`` does a pair of bf16 products per
  lane, no more work per cycle than float32's two FMA ports, and oneDNN's bf16 kernels then run
  slower than MKL's float32 ones. Measured on an Intel Xeon (family 6, model 207, KVM, no AMX flags):
  every bf16 GEMM of a training step 1.6-4x slower than float32 (docs/pretraining.md).
* Neither: torch emulates bfloat16, many times slower than float32.

No table of CPU models can say which case holds (a virtual machine hides AMX; AMD's Zen 4 and 5 have
``avx512_bf16`` on their own units), so ``check_bf16`` measures, the way every dtype is measured
(speed/measure.py's ``time_against_float32``): one encoder layer's six projections (4 × H→H, H→F,
F→H) on the run's shapes, float32 against bf16 autocast, here forward and backward. The verdict is
cached with the other measurements (speed/cache.py: ``~/.cache/minibert/gemm.json``, per CPU name
and flags, torch version, thread count and shapes), so only the first run pays (3.4 s for
bert-base's shapes on the Xeon of docs/pretraining.md, under load). Where bf16 is slower, the run
goes on as asked, with one warning: the numbers are right either way, and a user may want bf16 for
another reason (to see what it does to the loss before a run on a machine with AMX).
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from ...errors import DeviceError
from ...speed.cache import cache_key as machine_cache_key
from ...speed.cache import read_cache, where_cached, write_cache
from ...speed.cpu import cpu_name, has_native_bf16
from ...speed.measure import BUDGET_SECONDS, time_against_float32

log = logging.getLogger("minibert.training")

MAX_TOKENS = 512  # the measurement's rows: enough for the GEMMs' steady speed, a few seconds at bert-base's sizes
# Timed rounds after the warm-up, at least two: a step forward and backward is three GEMMs per
# projection, and a run pays this once per machine (cached), so five times the inference budget.
TRAINING_BUDGET = 5 * BUDGET_SECONDS
SAMPLE_SECONDS = 0.02  # each timed sample repeats the step up to about this long
SLOWER = 0.95  # bf16 below 95% of float32's speed is "slower" (the rounds' noise is a few percent)


AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


FP16_RESUMES = "an fp16 run resumes on a GPU only (--device cuda), as a resume keeps the run's precision"


def check_precision(precision: str, device: torch.device, resume: bool = False) -> None:
    """fp16 trains on a GPU only (one line, before the run folder is touched); ``--device cuda`` is
    offered where torch sees a GPU, else what is missing is said. A resume (``resume``) cannot
    change precision (checkpoint.py's ``check_state``), so bf16 or fp32 is not offered to it."""
    if precision == "fp16" and device.type != "cuda":
        if torch.cuda.is_available():
            elsewhere = "" if resume else ", or --device cuda"
        elif torch.version.cuda is None:
            elsewhere = f" (this torch, {torch.__version__}, is built without CUDA)"
        else:
            elsewhere = f" (torch {torch.__version__} sees no GPU here)"
        advice = FP16_RESUMES if resume else "use --precision bf16 or fp32 there"
        raise DeviceError(f"--precision fp16 trains on a GPU (float16 with a loss scaler); this run is on {device}: "
                          f"{advice}{elsewhere}")  # fmt: skip


def precision_flag(options) -> str:
    """The flag that asked for the run's precision, as the user gave it (``pretrain --bf16`` is
    ``--precision bf16``): what a warning about it names."""
    return "--bf16" if getattr(options, "bf16_given", False) else f"--precision {options.precision}"


def autocast(precision: str, device: torch.device):
    """The context the forward pass runs in: autocast to the precision's dtype on ``device`` (off for fp32)."""
    dtype = AUTOCAST_DTYPES[precision]
    return torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


class LossScaler:
    """fp16's dynamic loss scale (torch.amp.GradScaler's rule, for the loop's own optimizer): the loss
    is multiplied by ``scale`` before backward, the gradients divided by it after; a step whose
    gradients overflowed (an infinite or NaN norm) is skipped and the scale halved; after
    ``GROWTH_INTERVAL`` good steps in a row the scale doubles. The scale is part of the training
    state (a resumed run goes on with it).

    >>> scaler = LossScaler()
    >>> scaler.update(float("inf")), scaler.scale
    (False, 32768.0)
    >>> scaler.update(3.5), scaler.scale
    (True, 32768.0)
    """

    INITIAL = 2.0**16
    GROWTH_INTERVAL = 2000
    SMALLEST = 1.0  # below this an overflow is no longer the scale's: the run has diverged (the guard says so)

    def __init__(self, scale: float = INITIAL, good_steps: int = 0):
        self.scale, self.good_steps = float(scale), int(good_steps)

    def scaled(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale

    def unscale(self, parameters: list[torch.nn.Parameter]) -> None:
        gradients = [p.grad for p in parameters if p.grad is not None]
        torch._foreach_mul_(gradients, 1.0 / self.scale)

    def update(self, gradient_norm: float) -> bool:
        """After unscaling: whether the step may update the weights (False: skip it, the scale halved)."""
        if not math.isfinite(gradient_norm) and self.scale / 2 >= self.SMALLEST:
            self.scale, self.good_steps = self.scale / 2, 0
            return False
        self.good_steps += 1
        if self.good_steps == self.GROWTH_INTERVAL:
            self.scale, self.good_steps = self.scale * 2, 0
        return True

    def state(self) -> dict:
        return {"scale": self.scale, "good_steps": self.good_steps}


@dataclass(frozen=True)
class Bf16Verdict:
    """float32 and bf16 autocast speed of one encoder layer's projections, forward and backward."""

    fp32_gflops: float
    bf16_gflops: float
    cached: bool = False

    @property
    def speedup(self) -> float:
        return self.bf16_gflops / self.fp32_gflops


def check_bf16(hidden: int, intermediate: int, tokens: int, flag: str = "--precision bf16") -> Bf16Verdict | None:
    """Warn (``warnings.warn``, one line, naming ``flag``, the flag given) when bf16 autocast is slower
    than float32 here; the verdict, or None when nothing was measured (no bf16 instructions: emulated,
    and that warning given)."""
    if not has_native_bf16():
        warnings.warn(f"{flag} on a CPU without bf16 instructions ({cpu_name()}: no avx512_bf16 or "
                      "amx_bf16): torch emulates bfloat16, many times slower than float32", stacklevel=2)  # fmt: skip
        return None
    tokens = max(1, min(tokens, MAX_TOKENS))
    key = cache_key(hidden, intermediate, tokens)
    verdict, failure = _cached(key), None
    if verdict is None:
        verdict = measure(hidden, intermediate, tokens)
        failure = write_cache(key, {"fp32_gflops": verdict.fp32_gflops, "bf16_gflops": verdict.bf16_gflops,
                          "cpu": cpu_name(), "torch": torch.__version__})  # fmt: skip
    log.debug("bf16 autocast %.2fx float32 (%s)", verdict.speedup, "cached" if verdict.cached else "measured")
    if verdict.speedup < SLOWER:
        warnings.warn(
            f"{flag} is slower than float32 on this CPU ({cpu_name()}, {torch.get_num_threads()} threads): "
            f"one encoder layer's matrix products, forward and backward, ran at {rate(verdict.bf16_gflops)} GFLOP/s "
            f"in bf16 against {rate(verdict.fp32_gflops)} in float32 (measured once, {where_cached(failure)}); "
            f"bf16 pays on CPUs with AMX (amx_bf16) and on GPUs, so without {flag} this run is faster",
            stacklevel=2,
        )
    return verdict


def rate(gflops: float) -> str:
    """A speed as measured, to its three significant digits (a tiny layer on a busy CPU: 0.0806).

    >>> rate(0.0806), rate(7.13), rate(55.0), rate(1234.0)
    ('0.0806', '7.13', '55', '1,234')
    """
    return f"{gflops:.3g}" if gflops < 1000 else f"{gflops:,.0f}"


def measure(hidden: int, intermediate: int, tokens: int) -> Bf16Verdict:
    """GFLOP/s of one layer's projections, forward and backward, in float32 and under bf16 autocast:
    speed/measure.py's rule (interleaved rounds, round 0 a warm-up, the best of each) within
    ``TRAINING_BUDGET``, each sample repeated to ``SAMPLE_SECONDS``."""
    times = time_against_float32(hidden, intermediate, Autocast, tokens=tokens, budget=TRAINING_BUDGET,
                                 max_rounds=21, min_rounds=3, backward=True, sample_seconds=SAMPLE_SECONDS)  # fmt: skip
    # three significant digits: tiny shapes on a busy machine run at a fraction of a GFLOP/s, not 0
    return Bf16Verdict(float(f"{times.flops / times.float32 / 1e9:.3g}"),
                       float(f"{times.flops / times.candidate / 1e9:.3g}"))  # fmt: skip


class Autocast(nn.Module):
    """The candidate: a float32 projection run under bf16 autocast, as ``--bf16`` runs the forward pass."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.linear = linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.linear(x)


def cache_key(hidden: int, intermediate: int, tokens: int) -> str:
    """What the two speeds depend on: the machine (speed/cache.py's ``cache_key``), and the shapes."""
    return machine_cache_key("bf16 autocast vs float32, forward and backward", f"{tokens}x{hidden}x{intermediate}")


def _cached(key: str) -> Bf16Verdict | None:
    record = read_cache().get(key)
    if not isinstance(record, dict):
        return None
    rates = record.get("fp32_gflops"), record.get("bf16_gflops")
    if not all(isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0 for rate in rates):
        return None
    return Bf16Verdict(float(rates[0]), float(rates[1]), cached=True)
