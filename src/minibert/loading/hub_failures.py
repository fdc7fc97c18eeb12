"""What a hub request that did not give the file means, said in one true line.

hub.py asks huggingface_hub for one file at a time. When the answer is not the file, three
different things may be true, and this module tells them apart:

* **the file is absent**: the hub answered 404 for it (``EntryNotFoundError``), or the cache
  records that it did: huggingface_hub writes ``.no_exist/COMMIT/FILE`` after a 404, and
  ``hf download`` keeps the repository's whole file list in ``trees/COMMIT.json``. An optional
  file (tokenizer_config.json, modules.json, a weights format further down the list) is then skipped;
* **nothing is known**: the hub failed (HTTP 500, a dropped connection, a timeout) or could not be
  asked (offline, unreachable), and the cache has no record of the file. The file may well exist:
  skipping it would load other weights, another casing or another pooling without a word, so it
  is an error naming the repository, the file and what happened (``HubDownloadError``, or
  ``ModelNotFoundError`` for a file not in the cache when the hub cannot be asked);
* **the repository cannot be read**: it does not exist, it is gated (its terms are accepted on its
  page, then a token of that account is passed), or the token given has no access to it.

>>> what_happened(TimeoutError("timed out"))
'the hub did not answer in time (timed out)'
"""

from __future__ import annotations

import http
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import HubDownloadError, ModelNotFoundError


