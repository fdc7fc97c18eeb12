"""`minibert serve`: an embedding server speaking the OpenAI embeddings API (and
text-embeddings-inference's ``/embed`` and ``/tokenize``), with dynamic batching.

The classic BERT tutorials end with bert-as-service: one model behind a server, many clients,
batching done for them. Today's embedding servers speak the OpenAI API, so any OpenAI client works::

    minibert serve --model sentence-transformers/all-MiniLM-L6-v2 --port 8080

    from openai import OpenAI
    client = OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="unused")
    client.embeddings.create(model="all-MiniLM-L6-v2", input=["first text", "second text"])

How a request flows:

1. The body is read (at most ``max_body_bytes``: counted as it arrives, not trusted from a header)
   and checked field by field; a bad request gets its status and a JSON error naming the problem.
2. Texts are tokenized off the event loop (the same pieces ``Embedder.embed`` would use, prompt
   included); each text longer than the model is cut or refused, as the request's ``truncate``
   says, never silently.
3. The pieces join the dynamic batcher (batching.py), which merges concurrent requests into large
   batches and runs them in a thread; the response carries exactly the caller's vectors.

Built on Starlette (routing, requests, responses: small, and everything here is validated by hand
so that every error message names its field) served by uvicorn. Both are an optional extra
(``pip install minibert[serve]``): only this module imports them.

Endpoints: ``POST /v1/embeddings``, ``GET /v1/models``, ``POST /embed``, ``POST /tokenize``,
``GET /health`` (200 once the model is loaded, else 503), ``GET /metrics`` (Prometheus text).
A model whose config.json names a sequence classifier (a cross-encoder reranker, a sentiment
model) is served instead through ``POST /rerank`` and ``POST /predict`` (text-embeddings-inference's)
and ``POST /v1/rerank`` (the Cohere/Jina/infinity/vLLM rerank API), with the same batching,
limits, key and metrics. ``--auto-truncate`` cuts over-length inputs unless a request says
``"truncate": false`` (without it they are refused with 422 unless it says ``true``).
With an API key, every endpoint except ``/health`` needs ``Authorization: Bearer KEY``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import json
import logging
import logging.handlers
import os
import queue
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ..embedding.options import EmbedOptions
from ..formats.json_files import parse_json
from .batching import DynamicBatcher, Overloaded
from .serve_settings import ServeSettings

logger = logging.getLogger("minibert.serve")
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


class PairPieces(list):
    """A text (or pair) for the classifier. As a list: its pieces without [CLS] and the last [SEP],
    as the batcher counts them (it adds those two); ``framed`` and ``token_types``: the tokenizer's
    own framing of it (``[CLS] A [SEP] B [SEP]``, tokenizer/framing.py), which the model runs."""

    def __init__(self, framed: list[int], token_types: list[int]):
        super().__init__(framed[1:-1])
        self.framed, self.token_types = framed, token_types


class ClientGone(Exception):
    """The client closed the connection before its answer was ready."""


class RequestError(Exception):
    """A bad request: its HTTP status, a message naming the problem, and the field."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


# ----------------------------------------------------------------------------- metrics


class Metrics:
    """Counters and histograms in Prometheus' text format, by hand (no dependency)."""

    LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
    BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

    def __init__(self):
        self.requests: dict[tuple[str, int], int] = {}
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
            key = (path, status)
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
            lines.append(f'minibert_requests_total{{path="{path}",status="{status}"}} {count}')
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


# ----------------------------------------------------------------------------- the service


