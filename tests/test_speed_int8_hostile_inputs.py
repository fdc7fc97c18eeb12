"""dtype="int8" attacked as a hostile user would (issue 45's own hostile pass), its inputs: every
checkpoint format and head, the shortest and longest inputs, an empty or all-padding batch, the
command line and the server, a model of few positions or another model's vocabulary, gemm= beside
int8. Each case ends in a clear error of a documented type naming what is wrong, or in the right
behaviour. Small random checkpoints (int8_checkpoints.py).
"""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file

from helpers import run_minibert
from int8_checkpoints import IDS, saved
from minibert import (
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertModel,  # fmt: skip
)
from minibert.speed import int8_check
from minibert.speed.int8 import int8_layers, is_int8

pytestmark = pytest.mark.usefixtures("int8_measured_faster")  # a fresh measurement cache per test, int8 faster


# --- checkpoints, heads, shapes, inputs ----------------------------------------------------------------------


def test_pytorch_model_bin_in_int8_equals_the_safetensors_file(tiny_dir, int8_model, tmp_path):
    shutil.copy(tiny_dir / "config.json", tmp_path)
    torch.save(load_file(tiny_dir / "model.safetensors"), tmp_path / "pytorch_model.bin")
    with torch.inference_mode():
        assert torch.equal(BertModel.from_pretrained(tmp_path, dtype="int8")(IDS).last_hidden_state,
                           int8_model(IDS).last_hidden_state)  # fmt: skip


def test_googles_tf_checkpoint_loads_in_int8():
    model = BertModel.from_pretrained("tests/data/uncased_L-2_H-32_A-2", dtype="int8")
    assert len(int8_layers(model)) == 12 and model.int8_check.worst_cosine > int8_check.COSINE_FLOOR


@pytest.mark.parametrize("cls", [BertForMaskedLM, BertForSequenceClassification, BertForQuestionAnswering])
def test_heads_stay_float32_around_an_int8_encoder(tmp_path, cls):
    directory = saved(cls, tmp_path / "model")
    model = cls.from_pretrained(directory, dtype="int8")
    assert len(int8_layers(model)) == 12 and all(p.dtype == torch.float32 for p in model.parameters())
    with torch.inference_mode():
        out = model(IDS)
    assert all(torch.isfinite(tensor).all() for tensor in out.to_tuple())


@pytest.mark.slow
def test_the_bundled_model_loads_in_int8():
    model = BertForMaskedLM.from_pretrained("minibert/fortunes-mini", dtype="int8")
    assert model.int8_check.worst_cosine > int8_check.COSINE_FLOOR


def test_tiny_and_odd_hidden_sizes_in_int8(tmp_path):
    directory = saved(BertModel, tmp_path / "odd", hidden_size=32, num_attention_heads=2, intermediate_size=37,
                      num_hidden_layers=1)  # fmt: skip
    model = BertModel.from_pretrained(directory, dtype="int8")
    with torch.inference_mode():
        assert model(IDS).last_hidden_state.shape == (1, 4, 32)


@pytest.mark.parametrize("length", [1, 512])
def test_the_shortest_and_longest_inputs_in_int8(int8_model, length):
    model = int8_model
    with torch.inference_mode():
        assert torch.isfinite(model(torch.randint(5, 120, (2, length))).last_hidden_state).all()


def test_an_input_longer_than_the_positions_is_refused_by_name(int8_model):
    with pytest.raises(ValueError, match="513 tokens is longer than max_position_embeddings=512"):
        int8_model(torch.randint(5, 120, (1, 513)))


def test_an_all_padding_batch_in_int8_is_finite(int8_model):
    model = int8_model
    with torch.inference_mode():
        out = model(torch.zeros(2, 4, dtype=torch.long), attention_mask=torch.zeros(2, 4, dtype=torch.long))
    assert torch.isfinite(out.last_hidden_state).all()


@pytest.mark.parametrize("shape", [(0, 4), (2, 0)])
def test_an_empty_batch_in_int8_is_refused_by_shape(int8_model, shape):
    with pytest.raises(ValueError, match=rf"input_ids has shape \({shape[0]}, {shape[1]}\)"):
        int8_model(torch.zeros(shape, dtype=torch.long))


# --- the command line ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["INT8", "int 8", ""])
def test_a_misspelled_dtype_flag_is_a_usage_error(value):
    result = run_minibert("embed", "x", "--dtype", value)
    assert result.returncode == 2 and "'int8'" in result.stderr, result.stderr


def test_verify_int8_on_a_model_without_a_classifier(tmp_path):
    directory = saved(BertModel, tmp_path / "plain", vocab_size=10)
    (directory / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c",
                                                    "d", "e"]) + "\n")  # fmt: skip
    result = run_minibert("verify", "--dtype", "int8", "--model", str(directory), "--text", "a b", "--text", "c")
    assert result.returncode == 0, result.stderr
    assert "cosine to float32 over 2 texts" in result.stdout and "labels changed" not in result.stdout, result.stdout


def test_verify_int8_on_a_missing_model_is_one_line(tmp_path):
    result = run_minibert("verify", "--dtype", "int8", "--model", str(tmp_path / "nowhere"), "--text", "a")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "nowhere" in result.stderr


