"""The linear layers' GEMM backend (speed/gemm.py): every backend against transformers, the choice by
measurement, its cache, its overrides.

Tolerance: the parity bound of tests/test_model.py, 1e-5 absolute per layer. A backend changes
only how each output element's sum of 384–1,536 fp32 products is ordered and blocked (oneDNN's
kernels, or the bias added inside the GEMM instead of before it); at hidden values of magnitude
≤ ~10 that is tens of fp32 ulps (1 ulp at 8 is 9.5e-7), far below 1e-5, while a wrong weight, a
missing bias or a wrong activation moves values by 1e-2 or more. One projection taken alone (the
feed-forward's intermediate, up to 24 before its GELU) is compared with the dot product's own
rounding bound instead (assert_linear_close).
"""

from __future__ import annotations

import copy
import pickle
import warnings

import pytest
import torch
from torch import nn

from conftest import make_google_checkpoint
from helpers import (
    assert_close,
    bound_from_exact,
    compare_outputs,
    exact_reference,
    needs_onednn,
)
from minibert import BertForPreTraining, BertModel
from minibert.speed import BACKENDS, packed_linear
from minibert.speed.packed_linear import PackedLinear
from minilm_models import batch_of

transformers = pytest.importorskip("transformers")
ATOL = 1e-5


pytestmark = pytest.mark.usefixtures("own_gemm_cache")  # each test measures into its own cache


def assert_linear_close(actual, expected, x, linear: nn.Linear, name: str) -> None:
    """Two fp32 results of ``linear(x)`` summed in different orders agree within the standard bound
    of a K-term dot product plus its bias: each is within K·u·(|x|·|W|ᵀ + |b|) of the exact sum
    (u = 2⁻²⁴, fp32's unit roundoff), so the two within twice that, element by element. The
    intermediate projection reaches 24 at K = 384: a fixed 1e-5 is 3 ulps there, which oneDNN's
    blocking exceeds on some CPUs (1.3e-5 on an AMD EPYC Zen 3), while the activation applied twice
    or a missing bias moves elements by 0.1 and more, far outside the bound."""
    unit_roundoff = 2.0**-24
    weight, bias = linear.weight.detach().double(), linear.bias.detach().double()
    magnitude = x.double().abs() @ weight.abs().T + bias.abs()  # (..., out): Σ|x·w| + |b| per element
    bound = 2 * (x.shape[-1] + 1) * unit_roundoff * magnitude
    difference = (actual.double() - expected.double()).abs()
    worst = float((difference / bound).max())
    assert worst <= 1.0, f"{name}: max |Δ| = {float(difference.max()):.3g}, {worst:.3g}× the rounding bound"


def _linears(model) -> list[nn.Module]:
    return [m for name, m in model.named_modules() if name.startswith("layers.") and isinstance(m, nn.Linear)]


@pytest.fixture(scope="module")
def exact(minilm_dir, minilm_reference, real_texts):
    """transformers' outputs in float64 (the exact numbers, to fp32's eyes) and in float32."""
    batch = batch_of(minilm_dir, real_texts)
    exact_model = copy.deepcopy(minilm_reference).double()
    with torch.no_grad():
        truth = exact_model(**batch, output_hidden_states=True, output_attentions=True)
        theirs = minilm_reference(**batch, output_hidden_states=True, output_attentions=True)
    return batch, truth, theirs


@needs_onednn
@pytest.mark.parametrize("backend", [*BACKENDS, "auto"])
def test_every_backend_matches_transformers_layer_by_layer(backend, minilm_dir, exact):
    """all-MiniLM-L6-v2 on each backend against transformers (eager attention):
    each layer on its own (fed transformers' input to it) within 1e-5 of transformers' layer; and
    the whole model, fast path and plain path (attention maps too), as exact as transformers."""
    batch, truth, theirs = exact
    real = batch["attention_mask"].bool()
    model = BertModel.from_pretrained(minilm_dir, gemm=backend)
    if backend != "auto":
        assert model.gemm_backend == backend
        assert all(isinstance(m, PackedLinear) == (backend != "mkl") for m in _linears(model))
    mask = (1.0 - batch["attention_mask"][:, None, None, :].float()) * torch.finfo(torch.float32).min
    worst = []
    with torch.no_grad():
        for index, layer in enumerate(model.layers):
            for use_fast in (False, True):
                layout = None
                if use_fast:
                    from minibert.speed.fast_path import FastLayout

                    layout = FastLayout(batch["attention_mask"])
                hidden = theirs.hidden_states[index]
                out, _ = layer(layout.pack(hidden) if layout else hidden, mask, layout)
                out = layout.unpack(out) if layout else out
                name = f"{backend} layer {index + 1} alone (fast path {use_fast})"
                worst.append(assert_close(out[real], theirs.hidden_states[index + 1][real], name, ATOL))
        print(f"\n{model.gemm_backend}: each layer alone, max |Δ| " + " ".join(f"{w:.1e}" for w in worst))
        fast = model(**batch, output_hidden_states=True)
        plain = model(**batch, output_hidden_states=True, output_attentions=True)
    # As exact as transformers: within helpers.bound_from_exact of the float64 result (rounding
    # compounds through the layers: MiniLM's layer 5 in fp32 is 8.5e-6 from exact in transformers itself).
    compare_outputs(fast, theirs, batch["attention_mask"], f"{model.gemm_backend} (fast path)", ATOL, exact=truth)
    compare_outputs(plain, theirs, batch["attention_mask"], f"{model.gemm_backend} (plain path)", ATOL, exact=truth)


