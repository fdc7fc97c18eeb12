"""Speed and memory of the pre-training steps against their references, side by side in one run.

    python scripts/bench_pretraining_data.py            # the full run (~10 minutes on 2 cores)
    python scripts/bench_pretraining_data.py --quick    # a smaller corpus, one round

Each row runs the reference and minibert as separate processes on the same files, interleaved
(A B, B A, ...), and reports per tool the median wall time, CPU time (user + system) and peak
resident memory (from wait4), and the median ratio reference / minibert (above 1: minibert is
faster). Every figure belongs to the CPU printed above the table.

Rows:
- ``pretraining_data_rows``: Google's create_pretraining_data.py (bert-tensorflow 1.0.4, and
  google-research/bert's file for whole-word masking, in the TensorFlow venv of tests/tf_reference.py)
  against ``minibert pretraining-data`` on Debian's fortunes (a fortune is a document).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))  # this checkout's minibert, whatever is installed


def cpu_name() -> str:
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        name = fields.get("Model name", platform.processor()).strip()
        return (f"{name} (family {fields.get('CPU family', '?').strip()}, model {fields.get('Model', '?').strip()}, "
                f"{os.cpu_count()} cores)")  # fmt: skip
    except OSError:
        return platform.processor() or "unknown CPU"


def run_measured(command: list[str], environment: dict | None = None) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak resident MB) of one process, which must succeed."""
    with tempfile.TemporaryFile() as log:  # (a pipe would fill up with Google's log lines and stall it)
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=environment)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = status
        if status != 0:
            log.seek(0)
            raise RuntimeError(f"{command[:4]} failed: {log.read().decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def compare(name: str, reference: list[str], ours: list[str], rounds: int, environment: dict) -> dict:
    """Interleaved rounds of the two commands; medians and the per-round ratio."""
    times: dict[str, list] = {"reference": [], "minibert": []}
    for round_number in range(rounds):
        order = [("reference", reference), ("minibert", ours)]
        for who, command in order if round_number % 2 == 0 else order[::-1]:
            times[who].append(run_measured(command, environment))
    row = {"row": name}
    for who, measured in times.items():
        row[who] = tuple(statistics.median(values) for values in zip(*measured))
    row["wall ratio"] = statistics.median(r[0] / m[0] for r, m in zip(times["reference"], times["minibert"]))
    row["cpu ratio"] = statistics.median(r[1] / m[1] for r, m in zip(times["reference"], times["minibert"]))
    return row


def pretraining_data_rows(quick: bool, rounds: int) -> list[dict]:
    """Google's create_pretraining_data.py vs minibert pretraining-data, same corpus, flags, seed."""
    from test_training_pretraining_data import fortune_documents, train_vocab, write_corpus
    from tf_reference import google_master_script, tf_python

    directory = Path(tempfile.mkdtemp(prefix="bench-pretraining-"))
    documents = fortune_documents(1500 if quick else 100_000)
    corpus = write_corpus(directory / "corpus.txt", documents)
    vocab = train_vocab(corpus, directory / "vocab", lowercase=True, size=8000)
    print(
        f"corpus: {len(documents):,} fortunes, {corpus.stat().st_size / 1e6:.1f} MB; vocab: 8,000 pieces (tokenizers)"
    )
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TF_CPP_MIN_LOG_LEVEL": "3"}
    python = tf_python()
    rows = []
    for name, flags, master in [
        ("defaults (128 pieces, dupe 10)", {"max_seq_length": 128, "dupe_factor": 10}, False),
        ("512 pieces, whole-word, dupe 5", {"max_seq_length": 512, "dupe_factor": 5, "max_predictions_per_seq": 76},
         True),
    ]:  # fmt: skip
        google = (
            [python, str(google_master_script(directory))] if master else [python, "-m", "bert.create_pretraining_data"]
        )
        google += [f"--input_file={corpus}", f"--vocab_file={vocab}", f"--output_file={directory / 'google.tfrecord'}"]
        google += [f"--{key}={value}" for key, value in flags.items()]
        ours = [sys.executable, "-m", "minibert", "pretraining-data", "--input", str(corpus), "--vocab", str(vocab),
                "--output", str(directory / "minibert.tfrecord")]  # fmt: skip
        ours += [f"--{key.replace('_', '-')}={value}" for key, value in flags.items()]
        if master:
            google.append("--do_whole_word_mask=True")
            ours.append("--whole-word-mask")
        rows.append(compare(f"pretraining-data, {name}", google, ours, rounds, environment))
    started = time.perf_counter()
    subprocess.run([python, "-c", "import tensorflow"], env=environment, check=True)
    print(f"(of Google's times, importing TensorFlow alone: {time.perf_counter() - started:.1f} s)")
    return rows


def print_table(rows: list[dict], reference_name: str) -> None:
    print(f"| row | {reference_name} wall s / CPU s / MB | minibert wall s / CPU s / MB | ratio wall | ratio CPU |")
    print("|---|---|---|---|---|")
    for row in rows:
        reference, ours = row["reference"], row["minibert"]
        measured = " | ".join(f"{wall:.1f} / {cpu:.1f} / {mb:,}" for wall, cpu, mb in (reference, ours))
        print(f"| {row['row']} | {measured} | {row['wall ratio']:.2f}x | {row['cpu ratio']:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller corpus, one round")
    args = parser.parse_args()
    print(f"CPU: {cpu_name()}; Python {platform.python_version()}")
    rows = pretraining_data_rows(args.quick, rounds=1 if args.quick else 3)
    print_table(rows, "Google's script")


if __name__ == "__main__":
    main()
