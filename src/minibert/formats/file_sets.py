"""Writing several files that belong together (a vocabulary's ``vocab.txt`` and
``tokenizer_config.json``, a data set's files) so that they land together or not at all.

Each file is written as formats/atomic_files.py writes one (a temporary file beside it, fsync'ed,
renamed into place), but every temporary file is complete and on disk before the first rename: a
full disk, a quota or Ctrl-C while writing leaves every file as it was. The renames come last, one
after the other (POSIX has no rename of two files at once). Should one of them fail (a file made
immutable, say) or be interrupted, the files already renamed are put back: a replaced file from a
second name (a hard link) taken before, a new file by deleting it. Only SIGKILL or a power cut in
the instant between two renames can leave a mix, which no program can prevent.

A file the new ones make stale (a tokenizer's old ``tokenizer.json``, which every reader prefers
to vocab.txt) can be removed with them: after the last rename, and put back like the others.

    >>> write_files_together({"v/vocab.txt": b"[PAD]\\n", "v/tokenizer_config.json": b"{}"})  # doctest: +SKIP

Files too big to hold as bytes (a data set's shards) are streamed into the same temporary files
through ``files_written_together``, which gives the open handles and does the rest when its block ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from ..errors import DataError
from .atomic_files import atomic_output, hidden_prefix, link_target, naming_the_file


def same_file(first: str | os.PathLike, second: str | os.PathLike) -> bool:
    """Whether writing to ``first`` and to ``second`` lands in one file: the same path once links are
    followed (``os.path.realpath``: a symbolic link, a linked folder, ``./a``, even a link whose target
    is not written yet), or two existing names of one file (``os.path.samefile``: a hard link, or
    ``A`` and ``a`` on a case-insensitive file system).

    >>> same_file("out/a.tfrecord", "out/./a.tfrecord")
    True
    """
    if os.path.realpath(first) == os.path.realpath(second):
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them is not there yet (and their real paths differ): two files
        return False


def first_same_file(paths: Sequence[str | os.PathLike]) -> tuple[str | os.PathLike, str | os.PathLike] | None:
    """The first two of ``paths`` that are one file (``same_file``), or None when all are different.

    >>> first_same_file(["a.tfrecord", "b.tfrecord", "./a.tfrecord"])
    ('a.tfrecord', './a.tfrecord')
    """
    for index, first in enumerate(paths):
        for second in paths[index + 1 :]:
            if same_file(first, second):
                return first, second
    return None


def write_files_together(files: Mapping[str | os.PathLike, bytes], remove: Iterable[str | os.PathLike] = ()) -> None:
    """Write each ``{path: bytes}`` of ``files``, then remove each file of ``remove`` (a link
    itself, not its target; a path with no file is left alone); on any error (or KeyboardInterrupt)
    every path holds what it held before, and the error is raised as atomic_output raises it."""
    with files_written_together(list(files), remove) as handles:
        for (path, data), handle in zip(files.items(), handles):
            with naming_the_file(path):
                handle.write(data)


@contextlib.contextmanager
def files_written_together(
    paths: Sequence[str | os.PathLike], remove: Iterable[str | os.PathLike] = ()
) -> Iterator[list[BinaryIO]]:
    """``write_files_together`` for files written as a stream (a data set's shards, too big to hold
    as bytes): one open handle per path, in order; when the block ends, every file is fsync'ed, then
    all are renamed into place (and ``remove`` removed) together. On any error or KeyboardInterrupt,
    in the block or while the files are flushed or renamed, every path holds what it held before.

    Two paths that are one file (``same_file``: a link to the other, a hard link) are a DataError
    before anything is written: the second rename would replace the first file, silently.

    >>> with files_written_together(["s0.tfrecord", "s1.tfrecord"]) as (first, second):  # doctest: +SKIP
    ...     first.write(records[0::2]); second.write(records[1::2])
    """
    same = first_same_file(paths)
    if same is not None:  # (callers say it in their own words first: create_pretraining_data's DataError)
        raise DataError(f"{os.fspath(same[0])} and {os.fspath(same[1])} are the same file: each file is written once")
    seconds: dict[Path, Path | None] = {}  # each file's second name (None: no file there yet)
    ours: dict[Path, tuple[int, int]] = {}  # each temporary file's identity (device, inode)
    targets = [link_target(path) for path in paths]  # where each lands (through a link: its target)
    stale = [Path(path) for path in remove]
    removed: list[Path] = []
    try:
        for target in [*targets, *stale]:
            seconds[target] = _second_name(target)
        with contextlib.ExitStack() as stack:
            handles = [stack.enter_context(atomic_output(path)) for path in paths]
            yield handles
            for path, target, handle in zip(paths, targets, handles):
                with naming_the_file(path):  # every file on disk before the first rename (at the stack's end)
                    handle.flush()
                    os.fsync(handle.fileno())
                found = os.fstat(handle.fileno())
                ours[target] = (found.st_dev, found.st_ino)
        for path in stale:
            if seconds[path] is not None:
                removed.append(path)  # (before: an interruption inside unlink is put back too)
                with naming_the_file(path):
                    path.unlink(missing_ok=True)
    except BaseException:
        for target, identity in ours.items():
            _put_back(target, identity, seconds[target])
        for path in removed:
            with contextlib.suppress(OSError):
                os.replace(seconds[path], path)
        raise
    finally:
        for second in seconds.values():
            if second is not None:
                second.unlink(missing_ok=True)


def _second_name(path: Path) -> Path | None:
    """A hidden second name for the file at ``path`` (a hard link: no copy, no space), or a copy on a
    file system without hard links; None when there is no file at ``path``."""
    if not path.is_file():
        return None
    rest = f"{os.getpid()}.before.partial"  # .NAME.*.partial: a leftover's name
    second = path.with_name(hidden_prefix(path.name, len(rest)) + rest)
    second.unlink(missing_ok=True)
    with naming_the_file(path, second):
        try:
            os.link(path, second)
        except OSError:
            try:
                shutil.copy2(path, second)
            except BaseException:
                second.unlink(missing_ok=True)
                raise
    return second


def _put_back(path: Path, identity: tuple[int, int], second: Path | None) -> None:
    """Undo a rename: if the file at ``path`` is the one written (``identity``), ``path`` gets its
    old file back (``second``), or is removed if there was none."""
    with contextlib.suppress(OSError):
        found = os.stat(path)
        if (found.st_dev, found.st_ino) != identity:
            return  # its rename was never made
        if second is None:
            os.unlink(path)
        else:
            os.replace(second, path)
