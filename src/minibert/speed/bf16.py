"""Whether bfloat16 runs BERT's projections faster than float32 on this CPU: ``dtype="fastest"``'s
question, measured once (measure.py's one rule) and cached (cache.py)."""

from __future__ import annotations

import logging

import torch

from .cache import cache_key, read_cache, write_cache
from .cpu import cpu_name, has_native_bf16
from .gemm import requested_backend
from .measure import BUDGET_SECONDS, gemm_backends, time_candidates_against_float32

log = logging.getLogger("minibert.gemm")

# Rows of the bf16-vs-float32 measurement: what an embedding batch gives a GEMM (a budget of 2,048
# padded tokens, packed to the real ones). Fewer rows flatter bfloat16 (half the bytes of weight to
# read, the same arithmetic): on an Intel Xeon without AMX (family 6, model 207), 272 rows measured
# bf16 2.4x faster where 2,048 rows measured it 0.6x, and a real embedding run follows the latter.
BF16_TOKENS = 1024
BF16_MARGIN = 0.10  # bfloat16 must be this much faster: its numbers are approximate, float32's exact


def bf16_is_faster(hidden: int, intermediate: int, budget: float = 4 * BUDGET_SECONDS, gemm: str | None = None) -> bool:
    """Whether bfloat16 runs one encoder layer's projections (4 × H→H, H→F, F→H) faster than
    float32 on this CPU: ``dtype="fastest"``'s question. Having bf16 instructions is not enough:
    AVX-512 BF16's ``vdpbf16ps`` does no more multiply-adds per cycle than float32's two FMA ports,
    and on an Intel Xeon without AMX (family 6, model 207) oneDNN's bf16 GEMMs ran at 0.6× float32;
    AMX, or AMD Zen 4's bf16 units (1.6× on a real embedding run), are where it pays. So: measured
    once (measure.py's ``time_candidates_against_float32``: the layer's shapes, ``BF16_TOKENS`` rows,
    the process's threads, the best of interleaved rounds within ``budget`` seconds, at least two:
    ``BUDGET_SECONDS`` for each of the four runs, float32 and bfloat16 on two backends each) and
    cached with the backend choice. Each dtype on the faster of the GEMM backends it would run
    on once loaded (``gemm_backends``: F.linear, oneDNN prepacked), as gemm.py would pick for it;
    where a library is asked for (``gemm``, from_pretrained's argument, else ``$MINIBERT_GEMM``),
    both on that one alone, as the model will run (cached apart), and float32 where it does not
    take bfloat16. False at once where torch would emulate bf16 (no avx512_bf16 or AMX)."""
    library = asked_library(gemm)
    if not has_native_bf16():
        return False
    key = cache_key("bf16 vs float32", f"{hidden}x{intermediate}" + (f" on {library}" if library else ""))
    record = read_cache().get(key)
    if isinstance(record, dict) and isinstance(record.get("bf16_faster"), bool):
        return record["bf16_faster"]
    candidates = gemm_backends(to_bfloat16, torch.bfloat16)
    if library is not None and library not in candidates:  # (gemm.py would refuse the bfloat16 model there)
        log.info("dtype='fastest' is float32: the GEMM library asked for (%s) takes no bfloat16 here", library)
        return False
    if library is not None:
        candidates = {library: candidates[library]}
    measured = time_candidates_against_float32(hidden, intermediate, candidates, tokens=BF16_TOKENS,
                                               budget=budget, dtype=torch.bfloat16, float32_on=library)  # fmt: skip
    bfloat16_backend = min(measured, key=lambda backend: measured[backend].candidate)
    times = measured[bfloat16_backend]
    float32_seconds, bfloat16_seconds = times.float32, times.candidate
    faster = bfloat16_seconds * (1 + BF16_MARGIN) < float32_seconds  # a tie keeps float32's exact numbers
    log.info("bfloat16 (%s) %.2fx float32 (%s) on %s (%dx%d projections): dtype='fastest' is %s", bfloat16_backend,
             float32_seconds / bfloat16_seconds, times.float32_backend, cpu_name(), hidden, intermediate,
             "bfloat16" if faster else "float32")  # fmt: skip
    write_cache(key, {"bf16_faster": faster, "float32_seconds": float32_seconds,
                      "float32_backend": times.float32_backend, "bfloat16_seconds": bfloat16_seconds,
                      "bfloat16_backend": bfloat16_backend})  # fmt: skip
    return faster


def asked_library(gemm: str | None) -> str | None:
    """The GEMM library (a name of ``gemm_backends``) a loaded model's projections are told to run
    on: ``gemm``, else ``$MINIBERT_GEMM`` (gemm.py's ``requested_backend``), "mkl", or "onednn" for
    onednn and onednn-fused; None for "auto" (gemm.py picks the faster)."""
    requested, _ = requested_backend(gemm)
    if requested == "auto":
        return None
    return "mkl" if requested == "mkl" else "onednn"


def to_bfloat16(linear: torch.nn.Linear) -> torch.nn.Linear:
    """The candidate: the projection with its weights in bfloat16 (``dtype="bfloat16"`` loads them so)."""
    return linear.to(torch.bfloat16)
