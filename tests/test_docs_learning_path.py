"""The README's "Learn BERT with minibert" path: five steps, each one line with its command, and the
commands run as written (from a clone's root; pictures are written into a temporary folder)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import child_environment

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def steps() -> list[str]:
    section = README.split("## Learn BERT with minibert")[1].split("\n## ")[0]
    return re.findall(r"^\d\. (.*)$", section, flags=re.MULTILINE)


def commands(step: str) -> list[str]:
    return [code for code in re.findall(r"`([^`]+)`", step) if code.split()[0] in ("python", "less", "minibert")]


def run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """A README command with its repository paths made absolute, run in ``cwd``."""
    words = [str(ROOT / word) if (ROOT / word).exists() and "/" in word else word for word in shlex.split(command)]
    words[0] = sys.executable if words[0] == "python" else words[0]
    environment = child_environment()
    return subprocess.run(words, capture_output=True, text=True, timeout=600, cwd=cwd, env=environment)


def test_the_path_has_five_steps_each_with_its_command():
    """What each step runs (its title is the README's to word): the walkthrough, the model's file, the
    tokenizer and attention scripts, the explorer, then pre-training's three commands."""
    found = steps()
    assert len(found) == 5 and all(commands(step) for step in found), found
    assert commands(found[0]) == ["python -m doctest -o ELLIPSIS docs/walkthrough.md"]
    assert commands(found[1]) == ["less src/minibert/model.py"] and (ROOT / "src/minibert/model.py").is_file()
    assert [command.split()[1] for command in commands(found[2])] == ["scripts/show_tokenize.py",
                                                                       "scripts/plot_attention.py"]  # fmt: skip
    assert commands(found[3])[0].startswith("minibert explore ") and "docs/explore.md" in found[3]
    assert commands(found[4]) == ["minibert vocab", "minibert pretraining-data", "minibert pretrain"]
    assert "docs/pretraining.md#the-lesson-" in found[4]  # the short lesson, not the 11-minute recipe


def test_the_tokenizer_and_attention_steps_run(tmp_path):
    pytest.importorskip("matplotlib")
    show, plot = commands(steps()[2])
    result = run(show, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "un ##aff ##able" in result.stdout or "una ##ffa ##ble" in result.stdout, result.stdout
    result = run(plot, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "layer 3 of 6 (its output is hidden_states[3]), head 5" in result.stdout
    assert (tmp_path / "attention.png").read_bytes()[:4] == b"\x89PNG"


def test_the_explore_step_runs(tmp_path):
    (command,) = commands(steps()[3])
    result = run(command, tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cat.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert (ROOT / "docs" / "explore.md").is_file()


@pytest.mark.slow  # the same doctest runs in the default suite as tests/test_docs_walkthrough.py
def test_the_walkthrough_step_runs(tmp_path):
    (command,) = commands(steps()[0])
    result = run(command, ROOT)
    assert result.returncode == 0 and result.stdout == "", result.stdout[-3000:] + result.stderr
