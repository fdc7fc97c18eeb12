"""`minibert serve` with a cross-encoder: text-embeddings-inference's /rerank and /predict and the
Cohere/Jina/infinity/vLLM /v1/rerank, each checked against sentence-transformers' CrossEncoder on
the same folder (scores within 1e-5, the parity bound; the same order), and against what a wrong
request gets (its status and a JSON error). The checkpoint is the one task_checkpoints.py trains (a few
steps, so that the documents' scores differ)."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from serve_server import NAME, Server, null_is_absent
from task_checkpoints import DOCUMENTS, cross_encoder_dir, resaved_cross_encoder

pytest.importorskip("starlette")
sentence_transformers = pytest.importorskip("sentence_transformers")
QUERY = "How many people live in Berlin?"
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def reranker(make, tmp_path_factory):
    directory = cross_encoder_dir(make, tmp_path_factory.mktemp("ce"), "saved")
    running = Server(directory, "--max-inputs", "16", "--max-queue", "64")
    yield running, directory, sentence_transformers.CrossEncoder(str(directory))
    returncode, log = running.stop()
    assert returncode == 0 and "Traceback" not in log, log


def test_rerank_endpoints_give_cross_encoder_rank(reranker):
    server, _, reference = reranker
    documents = [d for d in DOCUMENTS if d]  # (an empty document is a 422, as an empty text is)
    expected = reference.rank(QUERY, documents)
    tei = httpx.post(f"{server.url}/rerank", json={"query": QUERY, "texts": documents, "return_text": True,
                                                   "truncate": True}, timeout=30)  # fmt: skip
    assert tei.status_code == 200, tei.text
    assert [row["index"] for row in tei.json()] == [row["corpus_id"] for row in expected]
    assert max(abs(a["score"] - b["score"]) for a, b in zip(tei.json(), expected)) <= TOLERANCE
    assert tei.json()[0]["text"] == documents[expected[0]["corpus_id"]]
    body = {"model": NAME, "query": QUERY, "top_n": 2, "documents": [{"text": d} for d in documents],
            "return_documents": True, "truncate": True}  # fmt: skip
    v1 = httpx.post(f"{server.url}/v1/rerank", json=body, timeout=30)
    assert v1.status_code == 200, v1.text
    results = v1.json()["results"]
    assert [r["index"] for r in results] == [row["corpus_id"] for row in expected[:2]]
    assert max(abs(r["relevance_score"] - e["score"]) for r, e in zip(results, expected)) <= TOLERANCE
    assert results[0]["document"] == {"text": documents[results[0]["index"]]} and v1.json()["usage"]["total_tokens"]
    raw = httpx.post(f"{server.url}/rerank", json={"query": QUERY, "texts": documents[:2], "raw_scores": True})
    logits = reference.predict([[QUERY, d] for d in documents[:2]], activation_fn=lambda x: x)
    assert max(abs(row["score"] - logits[row["index"]]) for row in raw.json()) <= TOLERANCE


def test_predict_gives_pipeline_scores_for_texts_and_pairs(reranker):
    server, directory, reference = reranker
    pairs = [[QUERY, DOCUMENTS[0]], [QUERY, DOCUMENTS[3]]]
    batch = httpx.post(f"{server.url}/predict", json={"inputs": pairs}, timeout=30)
    assert batch.status_code == 200, batch.text
    scores = [rows[0]["score"] for rows in batch.json()]
    np.testing.assert_allclose(scores, reference.predict(pairs), atol=TOLERANCE, rtol=0)  # one label: a sigmoid
    one = httpx.post(f"{server.url}/predict", json={"inputs": pairs[0]}).json()
    assert one[0]["label"] == "LABEL_0" and abs(one[0]["score"] - scores[0]) <= TOLERANCE


def test_a_null_field_counts_as_absent_on_every_rerank_field(reranker):
    """raw_scores, return_text, return_documents and truncate sent as null answered 422 "got null"
    (docs/serving.md: a null field counts as absent); each field of each route is checked, and a
    field of another route is refused on /v1/rerank with its bare name as param."""
    from minibert.apps.serve.request_parsing import ROUTE_FIELDS

    server = reranker[0]
    for route, base in [("/rerank", {"query": QUERY, "texts": DOCUMENTS[:2], "raw_scores": True, "truncate": True}),
                        ("/v1/rerank", {"model": NAME, "query": QUERY, "documents": DOCUMENTS[:2], "top_n": 1,
                                        "return_documents": True}),
                        ("/predict", {"inputs": [DOCUMENTS[i] for i in (0, 1, 3)], "raw_scores": True})]:  # fmt: skip
        null_is_absent(server, route, base, {})
    for name in sorted({name for fields in ROUTE_FIELDS.values() for name in fields} - set(ROUTE_FIELDS["/v1/rerank"])):
        body = {"query": QUERY, "documents": ["a"], name: "x"}
        response = httpx.post(f"{server.url}/v1/rerank", json=body, timeout=30)
        assert response.status_code == 422 and response.json()["error"]["param"] == name, response.text


@pytest.mark.parametrize(
    "path, body, status, words",
    [
        ("/rerank", {"query": QUERY}, 422, "texts is required"),
        ("/rerank", {"query": "", "texts": ["a"]}, 422, "query must be a non-empty string"),
        ("/rerank", {"query": QUERY, "texts": ["word " * 200]}, 422, "more than the model's limit of 48"),
        ("/rerank", {"query": QUERY, "texts": ["a"] * 17}, 422, "more than the limit of 16"),
        ("/v1/rerank", {"query": QUERY, "documents": ["a"], "top_n": 0}, 422, "top_n must be a positive integer"),
        ("/v1/rerank", {"query": QUERY, "documents": [{"txt": "a"}]}, 422, "documents must be strings or"),
        ("/v1/rerank", {"query": QUERY, "documents": ["a", {"text": "b"}]}, 422, "objects, not a mix"),
        ("/v1/rerank", {"model": "other", "query": QUERY, "documents": ["a"]}, 404, "is not served here"),
        # a list or object was looked up in a set: TypeError, a 500; a number was "not served here"
        ("/v1/rerank", {"model": ["x"], "query": QUERY, "documents": ["a"]}, 422, "model must be a string"),
        ("/v1/rerank", {"model": {"a": 1}, "query": QUERY, "documents": ["a"]}, 422, "model must be a string"),
        ("/v1/rerank", {"model": 5, "query": QUERY, "documents": ["a"]}, 422, "model must be a string"),
        # TEI's fields, which /rerank applies or refuses: /v1/rerank ignored them (200, a sigmoid score)
        ("/v1/rerank", {"query": QUERY, "documents": ["a"], "raw_scores": True}, 422,
         "raw_scores is not supported on /v1/rerank (it is a field of /rerank, /predict)"),
        ("/v1/rerank", {"query": QUERY, "documents": ["a"], "truncation_direction": "Left"}, 422,
         "truncation_direction is not supported on /v1/rerank"),
        ("/v1/rerank", {"query": QUERY, "documents": ["a"], "texts": ["b"]}, 422, "texts is not supported"),
        ("/rerank", {"query": QUERY, "texts": ["a"], "top_n": 1}, 422, "top_n is not supported on /rerank"),
        ("/predict", {"inputs": "a", "return_text": True}, 422, "return_text is not supported on /predict"),
        ("/predict", {"inputs": [["a", "b"], ["c"]]}, 422, "all be texts, or all be pairs"),
        ("/rerank", {"query": QUERY, "texts": ["a"], "truncation_direction": "Left"}, 422,
         "is not supported here: texts and pairs are cut at their end"),
        ("/predict", {"inputs": "a", "truncation_direction": "Left"}, 422, "is not supported here"),
        ("/predict", {"inputs": "a", "truncation_direction": 5}, 422, "must be"),
        ("/embed", {"inputs": ["a"]}, 400, "is a sequence classifier"),
        ("/v1/embeddings", {"model": NAME, "input": ["a"]}, 400, "is a sequence classifier"),
    ],
)  # fmt: skip
def test_bad_rerank_requests_get_their_status(reranker, path, body, status, words):
    server, _, _ = reranker
    response = httpx.post(f"{server.url}{path}", json=body, timeout=30)
    assert response.status_code == status, response.text
    assert words in response.text


@pytest.mark.parametrize(
    "path, body, where",
    [
        ("/v1/rerank", {"query": "a", "documents": ["b\ud800"], "return_documents": True}, "documents[0]"),
        ("/v1/rerank", {"query": "a", "documents": [{"text": "b"}, {"text": "\udfffc"}]}, "documents[1]"),
        ("/v1/rerank", {"query": "a\ud800", "documents": ["b"]}, "query"),
        ("/rerank", {"query": "a", "texts": ["b", "b\ud800"], "return_text": True}, "texts[1]"),
        ("/rerank", {"query": "\ud800", "texts": ["b"]}, "query"),
        ("/predict", {"inputs": [["a", "b"], ["c", "d\ud800"]]}, "inputs[1][1]"),
    ],
)  # fmt: skip
def test_lone_surrogates_are_422_naming_the_field_not_500(reranker, path, body, where):
    """An echoed lone surrogate could not be written as UTF-8 (500 and a traceback in the log,
    after the model had run); one not echoed was dropped silently. Hugging Face's tokenizer
    refuses such text: so does every field here, before the model runs."""
    import json

    server, directory, _ = reranker
    transformers = pytest.importorskip("transformers")
    with pytest.raises(TypeError):  # the reference
        transformers.AutoTokenizer.from_pretrained(str(directory))("b\ud800")
    response = httpx.post(f"{server.url}{path}", content=json.dumps(body), timeout=30)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    message = error["message"] if isinstance(error, dict) else error
    assert message.startswith(f"{where} holds a lone UTF-16 surrogate (\\u"), message


def test_auto_truncate_cuts_unless_the_request_says_no(reranker):
    """A server of its own (--auto-truncate), on the module's folder (trained once)."""
    server = Server(reranker[1], "--auto-truncate")
    try:
        long = httpx.post(f"{server.url}/rerank", json={"query": QUERY, "texts": ["word " * 200]}, timeout=30)
        assert long.status_code == 200, long.text
        refused = httpx.post(f"{server.url}/rerank", json={"query": QUERY, "texts": ["word " * 200],
                                                           "truncate": False}, timeout=30)  # fmt: skip
        assert refused.status_code == 422
    finally:
        server.stop()


