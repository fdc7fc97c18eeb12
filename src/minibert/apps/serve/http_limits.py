"""What a client can hold on the server before it has asked for anything: a connection, its
headers' size and time, and the server's file descriptors.

uvicorn keeps a connection open for as long as its client likes until a request arrives: one that
connects and sends nothing, or sends its headers a byte a second, holds a socket and a file
descriptor forever, and a thousand such clients used to exhaust the server (its concurrency limit
counted them too, so every normal request got 503). This protocol is uvicorn's own h11 protocol
with the bounds nginx has (``client_header_timeout``, ``large_client_header_buffers``, and its
reuse of idle connections when it runs out of them):

* ``header_seconds`` (``--header-timeout``): from the moment a connection is accepted (or, on a
  kept-alive connection, from the first byte of its next request), the request line and headers
  must be in within this time. Else the connection is closed: silently if nothing came, with
  ``408 Request Timeout`` if part of a request did.
* ``max_header_bytes`` (``--max-header-bytes``): larger request lines and headers get ``431
  Request Header Fields Too Large`` and the connection is closed.
* ``send_seconds`` (``--send-timeout``): an answer the client does not read. uvicorn hands a whole
  response to the transport, whose buffer (the vectors of 2,048 texts are 15 MB of JSON) stays in
  memory until the client reads it, forever if it never does. While writing is paused on a full
  buffer, what the client has not read (that buffer and, on Linux, the kernel's send queue) must
  shrink at least once every ``send_seconds`` (nginx's ``send_timeout``), else the connection is
  aborted and its buffer freed.
* At the open-files limit: the server raises its soft limit to the hard one at start
  (``raise_open_files_limit``) and holds at most ``ConnectionRoom.capacity`` connections; a new
  one beyond that closes the connection that has waited longest without a request in progress
  (never one whose request is being served).

* ``linger_seconds`` (``--read-timeout``): an answer sent before its request's body was read (408
  for a body too slow, 413 for one too large: guard.py marks it ``Connection: close``) ends the
  connection, since the rest of that body would be read as the next request. Closing at once
  while the client is still sending would reset the connection, and the client could lose the
  answer; so, as nginx's ``lingering_close``, the server sends the answer and its end (a
  half-close), then reads and discards what still arrives, until the client closes its side or
  ``linger_seconds`` pass (``LingeringTransport``). A client trickling a body a byte at a time
  holds its connection no longer than that, and meanwhile it may be closed to make room.
* Requests that are not HTTP (a bad Content-Length, a malformed request line) get ``400`` as JSON,
  and the connection is closed.

These answers (400, 408, 431) are JSON in the shape the app's own errors have: OpenAI's when the
request line's target starts with ``/v1/`` (the openai client shows its message), TEI's otherwise
(http_errors.py's ``error_body``).

Between requests, a kept-alive connection is closed after uvicorn's ``timeout_keep_alive``
(``--keep-alive-timeout``); a request's body has its own bound (``--read-timeout``,
request_parsing.py's ``read_json``), and the requests served at once theirs (``--limit-concurrency``,
guard.py's ``Guard``): sockets do not count, requests do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .http_errors import RequestError, error_body, target_path

FILES_KEPT_FREE = 64  # descriptors left for what the server opens itself (model files, logs, threads' pipes)
REQUEST_LINE_KEPT = 64  # a request's first bytes kept until its headers are in: its target picks an error's shape


class ConnectionRoom:
    """The server's open connections, and those of them waiting for a request, oldest first.

    A connection waits from when it is accepted (or its last response is sent) until its next
    request's headers are in; only waiting connections are ever closed to make room. Counters for
    /metrics: ``opened`` (now), ``shed`` (closed to make room), ``timed_out`` (headers too slow),
    ``unread`` (aborted: an answer not read).
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.opened = self.shed = self.timed_out = self.unread = 0
        self.waiting: dict[BoundedH11Protocol, None] = {}  # insertion order: the longest waiting first
        self.closing: set[BoundedH11Protocol] = set()  # shed, not yet gone

    def arrived(self, connection: BoundedH11Protocol) -> None:
        self.opened += 1
        self.waiting[connection] = None
        excess = self.opened - len(self.closing) - self.capacity
        while excess > 0 and self.waiting:
            oldest = next(iter(self.waiting))
            del self.waiting[oldest]
            self.closing.add(oldest)
            self.shed += 1
            oldest.transport.close()
            excess -= 1

    def set_waiting(self, connection: BoundedH11Protocol, waiting: bool) -> None:
        if not waiting:
            self.waiting.pop(connection, None)
        elif connection not in self.waiting and connection not in self.closing:
            self.waiting[connection] = None  # (one already waiting keeps its place)

    def gone(self, connection: BoundedH11Protocol) -> None:
        self.opened -= 1
        self.waiting.pop(connection, None)
        self.closing.discard(connection)

    def prometheus_lines(self) -> list[str]:
        return ["# TYPE minibert_connections_open gauge", f"minibert_connections_open {self.opened}",
                "# TYPE minibert_connections_shed_total counter", f"minibert_connections_shed_total {self.shed}",
                "# TYPE minibert_connections_header_timeout_total counter",
                f"minibert_connections_header_timeout_total {self.timed_out}",
                "# TYPE minibert_connections_send_timeout_total counter",
                f"minibert_connections_send_timeout_total {self.unread}"]  # fmt: skip


