"""``GET /metrics``: the server's counters and histograms in Prometheus' text format, by hand
(no dependency). guard.py counts each request, the batcher each batch.

Requests are counted by route, never by the path a client sent: ``path`` is one of the app's
routes (``/v1/embeddings``), or ``other`` for every path that names none. A client that sends
20,000 different paths adds nothing but 20,000 to ``other``'s count, so the page and the server's
memory stay the size of the route table (each path used to be kept as a label forever).

>>> metrics = Metrics(routes={"/health"})
>>> metrics.request("/health", 200, 0.001, 0, 0)
>>> metrics.request('/a"} evil{x="', 404, 0.001, 0, 0)
>>> metrics.requests
{('/health', 200): 1, ('other', 404): 1}
"""

from __future__ import annotations

import asyncio
import threading


class Metrics:
    """Counters and histograms in Prometheus' text format, by hand (no dependency)."""

    LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
    BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

    OTHER = "other"  # the label of every path that is not a route

    def __init__(self, routes: set[str] | frozenset[str] = frozenset()):
        self.routes = frozenset(routes)  # the paths counted under their own label (the app's routes)
        self.requests: dict[tuple[str, int], int] = {}  # (route or "other", status): at most routes x statuses
        self.texts = self.tokens = 0
        self.latency = [0] * (len(self.LATENCY_BUCKETS) + 1)
        self.latency_sum = 0.0
        self.batches = [0] * (len(self.BATCH_BUCKETS) + 1)
        self.batch_texts = 0
        self.dropped_log_lines = lambda: 0  # serve() points it at the access log's queue
        self.connection_lines = lambda: []  # serve() points it at the connections' counters (http_limits.py)
        self.in_flight = 0  # requests being served now (Guard counts them)
        self._lock = threading.Lock()

    @staticmethod
    def _bucket(bounds, value) -> int:
        return next((i for i, bound in enumerate(bounds) if value <= bound), len(bounds))

    def request(self, path: str, status: int, seconds: float, texts: int, tokens: int) -> None:
        with self._lock:
            key = (path if path in self.routes else self.OTHER, status)
            self.requests[key] = self.requests.get(key, 0) + 1
            self.texts += texts
            self.tokens += tokens
            self.latency[self._bucket(self.LATENCY_BUCKETS, seconds)] += 1
            self.latency_sum += seconds

    def batch(self, texts: int, tokens: int) -> None:
        with self._lock:
            self.batches[self._bucket(self.BATCH_BUCKETS, texts)] += 1
            self.batch_texts += texts

    def render(self, queue_depth: int) -> str:
        lines = ["# TYPE minibert_requests_total counter"]
        for (path, status), count in sorted(self.requests.items()):
            lines.append(f'minibert_requests_total{{path="{label_value(path)}",status="{status}"}} {count}')
        lines += ["# TYPE minibert_texts_total counter", f"minibert_texts_total {self.texts}",
                  "# TYPE minibert_tokens_total counter", f"minibert_tokens_total {self.tokens}",
                  "# TYPE minibert_queue_depth gauge", f"minibert_queue_depth {queue_depth}",
                  "# TYPE minibert_log_lines_dropped_total counter",
                  f"minibert_log_lines_dropped_total {self.dropped_log_lines()}",
                  "# TYPE minibert_requests_in_flight gauge", f"minibert_requests_in_flight {self.in_flight}",
                  "# TYPE minibert_event_loop_tasks gauge", f"minibert_event_loop_tasks {len(asyncio.all_tasks())}",
                  *self.connection_lines()]  # fmt: skip
        lines += self._histogram("minibert_request_duration_seconds", self.LATENCY_BUCKETS, self.latency,
                                 self.latency_sum)  # fmt: skip
        lines += self._histogram("minibert_batch_size_texts", self.BATCH_BUCKETS, self.batches, self.batch_texts)
        return "\n".join(lines) + "\n"

    @staticmethod
    def _histogram(name, bounds, counts, total) -> list[str]:
        lines, running = [f"# TYPE {name} histogram"], 0
        for bound, count in zip((*bounds, "+Inf"), counts):
            running += count
            lines.append(f'{name}_bucket{{le="{bound}"}} {running}')
        return lines + [f"{name}_sum {total}", f"{name}_count {running}"]


def label_value(text: str) -> str:
    r"""A label value as Prometheus' text format writes it: backslash, double quote and line feed
    escaped, so no value can end its label or its line.

    >>> print(label_value('a"} evil{x="'))
    a\"} evil{x=\"
    """
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
