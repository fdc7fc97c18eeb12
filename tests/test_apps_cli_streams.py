"""A command's standard streams as the shell gives them (apps/standard_streams.py): closed ones
(``<&-``, ``>&-``, ``2>&-``), a stdout that cannot be written (``> /dev/full``); and JSON lines read
as the JSON they must be written back as (formats/line_files.py). Each was a Python internal error,
a success with the results lost, or a file no JSON reader takes (found by a probe of the CLI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import child_environment
from helpers import run_minibert as run
from tiny_hub import TINY

MODEL = ["--model", str(TINY)]


def _run_with(fd: int, how: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """``minibert ARGS`` in a child whose descriptor ``fd`` is closed (``how="closed"``) or holds a
    file open for reading only (``"read-only"``: what pyenv's shim leaves on a descriptor the shell
    closed), the other two streams captured."""

    def prepare() -> None:
        os.close(fd)
        if how == "read-only":
            assert os.open(os.devnull, os.O_RDONLY) == fd  # (the lowest free descriptor)

    streams = {"stdin": subprocess.PIPE if stdin is not None else subprocess.DEVNULL, "stdout": subprocess.PIPE,
               "stderr": subprocess.PIPE}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "minibert", *args], **streams, input=stdin, preexec_fn=prepare,
                          env=child_environment(), timeout=300)  # fmt: skip


@pytest.mark.parametrize("how", ["closed", "read-only"])
def test_a_closed_stdout_is_an_error_not_a_silent_success(how):
    """``similarity a b >&-`` exited 0 with its table written nowhere (print() writes nothing to a
    missing stream); ``embed x >&-`` was an internal error (no isatty). Now one line, exit 1; a
    command whose results go to a file runs as usual."""
    for args in (["similarity", "a", "b"], ["embed", "x"], ["tokenize", "x"]):
        result = _run_with(1, how, *args, *MODEL)
        lines = result.stderr.decode().strip().splitlines()
        assert result.returncode == 1, result.stderr
        assert "minibert: error: " in lines[-1] and "stdout" in lines[-1] and "internal" not in lines[-1], lines


def test_results_written_to_a_file_do_not_need_stdout(tmp_path):
    output = tmp_path / "vectors.npy"
    result = _run_with(1, "closed", "embed", "x", "--output", str(output), *MODEL)
    assert result.returncode == 0 and output.exists(), result.stderr


def test_vocab_says_its_summary_on_stderr_and_needs_no_stdout(tmp_path):
    """`minibert vocab ... >&-` and `> /dev/full` wrote vocab.txt and tokenizer_config.json, then exited 1
    saying its results had nowhere to go: its summary went to stdout. It goes to stderr now, as
    pretraining-data's does, and the run succeeds with stdout closed or full."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\n\nthe dog sat on the log\n" * 20)
    folder = tmp_path / "vocab"
    folder.mkdir()
    arguments = ["vocab", "--input", str(corpus), "--output", str(folder), "--vocab-size", "40"]
    result = _run_with(1, "closed", *arguments)
    pieces = len((folder / "vocab.txt").read_text().splitlines())  # (fewer than 40: the merges run out)
    summary = f"minibert: {pieces} pieces: {folder / 'vocab.txt'}, {folder / 'tokenizer_config.json'}"
    assert result.returncode == 0 and result.stderr.decode().splitlines() == [summary], result.stderr
    assert sorted(os.listdir(folder)) == ["tokenizer_config.json", "vocab.txt"]
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            result = subprocess.run([sys.executable, "-m", "minibert", *arguments], stdout=full, stderr=subprocess.PIPE,
                                    env=child_environment(), timeout=300)  # fmt: skip
        assert result.returncode == 0 and result.stderr.decode().splitlines() == [summary], result.stderr


@pytest.mark.parametrize("how", ["closed", "read-only"])
def test_a_closed_stderr_leaves_the_command_s_work_and_status_alone(how, tmp_path):
    """``2>&-``: the first message raised, the error line raised again, and a run that had worked
    exited 1 with nothing said and its file never written. The messages are dropped now; the exit
    status still tells a failure."""
    result = _run_with(2, how, "similarity", "a", "b", *MODEL)
    assert result.returncode == 0 and "[0]" in result.stdout.decode(), result.stdout
    output = tmp_path / "vectors.npy"
    assert _run_with(2, how, "embed", "x", "--output", str(output), *MODEL).returncode == 0 and output.exists()
    assert _run_with(2, how, "embed", "--input", str(tmp_path / "missing.txt"), *MODEL).returncode == 1


