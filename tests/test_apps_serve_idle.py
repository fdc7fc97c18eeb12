"""Idle connections cannot deny service (issue 36, item 2): real sockets on 127.0.0.1 against
`minibert serve` in a subprocess.

A client that connects and sends nothing, or trickles its headers a byte a second, costs the server
a socket and a file descriptor. Before this round, 600 of them made every normal request answer 503
(uvicorn's ``limit_concurrency`` counted sockets) and nothing ever closed a silent one. Here 1,100
such clients are open at once, and each test checks what a user would: a normal request is answered
within seconds, the server itself closes the idle connections (by ``--header-timeout``, or, at the
open-files limit, oldest first), and afterwards its file descriptors, connections and event-loop
tasks are back where they were (read from /proc and /metrics). The same for the classes next to it:
an answer the client never reads (--send-timeout), and the concurrency limit, which counts requests
whose bodies are in, not sockets nor trickled bodies. Every wait is bounded.
"""

from __future__ import annotations

import json
import re
import resource
import selectors
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from serve_server import NAME, Server

pytest.importorskip("starlette")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the server's fds in /proc")

IDLE = 1_100  # connections held open at once: more than the default soft open-files limit (1,024)
LOW_SOFT_LIMIT = 1_024  # the servers below start with this soft open-files limit: they must raise it
CAPPED = 400  # the capped server's soft and hard limit: it cannot hold IDLE connections


def _limit_open_files(soft: int, hard: int | None = None):
    """A preexec_fn: the child starts with this open-files limit (the hard one kept unless given)."""

    def apply():
        _, current_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, current_hard if hard is None else hard))

    return apply


@pytest.fixture(scope="module", autouse=True)
def _enough_files_for_the_clients():
    """This process holds IDLE sockets itself."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < IDLE + 200:
        pytest.skip(f"the open-files hard limit ({hard}) is below {IDLE + 200}: cannot open {IDLE} clients")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, IDLE + 200), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture(scope="module")
def idle_server(minilm_dir):
    """Short timeouts so that the tests wait seconds; a soft open-files limit of 1,024 at start."""
    running = Server(minilm_dir, "--header-timeout", "1", "--keep-alive-timeout", "1", "--send-timeout", "1",
                     preexec_fn=_limit_open_files(LOW_SOFT_LIMIT))  # fmt: skip
    yield running
    returncode, log = running.stop()
    assert returncode == 0 and "Traceback" not in log, log


# ----------------------------------------------------------------------------- helpers


def _connect(port: int, count: int) -> list[socket.socket]:
    sockets = []
    try:
        for _ in range(count):
            sockets.append(socket.create_connection(("127.0.0.1", port), timeout=10))
    except BaseException:
        _close(sockets)
        raise
    return sockets


def _close(sockets) -> None:
    for sock in sockets:
        sock.close()


def _wait_until_closed_by_server(sockets, seconds: float) -> tuple[int, list[bytes]]:
    """How many of ``sockets`` the server closed within ``seconds`` (EOF or reset), and what it
    sent on them before closing."""
    selector = selectors.DefaultSelector()
    for sock in sockets:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, bytearray())
    closed, said = 0, []
    deadline = time.monotonic() + seconds
    try:
        while selector.get_map() and (left := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(timeout=min(left, 0.5)):
                try:
                    chunk = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:  # reset by the server
                    chunk = b""
                if chunk:
                    key.data.extend(chunk)
                    continue
                selector.unregister(key.fileobj)
                closed += 1
                if key.data:
                    said.append(bytes(key.data))
    finally:
        selector.close()
    return closed, said


def _timed_request(server) -> tuple[int, float, str]:
    """A normal client's embeddings request: its status, seconds and body."""
    started = time.monotonic()
    response = httpx.post(server.url + "/v1/embeddings", json={"model": NAME, "input": ["a normal client"]},
                          timeout=30)  # fmt: skip
    return response.status_code, time.monotonic() - started, response.text


def _metric(server, name: str) -> float:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics:\n{text}"
    return float(match.group(1))


def _fds(server) -> int:
    import os

    return len(os.listdir(f"/proc/{server.process.pid}/fd"))