def test_max_queue_below_max_inputs_is_refused_at_start(capsys):
    """A request of --max-inputs texts could never be queued: 503 "retry shortly" forever. A usage
    error (exit 2), before anything loads."""
    from minibert.apps.cli import main

    assert main(["serve", "--model", "x", "--max-queue", "8", "--max-inputs", "16"]) == 2
    assert "--max-queue (8) must be at least --max-inputs (16)" in capsys.readouterr().err


def test_rerank_follows_the_folders_prompt_and_processing_kwargs(reranker, tmp_path):
    """A folder with a default prompt and processing_kwargs (only_second, max_length 24), saved by
    sentence-transformers: the server scored the query without the prompt, cut as the longer text first."""

    def change(model):
        model[0].processing_kwargs = {"common": {"truncation": "only_second", "max_length": 24}}

    directory = resaved_cross_encoder(reranker[1], tmp_path / "prompted", change, prompts={"web": "judge: "},
                                       default_prompt_name="web")  # (the module's folder, read, saved anew)
    reference = sentence_transformers.CrossEncoder(str(directory))
    documents = [d for d in DOCUMENTS if d]
    expected = reference.rank(QUERY, documents)
    server = Server(directory)
    try:
        body = {"query": QUERY, "texts": documents, "truncate": True}
        tei = httpx.post(f"{server.url}/rerank", json=body, timeout=30)
        assert tei.status_code == 200, tei.text
        assert [row["index"] for row in tei.json()] == [row["corpus_id"] for row in expected]
        assert max(abs(a["score"] - b["score"]) for a, b in zip(tei.json(), expected)) <= TOLERANCE
        v1 = httpx.post(f"{server.url}/v1/rerank", json={"query": QUERY, "documents": documents, "truncate": True},
                        timeout=30)  # fmt: skip
        assert v1.status_code == 200, v1.text
        assert max(abs(r["relevance_score"] - e["score"]) for r, e in zip(v1.json()["results"], expected)) <= TOLERANCE
        # only_second cannot cut a query that alone is past the limit: sentence-transformers raises;
        # the server answered 500 (a traceback in its log); now a 422 naming the pair
        long_query = QUERY * 5
        with pytest.raises(Exception, match="(?i)truncat"):
            reference.predict([[long_query, "Berlin"]])
        for path, key in (("/rerank", "texts"), ("/v1/rerank", "documents")):
            cut = httpx.post(f"{server.url}{path}", json={"query": long_query, key: ["Berlin"], "truncate": True},
                             timeout=30)  # fmt: skip
            assert cut.status_code == 422, cut.text
            # (only_second keeps the query whole: the query is what is too long, and is named)
            assert "query cannot be cut to the model's limit of 24 tokens" in cut.text
            assert "truncation='only_second'" in cut.text and "Traceback" not in cut.text
            # without "truncate" the 422 advised sending "truncate": true, which then gave this 422
            whole = httpx.post(f"{server.url}{path}", json={"query": long_query, key: ["Berlin"]}, timeout=30)
            assert whole.status_code == 422, whole.text
            assert "query cannot be cut" in whole.text and '\\"truncate\\": true' not in whole.text, whole.text
        assert cut.json()["error"]["code"] == "context_length_exceeded"  # (/v1/'s shape names the code)
        assert cut.json()["error"]["param"] == "query"
    finally:
        returncode, log = server.stop()
    assert returncode == 0 and "Traceback" not in log, log


