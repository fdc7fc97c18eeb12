"""formats/plain_text.py: a file that is not text (UTF-16, binary, megabytes without a line break) is
refused by every reader of text corpora — ``minibert vocab`` and ``minibert pretraining-data`` —
with one line naming the file and the byte offset, exit 1, ``NotTextError``. Real text with a few
stray control characters (which the tokenizer removes, as Google's does) is still text."""

from __future__ import annotations

import subprocess
import sys

import pytest

from minibert.errors import DataError, NotTextError
from minibert.formats import plain_text
from minibert.formats.plain_text import TextCheck, read_text_lines
from minibert.training.tasks.examples import read_labelled_text

TEXT = "The cat sat on the mat.\nIt was warm there.\n\nStocks fell on Monday.\nTraders were calm.\n" * 30
VOCAB = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\n"


def _commands(path, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(VOCAB, encoding="utf-8")
    (tmp_path / "out").mkdir(exist_ok=True)
    return {
        "vocab": ["vocab", "--input", str(path), "--output", str(tmp_path / "out"), "--vocab-size", "100"],
        "pretraining-data": ["pretraining-data", "--input", str(path), "--vocab", str(vocab),
                             "--output", str(tmp_path / "out.tfrecord")],  # fmt: skip
    }


def _run(arguments):
    return subprocess.run([sys.executable, "-m", "minibert", *arguments], capture_output=True, text=True)


NOT_TEXT = {
    "utf-16": (lambda: TEXT.encode("utf-16"), "is it UTF-16?", "byte offset 3"),  # checked before decoding
    "utf-16-le without a byte-order mark": (lambda: TEXT.encode("utf-16-le"), "is it UTF-16?", "byte offset 1"),
    "utf-32-le": (lambda: TEXT.encode("utf-32-le"), "NUL or control bytes", "byte offset 1"),
    "control characters": (lambda: (b"\x01\x02\x03\x04 ab\n" * 2000), "is it a binary file?", "byte offset 0"),
    "mostly text, then a control-heavy window": (
        lambda: TEXT.encode() * 30 + b"\x00\x1b" * 40_000, "NUL or control bytes", "bytes 65,536"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(NOT_TEXT))
@pytest.mark.parametrize("command", ["vocab", "pretraining-data"])
def test_not_text_is_refused_by_name_with_the_offset(name, command, tmp_path):
    make, *expected = NOT_TEXT[name]
    path = tmp_path / "corpus.txt"
    path.write_bytes(make())
    done = _run(_commands(path, tmp_path)[command])
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert str(path) in done.stderr and all(part in done.stderr for part in expected), done.stderr
    assert not (tmp_path / "out.tfrecord").exists() and not (tmp_path / "out" / "vocab.txt").exists()


@pytest.mark.parametrize("block", [256, 4096, 1 << 16], ids=["spans blocks", "starts inside a block", "one block"])
@pytest.mark.parametrize("short_lines", [0, 1, 300])
def test_no_line_break_in_megabytes_names_the_line_and_where_it_starts(tmp_path, monkeypatch, block, short_lines):
    """The message names the long line by its number and first byte, wherever it starts: at a block's
    start, inside a block after thousands of short lines (once named "from byte offset 0"), or
    across blocks. The expected figures are counted from the file's own bytes."""
    monkeypatch.setattr(plain_text, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(plain_text, "BLOCK_BYTES", block)
    path = tmp_path / "one-line.txt"
    head = b"a short line\n" * short_lines
    path.write_bytes(head + b"word " * 300 + b"\nafter\n")
    expected = rf"line {short_lines + 1:,} \(from byte offset {len(head):,}\) has no line break in"
    with pytest.raises(NotTextError, match=r"one-line.txt is not text: " + expected):
        list(read_text_lines(path))


def _is_text(path, data: bytes):
    """Check that ``data`` is text to both of plain_text's judges: a TextCheck fed it whole finishes
    without a NotTextError, and read_text_lines gives back every byte of it written to ``path`` (the
    file the readers of corpora open); returns ``path``."""
    check = TextCheck(path.name)
    check.feed(data)
    check.finish()
    path.write_bytes(data)
    assert b"".join(read_text_lines(path)) == data
    return path


def test_real_text_with_stray_controls_is_text(tmp_path):
    """A NUL, an escape, a form feed here and there: text (the tokenizer removes them)."""
    data = TEXT.replace("warm", "wa\x00rm").replace("calm", "\x1b[1mcalm\x0c").encode()
    _is_text(tmp_path / "corpus.txt", data)


def test_lines_split_at_line_feed_only_across_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(plain_text, "BLOCK_BYTES", 5)
    path = tmp_path / "corpus.txt"
    path.write_bytes("one\r\ntwo\x0cthree\u2028\n\nlast".encode())  # (U+2028: a line separator to Unicode, not here)
    assert list(read_text_lines(path)) == [b"one\r\n", "two\x0cthree\u2028\n".encode(), b"\n", b"last"]


def test_not_text_error_is_a_data_error():
    assert issubclass(NotTextError, DataError)


@pytest.mark.parametrize("length", [1 << 16, 3 << 16, 5000], ids=["64 KiB", "192 KiB", "5,000 bytes"])
def test_a_control_byte_at_the_end_is_judged_in_the_last_whole_window(length, tmp_path):
    """A DOS end mark (Ctrl-Z) after text is text, whatever the file's length: the end of the file
    is judged as its last 64 KiB, never as the few bytes past the last whole window (a 1-byte
    "window" of 100% control bytes once refused a file of exactly 64 KiB of text and a Ctrl-Z)."""
    data = (TEXT.encode() * (length // len(TEXT) + 1))[:length] + b"\x1a"
    path = _is_text(tmp_path / "dos.txt", data)
    for command, arguments in _commands(path, tmp_path).items():
        done = _run(arguments)
        assert done.returncode == 0, (command, done.stderr)
    assert read_labelled_text(path) == data.decode()


def test_the_last_64_kib_mostly_control_bytes_is_still_refused(tmp_path):
    """The file's last window overlaps the window before it: 20,000 control bytes after 64 KiB of
    text make its last 64 KiB 31% control bytes, named from where those 64 KiB start."""
    data = (TEXT.encode() * 30)[: 1 << 16] + b"\x01" * 20_000
    start = len(data) - (1 << 16)
    check = TextCheck("x")
    check.feed(data)
    with pytest.raises(NotTextError, match=rf"31% of its bytes {start:,}–{len(data):,} .* byte offset 65,536\)"):
        check.finish()
