"""The part of an HTTP request before its body, bounded: its size and its time.

uvicorn reads a request's line and headers for as long as they come, at whatever rate: 32 MiB of
header lines, or one header sent a byte a second, each hold a connection (and memory, and a file
descriptor) for as long as the client likes; a thousand such clients exhaust the server. This
protocol is uvicorn's own h11 protocol with two bounds, as nginx and text-embeddings-inference
have them:

* ``max_header_bytes``: a request line and headers larger than this get ``431 Request Header
  Fields Too Large`` and the connection is closed;
* ``header_seconds``: from the first byte of a request, its line and headers must be in within
  this time, else ``408 Request Timeout`` and the connection is closed.

(The body has its own bound, ``--read-timeout`` in serve.py's ``read_json``; the number of
connections served at once is uvicorn's ``limit_concurrency``: 503 beyond.)
"""

from __future__ import annotations

import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class BoundedH11Protocol(H11Protocol):
    max_header_bytes = 64 * 1024
    header_seconds = 30.0

    @classmethod
    def with_limits(cls, max_header_bytes: int, header_seconds: float) -> type[BoundedH11Protocol]:
        return type(cls.__name__, (cls,), {"max_header_bytes": max_header_bytes, "header_seconds": header_seconds})

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._header_bytes, self._tail = 0, b""
        self._header_timer = None

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # the next request's line and headers are arriving
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(self.header_seconds, self._headers_too_slow)
            seen = self._tail + data  # the blank line that ends the headers may straddle two reads
            end = seen.find(b"\r\n\r\n")
            self._header_bytes += len(data) if end < 0 else end + 4 - len(self._tail)  # (not the body's)
            self._tail = seen[-3:]
            if self._header_bytes > self.max_header_bytes:
                return self._refuse(
                    431,
                    "Request Header Fields Too Large",
                    f"the request line and headers are larger than {self.max_header_bytes} bytes",
                )
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # they are in: the app has the request
            self._headers_done()

    def connection_lost(self, exc) -> None:
        self._headers_done()
        super().connection_lost(exc)

    def _headers_done(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer, self._header_bytes, self._tail = None, 0, b""

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and self._header_bytes:
            self._refuse(408, "Request Timeout", f"the request line and headers did not arrive within "
                                                 f"{self.header_seconds:g} s")  # fmt: skip

    def _refuse(self, status: int, reason: str, message: str) -> None:
        """A JSON error (TEI's shape) and the connection closed: what follows cannot be parsed."""
        self._headers_done()
        body = json.dumps({"error": message, "error_type": "Validation"}).encode()
        head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
                "connection: close\r\n\r\n").encode()  # fmt: skip
        if not self.transport.is_closing():
            self.transport.write(head + body)
            self.transport.close()