def test_a_rerank_query_is_tokenized_once_and_cut_as_cross_encoder_cuts_it(reranker):
    """/v1/rerank and /rerank sent [query] * len(documents) to the tokenizer: the query was tokenized
    again for each document, on the one tokenizing thread every endpoint shares (a 107 KB body held
    it, and every other request, for over a minute). Now each text of a request is tokenized once:
    the tokenizer reads the body's characters, no more. The pairs are cut as CrossEncoder.rank cuts
    them (longest_first: a long query, a long document, both), and score as it scores them."""
    from minibert.apps.serve.app import build_app
    from minibert.apps.serve.settings import ServeSettings

    _, directory, reference = reranker  # (the folder and its reference; the module's server is not used)
    app = build_app(ServeSettings(model=str(directory)))
    service = app.app.state.service
    long_query = " ".join(f"berlin{n % 89} people" for n in range(2500))  # ~35,000 characters, 48 tokens a pair
    queries = [("a long query", long_query, ["a", DOCUMENTS[0]] * 100),
               ("long both", QUERY * 8, [d for d in DOCUMENTS if d]), ("long document", QUERY, DOCUMENTS[:3])]
    read: list[int] = []

    async def main():
        async with app.app.router.lifespan_context(app.app):
            while not service.loaded:
                await asyncio.sleep(0.05)
            tokenizer = service.classifier.tokenizer
            piece_ids = tokenizer.piece_ids
            tokenizer.piece_ids = lambda text: read.append(len(text)) or piece_ids(text)  # what it reads
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=300) as client:
                answers = {}
                for name, query, documents in queries:
                    before = len(read)
                    answers[name] = await client.post("/v1/rerank", json={"query": query, "documents": documents,
                                                                          "truncate": True})  # fmt: skip
                    assert sum(read[before:]) == len(query) + sum(map(len, documents)), name
                read.clear()
                tei = await client.post("/rerank", json={"query": long_query, "texts": queries[0][2], "truncate": True})
                assert sum(read) == len(long_query) + sum(map(len, queries[0][2]))
                return answers, tei

    answers, tei = asyncio.run(main())
    for name, query, documents in queries:
        distinct = list(dict.fromkeys(documents))
        expected = dict(zip(distinct, reference.predict([[query, d] for d in distinct])))
        results = answers[name].json()["results"]
        assert len(results) == len(documents), name
        assert max(abs(r["relevance_score"] - expected[documents[r["index"]]]) for r in results) <= TOLERANCE, name
        if name == "a long query":
            texts = documents
            assert max(abs(r["score"] - expected[texts[r["index"]]]) for r in tei.json()) <= TOLERANCE


