"""Speed and memory of minibert's pre-training tools against their references, side by side in one run.

    python scripts/bench_vocab.py                    # every row
    python scripts/bench_vocab.py --rounds 3
    python scripts/bench_vocab.py --corpus my.txt

Each row runs minibert and its reference alternately (A B, B A, ...), each run in a fresh process
(so its peak resident memory, VmHWM, is its own, and no cache carries over), and reports the median,
min and max of the per-round time ratio (reference time / minibert time: above 1, minibert is
faster) and each side's peak memory. Name the CPU with the figures (printed first).

Rows:
  vocab   `minibert vocab` (minibert.tokenizer.train_wordpiece) against tokenizers'
          BertWordPieceTokenizer.train, defaults (30,000 pieces, min_frequency 2, limit_alphabet
          1000, uncased), on GCIDE — the Collaborative International Dictionary of English, 40 MB
          of English text (Debian's dict-gcide: `apt-get install -y dict-gcide`; its few non-UTF-8
          bytes replaced by U+FFFD, which BERT's cleaning deletes), or on --corpus.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GCIDE = Path("/usr/share/dictd/gcide.dict.dz")  # dictzip: gzip-compatible

# Each side runs this in a fresh process, prints {"seconds", "peak_bytes", "pieces"}.
_PEAK = "int(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)) * 1024"
_VOCAB_SIDES = {
    "minibert": (
        "from minibert.tokenizer import train_wordpiece\n"
        "run = lambda files: train_wordpiece(files, 30000, min_frequency=2, limit_alphabet=1000)\n"
    ),
    "tokenizers": (
        "from tokenizers import BertWordPieceTokenizer\n"
        "def run(files):\n"
        "    tokenizer = BertWordPieceTokenizer(lowercase=True)\n"
        "    tokenizer.train(files, vocab_size=30000, min_frequency=2, limit_alphabet=1000, show_progress=False)\n"
        "    return tokenizer.get_vocab()\n"
    ),
}
_TIMED = (
    "import json, re, resource, sys, time\n{setup}"
    "cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])\n"
    "start, start_cpu = time.perf_counter(), cpu(); pieces = run(sys.argv[1:])\n"
    "seconds, cpu_seconds = time.perf_counter() - start, cpu() - start_cpu\n"
    "print(json.dumps({{'seconds': seconds, 'cpu_seconds': cpu_seconds, 'peak_bytes': " + _PEAK + ", "
    "'pieces': len(pieces)}}))\n"
)


def describe_machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())  # fmt: skip
    fields = dict(line.split(":", 1) for line in Path("/proc/cpuinfo").read_text().splitlines() if ":" in line)
    family, cpu_model = fields.get("cpu family\t", "?").strip(), fields.get("model\t\t", "?").strip()
    return f"{model} (family {family}, model {cpu_model}), {os.cpu_count()} cores, Python {platform.python_version()}"


def run_side(setup: str, files: list[str]) -> dict:
    source = str(ROOT / "src")
    environment = {**os.environ, "PYTHONPATH": source + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", _TIMED.format(setup=setup), *files], capture_output=True, text=True,
                          env=environment, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def gcide_corpus(directory: Path) -> Path:
    """GCIDE as one UTF-8 text file."""
    if not GCIDE.is_file():
        sys.exit(f"bench_vocab: {GCIDE} not found: apt-get install -y dict-gcide (or pass --corpus FILE)")
    path = directory / "gcide.txt"
    path.write_text(gzip.decompress(GCIDE.read_bytes()).decode("utf-8", "replace"), encoding="utf-8")
    return path


def bench_vocab(rounds: int, corpus: Path | None) -> dict:
    """`minibert vocab` against tokenizers' trainer: time and peak memory of each, per round."""
    with tempfile.TemporaryDirectory() as temporary:
        path = corpus or gcide_corpus(Path(temporary))
        files = [str(path)]
        results: dict[str, list[dict]] = {"minibert": [], "tokenizers": []}
        for index in range(rounds):
            order = ["minibert", "tokenizers"] if index % 2 == 0 else ["tokenizers", "minibert"]
            for side in order:
                results[side].append(run_side(_VOCAB_SIDES[side], files))
                result = results[side][-1]
                print(f"  round {index + 1} {side}: {result['seconds']:.1f} s ({result['cpu_seconds']:.1f} s of CPU), "
                      f"peak {result['peak_bytes'] / 1e6:.0f} MB", file=sys.stderr)  # fmt: skip
        size = path.stat().st_size
    ratios = [theirs["seconds"] / ours["seconds"] for ours, theirs in zip(results["minibert"], results["tokenizers"])]
    return {
        "row": "vocab",
        "corpus": f"{path.name}, {size / 1e6:.1f} MB",
        "minibert_seconds": statistics.median(result["seconds"] for result in results["minibert"]),
        "tokenizers_seconds": statistics.median(result["seconds"] for result in results["tokenizers"]),
        "minibert_cpu_seconds": statistics.median(result["cpu_seconds"] for result in results["minibert"]),
        "tokenizers_cpu_seconds": statistics.median(result["cpu_seconds"] for result in results["tokenizers"]),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "minibert_peak_mb": max(result["peak_bytes"] for result in results["minibert"]) / 1e6,
        "tokenizers_peak_mb": max(result["peak_bytes"] for result in results["tokenizers"]) / 1e6,
        "pieces": [results["minibert"][0]["pieces"], results["tokenizers"][0]["pieces"]],
    }


ROWS = {"vocab": bench_vocab}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", choices=sorted(ROWS), help="rows to run (default: all)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per row (default 3)")
    parser.add_argument("--corpus", type=Path, help="the text file for the vocab row (default: GCIDE)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    print(describe_machine())
    rows = []
    for name in args.only or sorted(ROWS):
        if name == "vocab":
            row = bench_vocab(args.rounds, args.corpus)
        rows.append(row)
        print(f"{row['row']:<8} {row['corpus']}: minibert {row['minibert_seconds']:.1f} s "
              f"({row['minibert_cpu_seconds']:.1f} s of CPU), tokenizers {row['tokenizers_seconds']:.1f} s "
              f"({row['tokenizers_cpu_seconds']:.1f} s of CPU): {row['ratio_median']:.2f}x ({row['ratio_min']:.2f}-"
              f"{row['ratio_max']:.2f}); peak memory minibert {row['minibert_peak_mb']:.0f} MB, tokenizers "
              f"{row['tokenizers_peak_mb']:.0f} MB; pieces {row['pieces']}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
