r"""The server's access log: one line per request, written by a thread from a bounded queue, so a
slow or blocked stderr never stalls the event loop (process.py starts the thread, guard.py writes
the lines).

What a client sent is written as sent, escaped: ``request_target`` writes a request's path as it
came on the request line (still percent-encoded, so ``%0A`` stays three characters and never
starts a line of its own), with quotes, backslashes, control and non-ASCII bytes as ``\xHH``
(nginx's escaping), and cut to ``TARGET_CHARACTERS``."""

from __future__ import annotations

import logging
import logging.handlers
import queue

TARGET_CHARACTERS = 1_000  # a request target's characters in a log line, at most (a path may be 64 KiB)

access_logger = logging.getLogger("minibert.serve.access")  # one line per request, written off the event loop
access_logger.propagate = False


class DroppingQueueHandler(logging.handlers.QueueHandler):
    """Access-log lines into a bounded queue that a thread writes out: a slow or blocked stderr (a
    pipe nobody reads) never stalls the event loop. When the queue is full a line is dropped and
    counted (``minibert_log_lines_dropped_total`` in /metrics) instead."""

    def __init__(self, capacity: int = 10_000):
        super().__init__(queue.Queue(capacity))
        self.dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


def request_target(raw: bytes, limit: int = TARGET_CHARACTERS) -> str:
    r"""A request's path as the client sent it, safe to write between the quotes of a log line:
    bytes outside printable ASCII, ``"`` and ``\`` as ``\xHH``, and at most ``limit`` characters
    (then ``...`` and the length).

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
