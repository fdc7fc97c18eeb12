"""The int8 library, FBGEMM or oneDNN (speed/int8.py, speed/int8_check.py): each computes the recipe
exactly where the CPU has int8 dot products, oneDNN's activation steps are torch's, the one measured
fastest is chosen (the measurement cached, the cosine verdict kept per library, an environment
variable obeyed), and a model on either one hooks, copies, pickles, returns to book modules, runs
under autocast and takes an empty batch as on the other, and refuses to be traced, exported or
compiled with the same QuantizationError.
"""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from minibert import BertModel
from minibert.errors import QuantizationError
from minibert.speed import int8, int8_check
from minibert.speed.int8 import Int8Linear, int8_layers
from minibert.speed.packed_linear import AppliedBy

LIBRARIES_HERE = [library for library in int8.LIBRARIES if int8.library_unavailable(library) is None]


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


def test_the_library_named_in_the_environment_is_used_and_a_bad_name_refused(tiny_dir, int8_fresh_cache, monkeypatch):
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
def test_the_library_is_the_one_measured_fastest(tiny_dir, int8_fresh_cache, monkeypatch, speedups, chosen):
    monkeypatch.delenv("MINIBERT_INT8", raising=False)
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: speedups)
    assert BertModel.from_pretrained(tiny_dir, dtype="int8").int8_library == chosen


def test_the_speed_of_each_library_is_measured_once_and_cached(int8_fresh_cache, monkeypatch):
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


def test_the_cosine_verdict_is_kept_per_library(tiny_dir, int8_fresh_cache, monkeypatch):
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
def test_book_modules_and_back_on_each_library(tiny_dir, int8_fresh_cache, monkeypatch, library):
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
def test_a_hooked_int8_projection_gives_its_own_output_and_the_model_the_same(tiny_dir, int8_fresh_cache, monkeypatch,
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


def test_int8_under_autocast_runs_between_float32_tensors(tiny_dir, int8_fresh_cache):
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


@pytest.mark.parametrize("library", LIBRARIES_HERE)
def test_an_int8_model_on_each_library_copies_pickles_and_refuses_a_backward_pass(tiny_dir, int8_fresh_cache,
                                                                                   monkeypatch, library):
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


@pytest.mark.parametrize("library", LIBRARIES_HERE)
@pytest.mark.parametrize("shape", [(0, 8), (2, 0, 8)], ids=["no rows", "no tokens"])
def test_an_empty_input_gives_an_empty_output_on_each_library(library, shape):
    """nn.Linear's answer to no rows: no rows out, (..., out). oneDNN's layer took the range of the
    empty tensor to quantize it and failed with torch's "cannot compute aminmax over an empty
    dimension", where FBGEMM's gave (0, 4); its quantizer now gives an empty tensor its empty steps."""
    from minibert.speed.int8_steps import quantize_activations

    layer, x = Int8Linear(nn.Linear(8, 4), library), torch.empty(shape)
    assert layer(x).shape == (*shape[:-1], 4)
    assert layer(x.requires_grad_()).shape == (*shape[:-1], 4)  # (through the layer's autograd record too)
    assert quantize_activations(torch.empty(shape))[0].shape == shape


class _Positional(nn.Module):
    """The model's tuple outputs from positional inputs, as the legacy ONNX exporter passes them."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.train(model.training)  # (the exporter puts the wrapper's mode back, the model's with it)

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model(input_ids, attention_mask, token_type_ids, return_dict=False)


# Each way torch records a model as a graph: (model, example) → what the user would run.
RECORDINGS = {
    "jit.trace under no_grad": lambda model, example: _without_grad(torch.jit.trace, model, example),
    "jit.trace": lambda model, example: torch.jit.trace(_Positional(model), example),
    "onnx.export, dynamo=False": lambda model, example: _legacy_onnx_export(model, example),
    "export": lambda model, example: torch.export.export(_Positional(model), example),
    "compile": lambda model, example: _without_grad(torch.compile(model), *example),
}


def _legacy_onnx_export(model, example):
    torch.onnx.export(_Positional(model), example, io.BytesIO(), dynamo=False)


def _without_grad(function, *args):
    with torch.no_grad():
        return function(*args)


@pytest.mark.parametrize("library", LIBRARIES_HERE)
def test_tracing_exporting_or_compiling_an_int8_model_is_one_clear_error(tiny_dir, int8_fresh_cache, monkeypatch,
                                                                        library):  # fmt: skip
    """An int8 layer quantizes its input with a scale computed per call from the input's range. Traced
    under no_grad on FBGEMM, the graph held the example's scale and zero point as constants (TracerWarning
    only): every later input quantized with the example's range, a cosine to float32 of 0.96 where the
    eager model gives 0.994 (MiniLM). Elsewhere torch's own errors, none naming int8 ("unordered_map::at",
    "__obj_flatten__", a RecursionError inside dynamo). Now each way gives one QuantizationError saying
    what to trace instead, and the model runs eagerly as before."""
    monkeypatch.setenv("MINIBERT_INT8", library)
    model = BertModel.from_pretrained(tiny_dir, dtype="int8", return_dict=False)
    ids = torch.tensor([[5, 17, 33, 99, 4], [6, 7, 8, 0, 0]])
    example = (ids, (ids > 0).long(), torch.zeros_like(ids))
    with torch.inference_mode():
        expected = model(*example)[0]
    try:
        for record in RECORDINGS.values():  # (a failure's traceback shows which one's line)
            with pytest.raises(QuantizationError, match=r"cannot be traced, exported or compiled .*use_book_modules"):
                record(model, example)
    finally:
        torch._dynamo.reset()  # (the compiled frames torch keeps, let go)
    with torch.inference_mode():
        assert torch.equal(model(*example)[0], expected)
