"""Whether ``--bf16`` pays on the CPU at hand: measured once, cached, and said in one line when it does not.

``--bf16`` runs the forward pass under ``torch.autocast("cpu", bfloat16)``: the matrix products take
bfloat16 inputs (8 bits of mantissa), the weights and the optimizer stay float32. Whether that is
faster depends on the CPU's bf16 instructions, not on minibert:

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
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from ...speed.cache import cache_file, read_cache, write_cache
from ...speed.cache import cache_key as machine_cache_key
from ...speed.cpu import cpu_name, has_native_bf16
from ...speed.measure import BUDGET_SECONDS, time_against_float32

log = logging.getLogger("minibert.training")

MAX_TOKENS = 512  # the measurement's rows: enough for the GEMMs' steady speed, a few seconds at bert-base's sizes
# Timed rounds after the warm-up, at least two: a step forward and backward is three GEMMs per
# projection, and a run pays this once per machine (cached), so five times the inference budget.
TRAINING_BUDGET = 5 * BUDGET_SECONDS
SAMPLE_SECONDS = 0.02  # each timed sample repeats the step up to about this long
SLOWER = 0.95  # bf16 below 95% of float32's speed is "slower" (the rounds' noise is a few percent)


@dataclass(frozen=True)
class Bf16Verdict:
    """float32 and bf16 autocast speed of one encoder layer's projections, forward and backward."""

    fp32_gflops: float
    bf16_gflops: float
    cached: bool = False

    @property
    def speedup(self) -> float:
        return self.bf16_gflops / self.fp32_gflops


def check_bf16(hidden: int, intermediate: int, tokens: int) -> Bf16Verdict | None:
    """Warn (``warnings.warn``, one line) when bf16 autocast is slower than float32 here; the verdict,
    or None when nothing was measured (no bf16 instructions: emulated, and that warning given)."""
    if not has_native_bf16():
        warnings.warn(f"--bf16 on a CPU without bf16 instructions ({cpu_name()}: no avx512_bf16 or "
                      "amx_bf16): torch emulates bfloat16, many times slower than float32", stacklevel=2)  # fmt: skip
        return None
    tokens = max(1, min(tokens, MAX_TOKENS))
    key = cache_key(hidden, intermediate, tokens)
    verdict = _cached(key)
    if verdict is None:
        verdict = measure(hidden, intermediate, tokens)
        write_cache(key, {"fp32_gflops": verdict.fp32_gflops, "bf16_gflops": verdict.bf16_gflops,
                          "cpu": cpu_name(), "torch": torch.__version__})  # fmt: skip
    log.debug("bf16 autocast %.2fx float32 (%s)", verdict.speedup, "cached" if verdict.cached else "measured")
    if verdict.speedup < SLOWER:
        warnings.warn(
            f"--bf16 is slower than float32 on this CPU ({cpu_name()}, {torch.get_num_threads()} threads): "
            f"one encoder layer's matrix products, forward and backward, ran at {verdict.bf16_gflops:.0f} GFLOP/s "
            f"in bf16 against {verdict.fp32_gflops:.0f} in float32 (measured once, cached in {cache_file()}); "
            "bf16 pays on CPUs with AMX (amx_bf16) and on GPUs, so without --bf16 this run is faster",
            stacklevel=2,
        )
    return verdict


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
