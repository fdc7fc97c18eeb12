"""Names in a local model folder: what a name is when it is there but is not a regular file (a
directory, a FIFO, a device: an error, never "absent"), and what to say of a run folder's missing
``best/`` (a path was meant, not a hub repository). hub.py asks these before anything is fetched."""

from __future__ import annotations

import errno
import os
import stat

from ..errors import CheckpointError
from ..formats.atomic_files import KINDS


def not_a_file(path: str | os.PathLike) -> str | None:
    """What ``path`` is when a name is there but is not a regular file, said for an error: "a
    directory", "a FIFO (named pipe)", "a link to /dev/zero, a character device"; None for a regular
    file or a name that is absent (missing, or a link to nothing, which sentence-transformers'
    ``os.path.exists`` also takes as absent). Only ``stat`` is asked, so a FIFO is never opened
    (opening one waits for a writer).

    >>> not_a_file("/"), not_a_file("/no/such/file")
    ('a directory', None)
    """
    try:
        mode = os.stat(path).st_mode  # follows links: a link to /dev/zero is a device
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:  # links in a loop lead nowhere: absent, as a dangling link
            return None
        raise CheckpointError(f"cannot look at {os.fspath(path)}: {error.strerror or error}") from None
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in KINDS.items() if test(mode)), f"a special file (mode {oct(mode)})")
    return f"a link to {os.path.realpath(path)}, {kind}" if os.path.islink(path) else kind


def missing_in_a_local_folder(name: str) -> str | None:
    """What to say of ``RUN/best`` (the form of a hub id, "owner/name") when ``RUN`` is a minibert
    run folder here and holds no ``best``: a path was meant, not a repository. (Any other folder
    named like a hub owner, a clone of a library say, leaves the name to the hub.) A fine-tuning run
    keeps best/ only when it was evaluated (--dev)."""
    folder, _, inside = name.partition("/")
    if not inside or os.path.exists(name) or not os.path.isfile(os.path.join(folder, "training_state.pt")):
        return None
    if inside == "best" and os.path.isfile(os.path.join(folder, "finetune.json")):
        return (f"{name!r} does not exist: the run in {folder!r} keeps no best/, because it was made without --dev "
                f"(or has not been evaluated yet); its model is the run folder itself: {folder!r}")  # fmt: skip
    return f"{name!r} is not an existing directory: {folder!r} is a minibert run folder, and it holds no {inside!r}"

