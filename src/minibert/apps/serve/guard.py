"""``Guard``, around the app: the API key, the number of requests served at once, and each request's
access-log line and metrics; and the two ways a request can end without the app answering it."""

from __future__ import annotations

import asyncio
import hmac
import time

from starlette.applications import Starlette

from .access_log import access_logger
from .http_errors import RequestError, error_response, target_path
from .service import EmbeddingService

CLOSE = (b"connection", b"close")


class Guard:
    """Around the app: the number of requests served at once (``--limit-concurrency``: 503 beyond),
    the API key (compared in constant time), one access-log line and the metrics of each request.
    (Errors inside the app become JSON in the app's exception handlers.)

    A request counts from the moment its whole body is in until its answer is sent: connections
    without a request, and requests whose bodies are still arriving (bounded by --read-timeout
    instead), hold no place, so clients trickling bodies cannot fill the limit; nor do requests
    without a body (/health, /metrics, /v1/models: a saturated server can still be watched).

    Two endings the app does not write itself:

    * An answer sent before the request's body was read (408 for a body too slow, 413 for one
      too large, 401, 404 ...) says ``Connection: close``: the rest of that body is never read, so
      the connection cannot carry another request. uvicorn then closes it (http_limits.py's
      ``LingeringTransport`` first lets the client read the answer).
    * A stop (SIGTERM) that outlasts ``--graceful-timeout``, or a second signal, cancels the requests
      still in flight: each is answered 503 ``shutting_down`` (saying which of the two; JSON, with
      Retry-After and ``Connection: close``),
      counted in ``cut_off``, and ends quietly instead of as a traceback and a plain-text 500.
    """

    def __init__(self, app: Starlette, service: EmbeddingService):
        self.app, self.service = app, service
        key = service.settings.api_key
        self.key = key.encode() if key else None
        self.cut_off = 0  # requests answered 503: a stop's grace ran out or a second signal came (serve() reports them)
        self.forced = False  # a second signal stopped the server at once (process.py sets it): that cut them off

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        scope = origin_form(scope)
        started = time.perf_counter()
        path = scope["path"]
        status, answering = [500], [False]  # the status sent (500 if none), and whether an answer has begun
        scope.setdefault("state", {})
        body_unread = [_has_body(scope["headers"])]  # until the app has received the last of it

        async def send_tracked(message):
            if message["type"] == "http.response.start":
                status[0], answering[0] = message["status"], True
                if body_unread[0]:
                    message = {**message, "headers": [*message.get("headers", []), CLOSE]}
            await send(message)

        metrics, counted = self.service.metrics, [False]

        async def receive_counted():
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body"):
                body_unread[0] = False
                if not counted[0]:
                    counted[0] = True  # the body is in: from now on the request is being served
                    metrics.in_flight += 1
                    if metrics.in_flight > (limit := self.service.settings.limit_concurrency):
                        raise RequestError(503, f"the server is serving {limit} requests at once, its limit "
                                                "(--limit-concurrency); retry shortly", code="overloaded")  # fmt: skip
            return message

        try:
            if self.key is not None and path != "/health" and not self._authorized(scope):
                error = RequestError(401, "a valid API key is required: send 'Authorization: Bearer KEY'",
                                     code="invalid_api_key")  # fmt: skip
                await error_response(path, error)(scope, receive, send_tracked)
            else:
                await self.app(scope, receive_counted, send_tracked)
        except asyncio.CancelledError:  # a stop's grace ran out, or a second signal came (uvicorn cancels what is
            self.cut_off += 1  # in flight)
            if answering[0]:
                return  # an answer had begun: uvicorn closes the connection
            body_unread[0] = True  # (say Connection: close: the server is going away)
            await error_response(path, self._cut_off_error())(scope, receive, send_tracked)
        except Exception:  # a bug, answered 500 and logged in one line by app.py's handler, which Starlette
            if not answering[0]:  # raises again: here it ends, not in uvicorn's traceback
                raise
        finally:
            metrics.in_flight -= counted[0]
            seconds = time.perf_counter() - started
            texts, tokens = scope["state"].get("counts", (0, 0))
            client = scope.get("client") or ("-", 0)
            target = request_target(scope.get("raw_path") or path.encode())
            access_logger.info('%s:%s - "%s %s HTTP/%s" %d %d texts %d tokens %.1fms', client[0], client[1],
                               request_target(scope["method"].encode()), target, scope.get("http_version", "1.1"),
                               status[0], texts, tokens, seconds * 1000)  # fmt: skip
            self.service.metrics.request(path, status[0], seconds, texts, tokens)

    def _cut_off_error(self) -> RequestError:
        """The 503 of a request a stop cut off, naming what cut it: its grace, or a second signal."""
        if self.forced:
            return RequestError(503, "the server was stopped at once by a second signal before this request "
                                     "finished; retry", code="shutting_down")  # fmt: skip
        grace = self.service.settings.graceful_timeout
        return RequestError(503, f"the server is stopping and this request did not finish within its {grace:g} s "
                                 "grace (--graceful-timeout); retry", code="shutting_down")  # fmt: skip

    def _authorized(self, scope) -> bool:
        """``Authorization: Bearer KEY``: the scheme in any case (``bearer``, ``BEARER``: RFC 9110
        11.1 makes it case-insensitive), then one or more spaces, then the key, compared in constant time."""
        given = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        scheme, _, token = given.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.lstrip(b" "), self.key)


def origin_form(scope: dict) -> dict:
    """A request target in absolute form (``POST http://host:8000/v1/embeddings``, as clients send
    it through a forward proxy; RFC 9112 section 3.2.2: a server MUST accept it) read as the path it
    names. uvicorn takes the whole URL for the path, and every route answered 404."""
    path = scope["path"]
    if path.startswith("/") or path == target_path(path):  # (origin form, as nearly every client sends it)
        return scope
    return {**scope, "path": target_path(path), "raw_path": target_path(scope.get("raw_path") or path.encode())}


def _has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request has a body to read: a Content-Length above 0, or Transfer-Encoding."""
    for name, value in headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"", b"0")):
            return True
    return False


TARGET_CHARACTERS = 1_000  # a request target's characters in a log line, at most (a path may be 64 KiB)


def request_target(raw: bytes, limit: int = TARGET_CHARACTERS) -> str:
    r"""A request's path as the client sent it, safe to write between the quotes of a log line: as it
    came on the request line (still percent-encoded, so ``%0A`` stays three characters and never
    starts a line of its own), with bytes outside printable ASCII, ``"`` and ``\`` as ``\xHH``
    (nginx's escaping), and at most ``limit`` characters (then ``...`` and the length).

    >>> print(request_target(b"/v1/embeddings"))
    /v1/embeddings
    >>> print(request_target(b'/a%0Ab"c\x01'))
    /a%0Ab\x22c\x01
    >>> print(request_target(b"/" + b"x" * 30_000, limit=8))
    /xxxxxxx...(30001 bytes)
    """
    escaped = (chr(byte) if 0x20 < byte < 0x7F and byte not in b'"\\' else f"\\x{byte:02X}" for byte in raw[:limit])
    text = "".join(escaped)
    return text[:limit] + (f"...({len(raw)} bytes)" if len(raw) > limit or len(text) > limit else "")
