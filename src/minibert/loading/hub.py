"""Finding a checkpoint's files: a local directory, or a repository on the Hugging Face hub.

``name_or_path`` is what users pass to every ``from_pretrained``:

* a directory on disk (``./my-bert``) — files are read from it, nothing touches the network;
* ``minibert/fortunes-mini``, the model shipped inside the package (a toy English BERT with its
  pre-training heads: docs/fortunes-mini.md) — its files are read from ``minibert/bundled/``, with
  no network and no cache; a local directory of that relative path still wins, as directories always do;
* a hub repository id (``google-bert/bert-base-uncased``) — each file is fetched with
  ``huggingface_hub.hf_hub_download`` into the standard Hugging Face cache (downloads are resumable
  and atomic; a second call reads the cache). With ``HF_HUB_OFFLINE=1`` only the cache is used.

``HF_HUB_OFFLINE`` and ``HF_ENDPOINT`` are read at each call, not once at import time, so a program
(or a test) may set them after importing minibert.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import functools
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from ..errors import CheckpointError, HubDownloadError, ModelNotFoundError
from .hub_failures import (
    download_failed,
    is_a_transfer_failure,
    known_absent,
    not_in_cache,
    refused_repository,
    token_sent,
)
from .local_files import a_checkpoint_prefix, missing_in_a_local_folder, not_a_file

# The checkpoint the commands and tasks use when none is named: Google's original BERT-Base, uncased.
DEFAULT_MODEL = "google-bert/bert-base-uncased"

# The models shipped inside the package, by name → their folder in minibert/bundled/.
BUNDLED_FOLDER = Path(__file__).resolve().parent.parent / "bundled"
BUNDLED_MODELS = {"minibert/fortunes-mini": "fortunes-mini"}
# The bundled English BERT with MLM and NSP heads: what fill-mask, next-sentence and explore use
# when the default cannot be reached.
BUNDLED_WITH_HEADS = "minibert/fortunes-mini"

_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class HubOptions:
    """transformers' download keywords, for the files a ``from_pretrained`` call reads from the hub:
    ``cache_dir`` (instead of the standard cache), ``local_files_only`` (the cache only, as
    ``HF_HUB_OFFLINE=1`` for one call) and ``token`` (a private or gated repository)."""

    cache_dir: str | None = None
    local_files_only: bool = False
    token: str | bool | None = None


_HUB_OPTIONS: contextvars.ContextVar[HubOptions | None] = contextvars.ContextVar("minibert_hub_options", default=None)


@contextlib.contextmanager
def hub_options(options: HubOptions):
    """Within it, every hub download of this thread uses ``options`` (a local directory ignores them)."""
    reset = _HUB_OPTIONS.set(options)
    try:
        yield
    finally:
        _HUB_OPTIONS.reset(reset)


def is_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` asks to use the local cache only."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def _trainer_weights(missing: Path) -> str:
    """What to add when the missing config.json's folder is transformers' ``Trainer.save_model``'s: for a
    model that is not transformers' own class it writes the state dict alone (and training_args.bin)."""
    if missing.name != "config.json" or not (missing.parent / "training_args.bin").is_file():
        return ""
    return ("; it looks written by transformers' Trainer.save_model, which saves only the weights of a model "
            "that is not transformers' own: save with trainer.model.save_pretrained(folder) (docs/migrating.md)")


