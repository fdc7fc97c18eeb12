"""Output files that survive being killed: a long run continues where it stopped.

``minibert embed --input BIG --output OUT --resume`` writes ``OUT`` through two files beside it:

* ``.OUT.partial``: the output so far, appended chunk by chunk;
* ``.OUT.resume.json``: the last *commit*: how many texts are done and how many bytes of the
  partial file hold them, with a fingerprint of the run (the input file's SHA-256, the model, every
  option that changes the numbers or the layout).

A chunk is committed in this order: its bytes are appended and fsync'ed, *then* the state file is
replaced atomically (write to a temporary file, fsync, rename). Whatever kills the process — Ctrl-C,
SIGKILL, the machine losing power — the state file on disk names only bytes that are on disk; bytes
written after the last commit are cut off when the run resumes. Starting again with the same
arguments skips the committed texts, re-embeds from there in the same chunks (so the numbers are
the ones an uninterrupted run gives), and at the end renames the partial file to ``OUT`` and
deletes the state. A run whose fingerprint differs (the input changed, another model, other
options) is refused rather than mixed into the old results.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from pathlib import Path

from ..formats.atomic_files import current_umask, write_atomically

STATE_VERSION = 1


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
    """An output file written in committed chunks: ``start()`` returns the texts an earlier run
    committed (0 if none); then ``write(data)`` and ``commit(texts_done)`` per chunk; ``finish()``
    renames the partial file to ``path`` and removes the state (``close()`` instead keeps both)."""

    def __init__(self, path: str | os.PathLike, fingerprint: dict):
        self.path = Path(path)
        self.partial = self.path.with_name(f".{self.path.name}.partial")
        self.state_path = self.path.with_name(f".{self.path.name}.resume.json")
        self.fingerprint = fingerprint
        self.handle = None

    def has_state(self) -> bool:
        return self.state_path.exists()

    def start(self) -> int:
        """Open the partial file where the last commit left it; return the texts already done."""
        # A run killed (SIGKILL) while it replaced the state file leaves that write's temporary
        # file behind (.OUT.resume.json.XXXX.partial); the state it was to become is not needed.
        for stale in self.state_path.parent.glob(f".{glob.escape(self.state_path.name)}.*.partial"):
            stale.unlink(missing_ok=True)
        state = self._read_state()
        if state is not None and self.partial.exists() and self.partial.stat().st_size >= state["bytes"]:
            self.handle = open(self.partial, "r+b")  # noqa: SIM115 — closed by finish() / close()
            self.handle.truncate(state["bytes"])  # drop what was written after the last commit
            self.handle.seek(state["bytes"])
            return state["texts"]
        if state is not None:
            raise ResumeError(f"{self.state_path} names {state['bytes']} bytes of {self.partial}, which is missing "
                              "or shorter: delete the state file to start over")  # fmt: skip
        descriptor = os.open(self.partial, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666 & ~current_umask())
        self.handle = os.fdopen(descriptor, "r+b")
        self.commit(0)
        return 0

    def write(self, data: bytes) -> None:
        self.handle.write(data)

    def commit(self, texts_done: int) -> None:
        """Make everything written so far durable, then record it."""
        self.handle.flush()
        os.fsync(self.handle.fileno())
        state = {"version": STATE_VERSION, "texts": texts_done, "bytes": self.handle.tell(), "run": self.fingerprint}
        write_atomically(self.state_path, (json.dumps(state, indent=1, sort_keys=True) + "\n").encode())

    def finish(self) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        if self.path.exists():  # an overwritten file keeps its mode
            os.chmod(self.partial, self.path.stat().st_mode & 0o7777)
        os.replace(self.partial, self.path)
        self.state_path.unlink()

    def close(self) -> None:
        """Stop without finishing: the partial file and the last commit stay for a later resume."""
        if self.handle is not None and not self.handle.closed:
            self.handle.close()

    def _read_state(self) -> dict | None:
        if not self.state_path.exists():
            return None
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
            texts, size, run = state["texts"], state["bytes"], state["run"]
            if state.get("version") != STATE_VERSION or not isinstance(texts, int) or not isinstance(size, int):
                raise ValueError("unknown layout")
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ResumeError(f"unreadable resume state {self.state_path} ({error}): delete it to start over") from None
        changed = [key for key in sorted(set(run) | set(self.fingerprint)) if run.get(key) != self.fingerprint.get(key)]
        if changed:
            raise ResumeError(
                f"{self.state_path} is from a run with another {', '.join(changed)}; refusing to mix results "
                f"(run again with the same arguments, or delete {self.state_path.name} and {self.partial.name} "
                "to start over)"
            )
        return state
