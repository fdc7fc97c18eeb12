"""One load, one commit: every hub file that one ``from_pretrained`` reads comes from the same commit.

A branch (``main``) moves when someone pushes. Asked file by file, a load could take config.json
from one commit and model.safetensors from the next: a re-pushed classifier whose labels changed
order would then read the old ``id2label`` against the new rows, and answer the wrong label with
no error. So, as transformers 5 resolves the revision once per ``from_pretrained``, the first hub
file of a load fixes the commit (the snapshot folder it lies in: ``.../snapshots/COMMIT/config.json``,
or the commit the hub's 404 names), and every later file of that repository asks for that commit:

    >>> with one_load():                                                  # doctest: +SKIP
    ...     config = resolve_file("org/name", "config.json")             # main, now at commit A
    ...     weights = resolve_file("org/name", "model.safetensors")      # A, wherever main is by then

The commit is kept for the load only (a ``from_pretrained``, an ``Embedder``, a ``CrossEncoder``, one
command): a later load asks for the branch again and sees the new commit. Loads nest: the outermost
fixes the commit, so the tokenizer, the model and the recipe an Embedder reads are one commit.
When the hub fails on a file and huggingface_hub gives the cache's copy of an older commit
instead, that older commit is the one fixed: every file then comes from it, or the load fails.

A load may also ask for a check to run just before its first file is looked for
(``before_the_first_file``): the Auto classes check a checkpoint's model_type there, once the
class has checked its keywords, so a misspelt keyword is refused before any request.
"""

from __future__ import annotations

import contextlib
import contextvars
from pathlib import Path

from .hub_failures import cached_file

# (repository, revision asked, cache folder) → the commit the load's first file of it came from
_COMMITS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("minibert_load_commits", default=None)
# the check that waits for the load's first file (before_the_first_file), in a list emptied when it runs
_BEFORE_FIRST_FILE: contextvars.ContextVar[list | None] = contextvars.ContextVar("minibert_first_file", default=None)


@contextlib.contextmanager
def one_load():
    """Within it, each hub repository's files come from one commit (an outer ``one_load``'s, if any)."""
    if _COMMITS.get() is not None:
        yield
        return
    reset = _COMMITS.set({})
    try:
        yield
    finally:
        _COMMITS.reset(reset)


@contextlib.contextmanager
def before_the_first_file(check):
    """Within it, ``check()`` runs once, just before the first file is looked for (hub.py's
    ``resolve_file`` calls ``first_file``), whether in a folder, the package or the hub; a load that
    found none that way runs it at its end. The Auto classes (auto.py) read config.json's model_type
    there: after the class they stand for has checked its keywords, so a misspelt one costs no request."""
    pending = [check]
    reset = _BEFORE_FIRST_FILE.set(pending)
    try:
        yield
        first_file()
    finally:
        _BEFORE_FIRST_FILE.reset(reset)


def first_file() -> None:
    """Run the check waiting for the first file (``before_the_first_file``), if one is waiting."""
    pending = _BEFORE_FIRST_FILE.get()
    if pending:
        pending.pop()()  # (taken out first: the check reads a file too)


def fixed_commit(repo_id: str, revision: str | None, cache_dir: str | None) -> str | None:
    """The commit this load fixed for ``repo_id`` at ``revision``, or None (the first file, or no load)."""
    commits = _COMMITS.get()
    return None if commits is None else commits.get((repo_id, revision or "main", cache_dir))


def fix_commit(repo_id: str, revision: str | None, cache_dir: str | None, commit: str | None) -> None:
    """Fix ``commit`` for the rest of the load, unless one is fixed already (or no load is open)."""
    commits = _COMMITS.get()
    if commits is not None and commit:
        commits.setdefault((repo_id, revision or "main", cache_dir), commit)


def snapshot_commit(path: Path) -> str | None:
    """The commit of the cache's snapshot folder that holds the file at ``path``
    (``.../snapshots/COMMIT/1_Pooling/config.json``: hub_failures.py ``cached_file``), or None for a
    file not in a hub cache."""
    place = cached_file(path)
    return place.commit if place is not None else None


def answered_commit(error: BaseException) -> str | None:
    """The commit the hub names in its answer to a request that did not give the file (a 404 carries
    ``X-Repo-Commit``), or None."""
    headers = getattr(getattr(error, "response", None), "headers", None)
    commit = headers.get("X-Repo-Commit") if headers is not None else None
    return commit if isinstance(commit, str) and commit else None
