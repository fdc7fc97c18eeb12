"""dtype="int8": the encoder's six projections in int8 (int8.py), checked against float32 at load
(int8_check.py), entered through speed/seam.py only; everything else float32; refusals in one line."""

from __future__ import annotations

import logging
import os
import sys

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from minibert import BertConfig, BertForSequenceClassification, BertModel, BertTokenizer
from minibert.errors import QuantizationError
from minibert.speed import int8, int8_check
from minibert.speed.int8 import Int8Linear, int8_layers
from minibert.speed.packed_linear import AppliedBy

TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=120)
LIBRARIES_HERE = [library for library in int8.LIBRARIES if int8.library_unavailable(library) is None]


def _saved(tmp_path_factory, model_class, seed: int, name: str):
    """A small random ``model_class`` (TINY) saved as a checkpoint, drawn from ``seed``."""
    torch.manual_seed(seed)
    directory = tmp_path_factory.mktemp(name)
    model_class(BertConfig(**TINY)).eval().save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A small random BertModel saved as a checkpoint (no vocabulary: calibrated on random ids)."""
    return _saved(tmp_path_factory, BertModel, 0, "tiny")


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(int8_check, "_warned", set())


def test_int8_swaps_exactly_the_six_projections_of_each_layer(tiny_dir, own_cache):
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


def test_a_backward_pass_through_int8_is_one_clear_error(tiny_dir, own_cache):
    model = BertModel.from_pretrained(tiny_dir, dtype="int8")
    out = model(torch.tensor([[5, 6, 7]])).last_hidden_state  # a forward that autograd records works
    with pytest.raises(QuantizationError, match="backward pass reached a layer loaded in int8"):
        out.sum().backward()


def test_a_frozen_int8_model_runs_with_gradients_on(tiny_dir, own_cache, monkeypatch):
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


def test_bad_dtype_names_int8_and_auto_never_picks_it(tiny_dir, own_cache):
    with pytest.raises(ValueError, match=r"dtype must be one of .*'int8'.*got 'int9'"):
        BertModel.from_pretrained(tiny_dir, dtype="int9")
    assert not int8_layers(BertModel.from_pretrained(tiny_dir, dtype="fastest"))
    assert len(int8_layers(BertModel.from_pretrained(tiny_dir, dtype=torch.int8))) == 12  # the torch.dtype too


def test_book_modules_are_the_float32_weights_of_the_file_and_back(tiny_dir, own_cache):
    model = BertModel.from_pretrained(tiny_dir, dtype="int8")
    stored = load_file(tiny_dir / "model.safetensors")
    model.use_book_modules()
    query = model.layers[1].attention.query
    assert type(query) is nn.Linear and torch.equal(query.weight, stored["encoder.layer.1.attention.self.query.weight"])
    model.use_book_modules(False)
    assert isinstance(model.layers[1].attention.query, Int8Linear) and model.gemm_backend == "int8"


def test_saving_an_int8_model_writes_the_float32_checkpoint(tiny_dir, own_cache, tmp_path):
    BertModel.from_pretrained(tiny_dir, dtype="int8").save_pretrained(tmp_path / "saved")
    original, saved = load_file(tiny_dir / "model.safetensors"), load_file(tmp_path / "saved" / "model.safetensors")
    assert saved.keys() == original.keys()
    assert all(torch.equal(saved[name], original[name]) and saved[name].dtype == torch.float32 for name in saved)


@pytest.fixture(scope="module")
def tiny_classifier_dir(tmp_path_factory):
    return _saved(tmp_path_factory, BertForSequenceClassification, 1, "tiny-classifier")


def _changed(model):
    """What a user changes after loading: call defaults, a dropout, the labels' names, three added tokens."""
    model.config.output_hidden_states = True
    model.config.hidden_dropout_prob = 0.3
    model.config.id2label = {0: "negative", 1: "positive"}
    model.resize_token_embeddings(TINY["vocab_size"] + 3)
    return model


def test_saving_an_int8_model_writes_its_config_and_embeddings_as_changed(tiny_classifier_dir, own_cache, tmp_path):
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


