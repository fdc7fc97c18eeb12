"""scripts/bench.py's start-up rows, each measured in fresh processes: ``import minibert`` against
``import transformers`` (``--only import``), one sentence through the command from a cold process
(``cold``), and loading bert-base-shaped weights from Google's TensorFlow checkpoint against
model.safetensors, time and peak memory (``tf``). The ``memory`` rows (held and peak beside
transformers and ONNX Runtime's int8) are bench_memory.py's.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from bench_rows import ROOT, minilm_dir, round_order, row, side_by_side


def checkout_env() -> dict:
    """The environment of every process these rows start: this checkout's src/ first on PYTHONPATH
    (the minibert beside this script, whatever is installed), the user's own PYTHONPATH after it."""
    paths = [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


def missing_modules(*modules: str) -> list[str]:
    """Those of ``modules`` that a process started with ``checkout_env()`` cannot import."""
    env = checkout_env()

    def importable(module: str) -> bool:
        return subprocess.run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True).returncode == 0

    return [module for module in modules if not importable(module)]


def bench_import(rounds: int):
    """``import minibert`` against ``import transformers``, each in fresh processes. The target is
    minibert's share of the peer's time, so this row's ratio is minibert's time over transformers'
    (below 1: minibert is faster), the other way round from the rows of bench_rows.row."""
    missing = missing_modules("minibert", "transformers")
    if missing:
        print(f"import: skipped ({', '.join(missing)} cannot be imported)", flush=True)
        return None
    ours_code = "import minibert; minibert.BertModel"
    theirs_code = "import transformers; transformers.BertModel"

    def run(code):
        return lambda: subprocess.run([sys.executable, "-c", code], check=True, env=checkout_env())

    ours_times, theirs_times = side_by_side(run(ours_code), run(theirs_code), rounds)
    result = row(
        "import minibert (+ BertModel)", "import transformers + BertModel", ours_times, theirs_times, "<= 0.6x the time"
    )
    time_ratios = sorted(ours / theirs for ours, theirs in zip(ours_times, theirs_times))
    result.update(ratio_median=statistics.median(time_ratios), ratio_min=time_ratios[0], ratio_max=time_ratios[-1],
                  note="ratio: minibert's time over transformers' (below 1: minibert is faster)")  # fmt: skip
    return result


def bench_cold_start(rounds: int):
    """One sentence through the CLI, from a cold process, against the floor every torch program
    pays: `python -c "import torch"`. Target: at most that + 0.8 s on the bundled MiniLM."""
    if missing_modules("minibert"):
        print("cold: skipped (minibert cannot be imported)", flush=True)
        return None
    command = [sys.executable, "-m", "minibert", "embed", "--model", minilm_dir(), "one sentence"]
    floor = [sys.executable, "-c", "import torch"]
    env = checkout_env()

    def run(argv):
        return lambda: subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    ours_times, theirs_times = side_by_side(run(command), run(floor), rounds)
    extra = statistics.median(ours_times) - statistics.median(theirs_times)
    result = row("minibert embed 'one sentence' (cold)", 'python -c "import torch"', ours_times, theirs_times,
                 "<= import torch + 0.8 s")  # fmt: skip
    result["note"] = (
        f"{statistics.median(ours_times):.2f} s vs {statistics.median(theirs_times):.2f} s: "
        f"+{extra:.2f} s over import torch"
    )
    return result


MEMORY_PROBE = r"""
import sys, json, os
import torch
def status(field):  # /proc/self/status, in bytes; VmHWM is this process's peak RSS (reset at exec)
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
def rss():
    return status("VmRSS")
which, path = sys.argv[1], sys.argv[2]
import time
if which == "minibert":
    import minibert.loading.from_pretrained, minibert.model, minibert.loading.tf_checkpoint, safetensors.torch
    base = rss()
    start = time.perf_counter()
    model = minibert.BertModel.from_pretrained(path)
else:
    import transformers
    base = rss()
    start = time.perf_counter()
    model = transformers.BertModel.from_pretrained(path)
seconds = time.perf_counter() - start
peak = status("VmHWM")
print(json.dumps({"base": base, "peak": peak, "seconds": seconds}))
"""


def _probe(which: str, directory) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, which, str(directory)],
        capture_output=True,
        text=True,
        check=True,
        env=checkout_env(),
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_tf_checkpoint(rounds: int):
    """Loading Google's TensorFlow checkpoint of a bert-base-shaped model (CRC32C of every tensor
    checked) against loading the same weights from model.safetensors: time and peak memory, each
    load in a fresh process, interleaved. Needs a Python with TensorFlow to write the checkpoint
    (MINIBERT_TF_PYTHON, or this one)."""
    tf_python = os.environ.get("MINIBERT_TF_PYTHON", sys.executable)
    if subprocess.run([tf_python, "-c", "import tensorflow"], capture_output=True).returncode != 0:
        print("tf: skipped (no TensorFlow: set MINIBERT_TF_PYTHON)", flush=True)
        return None
    import transformers

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as directory:
        hub, google = Path(directory) / "hub", Path(directory) / "uncased_L-12_H-768_A-12"
        transformers.BertModel(transformers.BertConfig()).save_pretrained(hub)
        (hub / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
        subprocess.run([tf_python, str(ROOT / "scripts" / "make_tf_checkpoint.py"), str(hub), str(google)],
                       check=True, capture_output=True)  # fmt: skip
        size = (hub / "model.safetensors").stat().st_size
        tf_times, st_times, tf_memory, st_memory = [], [], [], []
        sides = [(google, tf_times, tf_memory), (hub, st_times, st_memory)]
        for index in range(rounds):  # A B, B A, ...: a drift of the machine within a round hits both
            for source, times, memory in round_order(sides, index):
                probe = _probe("minibert", source)
                times.append(probe["seconds"])
                memory.append((probe["peak"] - probe["base"]) / size)
    ratios = sorted(st / tf for st, tf in zip(st_times, tf_times))
    return {
        "workload": "load bert-base from Google's TF checkpoint (CRC32C checked)",
        "against": "minibert loading model.safetensors",
        "target": "report",
        "ratio_median": statistics.median(ratios),
        "ratio_min": ratios[0],
        "ratio_max": ratios[-1],
        "note": f"TF {statistics.median(tf_times):.2f} s, safetensors {statistics.median(st_times):.2f} s; "
        f"peak memory TF {statistics.median(tf_memory):.2f}x, safetensors {statistics.median(st_memory):.2f}x "
        "the weights",
    }
