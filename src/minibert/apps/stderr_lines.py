"""Whether stderr stands at the start of a line, so that a command's last line (the stop on Ctrl-C
or a signal, an error) begins on a line of its own.

A line can be left half written in two ways. A live progress line (``\\rstep 12/60 ...``) is
rewritten in place and ends without a newline. And Python raises a KeyboardInterrupt wherever
the signal finds it, inside a ``print`` too: ``print(line, file=sys.stderr)`` writes the line and
its newline as two writes, and the signal is checked after each one reaches the file, so the
line can be out and its newline never. The stop's line then ran on from the middle of the other
("... 0.0 min leftminibert: interrupted; ..."). Which of the two happened is known only to the
stream, so the command's stderr is wrapped in one that remembers how its last write ended.
"""

from __future__ import annotations

import sys


class LineEnds:
    """``stream`` as it is, and ``mid_line``: whether the last text written to it did not end a line."""

    def __init__(self, stream):
        self.stream = stream
        self.mid_line = False

    def write(self, text: str) -> int:
        if text:  # (noted before the write: the signal is raised after the text is out)
            self.mid_line = not text.endswith("\n")
        return self.stream.write(text)

    def __getattr__(self, name: str):  # isatty, fileno, flush, encoding ...: the stream's own
        return getattr(self.stream, name)


def track_line_ends() -> LineEnds:
    """Wrap ``sys.stderr`` for a command's run; ``restore`` puts the stream back."""
    sys.stderr = LineEnds(sys.stderr)
    return sys.stderr


def restore(tracked: LineEnds) -> None:
    if sys.stderr is tracked:  # (unless something replaced it since: then that is left in place)
        sys.stderr = tracked.stream


def start_a_line() -> None:
    """End a half-written line on stderr, if there is one: what is printed next starts a line."""
    if isinstance(sys.stderr, LineEnds) and sys.stderr.mid_line:
        print(file=sys.stderr)
