"""docs/pretraining.md section 3 runs as written, at small sizes: every fenced bash, python and json
block of the section, in order, in a fresh folder (the files sections 1 and 2 leave are made here by
the tests' own small instance maker; the hub checkpoint and Google's zip are this repo's tiny ones)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

import minibert
from fortune_instances import FORTUNES, fortune_documents, make_instances, train_vocab
from helpers import run_minibert
from pretraining_data import random_instances, write_instances

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "pretraining.md").read_text(encoding="utf-8")
SMALL_SIZES = [(r"--steps \d+", "--steps 2"), (r"--batch-size \d+", "--batch-size 4"),
               (r"--warmup-steps \d+", "--warmup-steps 1"), (r"--save-every \d+", "--save-every 1"),
               ("google-bert/bert-base-uncased", str(ROOT / "tests/data/tiny_hub")),
               ("uncased_L-12_H-768_A-12", str(ROOT / "tests/data/uncased_L-2_H-32_A-2"))]  # fmt: skip


def section_blocks() -> list[tuple[str, str]]:
    section = DOC.split("## 3. Training: minibert pretrain", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(bash|python|json)\n(.*?)```", section, flags=re.S)


def commands(block: str) -> list[list[str]]:
    for pattern, replacement in SMALL_SIZES:
        block = re.sub(pattern, replacement, block)
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


@pytest.mark.skipif(not FORTUNES.exists(), reason="apt-get install fortunes")
def test_section_3_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    documents = fortune_documents()
    vocab = train_vocab(documents, tmp_path / "fortunes", size=4000)  # all of them: 4,000 pieces, as the config says
    assert len(vocab.read_text().splitlines()) == 4000
    make_instances(documents[:150], vocab, tmp_path / "fortunes" / "instances.tfrecord")
    write_instances(tmp_path / "my_domain.tfrecord", random_instances(8, vocab_size=111, seq_len=16))
    blocks = section_blocks()
    assert [kind for kind, _ in blocks].count("bash") >= 5
    ran = []
    for kind, block in blocks:
        if kind == "json":
            Path("small_config.json").write_text(block)
        elif kind == "python":
            exec(compile(block, "docs/pretraining.md", "exec"), {})  # noqa: S102  (our own docs)
        else:
            for argv in commands(block):
                if argv[0] == "minibert":
                    result = run_minibert(*argv[1:])
                else:
                    assert argv[0] == "torchrun", argv
                    torchrun = shutil.which("torchrun")
                    environment = {**os.environ, "PYTHONPATH": str(Path(minibert.__file__).parent.parent),
                                   "OMP_NUM_THREADS": "1"}  # fmt: skip
                    result = subprocess.run([torchrun, *argv[1:]], env=environment, capture_output=True, text=True)
                assert result.returncode == 0, (argv, result.stderr[-2000:])
                ran.append(argv[:2])
    assert ["minibert", "plot"] in ran and ["torchrun", "--standalone"] in ran
    assert sum(argv == ["minibert", "pretrain"] for argv in ran) == 4
    assert (tmp_path / "fortunes" / "run" / "loss.png").exists()
    assert (tmp_path / "my-bert-from-tf" / "model.safetensors").exists()
    printed = capsys.readouterr().out
    assert printed.count("'token'") >= 6  # the fill_mask answers, before and after
