"""Whether the hub can be asked, and how long to wait for it (hub.py asks it).

huggingface_hub retries a host that does not answer, or refuses the connection, for minutes. Two
things keep a load from hanging on a hub that cannot give anything: a probe that finds in
milliseconds a host name that does not resolve or a host that refuses the connection (the cache
alone is then read), and a deadline (``MINIBERT_HUB_TIMEOUT``, 30 s by default) on the wait for
each small file's answer. The deadline bounds the wait only: a file whose bytes have begun to
arrive is waited for (huggingface_hub's own timeout bounds each read), and a hub that did answer,
with an error huggingface_hub kept retrying (HTTP 429, asking it to wait; HTTP 503), is said to have
answered that (``HubWatch``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

TIMEOUT_VARIABLE = "MINIBERT_HUB_TIMEOUT"
DEFAULT_TIMEOUT = 30.0


def hub_timeout() -> float:
    """Seconds the wait for a small file's answer from the hub may take, at most (``MINIBERT_HUB_TIMEOUT``,
    default 30).

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


class NoFileInTime(TimeoutError):
    """The deadline passed with no file, and no byte of it arriving. ``statuses``: the HTTP statuses
    the hub answered meanwhile, which huggingface_hub was retrying (none: it did not answer);
    ``waiting``: the seconds huggingface_hub was waiting, as a 429's Retry-After asked, or None."""

    def __init__(self, seconds: float, statuses: list[int], waiting: float | None):
        super().__init__(f"no file within {seconds:g} s")
        self.seconds, self.statuses, self.waiting = seconds, statuses, waiting

    def __reduce__(self):  # (pickled as it was made: a worker's error reaches its parent whole)
        return type(self), (self.seconds, self.statuses, self.waiting)


class HubWatch(logging.Handler):
    """What huggingface_hub met while it resolved one file, for the deadline to say what is true.

    huggingface_hub says each answer it retries in a warning ("HTTP Error 429 thrown while requesting
    HEAD ...", "Rate limited. Waiting 61.0s before retry"): the watch keeps those of its own thread.
    A download whose bytes have begun writes a file ending in ``.incomplete`` in the repository's
    ``blobs/`` folder of the cache (``blobs``): one new, or grown, since the watch began says the hub
    answered and the file is arriving. The warnings reach it through ``_Tap``, also where
    huggingface_hub's verbosity hides them (the minibert command's)."""

    def __init__(self, repository: Path):
        super().__init__(logging.WARNING)
        self.blobs = repository / "blobs"
        self.thread: int | None = None  # the resolving thread's ident (set by _within)
        self.statuses: list[int] = []
        self.waiting: float | None = None
        self.partial = self._partial_files()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread:
            return
        message = record.getMessage()
        status = re.match(r"HTTP Error (\d{3}) thrown", message)
        if status:
            self.statuses.append(int(status[1]))
        waiting = re.match(r"Rate limited\. Waiting ([\d.]+)\s*s", message)
        if waiting:
            self.waiting = float(waiting[1])

    def arriving(self) -> bool:
        """Whether bytes of a download have arrived since the watch began."""
        now = self._partial_files()
        return any(size != self.partial.get(name) for name, size in now.items())

    def _partial_files(self) -> dict[str, int]:
        try:
            return {path.name: path.stat().st_size for path in self.blobs.glob("*.incomplete")}
        except OSError:  # (one finished, moved, between the listing and its stat)
            return {}


def _within(seconds: float, function, watch: HubWatch | None = None):
    """``function()``, or ``NoFileInTime`` (a TimeoutError) when ``seconds`` pass with no answer. It
    runs in a daemon thread, which is left behind on a timeout (a download that finishes later only
    fills the cache, atomically). With a ``watch``, a download whose bytes are arriving at the
    deadline is waited for to its end, and the error names the hub's answers (``HubWatch``)."""
    outcome: dict = {}

    def run():
        if watch is not None:
            watch.thread = threading.get_ident()
        try:
            outcome["value"] = function()
        except BaseException as error:  # noqa: BLE001  (re-raised in the caller's thread)
            outcome["error"] = error

    thread = threading.Thread(target=run, name="minibert-hub", daemon=True)
    with _tapped(watch):
        thread.start()
        thread.join(seconds)
        if thread.is_alive() and watch is not None and watch.arriving():
            thread.join()  # the hub answered: the file is arriving, each read bounded by huggingface_hub
    if thread.is_alive():
        raise NoFileInTime(seconds, list(watch.statuses) if watch else [], watch.waiting if watch else None)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


HTTP_LOGGER = "huggingface_hub.utils._http"  # where huggingface_hub says each answer it retries
_taps: list[_Tap] = []
_taps_lock = threading.Lock()
_level_before: list[int] = []  # the HTTP logger's own level while taps opened it, to put back


class _Tap(logging.Filter):
    """A filter on huggingface_hub's HTTP logger that shows each record to a ``HubWatch`` and then
    lets it through only at the level the logger had (``passes_from``). So the watch sees the retry
    warnings also where they are silenced (the minibert command sets huggingface_hub to ERROR; a user
    may too), and what is printed does not change."""

    def __init__(self, watch: HubWatch, passes_from: int):
        super().__init__()
        self.watch, self.passes_from = watch, passes_from

    def filter(self, record: logging.LogRecord) -> bool:
        self.watch.handle(record)  # (it keeps its own thread's records)
        return record.levelno >= self.passes_from


@contextlib.contextmanager
def _tapped(watch: HubWatch | None):
    """The block during which ``watch`` sees huggingface_hub's HTTP warnings (``_Tap``): the HTTP
    logger is opened to WARNING while any watch runs, and put back as the last one ends."""
    if watch is None:
        yield
        return
    logger = logging.getLogger(HTTP_LOGGER)
    with _taps_lock:
        passes_from = _taps[0].passes_from if _taps else logger.getEffectiveLevel()
        tap = _Tap(watch, passes_from)
        if not _taps:
            _level_before[:] = [logger.level]
            if passes_from > logging.WARNING:
                logger.setLevel(logging.WARNING)
        _taps.append(tap)
        logger.addFilter(tap)
    try:
        yield
    finally:
        with _taps_lock:
            logger.removeFilter(tap)
            _taps.remove(tap)
            if not _taps:
                logger.setLevel(_level_before[0])


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
