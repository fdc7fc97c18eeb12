"""Writing files so that nothing is ever half-written: write a temporary file beside the target,
flush it to disk, then rename it over the target in one atomic step.

The result gets the mode a plain ``open(path, "w")`` would give: 0666 less the user's umask for a
new file, the old file's mode for one that is overwritten (a temporary file starts as 0600).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Open a temporary file for writing; on success it replaces ``path``, on any error (or
    KeyboardInterrupt) it is removed and ``path`` is left untouched.

    >>> with atomic_output("out.npy") as handle:        # doctest: +SKIP
    ...     handle.write(data)
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=directory)
    try:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~current_umask()
        os.fchmod(descriptor, mode)
        with os.fdopen(descriptor, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def current_umask() -> int:
    """The process's umask, read without changing it (Linux: /proc/self/status), else by the
    classic set-and-restore."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    with atomic_output(path) as handle:
        handle.write(data)
