"""The server's bounds on what a client can hold: nested bodies, header size, slow headers and
bodies, a request that can never fit the queue, and the number of requests at once. Each gets its
status and a JSON error (or, for a cut connection, the status before it is cut)."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from serve_server import NAME, Server

pytest.importorskip("starlette")


@pytest.fixture(scope="module")
def limited(minilm_dir):
    running = Server(minilm_dir, "--read-timeout", "2", "--header-timeout", "2", "--max-header-bytes", "8192",
                     "--max-inputs", "8", "--max-queue", "16")  # fmt: skip
    yield running
    returncode, log = running.stop()
    assert returncode == 0 and "Traceback" not in log, log


def _raw(server, data: bytes, pause: float = 0.0, chunks: int = 1, wait: float = 10.0) -> bytes:
    """Send ``data`` over a socket (in ``chunks`` with ``pause`` between); what the server answers."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=wait) as sock:
        size = max(1, len(data) // chunks)
        try:
            for start in range(0, len(data), size):
                sock.sendall(data[start : start + size])
                time.sleep(pause)
        except OSError:  # the server closed the connection mid-send: read what it said
            pass
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except OSError:
            pass
        return answer


def _read_response(sock: socket.socket) -> bytes:
    """One whole HTTP response: the head, then Content-Length bytes (TCP may split them anywhere)."""
    answer = b""
    while b"\r\n\r\n" not in answer and (chunk := sock.recv(65536)):
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")), 0
    )
    while len(body) < length and (chunk := sock.recv(65536)):
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.mark.parametrize("path", ["/v1/embeddings", "/embed"])
@pytest.mark.parametrize(
    "body",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"a":' * 50_000 + "1" + "}" * 50_000,
        '{"input": ' + "[" * 100 + '"a"' + "]" * 100 + "}",
    ],
    ids=["lists", "objects", "100"],
)
def test_deeply_nested_bodies_are_400(limited, path, body):
    response = httpx.post(limited.url + path, content=body.encode(), headers={"Content-Type": "application/json"})
    assert response.status_code in (400, 413), response.text
    if response.status_code == 400:
        assert "nested" in response.text


def test_headers_larger_than_the_limit_are_431_and_the_connection_closed(limited):
    one_big = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"
    many = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(3000)) + b"\r\n"
    for request in (one_big, many):
        answer = _raw(limited, request)
        assert answer.startswith(b"HTTP/1.1 431"), answer[:100]
        assert b"larger than 8192 bytes" in answer
    assert httpx.get(limited.url + "/health").status_code == 200  # the server is fine


