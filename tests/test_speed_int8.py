"""dtype="int8": the encoder's six projections in int8 (int8.py), checked against float32 at load
(int8_check.py), entered through speed/seam.py only; everything else float32; refusals in one line.
The two int8 libraries (FBGEMM, oneDNN) are in test_speed_int8_libraries.py, the memory an int8
model holds and gives back in test_speed_int8_memory.py, hostile use in test_speed_int8_hostile*.py.
"""

from __future__ import annotations

import logging
import os

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from int8_checkpoints import TINY, saved
from minibert import BertConfig, BertForSequenceClassification, BertModel, BertTokenizer
from minibert.errors import QuantizationError
from minibert.speed import int8, int8_check
from minibert.speed.int8 import Int8Linear, int8_layers

LIBRARIES_HERE = [library for library in int8.LIBRARIES if int8.library_unavailable(library) is None]


def test_int8_swaps_exactly_the_six_projections_of_each_layer(tiny_dir, int8_fresh_cache):
    model = BertModel.from_pretrained(tiny_dir, dtype="int8")
    names = [name for name, _ in int8_layers(model)]
    per_layer = ["attention.query", "attention.key", "attention.value", "attention.output",
                 "feed_forward.intermediate", "feed_forward.output"]  # fmt: skip
    assert names == [f"layers.{n}.{part}" for n in range(2) for part in per_layer]
    # attention, LayerNorm, GELU, embeddings, pooler: float32 modules as model.py builds them
    assert type(model.pooler.dense) is nn.Linear and model.pooler.dense.weight.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert model.int8_check.reason == "measured" and model.int8_check.worst_cosine > int8_check.COSINE_FLOOR


def test_int8_sentence_vectors_stay_close_to_float32_on_real_text(minilm_dir, real_texts):
    """all-MiniLM-L6-v2 on real sentences of several scripts: the mean-pooled vectors of the int8
    model against the float32 model's (which tests/test_book_modules.py checks against transformers).
    The bounds are the floor the loader enforces and the mean it measured (docs/int8.md)."""
    tokenizer = BertTokenizer.from_pretrained(minilm_dir)
    batch = dict(tokenizer(real_texts, padding=True, return_tensors="pt"))
    exact = int8_check.sentence_vectors(BertModel.from_pretrained(minilm_dir), batch)
    approximate = int8_check.sentence_vectors(BertModel.from_pretrained(minilm_dir, dtype="int8"), batch)
    cosines = torch.nn.functional.cosine_similarity(exact, approximate, dim=1)
    print(f"int8 vs float32 cosine: mean {cosines.mean():.4f}, worst {cosines.min():.4f}")
    assert cosines.min() > int8_check.COSINE_FLOOR and cosines.mean() > 0.98, cosines


def test_a_backward_pass_through_int8_is_one_clear_error(tiny_dir, int8_fresh_cache):
    model = BertModel.from_pretrained(tiny_dir, dtype="int8")
    out = model(torch.tensor([[5, 6, 7]])).last_hidden_state  # a forward that autograd records works
    with pytest.raises(QuantizationError, match="backward pass reached a layer loaded in int8"):
        out.sum().backward()


def test_a_frozen_int8_model_runs_with_gradients_on(tiny_dir, int8_fresh_cache, monkeypatch):
    """A plain call (no torch.no_grad) of a model frozen as docs/walkthrough.md freezes one: the int8
    layers compute their own products (speed/fast_path.py's one product for Q, K, V is not theirs)."""
    from minibert.speed import fast_path

    monkeypatch.setattr(fast_path, "ONE_PRODUCT_ON", frozenset({"cpu", "cuda"}))  # (a GPU's rule, here)
    model = BertModel.from_pretrained(tiny_dir, dtype="int8").requires_grad_(False)
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    with torch.no_grad():
        expected = model(ids, (ids != 0).long()).last_hidden_state
    out = model(ids, (ids != 0).long()).last_hidden_state
    assert torch.equal(out, expected)


