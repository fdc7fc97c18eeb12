"""Fine-tuning under torchrun: two processes, each with half of every batch, end with the weights
of one process with the whole batch (dropout 0), for a classifier, a tagger and a question answerer
(SQuAD v2.0 windows) — the loss of each half is divided by the whole batch's denominators
(training/run/optimization.py), and the gradients summed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from safetensors.torch import load_file

from helpers import child_environment
from minibert.apps.cli import main
from squad_files import write_squad
from tiny_hub import TINY

WORDS = "the machine drank water in paris by the river bank money vault".split()


def write_files(directory: Path) -> tuple[Path, Path]:
    """12 sentences of different lengths (so the halves hold different numbers of tagged pieces)."""
    csv, conll = ["text,label"], []
    for index in range(12):
        words = [WORDS[(index * 5 + k * 3) % len(WORDS)] for k in range(2 + index % 6)]
        csv.append(f"{' '.join(words)},{'wet' if {'water', 'river'} & set(words) else 'dry'}")
        conll += [f"{word} {'B-PLACE' if word in ('paris', 'river', 'bank') else 'O'}" for word in words] + [""]
    (directory / "train.csv").write_text("\n".join(csv) + "\n", encoding="utf-8")
    (directory / "train.txt").write_text("\n".join(conll), encoding="utf-8")
    return directory / "train.csv", directory / "train.txt"


def train_flags(task: str, directory: Path) -> list[str]:
    """The task's training file (3 steps of 4) and its length flags."""
    if task == "answer":  # 12 questions, most read through several windows; v2.0, so some impossible
        train = write_squad(directory / "train.json", training=True, paragraphs=2, fortunes_per_context=3,
                            questions=6, version_2=True)  # fmt: skip
        return ["--train", str(train), "--version-2-with-negative", "--max-seq-length", "48", "--doc-stride", "16",
                "--max-query-length", "12"]  # fmt: skip
    classify_file, tag_file = write_files(directory)
    return ["--train", str(tag_file if task == "tag" else classify_file), "--max-seq-length", "16"]


@pytest.mark.parametrize("task", ["classify", "tag", "answer"])
def test_two_processes_under_torchrun_equal_one_process(tmp_path, task):
    torchrun = shutil.which("torchrun") or pytest.skip("torchrun is not installed")
    flags = ["finetune", "--task", task, "--model", str(TINY), *train_flags(task, tmp_path), "--batch-size", "4",
             "--epochs", "1", "--learning-rate", "1e-3", "--dropout", "0"]  # fmt: skip
    assert main([*flags, "--output", str(tmp_path / "one")]) == 0
    environment = child_environment(OMP_NUM_THREADS="1")
    result = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", "-m", "minibert", *flags,
                             "--output", str(tmp_path / "two")], env=environment, capture_output=True, text=True,
                            timeout=900)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    one, two = load_file(tmp_path / "one" / "model.safetensors"), load_file(tmp_path / "two" / "model.safetensors")
    # qa_outputs.bias: its exact gradient is 0 (one number added to every position's start, or end, score
    # leaves the softmax over the positions unchanged), so it holds Adam's answer to rounding noise, which
    # two summation orders need not share and no output can see. Noise it must be: a gradient well above
    # Adam's epsilon (1e-6) moves a weight by about the learning rate (1e-3) per step; this one moved far less.
    noise = {"qa_outputs.bias"} & set(one)
    assert all(max(one[k].abs().max(), two[k].abs().max()) < 1e-4 for k in noise), [one[k] for k in noise]
    worst, name = max(((two[k] - one[k]).abs().max().item() / one[k].abs().max().item(), k) for k in one
                      if k not in noise)  # fmt: skip
    print(f"\n{task}: torchrun 2 processes vs 1 process: worst max|Δ|/max|w| {worst:.2e} ({name})")
    assert worst <= 1e-5  # the bound: the batch's sums in another order, through 3 Adam steps
    assert (tmp_path / "two" / "metrics.jsonl").read_text().count("\n") == 3  # rank 0 alone writes metrics