def test_the_connection_layers_errors_under_v1_are_in_openais_shape(limited):
    """docs/serving.md: errors are OpenAI's shape under /v1/. The 431, 408 and 400 written before the
    app sees a request were TEI's shape on every path, and the openai client showed only "Error code: 431"."""
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{limited.url}/v1", api_key="k", max_retries=0,
                           default_headers={"X-Big": "a" * 10_000})  # fmt: skip
    with pytest.raises(openai.APIStatusError) as refused:
        client.embeddings.create(model=NAME, input="a")
    assert refused.value.status_code == 431 and "larger than 8192 bytes" in refused.value.message, refused.value
    for request, status in [(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", b"400"),
                            (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Slow: a", b"408")]:  # fmt: skip
        head, _, body = _raw(limited, request).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 " + status), head
        error = json.loads(body)["error"]
        assert error["type"] == "invalid_request_error" and error["message"], body
    _, _, body = _raw(limited, b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n").partition(b"\r\n\r\n")
    assert json.loads(body)["error_type"] == "Validation"  # (TEI's, elsewhere)


def test_headers_trickled_slowly_are_cut_with_408(limited):
    started = time.monotonic()
    answer = _raw(limited, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 40, pause=0.2, chunks=40)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
    assert time.monotonic() - started < 6  # cut at the 2 s header timeout, not when the client finished (8 s)


def test_part_of_a_request_pipelined_behind_another_is_cut_with_408_too(limited):
    """A request, then the start of the next in the same packet (``GET /hea``): the header clock
    started only for bytes arriving while the connection was idle, so the partial request held the
    connection to the keep-alive timeout (75 s by default), then closed with no answer."""
    started = time.monotonic()
    answer = _raw(limited, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /hea", wait=30)
    assert answer.count(b"HTTP/1.1 ") == 2 and answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert b"HTTP/1.1 408" in answer and time.monotonic() - started < 6, answer[-200:]


def test_a_body_trickled_slowly_is_cut_with_408(limited):
    body = json.dumps({"model": NAME, "input": ["a text"]}).encode()
    head = (f"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
    with socket.create_connection(("127.0.0.1", limited.port), timeout=10) as sock:
        sock.sendall(head + body[:5])
        started = time.monotonic()
        answer = _read_response(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"did not arrive within 2 s" in answer and time.monotonic() - started < 6


def _seconds_until_closed(sock: socket.socket, piece: bytes, pause: float, limit: float) -> float | None:
    """Go on sending ``piece`` every ``pause`` seconds; the seconds until the server has closed the
    connection (a send fails), or None if it is still open after ``limit`` seconds."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        try:
            sock.sendall(piece)
        except OSError:  # EPIPE or ECONNRESET: the server has closed it
            return time.monotonic() - started
        time.sleep(pause)
    return None


@pytest.mark.parametrize(
    "head,status,piece",
    [
        (b"Content-Length: 1000\r\n\r\n" + b'{"model":', 408, b"x"),  # a body trickled: 408 at 2 s
        (b"Content-Length: 5000000\r\n\r\n" + b'{"model":', 413, b"x" * 100_000),  # declared too large: 413 at once
        (b"Transfer-Encoding: chunked\r\n\r\n" + b"400001\r\n" + b"a" * 0x400001 + b"\r\n", 413,
         b"10000\r\n" + b"a" * 0x10000 + b"\r\n"),  # chunks past the limit: 413 as they arrive
    ],
    ids=["408", "413", "413-chunked"],
)  # fmt: skip
def test_after_an_answer_to_an_unread_body_the_connection_closes(limited, head, status, piece):
    """408 and 413 are sent before the body is read: the connection says ``Connection: close`` and
    closes within --read-timeout (2 s), whatever the client goes on sending. It used to stay open
    as long as the client trickled bytes (or read and discarded 300 MiB of chunks), so such clients
    held their connections forever."""
    with socket.create_connection(("127.0.0.1", limited.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + head)
        answer = _read_response(sock)
        assert answer.startswith(b"HTTP/1.1 %d" % status), answer[:200]
        assert b"connection: close" in answer.lower(), answer[:300]
        seconds = _seconds_until_closed(sock, piece, pause=0.2, limit=12)
    assert seconds is not None and seconds < 2 + 2, seconds  # --read-timeout, and a margin for a busy machine


def test_a_compressed_body_is_415_not_bad_json(limited):
    """A gzip body was answered "the request body is not valid JSON: not UTF-8", as if the client
    had sent broken JSON; the server reads bodies as sent, so it is 415, naming the encoding."""
    import gzip

    body = gzip.compress(json.dumps({"model": NAME, "input": ["a text"]}).encode())
    for path in ("/v1/embeddings", "/embed"):
        response = httpx.post(limited.url + path, content=body,
                              headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})  # fmt: skip
        assert response.status_code == 415, response.text
        assert "Content-Encoding: gzip" in response.text and "uncompressed" in response.text, response.text
    identity = httpx.post(limited.url + "/v1/embeddings", json={"model": NAME, "input": ["a"]},
                          headers={"Content-Encoding": "identity"})  # fmt: skip
    assert identity.status_code == 200, identity.text


def test_an_absolute_form_target_is_the_path_it_names(limited):
    """``POST http://host:port/v1/embeddings`` (how a client talks through a forward proxy; RFC 9112
    3.2.2: a server MUST accept it) was 404: uvicorn read the whole URL as the path."""
    body = json.dumps({"model": NAME, "input": ["a text"]}).encode()
    for target in (f"http://127.0.0.1:{limited.port}/v1/embeddings", "HTTP://x/v1/embeddings"):
        head = (f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
        answer = _raw(limited, head + body)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
        assert len(json.loads(answer.partition(b"\r\n\r\n")[2])["data"][0]["embedding"]) > 0
    missing = _raw(limited, b"GET http://x/nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert missing.startswith(b"HTTP/1.1 404") and b"/nowhere" in missing, missing[:300]


def test_a_request_that_is_not_http_gets_a_json_400(limited):
    """h11 refuses a Content-Length of -1 (or two of them); uvicorn answered in plain text."""
    for header in (b"Content-Length: -1\r\n", b"Content-Length: 5\r\nContent-Length: 6\r\n"):
        answer = _raw(limited, b"POST /embed HTTP/1.1\r\nHost: x\r\n" + header + b"\r\n")
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in head, answer[:300]
        assert "not valid HTTP/1.1" in json.loads(body)["error"]


def test_a_normal_request_still_works_after_all_that(limited):
    response = httpx.post(limited.url + "/v1/embeddings", json={"model": NAME, "input": ["still here"]})
    assert response.status_code == 200


# --limit-concurrency counts requests being served, not sockets: test_apps_serve_idle.py (round 3's test
# here counted connections with unfinished headers, which no longer count).


def test_access_log_lines_are_dropped_and_counted_never_blocking():
    """A full access-log queue (stderr not being read) drops lines and counts them; it never blocks
    or raises in the request's path."""
    import logging

    from minibert.apps.serve.access_log import DroppingQueueHandler

    handler = DroppingQueueHandler(capacity=2)
    logger = logging.getLogger("minibert.test.access")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for number in range(5):
            logger.warning("line %d", number)
    finally:
        logger.removeHandler(handler)
    assert handler.queue.qsize() == 2 and handler.dropped == 3


def test_metrics_count_dropped_log_lines(limited):
    assert "minibert_log_lines_dropped_total 0" in httpx.get(limited.url + "/metrics").text
    assert '"GET /health HTTP/1.1" 200' in limited.output()  # the access log is still written
