"""It learns: all-MiniLM-L6-v2 fine-tuned by ``minibert finetune`` for one epoch on real labelled
text — which language is a sentence in, on Django's translated admin messages
(scripts/language_examples.py) — reaches a dev accuracy well above the majority class.

The default test is small (3 languages, 88 training sentences, 5 steps of 16, ~35 s of CPU);
the slow one takes all 6 languages and 720 sentences."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from minibert.apps.cli import main

ROOT = Path(__file__).resolve().parents[1]


def make_data(directory: Path, per_language: int, languages: str) -> Path:
    pytest.importorskip("django")
    done = subprocess.run([sys.executable, ROOT / "scripts" / "language_examples.py", "--output", str(directory),
                           "--per-language", str(per_language), "--languages", languages],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return directory


def majority(dev: Path) -> float:
    labels = [line.rsplit(",", 1)[1] for line in dev.read_text(encoding="utf-8").splitlines()[1:]]
    return Counter(labels).most_common(1)[0][1] / len(labels)


def fine_tune(minilm_dir: Path, data: Path, run: Path, batch_size: int, max_seq_length: int) -> float:
    argv = ["finetune", "--model", str(minilm_dir), "--train", str(data / "train.csv"), "--dev", str(data / "dev.csv"),
            "--text-column", "sentence", "--label-column", "language", "--epochs", "1", "--batch-size",
            str(batch_size), "--learning-rate", "1e-4", "--max-seq-length", str(max_seq_length), "--output", str(run)]
    assert main(argv) == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return records[-1]["dev_accuracy"]


def test_one_epoch_learns_three_languages(tmp_path, minilm_dir):
    data = make_data(tmp_path / "data", 40, "fr,de,nl")
    accuracy, base = fine_tune(minilm_dir, data, tmp_path / "run", 16, 32), majority(data / "dev.csv")
    print(f"dev accuracy {accuracy:.3f}, majority class {base:.3f}")
    assert accuracy >= base + 0.25, f"dev accuracy {accuracy:.3f} is not well above the majority class's {base:.3f}"


@pytest.mark.slow
def test_one_epoch_learns_six_languages(tmp_path, minilm_dir):
    data = make_data(tmp_path / "data", 150, "fr,de,es,it,pt,nl")
    accuracy, base = fine_tune(minilm_dir, data, tmp_path / "run", 16, 64), majority(data / "dev.csv")
    print(f"dev accuracy {accuracy:.3f}, majority class {base:.3f}")
    assert accuracy >= 0.6 and accuracy >= 3 * base, f"dev accuracy {accuracy:.3f}, majority class {base:.3f}"
