"""The TensorFlow reference for the pre-training data tests: a side venv with tensorflow-cpu and
Google's ``bert-tensorflow==1.0.4``, made when missing.

TensorFlow does not share an environment with torch 2.13 gracefully, so it lives in its own venv:
``$MINIBERT_TF_VENV``, else ``~/.cache/minibert/tf-venv``. If it is missing it is created (pip
install tensorflow-cpu, then bert-tensorflow==1.0.4 --no-deps: its requirements pin TensorFlow 1).
If that fails, the tests that need it skip with a loud reason, except under CI (``CI=true``), where
they fail: a skipped proof is not a pass.

``run_reference(request)`` runs tests/tf_google_runner.py in the venv and returns its JSON.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).parent
RUNNER = HERE / "tf_google_runner.py"
GOOGLE_MASTER_SCRIPT = HERE / "data" / "google_bert" / "create_pretraining_data_master.py.txt"
DEFAULT_VENV = Path.home() / ".cache" / "minibert" / "tf-venv"


def venv_dir() -> Path:
    return Path(os.environ.get("MINIBERT_TF_VENV") or DEFAULT_VENV)


def _unavailable(reason: str):
    message = f"THE TENSORFLOW REFERENCE IS MISSING, SO GOOGLE'S OUTPUT WAS NOT COMPARED: {reason}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def _works(python: Path) -> bool:
    check = "import tensorflow, bert.create_pretraining_data, safetensors"
    return python.exists() and subprocess.run([python, "-c", check], capture_output=True).returncode == 0


@functools.cache
def _prepare() -> str:
    """The venv's python, created under a lock when missing; '' with the reason logged if it fails."""
    directory = venv_dir()
    python = directory / "bin" / "python"
    if _works(python):
        return str(python)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _works(python):
            return str(python)
        steps = [[sys.executable, "-m", "venv", str(directory)],
                 [str(python), "-m", "pip", "install", "-q", "tensorflow-cpu", "safetensors"],
                 [str(python), "-m", "pip", "install", "-q", "--no-deps", "bert-tensorflow==1.0.4"]]  # fmt: skip
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode:
                return f"ERROR: {' '.join(step)} failed: {done.stderr[-500:]}"
    return str(python) if _works(python) else f"ERROR: the venv {directory} was made but cannot import tensorflow"


def tf_python() -> str:
    """The TensorFlow venv's python (made when missing); skips or, under CI, fails without it."""
    python = _prepare()
    if python.startswith("ERROR"):
        _unavailable(python)
    return python


def google_master_script(directory: Path) -> Path:
    """google-research/bert's create_pretraining_data.py (with --do_whole_word_mask), its two import
    lines changed as bert-tensorflow 1.0.4 changed them (tests/data/google_bert/README.md)."""
    source = GOOGLE_MASTER_SCRIPT.read_text(encoding="utf-8")
    for old, new in (("import tokenization\n", "from bert import tokenization\n"),
                     ("import tensorflow as tf\n", "import tensorflow.compat.v1 as tf\n")):  # fmt: skip
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    path = directory / "google_create_pretraining_data_master.py"
    path.write_text(source, encoding="utf-8")
    return path


def run_reference(request: dict, runner: Path = RUNNER) -> dict | list:
    """``runner`` (a script of tests/ run inside the TensorFlow venv: Google's create_pretraining_data
    by default, run_classifier's or run_squad's functions) on ``request``; its JSON answer."""
    python = tf_python()
    with tempfile.TemporaryDirectory() as directory:
        request_file, result_file = Path(directory) / "request.json", Path(directory) / "result.json"
        request_file.write_text(json.dumps(request))
        done = subprocess.run([python, runner, request_file, result_file], capture_output=True, text=True)
        assert done.returncode == 0, f"{Path(runner).name} failed in the TensorFlow venv: {done.stderr[-3000:]}"
        return json.loads(result_file.read_text())
