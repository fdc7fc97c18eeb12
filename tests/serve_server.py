"""A `minibert serve` process for the server's tests (test_apps_serve*.py, test_apps_int8.py): ``Server``
starts ``python -m minibert serve`` on a free port and waits until /health answers; ``keyed_server``
is one with an API key and small limits, a module's ``server`` fixture; and the small checks
those tests share (cosine similarities, a field sent as null, requests counted in flight)."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import httpx
import numpy as np

KEY = "test-key-123"
AUTH = {"Authorization": f"Bearer {KEY}"}
NAME = "all-MiniLM-L6-v2"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """`python -m minibert serve ...` on a free port, until stopped."""

    def __init__(self, model_dir, *options: str, preexec_fn=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "minibert", "serve", "--model", str(model_dir), "--port", str(self.port),
                   "--served-model-name", NAME, *options]  # fmt: skip
        # The log goes to a file: a pipe nobody reads would fill up and stall the server.
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115  (closed in stop)
        self.process = subprocess.Popen(command, stdout=self.log, stderr=self.log, text=True, preexec_fn=preexec_fn)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the server exited: {self.output()}"
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError("the server did not become ready in 120 s")

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
            return self.process.returncode, self.output()
        finally:
            self.log.close()


def keyed_server(minilm_dir) -> Iterator[Server]:
    """A server with an API key and small limits, for a module's tests (their ``server`` fixture);
    stopped at the end, exit 0 and no traceback in its log."""
    running = Server(minilm_dir, "--api-key", KEY, "--max-inputs", "64", "--max-input-chars", "5000",
                     "--max-body-bytes", "300000", "--max-tokenize-tokens", "3000")  # fmt: skip
    yield running
    returncode, stderr = running.stop()
    assert returncode == 0, stderr
    assert "Traceback" not in stderr


async def until_in_flight(http, count: int) -> None:
    """Wait (60 s at most) until the server counts ``count`` requests in flight (/metrics: from when a
    body is in to the answer): a signal sent then finds them in the server, however loaded the machine."""
    deadline = time.monotonic() + 60
    while (now := float(re.search(r"^minibert_requests_in_flight (\S+)$", (await http.get("/metrics")).text,
                                  re.M).group(1))) < count:  # fmt: skip
        assert time.monotonic() < deadline, f"{now} of {count} requests in flight after 60 s"
        await asyncio.sleep(0.02)


def cosine_similarities(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def null_is_absent(server, route: str, base: dict, headers: dict) -> None:
    """Each field of ``route`` (ROUTE_FIELDS), one at a time, sent as null: the answer its absence
    gets (its default; for a required field, the same 422)."""
    from minibert.apps.serve.request_parsing import ROUTE_FIELDS

    for field in ROUTE_FIELDS[route]:
        absent = {name: value for name, value in base.items() if name != field}
        answers = [httpx.post(server.url + route, json=body, headers=headers, timeout=60)
                   for body in (absent, {**absent, field: None})]  # fmt: skip
        assert [(a.status_code, a.json()) for a in answers[1:]] == [(answers[0].status_code, answers[0].json())], (
            route, field, answers[1].text[:300])
