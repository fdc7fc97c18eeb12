"""minibert against transformers and sentence-transformers on one device, side by side: parity, then speed.

On the GPU machine (one command, ~3 minutes on an H200):

    PYTHONPATH=src python3 scripts/gpu_check.py --out $OUT/gpu_check.json

Here, on the CPU, to test every code path first (~40 s on 2 idle cores; ``--quick``: a few texts, one
round, parity on the minilm shape only, speed on a tiny 2-layer shape):

    python scripts/gpu_check.py --device cpu --quick --out /tmp/gpu_check.json

(tests/test_scripts_benchmarks.py runs that dry run, inputs included, and fails on any part that failed.)

What it measures (``--sections parity,speed,profile``; all three by default):

* parity. Checkpoints with random weights (seed 0) are made here with transformers, in two shapes:
  all-MiniLM-L6-v2's (384 wide, 6 layers) and bert-base's (768, 12). For each shape and dtype (fp32, bf16,
  fp16), minibert's and transformers' BertForPreTraining run on real texts padded to the batch's longest
  (max_length 128): the max |Δ| of the embeddings, every layer's hidden state (real tokens only), the
  pooler, the masked-LM and the next-sentence logits; and each library's error against float64 (minibert
  in float64, checked against transformers in float64), as max |Δ| / max |truth|. Then a classifier's
  logits in each dtype and, in fp32, one training step's gradients, parameter by parameter under the hub's
  names; and the two tokenizers' ids on the texts.
* speed: median milliseconds, minibert and the reference alternating round by round after a warm-up;
  ratio = reference / minibert (above 1: minibert faster). bert-base forward (64×128 and 16×512) in
  fp32, bf16 and fp16; ``Embedder.embed`` against ``SentenceTransformer.encode`` on the 4,096 texts, fp32
  and fp16 (and how far apart their vectors are); training steps of a bert-base classifier, 32 rows,
  padded to 128 and on real text (transformers padded to each batch's longest, minibert with
  ``skip_padding=True``), fp32 and bf16 autocast.
* profile: the top operations of minibert's fp16 and fp32 embedding (and sentence-transformers' fp16)
  under torch.profiler.

Inputs: ``.gpu/minilm/`` (all-MiniLM-L6-v2's config and tokenizer files, no weights) and
``.gpu/texts.txt`` (4,096 texts, one per line). Nothing is downloaded. Each part runs guarded: a failure
prints ``SECTION FAILED: <part>: <the traceback's last lines>`` and the run goes on; the JSON (``--out``)
is rewritten after every row, so a run cut short still leaves what it measured. Past ``--budget``
seconds, the parts not yet started are skipped.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import torch
from gpu_parity import parity
from gpu_setup import FULL, QUICK, ROOT, Checkpoints, Plan, Report, read_texts, sync, transformers_module
from gpu_speed import (
    embed_call,
    speed,
)


def git(*arguments: str) -> str:
    try:
        done = subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return done.stdout.strip() if done.returncode == 0 else f"unknown ({done.stderr.strip()[:80]})"
    except Exception as error:  # noqa: BLE001
        return f"unknown ({error})"


def changed_files() -> int | str:
    status = git("status", "--porcelain")
    return status if status.startswith("unknown") else len(status.splitlines())


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def probe(function, *arguments):
    """``function(*arguments)``, or what went wrong: one unreadable value never costs the header."""
    try:
        return function(*arguments)
    except Exception as error:  # noqa: BLE001
        return f"unknown ({type(error).__name__}: {error})"


def version(module: str) -> str:
    return __import__(module).__version__


def gpu_info(device: torch.device) -> dict:
    properties = probe(torch.cuda.get_device_properties, device)
    return {
        "gpu": probe(torch.cuda.get_device_name, device),
        "capability": probe(lambda: f"{properties.major}.{properties.minor}"),
        "gpu memory GiB": probe(lambda: round(properties.total_memory / 2**30, 1)),
        "cudnn": probe(torch.backends.cudnn.version),
        "tf32 matmul": probe(lambda: torch.backends.cuda.matmul.allow_tf32),
        "bf16 supported": probe(torch.cuda.is_bf16_supported),
    }


def header(report: Report, device: torch.device, plan: Plan, quick: bool) -> None:
    info = {"device": str(device), **(gpu_info(device) if device.type == "cuda" else {}), "cpu": cpu_model(),
            "cpu threads": torch.get_num_threads(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "transformers": probe(lambda: transformers_module().__version__),
            "sentence-transformers": probe(version, "sentence_transformers"), "minibert": probe(version, "minibert"),
            "minibert commit": git("rev-parse", "--short", "HEAD"), "files changed since that commit": changed_files(),
            "python": platform.python_version(), "float32 matmul precision": torch.get_float32_matmul_precision(),
            "quick": quick, "plan": asdict(plan)}  # fmt: skip
    report.data["header"] = info
    print(f"device: {device} = {info.get('gpu', info['cpu'])}", flush=True)
    for key, value in info.items():
        if key != "plan":
            print(f"  {key}: {value}", flush=True)
    report.save()


# ----------------------------------------------------------------------------- 1. parity


def profile(report: Report, checkpoints: Checkpoints, device: torch.device, plan: Plan, texts: list[str]) -> None:
    from sentence_transformers import SentenceTransformer

    from minibert import Embedder

    folder, sample = checkpoints.sentence(), texts[: plan.profile_texts]
    for name in ("float16", "float32"):
        embedder = Embedder.from_pretrained(folder, dtype=name, device=device)
        report.run(f"profile minibert {name}", profile_one, report, device, f"minibert Embedder.embed {name}",
                   embed_call({}, name, embedder.embed, sample))  # fmt: skip
    model = SentenceTransformer(str(folder), device=str(device)).half()
    report.run("profile ST float16", profile_one, report, device, "sentence-transformers encode float16",
               embed_call({}, "ST", model.encode, sample, show_progress_bar=False))  # fmt: skip


def profile_one(report: Report, device: torch.device, what: str, call) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    call()  # warm
    sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profiler(activities=activities) as run:
        start = time.perf_counter()
        call()
        sync(device)
        wall = (time.perf_counter() - start) * 1000
    averages = run.key_averages()
    keys = ("cuda_time_total", "device_time_total") if device.type == "cuda" else ("cpu_time_total",)
    table = None
    for key in keys:
        try:
            table = averages.table(sort_by=key, row_limit=12)
            break
        except Exception:  # noqa: BLE001 (the name of the device column changed across torch versions)
            continue
    texts = len(call.arguments[1])
    report.add("profile", f"{what}, {texts} texts: {wall:.1f} ms under the profiler\n{table}", what=what, wall_ms=wall,
               table=table)  # fmt: skip


# ----------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda if available, else cpu")
    parser.add_argument("--quick", action="store_true", help="tiny rounds and batches (to test it on a CPU)")
    parser.add_argument("--out", type=Path, help="the JSON of every row (rewritten after each)")
    parser.add_argument("--sections", default="parity,speed,profile", help="comma-separated (default: all three)")
    parser.add_argument("--budget", type=float, default=240.0, help="seconds; parts not started by then are skipped")
    args = parser.parse_args()
    sections = {name.strip() for name in args.sections.split(",") if name.strip()}
    unknown = sections - {"parity", "speed", "profile"}
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    plan = QUICK if args.quick else FULL
    report = Report(args.out, args.budget)
    warnings.simplefilter("ignore")  # truncation and deprecation notices: the rows are what matters here
    texts = read_texts()
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as folder:
        checkpoints = Checkpoints(Path(folder))
        report.run("header", header, report, device, plan, args.quick)
        for name, function in (("parity", parity), ("speed", speed), ("profile", profile)):
            if name in sections:
                print(f"\n== {name} ({report.elapsed():.0f} s) ==", flush=True)
                report.run(name, function, report, checkpoints, device, plan, texts)
    report.data["seconds"]["total"] = round(report.elapsed(), 1)
    report.save()
    failures, skipped = report.data["failures"], report.data["skipped"]
    print(f"\ndone in {report.elapsed():.0f} s on {report.data['header'].get('gpu', device)}: {len(failures)} parts "
          f"failed{': ' + ', '.join(f['part'] for f in failures) if failures else ''}; {len(skipped)} skipped",
          flush=True)  # fmt: skip
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
