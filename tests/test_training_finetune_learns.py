"""It learns: all-MiniLM-L6-v2 fine-tuned by ``minibert finetune`` for one epoch on real labelled
text — which language is a sentence in, on Django's translated admin messages as minibert ships
them for the lesson (``minibert example-data languages``) — reaches a dev accuracy well above the
majority class: 3 languages, 96 training sentences, 6 steps of 16. (The lesson at its full size,
6 languages for 2 epochs, is tests/test_docs_finetuning.py's slow test.)"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from minibert.apps.cli import main
from minibert.apps.example_data_command import EXAMPLES, write_example_data

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from finetune_classifier import cut_lesson  # noqa: E402


def make_data(directory: Path, per_language: int, languages: str) -> Path:
    """The lesson's train.csv and dev.csv cut to ``languages`` (comma-separated), the first
    ``per_language`` × 4/5 training and × 1/5 dev sentences of each (the script's own cut)."""
    write_example_data("languages", directory)
    return cut_lesson(directory, per_language, languages.split(","))


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


def test_the_bundled_lesson_set_is_what_the_script_makes_from_django(tmp_path):
    """src/minibert/bundled/examples/languages/ is scripts/language_examples.py's output from Django
    5.2.19's catalogues, byte for byte (another Django translates other messages: then skipped)."""
    import subprocess

    django = pytest.importorskip("django")
    if django.__version__ != "5.2.19":
        pytest.skip(f"the set was made from Django 5.2.19's catalogues; this is Django {django.__version__}")
    script = ROOT / "scripts" / "language_examples.py"
    done = subprocess.run([sys.executable, str(script), "--output", str(tmp_path), "--per-language", "150"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name in ("train.csv", "dev.csv"):
        assert (tmp_path / name).read_bytes() == (EXAMPLES / "languages" / name).read_bytes(), name