def known_absent(repo_id: str, filename: str, revision: str | None, cache_dir: str | None) -> bool:
    """Whether the local cache records that the repository has no ``filename`` at ``revision``:
    huggingface_hub's ``.no_exist`` marker (left by a 404), or the file list of the snapshot that
    ``hf download`` fetched (``trees/COMMIT.json``), which does not name it. A file the cache
    merely lacks is not absent: nobody asked the hub about it."""
    from huggingface_hub import _CACHED_NO_EXIST, try_to_load_from_cache

    if try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision) is _CACHED_NO_EXIST:
        return True
    folder = repo_folder(repo_id, cache_dir)
    commit = cached_commit(folder, revision)
    if commit is None:
        return False
    try:
        listing = json.loads((folder / "trees" / f"{commit}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    files = listing.get("files") if isinstance(listing, dict) else None
    return isinstance(files, dict) and filename not in files


# The Hugging Face cache's layout, read here alone: a model repository's folder is named after it,
# each commit it holds is a folder of its files (links to blobs kept beside):
#
#     CACHE/models--ORG--NAME/snapshots/COMMIT/1_Pooling/config.json      (org/name, COMMIT, 1_Pooling/config.json)
REPO_PREFIX = "models--"


def repo_folder(repo_id: str, cache_dir: str | None) -> Path:
    """The repository's folder in the Hugging Face cache: ``HF_HUB_CACHE/models--org--name``."""
    from huggingface_hub import constants

    return Path(cache_dir or constants.HF_HUB_CACHE) / (REPO_PREFIX + repo_id.replace("/", "--"))


def repo_id_of(folder: Path) -> str | None:
    """The model repository a cache folder holds (``repo_folder`` backwards), or None for another folder.

    >>> repo_id_of(Path("/c/models--sentence-transformers--all-MiniLM-L6-v2"))
    'sentence-transformers/all-MiniLM-L6-v2'
    >>> repo_id_of(Path("/c/datasets--org--x")) is None
    True
    """
    name = folder.name
    return name.removeprefix(REPO_PREFIX).replace("--", "/") if name.startswith(REPO_PREFIX) else None


@dataclass(frozen=True)
class CachedFile:
    """Where a file of the Hugging Face cache lies: ``cache``/models--ORG--NAME/snapshots/``commit``/``filename``."""

    cache: Path
    repo_id: str
    commit: str
    filename: str  # inside the snapshot, with "/": "1_Pooling/config.json"


def blob_of(path: Path) -> str | None:
    """The name of the blob a cache's snapshot file links to (the cache names a weights blob by its
    SHA-256), or None for a file outside a snapshot or one that is not a link into ``blobs/``."""
    if cached_file(path) is None:
        return None
    target = Path(os.path.realpath(path))
    return target.name if target.parent.name == "blobs" else None


def cached_file(path: Path) -> CachedFile | None:
    """``path`` read as a file of a cache's snapshot (the path huggingface_hub gives for a hub file),
    or None for a file that is not in one. The snapshot is the outermost folder that lies in a
    repository's ``snapshots/`` folder, so a repository's own folder named "snapshots" is a file's path.

    >>> cached_file(Path("/c/models--org--x/snapshots/a0ce67/1_Pooling/config.json"))
    CachedFile(cache=PosixPath('/c'), repo_id='org/x', commit='a0ce67', filename='1_Pooling/config.json')
    >>> cached_file(Path("/c/models--org--x/snapshots/a0ce67/snapshots/notes.txt")).filename
    'snapshots/notes.txt'
    >>> cached_file(Path("/work/minilm/config.json")) is None
    True
    """
    for snapshot in reversed(path.parents[:-1]):  # outermost first (the root, "/", holds no repository)
        repo = snapshot.parent.parent
        if snapshot.parent.name == "snapshots" and repo_id_of(repo) is not None:
            return CachedFile(repo.parent, repo_id_of(repo), snapshot.name, path.relative_to(snapshot).as_posix())
    return None


def cached_commit(folder: Path, revision: str | None) -> str | None:
    """The commit the cache holds for ``revision`` (a branch or tag through ``refs/``, or a commit
    hash itself), or None when the cache holds no snapshot of it."""
    revision = revision or "main"
    try:
        commit = (folder / "refs" / revision).read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        commit = revision
    return commit if (folder / "snapshots" / commit).is_dir() else None


def cached_revisions(folder: Path) -> list[str]:
    """The branches and tags the cache holds a snapshot of (``['main']``), for messages."""
    refs = folder / "refs"
    if not refs.is_dir():
        return []
    names = sorted(path.relative_to(refs).as_posix() for path in refs.rglob("*") if path.is_file())
    return [name for name in names if cached_commit(folder, name) is not None]


def what_happened(error: BaseException) -> str:
    """One line of what a failed transfer met: the hub's HTTP status, a timeout, a refused or
    dropped connection. The HTTP library's classes are told by name (huggingface_hub has used
    requests, httpx and httpx2), so no version of it is imported here; requests' ConnectionError
    holds urllib3's error as its first argument, which tells a dropped connection from a refused one."""
    causes = [error, *(arg for arg in error.args if isinstance(arg, BaseException))]
    names = {cls.__name__ for cause in causes for cls in type(cause).__mro__}
    detail = _first_line(error)
    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(status, int):
        server = _first_line(getattr(error, "server_message", None) or "").rstrip(".")
        return f"the hub answered HTTP {status} ({_phrase(status)})" + (f": {server}" if server else "")
    if isinstance(error, TimeoutError) or names & {"TimeoutException", "Timeout"}:
        return f"the hub did not answer in time ({detail})"
    if "LocalProtocolError" in names:  # (h11's: a header it refuses to send; nothing reached the hub)
        return f"the request could not be sent ({detail})"
    if names & {"ConnectError", "ConnectionError"} and not names & {"ProtocolError", "ReadError"}:
        return f"could not connect to the hub ({detail})"
    if names & {"ProtocolError", "ReadError", "WriteError", "ChunkedEncodingError", "NetworkError"}:
        return f"the connection was closed before the transfer ended ({detail})"
    return detail or type(error).__name__


def is_a_transfer_failure(error: BaseException) -> bool:
    """Whether ``error`` is a network or HTTP failure: an OSError (huggingface_hub's HTTP errors
    are), or any error of the HTTP library huggingface_hub has imported (httpx2's
    RemoteProtocolError for a dropped connection is not an OSError)."""
    if isinstance(error, OSError):
        return True
    library = type(error).__module__.split(".")[0]
    return library in ("httpx", "httpx2", "httpcore", "requests", "urllib3") and library in sys.modules


def download_failed(repo_id: str, filename: str, error: BaseException, token_sent: bool) -> HubDownloadError:
    """'org/tiny: could not download model.safetensors: the hub answered HTTP 500 (...)': the file
    may exist, so it is not taken as absent; trying again later is the remedy (a file already in
    the cache is read from it when the hub fails, so the cache has no copy of this one), except
    where the hub refused the credentials (401, 403): then the token is."""
    status = getattr(getattr(error, "response", None), "status_code", None)
    if "DisabledRepoError" in {cls.__name__ for cls in type(error).__mro__}:  # (a 403 no token opens)
        return HubDownloadError(f"{repo_id}: could not download {filename}: {what_happened(error)}. The repository "
                                "is disabled on the hub: it cannot be downloaded, with a token or without")  # fmt: skip
    if status in (401, 403):
        remedy = ("the token given was refused (expired, revoked, or without access to this repository): pass a "
                  "valid one" if token_sent else "the hub asks for a token: pass one")  # fmt: skip
        remedy += " (token=..., HF_TOKEN, or `hf auth login`)"
    elif status == 429:
        remedy = _rate_limited_remedy(token_sent)
    else:
        remedy = "try again later"
    failed = HubDownloadError(
        f"{repo_id}: could not download {filename}: {what_happened(error)}. The repository may hold it, so "
        f"nothing was loaded in its place; {remedy}"
    )
    failed.refused = status in (401, 403)
    return failed


def no_file_in_time(repo_id: str, filename: str, endpoint: str, late: TimeoutError,
                    token_sent: bool) -> HubDownloadError:  # fmt: skip
    """The error for a small file that did not come within ``MINIBERT_HUB_TIMEOUT``, saying what the hub
    did meanwhile (hub_reach.py's ``NoFileInTime``: the statuses it answered, which huggingface_hub
    was retrying): it limited the rate of requests (HTTP 429, and the wait it asked for), it answered
    an error each time (HTTP 503), or it did not answer at all (then working offline is the remedy)."""
    from .hub_reach import TIMEOUT_VARIABLE, hub_timeout

    seconds = getattr(late, "seconds", None) or hub_timeout()
    statuses = getattr(late, "statuses", None) or []
    within = f"within {seconds:g} s (the limit is {TIMEOUT_VARIABLE})"
    if 429 in statuses:
        waiting = getattr(late, "waiting", None)
        asked = f", and huggingface_hub was waiting {waiting:g} s to ask again, as the hub asked" if waiting else ""
        return HubDownloadError(
            f"{repo_id}: could not download {filename} {within}: the hub answered HTTP 429 (Too Many Requests): it "
            f"limits how often a client may ask{asked}. The repository may hold it, so nothing was loaded in its "
            f"place; {_rate_limited_remedy(token_sent)}"
        )
    if statuses:
        status = statuses[-1]
        return HubDownloadError(
            f"{repo_id}: could not download {filename} {within}: the hub answered HTTP {status} ({_phrase(status)}), "
            "and huggingface_hub was still asking again. The repository may hold it, so nothing was loaded in its "
            "place; try again later"
        )
    return HubDownloadError(
        f"the hub ({endpoint}) did not answer within {seconds:g} s while resolving {repo_id}/{filename} "
        f"(the limit is {TIMEOUT_VARIABLE}); to work offline, set HF_HUB_OFFLINE=1 (models already in the "
        "cache load from it) or pass the path of a local directory"
    )


def _rate_limited_remedy(token_sent: bool) -> str:
    """What to do when the hub limits the rate of requests (HTTP 429): wait; and, for a client that
    sent no token, sign in, since the hub allows an account more requests than an anonymous client."""
    if token_sent:
        return "wait a while and try again"
    return ("wait a while and try again, or pass a token (token=..., HF_TOKEN, or `hf auth login`): the hub allows "
            "a signed-in account more requests than an anonymous client")  # fmt: skip


def refused_repository(repo_id: str, endpoint: str, error: BaseException, token_sent: bool) -> ModelNotFoundError:
    """The hub would not show the repository: gated (checked first: a ``GatedRepoError`` is a kind of
    ``RepositoryNotFoundError``), or not found, which for a private repository reads the same."""
    page = f"{endpoint.rstrip('/')}/{repo_id}"
    if type(error).__name__ == "GatedRepoError":
        has = "the token given has no access to it yet" if token_sent else "no token was given"
        refused = ModelNotFoundError(
            f"{repo_id} is a gated repository and {has}: accept its terms on {page} with your account, then "
            "pass a token of that account (token=..., HF_TOKEN, or `hf auth login`)"
        )
    elif token_sent:
        refused = ModelNotFoundError(f"{repo_id}: no such repository on the hub, or it is private and the token "
                                     "given has no access to it")  # fmt: skip
    else:
        refused = ModelNotFoundError(f"{repo_id}: no such repository on the hub (or it is private and no token was "
                                     "given: pass token=..., set HF_TOKEN, or run `hf auth login`)")  # fmt: skip
    refused.refused = True  # the hub answered: not a hub that cannot be reached (errors.py)
    return refused


def token_sent(token: str | bool | None) -> bool:
    """Whether huggingface_hub sends a token for ``token=``: the one given, else HF_TOKEN or the
    one ``hf auth login`` stored (``token=False`` sends none)."""
    if token is False:
        return False
    if isinstance(token, str):
        return bool(token)
    from huggingface_hub import get_token

    return get_token() is not None


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "an unknown status"


FIRST_LINE_LIMIT = 300  # characters of a library's or the hub's text kept in a message


def _first_line(error) -> str:
    """The first line of ``error``'s text, a token in it (``Bearer hf_...``, as an HTTP library quotes
    a header it refused) left out: a message is printed and logged, a token is a secret. A line longer
    than ``FIRST_LINE_LIMIT`` is cut at the last space before it, and ends with "…", so the sentence
    a message adds after it is not glued to half a word.

    >>> _first_line("Check your firewall and proxy settings. " * 9)[-32:]
    'y settings. Check your firewall…'
    """
    text = re.sub(r"(Bearer)\s*[^\s'\"]*", r"\1 <token>", str(error)).strip()
    line = text.splitlines()[0] if text else ""
    if len(line) <= FIRST_LINE_LIMIT:
        return line
    cut = line[: FIRST_LINE_LIMIT + 1]
    space = cut.rfind(" ")  # (a line without a space near the end, a long URL say, is cut where it is)
    cut = cut[:space] if space > FIRST_LINE_LIMIT // 2 else cut[:FIRST_LINE_LIMIT]
    return cut.rstrip(" ,;:.") + "…"


def not_in_cache(repo_id: str, filename: str, revision: str | None, cache_dir: str | None, how: str,
                 offline: list[str]) -> ModelNotFoundError:  # fmt: skip
    """The error for a file that is not in the cache when the hub cannot be asked (``how`` says
    why): the model is not cached at all, not at this revision, or cached without this file (then
    whether the repository has it is unknown). ``offline`` names the models that load offline."""
    folder = repo_folder(repo_id, cache_dir)
    at = f" at revision {revision!r}" if revision else ""
    fetch = f"`hf download {repo_id}" + (f" --revision {revision}" if revision else "") + _cache_flag(cache_dir) + "`"
    cache = "the local Hugging Face cache" + (f" {cache_dir}" if cache_dir else "")
    if cached_commit(folder, revision) is not None:
        return ModelNotFoundError(
            f"{repo_id}{at} is in {cache} without {filename}, and {how}: whether the repository "
            f"has {filename} is unknown (the cache records only the files the hub said it lacks). Download the "
            f"whole repository once with network access ({fetch}), or pass the path of a local directory"
        )
    held = cached_revisions(folder) if revision else []
    holds = f"; the cache holds it at {', '.join(held)} only" if held else ""
    return ModelNotFoundError(
        f"the model {repo_id}{at} is not in {cache} ({filename} is missing{holds}) and {how}. "
        f"{'' if held else _did_you_mean(repo_id, offline)}Download it once with network access (e.g. {fetch}), "
        f"or pass the path of a local directory that holds the checkpoint. "
        f"Models that load offline here: {', '.join(offline)}."
    )


def _did_you_mean(name: str, models: list[str]) -> str:
    """'Did you mean minibert/fortunes-mini? ' for a name close to one of ``models``, else ''."""
    import difflib

    same_tail = [model for model in models if model.rsplit("/", 1)[-1].lower() == name.rsplit("/", 1)[-1].lower()]
    near = same_tail or difflib.get_close_matches(name, models, n=1, cutoff=0.75)
    return f"Did you mean {near[0]}? " if near and near[0] != name else ""


def _cache_flag(cache_dir: str | None) -> str:
    """`` --cache-dir X`` for an ``hf download`` command that must fill ``cache_dir``, else ''."""
    return f" --cache-dir {shlex.quote(cache_dir)}" if cache_dir else ""


def damaged_copy_remedy(path: Path) -> str:
    """How to replace a damaged weights file, worded for where it is. A file of a hub cache's snapshot
    (``.../models--org--name/snapshots/COMMIT/model.safetensors``) is a link to a blob: deleting the
    link changes nothing (huggingface_hub links the same blob again, without a download), so the
    blob is named and downloaded again. Any other file: delete it and download it again."""
    place = cached_file(path)
    if place is None:
        return "delete it and download it again"
    from huggingface_hub import constants

    cache_dir = None if place.cache.resolve() == Path(constants.HF_HUB_CACHE).resolve() else os.fspath(place.cache)
    return (f"it is the Hugging Face cache's copy ({path.resolve()}): download it again with "
            f"from_pretrained(..., force_download=True), or with `hf download {place.repo_id} {place.filename} "
            f"--revision {place.commit} --force-download{_cache_flag(cache_dir)}`")  # fmt: skip
