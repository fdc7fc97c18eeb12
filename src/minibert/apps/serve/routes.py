"""The endpoints, each a method of ``Routes`` over the one ``EmbeddingService``: OpenAI's
``/v1/embeddings`` and ``/v1/models``; text-embeddings-inference's ``/embed``, ``/tokenize``,
``/rerank`` and ``/predict``; the rerank API of Cohere, Jina, infinity and vLLM (``/v1/rerank``);
``/health`` and ``/metrics``. And the app's lifespan: the batcher runs while the app does, the model
loads in the background (``/health`` says when)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging

import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ...embedding.options import EmbedOptions
from .batching import DynamicBatcher
from .http_errors import ClientGone, RequestError
from .request_parsing import (
    bool_field,
    check_fields,
    check_user,
    is_token_id,
    kept_dimensions,
    parse_inputs,
    prompt_name_of,
    read_json,
    text_field,
    truncation_left,
    without_nulls,
)
from .service import EmbeddingService, PairPieces, tokens_answer

logger = logging.getLogger("minibert.serve")


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

    async def read_body(self, request: Request) -> dict:
        """The JSON body, read within the limits; a field the route does not apply is refused
        (``check_fields``), not ignored; a ``null`` field is dropped: absent, on every route."""
        body = await read_json(request, self.settings.max_body_bytes, self.settings.read_timeout)
        check_fields(body, request.url.path)
        return without_nulls(body)

    async def embed_job(self, request: Request, pieces, skip: int, options: EmbedOptions) -> np.ndarray:
        return await self.batched(request, pieces, (skip, options))  # requests that share options batch together

    async def logits_job(self, request: Request, pieces: list[PairPieces]) -> np.ndarray:
        return await self.batched(request, pieces, ("logits",))  # (N, labels)

    async def batched(self, request: Request, pieces: list, key: tuple) -> np.ndarray:
        """The request's rows through the dynamic batcher, merged with others of the same ``key``."""
        job = self.service.batcher.submit(pieces, key)
        gone = asyncio.ensure_future(_client_gone(request))
        try:
            done, _ = await asyncio.wait({job.future, gone}, return_when=asyncio.FIRST_COMPLETED)
            if job.future not in done:  # the client left
                raise ClientGone
            return job.future.result()
        finally:  # the client left, or a stop's grace ran out (guard.py answers 503): the job is skipped if it
            gone.cancel()  # has not run (cancel does nothing to a job that has)
            self.service.batcher.cancel(job)

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
        from ...embedding.folder_settings import choose_prompt
        from ...tasks.rerank import SCORE_ACTIVATIONS

        classifier = self.service.classifier
        if classifier.num_labels != 1:
            raise RequestError(400, f"reranking needs a model with one output (a relevance score); "
                                    f"{self.service.model_id!r} has {classifier.num_labels} labels: use /predict",
                               code="model_not_supported")  # fmt: skip
        # the folder's default prompt before the query, as CrossEncoder.rank puts it
        prompt = choose_prompt(classifier.prompts, classifier.default_prompt_name, None, None)
        pieces, tokens = await self.service.tokenize(self.service.rerank_pieces, prompt, query, documents, truncate,
                                                     field)  # fmt: skip
        request.state.counts = (len(documents), tokens)
        logits = (await self.logits_job(request, pieces))[:, 0]
        return (logits if raw else SCORE_ACTIVATIONS[classifier.activation_fn](logits)), tokens

    async def tei_rerank(self, request: Request) -> Response:
        """text-embeddings-inference's POST /rerank: {"query", "texts", "raw_scores", "return_text",
        "truncate"} → [{"index", "score", "text"?}], best first."""
        self.ready("classifier")
        body = await self.read_body(request)
        query = text_field(body, "query", self.settings)
        if "texts" not in body:
            raise RequestError(422, "texts is required", "texts")
        texts = parse_inputs(body["texts"], "texts", self.settings, allow_ids=False)
        raw, return_text = bool_field(body, "raw_scores", False), bool_field(body, "return_text", False)
        truncate = bool_field(body, "truncate", self.settings.auto_truncate)
        truncation_left(body, pairs=True)
        scores, _ = await self.scores_of_pairs(request, query, texts, "texts", truncate, raw)
        order = sorted(range(len(texts)), key=lambda i: -scores[i])
        return JSONResponse([{"index": i, "score": float(scores[i]), **({"text": texts[i]} if return_text else {})}
                             for i in order])  # fmt: skip

    async def v1_rerank(self, request: Request) -> Response:
        """The rerank API of Cohere, Jina, infinity-emb and vLLM: {"model"?, "query", "documents"
        (all strings or all {"text"} objects: vLLM's and infinity's lists are one or the other),
        "top_n"?, "return_documents"?} → {"results": [{"index", "relevance_score", "document"?:
        {"text"}}], best first}."""
        self.ready("classifier")
        body = await self.read_body(request)
        model = body.get("model")
        if model is not None and not isinstance(model, str):  # (a list is unhashable: the lookup raised, a 500)
            raise RequestError(422, "model must be a string (GET /v1/models lists it)", "model")
        if model is not None and model not in self.service.model_ids:
            raise RequestError(404, f"the model {model!r} is not served here; this server has "
                                    f"{self.service.model_id!r}", "model", "model_not_found")  # fmt: skip
        query = text_field(body, "query", self.settings)
        if "documents" not in body:
            raise RequestError(422, "documents is required", "documents")
        documents = body["documents"]
        if isinstance(documents, list) and all(isinstance(d, dict) for d in documents) and documents:
            if not all(set(d) == {"text"} and isinstance(d["text"], str) for d in documents):
                raise RequestError(422, 'documents must be strings or {"text": string} objects', "documents")
            documents = [d["text"] for d in documents]
        elif isinstance(documents, list) and any(isinstance(d, dict) for d in documents):
            raise RequestError(422, 'documents must be all strings or all {"text": string} objects, not a mix',
                               "documents")  # fmt: skip
        documents = parse_inputs(documents, "documents", self.settings, allow_ids=False)
        top_n = body.get("top_n")
        if top_n is not None and (not is_token_id(top_n) or top_n < 1):
            raise RequestError(422, f"top_n must be a positive integer, got {json.dumps(top_n)[:40]}", "top_n")
        return_documents = bool_field(body, "return_documents", False)
        truncate = bool_field(body, "truncate", self.settings.auto_truncate)
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
        from ...tasks.classify import default_function, scores_of

        self.ready("classifier")
        body = await self.read_body(request)
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
        raw = bool_field(body, "raw_scores", False)
        truncate = bool_field(body, "truncate", self.settings.auto_truncate)
        truncation_left(body, pairs=True)
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
        body = await self.read_body(request)
        model = body.get("model")
        if not isinstance(model, str):
            raise RequestError(422, "model must be a string (GET /v1/models lists it)", "model")
        if model not in self.service.model_ids:
            raise RequestError(404, f"the model {model!r} is not served here; this server has "
                                    f"{self.service.model_id!r}", "model", "model_not_found")  # fmt: skip
        check_user(body)
        if "input" not in body:
            raise RequestError(422, "input is required", "input")
        inputs = parse_inputs(body["input"], "input", self.settings, allow_ids=True)
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            raise RequestError(422, f'encoding_format must be "float" or "base64", got {json.dumps(encoding)[:40]}',
                               "encoding_format")  # fmt: skip
        cut = kept_dimensions(body.get("dimensions"), self.service.dimension)
        # OpenAI's shortened vectors are unit length again: where the model's are (its Normalize
        # module), the first `dimensions` values are normalized after the cut, as /embed does.
        options = self.service.options if cut is None else EmbedOptions.of(
            self.service.options, truncate_dim=cut, normalize=self.service.embedder.recipe.normalize or None)
        truncate = bool_field(body, "truncate", self.settings.auto_truncate)
        pieces, skip, tokens = await self.service.tokenize(self.service.pieces_of, inputs, truncate, "input")
        request.state.counts = (len(inputs), tokens)
        vectors = await self.embed_job(request, pieces, skip, options)
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
        """text-embeddings-inference's POST /embed: "inputs", "normalize" (default true), "truncate",
        "truncation_direction", "prompt_name" and "dimensions" as sentence-transformers' tokenizer
        truncation_side, ``encode(prompt_name=...)`` and ``truncate_dim`` (docs/serving.md) → [[float]]."""
        self.ready()
        body = await self.read_body(request)
        if "inputs" not in body:
            raise RequestError(422, "inputs is required", "inputs")
        inputs = parse_inputs(body["inputs"], "inputs", self.settings, allow_ids=False)
        normalize = bool_field(body, "normalize", True)
        truncate = bool_field(body, "truncate", self.settings.auto_truncate)
        left = truncation_left(body, pairs=False, folder_side=self.service.embedder.tokenizer.truncation_side)
        prompt_name = prompt_name_of(body, self.service.embedder.recipe.prompts)
        cut = kept_dimensions(body.get("dimensions"), self.service.dimension)
        options = EmbedOptions.of(self.service.options, normalize=normalize, prompt_name=prompt_name, truncate_dim=cut)
        pieces, skip, tokens = await self.service.tokenize(self.service.pieces_of, inputs, truncate, "inputs",
                                                           options, left)  # fmt: skip
        request.state.counts = (len(inputs), tokens)
        return JSONResponse((await self.embed_job(request, pieces, skip, options)).tolist())

    async def tei_tokenize(self, request: Request) -> Response:
        """text-embeddings-inference's POST /tokenize: each text's tokens (id, text, special, start,
        stop), at most --max-tokenize-tokens in all (413 beyond); the answer is built in the
        tokenizing thread (service.py's ``tokens_answer``), never on the event loop."""
        self.ready("any")
        body = await self.read_body(request)
        if "inputs" not in body:
            raise RequestError(422, "inputs is required", "inputs")
        inputs = parse_inputs(body["inputs"], "inputs", self.settings, allow_ids=False)
        special = bool_field(body, "add_special_tokens", True)
        tokenizer = (self.service.embedder or self.service.classifier).tokenizer
        answer, tokens = await self.service.tokenize(tokens_answer, tokenizer, inputs, special,
                                                     self.settings.max_tokenize_tokens)  # fmt: skip
        request.state.counts = (len(inputs), tokens)
        return Response(answer, media_type="application/json")

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


async def _client_gone(request: Request) -> None:
    """Returns when the client disconnects (the body has been read: nothing else can arrive)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
