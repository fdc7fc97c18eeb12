"""A command's standard streams as the shell gave them: closed ones, and writes to stdout that fail.

A process started with a stream closed (``<&-``, ``>&-``, ``2>&-``) finds ``sys.stdin``,
``sys.stdout`` or ``sys.stderr`` set to None, and Python's ``print`` writes nothing to None. So:

* stdout closed: a command's results would go nowhere while it reported success. It becomes a
  stream whose first write is a ``FileWriteError`` saying so (exit 1); a command whose results go
  to ``--output`` files runs as usual.
* stderr closed: its lines are the messages the caller chose not to see (the exit status still
  says how the command ended); they go to ``os.devnull``. Before, the first one raised, the error
  line raised again, and a run that had worked failed with nothing said.
* stdin closed: reading texts from it is an ``InputFileError`` (formats/line_files.py).

A write to stdout that fails (``> /dev/full``: no space left) is a ``FileWriteError`` naming
stdout; the system's error names no file for it. A closed pipe (``| head``) stays a
``BrokenPipeError``: cli.py ends quietly on it. stderr is also wrapped to know where its lines
end (stderr_lines.py).

argparse writes ``--help`` and ``--version`` itself, before a command runs, and drops a failed
write: ``minibert --help > /dev/full`` exited 0 with nothing written. ``write_help`` writes them
with the same rules.
"""

from __future__ import annotations

import errno
import os
import sys
from dataclasses import dataclass

try:
    import fcntl
except ImportError:  # (Windows: a descriptor's mode is not asked)
    fcntl = None

from ..errors import FileWriteError
from .stderr_lines import LineEnds, restore, track_line_ends


class ClosedStdout:
    """What ``sys.stdout`` is when the process was started without one: writing is an error."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        raise FileWriteError(errno.EBADF, "stdout is closed (the command was started with `>&-`): its results "
                                          "have nowhere to go; redirect them to a file or a pipe")  # fmt: skip

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class NamedStdout:
    """``stream`` as it is, but a write or flush that fails (other than a closed pipe) says it was stdout."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        return self._said(self.stream.write, text)

    def flush(self) -> None:
        return self._said(self.stream.flush)

    def _said(self, call, *arguments):
        try:
            return call(*arguments)
        except BrokenPipeError:
            raise
        except OSError as error:
            if isinstance(error, FileWriteError):
                raise
            raise FileWriteError(error.errno, f"cannot write to stdout: {error.strerror or error}") from None

    def __getattr__(self, name: str):  # isatty, fileno, encoding, buffer ...: the stream's own
        return getattr(self.stream, name)


@dataclass
class Taken:
    """What ``take`` replaced, for ``give_back``."""

    stdout: object
    stderr: object
    tracked: LineEnds
    devnull: object | None = None


def take() -> Taken:
    """The streams for a command's run (see above); ``give_back`` puts the originals back."""
    stdout, stderr, devnull = sys.stdout, sys.stderr, None
    if closed(stderr):
        sys.stderr = devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (closed by give_back)
    sys.stdout = ClosedStdout() if closed(stdout) else NamedStdout(stdout)
    return Taken(stdout, stderr, track_line_ends(), devnull)


def closed(stream) -> bool:
    """Whether ``stream`` cannot be written: missing (Python makes None of a descriptor closed when
    it starts), or on a descriptor that is closed or open for reading only. A launcher can hand the
    descriptor the shell closed to a file of its own (``2>&-`` through pyenv's shim: fd 2 was the
    shim's script, read-only), and every write then fails with EBADF. A stream with no descriptor
    (pytest's capture) is open."""
    if stream is None:
        return True
    try:
        descriptor = stream.fileno()
        if fcntl is None:  # (no access mode to ask: a descriptor that is there counts as writable)
            os.fstat(descriptor)
            return False
        return fcntl.fcntl(descriptor, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    except OSError as error:
        return error.errno == errno.EBADF
    except (ValueError, AttributeError):  # (a closed or a descriptor-less stream: not the shell's doing)
        return False


def write_help(text: str, stream) -> None:
    """``text`` (argparse's help, version or usage) on ``stream``, flushed. stdout closed or failing:
    one line on stderr, exit 1; a closed pipe (``--help | head``): exit 0, quietly. Either way the
    rest is dropped, so the interpreter's last flush of stdout does not fail again at exit. (argparse
    passes ``sys.stdout`` or ``sys.stderr``: None is a closed one, and stdout unless both are.)"""
    if stream is sys.stderr:  # (a usage error: a failing stderr has no one to tell)
        try:
            stream.write(text)
        except (AttributeError, OSError):
            pass
        return
    try:
        if closed(stream):
            raise FileWriteError(errno.EBADF, "stdout is closed (the command was started with `>&-`)")
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        _drop_stdout()
        sys.exit(0)
    except OSError as error:
        _drop_stdout()
        said = str(error) if isinstance(error, FileWriteError) else f"cannot write to stdout: {error.strerror}"
        print(f"minibert: error: {said}", file=sys.stderr)
        sys.exit(1)


def _drop_stdout() -> None:
    """What is still buffered for stdout goes nowhere (Python's advice for a closed pipe)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (AttributeError, ValueError, OSError):  # (no stdout, or no descriptor: nothing buffered there)
        pass


def give_back(taken: Taken) -> None:
    restore(taken.tracked)
    if isinstance(sys.stdout, (ClosedStdout, NamedStdout)):  # (unless something replaced it since)
        sys.stdout = taken.stdout
    if taken.devnull is not None:
        if sys.stderr is taken.devnull:
            sys.stderr = taken.stderr
        taken.devnull.close()