class EmbeddingService:
    """The loaded model, the batcher and the limits, shared by every request."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        self.metrics = Metrics()
        self.embedder = None
        self.classifier = None  # a CrossEncoder, when the model is a sequence classifier (a reranker)
        self.batcher: DynamicBatcher | None = None
        self.load_error: BaseException | None = None
        self.model_id = settings.served_model_name or os.path.basename(os.path.normpath(settings.model))
        self.model_ids = {self.model_id, settings.model}
        self._tokenizing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minibert-tokenize")
        self.options = EmbedOptions()  # the model's recipe; a request may only change normalize

    @property
    def loaded(self) -> bool:
        return self.embedder is not None or self.classifier is not None

    def load(self) -> None:
        """An embedder, or for a checkpoint whose architecture is a sequence classifier (a
        cross-encoder, a sentiment model: its config.json says so) the classifier."""
        if _is_sequence_classifier(self.settings.model):
            from ..tasks.rerank import CrossEncoder

            self.classifier = CrossEncoder(self.settings.model, dtype=self.settings.dtype, gemm=self.settings.gemm)
            return
        from ..embedding.embedder import Embedder

        embedder = Embedder.from_pretrained(self.settings.model, dtype=self.settings.dtype, gemm=self.settings.gemm)
        self.dimension = embedder.dimension(self.options)
        self.embedder = embedder

    def compute(self, pieces: list[list[int]], job: tuple) -> np.ndarray:
        """One merged batch of requests that share the job key: (pooling skip, options) for
        embeddings, ("logits",) for the classifier's raw scores (N, labels)."""
        if job == ("logits",):
            return self._logits(pieces)
        skip, options = job
        return self.embedder.embed_pieces(pieces, options, skip=skip)

    def _logits(self, rows: list[PairPieces]) -> np.ndarray:
        """(N, labels) raw scores of merged requests' rows, run as the offline CrossEncoder runs
        them: sorted by length, 32 at a time (one padded batch of mixed lengths is slower)."""
        from ..tasks.loading import run_rows

        inputs = {"input_ids": [row.framed for row in rows], "token_type_ids": [row.token_types for row in rows]}
        results = run_rows(self.classifier.model, self.classifier.tokenizer, inputs, 32)
        return np.stack([result["logits"] for result in results])

    def pair_pieces(self, firsts: list[str], seconds: list[str] | None, truncate: bool, field: str):
        """Each text (or pair) as PairPieces for the classifier, cut to its length (as the
        tokenizer's longest_first cuts a pair) or refused; and the token count."""
        tokenizer, limit = self.classifier.tokenizer, self.classifier.max_length
        encoded = tokenizer(firsts, seconds, truncation=True if truncate else None,
                            max_length=limit if truncate else None, verbose=False)  # fmt: skip
        out = []
        for index, (ids, types) in enumerate(zip(encoded["input_ids"], encoded["token_type_ids"])):
            if len(ids) > limit:
                raise RequestError(422, f"{field}[{index}] has {len(ids)} tokens, more than the model's limit of "
                                        f"{limit}; shorten it or send \"truncate\": true", field,
                                   "context_length_exceeded")  # fmt: skip
            out.append(PairPieces(ids, types))
        return out, sum(len(row) + 2 for row in out)

    async def tokenize(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self._tokenizing, function, *args)

    def pieces_of(self, inputs: list, truncate: bool, field: str) -> tuple[list[list[int]], int, int]:
        """Each input's piece ids (texts tokenized with the model's prompt; id arrays checked),
        cut to the model's length or refused; and the pooling skip and the token count."""
        embedder = self.embedder
        room = embedder.max_length - 2
        if isinstance(inputs[0], str):
            pieces, skip = embedder.pieces_for_embedding(inputs, self.options)
        else:
            vocab = embedder.tokenizer.vocab_size
            for index, ids in enumerate(inputs):
                bad = next((i for i in ids if not 0 <= i < vocab), None)
                if bad is not None:
                    raise RequestError(422, f"{field}[{index}] has token id {bad}, outside the vocabulary "
                                            f"[0, {vocab})", field)  # fmt: skip
            pieces, skip = [list(ids) for ids in inputs], 0
        for index, ids in enumerate(pieces):
            if len(ids) > room:
                if not truncate:
                    raise RequestError(
                        422, f"{field}[{index}] has {len(ids) + 2} tokens, more than the model's limit of "
                        f"{room + 2}; shorten it or send \"truncate\": true", field, "context_length_exceeded",
                    )  # fmt: skip
                pieces[index] = ids[:room]
        return pieces, skip, sum(len(ids) + 2 for ids in pieces)


