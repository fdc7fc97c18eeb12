"""`minibert serve` on a folder with sentence-transformers' settings: prompts (a default one, and
include_prompt false), truncation_side, and TEI's truncation_direction, prompt_name and dimensions
and OpenAI's dimensions, each against sentence-transformers' own encode on the same folder."""

from __future__ import annotations

import numpy as np
import pytest

from serve_server import NAME, Server

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


def test_embed_follows_truncation_direction_prompt_name_and_dimensions_as_sentence_transformers(minilm_dir, tmp_path):
    """TEI's /embed fields were ignored (Left gave Right's vectors, an unknown prompt_name and
    dimensions 8 answered 200 with 384 values); /v1/embeddings refused every dimensions but 384.
    Each is now sentence-transformers' own: a tokenizer
    with truncation_side="left", encode(prompt_name=...), truncate_dim=N."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    import json

    folder = tmp_path / "prompted"  # MiniLM with prompts: the folder's files linked, its settings rewritten
    folder.mkdir()
    for path in minilm_dir.iterdir():
        if path.name != "config_sentence_transformers.json":
            (folder / path.name).symlink_to(path)
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {"query": "query: "}}))
    reference = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    text = "beginning words " + "filler " * 300 + "the very end of the text"
    server = Server(folder)
    try:
        def embed(**fields):
            response = httpx.post(f"{server.url}/embed", json={"inputs": [text, "hello"], "truncate": True, **fields},
                                  timeout=60)  # fmt: skip
            assert response.status_code == 200, response.text
            return np.array(response.json())

        right, left = embed(truncation_direction="Right"), embed(truncation_direction="Left")
        query, short = embed(prompt_name="query"), embed(dimensions=8)
        unknown = httpx.post(f"{server.url}/embed", json={"inputs": "a", "prompt_name": "passage"}, timeout=30)
        model = httpx.get(f"{server.url}/v1/models", timeout=30).json()["data"][0]["id"]
        openai = httpx.post(f"{server.url}/v1/embeddings", json={"model": model, "input": [text, "hello"],
                                                                 "truncate": True, "dimensions": 8}, timeout=60)
    finally:
        returncode, log = server.stop()
    assert returncode == 0, log
    def expected(**options):
        return reference.encode([text, "hello"], normalize_embeddings=True, **options)

    assert np.abs(right - expected()).max() < 1e-5
    assert np.abs(query - expected(prompt_name="query")).max() < 1e-5
    assert short.shape == (2, 8) and np.abs(short - expected(truncate_dim=8)).max() < 1e-5
    # OpenAI's dimensions (the model refused every size but 384): the same cut, unit length again
    # as OpenAI's shortened vectors are, since this model's own vectors are (its Normalize module)
    shortened = np.array([row["embedding"] for row in openai.json()["data"]])
    assert shortened.shape == (2, 8) and np.abs(shortened - expected(truncate_dim=8)).max() < 1e-5
    reference.tokenizer.truncation_side = "left"
    assert np.abs(left - expected()).max() < 1e-5
    assert np.abs(left[0] - right[0]).max() > 0.01
    assert unknown.status_code == 422 and unknown.json()["error"] == (
        "prompt_name \"passage\" is not one of this model's prompts (\"query\", \"document\")")


def prompted_minilm(minilm_dir, folder):
    """MiniLM with the prompts "query: " (its default) and "passage: ", a pooling that leaves the
    prompt out (include_prompt false), and a tokenizer that cuts long texts on the left
    (truncation_side): the folder's files linked, those settings written."""
    import json

    folder.mkdir()
    for path in minilm_dir.iterdir():
        if path.name not in ("config_sentence_transformers.json", "1_Pooling", "tokenizer_config.json"):
            (folder / path.name).symlink_to(path)
    settings = {"prompts": {"query": "query: ", "doc": "passage: "}, "default_prompt_name": "query"}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(settings))
    tokenizer_settings = json.loads((minilm_dir / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**tokenizer_settings, "truncation_side": "left"}))
    pooling = json.loads((minilm_dir / "1_Pooling" / "config.json").read_text())
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({**pooling, "include_prompt": False}))
    return folder


@pytest.fixture(scope="module")
def prompted(minilm_dir, tmp_path_factory):
    """The server of a prompted MiniLM (``prompted_minilm``), and sentence-transformers' model of it.
    (Its tests but the one on truncation send short texts: the side a text is cut on is no matter there.)"""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder = prompted_minilm(minilm_dir, tmp_path_factory.mktemp("prompted") / "model")
    running = Server(folder)
    yield running, sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    returncode, log = running.stop()
    assert returncode == 0 and "Traceback" not in log, log


