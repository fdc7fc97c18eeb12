"""``Guard``, around the app: the API key, the number of requests served at once, and each request's
access-log line and metrics."""

from __future__ import annotations

import hmac
import time

from starlette.applications import Starlette

from .access_log import access_logger
from .http_errors import RequestError, error_response
from .service import EmbeddingService


class Guard:
    """Around the app: the number of requests served at once (``--limit-concurrency``: 503 beyond),
    the API key (compared in constant time), one access-log line and the metrics of each request.
    (Errors inside the app become JSON in the app's exception handlers.)

    A request counts from the moment its whole body is in until its answer is sent: connections
    without a request, and requests whose bodies are still arriving (bounded by --read-timeout
    instead), hold no place, so clients trickling bodies cannot fill the limit; nor do requests
    without a body (/health, /metrics, /v1/models: a saturated server can still be watched)."""

    def __init__(self, app: Starlette, service: EmbeddingService):
        self.app, self.service = app, service
        key = service.settings.api_key
        self.expected = f"Bearer {key}".encode() if key else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        path = scope["path"]
        status = [500]
        scope.setdefault("state", {})

        async def send_tracked(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        metrics, counted = self.service.metrics, [False]

        async def receive_counted():
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body") and not counted[0]:
                counted[0] = True  # the body is in: from now on the request is being served
                metrics.in_flight += 1
                if metrics.in_flight > (limit := self.service.settings.limit_concurrency):
                    raise RequestError(503, f"the server is serving {limit} requests at once, its limit "
                                            "(--limit-concurrency); retry shortly", code="overloaded")  # fmt: skip
            return message

        try:
            if self.expected is not None and path != "/health" and not self._authorized(scope):
                error = RequestError(401, "a valid API key is required: send 'Authorization: Bearer KEY'",
                                     code="invalid_api_key")  # fmt: skip
                await error_response(path, error)(scope, receive, send_tracked)
            else:
                await self.app(scope, receive_counted, send_tracked)
        finally:
            metrics.in_flight -= counted[0]
            seconds = time.perf_counter() - started
            texts, tokens = scope["state"].get("counts", (0, 0))
            client = scope.get("client") or ("-", 0)
            access_logger.info('%s:%s - "%s %s HTTP/%s" %d %d texts %d tokens %.1fms', client[0], client[1],
                        scope["method"], path, scope.get("http_version", "1.1"), status[0], texts, tokens,
                        seconds * 1000)  # fmt: skip
            self.service.metrics.request(path, status[0], seconds, texts, tokens)

    def _authorized(self, scope) -> bool:
        given = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        return hmac.compare_digest(given, self.expected)
