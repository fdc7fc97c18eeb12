"""Output files that survive being killed: a long run continues where it stopped.

``minibert embed --input BIG --output OUT --resume`` writes ``OUT`` through two files beside it:

* ``.OUT.partial``: the output so far, appended chunk by chunk;
* ``.OUT.resume.json``: the last *commit*: how many texts are done and how many bytes of the
  partial file hold them, the output's name, and a fingerprint of the run (run_fingerprint.py: the
  input file's SHA-256, the model as loaded and a digest of its files, the dtype and thread count,
  every option, the GEMM library chosen and the device).

A chunk is committed in this order: its bytes are appended and fsync'ed, *then* the state file is
replaced atomically (write to a temporary file, fsync, rename). Whatever kills the process — Ctrl-C,
SIGKILL, the machine losing power — the state file on disk names only bytes that are on disk; bytes
written after the last commit are cut off when the run resumes. Starting again with the same
arguments skips the committed texts, re-embeds from there in the same chunks (so the numbers are
the ones an uninterrupted run gives), and at the end renames the partial file to ``OUT`` and
deletes the state (after marking it "finished", so that a kill between the two is finished by the
next start, not refused). A run whose fingerprint differs (the input changed, another model, other
options) is refused rather than mixed into the old results.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import hashlib
import json
import os
from pathlib import Path

from ..errors import FileWriteError
from ..formats.atomic_files import (
    NAME_MAX,
    TEMPORARY_ROOM,
    WRITE_ERRORS,
    current_umask,
    hidden_prefix,
    link_target,
    naming_the_file,
    refuse_what_is_not_a_file,
    why_not_a_folder,
    write_atomically,
)
from ..formats.json_files import parse_json

STATE_VERSION = 1


def _hidden(name: str, rest: str) -> str:
    """``.NAME.rest``: the name of one of the run's files beside the output ``name``.

    The state file is itself replaced through a temporary file (``.STATE.xxxxxxxx.partial``), so
    every hidden name leaves that much room under ``NAME_MAX``. A legal output name too long for
    that is cut (formats/atomic_files.py's ``hidden_prefix``), and a digest of the *whole* name goes
    after the cut: these names are fixed, not random as a temporary file's, and two outputs whose
    names differ only after the cut must not share one state, one lock and one partial file.

    >>> _hidden("out.npy", "partial")
    '.out.npy.partial'
    >>> a, b = (_hidden("v" * 243 + tail, "resume.json") for tail in ("_first.npy", "_other.npy"))
    >>> a != b, len(a) + TEMPORARY_ROOM + 2 <= NAME_MAX
    (True, True)
    """
    room = len(rest) + TEMPORARY_ROOM + 2  # the state's temporary file: ".STATE." + "xxxxxxxx.partial"
    whole = f".{name}.{rest}"
    if len(os.fsencode(whole)) + TEMPORARY_ROOM + 2 <= NAME_MAX:
        return whole
    tag = "~" + hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    return hidden_prefix(name, room + len(tag))[:-1] + tag + "." + rest


NOT_RECORDED = "(not recorded)"  # a part a state from an older minibert did not record


def fingerprint_changes(old: dict, new: dict) -> list[str]:
    """Each part of a run's fingerprint that differs, as "PART: OLD → NEW"; the options (one object)
    by each option that differs, so that a refusal names the flag that changed and both its values.

    >>> fingerprint_changes({"torch version": "2.4.0", "options": {"normalize": None, "batch_size": 32}},
    ...                     {"torch version": "2.4.0", "options": {"normalize": True, "batch_size": 32}})
    ['options: normalize null → true']
    >>> fingerprint_changes({"dtype": "float32"}, {"dtype": "float32", "minibert version": "0.2.0"})
    ['minibert version: (not recorded) → 0.2.0']
    """
    changes = []
    for part in sorted(set(old) | set(new)):
        before, after = old.get(part, NOT_RECORDED), new.get(part, NOT_RECORDED)
        if isinstance(before, str) and isinstance(after, dict):  # options as one JSON string (older states)
            with contextlib.suppress(ValueError):
                before = parse_json(before)
        if before == after:
            continue
        if isinstance(before, dict) and isinstance(after, dict):
            pairs = {name: (before.get(name, NOT_RECORDED), after.get(name, NOT_RECORDED)) for name in before | after}
            differ = [f"{name} {_shown(a)} → {_shown(b)}" for name, (a, b) in sorted(pairs.items()) if a != b]
            changes.append(f"{part}: {', '.join(differ)}")
        else:
            changes.append(f"{part}: {_shown(before, plain=True)} → {_shown(after, plain=True)}")
    return changes


def _shown(value, plain: bool = False) -> str:
    """A fingerprint value in a message: an option as JSON (null, true, "cls"); a part's text as it is."""
    if value == NOT_RECORDED or (plain and isinstance(value, str)):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class ResumeError(Exception):
    """The saved state belongs to another run (or is unreadable)."""


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks (memory does not grow with the file)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ResumableOutput:
    """An output file written in committed chunks: ``start(header)`` returns the texts an earlier
    run committed (0 if none: then ``header`` is written and committed); then ``write(data)`` and
    ``commit(texts_done)`` per chunk; ``finish()`` renames the partial file to ``path`` and removes
    the state (``close()`` instead keeps both).

    ``row_size``: bytes per text when every row has the same size (``.npy``); ``lines=True``: one
    line per text (``.jsonl``); ``total``: the texts of the whole run. A state file is checked against
    them, and against the partial file itself (its size, its header), before anything is appended.

    One run owns an output: ``start`` takes an exclusive lock (``flock`` on ``.OUT.resume.lock``,
    released by the kernel however the process ends, so a killed run leaves no stale lock) and a
    second run is refused at once. The partial file is never written through a symlink (``O_NOFOLLOW``);
    an output ``path`` that is a link is resolved first, so the output lands where the link points.
    """

    def __init__(self, path: str | os.PathLike, fingerprint: dict, *, row_size: int | None = None,
                 lines: bool = False, total: int | None = None):  # fmt: skip
        # An output that is a symbolic link is written where it points (as formats/atomic_files.py
        # writes): the partial file, the state and the lock live beside the link's target.
        self.given, self.path = path, link_target(path)
        self.partial, self.state_path, self.lock_path = (
            self.path.with_name(_hidden(self.path.name, rest)) for rest in ("partial", "resume.json", "resume.lock")
        )
        self.fingerprint, self.row_size, self.lines, self.total = fingerprint, row_size, lines, total
        self.handle = None
        self.lock = None
        self.committed = None  # the texts the state on disk names as done (None: no state of this run yet)
        self.finished = False  # the output is complete (finish(), or a run killed as it finished)

    def has_state(self) -> bool:
        return self.state_path.exists()

    def start(self, header: bytes = b"") -> int:
        """Open the partial file where the last commit left it; return the texts already done.
        A refusal (a ResumeError) leaves nothing held: no lock, no open file. A run that was killed
        as it finished (after its output was complete) is finished here: it returns the total, with
        ``finished`` True, and ``write``, ``commit`` and ``finish`` then have nothing to do."""
        with self._naming_the_output():
            self._take_lock()
            try:
                return self._start(header)
            except BaseException:
                self.close()
                raise

    def _start(self, header: bytes) -> int:
        # A run killed (SIGKILL) while it replaced the state file leaves that write's temporary
        # file behind (.OUT.resume.json.XXXX.partial); the state it was to become is not needed.
        for stale in self.state_path.parent.glob(f"{glob.escape(hidden_prefix(self.state_path.name))}*.partial"):
            stale.unlink(missing_ok=True)
        state = self._read_state(header)
        if state is not None and state.get("finished"):
            return self._finish_the_finished(state)
        if state is not None:
            self.handle = self._open_partial(os.O_RDWR)
            self._check_partial(state, header)
            self.handle.truncate(state["bytes"])  # drop what was written after the last commit
            self.handle.seek(state["bytes"])
            self.committed = state["texts"]
            return state["texts"]
        self.handle = self._open_partial(os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        self.handle.write(header)
        self.commit(0)
        return 0

    def write(self, data: bytes) -> None:
        if self.finished:  # (every text is written: start() found the run finished, or finish() ran)
            return
        with self._naming_the_output():
            self.handle.write(data)

    def commit(self, texts_done: int, *, finished: bool = False) -> None:
        """Make everything written so far durable, then record it (a finished run's state is gone,
        and is not written again)."""
        if self.finished:
            return
        with self._naming_the_output():
            self.handle.flush()
            os.fsync(self.handle.fileno())
            state = {"version": STATE_VERSION, "texts": texts_done, "bytes": self.handle.tell(),
                     "output": self.path.name, "run": self.fingerprint}  # fmt: skip
            if finished:
                state["finished"] = True
            write_atomically(self.state_path, (json.dumps(state, indent=1, sort_keys=True) + "\n").encode())
        self.committed = texts_done

    def finish(self) -> None:
        """The partial file becomes ``path``. The state says so first ("finished"): a run killed
        between the rename and the state's removal is then finished by the next start, not refused."""
        if self.finished:
            return
        with self._naming_the_output():
            self.commit(self.committed or 0, finished=True)
            self.handle.close()
            self._rename_and_clean()

    def _rename_and_clean(self) -> None:
        refuse_what_is_not_a_file(self.path)  # made a FIFO or a device since the start: never replaced
        if self.partial.exists():
            if self.path.exists():  # an overwritten file keeps its mode
                os.chmod(self.partial, self.path.stat().st_mode & 0o7777)
            os.replace(self.partial, self.path)
        self.state_path.unlink(missing_ok=True)
        self.lock_path.unlink(missing_ok=True)  # (the lock itself is released by close())
        self.finished = True

    def _finish_the_finished(self, state: dict) -> int:
        """A state that says "finished": the run was killed as it renamed its output. The rename is
        done if it was not; then the state goes, and the run is complete."""
        if not self.partial.exists() and not self.path.exists():
            raise ResumeError(f"{self.state_path} says the run finished, but neither {self.path} nor "
                              f"{self.partial.name} is there: delete the state file to start over")  # fmt: skip
        self._rename_and_clean()
        self.committed = state["texts"]
        return state["texts"]

    def finished_leftovers(self) -> bool:
        """Whether the state beside the output is a finished run's (killed after its output was
        complete): nothing of it is unfinished, and a plain run may write over it."""
        try:
            return parse_json(self.state_path.read_bytes()).get("finished") is True
        except (OSError, ValueError, AttributeError):
            return False

    def remove_leftovers(self) -> None:
        """Delete a finished run's state, partial file and lock (``finished_leftovers``)."""
        with self._naming_the_output():
            for path in (self.state_path, self.partial, self.lock_path):
                path.unlink(missing_ok=True)

    def remove_unheld_lock(self) -> None:
        """Delete a lock file that no run holds, beside an output without a state: a killed run's
        lock whose state and partial file were deleted by hand. A lock a run holds is left alone."""
        if not self.lock_path.exists() or self.has_state():
            return
        try:
            self._take_lock()
        except (ResumeError, OSError):  # held by a running --resume (or the folder is read-only): kept
            return
        try:
            if not self.has_state():  # (a run that took the lock first has written its state by now)
                self.lock_path.unlink(missing_ok=True)
        finally:
            self.close()

    @contextlib.contextmanager
    def _naming_the_output(self):
        """An error of writing any of the run's files (a full disk, a read-only folder) is said of the
        output the user named, "cannot write v.npy: No space left on device" (formats/atomic_files.py's
        ``naming_the_file``), never of the hidden files, nor as a bare "[Errno 28]"."""
        try:
            yield
        except OSError as error:
            cause = error.__cause__ if isinstance(error, FileWriteError) else error  # the state's own write
            if not isinstance(cause, OSError) or cause.errno not in WRITE_ERRORS or not self._ours(cause.filename):
                raise
            with naming_the_file(self.path):
                raise OSError(cause.errno, cause.strerror) from error  # (no file name: said of the output)

    def _ours(self, name) -> bool:
        """Whether an error's file name is one of the run's files: the output, the hidden three, the
        state's temporary file; or none (a full disk names none)."""
        if name is None:
            return True
        base = os.path.basename(os.fsdecode(name))
        hidden = {self.path.name, self.partial.name, self.state_path.name, self.lock_path.name}
        return base in hidden or base.startswith(hidden_prefix(self.state_path.name))

    def close(self) -> None:
        """Stop without finishing: the partial file and the last commit stay for a later resume."""
        if self.handle is not None and not self.handle.closed:
            with contextlib.suppress(OSError):  # (bytes never committed, which a full disk refused: cut at resume)
                self.handle.close()
        if self.lock is not None:
            os.close(self.lock)  # releases the flock
            self.lock = None

    def _take_lock(self) -> None:
        try:
            self.lock = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666 & ~current_umask())
        except OSError as error:
            if error.errno in WRITE_ERRORS:  # a full disk, a read-only folder: said of the output
                raise
            folder = self.lock_path.parent  # (the output's: a link's target folder, which may be missing)
            if error.errno == errno.ENOENT and why_not_a_folder(folder):  # said of the output, not a hidden file
                raise FileWriteError(error.errno, f"cannot write {os.fspath(self.given)}: the folder {folder} "
                                                  f"{why_not_a_folder(folder)}") from None  # fmt: skip
            raise ResumeError(f"cannot create the lock file {self.lock_path}: {error.strerror}") from None
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.lock)
            self.lock = None
            raise ResumeError(f"another minibert run is writing {self.path} (it holds {self.lock_path.name}); "
                              "wait for it to finish, or stop it") from None  # fmt: skip

    def _open_partial(self, flags: int):
        """The partial file, never through a symlink (O_NOFOLLOW: a link there is refused)."""
        try:
            descriptor = os.open(self.partial, flags | os.O_NOFOLLOW, 0o666 & ~current_umask())
        except FileNotFoundError:
            raise ResumeError(f"{self.state_path} names {self.partial}, which is missing: delete the state file "
                              "to start over") from None  # fmt: skip
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise ResumeError(f"{self.partial} is a symbolic link; minibert does not write through a link "
                                  "it did not create: remove it") from None  # fmt: skip
            raise
        return os.fdopen(descriptor, "r+b")

    def _check_partial(self, state: dict, header: bytes) -> None:
        """The partial file holds what the state says: at least its bytes, the expected header, and
        (for .jsonl) one line per committed text."""
        size = os.fstat(self.handle.fileno()).st_size
        if size < state["bytes"]:
            raise ResumeError(f"{self.state_path} names {state['bytes']} bytes of {self.partial}, which has "
                              f"{size}: delete both to start over")  # fmt: skip
        if self.handle.read(len(header)) != header:
            raise ResumeError(f"{self.partial} does not start with this run's header: delete it and "
                              f"{self.state_path.name} to start over")  # fmt: skip
        if self.lines:  # .jsonl: one line per committed text, counted in 1 MiB blocks
            lines, remaining = 0, state["bytes"] - len(header)
            while remaining > 0 and (block := self.handle.read(min(remaining, 1 << 20))):
                lines, remaining = lines + block.count(b"\n"), remaining - len(block)
            if lines != state["texts"]:
                raise ResumeError(f"{self.partial} holds {lines} lines where {self.state_path.name} says "
                                  f"{state['texts']} texts are done: delete both to start over")  # fmt: skip

    def _read_state(self, header: bytes) -> dict | None:
        if not self.state_path.exists():
            return None
        try:
            state = parse_json(self.state_path.read_bytes())
            if not isinstance(state, dict):
                raise ValueError("not a JSON object")
            texts, size, run = state["texts"], state["bytes"], state["run"]
            if type(state.get("version")) is not int or state["version"] != STATE_VERSION:  # (true == 1 in Python)
                raise ValueError(f"version {state.get('version')!r}, not {STATE_VERSION}")
            for name, value in (("texts", texts), ("bytes", size)):
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise ValueError(f"{name} must be a count (an integer >= 0), got {value!r}")
            if not isinstance(run, dict):
                raise ValueError(f"run must be an object, got {type(run).__name__}")
            if not isinstance(state.get("finished", False), bool):
                raise ValueError(f"finished must be true or false, got {state['finished']!r}")
            if self.total is not None and texts > self.total:
                raise ValueError(f"texts {texts} is more than the {self.total} of the input")
            if size < len(header):
                raise ValueError(f"bytes {size} is less than the {len(header)}-byte header")
            if self.row_size is not None and size != len(header) + texts * self.row_size:
                raise ValueError(f"bytes {size} is not the header + {texts} rows of {self.row_size} bytes")
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ResumeError(f"unreadable resume state {self.state_path} ({error}): delete it and "
                              f"{self.partial.name} to start over") from None  # fmt: skip
        changed = fingerprint_changes(run, self.fingerprint)
        if changed:
            raise ResumeError(
                f"{self.state_path} is from a run with other settings ({'; '.join(changed)}); refusing to mix "
                f"results (run again with the same arguments, or delete {self.state_path.name} and "
                f"{self.partial.name} to start over)"
            )
        if state.get("output") != self.path.name:
            raise ResumeError(f"{self.state_path} is the state of another output ({state.get('output')!r}, not "
                              f"{self.path.name!r}): delete it and {self.partial.name} to start over")  # fmt: skip
        return state
