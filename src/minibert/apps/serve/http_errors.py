"""A bad request as an exception (``RequestError``: its status, a message naming the problem, the
field), and as the JSON body each API dialect expects (``error_response``)."""

from __future__ import annotations

import json

from starlette.responses import JSONResponse

from ...errors import PicklableError


class ClientGone(Exception):
    """The client closed the connection before its answer was ready."""


class RequestError(PicklableError):
    """A bad request: its HTTP status, a message naming the problem, and the field."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def target_path(target):
    """The path a request target names (str or bytes): itself, or for the absolute form a client
    sends through a proxy, ``http://host:8000/v1/embeddings`` → ``/v1/embeddings`` (no path: ``/``)."""
    slash = "/" if isinstance(target, str) else b"/"
    scheme, separator, after_scheme = target.partition(slash * 2)
    if not separator or scheme.lower() not in ("http:", "https:", b"http:", b"https:"):
        return target
    return slash + after_scheme.split(slash, 1)[1] if slash in after_scheme else slash


def error_body(path: str, error: RequestError) -> dict:
    """An error as JSON: OpenAI's shape under /v1/, text-embeddings-inference's elsewhere (whose
    ``error_type`` is ``Validation`` for a client's mistake, ``Backend`` for the server's). The
    connection layer (http_limits.py) writes its 400, 408 and 431 with it too."""
    if path.startswith("/v1/"):
        kinds = {401: "authentication_error", 503: "server_error", 500: "server_error"}
        return {"error": {"message": error.message, "type": kinds.get(error.status, "invalid_request_error"),
                          "param": error.param, "code": error.code}}  # fmt: skip
    kinds = {503: "Overloaded", 401: "Unauthorized"}
    return {"error": error.message,
            "error_type": kinds.get(error.status, "Validation" if error.status < 500 else "Backend")}  # fmt: skip


class ErrorJSON(JSONResponse):
    """An error's JSON, whatever the client's text in it: a lone surrogate that a request's JSON
    escaped (``"\\ud800"``, a field's name quoted back) is written escaped again, as JSON writes
    it, where starlette's UTF-8 encoding raised (a 500 for the client's mistake)."""

    def render(self, content) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
        return text.encode("utf-8", "backslashreplace")  # (only a surrogate needs it: U+D800 -> \ud800)


def error_response(path: str, error: RequestError, headers: dict[str, str] | None = None) -> JSONResponse:
    """An error as a JSON answer (``error_body``), with the headers its status calls for."""
    body = error_body(path, error)
    headers = dict(headers or {})
    if error.status == 503:
        headers["Retry-After"] = "1"
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return ErrorJSON(body, status_code=error.status, headers=headers)
