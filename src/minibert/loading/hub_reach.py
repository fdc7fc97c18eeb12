"""Whether the hub can be asked, and how long to wait for it (hub.py asks it).

huggingface_hub retries a host that does not answer, or refuses the connection, for minutes. Two
things keep a load from hanging on a hub that cannot give anything: a probe that finds in
milliseconds a host name that does not resolve or a host that refuses the connection (the cache
alone is then read), and a deadline (``MINIBERT_HUB_TIMEOUT``, 30 s by default) on each small file.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from urllib.parse import urlparse

TIMEOUT_VARIABLE = "MINIBERT_HUB_TIMEOUT"
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