def test_saving_an_int8_model_with_a_head_of_another_shape_is_refused_by_name(tiny_classifier_dir, own_cache,
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


def test_a_model_below_the_cosine_floor_is_refused_with_the_figure(own_cache, tmp_path):
    plain, outliers = outlier_checkpoint(tmp_path / "plain", 1.0), outlier_checkpoint(tmp_path / "outliers", 1000.0)
    ids = torch.tensor([[5, 17, 33, 99, 4]])
    same = BertModel.from_pretrained(plain)(ids).last_hidden_state
    assert (same - BertModel.from_pretrained(outliers)(ids).last_hidden_state).abs().max() < 1e-3  # one function
    BertModel.from_pretrained(plain, dtype="int8")  # int8 is fine without the outliers
    with pytest.raises(QuantizationError, match=r"refused for dtype='int8'.* cosine of only 0\.\d+ .*floor is 0\.95"):
        BertModel.from_pretrained(outliers, dtype="int8")


def test_the_check_is_cached_per_checkpoint_file(tiny_dir, own_cache, monkeypatch):
    first = BertModel.from_pretrained(tiny_dir, dtype="int8").int8_check

    def must_not_run(*args):
        raise AssertionError("the cached verdict should have been used")

    monkeypatch.setattr(int8_check, "sentence_vectors", must_not_run)
    second = BertForSequenceClassification.from_pretrained(tiny_dir, dtype="int8", new_heads=True).int8_check
    assert second.reason == "cached" and second.worst_cosine == first.worst_cosine


def test_slower_than_float32_is_said_once(tiny_dir, own_cache, monkeypatch, caplog):
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 0.8, "onednn": 0.7})
    with caplog.at_level(logging.WARNING, logger="minibert"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")
        BertModel.from_pretrained(tiny_dir, dtype="int8")
    said = [record.getMessage() for record in caplog.records if "buys no speed" in record.getMessage()]
    assert len(said) == 1 and "0.80x float32" in said[0], said


def test_a_cpu_without_int8_dot_products_is_said_once_even_where_int8_is_faster(tiny_dir, own_cache, monkeypatch,
                                                                                caplog):
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 1.5})
    monkeypatch.setattr(int8_check, "has_int8_dot_product", lambda: False)
    with caplog.at_level(logging.WARNING, logger="minibert"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")
        BertModel.from_pretrained(tiny_dir, dtype="int8")
    said = [record.getMessage() for record in caplog.records if "dot-product" in record.getMessage()]
    assert len(said) == 1 and "1.50x float32" in said[0] and "emulates" in said[0], said


@pytest.mark.parametrize("library", LIBRARIES_HERE)
def test_the_warning_about_emulated_dot_products_names_the_library_that_runs(tiny_dir, own_cache, monkeypatch,
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


def test_a_cpu_with_int8_dot_products_where_int8_is_faster_says_nothing(tiny_dir, own_cache, monkeypatch, caplog):
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 1.5})
    monkeypatch.setattr(int8_check, "has_int8_dot_product", lambda: True)
    with caplog.at_level(logging.WARNING, logger="minibert"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING], caplog.text


