"""What a wrong request to `minibert serve` gets: every class of bad request its status and a JSON
error in the route's dialect (OpenAI's or text-embeddings-inference's), unknown routes and methods,
a field sent as null, lone surrogates, a body too large, the Authorization scheme, an internal error
as one log line, /metrics's labels whatever paths clients invent, and overload (503, Retry-After)."""

from __future__ import annotations

import asyncio

import pytest

from serve_server import AUTH, KEY, NAME, Server, keyed_server, null_is_absent

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def server(minilm_dir):
    yield from keyed_server(minilm_dir)


# ----------------------------------------------------------------------------- bad requests


@pytest.mark.parametrize(
    "path,body,headers,status,words",
    [
        ("/v1/embeddings", b"{not json", AUTH, 400, "not valid JSON"),
        ("/v1/embeddings", b"[1, 2]", AUTH, 422, "must be a JSON object"),
        ("/v1/embeddings", {"model": NAME, "input": 5}, AUTH, 422, "input must be a string"),
        ("/v1/embeddings", {"model": NAME, "input": [1, "a"]}, AUTH, 422, "input must be"),
        ("/v1/embeddings", {"model": 7, "input": "a"}, AUTH, 422, "model must be a string"),
        ("/v1/embeddings", {"model": NAME}, AUTH, 422, "input is required"),
        ("/v1/embeddings", {"model": NAME, "input": []}, AUTH, 422, "input is empty"),
        ("/v1/embeddings", {"model": NAME, "input": ""}, AUTH, 422, r"input\[0\] is empty"),
        ("/v1/embeddings", {"model": NAME, "input": ["a"] * 65}, AUTH, 422, "65 items, more than the limit of 64"),
        ("/v1/embeddings", {"model": NAME, "input": "a" * 5001}, AUTH, 422, "5001 characters, more than the limit"),
        ("/v1/embeddings", {"model": NAME, "input": "word " * 1000}, AUTH, 422, "more than the model's limit of 256"),
        ("/v1/embeddings", {"model": NAME, "input": [[1, 99999]]}, AUTH, 422, "token id 99999, outside"),
        ("/v1/embeddings", {"model": NAME, "input": "a", "encoding_format": "hex"}, AUTH, 422, "encoding_format"),
        ("/v1/embeddings", {"model": NAME, "input": "a", "user": 42}, AUTH, 422,
         r"user must be a string \(the end user's id, as OpenAI's API takes it\), got an integer"),
        ("/v1/embeddings", {"model": NAME, "input": "a", "user": ["u"]}, AUTH, 422, "user must be a string"),
        ("/v1/embeddings", {"model": NAME, "input": "a", "dimensions": 0}, AUTH, 422,
         "dimensions must be an integer from 1 to this model's 384, got 0"),
        ("/v1/embeddings", {"model": NAME, "input": "a", "dimensions": "384"}, AUTH, 422,
         r'dimensions must be an integer, got a string \("384"\)'),
        ("/v1/embeddings", {"model": NAME, "input": "a", "dimensions": True}, AUTH, 422,
         r"dimensions must be an integer, got a boolean \(true\)"),
        ("/v1/embeddings", {"model": NAME, "input": "a", "dimensions": 500}, AUTH, 422,
         "dimensions must be an integer from 1 to this model's 384, got 500"),
        ("/v1/embeddings", b'{"model": "%s", "input": "a", "dimensions": NaN}' % NAME.encode(), AUTH, 400,
         "NaN is not JSON"),
        ("/v1/embeddings", b'{"model": "%s", "input": "a", "dimensions": -Infinity}' % NAME.encode(), AUTH, 400,
         "-Infinity is not JSON"),
        ("/embed", b'{"inputs": "a", "x": 1e999}', AUTH, 400, "1e999 is too large"),
        # Python's own words were passed on: "...; use sys.set_int_max_str_digits() to increase the limit"
        pytest.param("/v1/embeddings", b'{"model": "m", "input": "a", "dimensions": ' + b"9" * 5000 + b"}", AUTH, 400,
                     "^the request body is not valid JSON: a number of 5000 digits, more than the 4300 an integer "
                     "may have$", id="an integer of 5000 digits"),
        ("/v1/embeddings", {"model": NAME, "input": [101, 7592, 2088, 102]}, AUTH, 400,
         r"input\[0\] has token id 101 \(\[CLS\]\) at position 0: send a text's pieces without \[CLS\]"),
        ("/v1/embeddings", {"model": NAME, "input": [[7592], [7592, 2088, 102]]}, AUTH, 400,
         r"input\[1\] has token id 102 \(\[SEP\]\) at position 2"),
        ("/v1/embeddings", {"model": NAME, "input": [[7592, 0, 0]]}, AUTH, 400,
         r"token id 0 \(\[PAD\]\) at position 1"),
        ("/tokenize", {"inputs": ["\u4e2d" * 2000, "\u4e2d" * 1500]}, AUTH, 413,
         "more than 3000 tokens .* the limit of one /tokenize request"),
        ("/v1/embeddings", {"model": NAME, "input": "a", "truncate": "yes"}, AUTH, 422, "truncate must be true"),
        ("/v1/embeddings", {"model": "gpt-4", "input": "a"}, AUTH, 404, "'gpt-4' is not served here"),
        ("/v1/embeddings", {"model": NAME, "input": "a"}, {}, 401, "API key is required"),
        ("/v1/embeddings", {"model": NAME, "input": "a"}, {"Authorization": "Bearer wrong"}, 401, "API key"),
        ("/embed", {"inputs": ["a"], "normalize": 1}, AUTH, 422, "normalize must be true or false"),
        ("/embed", {"normalize": True}, AUTH, 422, "inputs is required"),
        ("/embed", {"texts": ["a"]}, AUTH, 422, r"texts is not supported on /embed \(it is a field of /rerank\); "
         "/embed takes inputs, "),  # (rerank's name: "inputs is required" before fields were checked)
        ("/embed", {"inputs": "a", "truncation_direction": "left"}, AUTH, 422,
         'truncation_direction must be "Left" or "Right", got "left"'),
        ("/embed", {"inputs": "a", "prompt_name": "passage"}, AUTH, 422,
         "prompt_name \"passage\" is not one of this model's prompts \\(\"query\", \"document\"\\)"),
        ("/embed", {"inputs": "a", "dimensions": 385}, AUTH, 422, "dimensions must be an integer from 1 to this "
         "model's 384, got 385"),
        ("/embed", {"inputs": "a", "dimensions": 0}, AUTH, 422, "dimensions must be an integer from 1"),
        ("/tokenize", {"inputs": "a", "prompt_name": "query"}, AUTH, 422, "prompt_name is not supported"),
        # a field another route applies is refused where it is not applied; they were ignored (200)
        ("/v1/embeddings", {"model": NAME, "input": "a", "normalize": False}, AUTH, 422,
         r"normalize is not supported on /v1/embeddings \(it is a field of /embed\); /v1/embeddings takes model, "),
        ("/v1/embeddings", {"model": NAME, "input": "a", "truncation_direction": "Left"}, AUTH, 422,
         "truncation_direction is not supported on /v1/embeddings"),
        ("/v1/embeddings", {"model": NAME, "input": "a", "inputs": ["b"]}, AUTH, 422, "inputs is not supported"),
        ("/v1/embeddings", {"model": NAME, "input": "a", "normalise": False}, AUTH, 422,
         r'unrecognized field "normalise" \(OpenAI\'s API refuses it too\)'),
        ("/embed", {"inputs": "a", "encoding_format": "base64"}, AUTH, 422,
         "encoding_format is not supported on /embed .it is a field of /v1/embeddings."),
        ("/embed", {"inputs": "a", "model": NAME}, AUTH, 422, "model is not supported on /embed"),
        ("/tokenize", {"inputs": "a", "truncate": True}, AUTH, 422, "truncate is not supported on /tokenize"),
        ("/v1/embeddings", b'{"model": "%s", "input": "a", "truncate": false, "truncate": true}' % NAME.encode(),
         AUTH, 400, "the key 'truncate' is given twice"),  # (the last one was taken: which did a proxy read?)
        ("/embed", b'{"inputs": "first", "inputs": "second"}', AUTH, 400, "the key 'inputs' is given twice"),
        ("/v1/embeddings", {"model": NAME, "input": [[1]] * 50_000}, AUTH, 422,
         "50000 items, more than the limit of 64"),  # (counted before any item is looked at)
        ("/metrics", None, {}, 401, "API key"),
    ],
)  # fmt: skip
def test_bad_requests_get_their_status_and_a_json_error(server, path, body, headers, status, words):
    if body is None:
        response = httpx.get(server.url + path, headers=headers, timeout=30)
    elif isinstance(body, bytes):
        response = httpx.post(server.url + path, content=body, headers=headers, timeout=30)
    else:
        response = httpx.post(server.url + path, json=body, headers=headers, timeout=30)
    assert response.status_code == status, response.text
    payload = response.json()
    message = payload["error"]["message"] if isinstance(payload["error"], dict) else payload["error"]
    assert __import__("re").search(words, message), message
    assert "Traceback" not in response.text


