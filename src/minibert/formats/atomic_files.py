"""Writing files so that nothing is ever half-written: write a temporary file beside the target,
flush it to disk, then rename it over the target in one atomic step.

The result gets the mode a plain ``open(path, "w")`` would give: 0666 less the user's umask for a
new file, the old file's mode for one that is overwritten (a temporary file starts as 0600).

Only a regular file is ever replaced: a path that names a directory, a FIFO, a device (``/dev/null``)
or a socket is refused (``refuse_what_is_not_a_file``), since the rename would put a plain file in
its place. Commands call it on their outputs before any work, and ``atomic_output`` again.

A path that is a symbolic link is written where the link points, as the shell's ``>``, ``cp`` and
``np.save`` write through it: the temporary file goes beside the link's target and is renamed over
the target; the link stays a link.

The temporary file is named ``.NAME.xxxxxxxx.partial``, 18 bytes longer than NAME: for a name of
238 to 255 bytes (legal: the file system takes it) that would be too long, so NAME is cut to fit
(``hidden_prefix``). A name over 255 bytes is refused as the file system refuses it, "cannot write
NAME: File name too long", by the commands' early checks (``refuse_what_is_not_a_file``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import FileWriteError

NAME_MAX = 255  # the bytes of one file name (ext4, XFS, Btrfs, tmpfs, APFS, ...)
TEMPORARY_ROOM = len("xxxxxxxx.partial")  # what mkstemp puts after the prefix: 8 random characters, the suffix


def hidden_prefix(name: str, room: int = TEMPORARY_ROOM) -> str:
    """``.NAME.``: how the hidden names of the files written for the file ``name`` begin (a temporary
    file, a second name), leaving ``room`` bytes for the rest of the name (mkstemp's: 16). A ``name``
    too long for that is cut, at a character, so that the hidden name fits ``NAME_MAX`` bytes: an
    output name is legal up to 255 bytes, and its temporary file must be too.

    >>> hidden_prefix("vocab.txt")
    '.vocab.txt.'
    >>> long = "a" * 241 + ".tfrecord"  # 250 bytes: a legal name
    >>> hidden_prefix(long) == "." + long[:237] + ".", len(hidden_prefix(long)) + TEMPORARY_ROOM
    (True, 255)
    """
    most = NAME_MAX - room - 2  # the bytes NAME may keep (besides the two dots)
    kept = name[:most]  # (each character is at least one byte)
    while len(os.fsencode(kept)) > most:
        kept = kept[:-1]
    return f".{kept}."


def link_target(path: str | os.PathLike) -> Path:
    """Where a file written to ``path`` lands: a symbolic link's target (as ``>`` and ``cp`` write
    through a link), else ``path`` itself."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Open a temporary file for writing; on success it replaces ``path``, on any error (or
    KeyboardInterrupt) it is removed and ``path`` is left untouched.

    >>> with atomic_output("out.npy") as handle:        # doctest: +SKIP
    ...     handle.write(data)
    """
    path = Path(path)
    target = link_target(path)  # renaming over a link would replace it
    directory = target.parent if str(target.parent) else Path(".")
    refuse_what_is_not_a_file(path)  # (and a name too long for the file system)
    with naming_the_file(path):
        descriptor, temporary = tempfile.mkstemp(prefix=hidden_prefix(path.name), suffix=".partial", dir=directory)
    try:
        with naming_the_file(path, temporary):
            try:
                mode = os.stat(path).st_mode & 0o7777
            except FileNotFoundError:
                mode = 0o666 & ~current_umask()
            os.fchmod(descriptor, mode)
            with os.fdopen(descriptor, "wb") as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


KINDS = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO (named pipe)", stat.S_ISCHR: "a character device",
         stat.S_ISBLK: "a block device", stat.S_ISSOCK: "a socket"}  # fmt: skip


def refuse_what_is_not_a_file(path: str | os.PathLike) -> None:
    """FileWriteError naming ``path`` when it exists and is not a regular file (through a symbolic
    link too): writing it atomically would replace a directory, FIFO, device or socket with a file;
    or when its name is longer than the file system takes ("File name too long": before the work).

    >>> refuse_what_is_not_a_file("/dev/null")      # doctest: +SKIP
    minibert.errors.FileWriteError: cannot write /dev/null: it is a character device, not a regular file (...)
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return  # a new file (a missing folder is the caller's or mkstemp's error)
    except OSError as error:
        if error.errno == errno.ENAMETOOLONG:
            raise FileWriteError(error.errno, f"cannot write {path}: {error.strerror}") from None
        return  # unreadable: mkstemp names the error
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in KINDS.items() if test(mode)), "not a regular file")
    code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EEXIST
    raise FileWriteError(code, f"cannot write {path}: it is {kind}, not a regular file (the output is written "
                               "beside it and renamed into place, which would replace it)")  # fmt: skip