def test_a_cpu_without_the_engine_is_refused(tiny_dir, own_cache, monkeypatch):
    from minibert.speed import int8

    monkeypatch.setattr(int8, "unavailable_reason", lambda: "this CPU has no AVX2, which FBGEMM's int8 GEMM needs")
    with pytest.raises(QuantizationError, match="dtype='int8' cannot run here: this CPU has no AVX2"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")


def test_int8_packing_does_not_depend_on_the_process_quantized_engine(own_cache):
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


# --- the int8 library: FBGEMM or oneDNN, chosen by measurement --------------------------------------------



@pytest.mark.parametrize("library", LIBRARIES_HERE)
def test_each_int8_library_computes_the_recipe_exactly_where_the_cpu_has_int8_dot_products(library):
    """The recipe, in float64: x quantized per tensor to 8 bits with a zero point (torch's rule, the
    one FBGEMM applies inside), W per output channel, the products summed exactly, scaled back, the
    bias added. With int8 dot-product instructions both libraries sum in int32 exactly, so what is
    left is float32's rounding of the scaling and the bias: a few units of 2^-24 of the sum of the
    terms' magnitudes (8 allowed). Without them FBGEMM sums pairs in 16 bits first, and saturates."""
    if not int8.has_int8_dot_product():
        pytest.skip("no int8 dot-product instructions here: FBGEMM's 16-bit pair sums may saturate (docs/int8.md)")
    torch.manual_seed(0)
    linear, x = nn.Linear(384, 1536), torch.randn(3, 50, 384) * 4
    layer = Int8Linear(linear, library)
    assert layer.library == library and f"library={library}" in repr(layer)
    weight = linear.weight.detach().double()
    scale = (weight.abs().amax(1) / 127).float().double()  # (out,) as Int8Linear keeps it
    quantized_weight = torch.clamp(torch.round(weight / scale[:, None]), -128, 127)  # (out, in)
    qx = torch.quantize_per_tensor_dynamic(x, torch.quint8, False)
    steps = qx.int_repr().double() - qx.q_zero_point()  # (3, 50, in)
    products = steps @ quantized_weight.T  # exact: integers far below 2^53
    expected = products * qx.q_scale() * scale + linear.bias.detach().double()
    magnitude = (steps.abs() @ quantized_weight.abs().T) * qx.q_scale() * scale + linear.bias.detach().double().abs()
    delta = (layer(x).double() - expected).abs()
    print(f"{library}: max |Δ| {delta.max():.3g}, largest |y| {expected.abs().max():.3g}")
    assert (delta <= 8 * 2**-24 * magnitude).all(), delta.max()


def _torchs_quantization(x: torch.Tensor):
    quantized = torch.quantize_per_tensor_dynamic(x, torch.quint8, False)
    return quantized.int_repr(), quantized.q_scale(), quantized.q_zero_point()


@pytest.mark.parametrize("x", [
    torch.zeros(4, 8), torch.full((3, 5), 2.5), torch.full((3, 5), -7.0), torch.tensor([[1e-9, -3e-9, 2e-9]]),
    torch.tensor([[1e-7, 4e-7]]), torch.tensor([[-2e-6, 0.0]]), torch.tensor([[1e30, -1e30, 3.0]]),
    torch.tensor([[1e-40, -2e-41]]), torch.tensor([[0.0, 254.5, 255.0]]), torch.tensor([[-1.0, 3.0]]),
    torch.randn(2, 7, 33) * 50 + 3, torch.randn(40, 64).t(),  # three dimensions; not contiguous
], ids=["zeros", "positive", "negative", "tiny", "small", "small-negative", "huge", "subnormal", "ends", "doc",
        "3d", "transposed"])  # fmt: skip
def test_oneDNNs_activation_steps_are_the_ones_torch_chooses(x):
    """int8.quantize_activations ports torch's ChooseQuantizationParams (the rule FBGEMM's dynamic
    linear uses inside): the scale, the zero point and every step must equal torch's own call's,
    including its special cases (a zero range, a scale below 6.1e-5, a range far from 0)."""
    steps, scale, zero_point = int8.quantize_activations(x)
    expected_steps, expected_scale, expected_zero_point = _torchs_quantization(x)
    assert (scale, zero_point) == (expected_scale, expected_zero_point)
    assert steps.dtype == torch.uint8 and steps.shape == x.shape and torch.equal(steps, expected_steps)


def test_fbgemm_given_the_range_multiplies_as_its_dynamic_linear_bit_for_bit():
    """Int8Linear takes x's range itself (the check for NaN) and hands it to FBGEMM
    (int8._fbgemm_linear), whose dynamic linear would take it again: the outputs must be
    linear_dynamic's own, bit for bit, on the ranges of the test above and on random ones."""
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    layer = Int8Linear(nn.Linear(33, 20))
    cases = [torch.zeros(4, 33), torch.full((3, 33), 2.5), torch.full((3, 33), -7.0), torch.randn(2, 7, 33) * 50 + 3,
             torch.randn(33, 40).t(), torch.randn(5, 33) * 1e-7, torch.randn(5, 33) * 1e-40]  # fmt: skip
    for _ in range(300):
        low_exponent, span = torch.randint(-30, 10, (2,), generator=generator).tolist()
        x = torch.randn(3, 33, generator=generator) * 10.0**low_exponent * 10.0 ** (span % 5)
        cases.append(x + torch.randn(1, generator=generator) * 10.0 ** (low_exponent + span % 7))
    for x in cases:
        extremes = [float(value) for value in torch.aminmax(x)]
        expected = torch.ops.quantized.linear_dynamic(x, layer.packed, False)
        assert torch.equal(int8._fbgemm_linear(x, layer.packed, extremes), expected), x
        assert torch.equal(layer(x), expected)


def test_oneDNNs_activation_steps_match_torch_on_random_ranges():
    """The same on 2,000 random tensors whose ranges span 40 orders of magnitude, one side or both."""
    generator = torch.Generator().manual_seed(0)
    for _ in range(2000):
        low_exponent, span = torch.randint(-30, 10, (2,), generator=generator).tolist()
        x = torch.randn(3, 17, generator=generator) * 10.0**low_exponent * 10.0 ** (span % 5)
        x = x + torch.randn(1, generator=generator) * 10.0 ** (low_exponent + span % 7)  # off-centre
        steps, scale, zero_point = int8.quantize_activations(x)
        expected_steps, expected_scale, expected_zero_point = _torchs_quantization(x)
        assert (scale, zero_point) == (expected_scale, expected_zero_point), x
        assert torch.equal(steps, expected_steps)


def test_the_library_named_in_the_environment_is_used_and_a_bad_name_refused(tiny_dir, own_cache, monkeypatch):
    for library in LIBRARIES_HERE:
        monkeypatch.setenv("MINIBERT_INT8", library)
        model = BertModel.from_pretrained(tiny_dir, dtype="int8")
        assert model.int8_library == library and {layer.library for _, layer in int8_layers(model)} == {library}
    monkeypatch.setenv("MINIBERT_INT8", "int9")
    with pytest.raises(ValueError, match=r"MINIBERT_INT8 must be one of auto, fbgemm, onednn; got 'int9'"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")
    monkeypatch.setenv("MINIBERT_INT8", "onednn")
    monkeypatch.setattr(int8_check, "library_unavailable", lambda library: "torch 9.9 is built without oneDNN")
    with pytest.raises(QuantizationError, match="MINIBERT_INT8 asks for onednn, which cannot run here: torch 9.9 "):
        BertModel.from_pretrained(tiny_dir, dtype="int8")


@pytest.mark.parametrize("speedups,chosen", [({"fbgemm": 1.5, "onednn": 3.0}, "onednn"),
                                             ({"fbgemm": 1.5, "onednn": 1.52}, "fbgemm"),  # within the margin
                                             ({"fbgemm": 1.5}, "fbgemm")])  # fmt: skip
def test_the_library_is_the_one_measured_fastest(tiny_dir, own_cache, monkeypatch, speedups, chosen):
    monkeypatch.delenv("MINIBERT_INT8", raising=False)
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: speedups)
    assert BertModel.from_pretrained(tiny_dir, dtype="int8").int8_library == chosen


def test_the_speed_of_each_library_is_measured_once_and_cached(own_cache, monkeypatch):
    timed = []
    real = int8_check.time_candidates_against_float32

    def counted(hidden, intermediate, candidates, **kwargs):
        timed.append(sorted(candidates))  # every library in the same interleaved rounds
        return real(hidden, intermediate, candidates, **kwargs)

    monkeypatch.setattr(int8_check, "time_candidates_against_float32", counted)
    first = int8_check.int8_speedups(32, 64, budget=0.0)
    assert set(first) == set(LIBRARIES_HERE) and timed == [sorted(LIBRARIES_HERE)]
    assert all(isinstance(value, float) and value > 0 for value in first.values())
    assert int8_check.int8_speedups(32, 64, budget=0.0) == first and len(timed) == 1  # read back, not timed


def test_the_cosine_verdict_is_kept_per_library(tiny_dir, own_cache, monkeypatch):
    """Two libraries may round differently (and without int8 dot products, sum differently): each
    is checked against float32 on its own, never under the other's verdict."""
    if len(LIBRARIES_HERE) < 2:
        pytest.skip("one int8 library runs here")
    reasons = []
    for library in ("fbgemm", "onednn", "fbgemm"):
        monkeypatch.setenv("MINIBERT_INT8", library)
        reasons.append(BertModel.from_pretrained(tiny_dir, dtype="int8").int8_check.reason)
    assert reasons == ["measured", "measured", "cached"]


@pytest.mark.skipif("onednn" not in LIBRARIES_HERE, reason="oneDNN's int8 matmul does not run here")
@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu"])
def test_onednns_int8_layer_applies_the_activation_as_the_function_would(act):
    """The feed-forward's activation as oneDNN's post-op: the same function of the same float32
    product (within float32's rounding of erf/tanh: 4 units of 2^-24 of each value, 1e-6 near 0)."""
    from minibert.activations import ACTIVATIONS
    from minibert.speed.packed_linear import FUSIBLE, AppliedBy

    torch.manual_seed(0)
    linear, x = nn.Linear(64, 256), torch.randn(40, 64) * 3
    fused = Int8Linear(linear, "onednn", FUSIBLE[act], ACTIVATIONS[act])
    pair = nn.Module()  # (the post-op applies only inside its feed-forward pair: packed_linear.AppliedBy)
    pair.intermediate, pair.activation = fused, AppliedBy(pair, fused)
    expected = ACTIVATIONS[act](Int8Linear(linear, "onednn")(x))
    delta = (fused(x) - expected).abs()
    assert "then" in repr(fused) and (delta <= 4 * 2**-24 * expected.abs() + 1e-6).all(), delta.max()
    with pytest.raises(ValueError, match="FBGEMM's has no post-op"):
        Int8Linear(linear, "fbgemm", FUSIBLE[act], ACTIVATIONS[act])


@pytest.mark.parametrize("library", LIBRARIES_HERE)
def test_book_modules_and_back_on_each_library(tiny_dir, own_cache, monkeypatch, library):
    """The book's float32 model (the activation in place, computing what from_pretrained in float32
    does), then the int8 layers back, computing what they did, the activation fused again on oneDNN."""
    monkeypatch.setenv("MINIBERT_INT8", library)
    model, ids = BertModel.from_pretrained(tiny_dir, dtype="int8"), torch.tensor([[5, 17, 33, 99, 4]])
    feed_forward = model.layers[0].feed_forward
    assert (feed_forward.intermediate.post_op is not None) == (library == "onednn")
    with torch.inference_mode():
        before = model(ids).last_hidden_state
        book = model.use_book_modules()(ids).last_hidden_state
        float32 = BertModel.from_pretrained(tiny_dir)(ids).last_hidden_state
        assert not isinstance(feed_forward.activation, AppliedBy) and type(feed_forward.intermediate) is nn.Linear
        assert (book - float32).abs().max() < 1e-5
        after = model.use_book_modules(False)(ids).last_hidden_state
    assert torch.equal(after, before) and model.gemm_backend == "int8"
    assert isinstance(model.layers[0].feed_forward.activation, AppliedBy) == (library == "onednn")


@pytest.mark.parametrize("library", LIBRARIES_HERE)
def test_a_hooked_int8_projection_gives_its_own_output_and_the_model_the_same(tiny_dir, own_cache, monkeypatch,
                                                                               library):  # fmt: skip
    """oneDNN's int8 intermediate applies GELU as it writes: a forward hook on it held GELU's output,
    not the projection's (transformers' intermediate.dense). Hooked, it gives the projection, and the
    feed-forward applies the activation: the model's output is bit for bit the unhooked one's."""
    monkeypatch.setenv("MINIBERT_INT8", library)
    model, ids = BertModel.from_pretrained(tiny_dir, dtype="int8"), torch.tensor([[5, 17, 33, 99, 4]])
    intermediate = model.layers[0].feed_forward.intermediate
    seen = []
    with torch.inference_mode():
        expected = model(ids).last_hidden_state
        handle = intermediate.register_forward_hook(lambda module, inputs, output: seen.append((inputs[0], output)))
        try:
            hooked = model(ids).last_hidden_state
        finally:
            handle.remove()
        (x, output), = seen
        assert torch.equal(hooked, expected) and torch.equal(model(ids).last_hidden_state, expected)
        intermediate.applied = False  # (what a hook asks for: the product alone, as multiply gives it then)
        assert torch.equal(output, intermediate.multiply(x))
    assert float(output.min()) < -0.2  # below GELU's floor (-0.17): the projection, not the activation


def test_int8_under_autocast_runs_between_float32_tensors(tiny_dir, own_cache):
    """Under torch.autocast (bfloat16 on the CPU), attention's output reached the int8 projection in
    bfloat16 and was refused with advice about casting the model, which the user never did: an int8
    layer now takes its input in float32, as autocast does for an op without a low-precision kernel."""
    model, ids = BertModel.from_pretrained(tiny_dir, dtype="int8"), torch.tensor([[5, 17, 33, 99, 4]])
    with torch.inference_mode():
        plain = model(ids).last_hidden_state
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mixed = model(ids).last_hidden_state.float()
    cosine = torch.nn.functional.cosine_similarity(mixed, plain, dim=-1)
    assert float(cosine.min()) > 0.99, cosine  # bfloat16's 8 bits around the int8 layers: vectors, not digits
    with pytest.raises(QuantizationError, match="got a bfloat16 input"):  # a cast model is refused, as before
        model.layers[0].attention.output(torch.ones(1, 64, dtype=torch.bfloat16))


def test_a_measurement_first_settles_glibcs_malloc_so_runs_are_not_page_faulted_afresh():
    """measure.settle_the_allocator: in a fresh process a 4 MiB tensor comes from mmap (glibc's
    default threshold is 128 KiB: freed, it goes back to the kernel, and the next run page-faults it
    again); after the settling block is freed, glibc's own adaptive rule serves a 16 MiB one from
    the heap."""
    import subprocess

    program = """
import ctypes, torch
from minibert.speed.measure import settle_the_allocator
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL("libc.so.6"); libc.mallinfo2.restype = Info
def mapped_for(size):  # (freeing the block at return raises glibc's threshold to its size)
    before = libc.mallinfo2().hblkhd
    block = torch.empty(size, dtype=torch.uint8)
    return libc.mallinfo2().hblkhd - before
first = mapped_for(4 * 2**20)
settle_the_allocator()
print(first, mapped_for(16 * 2**20))  # above what the first block taught glibc: only the settling explains 0
"""
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's malloc")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout.split()
    before, after = map(int, out)
    assert before >= 4 * 2**20 and after == 0, (before, after)


@pytest.mark.parametrize("library", LIBRARIES_HERE)
def test_an_int8_model_on_each_library_copies_pickles_and_refuses_a_backward_pass(tiny_dir, own_cache, monkeypatch,
                                                                                   library):
    import copy
    import pickle

    monkeypatch.setenv("MINIBERT_INT8", library)
    model = BertModel.from_pretrained(tiny_dir, dtype="int8")
    ids = torch.tensor([[5, 17, 33, 99, 4]])
    with torch.inference_mode():
        expected = model(ids).last_hidden_state
        for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
            assert clone.layers[0].attention.query.library == library
            assert torch.equal(clone(ids).last_hidden_state, expected)
    with pytest.raises(QuantizationError, match="backward pass reached a layer loaded in int8"):
        model(ids).last_hidden_state.sum().backward()


def _heap_in_use() -> int:
    """glibc's bytes in use (mallinfo2: small blocks + mmapped ones), after a garbage collection."""
    import ctypes
    import gc

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]  # fmt: skip

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
    except (OSError, AttributeError):
        pytest.skip("needs glibc 2.33+ (mallinfo2) to count the heap")
    gc.collect()
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