@needs_onednn
@pytest.mark.parametrize("hidden_act", ["gelu_new", "relu", "gelu_python_tanh", "quick_gelu"])
def test_fused_activations_are_the_configs_function(hidden_act, tmp_path, vocab_file, real_texts):
    """onednn-fused applies the activation inside the GEMM only where oneDNN computes the very
    function config.json names (tanh GELU, ReLU); others (quick_gelu) stay a separate step."""
    reference = make_google_checkpoint(tmp_path, vocab_file, layers=2, hidden=64, heads=4, intermediate=128,
                                       hidden_act=hidden_act)  # fmt: skip
    model = BertForPreTraining.from_pretrained(tmp_path, gemm="onednn-fused")
    fused = isinstance(model.bert.layers[0].feed_forward.intermediate, PackedLinear) and bool(
        model.bert.layers[0].feed_forward.intermediate.post_op
    )
    assert fused == (hidden_act in packed_linear.FUSIBLE)
    batch = batch_of(tmp_path, real_texts)
    with torch.no_grad():  # 2 layers of width 64: fp32 rounding stays far below 1e-5 end to end
        compare_outputs(model.bert(**batch, output_hidden_states=True),
                        reference.bert(**batch, output_hidden_states=True), batch["attention_mask"],
                        f"onednn-fused, hidden_act={hidden_act}")  # fmt: skip


@needs_onednn
def test_backends_switch_back_and_forth_and_the_packed_weight_follows_the_parameter(minilm_dir, real_texts):
    model = BertModel.from_pretrained(minilm_dir, gemm="mkl")
    batch = batch_of(minilm_dir, real_texts[:4])
    # Real tokens' rows (a fixed 1e-5 cannot bound [PAD] rows, where fp32 itself lands ~1e-4 from
    # exact: helpers.compare_outputs; test_every_backend_matches_transformers_layer_by_layer holds them).
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        expected = model(**batch).last_hidden_state[real]
        for backend in ["onednn-fused", "onednn", "mkl", "onednn-fused"]:
            packed_linear.use_backend(model, backend)
            assert_close(model(**batch).last_hidden_state[real], expected, f"after switching to {backend}", ATOL)
        packed_linear.use_backend(model, "mkl")
        assert all(type(m) is nn.Linear for m in _linears(model)) and model.layers[0].feed_forward.activation
        packed_linear.use_backend(model, "onednn")
        model(**batch)  # packs every weight
        query = model.layers[0].attention.query
        query.weight.mul_(0.5)  # an in-place update (an optimizer step, load_state_dict) must be seen
        changed = model(**batch).last_hidden_state[real]
        packed_linear.use_backend(model, "mkl")
        assert_close(model(**batch).last_hidden_state[real], changed, "onednn after an in-place weight change", ATOL)
    assert float((changed - expected).abs().max()) > 1e-2  # the change mattered: this comparison can fail


