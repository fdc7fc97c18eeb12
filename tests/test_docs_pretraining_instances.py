"""docs/pretraining.md's section 2 (pre-training instances) runs as written: its shell and Python
examples, and the README's pretraining-data line, on real text (fortunes) with a vocabulary
learned by tokenizers, in a scratch directory."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import child_environment
from minibert.formats.tfrecord import read_examples
from test_training_pretraining_data import fortune_documents, train_vocab, write_corpus

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "pretraining.md").read_text(encoding="utf-8")
SECTION = re.search(r"^## 2\. Pre-training instances.*?(?=^## |\Z)", PAGE, flags=re.S | re.M).group(0)
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", SECTION, flags=re.S)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    directory = tmp_path_factory.mktemp("docs")
    corpus = write_corpus(directory / "corpus.txt", fortune_documents(150))
    train_vocab(corpus, directory, lowercase=True)
    return directory


def run_shell(script: str, directory: Path) -> subprocess.CompletedProcess:
    """``minibert`` is the command of the Python running the tests (its src/ first on the path)."""
    environment = child_environment()
    prelude = f'minibert() {{ "{sys.executable}" -m minibert "$@"; }}\nset -e\n'
    return subprocess.run(["bash", "-c", prelude + script], cwd=directory, env=environment, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def test_the_section_has_examples():
    assert len(blocks("bash")) == 3 and len(blocks("python")) == 1


OUTPUTS = [["train.tfrecord"], ["train-0.tfrecord", "train-1.tfrecord", "train-2.tfrecord"],
           ["part-00.tfrecord", "part-01.tfrecord"]]  # fmt: skip


@pytest.mark.parametrize("number", range(3))
def test_shell_examples_run(number, scratch):
    done = run_shell(blocks("bash")[number], scratch)
    assert done.returncode == 0, done.stderr
    assert "instances from" in done.stderr
    for name in OUTPUTS[number]:
        assert sum(1 for _ in read_examples(scratch / name)) > 100, name


def test_python_example_runs(scratch, monkeypatch, capsys):
    monkeypatch.chdir(scratch)
    exec(compile(blocks("python")[0], "docs/pretraining.md", "exec"), {})  # noqa: S102 (our own docs)
    count, shape, dtype = capsys.readouterr().out.split()
    assert int(count) > 100 and shape == "(64,)" and dtype == "float32"


def test_the_readme_line_runs(scratch):
    line = next(line for line in README.splitlines() if line.startswith("minibert pretraining-data"))
    done = run_shell(line, scratch)
    assert done.returncode == 0, done.stderr
    assert sum(1 for _ in read_examples(scratch / "train.tfrecord")) > 100