def test_bad_dtype_names_int8_and_auto_never_picks_it(tiny_dir, int8_fresh_cache):
    with pytest.raises(ValueError, match=r"dtype must be one of .*'int8'.*got 'int9'"):
        BertModel.from_pretrained(tiny_dir, dtype="int9")
    assert not int8_layers(BertModel.from_pretrained(tiny_dir, dtype="fastest"))
    assert len(int8_layers(BertModel.from_pretrained(tiny_dir, dtype=torch.int8))) == 12  # the torch.dtype too


def test_book_modules_are_the_float32_weights_of_the_file_and_back(tiny_dir, int8_fresh_cache):
    model = BertModel.from_pretrained(tiny_dir, dtype="int8")
    stored = load_file(tiny_dir / "model.safetensors")
    model.use_book_modules()
    query = model.layers[1].attention.query
    assert type(query) is nn.Linear and torch.equal(query.weight, stored["encoder.layer.1.attention.self.query.weight"])
    model.use_book_modules(False)
    assert isinstance(model.layers[1].attention.query, Int8Linear) and model.gemm_backend == "int8"


def test_saving_an_int8_model_writes_the_float32_checkpoint(tiny_dir, int8_fresh_cache, tmp_path):
    BertModel.from_pretrained(tiny_dir, dtype="int8").save_pretrained(tmp_path / "saved")
    original, saved = load_file(tiny_dir / "model.safetensors"), load_file(tmp_path / "saved" / "model.safetensors")
    assert saved.keys() == original.keys()
    assert all(torch.equal(saved[name], original[name]) and saved[name].dtype == torch.float32 for name in saved)


@pytest.fixture(scope="module")
def tiny_classifier_dir(tmp_path_factory):
    return saved(BertForSequenceClassification, tmp_path_factory.mktemp("tiny-classifier"), seed=1)


def _changed(model):
    """What a user changes after loading: call defaults, a dropout, the labels' names, three added tokens."""
    model.config.output_hidden_states = True
    model.config.hidden_dropout_prob = 0.3
    model.config.id2label = {0: "negative", 1: "positive"}
    model.resize_token_embeddings(TINY["vocab_size"] + 3)
    return model


def test_saving_an_int8_model_writes_its_config_and_embeddings_as_changed(tiny_classifier_dir, int8_fresh_cache,
                                                                          tmp_path):
    """The int8 model's float32 twin was built from the checkpoint's config: every change made after
    loading was lost (output_hidden_states, dropout, labels), and a resized embedding table was torch's
    raw RuntimeError ("size mismatch ... from checkpoint"). It saves what the float32 model saves,
    which transformers reads back as changed."""
    import json

    reference = _changed(BertForSequenceClassification.from_pretrained(tiny_classifier_dir))
    reference.save_pretrained(tmp_path / "float32")
    _changed(BertForSequenceClassification.from_pretrained(tiny_classifier_dir, dtype="int8")).save_pretrained(
        tmp_path / "int8"
    )
    saved = json.loads((tmp_path / "int8" / "config.json").read_text())
    assert saved == json.loads((tmp_path / "float32" / "config.json").read_text())
    transformers = pytest.importorskip("transformers")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "int8"))
    assert theirs.config.output_hidden_states and theirs.config.hidden_dropout_prob == 0.3
    assert theirs.config.id2label == {0: "negative", 1: "positive"} and theirs.config.vocab_size == 123
    stored = theirs.state_dict()
    written = load_file(tmp_path / "float32" / "model.safetensors")
    assert written.keys() <= stored.keys()
    assert all(torch.equal(stored[name], tensor) for name, tensor in written.items())
    ids = torch.tensor([[2, 121, 122, 7, 3]])  # two of the added tokens
    with torch.no_grad():
        assert torch.allclose(theirs.eval()(ids).logits, reference(ids).logits, atol=1e-5)