@needs_onednn
@pytest.mark.parametrize("write", ["data.zero_", "data.add_", "data =", "pickled, then data.mul_"])
def test_a_write_through_data_is_seen_by_the_packed_copy(minilm_dir, real_texts, write):
    """``w.data.zero_()`` or an old-style ``p.data.add_(...)`` step shares the storage but not the
    version counter: the packed copy stayed as it was, so the onednn path (and use_fast_path=False,
    which keeps it) gave the old weights' numbers, 0.83 away from F.linear on MiniLM. The packed
    weight is a WatchedWeight, whose .data counts as a change; back on mkl it is a plain Parameter."""
    model = BertModel.from_pretrained(minilm_dir, gemm="onednn")
    batch = batch_of(minilm_dir, real_texts[:4])
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        before = model(**batch).last_hidden_state[real]  # packs every weight
        if write.startswith("pickled"):
            model = pickle.loads(pickle.dumps(model))  # a plain Parameter again: watched once packed again
            model(**batch)
        layer = model.layers[0]
        weights = (layer.attention.query.weight, layer.feed_forward.intermediate.weight)
        for weight in weights:
            assert type(weight) is packed_linear.WatchedWeight and isinstance(weight, nn.Parameter)
            if write == "data.zero_":
                weight.data.zero_()
            elif write == "data.add_":
                weight.data.add_(torch.randn_like(weight), alpha=0.05)
            elif write == "data =":
                weight.data = weight.detach() * 0.5
            else:
                weight.data.mul_(0.5)
        changed = model(**batch).last_hidden_state[real]
        packed_linear.use_backend(model, "mkl")
        assert all(type(weight) is nn.Parameter for weight in weights)
        assert_close(changed, model(**batch).last_hidden_state[real], f"onednn after a write by {write}", ATOL)
    assert float((changed - before).abs().max()) > 1e-2  # the change mattered: this comparison can fail
    assert repr(weights[0]).startswith("Parameter containing:\ntensor(")


@needs_onednn
@pytest.mark.parametrize("tool", ["nn.Parameter(w), then its .data.mul_", "parametrizations.weight_norm"])
def test_torchs_weight_tools_take_a_packed_weight(minilm_dir, minilm_reference, real_texts, tool):
    """``nn.Parameter(w)`` and torch's ``parametrizations.weight_norm`` (which calls it) refused a packed weight
    (a WatchedWeight, whose ``detach()`` gave a plain Tensor: torch then takes no subclass as a Parameter); on
    mkl both worked. Now both work on the packed layers, and the model computes what transformers computes
    after the same step (an edit through the new Parameter's ``.data`` is seen by the packed copy too)."""
    model = BertModel.from_pretrained(minilm_dir, gemm="onednn")
    theirs = copy.deepcopy(minilm_reference)
    batch = batch_of(minilm_dir, real_texts[:4])
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        model(**batch)  # packs every weight
    ours, their = model.layers[0].attention.query, theirs.encoder.layer[0].attention.self.query
    if tool.startswith("nn.Parameter"):
        for layer in (ours, their):
            made = nn.Parameter(layer.weight)
            assert isinstance(made, nn.Parameter) and made.data_ptr() == layer.weight.data_ptr()
            made.data.mul_(0.5)
    else:
        for layer in (ours, their):
            torch.nn.utils.parametrizations.weight_norm(layer)
            with torch.no_grad():
                layer.parametrizations.weight.original0.mul_(0.5)  # the norms g: half of each row
    with torch.no_grad():
        expected, before = theirs(**batch).last_hidden_state[real], minilm_reference(**batch).last_hidden_state[real]
        assert_close(model(**batch).last_hidden_state[real], expected, f"onednn after {tool}", ATOL)
        # a deep copy leaves the packed cache out (parametrize's own __deepcopy__ copied it: oneDNN refused)
        assert_close(copy.deepcopy(model)(**batch).last_hidden_state[real], expected, f"a copy after {tool}", ATOL)
    assert float((expected - before).abs().max()) > 1e-2  # the change mattered: this comparison can fail


@needs_onednn
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("hook", ["the layer's", "global", "removes itself"])
def test_a_forward_hook_sees_the_projection_and_the_output_is_unchanged(minilm_dir, real_texts, backend, hook):
    """A hook on feed_forward.intermediate (transformers' intermediate.dense) holds what that
    projection gave: the GELU ran in place over it (17.1 away, no_grad), and onednn-fused applies
    GELU inside the GEMM. Now a hooked projection gives its own output and the feed-forward applies
    the activation, once: the model's output is that of the unhooked model."""
    model = BertModel.from_pretrained(minilm_dir, gemm=backend)
    batch = batch_of(minilm_dir, real_texts[:4])
    real = batch["attention_mask"].bool()
    intermediate = model.layers[0].feed_forward.intermediate
    seen = []

    def keep(module, inputs, output):
        if module is intermediate:
            seen.append((inputs[0], output))
            if hook == "removes itself":
                handle.remove()

    with torch.no_grad():
        expected = model(**batch).last_hidden_state[real]
        if hook == "global":
            handle = torch.nn.modules.module.register_module_forward_hook(keep)
        else:
            handle = intermediate.register_forward_hook(keep)
        try:
            hooked = model(**batch).last_hidden_state[real]
        finally:
            handle.remove()
        (x, output), = seen
        projection = torch.nn.functional.linear(x, intermediate.weight, intermediate.bias)
        assert_linear_close(output, projection, x, intermediate, f"{backend}: the hooked projection's output")
        assert float(output.min()) < -1.0  # below GELU's floor (-0.17): not the activation's output
        assert_close(hooked, expected, f"{backend}: the output with the hook", ATOL)
        assert_close(model(**batch).last_hidden_state[real], expected, f"{backend}: unhooked again", ATOL)


