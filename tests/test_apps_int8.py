"""``--dtype int8`` on the commands: embed, classify, verify, serve; bad values are usage errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from helpers import run_minibert
from minibert import BertConfig, BertForSequenceClassification, Embedder
from minibert.apps.verify_int8 import compare_int8_with_float32
from minibert.speed.int8_check import CALIBRATION_TEXTS, COSINE_FLOOR

TEXTS = ["I love Paris", "How do I restart a pod in Kubernetes?", "Der schnelle braune Fuchs springt."]
LONG = " ".join(["The quick brown fox jumps over the lazy dog near the river bank."] * 12)  # 170 tokens: < MiniLM's 256
WORDS = ["hello", "world", "good", "bad", "movie", "the", "was"]


def _cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _small_classifier(directory, labels: int, seed: int):
    """A small random classifier of ``labels`` outputs with a vocabulary of a few words, saved in ``directory``."""
    torch.manual_seed(seed)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                        vocab_size=len(vocab), extra={"num_labels": labels})  # fmt: skip
    BertForSequenceClassification(config).eval().save_pretrained(directory)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    return directory


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory):
    """A small random 3-label classifier with a vocabulary of a few words."""
    return _small_classifier(tmp_path_factory.mktemp("classifier"), labels=3, seed=0)


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


@pytest.fixture(scope="module")
def tiny_scorer(tmp_path_factory):
    """A small random classifier of one output (a reranker's relevance, a regression's value)."""
    return _small_classifier(tmp_path_factory.mktemp("scorer"), labels=1, seed=1)


SCORED = ["hello world", "the movie was good", "bad", "the movie was bad", "good good world"]


def test_verify_int8_of_a_one_output_model_reports_its_scores(tiny_scorer, monkeypatch, tmp_path):
    """Before: "labels changed by int8: 0 of N" always (the argmax of one logit is 0): nothing
    measured. Now the largest |Δ score| and the pairs of texts int8 puts in the other order, each
    as the two models' own logits give them."""
    from minibert.apps.verify_int8 import compare_int8_with_float32
    from minibert.tokenizer.bert_tokenizer import BertTokenizer

    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "cache"))
    report = compare_int8_with_float32(str(tiny_scorer), SCORED)
    batch = dict(BertTokenizer.from_pretrained(tiny_scorer)(SCORED, padding=True, return_tensors="pt"))
    with torch.inference_mode():
        exact, approximate = (BertForSequenceClassification.from_pretrained(tiny_scorer, dtype=dtype)(
                              **batch, skip_padding=True).logits[:, 0].tolist()
                              for dtype in ("float32", "int8"))  # padding skipped, as verify runs  # fmt: skip
    assert report.labels_changed is None
    assert report.score_change == max(abs(a - b) for a, b in zip(exact, approximate))
    pairs = [(i, j) for i in range(len(SCORED)) for j in range(i + 1, len(SCORED))]
    sign = lambda value: (value > 0) - (value < 0)  # noqa: E731
    assert report.pairs_reordered == sum(sign(exact[i] - exact[j]) != sign(approximate[i] - approximate[j])
                                         for i, j in pairs)  # fmt: skip
    texts = [argument for text in SCORED for argument in ("--text", text)]
    result = run_minibert("verify", "--dtype", "int8", "--model", str(tiny_scorer), *texts)
    assert result.returncode == 0, result.stderr
    assert "labels changed" not in result.stdout, result.stdout
    assert f"largest |Δ score| by int8 {report.score_change:.3e}" in result.stdout, result.stdout
    assert f"pairs of texts in another order: {report.pairs_reordered} of 10" in result.stdout, result.stdout


def test_verify_int8_tolerance_bounds_a_one_output_models_score_and_is_refused_elsewhere(tiny_scorer,
                                                                                         tiny_classifier):
    """Before: --tolerance was accepted with --dtype int8 and ignored (exit 0 at --tolerance 1e-30)."""
    result = run_minibert("verify", "--dtype", "int8", "--model", str(tiny_scorer), "--text", "hello world",
                          "--tolerance", "1e-30")  # fmt: skip
    assert result.returncode == 1 and "int8 changes a score by" in result.stderr and "> 1e-30" in result.stderr
    result = run_minibert("verify", "--dtype", "int8", "--model", str(tiny_classifier), "--text", "hello world",
                          "--tolerance", "10")  # fmt: skip
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--tolerance with --dtype int8 bounds the |Δ score| of a classifier of one output" in result.stderr


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
    from serve_server import Server

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