def test_loading_in_int8_hands_the_freed_float32_memory_back_and_float32_does_not(tiny_dir, own_cache,
                                                                                   monkeypatch):
    """The float32 projections int8 frees would stay in the process's RSS as free heap (glibc keeps
    it): loading in int8 trims the heap once, after the swap; a float32 load leaves the heap alone."""
    from minibert.speed import malloc

    calls = []
    monkeypatch.setattr(malloc, "hand_back_freed_memory", lambda: calls.append("trim") or True)
    BertModel.from_pretrained(tiny_dir)
    assert calls == []
    BertModel.from_pretrained(tiny_dir, dtype="int8")
    assert len(calls) == 1


def test_hand_back_freed_memory_returns_the_heap_to_the_kernel_on_glibc():
    """Measured, not assumed: 64 MiB in small blocks freed stay in the heap (glibc keeps freed small
    blocks), and the call hands most of them back (RSS falls by at least half of them)."""
    import ctypes

    from minibert.speed.malloc import hand_back_freed_memory

    if not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "malloc_trim"):
        pytest.skip("not glibc: nothing to hand back")

    def rss() -> int:
        return int(next(line for line in open("/proc/self/status") if line.startswith("VmRSS:")).split()[1]) * 1024

    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(4096) for _ in range(16384)]  # 64 MiB below the mmap threshold: from the heap
    for block in blocks:
        ctypes.memset(block, 1, 4096)
    for block in blocks[:-1]:  # the last one stays: the heap's top is in use, so only a trim can give back
        libc.free(block)
    before = rss()
    assert hand_back_freed_memory() is True
    after = rss()
    libc.free(blocks[-1])
    print(f"RSS {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")
    assert before - after >= 32 * 2**20, (before, after)


