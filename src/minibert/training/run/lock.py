"""One run per folder: an exclusive lock on the output folder of ``pretrain`` (and ``finetune``).

Two commands writing one folder at once would interleave their metrics and keep whichever
checkpoint was saved last. So a command that writes a run first takes an exclusive ``flock`` on
``FOLDER/.minibert.lock`` and writes its process id into it; a second command asking for the same
folder is refused at once, naming the folder and the process that holds it::

    >>> with run_folder_lock("run", flag="--output"):          # doctest: +SKIP
    ...     train()                                             # a second one: RunFolderBusyError

The operating system releases a ``flock`` when its process ends in any way, SIGKILL included, so
there is never a stale lock to delete by hand. A command that ends (finished, refused, stopped)
removes the file as it lets go, so a finished run's folder holds only the run; after a SIGKILL the
file stays, unlocked, which means nobody holds it (``remove_abandoned_lock`` removes such a file:
a ``--ray`` sweep's trials, whose Ray workers are killed when the sweep stops, leave theirs). Under
torchrun only rank 0 takes it: the other processes write nothing.

A folder the lock had to create is removed again if the command fails before writing anything
into it (a refused command leaves no empty folder behind).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ...errors import DataError, RunFolderBusyError
from ...formats.atomic_files import naming_the_file

LOCK_FILE = ".minibert.lock"


@contextlib.contextmanager
def run_folder_lock(folder: str | os.PathLike, flag: str = "--output") -> Iterator[Path]:
    """Hold the exclusive lock of ``folder`` (created if missing) for the ``with`` block; yields the
    folder. ``flag`` names the folder in messages (the command-line flag that gave it)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise DataError(f"{flag} {folder} exists and is not a directory")
    created = not folder.exists()
    with naming_the_file(folder):  # a read-only parent: "cannot write RUN: Read-only file system", not an errno
        folder.mkdir(parents=True, exist_ok=True)
    handle = _locked_handle(folder, flag)
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield folder
    except BaseException:
        if created:  # nothing written yet: leave no empty folder behind
            with contextlib.suppress(OSError):
                if [entry.name for entry in folder.iterdir()] == [LOCK_FILE]:
                    _remove_if_ours(folder / LOCK_FILE, handle)
                    folder.rmdir()
        raise
    finally:
        _remove_if_ours(folder / LOCK_FILE, handle)  # while still locked: a waiter then opens a new one
        handle.close()  # closing the descriptor releases the lock


def remove_abandoned_lock(folder: str | os.PathLike, wait: float = 0.0) -> None:
    """Remove ``folder``'s lock file when no process holds it (its holder was killed), and the folder
    too when the file was all it held, as the killed command would have on its way out. A holder
    still dying is waited for up to ``wait`` seconds; one that outlives them keeps its lock."""
    folder = Path(folder)
    deadline = time.monotonic() + wait
    while os.path.lexists(folder / LOCK_FILE):
        try:
            handle = _locked_handle(folder, "--output")
        except RunFolderBusyError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.1)
            continue
        except DataError:  # cannot be opened: not ours to remove
            return
        _remove_if_ours(folder / LOCK_FILE, handle)
        handle.close()
        with contextlib.suppress(OSError):
            folder.rmdir()  # (only when empty)
        return


def _remove_if_ours(path: Path, handle) -> None:
    """Remove the lock file this process holds (not one another process made since)."""
    with contextlib.suppress(OSError):
        if os.path.samestat(os.fstat(handle.fileno()), os.lstat(path)):
            path.unlink()


def _locked_handle(folder: Path, flag: str):
    """The lock file, open and locked by this process; RunFolderBusyError when another holds it."""
    path = folder / LOCK_FILE
    while True:
        try:  # never through a symbolic link (the file is truncated once locked)
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as error:
            raise DataError(f"{flag} {folder}: cannot open its lock file {path}: {error.strerror}") from None
        handle = os.fdopen(descriptor, "r+", encoding="ascii", errors="replace")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = handle.read(24).strip()
            holder = holder if holder.isdigit() else "unknown"
            handle.close()
            raise RunFolderBusyError(
                f"{flag} {folder} is in use by another run (process {holder} holds {path}): wait for it to end, "
                "or choose another folder (nothing was written)"
            ) from None
        # A failed command may have removed the file (and its folder) between our open and our lock:
        # then we locked a file nobody else can see, so open it again.
        try:
            same = os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return handle
        handle.close()
        folder.mkdir(parents=True, exist_ok=True)