def test_verify_int8_knows_a_classifier_whose_config_names_no_architecture(tiny_classifier, tmp_path):
    """Google's run_classifier.py writes a bert_config.json without ``architectures``, and so do some
    hub configs: verify --dtype int8 took such a classifier for an encoder alone, refused --tolerance
    saying it had not one output, and compared no labels, where classify and rerank (and the
    loader) read the classifier from the tensors. It now reads it from the tensors too."""
    import shutil

    from test_apps_verify import _tf_classifier

    scorer = _tf_classifier(tmp_path / "run_classifier", 1)  # one output, as a reranker
    result = run_minibert("verify", "--dtype", "int8", "--model", str(scorer), "--text", "hello world",
                          "--text", "the movie", "--tolerance", "1e-30")  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"minibert: error: {scorer}: int8 changes a score by ")
    assert "largest |Δ score| by int8" in result.stdout and "pairs of texts in another order: " in result.stdout
    plain = shutil.copytree(tiny_classifier, tmp_path / "plain")
    config = json.loads((plain / "config.json").read_text())
    assert config.pop("architectures") == ["BertForSequenceClassification"]
    (plain / "config.json").write_text(json.dumps(config))
    result = run_minibert("verify", "--dtype", "int8", "--model", str(plain), "--text", "hello world")
    assert result.returncode == 0, result.stderr
    assert "labels changed by int8: " in result.stdout, result.stdout


def _transformers_checkpoint(folder, kind: str, labels: int, stored: str):
    """transformers' ``kind`` (2 layers, hidden 32, ``labels`` outputs) with its config.json, its weights
    ``stored`` as transformers reads them: model.safetensors, pytorch_model.bin (torch's pickle), or
    pytorch_model.bin in two shards with their index."""
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37, num_labels=labels)  # fmt: skip
    model = getattr(transformers, kind)(config)
    model.save_pretrained(folder)
    if stored == "safetensors":
        return folder, model
    (folder / "model.safetensors").unlink()
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    if stored == "pickle":
        torch.save(state, folder / "pytorch_model.bin")
        return folder, model
    names = sorted(state)
    shards = {"pytorch_model-00001-of-00002.bin": names[::2], "pytorch_model-00002-of-00002.bin": names[1::2]}
    for shard, held in shards.items():
        torch.save({name: state[name] for name in held}, folder / shard)
    weight_map = {name: shard for shard, held in shards.items() for name in held}
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return folder, model


def _stored_shapes(folder) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape in the folder's weights, as the safetensors library and torch.load read them."""
    if (folder / "model.safetensors").exists():
        from safetensors import safe_open

        with safe_open(folder / "model.safetensors", "pt") as file:
            return {name: tuple(file.get_slice(name).get_shape()) for name in file.keys()}
    return {name: tuple(tensor.shape) for path in sorted(folder.glob("pytorch_model*.bin"))
            for name, tensor in torch.load(path, weights_only=True).items()}  # fmt: skip


@pytest.mark.parametrize("stored", ["safetensors", "pickle", "pickle shards"])
@pytest.mark.parametrize("kind,labels", [("BertForSequenceClassification", 3), ("BertForSequenceClassification", 1),
                                         ("BertForTokenClassification", 3), ("BertForMaskedLM", 2),
                                         ("BertModel", 2)])  # fmt: skip
def test_verify_int8_reads_what_to_compare_from_one_read_of_the_tensors(tmp_path, kind, labels, stored):
    """compared_class answers three questions from one read of the checkpoint's tensor names and shapes
    (it read a pickle up to three times: the class, the classifier's rows, the pooler, each on its own):
    the class both sides load, its keywords, a sequence classifier's outputs. Each answer is what
    transformers built: the class saved, the ``num_labels`` given, a pooler where its state dict has one."""
    from minibert.apps import verify_int8
    from minibert.loading import checkpoint_files

    folder, model = _transformers_checkpoint(tmp_path, kind, labels, stored)
    reads = []
    real_tensor_shapes = checkpoint_files.tensor_shapes
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoint_files, "tensor_shapes", lambda *a, **k: reads.append(a) or real_tensor_shapes(*a, **k))
        cls, keywords, outputs = verify_int8.compared_class(str(folder))
    assert len(reads) == 1
    assert real_tensor_shapes(reads[0][0]) == _stored_shapes(folder)
    if kind == "BertForSequenceClassification":
        assert (cls.__name__, keywords, outputs) == (kind, {}, labels)
    else:
        pooled = any(name.startswith(("pooler.", "bert.pooler.")) for name in model.state_dict())
        assert (cls.__name__, keywords, outputs) == ("BertModel", {"add_pooling_layer": pooled}, None)
        assert pooled == (kind == "BertModel")  # (transformers builds the token classifier and the MLM without one)