def test_an_int8_model_holds_a_quarter_of_its_linear_weights_and_no_float32_copy(minilm_dir, own_cache):
    """Memory accounting, not timing. (1) By content, the six projections' int8 weights with their
    per-channel scales, zero points, column sums and biases take ≤ 0.27× their float32 weights and
    biases (1 byte against 4, plus 16 bytes per output channel). (2) Measured: loading a second
    int8 all-MiniLM-L6-v2 (caches warm) grows the heap by its float32 remainder (embeddings,
    LayerNorms, pooler) plus the packed int8 layers, at most 0.40× the float32 linear weights
    (FBGEMM pads each layer's input dimension to 512 rows on AVX2: 384 → 512), and not by the
    float32 checkpoint: the file's buffer is freed once the projections are quantized (it was kept
    whole while the embeddings, slices of the same buffer, lived: 104 MiB instead of 63)."""
    float32 = BertModel.from_pretrained(minilm_dir)
    linear_bytes = sum(param.numel() * 4 for name, param in float32.named_parameters()
                       if name.startswith("layers.") and "norm" not in name.lower())  # fmt: skip
    first = BertModel.from_pretrained(minilm_dir, dtype="int8")
    int8_bytes = sum(layer.stored_bytes() for _, layer in int8_layers(first))
    other_bytes = sum(param.numel() * 4 for param in first.parameters())  # what stays float32
    print(f"int8 layers {int8_bytes / 2**20:.2f} MiB by content, float32 {linear_bytes / 2**20:.2f} MiB: "
          f"{int8_bytes / linear_bytes:.4f}x")  # fmt: skip
    assert int8_bytes <= 0.27 * linear_bytes, (int8_bytes, linear_bytes)
    del float32
    before = _heap_in_use()
    second = BertModel.from_pretrained(minilm_dir, dtype="int8")
    grown = _heap_in_use() - before
    limit = other_bytes + 0.40 * linear_bytes + 4 * 2**20  # 4 MiB: Python objects, allocator slack
    print(f"heap grew {grown / 2**20:.1f} MiB for a second int8 model (float32 part {other_bytes / 2**20:.1f} MiB, "
          f"limit {limit / 2**20:.1f} MiB)")  # fmt: skip
    assert grown <= limit, (grown, limit)
    assert first is not second


def test_int8_on_rxnfps_real_classifier_counts_the_labels_it_changes(own_cache):
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
def test_a_model_of_too_few_positions_for_a_text_loads_in_int8_and_verify_names_the_field(tmp_path, own_cache,
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
