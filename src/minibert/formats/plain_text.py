"""Is a file text? The check every reader of text corpora runs (``minibert vocab``, ``pretraining-data``).

A file given as text may be something else: UTF-16 (a NUL byte beside every ASCII letter, which
is valid UTF-8, so decoding does not catch it), a binary file, or one enormous line. Learning a
vocabulary or making instances from it would silently produce garbage, so such a file is refused,
by name, with the byte offset where the evidence is (``NotTextError``, one line):

- **NUL and control bytes**: more than ``MAX_CONTROL_SHARE`` (20%) of the bytes of a window of
  ``WINDOW_BYTES`` (64 KiB; the whole file when shorter) are NUL or C0 control bytes other than
  tab, line feed, vertical tab, form feed and carriage return (UTF-16 text: ~50%; UTF-32: ~75%).
  A stray NUL or control character in real text is fine: the tokenizer removes it, as Google's does.
  The windows are bytes 0–64 KiB, 64–128 KiB, ..., and, for the end of the file, its last 64 KiB
  (not the few bytes left over after the last whole window: a DOS end mark, Ctrl-Z, after exactly
  64 KiB of text would otherwise be a "window" of 100% control bytes).
- **No line break**: more than ``MAX_LINE_BYTES`` (8 MiB) without a ``\\n``. BERT's corpora hold
  one sentence (or paragraph) per line; a reader would otherwise hold the whole run in memory.

Readers that go through a file block by block feed each block to ``TextCheck`` and call ``finish``
before using the last block (the one shorter than they asked for); ``read_text_lines`` does it for
readers that want lines.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "utf16.txt"
>>> _ = path.write_text("The cat sat on the mat.\\n" * 10, encoding="utf-16-le")
>>> try:
...     list(read_text_lines(path))
... except NotTextError as error:
...     print(str(error).replace(str(path), "utf16.txt"))
utf16.txt is not text: 50% of its bytes 0–480 are NUL or control bytes (the first at byte offset 1); is it UTF-16? ...
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import NotTextError

WINDOW_BYTES = 1 << 16
MAX_CONTROL_SHARE = 0.2
MAX_LINE_BYTES = 1 << 23
BLOCK_BYTES = 1 << 20  # corpora are read 1 MiB at a time (read_text_lines; tokenizer/word_counts.py)
_CONTROL_BYTES = bytes(range(0, 9)) + bytes(range(14, 32)) + b"\x7f"  # not \t \n \x0b \x0c \r
_CONTROL = re.compile(b"[" + re.escape(_CONTROL_BYTES) + b"]")


class TextCheck:
    """Feed it a file's bytes in order (``feed``), then ``finish``: raises ``NotTextError`` at the
    first window that is mostly control bytes or the first run of ``MAX_LINE_BYTES`` without ``\\n``."""

    def __init__(self, path: str | os.PathLike):
        self.path = path
        self.offset = 0  # bytes fed so far
        self._line_start = 0  # offset of the current line's first byte
        self._line_breaks = 0  # "\n" bytes fed so far
        self._window = bytearray()
        self._previous = b""  # the last whole window checked: the start of the file's last 64 KiB

    def feed(self, data: bytes) -> None:
        lines = data.split(b"\n")
        lengths = [len(lines[0]) + self.offset - self._line_start, *map(len, lines[1:])]  # the first goes on a line
        if max(lengths) > MAX_LINE_BYTES:
            self._refuse_long_line(lengths)
        self._line_breaks += len(lines) - 1
        if len(lines) > 1:
            self._line_start = self.offset + len(data) - len(lines[-1])
        position = 0
        while position < len(data):
            taken = data[position : position + WINDOW_BYTES - len(self._window)]
            self._window += taken
            position += len(taken)
            if len(self._window) == WINDOW_BYTES:
                self._check_window(self.offset + position - WINDOW_BYTES)
                self._previous = bytes(self._window)
                self._window.clear()
        self.offset += len(data)

    def finish(self) -> None:
        """Check the end of the file (call it there, before using its last block): the bytes after the
        last whole window, judged as the file's last ``WINDOW_BYTES`` (with the end of the window
        before them), or alone when the whole file is shorter than one window."""
        if self._window:
            last = (self._previous + bytes(self._window))[-WINDOW_BYTES:]
            self._window[:] = last
            self._check_window(self.offset - len(last))
            self._window.clear()
        self._previous = b""

    def _check_window(self, start: int) -> None:
        window = bytes(self._window)
        controls = len(window) - len(window.translate(None, _CONTROL_BYTES))
        if controls > MAX_CONTROL_SHARE * len(window):
            first = start + _CONTROL.search(window).start()
            hint = "is it UTF-16? Convert it to UTF-8" if b"\x00" in window else "is it a binary file?"
            raise NotTextError(f"{self.path} is not text: {controls / len(window):.0%} of its bytes {start:,}–"
                               f"{start + len(window):,} are NUL or control bytes (the first at byte offset "
                               f"{first:,}); {hint}")  # fmt: skip

    def _refuse_long_line(self, lengths: list[int]) -> None:
        """Name the first over-long line by the byte offset and the number of the line it starts."""
        index = next(index for index, length in enumerate(lengths) if length > MAX_LINE_BYTES)
        start = self._line_start + sum(length + 1 for length in lengths[:index])
        line = self._line_breaks + index + 1
        raise NotTextError(f"{self.path} is not text: line {line:,} (from byte offset {start:,}) has no line break "
                           f"in {MAX_LINE_BYTES / (1 << 20):,.0f} MiB; text corpora hold one sentence or paragraph "
                           "per line")  # fmt: skip


def read_text_lines(path: str | os.PathLike, stream: BinaryIO | None = None) -> Iterator[bytes]:
    """The lines of a text file as bytes, each with its ``\\n`` (the last may lack it), split at
    ``\\n`` only, after ``TextCheck`` has seen them. ``OSError`` for a missing or unreadable file.

    ``stream``: read it instead of opening ``path`` (standard input; ``path`` is then its name in
    messages). It is read as it comes, a block at a time: memory follows one block, nothing is copied,
    and every line given out has been checked (a full block is whole windows; a short one is the end)."""
    if stream is not None:
        yield from _checked_lines(TextCheck(path), stream)
        return
    with open(Path(path), "rb") as handle:
        yield from _checked_lines(TextCheck(path), handle)


def _checked_lines(check: TextCheck, handle: BinaryIO) -> Iterator[bytes]:
    carried = b""
    while block := handle.read(BLOCK_BYTES):  # BLOCK_BYTES, or fewer at the end (a pipe's read waits for them)
        check.feed(block)
        if len(block) < BLOCK_BYTES:  # the last block: check all of it before yielding its lines
            check.finish()
        lines = (carried + block).split(b"\n")
        carried = lines.pop()
        for line in lines:
            yield line + b"\n"
    check.finish()
    if carried:
        yield carried