def test_saving_an_int8_model_with_a_head_of_another_shape_is_refused_by_name(tiny_classifier_dir, int8_fresh_cache,
                                                                              tmp_path):  # fmt: skip
    model = BertForSequenceClassification.from_pretrained(tiny_classifier_dir, dtype="int8")
    model.classifier = nn.Linear(TINY["hidden_size"], 5)
    with pytest.raises(QuantizationError, match=r"classifier\.weight is \(5, 64\).* has \(2, 64\)"):
        model.save_pretrained(tmp_path / "saved")
    assert not (tmp_path / "saved").exists()


def outlier_checkpoint(directory, scale: float):
    """A random BertModel whose value projection's first two channels are ``scale`` times larger and
    the attention output's matching columns ``scale`` times smaller: the same float32 function, but
    the attention output's input has two huge channels (the outliers of real LLMs, made on purpose).
    One 8-bit step for the whole input (per tensor) then leaves the other channels at zero."""
    torch.manual_seed(0)
    model = BertModel(BertConfig(**TINY, initializer_range=0.2)).eval()
    with torch.no_grad():
        for layer in model.layers:
            layer.attention.value.weight[:2] *= scale
            layer.attention.value.bias[:2] *= scale
            layer.attention.output.weight[:, :2] /= scale
    model.save_pretrained(directory)
    return directory


def test_a_model_below_the_cosine_floor_is_refused_with_the_figure(int8_fresh_cache, tmp_path):
    plain, outliers = outlier_checkpoint(tmp_path / "plain", 1.0), outlier_checkpoint(tmp_path / "outliers", 1000.0)
    ids = torch.tensor([[5, 17, 33, 99, 4]])
    same = BertModel.from_pretrained(plain)(ids).last_hidden_state
    assert (same - BertModel.from_pretrained(outliers)(ids).last_hidden_state).abs().max() < 1e-3  # one function
    BertModel.from_pretrained(plain, dtype="int8")  # int8 is fine without the outliers
    with pytest.raises(QuantizationError, match=r"refused for dtype='int8'.* cosine of only 0\.\d+ .*floor is 0\.95"):
        BertModel.from_pretrained(outliers, dtype="int8")


def test_the_check_is_cached_per_checkpoint_file(tiny_dir, int8_fresh_cache, monkeypatch):
    first = BertModel.from_pretrained(tiny_dir, dtype="int8").int8_check

    def must_not_run(*args):
        raise AssertionError("the cached verdict should have been used")

    monkeypatch.setattr(int8_check, "sentence_vectors", must_not_run)
    second = BertForSequenceClassification.from_pretrained(tiny_dir, dtype="int8", new_heads=True).int8_check
    assert second.reason == "cached" and second.worst_cosine == first.worst_cosine


