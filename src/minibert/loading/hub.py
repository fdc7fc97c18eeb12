"""Finding a checkpoint's files: a local directory, or a repository on the Hugging Face hub.

``name_or_path`` is what users pass to every ``from_pretrained``:

* a directory on disk (``./my-bert``) — files are read from it, nothing touches the network;
* ``minibert/fortunes-mini``, the model shipped inside the package (a toy English BERT with its
  pre-training heads: docs/fortunes-mini.md) — its files are read from ``minibert/bundled/``, with
  no network and no cache; a local directory of that relative path still wins, as directories always do;
* a hub repository id (``google-bert/bert-base-uncased``) — each file is fetched with
  ``huggingface_hub.hf_hub_download`` into the standard Hugging Face cache (downloads are resumable
  and atomic; a second call reads the cache). With ``HF_HUB_OFFLINE=1`` (or ``TRANSFORMERS_OFFLINE=1``,
  which huggingface_hub reads in its place) only the cache is used. The files of one load come from
  one commit of the repository (hub_commit.py).

``HF_HUB_OFFLINE`` and ``HF_ENDPOINT`` are read at each call, not once at import time, so a program
(or a test) may set them after importing minibert.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..errors import CheckpointError, ModelNotFoundError
from .files_read import note
from .google_folder import model_folder
from .hub_commit import answered_commit, first_file, fix_commit, fixed_commit, snapshot_commit
from .hub_failures import (
    REPO_PREFIX,
    download_failed,
    is_a_transfer_failure,
    known_absent,
    no_file_in_time,
    not_in_cache,
    refused_repository,
    repo_folder,
    repo_id_of,
    token_sent,
)
from .hub_reach import HubWatch, _unreachable, _within, hub_timeout
from .local_files import missing_in_a_local_folder, not_a_file

# The checkpoint the commands and tasks use when none is named: Google's original BERT-Base, uncased.
DEFAULT_MODEL = "google-bert/bert-base-uncased"

# The models shipped inside the package, by name → their folder in minibert/bundled/.
BUNDLED_FOLDER = Path(__file__).resolve().parent.parent / "bundled"
BUNDLED_MODELS = {"minibert/fortunes-mini": "fortunes-mini"}
# The bundled English BERT with MLM and NSP heads: what fill-mask, next-sentence and explore use
# when the default cannot be reached.
BUNDLED_WITH_HEADS = "minibert/fortunes-mini"

_TRUE = {"1", "true", "yes", "on"}
WEIGHTS_SUFFIXES = (".safetensors", ".bin")  # the files a download is not cut off for


@dataclass(frozen=True)
class HubOptions:
    """transformers' download keywords, for the files a ``from_pretrained`` call reads from the hub:
    ``cache_dir`` (instead of the standard cache), ``local_files_only`` (the cache only, as
    ``HF_HUB_OFFLINE=1`` for one call), ``token`` (a private or gated repository) and
    ``force_download`` (each file fetched again, over the cache's copy: a damaged one). The token is
    left out of the repr: a secret, never printed or logged with the options."""

    cache_dir: str | None = None
    local_files_only: bool = False
    token: str | bool | None = field(default=None, repr=False)
    force_download: bool = False

    def keywords(self) -> dict:
        """The options as ``from_pretrained``'s keywords (those not at their default), to pass on."""
        return {one.name: getattr(self, one.name) for one in fields(self)
                if getattr(self, one.name) != one.default}  # fmt: skip


_HUB_OPTIONS: contextvars.ContextVar[HubOptions | None] = contextvars.ContextVar("minibert_hub_options", default=None)


@contextlib.contextmanager
def hub_options(options: HubOptions):
    """Within it, every hub download of this thread uses ``options`` (a local directory ignores them).
    Options all at their defaults (a ``from_pretrained`` given no download keyword) keep those of an
    enclosing ``hub_options``: a load of several parts (an Embedder, a CrossEncoder, an Auto class)
    checks its keywords once (a ``token=True`` reads the saved login once) and loads each part
    within them, passing the part none."""
    if options == HubOptions() and _HUB_OPTIONS.get() is not None:
        yield
        return
    reset = _HUB_OPTIONS.set(options)
    try:
        yield
    finally:
        _HUB_OPTIONS.reset(reset)


def offline_setting() -> str | None:
    """The variable that keeps downloads to the local cache, as "HF_HUB_OFFLINE=1 is set", or None.
    huggingface_hub reads ``HF_HUB_OFFLINE``, else (when it is not set) ``TRANSFORMERS_OFFLINE``;
    both are read here in that order, at each call. (huggingface_hub reads them once, at its import:
    a download it then refuses as offline is said to be that, by ``_offline_cause``.)"""
    variable = "HF_HUB_OFFLINE" if os.environ.get("HF_HUB_OFFLINE") else "TRANSFORMERS_OFFLINE"
    value = os.environ.get(variable, "").strip()
    return f"{variable}={value} is set" if value.lower() in _TRUE else None


def is_offline() -> bool:
    """True when the local cache only is used (``offline_setting``)."""
    return offline_setting() is not None


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
    first_file()  # a check waiting for the load's first file (an Auto class's model_type: hub_commit.py)
    name = os.fspath(name_or_path)
    name = os.fspath(bundled_path(name, revision) or name)
    name = model_folder(name)  # DIR/model.ckpt-3, a TensorFlow checkpoint's prefix: its folder's files
    if os.path.isdir(name):
        path = Path(name) / filename
        if path.is_file():
            return note(filename, path)
        kind = not_a_file(path)
        if kind:  # there, but a directory, a FIFO, a device: never taken as absent
            raise CheckpointError(f"{filename} in the directory {name} is {kind}, not a regular file")
        if required:
            raise ModelNotFoundError(f"{filename} not found in the directory {name}{_trainer_weights(path)}")
        return None
    if os.path.isfile(name):  # a common first mistake: the weights file itself (.../model.safetensors)
        folder, given = os.path.dirname(name) or ".", os.path.basename(name)
        prefix = re.sub(r"\.(index|data-\d{5}-of-\d{5}|meta)$", "", name)  # a TensorFlow checkpoint's file
        also = f" (or the TensorFlow checkpoint's prefix, {prefix!r})" if prefix != name else ""
        raise ModelNotFoundError(f"{name!r} is a file, but a model is loaded from its folder; pass the folder that "
                                 f"holds {given}: {folder!r}{also}")  # fmt: skip
    if looks_like_a_path(name):
        raise ModelNotFoundError(
            f"{name!r} is not an existing directory (and is not a hub repository id like "
            f"'google-bert/bert-base-uncased')"
        )
    missing_in_a_folder = missing_in_a_local_folder(name)
    if missing_in_a_folder:
        raise ModelNotFoundError(missing_in_a_folder)
    downloaded = _download(name, filename, revision=revision, required=required)
    return downloaded if downloaded is None else note(filename, downloaded)


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
    happened (hub_failures.py): a file that could not be had is never taken as absent. Within a load,
    the commit its first file came from is asked for (hub_commit.py)."""
    from huggingface_hub import utils as hub_errors  # where every release since 0.23 keeps them

    endpoint = _endpoint()
    options = _HUB_OPTIONS.get() or HubOptions()
    offline = is_offline() or options.local_files_only
    unreachable = None if offline else _unreachable(endpoint)  # skip huggingface_hub's retries of a dead end
    cache_only = _why_only_the_cache(endpoint, unreachable, options) if offline or unreachable else None
    commit = fixed_commit(repo_id, revision, options.cache_dir)
    try:
        path = _fetch(repo_id, filename, commit or revision, options, endpoint, cache_only)
        fix_commit(repo_id, revision, options.cache_dir, snapshot_commit(path))
        return path
    except TimeoutError as late:  # (hub_reach.py's NoFileInTime: what the hub answered, if anything)
        raise no_file_in_time(repo_id, filename, endpoint, late, token_sent(options.token)) from None
    except hub_errors.HFValidationError as error:
        raise ModelNotFoundError(
            f"{repo_id!r} is neither an existing directory nor a valid hub repository id: {error}"
        ) from None
    except hub_errors.LocalEntryNotFoundError as error:  # not in the cache; the hub not asked, or failing
        if known_absent(repo_id, filename, commit or revision, options.cache_dir):
            if not required:
                return None
            raise ModelNotFoundError(f"{repo_id}: the repository has no file {filename} (the local cache records "
                                     "the hub's answer)") from None  # fmt: skip
        failure = None if cache_only or _offline_cause(error) else error.__cause__  # (HTTP 500, a timeout ...)
        how = cache_only or _why_only_the_cache(endpoint, None, options)
        raise _not_had(repo_id, filename, revision, failure, how, options) from None
    except hub_errors.RevisionNotFoundError:
        raise ModelNotFoundError(f"{repo_id}: revision {revision or 'main'!r} does not exist on the hub") from None
    except hub_errors.RepositoryNotFoundError as error:  # GatedRepoError is one: told apart there
        raise refused_repository(repo_id, endpoint, error, token_sent(options.token)) from None
    except hub_errors.EntryNotFoundError as error:  # (from 1.0 on, the hub's 404: RemoteEntryNotFoundError)
        fix_commit(repo_id, revision, options.cache_dir, answered_commit(error))  # the commit that lacks it
        if not required:
            return None
        raise ModelNotFoundError(f"{repo_id}: the repository has no file {filename}") from None
    except Exception as error:
        if not is_a_transfer_failure(error):  # a network failure, as an HTTP or OS error (or the HTTP library's)
            raise
        raise download_failed(repo_id, filename, error, token_sent(options.token)) from None


def _fetch(repo_id: str, filename: str, revision: str | None, options: HubOptions, endpoint: str,
           cache_only: str | None) -> Path:  # fmt: skip
    """``hf_hub_download`` of one file (from the cache alone where ``cache_only`` says why), within the
    deadline for a small file's answer (config.json always comes first: a silent hub is noticed
    there; a file whose bytes are arriving is waited for: hub_reach.py); a weights file's download
    may rightly take minutes and is not cut off. With ``force_download`` the hub's refusal or
    failure comes wrapped in a ValueError, and is unwrapped here."""
    from huggingface_hub import hf_hub_download

    if options.force_download and cache_only:  # (huggingface_hub's ValueError would name local_files_only)
        raise ModelNotFoundError(f"{repo_id}: force_download=True asks the hub for {filename} again, but {cache_only}")
    local_only = cache_only is not None
    seconds = hub_timeout()
    download = functools.partial(hf_hub_download, repo_id, filename, revision=revision, local_files_only=local_only,
                                 cache_dir=options.cache_dir, token=options.token, endpoint=endpoint,
                                 force_download=options.force_download, library_name="minibert",
                                 etag_timeout=min(10.0, seconds))  # fmt: skip
    bounded = not local_only and not filename.endswith(WEIGHTS_SUFFIXES)
    watch = HubWatch(repo_folder(repo_id, options.cache_dir)) if bounded else None
    try:
        return Path(_within(seconds, download, watch) if bounded else download())
    except ValueError as error:
        cause = error.__cause__
        if not options.force_download or type(error) is not ValueError or not isinstance(cause, Exception):
            raise
        # force_download=True: huggingface_hub raises ValueError("Force download failed ...") from the hub's
        # refusal or failure (a repository not found, gated, a token refused, HTTP 500 or 429, a timeout);
        # that failure, re-raised, is said as it is without force_download (_download's clauses)
        if _offline_cause(error):
            why = _why_only_the_cache(endpoint, None, options)
            raise ModelNotFoundError(f"{repo_id}: force_download=True asks the hub for {filename} again, but {why}"
                                     ) from None  # fmt: skip
        raise cause  # noqa: B904  (its own __cause__ kept; _download's clauses raise from None)


def _offline_cause(error: BaseException) -> bool:
    """Whether huggingface_hub gave up on the file because it is in offline mode (no request made)."""
    return type(error.__cause__).__name__ == "OfflineModeIsEnabled"


def has_file(name_or_path: str | os.PathLike, filename: str, *, revision: str | None = None) -> bool | None:
    """Whether a directory or hub repository holds ``filename``, asked without fetching it (the hub
    answers a HEAD request; offline, the cache says): True, False, or None where it cannot be known
    (offline with no record of it in the cache, a hub that fails). For messages about a file
    minibert does not read, such as ``tf_model.h5``."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url, try_to_load_from_cache
    from huggingface_hub import utils as hub_errors

    name = model_folder(os.fspath(name_or_path))
    if os.path.isdir(name):
        return (Path(name) / filename).is_file()
    options = _HUB_OPTIONS.get() or HubOptions()
    if looks_like_a_path(name) or name in BUNDLED_MODELS:
        return False
    revision = fixed_commit(name, revision, options.cache_dir) or revision
    if isinstance(try_to_load_from_cache(name, filename, cache_dir=options.cache_dir, revision=revision), str):
        return True
    if known_absent(name, filename, revision, options.cache_dir):
        return False
    if is_offline() or options.local_files_only:
        return None
    try:
        url = hf_hub_url(name, filename, revision=revision, endpoint=_endpoint())
        # (no endpoint= here: before 1.0 it was not taken, and it only names the Xet server, which a HEAD needs not)
        get_hf_file_metadata(url, token=options.token, timeout=min(10.0, hub_timeout()))
    except hub_errors.EntryNotFoundError:
        return False
    except Exception:  # noqa: BLE001  (the hub failed: not known)
        return None
    return True