def resolve_file(
    name_or_path: str | os.PathLike,
    filename: str,
    *,
    revision: str | None = None,
    required: bool = True,
) -> Path | None:
    """Return the local path of ``filename`` in a model directory or hub repository.

    Returns ``None`` when the file is known not to exist and ``required`` is False: a local folder
    without it, the hub's 404, or the cache's record of one (hub_failures.py). Raises
    ``ModelNotFoundError`` (naming the repository, the file and what to do) otherwise: a file the
    hub failed to give (``HubDownloadError``), or that the cache lacks while the hub cannot be
    asked, is never taken as absent.

    >>> resolve_file("path/to/minilm", "config.json")          # doctest: +SKIP
    PosixPath('path/to/minilm/config.json')
    """
    name = os.fspath(name_or_path)
    name = os.fspath(bundled_path(name, revision) or name)
    if os.path.isdir(name):
        path = Path(name) / filename
        if path.is_file():
            return path
        kind = not_a_file(path)
        if kind:  # there, but a directory, a FIFO, a device: never taken as absent
            raise CheckpointError(f"{filename} in the directory {name} is {kind}, not a regular file")
        if required:
            raise ModelNotFoundError(f"{filename} not found in the directory {name}{_trainer_weights(path)}")
        return None
    if os.path.isfile(name):  # a common first mistake: the weights file itself (.../model.safetensors)
        folder, given = os.path.dirname(name) or ".", os.path.basename(name)
        holds = given if given == filename else f"{given} and {filename}"
        raise ModelNotFoundError(
            f"{name!r} is a file, but a model is loaded from its folder; pass the folder that holds {holds}: {folder!r}"
        )
    prefix = a_checkpoint_prefix(name)
    if prefix:  # DIR/bert_model.ckpt, as Google's README passes it
        raise ModelNotFoundError(prefix)
    if looks_like_a_path(name):
        raise ModelNotFoundError(
            f"{name!r} is not an existing directory (and is not a hub repository id like "
            f"'google-bert/bert-base-uncased')"
        )
    missing_in_a_folder = missing_in_a_local_folder(name)
    if missing_in_a_folder:
        raise ModelNotFoundError(missing_in_a_folder)
    return _download(name, filename, revision=revision, required=required)


def bundled_path(name: str, revision: str | None = None) -> Path | None:
    """The package's folder that a bundled model's name stands for, or None for any other name.

    A local directory of the same relative path wins (``./minibert/fortunes-mini`` on disk is read
    as a directory, as every directory is); the hub is never asked for a bundled name.

    >>> bundled_path("minibert/fortunes-mini").name
    'fortunes-mini'
    """
    if name not in BUNDLED_MODELS or os.path.isdir(name):
        return None
    if revision is not None:
        raise ModelNotFoundError(f"{name} is bundled with minibert: it has no revisions (got revision={revision!r})")
    return BUNDLED_FOLDER / BUNDLED_MODELS[name]


def looks_like_a_path(name: str) -> bool:
    """True when ``name`` has a path's form rather than a hub id's ("owner/name" or "name"): empty,
    absolute, ./x, ../x, ~/x, a/b/c, or a\\b where the separator is a backslash (Windows). The one
    rule for "meant as a local directory"; a missing one is then reported as missing, not asked of the hub.

    >>> [looks_like_a_path(name) for name in ("./my-bert", "a/b/c", "google-bert/bert-base-uncased")]
    [True, True, False]
    """
    return (not name or os.path.isabs(name) or name.startswith((".", "/", "~")) or name.count("/") > 1
            or os.sep != "/" and os.sep in name)  # fmt: skip


def _endpoint() -> str:
    """The hub's address: ``$HF_ENDPOINT`` as it is now (read at each call, as the module says), else
    huggingface_hub's."""
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