@pytest.mark.slow  # (inductor compiles for ~10 s)
@needs_onednn
def test_torch_compile_of_a_packed_model_computes_what_it_computes(minilm_dir, minilm_reference, real_texts):
    """torch.compile of a model on oneDNN failed in inductor (a LoweringException on the packed
    op); compiling, the projections go through F.linear, which inductor packs its own way. Compiled
    first on a batch without padding, then given padded ones: transformers' numbers on each."""
    model = BertModel.from_pretrained(minilm_dir, gemm="onednn-fused")
    compiled = torch.compile(model)
    for texts in (["Hello world", "Good morning"], real_texts[:3], real_texts[-3:]):
        batch = batch_of(minilm_dir, texts)
        real = batch["attention_mask"].bool()
        with torch.no_grad():
            expected = minilm_reference(**batch).last_hidden_state[real]
            assert_close(compiled(**batch).last_hidden_state[real], expected, "torch.compile, onednn-fused", ATOL)


@needs_onednn
def test_training_runs_on_f_linear_with_the_same_gradients(minilm_dir, real_texts):
    """A forward pass that needs gradients takes F.linear (oneDNN's op has no autograd here): the
    loss and every gradient are those of the mkl backend, bit for bit."""
    batch = batch_of(minilm_dir, real_texts[:4])
    grads = {}
    for backend in ("mkl", "onednn-fused"):
        model = BertModel.from_pretrained(minilm_dir, gemm=backend)
        model(**batch).last_hidden_state.square().mean().backward()
        grads[backend] = {name: p.grad for name, p in model.named_parameters()}
    assert grads["mkl"].keys() == grads["onednn-fused"].keys()
    compared = 0
    for name, grad in grads["mkl"].items():
        other = grads["onednn-fused"][name]
        assert (grad is None) == (other is None), name  # the pooler takes no part in this loss
        if grad is not None:
            assert torch.equal(grad, other), name
            compared += 1
    assert compared >= 6 * 16  # every encoder layer's weights


# BitFit's reduced variant (Ben Zaken et al. 2021, sec. 4): only the query biases and the second
# feed-forward biases train; ours → transformers' name of each.
BITFIT = {"attention.query.bias": "attention.self.query.bias", "feed_forward.output.bias": "output.dense.bias"}


@pytest.mark.parametrize("backend", [pytest.param(b, marks=[needs_onednn] if b != "mkl" else []) for b in BACKENDS])
def test_bias_only_training_gets_transformers_gradients_on_every_backend(backend, minilm_dir, minilm_reference,
                                                                          real_texts):
    """BitFit on each backend: weights and embeddings frozen, so layer 0's query projection is fed an
    input that needs no gradient, and only its bias trains. Each trainable bias gets transformers'
    gradient (within fp32's spread around float64's, scaled to the gradient's size, as
    test_speed_grad_modes's check_train), never None: oneDNN's op has no autograd formula, and a
    layer that took it for its bias alone left that bias untrained, with only torch's warning."""
    batch = batch_of(minilm_dir, real_texts[:4])
    real = batch["attention_mask"].bool()
    model = BertModel.from_pretrained(minilm_dir, gemm=backend).eval()  # eval: no dropout, as the reference
    assert model.gemm_backend == backend
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name.startswith("layers.") and name.split(".", 2)[2] in BITFIT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "an autograd kernel was not registered" is the only other sign
        model(**batch).last_hidden_state[real].pow(2).mean().backward()
    theirs = {}
    for their_model in (copy.deepcopy(minilm_reference), exact_reference(minilm_reference)):
        for name, parameter in their_model.named_parameters():
            parameter.requires_grad_(name.startswith("encoder.layer.") and name.split(".", 3)[3] in BITFIT.values())
        their_model(**batch).last_hidden_state[real].pow(2).mean().backward()
        theirs[their_model.dtype] = dict(their_model.named_parameters())
    trained = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    assert len(trained) == 2 * len(model.layers)
    for name, parameter in trained:
        _, index, ours_name = name.split(".", 2)
        their_name = f"encoder.layer.{index}.{BITFIT[ours_name]}"
        assert parameter.grad is not None, f"{backend}: {name} got no gradient"
        fp32, exact = theirs[torch.float32][their_name].grad, theirs[torch.float64][their_name].grad
        bound = bound_from_exact(fp32, exact, ATOL * exact.abs().max().item())
        assert_close(parameter.grad, fp32, f"{backend}: {name}.grad", bound)