def test_slower_than_float32_is_said_once(tiny_dir, int8_fresh_cache, monkeypatch, caplog):
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 0.8, "onednn": 0.7})
    with caplog.at_level(logging.WARNING, logger="minibert"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")
        BertModel.from_pretrained(tiny_dir, dtype="int8")
    said = [record.getMessage() for record in caplog.records if "buys no speed" in record.getMessage()]
    assert len(said) == 1 and "0.80x float32" in said[0], said


def test_a_cpu_without_int8_dot_products_is_said_once_even_where_int8_is_faster(tiny_dir, int8_fresh_cache, monkeypatch,
                                                                                caplog):
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 1.5})
    monkeypatch.setattr(int8_check, "has_int8_dot_product", lambda: False)
    with caplog.at_level(logging.WARNING, logger="minibert"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")
        BertModel.from_pretrained(tiny_dir, dtype="int8")
    said = [record.getMessage() for record in caplog.records if "dot-product" in record.getMessage()]
    assert len(said) == 1 and "1.50x float32" in said[0] and "emulates" in said[0], said


@pytest.mark.parametrize("library", LIBRARIES_HERE)
def test_the_warning_about_emulated_dot_products_names_the_library_that_runs(tiny_dir, int8_fresh_cache, monkeypatch,
                                                                            caplog, library):
    """Before: it said "FBGEMM emulates them" with oneDNN's int8 GEMMs running."""
    monkeypatch.setenv("MINIBERT_INT8", library)
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 1.5, "onednn": 1.5})
    monkeypatch.setattr(int8_check, "has_int8_dot_product", lambda: False)
    with caplog.at_level(logging.WARNING, logger="minibert"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")
    said = [record.getMessage() for record in caplog.records if "dot-product" in record.getMessage()]
    name = {"fbgemm": "FBGEMM", "onednn": "oneDNN"}[library]
    assert len(said) == 1 and f"int8 ({library})" in said[0] and f"so {name} emulates them" in said[0], said


def test_a_cpu_with_int8_dot_products_where_int8_is_faster_says_nothing(tiny_dir, int8_fresh_cache, monkeypatch,
                                                                        caplog):
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 1.5})
    monkeypatch.setattr(int8_check, "has_int8_dot_product", lambda: True)
    with caplog.at_level(logging.WARNING, logger="minibert"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING], caplog.text


