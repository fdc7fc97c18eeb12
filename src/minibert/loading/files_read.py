"""Which files a load read: what a resumable run records as "the model" (apps/run_fingerprint.py).

A model is more than the name it was asked by. ``Embedder.from_pretrained("./m")`` reads config.json,
the weights, the tokenizer's files and a sentence-transformers recipe (modules.json,
1_Pooling/config.json, a Dense layer's weights, ...): any of them changes the numbers. Every file a
load finds goes through one door, ``hub.resolve_file`` (and a Google checkpoint's files through
checkpoint_files.py), which tells ``note`` of it; within ``recording()`` the notes are kept:

    >>> with recording() as read:                                           # doctest: +SKIP
    ...     embedder = Embedder.from_pretrained("./m")
    >>> read                                                                 # doctest: +SKIP
    {'config.json': PosixPath('m/config.json'), 'vocab.txt': PosixPath('m/vocab.txt'), ...}

A name is kept with the path it was read from (a file read twice is noted once). Outside
``recording()`` a note costs nothing. A load that failed and is followed by another (a command
falling back to a bundled model) is ``forget``-ten first: its files are not the model's.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from pathlib import Path

_READ: contextvars.ContextVar[dict | None] = contextvars.ContextVar("minibert_files_read", default=None)


@contextlib.contextmanager
def recording() -> Iterator[dict[str, Path]]:
    """{file name within the model, as asked ("1_Pooling/config.json"): its local path} for every file
    found while the block runs."""
    read: dict[str, Path] = {}
    reset = _READ.set(read)
    try:
        yield read
    finally:
        _READ.reset(reset)


def forget() -> None:
    """Empty the open ``recording()`` (outside one: nothing): the files noted so far belong to a load
    that failed, and the next load's files, which may have the same names, are the model's."""
    read = _READ.get()
    if read is not None:
        read.clear()


def note(filename: str, path: Path) -> Path:
    """Tell an open ``recording()`` that ``filename`` of the model was found at ``path``; returns ``path``."""
    read = _READ.get()
    if read is not None:
        read.setdefault(filename, Path(path))
    return path