@needs_onednn
@pytest.mark.parametrize("fused", [False, True])
def test_a_packed_layer_records_a_gradient_for_any_parameter_that_needs_one(fused, monkeypatch):
    """The seams that pick a kernel without autograd count every Parameter the layer holds and its
    input: with the input frozen and only the weight, or only the bias, trainable, the layer takes
    F.linear and that Parameter gets nn.Linear's gradient. int8's layer holds no Parameter (its
    weights are packed constants): there the input alone decides, and its backward refuses."""
    from minibert.activations import ACTIVATIONS
    from minibert.speed import fast_path
    from minibert.speed.int8 import Int8Linear

    torch.manual_seed(0)
    x = torch.randn(5, 16)
    for trained in ("weight", "bias"):
        linear = nn.Linear(16, 8)
        expected_layer = copy.deepcopy(linear)
        activation = ACTIVATIONS["gelu"] if fused else None
        layer = PackedLinear(linear, packed_linear.FUSIBLE["gelu"] if fused else None, activation)
        if fused:  # (the post-op applies only inside its feed-forward pair: packed_linear.AppliedBy)
            pair = nn.Module()
            pair.intermediate = layer
            pair.activation = packed_linear.AppliedBy(pair, layer)
        for module in (layer, expected_layer):
            module.requires_grad_(False)
            getattr(module, trained).requires_grad_(True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            layer(x).square().sum().backward()
        out = expected_layer(x)
        (activation(out) if fused else out).square().sum().backward()
        got, expected = getattr(layer, trained).grad, getattr(expected_layer, trained).grad
        assert got is not None and torch.equal(got, expected), f"only the {trained} trains (fused {fused})"
    assert not list(Int8Linear(nn.Linear(16, 8)).parameters())
    # The one Q/K/V product (on a GPU) counts the biases too: a bias-only step still gets its one product.
    attention = nn.Module()
    attention.query, attention.key, attention.value = (nn.Linear(16, 16).requires_grad_(False) for _ in range(3))
    attention.key.bias.requires_grad_(True)
    monkeypatch.setattr(fast_path, "ONE_PRODUCT_ON", frozenset({"cpu"}))
    assert fast_path.fused_projections(torch.randn(3, 16), attention) is not None


@needs_onednn
def test_a_model_moved_after_loading_still_computes(minilm_dir, real_texts):
    """float16 or float64 (oneDNN's packed linear takes neither), or bfloat16 on a CPU without
    AVX-512: the layers fall back to F.linear rather than fail."""
    batch = batch_of(minilm_dir, real_texts[:3])
    plain = BertModel.from_pretrained(minilm_dir, gemm="mkl")
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        model = BertModel.from_pretrained(minilm_dir, gemm="onednn-fused").to(dtype)
        expected = copy.deepcopy(plain).to(dtype)
        with torch.no_grad():
            got, want = model(**batch).last_hidden_state, expected(**batch).last_hidden_state
        assert got.dtype == dtype
        real = batch["attention_mask"].bool()
        if dtype == torch.float64:  # both on F.linear: fp64 rounding at most
            assert_close(got[real], want[real], "onednn-fused model moved to float64", 1e-9)
        else:  # 8 (bf16) or 11 (fp16) bits of mantissa: compared as vectors, as test_embedding_embedder compares bf16
            cosine = torch.nn.functional.cosine_similarity(got[real].float(), want[real].float(), dim=-1)
            assert float(cosine.min()) >= 0.999, (dtype, float(cosine.min()))


@needs_onednn
def test_a_model_on_onednn_pickles_and_copies(minilm_dir, real_texts):
    model = BertModel.from_pretrained(minilm_dir, gemm="onednn-fused")
    batch = batch_of(minilm_dir, real_texts[:3])
    with torch.no_grad():
        expected = model(**batch).last_hidden_state
        for clone in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
            assert torch.equal(clone(**batch).last_hidden_state, expected)
    assert "backend=onednn, post_op=gelu" in repr(model.layers[0].feed_forward.intermediate)
