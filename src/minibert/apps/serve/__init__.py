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

The package, one concept a module, in the order a request meets them:

    settings.py      ServeSettings: every setting, its default, check and --flag, written once
                     (imports no server library: the command line is built without the extra)
    process.py       serve(): the process, from start to a graceful stop on SIGTERM/SIGINT
    http_limits.py   what a client can hold: header size and time, idle connections, open files
    app.py           build_app(): the routes, the error handlers and the guard, as one ASGI app
    guard.py         around the app: the API key, the requests served at once, the access log line
    access_log.py    the access log, written by a thread from a bounded queue
    metrics.py       the counters and histograms of /metrics (Prometheus' text format)
    routes.py        the endpoints of each API dialect (OpenAI, text-embeddings-inference, the
                     rerank API of Cohere/Jina), and the app's lifespan
    request_parsing.py  the body read within its limits, and each field checked by name (a field
                     another route applies is refused, never ignored)
    http_errors.py   a bad request as an exception, and as the JSON each dialect expects
    service.py       the loaded model (an embedder or a classifier), tokenizing, the batches' work
    batching.py      DynamicBatcher: concurrent requests merged into model batches of at most
                     --max-batch-tokens (a larger request runs in several)

This file imports nothing: the parser imports ``settings.py`` alone, and ``apps/commands.py``
imports ``process.serve`` when the command runs (``import minibert`` imports none of it).
"""