def _not_had(repo_id: str, filename: str, revision: str | None, failure: Exception | None, how: str,
             options: HubOptions) -> ModelNotFoundError:  # fmt: skip
    """The error for a file neither in the cache nor given by the hub: the hub's ``failure``, or
    (``failure`` None) a file the cache lacks while the hub cannot be asked (``how`` says why), whose
    existence is unknown."""
    if failure is not None:
        return download_failed(repo_id, filename, failure, token_sent(options.token))
    return not_in_cache(repo_id, filename, revision, options.cache_dir, how, offline_models(options.cache_dir))


def _why_only_the_cache(endpoint: str, unreachable: str | None, options: HubOptions) -> str:
    """Why only the local cache was read: the words that end "... is not in the cache, and ___"."""
    if options.local_files_only:
        return "local_files_only=True was passed, so only the local cache is used"
    if unreachable:
        return f"the hub ({endpoint}) cannot be reached: {unreachable}"
    setting = offline_setting() or ("huggingface_hub is in offline mode (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE "
                                    "was set at its import)")  # fmt: skip
    return f"{setting}, so only the local cache is used"


def offline_models(cache_dir: str | None = None) -> list[str]:
    """The model names that load with no network: the bundled ones, then those of the Hugging Face
    cache (``cache_dir``, else the standard one)."""
    from huggingface_hub import constants

    cache = Path(cache_dir or constants.HF_HUB_CACHE)
    cached = sorted(repo_id_of(folder) for folder in cache.glob(f"{REPO_PREFIX}*")
                    if (folder / "snapshots").is_dir()) if cache.is_dir() else []  # fmt: skip
    return [*BUNDLED_MODELS, *cached]