@pytest.mark.parametrize(
    "method,path,status,shape,words,allow",
    [
        ("GET", "/v1/foo", 404, "openai", "no endpoint GET /v1/foo; this server answers POST /v1/embeddings", None),
        ("POST", "/nothing/here", 404, "tei", "no endpoint POST /nothing/here", None),
        ("POST", "/v1/embeddings/", 404, "openai", "no endpoint POST /v1/embeddings/;", None),  # (was a 307 to
        ("POST", "/embed/", 404, "tei", "no endpoint POST /embed/;", None),  # the client's Host, with no body)
        ("OPTIONS", "/v1/embeddings", 405, "openai", "OPTIONS /v1/embeddings is not allowed", "POST"),
        ("GET", "/v1/embeddings", 405, "openai", "takes POST", "POST"),
        ("PUT", "/embed", 405, "tei", "PUT /embed is not allowed", "POST"),
        ("POST", "/health", 405, "tei", "takes GET", "GET, HEAD"),
    ],
)  # fmt: skip
def test_unknown_routes_and_wrong_methods_are_json_errors(server, method, path, status, shape, words, allow):
    """Starlette's own 404 and 405 are plain text ("Not Found"); the server's are JSON in the
    dialect's shape, and a 405 names the methods the route takes (Allow)."""
    response = httpx.request(method, server.url + path, headers=AUTH, timeout=30)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json", response.headers
    error = response.json()["error"]
    if shape == "openai":
        assert error["type"] == "invalid_request_error" and words in error["message"], error
    else:
        assert response.json()["error_type"] == "Validation" and words in error, error
    assert response.headers.get("allow") == allow