def test_a_command_on_a_model_refused_for_int8_says_so_in_one_line(tmp_path):
    from test_speed_int8 import outlier_checkpoint

    directory = outlier_checkpoint(tmp_path / "outliers", 1000.0)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"word{n}" for n in range(115)]
    (directory / "vocab.txt").write_text("\n".join(words) + "\n")
    (directory / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    result = run_minibert("embed", "--model", str(directory), "--dtype", "int8", "word1 word2")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "refused for dtype='int8'" in result.stderr and "load it in float32" in result.stderr, result.stderr


@pytest.fixture(scope="module")
def int8_server(minilm_dir):
    """One `minibert serve --dtype int8` for the bad requests below: each is answered and the server
    keeps serving, so the next request (a good one after each bad one) finds it as a fresh one would."""
    from serve_server import Server

    server = Server(minilm_dir, "--dtype", "int8")
    yield server
    server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("body", [{"input": []}, {"input": [{"text": "a"}]}, {"input": None}, {"input": "x" * 200_000}],
                         ids=["empty", "objects", "null", "huge"])  # fmt: skip
def test_serve_int8_answers_bad_requests_with_a_json_error_and_keeps_serving(int8_server, body):
    httpx = pytest.importorskip("httpx")
    response = httpx.post(f"{int8_server.url}/v1/embeddings", json={"model": "all-MiniLM-L6-v2", **body}, timeout=60)
    assert 400 <= response.status_code < 500 and "error" in response.json(), response.text
    assert "Traceback" not in response.text
    good = httpx.post(f"{int8_server.url}/v1/embeddings", json={"model": "all-MiniLM-L6-v2", "input": ["ok"]},
                      timeout=60)  # fmt: skip
    assert good.status_code == 200, good.text


# --- the calibration fits the model ------------------------------------------------------------------------

LETTERS = [chr(code) for code in range(ord("a"), ord("z") + 1)]
PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *LETTERS, *(f"##{letter}" for letter in LETTERS)]


@pytest.mark.parametrize("vocabulary", ["none", "letters", "another model's"])
def test_a_model_that_loads_in_float32_loads_in_int8_whatever_its_positions_and_tokenizer(tmp_path, vocabulary,
                                                                                          caplog):
    """Before: the calibration cut its texts at 128 tokens (and drew 32 random ids without a
    tokenizer) whatever the model's max_position_embeddings, and used a tokenizer whose ids the
    model has no embedding for: a model of 16 positions, or beside another model's vocabulary, was
    refused for int8 with an error about "a sequence of 45 tokens" or "input_ids contains 190" that
    the user never gave. Now the texts are cut to the model's positions, and such a tokenizer is
    passed over for random ids (config.check_vocabulary), as no tokenizer is."""
    import logging

    positions = 512 if vocabulary == "another model's" else 16  # (each case refused for one reason before)
    directory = saved(BertModel, tmp_path / "short", max_position_embeddings=positions)
    others = PIECES[:5] + [f"w{n}" for n in range(150)] + PIECES[5:]  # the letters at ids 155 to 206
    pieces = {"none": [], "letters": PIECES, "another model's": others}[vocabulary]
    if pieces:  # letters only: each word a piece a letter, every calibration text longer than 16 tokens
        (directory / "vocab.txt").write_text("\n".join(pieces) + "\n")
    BertModel.from_pretrained(directory)
    with caplog.at_level(logging.DEBUG, logger="minibert.int8"):
        model = BertModel.from_pretrained(directory, dtype="int8")
    assert model.int8_check.worst_cosine >= int8_check.COSINE_FLOOR
    assert ("calibration on random ids" in caplog.text) == (vocabulary != "letters"), caplog.text
    if vocabulary == "another model's":
        assert "the tokenizer has ids up to 206 but the model's vocab_size is 120" in caplog.text


# --- gemm= beside dtype="int8" ---------------------------------------------------------------------------


def test_gemm_is_checked_beside_int8_and_a_library_refused_as_unused(tiny_dir, tmp_path, monkeypatch):
    """Before: speed_up replaced gemm with "mkl" for int8 before it was looked at, so gemm="bogus"
    was accepted, and a library named was ignored. Now a bad name is float32's own ValueError, a
    library named is refused (int8 replaces the layers it picks for), both before a file is read."""
    from minibert.speed import BACKENDS

    with pytest.raises(ValueError, match=r"gemm must be one of auto, mkl, onednn, onednn-fused; got 'bogus'"):
        BertModel.from_pretrained(tmp_path / "nowhere", dtype="int8", gemm="bogus")
    for gemm in BACKENDS:
        with pytest.raises(ValueError, match=rf"gemm='{gemm}' picks the float32 linear layers' library, but "
                                             r"dtype='int8' runs .* leave gemm out"):  # fmt: skip
            BertModel.from_pretrained(tmp_path / "nowhere", dtype="int8", gemm=gemm)
    assert is_int8(BertModel.from_pretrained(tiny_dir, dtype="int8", gemm="auto"))
    monkeypatch.setenv("MINIBERT_GEMM", "onednn")  # a process-wide wish: int8 runs, as it has its own library
    assert is_int8(BertModel.from_pretrained(tiny_dir, dtype="int8"))
    monkeypatch.setenv("MINIBERT_GEMM", "bogus")
    with pytest.raises(ValueError, match="MINIBERT_GEMM must be one of auto, mkl, onednn, onednn-fused; got 'bogus'"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")


def test_the_command_refuses_gemm_beside_dtype_int8_as_a_usage_error():
    result = run_minibert("embed", "x", "--dtype", "int8", "--gemm", "onednn-fused")
    assert result.returncode == 2 and "--gemm onednn-fused picks the float32 linear layers' library" in result.stderr