def test_a_closed_stdin_is_said_as_such():
    """``embed --input - <&-`` was 'internal error: AttributeError: NoneType has no attribute buffer'."""
    for args in (["embed", "--input", "-"], ["classify", "-"]):
        result = _run_with(0, "closed", *args, *MODEL)
        assert result.returncode == 1, result.stderr
        assert result.stderr.decode().strip().splitlines()[-1] == (
            "minibert: error: stdin is closed: give the texts as arguments or --input FILE, or pipe them in")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_stdout_that_cannot_be_written_is_named():
    """``tokenize x > /dev/full`` said '[Errno 28] No space left on device', naming nothing."""
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "minibert", "tokenize", "x", *MODEL], stdout=full,
                                stderr=subprocess.PIPE, env=child_environment(), timeout=300)  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.decode().strip().splitlines()[-1] == (
        "minibert: error: cannot write to stdout: No space left on device")


@pytest.mark.parametrize("args", [["--help"], ["embed", "--help"], ["--version"], []])
def test_help_and_version_that_cannot_be_written_are_errors(args):
    """argparse writes --help and --version itself and drops a failed write: `minibert --help >
    /dev/full` and `minibert --version >&-` exited 0 with nothing written. Now one line, exit 1; a
    closed pipe (`--help | head -1`) stays quiet and 0, as every command's output does."""
    for how in ("closed", "read-only"):
        result = _run_with(1, how, *args)
        assert result.returncode == 1, (how, result.stderr)
        assert result.stderr.decode().strip().splitlines() == [
            "minibert: error: stdout is closed (the command was started with `>&-`)"], result.stderr
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            result = subprocess.run([sys.executable, "-m", "minibert", *args], stdout=full, stderr=subprocess.PIPE,
                                    env=child_environment(), timeout=300)  # fmt: skip
        assert result.returncode == 1
        assert result.stderr.decode().strip().splitlines() == [
            "minibert: error: cannot write to stdout: No space left on device"], result.stderr
    read_end, write_end = os.pipe()
    os.close(read_end)  # (the reader has gone: the first write is EPIPE)
    result = subprocess.run([sys.executable, "-m", "minibert", *args], stdout=write_end, stderr=subprocess.PIPE,
                            env=child_environment(), timeout=300)  # fmt: skip
    os.close(write_end)
    assert result.returncode == 0 and result.stderr == b"", result.stderr


@pytest.mark.parametrize(
    "line, said",
    [('{"text": "x", "id": NaN}', "NaN is not JSON"), ('{"text": "x", "id": 1e999}', "number"),
     ('{"text": "x", "id": -Infinity}', "-Infinity is not JSON"),
     ('{"text": "first", "text": "second"}', "the key 'text' is given twice"),
     ('{"text": "x", "id": 1, "id": 2}', "the key 'id' is given twice")],
)  # fmt: skip
@pytest.mark.parametrize("command", ["embed", "classify"])
def test_a_jsonl_line_is_json_with_each_key_once(line, said, command, tmp_path):
    """A .jsonl line's other fields are written back with its results: NaN and 1e999 were written as
    NaN and Infinity, which no JSON reader takes, and a key given twice kept its last value in
    silence. Now refused, naming the file and line, as finetune refuses the same lines."""
    source = tmp_path / "texts.jsonl"
    source.write_text(json.dumps({"text": "fine"}) + "\n" + line + "\n", encoding="utf-8")
    result = run(command, "--input", str(source), "--output", str(tmp_path / "out.jsonl"), *MODEL)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert f"{source}:2: not valid JSON" in last and said in last, last
    assert not (tmp_path / "out.jsonl").exists()


def test_a_result_that_is_not_finite_is_refused_not_written_as_nan(tmp_path):
    """A classifier whose weights hold infinity scored Infinity and NaN, written into the .jsonl as
    `Infinity` and `NaN` (exit 0): no JSON reader takes them, minibert's --input included. Now one
    line naming the field, exit 1, and no --output file."""
    transformers = pytest.importorskip("transformers")
    import torch

    model = transformers.BertForSequenceClassification(transformers.BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=37, num_labels=3))
    with torch.no_grad():
        model.classifier.bias.copy_(torch.tensor([float("inf"), float("nan"), 0.0]))
    model.save_pretrained(tmp_path / "model")
    (tmp_path / "model" / "vocab.txt").write_text((TINY / "vocab.txt").read_text(encoding="utf-8"), encoding="utf-8")
    output = tmp_path / "scores.jsonl"
    for where in (["--output", str(output)], []):
        result = run("classify", "hello", "--top-k", "all", "--function", "none", "--model", str(tmp_path / "model"),
                     *where)  # fmt: skip
        assert result.returncode == 1, (result.stdout, result.stderr)
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("minibert: error: the result's labels[0].score is not a finite number"), last
        assert "NaN" not in result.stdout and "Infinity" not in result.stdout
    assert not output.exists()
