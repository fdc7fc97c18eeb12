"""The commands read their input as a bounded stream (issue 53): stdin and --input pass the same
not-text checks as ``vocab`` and ``finetune`` (formats/plain_text.py: windows mostly NUL or control
bytes, 8 MiB without a line break, bytes that are not UTF-8), stdin is never copied to a temporary
file, and work and memory follow the input's real size, not what a device like /dev/zero can give."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from helpers import run_minibert as run


def _one_line_error(result, *parts: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert all(part in lines[0] for part in parts), lines[0]
    return lines[0]


@pytest.mark.parametrize("data, expected", [
    (b"\x00" * (3 << 20), ["stdin is not text", "NUL or control bytes", "UTF-16"]),
    ((b"\x00" * 3 + b"\n") * 100_000, ["stdin is not text", "NUL or control bytes"]),
    (b"ok line\n" + b"\xff\xfe broken\n", ["stdin is not UTF-8 text (line 2, byte 8)"]),
    ("The cat sat.\n".encode("utf-16-le"), ["stdin is not text", "UTF-16"]),
], ids=["NUL bytes, no line break", "NUL lines", "not UTF-8", "UTF-16"])  # fmt: skip
def test_stdin_that_is_not_text_is_refused_and_no_file_is_written(minilm_dir, tmp_path, data, expected):
    """Once: 200 MB of NUL bytes came back as a 1.26 GB JSON line of \\u0000."""
    for suffix in (".npy", ".jsonl"):
        output = tmp_path / f"out{suffix}"
        _one_line_error(run("embed", "-", "--output", str(output), "--model", str(minilm_dir), stdin=data), *expected)
        assert list(tmp_path.iterdir()) == [], "a refused input leaves no output (nor a temporary)"
    result = run("embed", "-", "--model", str(minilm_dir), stdin=data)
    _one_line_error(result, *expected)
    assert "\\u0000" not in result.stdout


@pytest.mark.parametrize("source", ["/dev/zero", "sparse"])
def test_an_endless_or_sparse_input_file_is_refused_at_its_first_window(minilm_dir, tmp_path, source):
    """/dev/zero and a 1 GB sparse file as --input: refused from their first block (once a MemoryError
    after reading gigabytes), naming the file, before the model is loaded (here: a missing model)."""
    if source == "sparse":
        source = tmp_path / "sparse.txt"
        with open(source, "wb") as handle:
            handle.truncate(1 << 30)
    started = time.monotonic()
    result = run("embed", "--input", str(source), "--model", str(tmp_path / "no-model"))
    _one_line_error(result, f"{source} is not text", "NUL or control bytes")
    assert time.monotonic() - started < 30, "a bounded check reads one block, not the whole file"


def test_stdin_is_not_copied_anywhere(minilm_dir, tmp_path, monkeypatch):
    """stdin is read as a stream, not spooled: no temporary file appears, whatever the output."""
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    out = tmp_path / "out.npy"
    result = run("embed", "-", "--output", str(out), "--model", str(minilm_dir), stdin=b"one\ntwo\n\nthree\n")
    assert result.returncode == 0, result.stderr
    assert np.load(out).shape == (4, 384), "the .npy header counts the texts read from stdin"
    assert "wrote 4 embeddings" in result.stderr
    assert list(spool.iterdir()) == []


def test_empty_stdin_is_nothing_to_do(minilm_dir, tmp_path):
    for output in ([], ["--output", str(tmp_path / "o.npy")], ["--output", str(tmp_path / "o.jsonl")]):
        _one_line_error(run("embed", "-", *output, "--model", str(minilm_dir), stdin=b""), "stdin is empty")
    assert list(tmp_path.iterdir()) == []


def test_a_pipe_is_answered_while_it_is_still_open(minilm_dir, tmp_path):
    """A real pipe into a real process: the first block's rows come back before the writer closes
    stdin (a spooling reader waits for the end; an endless stream would fill the disk)."""
    process = subprocess.Popen([sys.executable, "-m", "minibert", "embed", "-", "--model", str(minilm_dir),
                                "--commit-every", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    try:
        block = 1 << 20  # plain_text.BLOCK_BYTES: a pipe is read a block at a time
        first, filler = "first text " * (block * 3 // 2 // 11), "filler " * (block // 2 // 7)
        process.stdin.write(f"{first}\nsecond\n{filler}\n".encode())  # two blocks end inside the filler
        process.stdin.flush()
        rows = [json.loads(process.stdout.readline()) for _ in range(2)]
        assert [row["text"][:10] for row in rows] == ["first text", "second"]
        assert len(rows[0]["embedding"]) == 384
        assert process.poll() is None, "the command answered before its input ended"
        process.stdin.write(b"third\n")
        process.stdin.close()
        texts = [json.loads(line)["text"][:6] for line in process.stdout]
        assert texts == ["filler", "third"] and process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait()


def test_task_commands_read_stdin_as_a_checked_stream(make, tmp_path):
    directory = make("BertForSequenceClassification", scale=5.0, num_labels=3)
    result = run("classify", "-", "--model", str(directory), stdin=b"a fine day\nrain again\n")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["text"] for line in result.stdout.splitlines()] == ["a fine day", "rain again"]
    output = tmp_path / "out.jsonl"
    _one_line_error(run("classify", "-", "--output", str(output), "--model", str(directory), stdin=b"\x00" * 70_000),
                    "stdin is not text")  # fmt: skip
    _one_line_error(run("classify", "-", "--model", str(directory), stdin=b""), "stdin is empty")
    assert not output.exists()