def test_a_null_field_counts_as_absent_on_every_field(server):
    """docs/serving.md: "A field sent as null counts as absent". It did for dimensions, prompt_name,
    truncation_direction and user, but every boolean field (truncate, normalize, add_special_tokens)
    and encoding_format answered 422 "... got null"; each field of each route is checked."""
    for route, base in [("/v1/embeddings", {"model": NAME, "input": "a", "encoding_format": "float"}),
                        ("/embed", {"inputs": "a", "normalize": False, "truncate": True}),
                        ("/tokenize", {"inputs": "a", "add_special_tokens": False})]:  # fmt: skip
        null_is_absent(server, route, base, AUTH)


def test_the_param_of_a_refused_field_is_its_bare_name(server):
    """OpenAI's ``param`` is the field's name; an unrecognized field's was the JSON-quoted name
    ('"normalise"'). Every field of the other routes, and an unknown one, refused on /v1/embeddings."""
    from minibert.apps.serve.request_parsing import ROUTE_FIELDS

    names = {name for fields in ROUTE_FIELDS.values() for name in fields} - set(ROUTE_FIELDS["/v1/embeddings"])
    for name in sorted(names) + ["normalise", "Ünknown field"]:
        response = httpx.post(f"{server.url}/v1/embeddings", json={"model": NAME, "input": "a", name: "x"},
                              headers=AUTH, timeout=30)  # fmt: skip
        assert response.status_code == 422 and response.json()["error"]["param"] == name, response.text