def _resources(server) -> dict[str, float]:
    """What an idle connection could leak: the server's fds, its open connections (the /metrics
    request's own included), the requests it is serving and its event loop's tasks."""
    return {
        "fds": _fds(server),
        "connections": _metric(server, "minibert_connections_open"),
        "requests": _metric(server, "minibert_requests_in_flight"),
        "tasks": _metric(server, "minibert_event_loop_tasks"),
    }


def _assert_nothing_leaked(server, before: dict[str, float]) -> None:
    """Within 10 s of the clients going, every resource is back to ``before`` (fds within 3: a
    log rotation or a lazily opened file is not a leak per connection)."""
    deadline = time.monotonic() + 10
    while True:
        after = _resources(server)
        slack = {"fds": 3}
        grown = {name: (before[name], now) for name, now in after.items() if now > before[name] + slack.get(name, 0)}
        if not grown or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not grown, f"grew after the idle clients went (before, after): {grown}"


class Trickler(threading.Thread):
    """Sends each socket one more byte of a request's headers every second, until stopped."""

    HEAD = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200

    def __init__(self, sockets):
        super().__init__(daemon=True)
        self.sockets, self.stopped, self.sent = sockets, threading.Event(), 0

    def run(self):
        for position in range(len(self.HEAD)):
            for sock in self.sockets:
                try:
                    sock.send(self.HEAD[position : position + 1], socket.MSG_DONTWAIT)
                    self.sent += 1
                except OSError:  # closed by the server (or its buffer full): nothing more to send there
                    pass
            if self.stopped.wait(1.0):
                return


# ----------------------------------------------------------------------------- the tests


def test_the_server_raises_its_open_files_limit_and_says_how_many_connections_it_holds(idle_server):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    log = idle_server.output()
    match = re.search(r"open-files limit raised from (\d+) to (\d+); it can hold about (\d+) connections", log)
    assert match, log
    assert int(match.group(1)) == LOW_SOFT_LIMIT and int(match.group(2)) == hard
    assert IDLE < int(match.group(3)) < hard


def test_silent_connections_do_not_deny_service_and_are_closed_by_the_server(idle_server):
    assert _timed_request(idle_server)[0] == 200
    before = _resources(idle_server)
    silent = _connect(idle_server.port, IDLE)
    try:
        assert _metric(idle_server, "minibert_connections_open") >= IDLE  # all accepted: beyond the 1,024 at start
        status, seconds, body = _timed_request(idle_server)
        assert status == 200 and seconds < 5, (status, seconds, body)
        closed, said = _wait_until_closed_by_server(silent, seconds=1 + 5)  # --header-timeout 1, and margin
        assert closed >= 0.95 * IDLE, f"the server closed {closed} of {IDLE} silent connections"
        assert not said, f"a connection that sent nothing got an answer: {said[0][:200]}"
    finally:
        _close(silent)
    _assert_nothing_leaked(idle_server, before)


def test_headers_trickled_a_byte_a_second_do_not_deny_service_and_are_cut(idle_server):
    before = _resources(idle_server)
    slow = _connect(idle_server.port, IDLE)
    trickler = Trickler(slow)
    try:
        trickler.start()
        time.sleep(0.5)
        status, seconds, body = _timed_request(idle_server)
        assert status == 200 and seconds < 5, (status, seconds, body)
        closed, said = _wait_until_closed_by_server(slow, seconds=1 + 5)
        assert closed >= 0.95 * IDLE, f"the server closed {closed} of {IDLE} trickling connections"
        assert all(answer.startswith(b"HTTP/1.1 408") for answer in said), said[:1]
    finally:
        trickler.stopped.set()
        trickler.join(timeout=5)
        _close(slow)
    _assert_nothing_leaked(idle_server, before)