class LingeringTransport:
    """A connection's transport as uvicorn sees it, with one change: ``close()`` while the client
    is still sending a request's body lingers first (the module's docstring says why). Every other
    attribute is the real transport's."""

    def __init__(self, transport: asyncio.Transport, connection: BoundedH11Protocol):
        self._transport, self._connection = transport, connection
        self.lingering = False

    def __getattr__(self, name: str):
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def close(self) -> None:
        if self.lingering or self._transport.is_closing() or self._connection.conn.their_state is not h11.SEND_BODY:
            return self._transport.close()
        self.lingering = True
        self._transport.write_eof()  # the answer, then its end: the client reads it before anything is reset
        self._transport.resume_reading()  # (what arrives now is discarded: BoundedH11Protocol.data_received)
        self._connection.lingering_started()


class BoundedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol (one instance per connection) with the bounds above; serve()
    makes a subclass carrying the flags' values and the shared ConnectionRoom (``with_limits``)."""

    max_header_bytes = 64 * 1024
    header_seconds = 5.0
    send_seconds = 60.0
    linger_seconds = 30.0
    room = ConnectionRoom(capacity=1 << 62)

    @classmethod
    def with_limits(cls, max_header_bytes: int, header_seconds: float, send_seconds: float, linger_seconds: float,
                    room: ConnectionRoom) -> type:  # fmt: skip
        limits = {"max_header_bytes": max_header_bytes, "header_seconds": header_seconds,
                  "send_seconds": send_seconds, "linger_seconds": linger_seconds, "room": room}  # fmt: skip
        return type(cls.__name__, (cls,), limits)

    def connection_made(self, transport) -> None:
        super().connection_made(LingeringTransport(transport, self))
        self._header_bytes, self._tail, self._start = 0, b"", b""
        self._send_timer, self._unsent, self._linger_timer = None, 0, None
        self._header_timer = self.loop.call_later(self.header_seconds, self._headers_too_slow)
        self.room.arrived(self)

    def data_received(self, data: bytes) -> None:
        if self.transport.lingering:  # the rest of a body that will never be read
            return
        if self.conn.their_state is h11.IDLE:  # the next request's line and headers are arriving
            if self._header_timer is None:  # (a kept-alive connection: its clock starts now)
                self._header_timer = self.loop.call_later(self.header_seconds, self._headers_too_slow)
            if len(self._start) < REQUEST_LINE_KEPT:
                self._start = (self._start + data)[:REQUEST_LINE_KEPT]
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
        self._note_waiting()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # (uvicorn starts the keep-alive clock here, and parses what is buffered)
        pending = self.conn.trailing_data[0] if self.conn.their_state is h11.IDLE else b""
        if pending and self._header_timer is None and not self.transport.is_closing():
            # part of the next request came with the last one's bytes (pipelined): its clock starts
            # now, as for bytes arriving on their own (they never pass data_received while IDLE)
            self._header_timer = self.loop.call_later(self.header_seconds, self._headers_too_slow)
            self._header_bytes, self._start = len(pending), bytes(pending[:REQUEST_LINE_KEPT])
        self._note_waiting()

    def pause_writing(self) -> None:
        """The transport's buffer is full: the client must read some of it within send_seconds."""
        super().pause_writing()
        if self._send_timer is None:
            self._unsent = self._unread_bytes()
            self._send_timer = self.loop.call_later(self.send_seconds, self._check_answer_read)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stop_send_clock()

    def _unread_bytes(self) -> int:
        """The transport's buffer, and the kernel's send queue where it says (Linux's SIOCOUTQ):
        the kernel holds megabytes of a connection's answer, and drains them first."""
        unread = self.transport.get_write_buffer_size()
        with contextlib.suppress(ImportError, OSError, AttributeError, ValueError):
            import fcntl
            import termios

            queued = fcntl.ioctl(self.transport.get_extra_info("socket").fileno(), termios.TIOCOUTQ, bytes(4))
            unread += int.from_bytes(queued, sys.byteorder)
        return unread

    def _check_answer_read(self) -> None:
        unsent = self._unread_bytes()
        if unsent < self._unsent:  # the client read some: it gets another send_seconds
            self._unsent = unsent
            self._send_timer = self.loop.call_later(self.send_seconds, self._check_answer_read)
            return
        self._send_timer = None
        self.room.unread += 1
        self.transport.abort()  # (close() would keep the buffer until it is written: never)

    def _stop_send_clock(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def lingering_started(self) -> None:
        """The answer is sent and the connection is ending: it closes within linger_seconds, and
        may be closed sooner to make room."""
        self._linger_timer = self.loop.call_later(self.linger_seconds, self.transport.close)
        self._note_waiting()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes that are not an HTTP request (h11 cannot parse them), as JSON."""
        self._refuse(400, "Bad Request", "the request is not valid HTTP/1.1 (its request line, a header or its "
                                         "Content-Length is malformed)")  # fmt: skip

    def connection_lost(self, exc) -> None:
        self._headers_done()
        self._stop_send_clock()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        self.room.gone(self)
        super().connection_lost(exc)

    def _note_waiting(self) -> None:
        """In the room's waiting list while no request is in progress on this connection (or it is
        only lingering before it closes)."""
        if self.transport.lingering:
            return self.room.set_waiting(self, True)
        waiting = self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)
        self.room.set_waiting(self, waiting and not self.transport.is_closing())

    def _headers_done(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer, self._header_bytes, self._tail, self._start = None, 0, b"", b""

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.conn.their_state is not h11.IDLE or self.transport.is_closing():
            return
        self.room.timed_out += 1
        if not self._header_bytes:  # nothing came: nothing to answer (nginx closes these silently too)
            self._headers_done()
            return self.transport.close()
        self._refuse(408, "Request Timeout", f"the request line and headers did not arrive within "
                                             f"{self.header_seconds:g} s")  # fmt: skip

    def _refuse(self, status: int, reason: str, message: str) -> None:
        """A JSON error, in the shape of the API the request's target belongs to (``/v1/``: OpenAI's),
        and the connection closed: what follows cannot be parsed."""
        body = json.dumps(error_body(self._target(), RequestError(status, message))).encode()
        self._headers_done()
        head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
                "connection: close\r\n\r\n").encode()  # fmt: skip
        if not self.transport.is_closing():
            self.transport.write(head + body)
            self.transport.close()

    def _target(self) -> str:
        """The request's target as far as its first bytes show it (``POST /v1/embeddings HTTP/1.1``:
        ``/v1/embeddings``); "" when the request line has not come that far."""
        method, _, rest = self._start.lstrip(b"\r\n").partition(b" ")
        return target_path(rest.split(b" ", 1)[0].decode("latin-1")) if method and rest else ""


def raise_open_files_limit() -> tuple[int, int] | None:
    """Raise this process's soft open-files limit (RLIMIT_NOFILE) to its hard limit, as nginx's
    ``worker_rlimit_nofile`` and most servers do: each connection is a file descriptor, and the
    soft limit is often 1,024 while the hard one is far higher. (before, after), or None where
    the system has no such limit (Windows); -1 stands for unlimited."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft, soft
    # An unlimited hard limit is capped by the kernel (Linux: fs.nr_open; macOS: 10,240 per process).
    for target in [hard] if hard != resource.RLIM_INFINITY else [1 << 20, 65_536, 10_240]:
        if soft == resource.RLIM_INFINITY or target <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            break
        except (ValueError, OSError):
            continue
    return soft, resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def connection_capacity(open_files_limit: int | None) -> int:
    """How many connections fit in the open-files limit: the limit, less the descriptors open now
    and FILES_KEPT_FREE for what the server opens later."""
    if open_files_limit is None or open_files_limit < 0 or open_files_limit >= 1 << 40:  # (-1: unlimited)
        return 1 << 40
    try:
        in_use = len(os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"))
    except OSError:
        in_use = 32
    return max(1, open_files_limit - in_use - FILES_KEPT_FREE)