def _download(repo_id: str, filename: str, *, revision: str | None, required: bool) -> Path | None:
    """The cached path of one hub file, fetched if need be; None for an optional file the hub (or the
    cache's record of it) says the repository lacks. Any other failure is an error that says what
    happened (hub_failures.py): a file that could not be had is never taken as absent."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub import utils as hub_errors  # where every release since 0.23 keeps them

    endpoint = _endpoint()
    options = _HUB_OPTIONS.get() or HubOptions()
    offline = is_offline() or options.local_files_only
    unreachable = None if offline else _unreachable(endpoint)  # skip huggingface_hub's retries of a dead end
    local_only = offline or unreachable is not None
    seconds = hub_timeout()
    try:
        download = functools.partial(
            hf_hub_download,
            repo_id,
            filename,
            revision=revision,
            local_files_only=local_only,
            cache_dir=options.cache_dir,
            token=options.token,
            endpoint=endpoint,
            library_name="minibert",
            etag_timeout=min(10.0, seconds),
        )
        # The deadline bounds small files (config.json always comes first: a silent hub is noticed
        # there); a weights file's download may rightly take minutes and is not cut off.
        bounded = not local_only and not filename.endswith(WEIGHTS_SUFFIXES)
        path = _within(seconds, download) if bounded else download()
        return Path(path)
    except TimeoutError:
        raise HubDownloadError(
            f"the hub ({endpoint}) did not answer within {seconds:g} s while resolving {repo_id}/{filename} "
            f"(the limit is {TIMEOUT_VARIABLE}); to work offline, set HF_HUB_OFFLINE=1 (models already in the "
            "cache load from it) or pass the path of a local directory"
        ) from None
    except hub_errors.HFValidationError as error:
        raise ModelNotFoundError(
            f"{repo_id!r} is neither an existing directory nor a valid hub repository id: {error}"
        ) from None
    except hub_errors.LocalEntryNotFoundError as error:  # not in the cache; the hub not asked, or failing
        failure = None if local_only else error.__cause__  # (HTTP 500, a timeout ...)
        problem = _as_the_cache_says(repo_id, filename, revision, required, failure, endpoint, unreachable, options)
        if problem is None:
            return None
        raise problem from None
    except hub_errors.RevisionNotFoundError:
        raise ModelNotFoundError(f"{repo_id}: revision {revision!r} does not exist on the hub") from None
    except hub_errors.RepositoryNotFoundError as error:  # GatedRepoError is one: told apart there
        raise refused_repository(repo_id, endpoint, error, token_sent(options.token)) from None
    except hub_errors.EntryNotFoundError:  # (from 1.0 on, the hub's 404 is its subclass RemoteEntryNotFoundError)
        if not required:
            return None
        raise ModelNotFoundError(f"{repo_id}: the repository has no file {filename}") from None
    except Exception as error:
        if not is_a_transfer_failure(error):  # a network failure, as an HTTP or OS error (or the HTTP library's)
            raise
        raise download_failed(repo_id, filename, error, token_sent(options.token)) from None


def has_file(name_or_path: str | os.PathLike, filename: str, *, revision: str | None = None) -> bool:
    """Whether a directory or hub repository is known to hold ``filename``, asked without fetching it
    (the hub answers a HEAD request; offline, the cache says): for messages about a file minibert
    does not read, such as ``tf_model.h5``. False where it cannot be known."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url, try_to_load_from_cache

    name = os.fspath(name_or_path)
    if os.path.isdir(name):
        return (Path(name) / filename).is_file()
    options = _HUB_OPTIONS.get() or HubOptions()
    if looks_like_a_path(name) or name in BUNDLED_MODELS:
        return False
    if isinstance(try_to_load_from_cache(name, filename, cache_dir=options.cache_dir, revision=revision), str):
        return True
    if is_offline() or options.local_files_only:
        return False
    endpoint = _endpoint()
    try:
        url = hf_hub_url(name, filename, revision=revision, endpoint=endpoint)
        # (no endpoint= here: before 1.0 it was not taken, and it only names the Xet server, which a HEAD needs not)
        get_hf_file_metadata(url, token=options.token, timeout=min(10.0, hub_timeout()))
    except Exception:  # noqa: BLE001  (absent, or not known: either way not said to be there)
        return False
    return True


def _as_the_cache_says(repo_id: str, filename: str, revision: str | None, required: bool,
                       failure: Exception | None, endpoint: str, unreachable: str | None,
                       options: HubOptions) -> ModelNotFoundError | None:  # fmt: skip
    """None for an optional file the cache records as absent (the hub's 404, or `hf download`'s file
    list); otherwise the error to raise: the hub's ``failure``, or a file the cache lacks while the
    hub cannot be asked, whose existence is unknown."""
    if known_absent(repo_id, filename, revision, options.cache_dir):
        return None if not required else ModelNotFoundError(
            f"{repo_id}: the repository has no file {filename} (the local cache records the hub's answer)")  # fmt: skip
    if failure is not None:
        return download_failed(repo_id, filename, failure, token_sent(options.token))
    how = _why_only_the_cache(endpoint, unreachable, options.local_files_only)
    return not_in_cache(repo_id, filename, revision, options.cache_dir, how, offline_models())


