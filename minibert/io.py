"""Writing files so that nothing is ever half-written: write a temporary file beside the target,
flush it to disk, then rename it over the target in one atomic step."""

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
        with os.fdopen(descriptor, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    with atomic_output(path) as handle:
        handle.write(data)
