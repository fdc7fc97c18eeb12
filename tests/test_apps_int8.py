"""``--dtype int8`` on the commands: embed, classify, verify, serve; bad values are usage errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from helpers import run_minibert
from minibert import BertConfig, BertForSequenceClassification, Embedder
from minibert.speed.int8_check import COSINE_FLOOR

TEXTS = ["I love Paris", "How do I restart a pod in Kubernetes?", "Der schnelle braune Fuchs springt."]
WORDS = ["hello", "world", "good", "bad", "movie", "the", "was"]


def _cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory):
    """A small random 3-label classifier with a vocabulary of a few words."""
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("classifier")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                        vocab_size=len(vocab), extra={"num_labels": 3})  # fmt: skip
    BertForSequenceClassification(config).eval().save_pretrained(directory)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    return directory


def test_embed_dtype_int8_gives_vectors_close_to_float32(minilm_dir):
    result = run_minibert("embed", "--model", str(minilm_dir), "--dtype", "int8", "--json", *TEXTS)
    assert result.returncode == 0, result.stderr
    vectors = [json.loads(line)["embedding"] for line in result.stdout.splitlines()]
    cosines = _cosines(vectors, Embedder.from_pretrained(minilm_dir).embed(TEXTS))
    assert cosines.min() > COSINE_FLOOR, cosines
    assert "in int8: cosine to float32" in result.stderr


@pytest.mark.parametrize("command", [["embed", "x"], ["classify", "x"], ["rerank", "q", "d"], ["serve"]])
def test_an_unknown_dtype_is_a_usage_error_naming_int8(command):
    result = run_minibert(*command, "--dtype", "int9")
    assert result.returncode == 2 and "'int8'" in result.stderr and "int9" in result.stderr, result.stderr


def test_classify_and_verify_in_int8(tiny_classifier):
    result = run_minibert("classify", "--model", str(tiny_classifier), "--dtype", "int8", "hello world", "bad movie")
    assert result.returncode == 0, result.stderr
    assert [len(json.loads(line)["labels"]) for line in result.stdout.splitlines()] == [1, 1]
    result = run_minibert("verify", "--dtype", "int8", "--model", str(tiny_classifier), "--text", "hello world",
                          "--text", "the movie was good", "--text", "bad")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "labels changed by int8: " in result.stdout and " of 3 (" in result.stdout, result.stdout
    assert "layer 2 " in result.stdout and "cosine to float32 over 3 texts: mean" in result.stdout


def test_serve_dtype_int8_answers_with_int8_vectors(minilm_dir):
    httpx = pytest.importorskip("httpx")
    from test_apps_serve import Server

    server = Server(minilm_dir, "--dtype", "int8")
    try:
        response = httpx.post(f"{server.url}/v1/embeddings", json={"input": TEXTS, "model": "all-MiniLM-L6-v2"},
                              timeout=60)  # fmt: skip
        assert response.status_code == 200, response.text
        vectors = [row["embedding"] for row in response.json()["data"]]
    finally:
        returncode, log = server.stop()
    exact = Embedder.from_pretrained(minilm_dir).embed(TEXTS)
    cosines = _cosines(vectors, exact)
    assert COSINE_FLOOR < cosines.min() and cosines.max() < 1 - 1e-7, cosines  # int8's numbers: close, not equal
    assert returncode == 0 and "in int8: cosine to float32" in log, log


@pytest.mark.parametrize("value,says", [("int9", "MINIBERT_INT8 must be one of auto, fbgemm, onednn; got 'int9'"),
                                        ("onednn", "MINIBERT_INT8 asks for onednn, which cannot run here: torch 9")])
def test_a_bad_or_impossible_int8_library_is_one_line_and_exit_1(tiny_classifier, monkeypatch, tmp_path, value, says):
    import shutil

    from minibert.speed import int8_check

    model = shutil.copytree(tiny_classifier, tmp_path / "model")  # a path no earlier command has loaded (and kept)
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MINIBERT_INT8", value)
    monkeypatch.setattr(int8_check, "library_unavailable", lambda library: "torch 9.9 is built without oneDNN")
    result = run_minibert("classify", "--model", str(model), "--dtype", "int8", "hello world")
    assert result.returncode == 1 and result.stdout == "", result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("minibert: error: ") and says in lines[0], result.stderr