def test_an_over_long_pair_names_the_query_or_the_pair(reranker):
    """A query past the model's length was reported as "documents[0] has 104 tokens ... shorten it",
    though the document was one letter. The 422 names the query when it alone leaves no room for a
    document, and otherwise the pair, with the query's share."""
    server, _, reference = reranker
    long_query, long_document = "berlin " * 100, "word " * 60
    query_pieces = len(reference.tokenizer(QUERY)["input_ids"]) - 2
    pair = len(reference.tokenizer(QUERY, long_document)["input_ids"])
    cases = [("/v1/rerank", {"query": long_query, "documents": ["a", "b"]}, "query",
              "query has 100 word pieces: with [CLS] and two [SEP] they leave no room for a document within the "
              "model's limit of 48 tokens per pair; shorten it or send \"truncate\": true"),
             ("/v1/rerank", {"query": QUERY, "documents": ["a", long_document]}, "documents",
              f"the query and documents[1] together have {pair} tokens with [CLS] and two [SEP] (the query's word "
              f"pieces: {query_pieces}), more than the model's limit of 48 per pair; shorten them or send "
              "\"truncate\": true"),
             ("/rerank", {"query": long_query, "texts": ["a"]}, None, "query has 100 word pieces: "),
             ("/rerank", {"query": QUERY, "texts": [long_document]}, None, "the query and texts[0] together have ")]
    for path, body, param, message in cases:
        response = httpx.post(f"{server.url}{path}", json=body, timeout=30)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        if param is None:  # (TEI's shape: the message alone)
            assert error.startswith(message), error
        else:
            assert error["message"] == message and error["param"] == param, error