# ----------------------------------------------------------------------------- request parsing


async def read_json(request: Request, limit: int, seconds: float = 30.0):
    """The body as JSON, read up to ``limit`` bytes (413 past it) within ``seconds`` (408 past it;
    a client trickling its body holds no connection longer); 400 if it is not JSON or nests
    deeper than 64 levels."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"the request body has {int(declared)} bytes, more than the limit of {limit}")
    body = bytearray()
    try:
        async with asyncio.timeout(seconds):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise RequestError(413, f"the request body is larger than the limit of {limit} bytes")
    except ClientDisconnect:
        raise RequestError(400, "the client disconnected while sending the body") from None
    except TimeoutError:
        raise RequestError(408, f"the request body did not arrive within {seconds:g} s") from None
    try:
        value = parse_json(bytes(body))
    except ValueError as error:
        raise RequestError(400, f"the request body is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise RequestError(422, "the request body must be a JSON object")
    return value


def parse_inputs(value, field: str, settings: ServeSettings, allow_ids: bool) -> list:
    """A str, a list of str, or (``allow_ids``) a list of token ids or a list of such lists."""
    if isinstance(value, str):
        inputs = [value]
    elif isinstance(value, list) and value and all(_is_id(item) for item in value) and allow_ids:
        inputs = [value]
    elif isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        inputs = value
    elif (isinstance(value, list) and value and allow_ids
          and all(isinstance(item, list) and all(_is_id(i) for i in item) for item in value)):  # fmt: skip
        inputs = value
    elif isinstance(value, list) and not value:
        raise RequestError(422, f"{field} is empty", field)
    else:
        kinds = "a string, a list of strings" + (", a list of token ids or a list of such lists" if allow_ids else "")
        raise RequestError(422, f"{field} must be {kinds}", field)
    if len(inputs) > settings.max_inputs:
        raise RequestError(422, f"{field} has {len(inputs)} items, more than the limit of {settings.max_inputs} "
                                "per request", field, "too_many_inputs")  # fmt: skip
    for index, item in enumerate(inputs):
        if not item:
            raise RequestError(422, f"{field}[{index}] is empty", field)
        if isinstance(item, str) and len(item) > settings.max_input_chars:
            raise RequestError(422, f"{field}[{index}] has {len(item)} characters, more than the limit of "
                                    f"{settings.max_input_chars}", field, "input_too_long")  # fmt: skip
    return inputs


def _is_sequence_classifier(model: str) -> bool:
    from ..formats.hub import resolve_file

    path = resolve_file(model, "config.json")
    try:
        architectures = parse_json(path.read_bytes()).get("architectures") or []
    except (ValueError, AttributeError):
        return False  # the loader says what is wrong with it
    return isinstance(architectures, list) and any(
        isinstance(name, str) and name.endswith("ForSequenceClassification") for name in architectures)  # fmt: skip


def _text_field(body: dict, name: str, settings: ServeSettings) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise RequestError(422, f"{name} must be a non-empty string", name)
    if len(value) > settings.max_input_chars:
        limit = settings.max_input_chars
        raise RequestError(422, f"{name} has {len(value)} characters, more than the limit of {limit}", name,
                           "input_too_long")  # fmt: skip
    return value


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _flag(body: dict, name: str, default: bool) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise RequestError(422, f"{name} must be true or false, got {json.dumps(value)[:40]}", name)
    return value


# ----------------------------------------------------------------------------- endpoints


class Routes:
    """The endpoints, each a method, over the one ``EmbeddingService``; and the app's lifespan:
    the batcher runs while the app does, the model loads in the background (``/health`` says when)."""

    def __init__(self, service: EmbeddingService, on_fatal=None):
        self.service, self.settings, self.on_fatal = service, service.settings, on_fatal

    def routes(self) -> list[Route]:
        return [
            Route("/v1/embeddings", self.openai_embeddings, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/embed", self.tei_embed, methods=["POST"]),
            Route("/tokenize", self.tei_tokenize, methods=["POST"]),
            Route("/rerank", self.tei_rerank, methods=["POST"]),
            Route("/predict", self.tei_predict, methods=["POST"]),
            Route("/v1/rerank", self.v1_rerank, methods=["POST"]),
            Route("/health", self.health, methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
        ]

    async def embed_job(self, request: Request, pieces, skip: int, normalize: bool | None) -> np.ndarray:
        options = EmbedOptions.of(self.service.options, normalize=normalize)  # requests that share it batch together
        return await self.batched(request, pieces, (skip, options))

    async def logits_job(self, request: Request, pieces: list[PairPieces]) -> np.ndarray:
        return await self.batched(request, pieces, ("logits",))  # (N, labels)

    async def batched(self, request: Request, pieces: list, key: tuple) -> np.ndarray:
        """The request's rows through the dynamic batcher, merged with others of the same ``key``."""
        job = self.service.batcher.submit(pieces, key)
        gone = asyncio.ensure_future(_client_gone(request))
        try:
            done, _ = await asyncio.wait({job.future, gone}, return_when=asyncio.FIRST_COMPLETED)
            if job.future not in done:  # the client left: its job is skipped if it has not run
                self.service.batcher.cancel(job)
                raise ClientGone
            return job.future.result()
        finally:
            gone.cancel()

    def ready(self, kind: str = "embeddings") -> None:
        """The model is loaded and is of the ``kind`` the endpoint needs: "embeddings" or "classifier"."""
        if self.service.load_error is not None:
            raise RequestError(503, "the model failed to load")
        if not self.service.loaded:
            raise RequestError(503, "the model is still loading; retry shortly", code="loading")
        if kind == "any":
            return
        if kind == "embeddings" and self.service.embedder is None:
            raise RequestError(400, f"the model {self.service.model_id!r} is a sequence classifier: this server "
                                    "answers /rerank, /predict and /v1/rerank, not embeddings",
                               code="model_not_supported")  # fmt: skip
        if kind == "classifier" and self.service.classifier is None:
            raise RequestError(400, f"the model {self.service.model_id!r} is an embedding model: reranking and "
                                    "/predict need a sequence classifier (a cross-encoder) served with --model",
                               code="model_not_supported")  # fmt: skip

    async def scores_of_pairs(self, request: Request, query: str, documents: list[str], field: str, truncate: bool,
                              raw: bool) -> tuple[np.ndarray, int]:  # fmt: skip
        """Relevance of each document to the query (the cross-encoder's activation unless ``raw``)."""
        from ..tasks.rerank import SCORE_ACTIVATIONS

        classifier = self.service.classifier
        if classifier.num_labels != 1:
            raise RequestError(400, f"reranking needs a model with one output (a relevance score); "
                                    f"{self.service.model_id!r} has {classifier.num_labels} labels: use /predict",
                               code="model_not_supported")  # fmt: skip
        pieces, tokens = await self.service.tokenize(self.service.pair_pieces, [query] * len(documents), documents,
                                                     truncate, field)  # fmt: skip
        request.state.counts = (len(documents), tokens)
        logits = (await self.logits_job(request, pieces))[:, 0]
        return (logits if raw else SCORE_ACTIVATIONS[classifier.activation_fn](logits)), tokens

    async def tei_rerank(self, request: Request) -> Response:
        """text-embeddings-inference's POST /rerank: {"query", "texts", "raw_scores", "return_text",
        "truncate"} → [{"index", "score", "text"?}], best first."""
        self.ready("classifier")
        body = await read_json(request, self.settings.max_body_bytes, self.settings.read_timeout)
        query = _text_field(body, "query", self.settings)
        if "texts" not in body:
            raise RequestError(422, "texts is required", "texts")
        texts = parse_inputs(body["texts"], "texts", self.settings, allow_ids=False)
        raw, return_text = _flag(body, "raw_scores", False), _flag(body, "return_text", False)
        truncate = _flag(body, "truncate", self.settings.auto_truncate)
        scores, _ = await self.scores_of_pairs(request, query, texts, "texts", truncate, raw)
        order = sorted(range(len(texts)), key=lambda i: -scores[i])
        return JSONResponse([{"index": i, "score": float(scores[i]), **({"text": texts[i]} if return_text else {})}
                             for i in order])  # fmt: skip

    async def v1_rerank(self, request: Request) -> Response:
        """The rerank API of Cohere, Jina, infinity-emb and vLLM: {"model"?, "query", "documents"
        (strings or {"text"} objects), "top_n"?, "return_documents"?} → {"results": [{"index",
        "relevance_score", "document"?: {"text"}}], best first}."""
        self.ready("classifier")
        body = await read_json(request, self.settings.max_body_bytes, self.settings.read_timeout)
        model = body.get("model")
        if model is not None and model not in self.service.model_ids:
            raise RequestError(404, f"the model {model!r} is not served here; this server has "
                                    f"{self.service.model_id!r}", "model", "model_not_found")  # fmt: skip
        query = _text_field(body, "query", self.settings)
        if "documents" not in body:
            raise RequestError(422, "documents is required", "documents")
        documents = body["documents"]
        if isinstance(documents, list) and all(isinstance(d, dict) for d in documents) and documents:
            if not all(set(d) == {"text"} and isinstance(d["text"], str) for d in documents):
                raise RequestError(422, 'documents must be strings or {"text": string} objects', "documents")
            documents = [d["text"] for d in documents]
        documents = parse_inputs(documents, "documents", self.settings, allow_ids=False)
        top_n = body.get("top_n")
        if top_n is not None and (not _is_id(top_n) or top_n < 1):
            raise RequestError(422, f"top_n must be a positive integer, got {json.dumps(top_n)[:40]}", "top_n")
        return_documents = _flag(body, "return_documents", False)
        truncate = _flag(body, "truncate", self.settings.auto_truncate)
        scores, tokens = await self.scores_of_pairs(request, query, documents, "documents", truncate, raw=False)
        order = sorted(range(len(documents)), key=lambda i: -scores[i])[:top_n]
        results = [{"index": i, "relevance_score": float(scores[i]),
                    **({"document": {"text": documents[i]}} if return_documents else {})} for i in order]  # fmt: skip
        return JSONResponse({"object": "rerank", "results": results, "model": self.service.model_id,
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})  # fmt: skip

    async def tei_predict(self, request: Request) -> Response:
        """text-embeddings-inference's POST /predict: "inputs" is a text, a pair [a, b], or a list of
        either; → [{"score", "label"}] over every label, best first (a list of those for a list).
        Scores as the text-classification pipeline gives them, or the logits with "raw_scores"."""
        from ..tasks.classify import default_function, scores_of

        self.ready("classifier")
        body = await read_json(request, self.settings.max_body_bytes, self.settings.read_timeout)
        if "inputs" not in body:
            raise RequestError(422, "inputs is required", "inputs")
        value = body["inputs"]
        # A text, or exactly two texts (read as one pair, as TEI reads them), is one input.
        single = isinstance(value, str) or (isinstance(value, list) and len(value) == 2
                                            and all(isinstance(item, str) for item in value))  # fmt: skip
        items = [value] if single else value
        if not isinstance(items, list) or not items:
            raise RequestError(
                422, "inputs must be a text, a pair [text, text], or a non-empty list of either", "inputs"
            )
        if len(items) > self.settings.max_inputs:
            raise RequestError(422, f"inputs has {len(items)} items, more than the limit of {self.settings.max_inputs} "
                                    "per request", "inputs", "too_many_inputs")  # fmt: skip
        pairs = [item if isinstance(item, list) else [item] for item in items]
        if not all(len(p) in (1, 2) and all(isinstance(t, str) for t in p) for p in pairs) or len(
                {len(p) for p in pairs}) > 1:  # fmt: skip
            raise RequestError(422, "inputs must all be texts, or all be pairs [text, text]", "inputs")
        for index, texts in enumerate(pairs):
            parse_inputs(texts, f"inputs[{index}]", self.settings, allow_ids=False)  # empty, too many characters
        raw = _flag(body, "raw_scores", False)
        truncate = _flag(body, "truncate", self.settings.auto_truncate)
        seconds = [p[1] for p in pairs] if len(pairs[0]) == 2 else None
        pieces, tokens = await self.service.tokenize(self.service.pair_pieces, [p[0] for p in pairs], seconds,
                                                     truncate, "inputs")  # fmt: skip
        request.state.counts = (len(pairs), tokens)
        logits = await self.logits_job(request, pieces)
        model = self.service.classifier.model
        function = "none" if raw else default_function(model)
        rows = []
        for row in logits:
            scores = scores_of(row, function)
            ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
            rows.append([{"score": float(scores[i]), "label": model.labels.id2label[i]} for i in ranked])
        return JSONResponse(rows[0] if single else rows)

    async def openai_embeddings(self, request: Request) -> Response:
        self.ready()
        body = await read_json(request, self.settings.max_body_bytes, self.settings.read_timeout)
        model = body.get("model")
        if not isinstance(model, str):
            raise RequestError(422, "model must be a string (GET /v1/models lists it)", "model")
        if model not in self.service.model_ids:
            raise RequestError(404, f"the model {model!r} is not served here; this server has "
                                    f"{self.service.model_id!r}", "model", "model_not_found")  # fmt: skip
        if "input" not in body:
            raise RequestError(422, "input is required", "input")
        inputs = parse_inputs(body["input"], "input", self.settings, allow_ids=True)
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            raise RequestError(422, f"encoding_format must be 'float' or 'base64', got {encoding!r}",
                               "encoding_format")  # fmt: skip
        dimensions = body.get("dimensions")
        if dimensions is not None and dimensions != self.service.dimension:
            raise RequestError(422, f"dimensions={dimensions!r}: this model's vectors have {self.service.dimension} "
                                    "dimensions and it cannot shorten them", "dimensions")  # fmt: skip
        truncate = _flag(body, "truncate", self.settings.auto_truncate)
        pieces, skip, tokens = await self.service.tokenize(self.service.pieces_of, inputs, truncate, "input")
        request.state.counts = (len(inputs), tokens)
        vectors = await self.embed_job(request, pieces, skip, None)
        if encoding == "base64":
            data = [base64.b64encode(row.astype("<f4").tobytes()).decode("ascii") for row in vectors]
        else:
            data = vectors.tolist()
        return JSONResponse({
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(data)],
            "model": self.service.model_id,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })  # fmt: skip

    async def tei_embed(self, request: Request) -> Response:
        self.ready()
        body = await read_json(request, self.settings.max_body_bytes, self.settings.read_timeout)
        if "inputs" not in body:
            raise RequestError(422, "inputs is required", "inputs")
        inputs = parse_inputs(body["inputs"], "inputs", self.settings, allow_ids=False)
        normalize, truncate = _flag(body, "normalize", True), _flag(body, "truncate", self.settings.auto_truncate)
        pieces, skip, tokens = await self.service.tokenize(self.service.pieces_of, inputs, truncate, "inputs")
        request.state.counts = (len(inputs), tokens)
        return JSONResponse((await self.embed_job(request, pieces, skip, normalize)).tolist())

    async def tei_tokenize(self, request: Request) -> Response:
        self.ready("any")
        body = await read_json(request, self.settings.max_body_bytes, self.settings.read_timeout)
        if "inputs" not in body:
            raise RequestError(422, "inputs is required", "inputs")
        inputs = parse_inputs(body["inputs"], "inputs", self.settings, allow_ids=False)
        special = _flag(body, "add_special_tokens", True)
        tokenizer = (self.service.embedder or self.service.classifier).tokenizer
        encoding = await self.service.tokenize(
            lambda: tokenizer(inputs, add_special_tokens=special, return_offsets_mapping=True, verbose=False)
        )
        rows = []
        for row, ids in enumerate(encoding["input_ids"]):
            sequence = encoding.sequence_ids(row)
            rows.append([
                {"id": i, "text": tokenizer.convert_ids_to_tokens(i), "special": sequence[t] is None,
                 "start": None if sequence[t] is None else encoding["offset_mapping"][row][t][0],
                 "stop": None if sequence[t] is None else encoding["offset_mapping"][row][t][1]}
                for t, i in enumerate(ids)
            ])  # fmt: skip
        request.state.counts = (len(inputs), sum(map(len, rows)))
        return JSONResponse(rows)

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": self.service.model_id, "object": "model", "created": 0, "owned_by": "minibert"},
        ]})  # fmt: skip

    async def health(self, request: Request) -> Response:
        if not self.service.loaded:
            return JSONResponse({"status": "loading" if self.service.load_error is None else "failed"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def metrics(self, request: Request) -> Response:
        depth = self.service.batcher.queued_texts if self.service.batcher else 0
        return PlainTextResponse(self.service.metrics.render(depth), media_type="text/plain; version=0.0.4")

    async def load_in_background(self) -> None:
        try:
            await asyncio.to_thread(self.service.load)
        except Exception as error:  # noqa: BLE001  (reported, and the server stops)
            self.service.load_error = error
            if self.on_fatal is not None:  # the command stops and prints the error line itself
                self.on_fatal(error)
            else:
                logger.error("cannot load %s: %s", self.settings.model, " ".join(str(error).split()))
            return
        if self.service.classifier is not None:
            classifier = self.service.classifier
            logger.info("model %s loaded: a sequence classifier with %d label(s), up to %d tokens per pair; serving "
                        "/rerank, /predict, /v1/rerank; ready", self.settings.model, classifier.num_labels,
                        classifier.max_length)  # fmt: skip
            return
        logger.info("model %s loaded: %d dimensions, up to %d tokens per text; ready", self.settings.model,
                    self.service.dimension, self.service.embedder.max_length)  # fmt: skip

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        settings = self.settings
        self.service.batcher = DynamicBatcher(
            self.service.compute, max_batch_tokens=settings.max_batch_tokens, max_wait_ms=settings.max_wait_ms,
            max_queue=settings.max_queue, on_batch=self.service.metrics.batch,
        )  # fmt: skip
        self.service.batcher.start()
        loading = asyncio.create_task(self.load_in_background())
        yield
        loading.cancel()
        await self.service.batcher.stop()
        self.service._tokenizing.shutdown(wait=False)


def build_app(settings: ServeSettings, *, on_fatal=None) -> Starlette:
    """The ASGI app. The model loads in the background after start-up (``/health`` says when)."""
    service = EmbeddingService(settings)
    routes = Routes(service, on_fatal)

    async def request_error(request: Request, error: RequestError) -> Response:
        return error_response(request.url.path, error)

    async def overloaded(request: Request, error: Overloaded) -> Response:
        return error_response(request.url.path, RequestError(503, f"overloaded: {error}; retry shortly",
                                                             code="overloaded"))  # fmt: skip

    async def client_gone(request: Request, error: ClientGone) -> Response:
        return Response(status_code=499)  # nobody reads it (nginx's code for "client closed request")

    async def internal(request: Request, error: Exception) -> Response:
        logger.error("internal error on %s: %s: %s", request.url.path, type(error).__name__, error)
        return error_response(request.url.path, RequestError(500, "internal server error", code="internal_error"))

    handlers = {RequestError: request_error, Overloaded: overloaded, ClientGone: client_gone, Exception: internal}
    app = Starlette(routes=routes.routes(), lifespan=routes.lifespan, exception_handlers=handlers)
    app.state.service = service
    return Guard(app, service)


def error_response(path: str, error: RequestError) -> JSONResponse:
    """An error as JSON: OpenAI's shape under /v1/, text-embeddings-inference's elsewhere."""
    if path.startswith("/v1/"):
        kinds = {401: "authentication_error", 503: "server_error", 500: "server_error"}
        body = {"error": {"message": error.message, "type": kinds.get(error.status, "invalid_request_error"),
                          "param": error.param, "code": error.code}}  # fmt: skip
    else:
        kinds = {413: "Validation", 422: "Validation", 503: "Overloaded", 401: "Unauthorized", 400: "Validation"}
        body = {"error": error.message, "error_type": kinds.get(error.status, "Backend")}
    headers = {}
    if error.status == 503:
        headers["Retry-After"] = "1"
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(body, status_code=error.status, headers=headers)


async def _client_gone(request: Request) -> None:
    """Returns when the client disconnects (the body has been read: nothing else can arrive)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


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


def serve(settings: ServeSettings) -> None:
    """Run the server until SIGTERM/SIGINT: then stop accepting, finish the requests in flight, exit."""
    import uvicorn

    from .http_limits import BoundedH11Protocol, ConnectionRoom, connection_capacity, raise_open_files_limit

    failure: list[BaseException] = []
    server: uvicorn.Server | None = None

    def fatal(error: BaseException) -> None:
        failure.append(error)
        server.should_exit = True

    app = build_app(settings, on_fatal=fatal)
    access = DroppingQueueHandler()
    access_logger.addHandler(access)
    access_logger.setLevel(logging.INFO)
    writer = logging.handlers.QueueListener(access.queue, *logging.getLogger("minibert").handlers)
    writer.start()
    app.app.state.service.metrics.dropped_log_lines = lambda: access.dropped
    # An idle keep-alive connection stays open longer than clients keep theirs (httpx and the
    # openai client: 5 s; load balancers: 60 s), so the client closes it first. With uvicorn's
    # 5 s, a client reusing a connection just as the server closed it got a dropped request.
    # Requests' headers are bounded in size and time, and connections by the open-files limit
    # (http_limits.py); h11's own size limit sits just above, so the 431 comes from there, with a
    # message. The requests served at once are counted by Guard, not uvicorn (whose
    # limit_concurrency counts idle sockets too). No WebSockets: nothing here speaks them, and an
    # upgraded connection would leave the protocol that counts connections (http_limits.py).
    limits = raise_open_files_limit()
    room = ConnectionRoom(connection_capacity(limits and limits[1]))
    app.app.state.service.metrics.connection_lines = room.prometheus_lines
    protocol = BoundedH11Protocol.with_limits(settings.max_header_bytes, settings.header_timeout,
                                              settings.send_timeout, room)  # fmt: skip
    config = uvicorn.Config(app, host=settings.host, port=settings.port, access_log=False, log_level="warning",
                            timeout_graceful_shutdown=30, timeout_keep_alive=settings.keep_alive_timeout,
                            lifespan="on", http=protocol, ws="none",
                            h11_max_incomplete_event_size=settings.max_header_bytes + 1024)  # fmt: skip
    server = uvicorn.Server(config)
    # uvicorn handles SIGINT/SIGTERM while it runs (graceful shutdown) and raises the signal again
    # once it has stopped: ignored then, so a requested stop exits with status 0.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    logger.info("serving on http://%s:%d (model %s loading)%s", settings.host, settings.port, settings.model,
                "" if settings.api_key else "; no API key: anyone who can reach this port can use it")  # fmt: skip
    if limits is not None and room.capacity < 1 << 40:  # (no line where nothing limits open files)
        before, after = limits
        logger.info("open-files limit %s; it can hold about %d connections at once (beyond, the longest idle are "
                    "closed)", f"raised from {before} to {after}" if after != before else f"{after}",
                    room.capacity)  # fmt: skip
    try:
        server.run()
    finally:
        writer.stop()  # the lines still queued are written first
        access_logger.removeHandler(access)
    if failure:
        raise failure[0]
    if not server.started:
        raise OSError(f"could not listen on {settings.host}:{settings.port} (is the port in use?)")
