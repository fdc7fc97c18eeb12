"""A run's path settings (--model, --train, --dev, pretrain's --init) on ``--resume``: the same file
or folder, from whatever directory the command runs in.

A run keeps each path as it was typed (``train.csv``: what its messages and its ``--resume`` command
say) and, beside it, the real path it named when the run started (absolute, links and ``..``
resolved: ``real_paths``). A resume gives the same file when its path, read from the directory the
resume runs in, is that file. A typed string alone says nothing: ``train.csv`` typed in another
directory is another file, and ``../train.csv`` typed in a sub-folder may be the run's own.

    the run's real path        the resume gives (from anywhere)            the same?
    /work/train.csv            ../train.csv, /work/train.csv, a link to it  yes (os.path.samefile)
    /work/train.csv            train.csv, another folder's (a copy)         no: refused, both paths named
    /work/train.csv, gone      (a folder moved since)                       the typed strings decide
    none kept                  (a hub id; a state from before real paths)   the typed strings, or the
                                                                            files they name from here

The fingerprints of the training data, the dev set, the config and the tokenizer (checkpoint.py)
compare what the files hold; this compares which files they are, as every other setting is compared.
"""

from __future__ import annotations

import os

PATH_SETTINGS = ("train", "dev", "model", "init")  # files or folders: the same one however it is written


def real_paths(settings: dict) -> dict[str, str]:
    """{setting: the real path it names here} for each path setting that names a file or folder (a hub
    id names none: it is the same id anywhere)."""
    named = {name: real_path(settings[name]) for name in PATH_SETTINGS if isinstance(settings.get(name), str)}
    return {name: real for name, real in named.items() if real is not None}


def real_path(path: str) -> str | None:
    """The absolute path of the file or folder ``path`` names from here, links and ``..`` resolved. A
    name in a folder that is no file itself, Google's checkpoint prefix (``DIR/model.ckpt-3``: its
    files are ``model.ckpt-3.index`` ...), is its folder's real path and the name. None: nothing
    here (a hub id)."""
    if os.path.exists(path):
        return os.path.realpath(path)
    folder, name = os.path.split(path)
    if folder and name and os.path.isdir(folder):
        return os.path.join(os.path.realpath(folder), name)
    return None


def same_path(typed: str, recorded: str | None, given: str) -> bool:
    """Whether ``given`` (this command's path, read from here) names what the run named: ``typed``, as
    the run's command typed it, and ``recorded``, its real path then (None: not kept)."""
    if isinstance(recorded, str):
        here = real_path(given)
        if here is not None and (here == recorded or _same_file(recorded, here)):
            return True
        if os.path.lexists(recorded) or os.path.isdir(os.path.dirname(recorded)):
            return False  # the run's file is still where it was, and this is another
        # (gone: the folder was moved since the run started; as before real paths were kept)
    return typed == given or _same_file(typed, given)


def shown(typed, recorded: str | None) -> str:
    """A path setting as a message shows it: as typed, and the real path where that says more."""
    if isinstance(recorded, str) and recorded != typed:
        return f"{typed!r} ({recorded})"
    return repr(typed)


def _same_file(first: str, second: str) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:  # one is not there (a hub id, a moved file)
        return False