def test_verify_int8_with_tolerance_reads_the_tensors_once(tiny_scorer, capsys, monkeypatch):
    """--tolerance asked compared_class whether the model has one output, then the comparison asked
    it again: a pickled checkpoint was opened twice for the same names and shapes."""
    from minibert.apps import verify_int8
    from minibert.apps.cli import main

    calls = []
    real_compared_class = verify_int8.compared_class
    monkeypatch.setattr(verify_int8, "compared_class", lambda name: calls.append(name) or real_compared_class(name))
    assert main(["verify", "--dtype", "int8", "--model", str(tiny_scorer), "--text", "hello world",
                 "--tolerance", "10"]) == 0  # fmt: skip
    assert calls == [str(tiny_scorer)]


def _embedders_cosines(minilm_dir, texts) -> np.ndarray:
    """Each text's cosine, int8 to float32, of the vectors the Embedder gives for ``texts`` in one call."""
    vectors = {dtype: Embedder.from_pretrained(minilm_dir, dtype=dtype).embed(texts) for dtype in ("float32", "int8")}
    return _cosines(vectors["int8"], vectors["float32"])


# What tells the int8 figures apart is far above float32's rounding of two equal computations
# (cosines of 384 float32 components, ~1e-7; 1e-5 leaves room): [PAD] rows in the step moved "ok" by 0.007.
SAME_COMPUTATION = 1e-5


def test_verify_int8_reports_the_cosines_of_the_vectors_the_embedder_gives(minilm_dir, monkeypatch, tmp_path):
    """verify's cosine of a text is the Embedder's for the same texts: padding skipped. Before, verify
    ran the padded batch, and the ~170 [PAD] rows "ok" got beside LONG entered every projection's int8
    range: 0.967 where the Embedder gives 0.975 (FBGEMM). (The figure still depends on the other texts' own
    tokens, as the Embedder's does: docs/int8.md.)"""
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "cache"))
    texts = ["ok", LONG]
    report = compare_int8_with_float32(str(minilm_dir), texts)
    np.testing.assert_allclose(report.cosines, _embedders_cosines(minilm_dir, texts), rtol=0, atol=SAME_COMPUTATION)


def test_verify_int8_cuts_a_long_text_where_the_embedder_cuts_it(minilm_dir, monkeypatch, tmp_path):
    """all-MiniLM-L6-v2's recipe cuts a text at max_seq_length = 256 tokens; its tokenizer says 512.
    verify cut at the tokenizer's 512, so it measured 400 tokens of a text the Embedder reads 256 of
    (and the step of every text beside it from them): not the cosine the Embedder gives."""
    from minibert import BertTokenizer

    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "cache"))
    longer = " ".join(f"token{index} and more" for index in range(100))
    assert len(BertTokenizer.from_pretrained(minilm_dir)(longer)["input_ids"]) > 400  # past 256, and past 2 x 256
    texts = ["ok", longer, LONG]
    report = compare_int8_with_float32(str(minilm_dir), texts)
    np.testing.assert_allclose(report.cosines, _embedders_cosines(minilm_dir, texts), rtol=0, atol=SAME_COMPUTATION)


def test_the_int8_check_at_load_measures_what_the_embedder_gives(minilm_dir, monkeypatch, tmp_path):
    """The loader's verdict (mean and worst cosine on CALIBRATION_TEXTS) is the Embedder's figure on
    those texts. Before, the check ran its padded batch and counted the [PAD] rows in the int8 range."""
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "cache"))
    from minibert import BertModel

    check = BertModel.from_pretrained(minilm_dir, dtype="int8").int8_check
    cosines = _embedders_cosines(minilm_dir, list(CALIBRATION_TEXTS))
    assert check.reason == "measured"
    assert abs(check.worst_cosine - cosines.min()) < SAME_COMPUTATION, (check, cosines)
    assert abs(check.mean_cosine - cosines.mean()) < SAME_COMPUTATION, (check, cosines)