def test_a_field_named_with_a_lone_surrogate_is_422_not_500(server):
    """An unknown field whose name holds a lone surrogate ("\\ud800"), quoted back in the error: the
    answer's UTF-8 encoding raised, and the client's mistake was a 500. Now the name comes back
    escaped, as JSON writes it; and a long name is cut before it is quoted (it was cut mid-escape)."""
    import json

    for name in (r"\ud800", r"y\ud83d", r"pr\u00e9f\u00e9rence" * 10):  # (JSON's escapes, as a client sends them)
        body = f'{{"model": {json.dumps(NAME)}, "input": "ok", "{name}": 1}}'
        response = httpx.post(f"{server.url}/v1/embeddings", content=body, headers=AUTH, timeout=30)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["message"].startswith("unrecognized field ") and error["param"] == json.loads(f'"{name}"')[:60]
        quoted = error["message"][len("unrecognized field "):].split(" (OpenAI")[0]
        assert json.loads(quoted) == json.loads(f'"{name}"')[:60], quoted  # a whole JSON string


def test_lone_surrogates_are_refused_naming_the_field_before_any_model_work(server, minilm_dir):
    """JSON's "\\ud800" without its pair is no character: Hugging Face's tokenizer refuses it, minibert's
    dropped it ("b\\ud800" embedded as "b"). Every text field refuses it with 422, naming the field
    and the index, and the tokenizer never sees it (no tokens counted)."""
    transformers = pytest.importorskip("transformers")
    with pytest.raises(TypeError):  # the reference
        transformers.AutoTokenizer.from_pretrained(str(minilm_dir))("b\ud800")
    import json

    tokens_before = _tokens_counted(server)
    for path, body, where in [
        ("/v1/embeddings", {"model": NAME, "input": ["fine", "b\ud800"]}, "input[1]"),
        ("/embed", {"inputs": "\udc00b"}, "inputs[0]"),
        ("/tokenize", {"inputs": ["a", "b", "a\ud800b"]}, "inputs[2]"),
    ]:
        response = httpx.post(server.url + path, content=json.dumps(body), headers=AUTH, timeout=30)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        message = error["message"] if isinstance(error, dict) else error
        assert message.startswith(f"{where} holds a lone UTF-16 surrogate (\\u"), message
        if isinstance(error, dict):
            assert error["param"] == where.split("[")[0]
    assert _tokens_counted(server) == tokens_before


def _tokens_counted(server) -> float:
    import re

    page = httpx.get(f"{server.url}/metrics", headers=AUTH, timeout=30).text
    return sum(float(value) for value in re.findall(r"^minibert_tokens_total(?:\{[^}]*\})? (\S+)$", page, re.M))


def test_a_500_is_one_log_line_not_a_traceback_too(minilm_dir, caplog):
    """Starlette raises an error again after its handler has answered 500: uvicorn wrote its
    traceback after the server's own line. The error ends in the guard now."""
    import logging

    from starlette.routing import Route

    from minibert.apps.serve.app import build_app
    from minibert.apps.serve.settings import ServeSettings

    app = build_app(ServeSettings(model=str(minilm_dir)))

    async def broken(request):
        raise RuntimeError("a bug")

    app.app.router.routes.append(Route("/broken", broken))

    async def main():  # (ASGITransport raises what the app raises, as uvicorn logs it)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.get("/broken")

    with caplog.at_level(logging.ERROR, logger="minibert.serve"):
        response = asyncio.run(main())
    assert response.status_code == 500
    assert response.json() == {"error": "internal server error", "error_type": "Backend"}
    assert [record.getMessage() for record in caplog.records] == ["internal error on /broken: RuntimeError: a bug"]