def _why_only_the_cache(endpoint: str, unreachable: str | None, local_files_only: bool) -> str:
    """Why only the local cache was read: the words that end "... is not in the cache, and ___"."""
    if local_files_only:
        return "local_files_only=True was passed, so only the local cache is used"
    if unreachable:
        return f"the hub ({endpoint}) cannot be reached: {unreachable}"
    return "HF_HUB_OFFLINE=1 is set, so only the local cache is used"


TIMEOUT_VARIABLE = "MINIBERT_HUB_TIMEOUT"
WEIGHTS_SUFFIXES = (".safetensors", ".bin")
DEFAULT_TIMEOUT = 30.0


def hub_timeout() -> float:
    """Seconds one file's resolution on the hub may take, at most (``MINIBERT_HUB_TIMEOUT``, default 30).

    huggingface_hub retries a host that accepts connections but never answers for minutes; minibert
    gives up after this long, with one error saying how to work offline."""
    value = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not value:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 86_400:
        raise ValueError(f"{TIMEOUT_VARIABLE}={value[:40]!r}: must be a number of seconds from 0 (excluded) to 86400")
    return seconds


def _within(seconds: float, function):
    """``function()``, or TimeoutError after ``seconds``. It runs in a daemon thread, which is left
    behind on a timeout (a download that finishes later only fills the cache, atomically)."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = function()
        except BaseException as error:  # noqa: BLE001  (re-raised in the caller's thread)
            outcome["error"] = error

    thread = threading.Thread(target=run, name="minibert-hub", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


PROBE_SECONDS = 3.0
PROBE_KEPT_SECONDS = 60.0  # a verdict is reused this long: the network may come back (or go) in a long session
_probed: dict[str, tuple[float, str | None]] = {}
_now = time.monotonic  # (a test moves this clock)


def _unreachable(endpoint: str) -> str | None:
    """``_probe(endpoint)``, remembered for ``PROBE_KEPT_SECONDS`` (one probe for the several files
    of one load)."""
    now = _now()
    if endpoint not in _probed or now - _probed[endpoint][0] > PROBE_KEPT_SECONDS:
        _probed[endpoint] = (now, _probe(endpoint))
    return _probed[endpoint][1]


def _probe(endpoint: str) -> str | None:
    """Why the hub cannot be asked at all, found in milliseconds, or None (ask it).

    huggingface_hub retries a failed connection for about 25 s (and minibert's deadline, 30 s by
    default, would end it with "did not answer", which is not what happened). Two cases are known at
    once: a host name that does not resolve (no DNS, no network), and a host that refuses the
    connection or has no route to it (a firewall that rejects, a local mirror that is down). A host
    that does not answer the probe within a few seconds is left to the deadline. Behind a proxy
    (``HTTPS_PROXY`` and the like, which huggingface_hub's requests honour) the proxy is what is
    reached, so there is nothing to probe here."""
    parsed = urlparse(endpoint)
    host = parsed.hostname
    if not host:
        return "its address has no host name"
    if _through_a_proxy(parsed.scheme, host):
        return None
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.getaddrinfo(host, port)
    except OSError:
        return "its host name does not resolve"
    try:
        socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
    except ConnectionRefusedError:
        return f"it refused the connection (nothing listens on {host}:{port})"
    except OSError as error:
        if error.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return f"there is no route to {host}:{port} ({error.strerror})"
    return None  # connected, or silent within PROBE_SECONDS: ask, within the deadline


def _through_a_proxy(scheme: str, host: str) -> bool:
    import urllib.request

    proxies = urllib.request.getproxies()  # from the environment, as requests reads them
    return (scheme in proxies or "all" in proxies) and not urllib.request.proxy_bypass(host)


def offline_models() -> list[str]:
    """The model names that load with no network: the bundled ones, then the Hugging Face cache's."""
    from huggingface_hub import constants

    cache = Path(constants.HF_HUB_CACHE)
    cached = sorted(folder.name.removeprefix("models--").replace("--", "/") for folder in cache.glob("models--*")
                    if (folder / "snapshots").is_dir()) if cache.is_dir() else []  # fmt: skip
    return [*BUNDLED_MODELS, *cached]