def refuse_a_name_too_long(path: str | os.PathLike) -> None:
    """FileWriteError "cannot write PATH: File name too long" when a part of ``path`` is longer than
    the file system takes (255 bytes on ext4 and tmpfs), or the whole is longer than the system's
    limit: said before any work, for a file or a folder alike.

    >>> refuse_a_name_too_long("/tmp/" + "a" * 300)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    minibert.errors.FileWriteError: cannot write /tmp/aaa...: File name too long
    """
    try:
        os.lstat(path)
    except OSError as error:
        if error.errno == errno.ENAMETOOLONG:
            raise FileWriteError(error.errno, f"cannot write {os.fspath(path)}: {error.strerror}") from None


def why_not_a_folder(directory: str | os.PathLike) -> str | None:
    """What keeps ``directory`` from holding an output, in words ("does not exist", "is a file, not a
    directory"), or None when it is a directory: for the messages of the commands' early checks.

    >>> why_not_a_folder("/no/such/folder"), why_not_a_folder("/")
    ('does not exist', None)
    """
    found = _folder_problem(directory)
    return None if found is None else found[1]


def folder_error(directory: str | os.PathLike, what: str = "the output directory") -> OSError | None:
    """``why_not_a_folder`` as the exception Python's own call would raise, or None for a directory:
    FileNotFoundError (missing), NotADirectoryError (a file, a FIFO, ...), OSError (unreadable); the
    message names ``what`` and ``directory``. The type comes from what was found, never from the words.

    >>> folder_error("/no/such/folder")
    FileNotFoundError('the output directory /no/such/folder does not exist')
    """
    found = _folder_problem(directory)
    return None if found is None else found[0](f"{what} {os.fspath(directory)} {found[1]}")


def _folder_problem(directory: str | os.PathLike) -> tuple[type[OSError], str] | None:
    """(the exception type, the words) of what keeps ``directory`` from holding an output, or None."""
    try:
        mode = os.stat(directory).st_mode
    except (FileNotFoundError, NotADirectoryError):
        above = Path(directory).parent  # tiny.txt/out/: say that tiny.txt is a file
        problem = _folder_problem(above) if above != Path(directory) else None
        if problem is not None and problem[0] is not FileNotFoundError:
            return FileNotFoundError, f"does not exist ({above} {problem[1]})"
        return FileNotFoundError, "does not exist"
    except OSError as error:
        return OSError, f"cannot be read ({error.strerror})"
    if stat.S_ISDIR(mode):
        return None
    if stat.S_ISREG(mode):
        return NotADirectoryError, "is a file, not a directory"
    kind = next((name for test, name in KINDS.items() if test(mode)), "something else")
    return NotADirectoryError, f"is {kind}, not a directory"


def output_folder(directory: str | os.PathLike, *files: str) -> Path:
    """``directory`` made (its parents too) to hold ``files`` (the names saved in it), or a
    FileWriteError saying why it cannot be: a path that is a file (or a folder under one) is said to
    be that, not "File exists"; a folder that cannot be made is named (the model's, the config's and
    the tokenizer's ``save_pretrained``)."""
    directory = Path(directory)
    reason = why_not_a_folder(directory)
    if reason not in (None, "does not exist"):  # (a file, or a folder under a file: mkdir would say less)
        listed = " and ".join(files) if len(files) < 3 else f"{', '.join(files[:-1])} and {files[-1]}"
        raise FileWriteError(errno.ENOTDIR, f"cannot save {listed} into {directory}: it {reason}")
    with naming_the_file(directory / files[0], directory):
        directory.mkdir(parents=True, exist_ok=True)
    return directory


# The errors of writing a file, as the operating system gives them: a full disk names no file.
WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO,
                errno.ENAMETOOLONG}  # fmt: skip


@contextlib.contextmanager
def naming_the_file(path: str | os.PathLike, *also: str | os.PathLike) -> Iterator[None]:
    """Re-raise an error of writing ``path`` (disk full, permission denied, read-only file system)
    as a FileWriteError whose message names ``path``: "cannot write run/model.safetensors: No space
    left on device". Errors that name another file (an input read inside the block) pass as they are.

    A file that cannot be created where its folder is (ENOENT) is said of the folder: it "does not
    exist" (removed meanwhile), or it "takes no new file" (``/proc``, where ``open`` answers "No such
    file or directory" of a folder that is there); never of the temporary file, which the user did not name."""
    try:
        yield
    except FileWriteError:
        raise
    except OSError as error:
        name = error.filename
        temporary = isinstance(name, str) and name.endswith(".partial")  # .NAME.xxxx.partial, from mkstemp
        ours = name in {None, os.fspath(path), *map(os.fspath, also)} or (
            temporary and os.path.basename(name).startswith(hidden_prefix(Path(path).name))
        )
        if error.errno not in WRITE_ERRORS | {errno.ENOENT} or not ours:
            raise
        reason = error.strerror or os.strerror(error.errno)
        if error.errno == errno.ENOENT:
            folder = link_target(path).parent  # (a link's file is made beside its target)
            reason = f"the folder {folder} {why_not_a_folder(folder) or f'takes no new file ({reason})'}"
        raise FileWriteError(error.errno, f"cannot write {path}: {reason}") from error


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
