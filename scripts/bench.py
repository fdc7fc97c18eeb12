"""Speed and memory of minibert against its references, measured side by side in one run.

    python scripts/bench.py            # the full run the README reports (~10 minutes on 2 cores)
    python scripts/bench.py --quick    # a CI-sized run (~2 minutes)

Each workload runs minibert and its competitor in the same process, interleaved (A B, B A, ...),
with the same thread count; the table reports the median, min and max of the per-round ratio
(competitor time / minibert time: above 1 means minibert is faster), throughput, and the achieved
GFLOP/s against this machine's measured matmul peak. The real-text rows use real text: Python and
numpy docstrings and Django's translation catalogues (see tests/corpus.py).

This file is the driver: the flags, the machine's description and GEMM peak, the workloads in
order, the table. The workloads live in bench_model.py (fixed, profile), bench_text.py (text,
streams, onnx, tokenizer, window), bench_int8.py (int8), bench_training.py (pretrain, finetune)
bench_startup.py (import, cold, tf) and bench_memory.py (memory: held and peak beside transformers and ONNX
Runtime int8); bench_rows.py times and builds each row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from bench_rows import ROOT

sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))  # this checkout's minibert, as the start-up and memory rows run it
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from bench_memory import memory_rows  # noqa: E402
from bench_model import bench_fixed_shape, bench_profile, matmul_peak  # noqa: E402
from bench_startup import bench_cold_start, bench_import, bench_tf_checkpoint  # noqa: E402
from bench_text import bench_onnx, bench_real_text, bench_streams, bench_tokenizer, bench_window_scaling  # noqa: E402
from bench_training import bench_finetune_step, bench_pretrain_step  # noqa: E402
from needs import onnx_absent, say_not_installed  # noqa: E402

import corpus  # noqa: E402
from minibert.speed.cpu import describe_machine, has_native_bf16  # noqa: E402

# Every workload, in the order they run; the default run leaves out int8 (it exports and quantizes
# two models: scripts/bench_int8.py) and window (a scaling curve, not a row).
WORKLOADS = ("fixed", "text", "streams", "onnx", "int8", "profile", "pretrain", "finetune", "tokenizer", "import",
             "cold", "memory", "tf", "window")  # fmt: skip
DEFAULT = [name for name in WORKLOADS if name not in ("int8", "window")]
PRINTED_ONLY = {"profile", "window"}  # they print their own tables: no row


def workloads(args, texts: list[str], rounds: int, peak_fp32: float | None, peak_bf16: float | None) -> dict:
    """{name: a call that returns its row, its rows, or None (skipped)}."""
    sizes = [int(size) for size in args.window_sizes.split(",")]
    return {
        "fixed": lambda: bench_fixed_shape(rounds, peak_fp32),
        "text": lambda: bench_real_text(texts, max(3, rounds // 2), peak_fp32, peak_bf16),
        "streams": lambda: bench_streams(texts, rounds),
        "onnx": lambda: _with_onnx("ONNX Runtime row", lambda: bench_onnx(texts, rounds, peak_fp32)),
        "int8": lambda: _with_onnx("int8 rows", lambda: _bench_int8(texts, rounds)),
        "profile": lambda: bench_profile(texts, peak_fp32),
        "pretrain": lambda: bench_pretrain_step(rounds),
        "finetune": lambda: bench_finetune_step(texts, rounds),
        "tokenizer": lambda: bench_tokenizer(texts, rounds),
        "import": lambda: bench_import(rounds),
        "cold": lambda: bench_cold_start(rounds),
        # memory: 3 fresh processes a cell in --quick too (one process is one draw: a peak read 13% high
        # in one, on a Zen 5); its ONNX Runtime rows only need ONNX Runtime
        "memory": lambda: memory_rows(rounds=3),
        "tf": lambda: bench_tf_checkpoint(rounds),
        "window": lambda: bench_window_scaling(sizes),
    }


def _bench_int8(texts: list[str], rounds: int) -> list[dict]:
    from bench_int8 import bench_int8

    return bench_int8(texts, rounds)


def _with_onnx(what: str, run):
    """An optional peer's rows: skipped, saying so, when ONNX Runtime is missing (the others still count),
    before they load or export any model."""
    if onnx_absent(f"{what} skipped"):
        return None
    try:
        return run()
    except ModuleNotFoundError as absent_module:  # a part of it the check above does not import
        say_not_installed(f"{what} skipped", absent_module.name)
        return None


def matmul_peaks() -> tuple[float, float | None]:
    """The GFLOP/s ceilings: fp32, and bf16 only where the CPU has bf16 units."""
    peak_fp32 = matmul_peak(torch.float32)
    peak_bf16 = matmul_peak(torch.bfloat16) if has_native_bf16() else None
    bf16 = f"{peak_bf16:.0f} GFLOP/s" if peak_bf16 else "not measured (no native bf16)"
    print(f"matmul peak: fp32 {peak_fp32:.0f} GFLOP/s, bf16 {bf16}", flush=True)
    return peak_fp32, peak_bf16


def print_table(rows: list[dict]) -> None:
    print()
    print("| workload | against | target | ratio median (min–max) | minibert throughput | GFLOP/s | note |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['ratio_median']:.2f}x ({r['ratio_min']:.2f}–{r['ratio_max']:.2f})"
        print(
            f"| {r['workload']} | {r['against']} | {r['target']} | {ratio} | {r.get('throughput', '')} | "
            f"{r.get('gflops', '')} | {r.get('note', '')} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer texts and rounds (for CI)")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--only", nargs="*", help=f"workload names: {', '.join(WORKLOADS)}")
    parser.add_argument(
        "--window-sizes",
        default="1000,10000,100000,1000000",
        help="token counts for the 'window' workload, the model's and the assembly's (comma-separated)",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.only or ()) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {', '.join(unknown)}: choose from {', '.join(WORKLOADS)}")
    rounds = 3 if args.quick else 7
    texts = corpus.benchmark_texts(300 if args.quick else 3000)
    only = set(args.only or DEFAULT)
    print(describe_machine(), flush=True)
    peaks = matmul_peaks() if only & {"fixed", "text", "onnx", "profile"} else (None, None)
    runs, rows = workloads(args, texts, rounds, *peaks), []
    for name in WORKLOADS:
        if name not in only:
            continue
        result = runs[name]()
        if name in PRINTED_ONLY or result is None:
            continue
        rows.extend(result if isinstance(result, list) else [result])
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