def _vectors(response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.array([row["embedding"] for row in response.json()["data"]])


def test_token_ids_get_the_models_default_prompt_as_their_text_does(prompted):
    """Token ids skipped the model's default prompt: a text sent as its pieces (its input_ids[1:-1],
    as docs/serving.md asks) got encode(prompt="")'s vector, not encode's, and no prompt tokens in
    usage. Now ids and text give sentence-transformers' encode, prompt included."""
    server, reference = prompted
    texts = ["first text", "A second text, with a comma and a longer tail of words."]
    ids = [reference.tokenizer(text)["input_ids"][1:-1] for text in texts]
    as_text = httpx.post(f"{server.url}/v1/embeddings", json={"model": NAME, "input": texts}, timeout=60)
    as_ids = httpx.post(f"{server.url}/v1/embeddings", json={"model": NAME, "input": ids, "user": "u"}, timeout=60)
    one = httpx.post(f"{server.url}/v1/embeddings", json={"model": NAME, "input": ids[0]}, timeout=60)
    expected, unprompted = reference.encode(texts), reference.encode(texts, prompt="")
    assert np.abs(expected - unprompted).max() > 0.01  # (the prompt changes the vectors)
    # float32 unit vectors of 384 values from two implementations: the parity bound, 1e-5
    assert np.abs(_vectors(as_text) - expected).max() < 1e-5
    assert np.abs(_vectors(as_ids) - expected).max() < 1e-5
    assert np.abs(_vectors(one) - expected[:1]).max() < 1e-5
    prompted_tokens = sum(len(reference.tokenizer("query: " + text)["input_ids"]) for text in texts)
    assert as_ids.json()["usage"]["prompt_tokens"] == as_text.json()["usage"]["prompt_tokens"] == prompted_tokens


def test_v1_embeddings_refuses_the_embed_fields_it_does_not_apply(prompted):
    """/v1/embeddings read model, input, encoding_format, dimensions and truncate, and dropped the rest:
    "prompt_name": "doc" answered 200 with the default prompt's vector. /embed applies it; here it is 422."""
    server, reference = prompted
    doc = httpx.post(f"{server.url}/embed", json={"inputs": ["first text"], "prompt_name": "doc"}, timeout=60)
    assert np.abs(np.array(doc.json()) - reference.encode(["first text"], prompt_name="doc")).max() < 1e-5
    for field, value in (("prompt_name", "doc"), ("normalize", False), ("truncation_direction", "Left")):
        response = httpx.post(f"{server.url}/v1/embeddings", json={"model": NAME, "input": ["first text"],
                                                                   field: value}, timeout=60)  # fmt: skip
        assert response.status_code == 422, (field, response.text)
        error = response.json()["error"]
        assert error["param"] == field and error["message"].startswith(f"{field} is not supported on /v1/embeddings")
    body = {"model": NAME, "input": ["first text"], "prompt_name": None, "user": "u"}
    allowed = httpx.post(f"{server.url}/v1/embeddings", json=body, timeout=60)
    assert np.abs(_vectors(allowed) - reference.encode(["first text"])).max() < 1e-5  # (null: absent)


def test_a_folder_that_cuts_on_the_left_is_cut_on_the_left_as_the_embedder_cuts(prompted):
    """The server cut every long text at its end unless a request said "Left" (and refused "Left" where
    the pooling leaves the prompt out), while Embedder.embed and sentence-transformers follow the
    folder's truncation_side. Now /v1/embeddings and /embed without truncation_direction follow the
    folder too, and "Left" with a prompt left out of the pooling is sentence-transformers' number.
    (The shared prompted server: its folder cuts on the left.)"""
    server, reference = prompted
    assert reference.tokenizer.truncation_side == "left"
    texts = ["the start of the text " + "filler " * 300 + "and the words at its very end", "short"]
    openai = httpx.post(f"{server.url}/v1/embeddings", json={"model": NAME, "input": texts, "truncate": True},
                        timeout=60)  # fmt: skip
    tei = {direction: httpx.post(f"{server.url}/embed", json={"inputs": texts, "truncate": True,
                                                              **({"truncation_direction": direction}
                                                                 if direction else {})}, timeout=60)
           for direction in (None, "Left", "Right")}  # fmt: skip
    left = reference.encode(texts)
    reference.tokenizer.truncation_side = "right"
    try:
        right = reference.encode(texts)
    finally:
        reference.tokenizer.truncation_side = "left"  # (the fixture's model, shared)
    assert np.abs(left[0] - right[0]).max() > 0.01  # (the side changes the long text's vector)
    # float32 unit vectors of 384 values from two implementations: the parity bound, 1e-5
    assert np.abs(_vectors(openai) - left).max() < 1e-5
    for direction, expected in ((None, left), ("Left", left), ("Right", right)):
        assert tei[direction].status_code == 200, (direction, tei[direction].text)
        assert np.abs(np.array(tei[direction].json()) - expected).max() < 1e-5, direction
