"""``build_app``: the routes, the error handlers and the guard, as one ASGI app."""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .batching import Overloaded
from .guard import Guard, request_target
from .http_errors import ClientGone, RequestError, error_response
from .routes import Routes
from .service import EmbeddingService
from .settings import ServeSettings

logger = logging.getLogger("minibert.serve")


def build_app(settings: ServeSettings, *, on_fatal=None) -> Starlette:
    """The ASGI app. The model loads in the background after start-up (``/health`` says when)."""
    service = EmbeddingService(settings)
    routes = Routes(service, on_fatal)
    table = routes.routes()
    service.metrics.routes = frozenset(route.path for route in table)  # counted by route; any other path: "other"
    answered = ", ".join(f"{'/'.join(sorted(route.methods - {'HEAD'}))} {route.path}" for route in table)  # (404s)

    async def request_error(request: Request, error: RequestError) -> Response:
        return error_response(request.url.path, error)

    async def overloaded(request: Request, error: Overloaded) -> Response:
        return error_response(request.url.path, RequestError(503, f"overloaded: {error}; retry shortly",
                                                             code="overloaded"))  # fmt: skip

    async def http_exception(request: Request, error: HTTPException) -> Response:
        """Starlette's own errors (no such route: 404; a route without that method: 405) as JSON."""
        headers = dict(error.headers or {})
        if "Allow" in headers:  # (Starlette joins a set of methods: its order changed from run to run)
            headers["Allow"] = ", ".join(sorted(headers["Allow"].split(", ")))
        message = _http_error_message(request, error, headers.get("Allow", ""), answered)
        failure = RequestError(error.status_code, message, code=_HTTP_ERROR_CODES.get(error.status_code))
        return error_response(request.url.path, failure, headers=headers)

    async def client_gone(request: Request, error: ClientGone) -> Response:
        return Response(status_code=499)  # nobody reads it (nginx's code for "client closed request")

    async def internal(request: Request, error: Exception) -> Response:
        """A bug: one log line and a 500 (Starlette raises the error again after it; guard.py ends it there)."""
        target = request_target(request.scope.get("raw_path") or request.url.path.encode())
        logger.error("internal error on %s: %s: %s", target, type(error).__name__, error)
        return error_response(request.url.path, RequestError(500, "internal server error", code="internal_error"))

    handlers = {RequestError: request_error, Overloaded: overloaded, ClientGone: client_gone,
                HTTPException: http_exception, Exception: internal}  # fmt: skip
    app = Starlette(routes=table, lifespan=routes.lifespan, exception_handlers=handlers)
    app.router.redirect_slashes = False  # /v1/embeddings/ is no endpoint: the JSON 404, not a redirect to elsewhere
    app.state.service = service
    return Guard(app, service)


_HTTP_ERROR_CODES = {404: "not_found", 405: "method_not_allowed"}
_PATH_SHOWN = 200  # characters of a client's path repeated in a message, at most


def _http_error_message(request: Request, error: HTTPException, allow: str, answered: str) -> str:
    """What a 404 or 405 says: the request, and what the server does answer (``answered``: its routes)."""
    asked = f"{request.method} {request.url.path[:_PATH_SHOWN]}"
    if error.status_code == 404:
        return f"no endpoint {asked}; this server answers {answered}"
    if error.status_code == 405:
        return f"{asked} is not allowed: {request.url.path[:_PATH_SHOWN]} takes {allow}"
    return f"{asked}: {error.detail}"
