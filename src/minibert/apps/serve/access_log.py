"""The server's access log: one line per request, written by a thread from a bounded queue, so a
slow or blocked stderr never stalls the event loop (process.py starts the thread, guard.py writes
the lines, escaping what the client sent: its ``request_target``)."""

from __future__ import annotations

import logging
import logging.handlers
import queue

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