def test_metrics_count_routes_not_paths_and_the_log_escapes_them(server):
    """Each path a client invents used to become a label of /metrics, kept forever (unbounded
    memory, even from clients without the key), and went unescaped into /metrics and the log:
    a newline in a path wrote a metric of its own. Now every path that is no route is "other"."""
    import http.client
    import re

    injections = ["/a%0Aminibert_fake_metric%201", "/a%22%7D%20evil%7Bx%3D%22", '/q"uote']
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        for path in [f"/{number}-" + "x" * 2000 for number in range(60)] + injections:
            connection.request("GET", path)  # no key: 401, counted all the same
            response = connection.getresponse()
            response.read()
            assert response.status == 401
    finally:
        connection.close()
    metrics = httpx.get(f"{server.url}/metrics", headers=AUTH, timeout=30).text
    counted = [line for line in metrics.splitlines() if line.startswith("minibert_requests_total")]
    routes = "/v1/embeddings|/v1/models|/embed|/tokenize|/rerank|/predict|/v1/rerank|/health|/metrics|other"
    for line in counted:
        assert re.fullmatch(rf'minibert_requests_total\{{path="({routes})",status="\d{{3}}"\}} \d+', line), line
    assert len(counted) < 40, counted  # routes x statuses, whatever the paths
    assert not any(line.startswith(("minibert_fake_metric", "evil")) for line in metrics.splitlines())
    log = server.output().splitlines()
    assert not any(line.startswith("minibert_fake_metric") for line in log)
    assert any('"GET /a%0Aminibert_fake_metric%201 HTTP/1.1" 401' in line for line in log)  # as sent: one line
    assert any('"GET /q\\x22uote HTTP/1.1" 401' in line for line in log)  # a quote cannot end the field
    assert max(map(len, log)) < 1500  # a path is cut in the log (paths may be 64 KiB)


def test_body_too_large_is_413_without_reading_it_all(server):
    body = b'{"model": "x", "input": "' + b"a" * 400_000 + b'"}'
    response = httpx.post(f"{server.url}/v1/embeddings", content=body, headers=AUTH, timeout=30)
    assert response.status_code == 413 and "limit of 300000" in response.json()["error"]["message"]
    chunks = (b"a" * 50_000 for _ in range(10))  # no Content-Length: counted as it arrives
    response = httpx.post(f"{server.url}/embed", content=chunks, headers=AUTH, timeout=30)
    assert response.status_code == 413 and response.json()["error_type"] == "Validation"


def test_the_authorization_scheme_is_case_insensitive(server):
    """RFC 9110 11.1: the scheme is a case-insensitive token, followed by one or more spaces. The key
    was compared with the whole header, so "bearer KEY" and "BEARER KEY" got 401."""
    body = {"model": NAME, "input": "a"}
    for header, status in [(f"bearer {KEY}", 200), (f"BEARER {KEY}", 200), (f"Bearer   {KEY}", 200),
                           (f"Bearer{KEY}", 401), (f"Basic {KEY}", 401), (f"bearer {KEY}x", 401), ("bearer", 401)]:
        response = httpx.post(f"{server.url}/v1/embeddings", json=body, headers={"Authorization": header}, timeout=60)
        assert response.status_code == status, (header, response.text)  # fmt: skip


# ----------------------------------------------------------------------------- overload


def test_overload_answers_503_with_retry_after(minilm_dir):
    server = Server(minilm_dir, "--max-queue", "8", "--max-inputs", "8", "--max-wait-ms", "50")
    try:

        async def main():
            async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
                body = {"model": NAME, "input": [f"text number {i}" for i in range(6)]}  # (6 of the queue's 8)
                return await asyncio.gather(*(http.post("/v1/embeddings", json=body) for _ in range(40)))

        responses = asyncio.run(main())
        statuses = [response.status_code for response in responses]
        assert set(statuses) <= {200, 503} and statuses.count(503) > 0 and statuses.count(200) > 0, statuses
        refused = next(response for response in responses if response.status_code == 503)
        assert refused.headers["retry-after"] == "1" and "overloaded" in refused.json()["error"]["message"]
        print(f"\noverload: {statuses.count(200)} served, {statuses.count(503)} refused with 503")
    finally:
        returncode, _ = server.stop()
    assert returncode == 0