def test_an_idle_keep_alive_connection_is_closed_after_its_own_timeout(idle_server):
    with socket.create_connection(("127.0.0.1", idle_server.port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        started = time.monotonic()
        answer = b""
        while b'{"status":"ok"}' not in answer and (chunk := sock.recv(65536)):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and b"connection: close" not in answer.lower(), answer
        closed, _ = _wait_until_closed_by_server([sock], seconds=1 + 4)  # --keep-alive-timeout 1
        assert closed == 1 and time.monotonic() - started < 1 + 4


def test_the_concurrency_limit_counts_requests_being_served_not_sockets(minilm_dir):
    """--limit-concurrency 4: neither 50 idle sockets nor 20 requests whose bodies are still
    arriving hold a place (clients trickling bodies cannot fill the limit); 4 requests waiting in
    the batcher (--max-wait-ms 3000 holds them there) do, and a fifth at once gets 503 with
    Retry-After, while /health still answers."""
    server = Server(minilm_dir, "--limit-concurrency", "4", "--max-wait-ms", "3000", "--read-timeout", "20")
    idle, trickling = _connect(server.port, 50), _connect(server.port, 20)
    try:
        for sock in trickling:  # the body is 100 bytes; 1 is sent
            sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{")  # fmt: skip
        assert _timed_request(server)[0] == 200
        assert _metric(server, "minibert_requests_in_flight") == 0
        with ThreadPoolExecutor(4) as pool:
            held = [pool.submit(_timed_request, server) for _ in range(4)]
            deadline = time.monotonic() + 3
            while (in_flight := _metric(server, "minibert_requests_in_flight")) < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert in_flight == 4
            response = httpx.post(server.url + "/v1/embeddings", json={"model": NAME, "input": ["x"]}, timeout=10)
            assert httpx.get(server.url + "/health", timeout=10).status_code == 200
            assert [future.result()[0] for future in held] == [200] * 4
        assert response.status_code == 503 and response.headers["retry-after"] == "1", response.text
        assert "--limit-concurrency" in response.json()["error"]["message"]
    finally:
        _close(trickling + idle)
        returncode, log = server.stop()
    assert returncode == 0 and "Traceback" not in log, log


UPGRADE = (b"GET /v1/embeddings HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")  # fmt: skip


def test_websocket_upgrades_are_plain_http_requests_and_leave_no_connection_counted(idle_server):
    """Nothing here speaks WebSocket: an upgrade request is answered as HTTP (never 101), and the
    connection, closed, is no longer counted (an upgraded one left the counting protocol, and
    20,000 of them made the server shed every new connection as if it were full)."""
    before = _resources(idle_server)
    upgrades = _connect(idle_server.port, 20)
    try:
        for sock in upgrades:
            sock.sendall(UPGRADE)
        answers = [sock.recv(65536) for sock in upgrades]
        assert all(answer.startswith(b"HTTP/1.1 405") for answer in answers), answers[0][:200]
    finally:
        _close(upgrades)
    _assert_nothing_leaked(idle_server, before)


def _send_embeddings_request(port: int, texts: int, receive_buffer: int) -> socket.socket:
    """A socket whose receive buffer is ``receive_buffer`` bytes, that has sent a request for the
    vectors of ``texts`` texts (about 7.5 kB of JSON each) and read nothing yet."""
    body = json.dumps({"model": NAME, "input": ["a short text"] * texts}).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
    return sock


def test_an_answer_the_client_never_reads_is_dropped_after_the_send_timeout(idle_server):
    """4 MB of vectors that the client never reads: the server's buffer of them must not stay
    (nor the connection): aborted once the buffer has not shrunk for --send-timeout (1 s)."""
    before = _resources(idle_server)
    aborted = _metric(idle_server, "minibert_connections_send_timeout_total")
    sock = _send_embeddings_request(idle_server.port, 512, receive_buffer=4096)
    try:
        deadline = time.monotonic() + 60  # (the 512 vectors are computed first: seconds on a busy machine)
        while _metric(idle_server, "minibert_connections_send_timeout_total") == aborted:
            assert time.monotonic() < deadline, "the unread answer is still held after 60 s"
            time.sleep(0.2)
        received = b""
        try:
            while chunk := sock.recv(1 << 20):
                received += chunk
        except OSError:  # reset: the rest was dropped
            pass
        assert received.startswith(b"HTTP/1.1 200") and len(received) < 512 * 7_000, len(received)
    finally:
        sock.close()
    _assert_nothing_leaked(idle_server, before)


@pytest.mark.slow
def test_a_client_reading_its_answer_slowly_but_steadily_gets_all_of_it(idle_server):
    """4 MB of vectors through a 4 kB receive buffer, one read every 5 ms: far slower than the
    server writes (the answer waits in its buffer and the kernel's), but what is unread shrinks
    within every --send-timeout (1 s), so nothing is cut."""
    sock = _send_embeddings_request(idle_server.port, 512, receive_buffer=4096)
    try:
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(65536)
        head, _, body = head.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", head.lower()).group(1))
        deadline = time.monotonic() + 120
        while len(body) < length and time.monotonic() < deadline and (chunk := sock.recv(65536)):
            body += chunk
            time.sleep(0.005)
    finally:
        sock.close()
    assert head.startswith(b"HTTP/1.1 200") and len(body) == length, (head, len(body))
    assert len(json.loads(body)["data"]) == 512


@pytest.mark.slow  # (a server of its own: 15 s)
def test_at_the_open_files_limit_the_oldest_idle_connections_make_room(minilm_dir):
    """A server that cannot raise its limit (soft = hard = 400) and so cannot hold 1,100
    connections: the oldest idle ones are closed as new ones arrive, and a normal request is
    answered at once, not after the header timeout (5 s by default)."""
    server = Server(minilm_dir, preexec_fn=_limit_open_files(CAPPED, CAPPED))
    try:
        assert _timed_request(server)[0] == 200  # warm: the first request's set-up is not what is timed
        log = server.output()
        match = re.search(r"it can hold about (\d+) connections", log)
        assert match and 100 < int(match.group(1)) < CAPPED, log
        capacity = int(match.group(1))
        before = _resources(server)
        idle = _connect(server.port, IDLE)
        try:
            status, seconds, body = _timed_request(server)
            assert status == 200 and seconds < 3, (status, seconds, body)
            closed, said = _wait_until_closed_by_server(idle, seconds=2)  # before the header timeout
            assert closed >= IDLE - capacity, f"{closed} of {IDLE} closed, the server holds {capacity}"
            assert not said, said[:1]
            assert _metric(server, "minibert_connections_shed_total") >= IDLE - capacity
        finally:
            _close(idle)
        _assert_nothing_leaked(server, before)
    finally:
        returncode, log = server.stop()
    assert returncode == 0 and "Traceback" not in log, log


@pytest.mark.slow
def test_1100_silent_and_1100_trickling_clients_with_the_default_flags(minilm_dir):
    """The issue's case with every flag at its default (--header-timeout 5, --limit-concurrency
    512): 2,200 idle clients at once, and normal clients are answered within seconds throughout."""
    server = Server(minilm_dir, preexec_fn=_limit_open_files(LOW_SOFT_LIMIT))
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 2 * IDLE + 200),
                                                resource.getrlimit(resource.RLIMIT_NOFILE)[1]))  # fmt: skip
    try:
        assert _timed_request(server)[0] == 200
        before = _resources(server)
        silent = _connect(server.port, IDLE)
        slow = _connect(server.port, IDLE)
        trickler = Trickler(slow)
        trickler.start()
        try:
            answers = []
            for _ in range(8):  # through the header timeout and past it
                answers.append(_timed_request(server)[:2])
                time.sleep(0.5)
            assert all(status == 200 and seconds < 5 for status, seconds in answers), answers
            closed, said = _wait_until_closed_by_server(silent + slow, seconds=5 + 5)
            assert closed >= 0.95 * 2 * IDLE, f"the server closed {closed} of {2 * IDLE} idle connections"
            assert all(answer.startswith(b"HTTP/1.1 408") for answer in said), said[:1]
        finally:
            trickler.stopped.set()
            trickler.join(timeout=5)
            _close(silent + slow)
        _assert_nothing_leaked(server, before)
        body = json.loads(httpx.post(server.url + "/embed", json={"inputs": "still here"}, timeout=30).text)
        assert len(body) == 1
    finally:
        returncode, log = server.stop()
    assert returncode == 0 and "Traceback" not in log, log