def test_a_cpu_without_the_engine_is_refused(tiny_dir, int8_fresh_cache, monkeypatch):
    from minibert.speed import int8

    monkeypatch.setattr(int8, "unavailable_reason", lambda: "this CPU has no AVX2, which FBGEMM's int8 GEMM needs")
    with pytest.raises(QuantizationError, match="dtype='int8' cannot run here: this CPU has no AVX2"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")


def test_int8_packing_does_not_depend_on_the_process_quantized_engine(int8_fresh_cache):
    """torch.backends.quantized.engine is process-wide; under "qnnpack" the same weights packed
    there give other numbers (|Δ| ~0.5 on this layer). int8.py pins FBGEMM while packing and puts
    the engine back: the outputs are bit-identical whatever engine was set before, for a layer
    made under it and for a copy or a pickle of one made under it (before: torch's own pickling of
    FBGEMM's packed weight packed the copy again under the engine set then; under qnnpack its
    outputs were 2.2 off on MiniLM)."""
    import copy
    import pickle

    torch.manual_seed(0)
    linear, x = nn.Linear(384, 1536), torch.randn(50, 384)
    before = torch.backends.quantized.engine
    for library in LIBRARIES_HERE:  # oneDNN's int8 matmul does not read the engine at all
        original = Int8Linear(linear, library)
        reference = original(x)
        try:
            for engine in torch.backends.quantized.supported_engines:
                torch.backends.quantized.engine = engine
                made = {"made": Int8Linear(linear, library), "deepcopy": copy.deepcopy(original),
                        "pickle": pickle.loads(pickle.dumps(original))}  # fmt: skip
                torch.backends.quantized.engine = before
                for how, layer in made.items():
                    delta = (layer(x) - reference).abs().max().item()
                    assert delta == 0.0, (library, engine, how, delta)
                torch.backends.quantized.engine = engine
                assert Int8Linear(linear, library)(x).equal(reference) and torch.backends.quantized.engine == engine
        finally:
            torch.backends.quantized.engine = before



def test_int8_on_rxnfps_real_classifier_counts_the_labels_it_changes(int8_fresh_cache):
    """A real fine-tuned classifier (rxnfp's 50 reaction classes) on 40 real reaction types:
    ``minibert verify --dtype int8``'s count of changed labels equals the count made here from each
    model's own logits (padding skipped, as ``classify`` runs them), and the share is printed
    (docs/int8.md gives it)."""
    from pathlib import Path

    from reactions import REACTIONS, rxnfp_words

    from minibert.apps.verify_int8 import compare_int8_with_float32, format_report

    module = pytest.importorskip("rxnfp")
    directory = str(Path(module.__file__).parent / "models" / "transformers" / "bert_ft_10k_25s")
    texts = [rxnfp_words(reaction) for reaction in REACTIONS]
    tokenizer = BertTokenizer.from_pretrained(directory)
    batch = dict(tokenizer(texts, padding=True, return_tensors="pt"))
    with torch.inference_mode():
        labels = [BertForSequenceClassification.from_pretrained(directory, dtype=dtype)(**batch, skip_padding=True)
                  .logits.argmax(-1) for dtype in (None, "int8")]  # fmt: skip
    changed = int((labels[0] != labels[1]).sum())
    report = compare_int8_with_float32(directory, texts)
    print(f"\nrxnfp's classifier: {changed} of {len(texts)} labels changed by int8; cosine mean {report.mean:.5f}, "
          f"worst {report.worst:.5f}")  # fmt: skip
    assert report.labels_changed == changed, (report.labels_changed, changed)
    assert f"labels changed by int8: {changed} of 40 ({changed / 40:.1%})" in format_report(report)
    assert len(set(labels[0].tolist())) > 1  # the texts are told apart: not one class for everything


def test_the_command_caps_onednns_primitive_cache_but_never_over_the_users_setting(monkeypatch):
    """oneDNN keeps a compiled primitive per GEMM shape (1,024 by default); the command caps it
    (speed/malloc.py), so a long embed run of ever-new batch shapes stays flat in memory
    (tests/test_apps_embed_resume.py measures that). A user's own setting is kept."""
    from minibert.speed.malloc import ONEDNN_PRIMITIVES, PRIMITIVE_CACHES, bound_onednn_primitive_cache

    assert PRIMITIVE_CACHES == ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")  # oneDNN's and ideep's
    for user_set in PRIMITIVE_CACHES:
        for name in PRIMITIVE_CACHES:
            monkeypatch.setenv(name, "")  # recorded, so the test leaves it as it was
            monkeypatch.delenv(name)
        assert bound_onednn_primitive_cache() is True
        assert all(os.environ[name] == str(ONEDNN_PRIMITIVES) for name in PRIMITIVE_CACHES)
        for name in PRIMITIVE_CACHES:
            monkeypatch.delenv(name)
        monkeypatch.setenv(user_set, "7")
        assert bound_onednn_primitive_cache() is False
        assert os.environ[user_set] == "7" and all(name not in os.environ for name in PRIMITIVE_CACHES
                                                   if name != user_set)  # fmt: skip


@pytest.mark.parametrize("positions", [1, 2])
def test_a_model_of_too_few_positions_for_a_text_loads_in_int8_and_verify_names_the_field(tmp_path, int8_fresh_cache,
                                                                                         positions):
    """max_position_embeddings = 1 loads in float32; in int8 it raised the tokenizer's bare ValueError
    ("max_length is too small to hold even the special tokens"), from the calibration cutting its texts
    to one position. Now the calibration runs on random ids there (a text needs [CLS] and [SEP]), and
    ``minibert verify`` (float32 or int8), which has no text to compare, says so naming the field
    (it raised the same bare error, exit 1 with the tokenizer's words). Two positions use the tokenizer."""
    from helpers import run_minibert

    torch.manual_seed(0)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{n}" for n in range(115))]
    BertModel(BertConfig(**{**TINY, "max_position_embeddings": positions})).eval().save_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    model = BertModel.from_pretrained(tmp_path, dtype="int8")
    assert model.int8_check.reason == "measured" and model.int8_check.worst_cosine > int8_check.COSINE_FLOOR
    for dtype in ("float32", "int8"):
        result = run_minibert("verify", "--model", str(tmp_path), *(["--dtype", "int8"] if dtype == "int8" else []))
        if positions == 1:
            assert result.returncode == 1 and "max_position_embeddings = 1, and a text needs two positions" in (
                result.stderr.strip().splitlines()[-1]), result.stderr
        else:
            assert "too small" not in result.stderr and "Traceback" not in result.stderr, result.stderr
