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
import json
import logging
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
    compare_real_tokens_with_exact,
    exact_reference,
    max_abs_diff,
)
from minibert import BertForPreTraining, BertModel, BertTokenizer
from minibert.speed import BACKENDS, bf16, cpu, gemm, measure, packed_linear
from minibert.speed.cache import cache_file
from minibert.speed.measure import ProjectionTimes
from minibert.speed.packed_linear import PackedLinear

transformers = pytest.importorskip("transformers")
ATOL = 1e-5
needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")


pytestmark = pytest.mark.usefixtures("own_gemm_cache")  # each test measures into its own cache


@pytest.fixture(scope="module")
def reference(minilm_dir):
    return transformers.BertModel.from_pretrained(str(minilm_dir), attn_implementation="eager").eval()


def _batch(directory, texts):
    return BertTokenizer.from_pretrained(directory)(texts, padding=True, truncation=True, return_tensors="pt")


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
def exact(minilm_dir, reference, real_texts):
    """transformers' outputs in float64 (the exact numbers, to fp32's eyes) and in float32."""
    batch = _batch(minilm_dir, real_texts)
    exact_model = copy.deepcopy(reference).double()
    with torch.no_grad():
        truth = exact_model(**batch, output_hidden_states=True, output_attentions=True)
        theirs = reference(**batch, output_hidden_states=True, output_attentions=True)
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
    batch = _batch(tmp_path, real_texts)
    with torch.no_grad():  # 2 layers of width 64: fp32 rounding stays far below 1e-5 end to end
        compare_outputs(model.bert(**batch, output_hidden_states=True),
                        reference.bert(**batch, output_hidden_states=True), batch["attention_mask"],
                        f"onednn-fused, hidden_act={hidden_act}")  # fmt: skip


@needs_onednn
def test_backends_switch_back_and_forth_and_the_packed_weight_follows_the_parameter(minilm_dir, real_texts):
    model = BertModel.from_pretrained(minilm_dir, gemm="mkl")
    batch = _batch(minilm_dir, real_texts[:4])
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
    batch = _batch(minilm_dir, real_texts[:4])
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
def test_torchs_weight_tools_take_a_packed_weight(minilm_dir, reference, real_texts, tool):
    """``nn.Parameter(w)`` and torch's ``parametrizations.weight_norm`` (which calls it) refused a packed weight
    (a WatchedWeight, whose ``detach()`` gave a plain Tensor: torch then takes no subclass as a Parameter); on
    mkl both worked. Now both work on the packed layers, and the model computes what transformers computes
    after the same step (an edit through the new Parameter's ``.data`` is seen by the packed copy too)."""
    model = BertModel.from_pretrained(minilm_dir, gemm="onednn")
    theirs = copy.deepcopy(reference)
    batch = _batch(minilm_dir, real_texts[:4])
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
        expected, before = theirs(**batch).last_hidden_state[real], reference(**batch).last_hidden_state[real]
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
    batch = _batch(minilm_dir, real_texts[:4])
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
def test_torch_compile_of_a_packed_model_computes_what_it_computes(minilm_dir, reference, real_texts):
    """torch.compile of a model on oneDNN failed in inductor (a LoweringException on the packed
    op); compiling, the projections go through F.linear, which inductor packs its own way. Compiled
    first on a batch without padding, then given padded ones: transformers' numbers on each."""
    model = BertModel.from_pretrained(minilm_dir, gemm="onednn-fused")
    compiled = torch.compile(model)
    for texts in (["Hello world", "Good morning"], real_texts[:3], real_texts[-3:]):
        batch = _batch(minilm_dir, texts)
        real = batch["attention_mask"].bool()
        with torch.no_grad():
            expected = reference(**batch).last_hidden_state[real]
            assert_close(compiled(**batch).last_hidden_state[real], expected, "torch.compile, onednn-fused", ATOL)


@needs_onednn
def test_training_runs_on_f_linear_with_the_same_gradients(minilm_dir, real_texts):
    """A forward pass that needs gradients takes F.linear (oneDNN's op has no autograd here): the
    loss and every gradient are those of the mkl backend, bit for bit."""
    batch = _batch(minilm_dir, real_texts[:4])
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
def test_bias_only_training_gets_transformers_gradients_on_every_backend(backend, minilm_dir, reference, real_texts):
    """BitFit on each backend: weights and embeddings frozen, so layer 0's query projection is fed an
    input that needs no gradient, and only its bias trains. Each trainable bias gets transformers'
    gradient (within fp32's spread around float64's, scaled to the gradient's size, as
    test_speed_grad_modes's check_train), never None: oneDNN's op has no autograd formula, and a
    layer that took it for its bias alone left that bias untrained, with only torch's warning."""
    batch = _batch(minilm_dir, real_texts[:4])
    real = batch["attention_mask"].bool()
    model = BertModel.from_pretrained(minilm_dir, gemm=backend).eval()  # eval: no dropout, as the reference
    assert model.gemm_backend == backend
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name.startswith("layers.") and name.split(".", 2)[2] in BITFIT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "an autograd kernel was not registered" is the only other sign
        model(**batch).last_hidden_state[real].pow(2).mean().backward()
    theirs = {}
    for their_model in (copy.deepcopy(reference), exact_reference(reference)):
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
    batch = _batch(minilm_dir, real_texts[:3])
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
    batch = _batch(minilm_dir, real_texts[:3])
    with torch.no_grad():
        expected = model(**batch).last_hidden_state
        for clone in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
            assert torch.equal(clone(**batch).last_hidden_state, expected)
    assert "backend=onednn, post_op=gelu" in repr(model.layers[0].feed_forward.intermediate)


# ----------------------------------------------------------------------------- choosing


@needs_onednn
def test_the_choice_is_measured_once_then_read_from_the_cache(minilm_dir, caplog, monkeypatch):
    with caplog.at_level(logging.INFO, logger="minibert.gemm"):
        model = BertModel.from_pretrained(minilm_dir)
    [line] = [r.getMessage() for r in caplog.records if r.name == "minibert.gemm"]
    assert line.startswith(f"linear layers on {model.gemm_backend} (measured: GFLOP/s on one layer's projections")
    assert cpu.cpu_name() in line and "cached in" in line
    entries = json.loads(cache_file().read_text())
    [(key, record)] = entries.items()
    assert record["backend"] == model.gemm_backend and set(record["gflops"]) <= set(BACKENDS)
    assert all(part in key for part in (cpu.cpu_name(), torch.__version__, "384x1536", "gelu", "float32"))

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured again although the cache holds this CPU and shape")

    monkeypatch.setattr(gemm, "measure", no_measuring)
    assert gemm.choose(BertModel.from_pretrained(minilm_dir, gemm="mkl")).reason == "cached"


@needs_onednn
def test_a_measurement_that_could_not_be_cached_is_not_logged_as_cached(minilm_dir, caplog, monkeypatch, tmp_path):
    """The log said "cached in ~/.cache/minibert/gemm.json" also when the write failed (here the
    cache folder's parent is a file): the next process measured again. It says "not cached" and why."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(blocker / "cache"))
    with caplog.at_level(logging.INFO, logger="minibert.gemm"):
        BertModel.from_pretrained(minilm_dir)
    [line] = [r.getMessage() for r in caplog.records if r.name == "minibert.gemm"]
    assert f"; not cached ({blocker / 'cache' / 'gemm.json'}: " in line and "cached in" not in line, line


@needs_onednn
def test_a_command_shows_the_measurement_only_with_debug(minilm_dir, capsys):
    """The measurement is a diagnostic: a command's stderr holds it only when --debug asks (issue 44)."""
    from minibert.apps import cli

    for debug in (False, True):
        cache_file().unlink(missing_ok=True)  # measure again: the line is logged when measuring
        assert cli.main(["embed", "hello", "--model", str(minilm_dir)] + ["--debug"] * debug) == 0
        stderr = capsys.readouterr().err
        assert ("minibert: linear layers on" in stderr) == debug, stderr


def test_a_command_shows_why_minibert_gemm_was_not_followed(minilm_dir, monkeypatch):
    """$MINIBERT_GEMM naming a library that cannot run here (oneDNN's linear takes no float16) is
    noted and the model stays on mkl (docs/cli.md): the note reaches the command's stderr without
    --debug, which hides only the measurement. Before, the command's filter dropped every
    minibert.gemm record, warnings too: the setting was ignored without a word."""
    from helpers import run_minibert

    monkeypatch.setenv("MINIBERT_GEMM", "onednn")
    result = run_minibert("embed", "--model", str(minilm_dir), "--dtype", "float16", "hello world")
    assert result.returncode == 0, result.stderr
    noted = [line for line in result.stderr.splitlines() if "stay on mkl" in line]
    assert len(noted) == 1 and noted[0].startswith("minibert: MINIBERT_GEMM asks for onednn, which cannot run here "
                                                   "(dtype torch.float16)"), result.stderr  # fmt: skip
    assert "linear layers on" not in result.stderr  # the measurement itself: --debug's
    # The flag, asked for this model, is refused in one line that names it (and the keyword: library callers).
    result = run_minibert("embed", "--model", str(minilm_dir), "--dtype", "float16", "--gemm", "onednn", "hello world")
    assert result.returncode == 1 and result.stderr.splitlines() == [
        "minibert: error: gemm='onednn' (--gemm) asks for onednn, which cannot run here (dtype torch.float16)"]


@needs_onednn
@pytest.mark.parametrize("change", ["torch", "threads", "cpu", "flags"])
def test_the_cache_is_invalidated_by_what_the_speed_depends_on(change, minilm_dir, monkeypatch, request):
    model = BertModel.from_pretrained(minilm_dir, gemm="mkl")  # measures (attention too) and caches
    assert gemm.choose(model).reason == "cached"
    if change == "torch":
        monkeypatch.setattr(torch, "__version__", "9.9.9")
    elif change == "threads":  # a real change: a pretended count would make the measurement set it for real
        before = torch.get_num_threads()
        request.addfinalizer(lambda: torch.set_num_threads(before))
        torch.set_num_threads(1 if before > 1 else 2)
    else:
        info = cpu.read_cpuinfo()
        if change == "cpu":
            info["model name"] = "Another CPU"
        else:
            # A flag no CPU has, so the set changes on every machine (appending "avx512f" changed
            # nothing on a CPU that has it).
            info["flags"] = info.get("flags", "") + " minibert_test_only_flag"
        monkeypatch.setattr(cpu, "read_cpuinfo", lambda: info)
    assert gemm.choose(model).reason == "measured"
    assert len(json.loads(cache_file().read_text())) == 2


@needs_onednn
def test_a_damaged_or_unwritable_cache_only_means_measuring_again(minilm_dir, tmp_path, monkeypatch):
    model = BertModel.from_pretrained(minilm_dir, gemm="mkl")
    cache_file().parent.mkdir(parents=True, exist_ok=True)
    for damage in (b"{not json", b"[1, 2]", b'{"key": 5}', b"\xff\xfe"):
        cache_file().write_bytes(damage)
        assert gemm.choose(model).backend in BACKENDS
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(blocked / "cache"))  # its parent is a file: cannot be made
    assert gemm.choose(model).reason == "measured"
    assert gemm.choose(model).reason == "measured"


DAMAGED_FIELDS = {
    "gflops a string": ("gflops", {"mkl": "n/a"}), "gflops null": ("gflops", {"mkl": None}),
    "gflops NaN": ("gflops", {"mkl": float("nan")}), "gflops true": ("gflops", {"mkl": True}),
    "gflops a list": ("gflops", [1, 2]), "gflops missing": ("gflops", None),
    "gflops of no backend": ("gflops", {"blas": 3.0}), "backend a number": ("backend", 5),
    "short_attention a float": ("short_attention", {"2": 1.5}),
    "short_attention a string": ("short_attention", {"2": "16"}),
    "short_attention negative": ("short_attention", {"2": -1}),
    "short_attention true": ("short_attention", {"2": True}),
    "short_attention's threads not a number": ("short_attention", {"two": 16}),
    "short_attention null": ("short_attention", None),
}  # fmt: skip


@pytest.mark.parametrize("damage", DAMAGED_FIELDS)
def test_a_damaged_field_in_the_cache_only_means_measuring_again(minilm_dir, monkeypatch, caplog, damage):
    """gemm.json's ``gflops`` were taken as they were: a string or null there raised "Unknown format
    code 'f'" from every later load (the log line formats each rate), naming no file. Every field
    read is checked; a damaged one is a record not there: measured again, and written afresh."""
    model = BertModel.from_pretrained(minilm_dir, gemm="mkl")  # measures, and writes the record
    monkeypatch.setattr(gemm, "measure", lambda model, layer: gemm.Choice("mkl", "measured", {"mkl": 1.0}))
    monkeypatch.setattr(gemm, "measure_attention", lambda layer: {2: 16})  # (measuring again: quickly)
    assert gemm.choose(model).reason == "cached"
    records = json.loads(cache_file().read_text())
    name, value = DAMAGED_FIELDS[damage]
    for record in records.values():
        record[name] = value
    cache_file().write_text(json.dumps(records))
    with caplog.at_level(logging.DEBUG, logger="minibert.gemm"):
        assert gemm.choose(model).reason == "measured"
    assert gemm.choose(model).reason == "cached"  # written afresh


def _write_entries(first: int, count: int) -> None:
    """Write ``count`` cache entries, slowly: each writer reads, waits, then writes back."""
    import time

    from minibert.speed import cache

    real_write = cache.write_atomically

    def slow_write(path, data):
        time.sleep(0.02)  # another process's turn would fall here without the lock
        real_write(path, data)

    cache.write_atomically = slow_write
    for index in range(first, first + count):
        cache.write_cache(f"key {index}", {"index": index})


def test_processes_writing_the_cache_at_once_keep_every_entry():
    """Each process reads gemm.json, adds its verdict and writes the whole file back: four at once
    kept 24 of 80 entries (the last rename won), so the lost verdicts were measured again by the
    next process. An exclusive lock beside the file makes the turns one after the other."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write_entries, args=(first, 5)) for first in range(0, 20, 5)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    assert [writer.exitcode for writer in writers] == [0, 0, 0, 0]
    assert sorted(json.loads(cache_file().read_text())) == sorted(f"key {index}" for index in range(20))


def test_a_cache_lock_held_too_long_only_means_not_caching(monkeypatch):
    """A process stopped while it holds the lock (SIGSTOP, a debugger) must not stop the others:
    after LOCK_SECONDS the verdict is simply not cached."""
    import fcntl
    import os

    from minibert.speed import cache

    cache.write_cache("first", {"x": 1})
    monkeypatch.setattr(cache, "LOCK_SECONDS", 0.2)
    holder = os.open(f"{cache_file()}.lock", os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # another open file: flock conflicts even within one process
        cache.write_cache("second", {"x": 2})
    finally:
        os.close(holder)
    assert list(cache.read_cache()) == ["first"]
    cache.write_cache("second", {"x": 2})
    assert sorted(cache.read_cache()) == ["first", "second"]


@pytest.mark.parametrize("name", ["gemm.json", "gemm.json.lock"])
def test_a_fifo_in_the_cache_is_no_cache_and_never_blocks(name):
    """A FIFO where gemm.json is made every model load hang in open() (it waits for a writer). The
    cache's files are opened only when they are regular files; a FIFO is left as it is."""
    import os
    import stat
    import threading

    from minibert.speed import cache

    cache_file().parent.mkdir(parents=True)
    fifo = cache_file().parent / name
    os.mkfifo(fifo)
    results = []
    worker = threading.Thread(target=lambda: results.append((cache.write_cache("k", {"x": 1}), cache.read_cache())),
                              daemon=True)  # fmt: skip
    worker.start()
    worker.join(10)
    if worker.is_alive():  # blocked: open the FIFO's other end so the thread can end, then fail
        with open(fifo, "wb" if name == "gemm.json" else "rb"):
            pass
        pytest.fail(f"the cache blocked on a FIFO at {name}")
    [(not_cached, entries)] = results  # nothing cached (and write_cache says why), the FIFO kept
    assert entries == {} and "not a regular file" in not_cached and stat.S_ISFIFO(os.lstat(fifo).st_mode)


@needs_onednn
def test_measuring_is_bounded_even_for_bert_large_shapes():
    """The measurement's rows shrink with the model, so a bert-large layer costs what a MiniLM
    layer does: within the budget plus one round of three candidates (~2 GFLOP each)."""
    from minibert import BertConfig

    config = BertConfig(hidden_size=1024, num_attention_heads=16, intermediate_size=4096, num_hidden_layers=1)
    model = BertModel(config).eval()
    gemm.measure(model)  # once to page in the weights and build oneDNN's kernels
    choice = gemm.measure(model)
    assert choice.backend in BACKENDS and set(choice.gflops) == set(BACKENDS)
    flops = 2 * gemm.calibration_tokens(1024, 4096) * 12 * 1024**2  # 4 H×H + 2 H×4H projections
    slowest_round = sum(2 * flops / (rate * 1e9) for rate in choice.gflops.values())  # 1 and 2 threads
    assert choice.seconds <= measure.BUDGET_SECONDS + 2 * slowest_round, choice


def test_a_backend_must_beat_f_linear_by_the_margin():
    assert gemm.decide({"mkl": 100.0, "onednn": 104.0, "onednn-fused": 103.0}) == "mkl"  # within the noise
    assert gemm.decide({"mkl": 100.0, "onednn": 117.0, "onednn-fused": 110.0}) == "onednn"  # Zen 4: a real win
    assert gemm.decide({"mkl": 100.0, "onednn": 230.0, "onednn-fused": 240.0}) == "onednn-fused"
    assert gemm.decide({"mkl": 150.0, "onednn": 100.0}) == "mkl"


@needs_onednn
def test_overrides_argument_then_environment(minilm_dir, monkeypatch, caplog):
    monkeypatch.setenv("MINIBERT_GEMM", "onednn")
    assert BertModel.from_pretrained(minilm_dir).gemm_backend == "onednn"
    assert BertModel.from_pretrained(minilm_dir, gemm="mkl").gemm_backend == "mkl"  # the argument wins
    monkeypatch.setenv("MINIBERT_GEMM", "fastest")
    with pytest.raises(ValueError, match="MINIBERT_GEMM must be one of auto, mkl, onednn, onednn-fused; got 'fastest'"):
        BertModel.from_pretrained(minilm_dir)
    with pytest.raises(ValueError, match="gemm backend must be one of"):
        packed_linear.use_backend(BertModel.from_pretrained(minilm_dir, gemm="mkl"), "blas")


def test_where_onednn_cannot_run_an_argument_is_refused_and_the_environment_noted(minilm_dir, monkeypatch, caplog):
    monkeypatch.setattr(gemm, "_unavailable_reason", lambda model: "torch was built without oneDNN")
    with pytest.raises(ValueError, match=r"gemm='onednn' \(--gemm\) asks for onednn, which cannot run here \(torch"):
        BertModel.from_pretrained(minilm_dir, gemm="onednn")
    monkeypatch.setenv("MINIBERT_GEMM", "onednn")
    with caplog.at_level(logging.WARNING, logger="minibert.gemm"):
        assert BertModel.from_pretrained(minilm_dir).gemm_backend == "mkl"
    assert "stay on mkl" in caplog.text
    monkeypatch.delenv("MINIBERT_GEMM")
    cache_file().unlink()  # auto, measured afresh: oneDNN is not a candidate
    with caplog.at_level(logging.INFO, logger="minibert.gemm"):
        model = BertModel.from_pretrained(minilm_dir)
    assert model.gemm_backend == "mkl" and "linear layers on mkl (oneDNN cannot run here" in caplog.text


def test_dtype_auto_is_bfloat16_only_where_bf16_is_measured_faster(minilm_dir, monkeypatch):
    """ "auto" asks the measurement, not the flags: bf16 instructions without AMX can be slower than
    float32 (an Intel Xeon, family 6 model 207: 0.6x), and without them torch emulates bf16."""
    monkeypatch.setenv("MINIBERT_GEMM", "mkl")  # emulated bf16 on oneDNN may be refused on this CPU
    for flags, bf16_seconds, expected in [("fma avx2", None, torch.float32),  # not even measured
                                          ("avx512f avx512_bf16", 0.5, torch.bfloat16),
                                          ("avx512f avx512_bf16", 2.0, torch.float32),
                                          ("avx512f avx512_bf16", 0.95, torch.float32),  # a tie: exact numbers
                                          ("amx_bf16 amx_tile", 0.5, torch.bfloat16)]:  # fmt: skip
        info = {"flags": flags, "model name": f"test CPU {flags}"}
        monkeypatch.setattr(cpu, "read_cpuinfo", lambda info=info: info)
        cache_file().unlink(missing_ok=True)

        def timed(hidden, intermediate, candidate, bf16_seconds=bf16_seconds, **how):
            assert bf16_seconds is not None, "measured on a CPU without bf16 instructions"
            assert how["dtype"] == torch.bfloat16 and candidate is bf16.to_bfloat16
            return ProjectionTimes(1.0, bf16_seconds, flops=0)

        monkeypatch.setattr(bf16, "time_against_float32", timed)
        assert BertModel.from_pretrained(minilm_dir, dtype="fastest").dtype == expected, flags
        if bf16_seconds is not None:  # cached: a second load does not measure again
            monkeypatch.setattr(bf16, "time_against_float32", lambda *args, **how: pytest.fail("measured twice"))
            assert BertModel.from_pretrained(minilm_dir, dtype="fastest").dtype == expected


def test_bf16_is_faster_measures_this_cpu():
    """The real measurement runs (both dtypes, this CPU) and its verdict is what the cache holds."""
    verdict = bf16.bf16_is_faster(64, 256, budget=0.05)
    entries = json.loads(cache_file().read_text()).values() if cache_file().exists() else []  # none: not measured
    records = [record for record in entries if "bf16_faster" in record]
    assert len(records) == (1 if cpu.has_native_bf16() else 0)
    if records:
        assert records[0]["bf16_faster"] is verdict
        assert verdict == (
            records[0]["bfloat16_seconds"] * (1 + bf16.BF16_MARGIN) < records[0]["float32_seconds"]
        )
    else:
        assert verdict is False


def test_cli_gemm_flag_reaches_the_model(minilm_dir, monkeypatch, tmp_path):
    from helpers import run_minibert

    seen = []
    original = gemm.choose
    monkeypatch.setattr(gemm, "choose", lambda model, gemm=None: seen.append(model) or original(model, gemm))
    result = run_minibert("embed", "--model", str(minilm_dir), "--gemm", "mkl", "a text")
    assert result.returncode == 0, result.stderr
    assert seen and seen[-1].gemm_backend == "mkl"
    result = run_minibert("embed", "--model", str(minilm_dir), "--gemm", "blas", "a text")
    assert result.returncode == 2 and "invalid choice: 'blas'" in result.stderr


# ----------------------------------------------------------------------------- short sequences


def test_short_sequences_written_out_compute_what_the_fused_kernel_computes(minilm_dir, reference, real_texts):
    """The fast path's written-out attention (speed/fast_path.py's written_out, for sequences up to the
    measured length) against the fused kernel, on a batch that packs and attends in length groups
    (masks included): every layer within helpers.bound_from_exact of float64 (the same formula; the sums only
    ordered otherwise, so each lands in fp32's own spread, ~1e-5 wide at layer 5)."""
    import corpus
    from minibert.speed.fast_path import Packing

    model = BertModel.from_pretrained(minilm_dir, gemm="mkl")
    by_length = sorted((text for text in corpus.docstrings() if 20 < len(text) < 1200), key=len)
    batch = _batch(minilm_dir, [by_length[-1], *by_length[:4], *real_texts[:4]])
    assert Packing(batch["attention_mask"]).groups is not None
    threads = torch.get_num_threads()
    with torch.no_grad():
        model.short_attention = {}  # (groups are made where padding is skipped)
        fused = model(**batch, output_hidden_states=True, skip_padding=True)
        model.short_attention = {threads: 10_000}  # every group written out
        written = model(**batch, output_hidden_states=True, skip_padding=True)
        model.short_attention = {threads + 1: 10_000}  # another thread count's entry: not this one's
        again = model(**batch, skip_padding=True).last_hidden_state
        theirs = reference(**batch, output_hidden_states=True)
        exact = exact_reference(reference)(**batch, output_hidden_states=True)
    # Both against float64 at the real tokens, within 1e-5 beyond twice transformers' fp32 error at each
    # depth: a flat 1e-5 between the two orders failed at 1.26e-5 (layer 5) on a batch with another docstring.
    for name, output in (("fused kernel", fused), ("written out", written)):
        compare_real_tokens_with_exact(output, theirs, exact, batch["attention_mask"], name)
    assert max_abs_diff(fused.last_hidden_state, written.last_hidden_state) > 0  # two computations, not one
    assert torch.equal(again, fused.last_hidden_state)


def test_the_short_attention_table_is_measured_cached_and_applied(minilm_dir, monkeypatch):
    model = BertModel.from_pretrained(minilm_dir)
    table = model.short_attention
    assert set(table) == {1, torch.get_num_threads()} and set(table.values()) <= {0, 16, 32, 64, 128}
    [record] = json.loads(cache_file().read_text()).values()
    assert {int(k): v for k, v in record["short_attention"].items()} == table
    monkeypatch.setattr(gemm, "measure_attention", lambda layer: {1: 64, 2: 64})
    del record["short_attention"]  # a record from before: measured again
    cache_file().write_text(json.dumps({key: record for key in json.loads(cache_file().read_text())}))
    assert BertModel.from_pretrained(minilm_dir, gemm="onednn").short_attention == {1: 64, 2: 64}
    assert gemm.choose(BertModel.from_pretrained(minilm_dir)).reason == "cached"


@needs_onednn
def test_a_fused_model_has_the_same_cache_key_and_calibration(minilm_dir):
    """With the GELU applied by oneDNN (``onednn-fused``), the model still names its activation:
    the same cache key as before fusing (choosing again reads the cache), and a calibration on it
    applies the real GELU on the plain path (not the fused layer's identity)."""
    plain = BertModel.from_pretrained(minilm_dir, gemm="mkl")
    fused = BertModel.from_pretrained(minilm_dir, gemm="onednn-fused")
    layer_plain, layer_fused = packed_linear.encoder_layers(plain)[0], packed_linear.encoder_layers(fused)[0]
    assert gemm.backend_cache_key(layer_fused) == gemm.backend_cache_key(layer_plain)
    assert "onednn-fused" in gemm.measure(fused).gflops


# ----------------------------------------------------------------------------- tracing and export


def _traced_model(directory, backend: str) -> BertModel:
    """A model loaded to be traced (tuples out, as transformers' ``torchscript=True`` gives): ``backend`` is a
    GEMM backend, or "book" for the book's modules."""
    model = BertModel.from_pretrained(directory, gemm="mkl" if backend == "book" else backend, return_dict=False)
    return model.use_book_modules() if backend == "book" else model


def _args(batch) -> tuple:
    return batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]


@pytest.mark.parametrize("backend", ["mkl", "book", pytest.param("onednn-fused", marks=needs_onednn)])
def test_a_trace_of_an_unpadded_example_masks_a_padded_batch(backend, minilm_dir, reference, real_texts):
    """torch.jit.trace records one call. minibert chose in Python whether a batch had padding, so a trace of one
    unpadded sentence (as export tutorials trace) held no attention mask at all: a padded batch run through it
    was 0.49-1.5 from transformers at real tokens (mkl, the book's modules); on oneDNN the trace failed (the packed
    weight is no tensor a graph can hold). While tracing, the mask is always applied and the layers run on
    F.linear: transformers' numbers, here and on a batch of another length."""
    model = _traced_model(minilm_dir, backend)
    with torch.no_grad():
        traced = torch.jit.trace(model, _args(_batch(minilm_dir, "Hello world")))
        for texts in (real_texts[:4], real_texts[-3:]):
            batch = _batch(minilm_dir, texts)
            real = batch["attention_mask"].bool()
            assert not real.all()
            hidden, pooled = traced(*_args(batch))
            theirs = reference(**batch)
            assert_close(hidden[real], theirs.last_hidden_state[real], f"{backend}: traced, on a padded batch", ATOL)
            assert_close(pooled, theirs.pooler_output, f"{backend}: traced, the pooler", ATOL)


@needs_onednn
@pytest.mark.parametrize("short", ["as measured", "written out up to 16 tokens"])
def test_torch_export_of_the_default_load_computes_transformers_numbers(minilm_dir, reference, real_texts, short):
    """torch.export.export stopped in the input checks (``int(ids.min())``: a value an exported graph cannot
    know) and in the choice of a mask. The checks now run in eager calls only; the exported program of the
    model as loaded (oneDNN on this CPU), with dynamic batch and length, traced on an unpadded batch,
    computes transformers' numbers on padded batches. Whatever length this CPU measured attention to be
    faster written out up to: read while recording, it became a guard (tokens <= 16) and export refused
    the dynamic length (seen on a loaded AMD EPYC Zen 3, whose measurement came out 16)."""
    model = BertModel.from_pretrained(minilm_dir, gemm="onednn", return_dict=False)
    if short != "as measured":
        model.short_attention = {torch.get_num_threads(): 16}
    example = _batch(minilm_dir, ["Hello world", "Good morning"])
    assert example["attention_mask"].bool().all()
    dims = {0: torch.export.Dim("batch"), 1: torch.export.Dim("tokens", max=512)}
    with torch.no_grad():
        program = torch.export.export(model, _args(example), dynamic_shapes=(dims, dims, dims)).module()
        for texts in (real_texts[:4], real_texts[-3:]):
            batch = _batch(minilm_dir, texts)
            real = batch["attention_mask"].bool()
            hidden, pooled = program(*_args(batch))
            theirs = reference(**batch)
            assert_close(hidden[real], theirs.last_hidden_state[real], "torch.export, on a padded batch", ATOL)
            assert_close(pooled, theirs.pooler_output, "torch.export, the pooler", ATOL)
    with pytest.raises(ValueError, match="outside the vocabulary"):  # eager calls still check
        model(torch.tensor([[101, 10**6, 102]]))


def test_the_legacy_onnx_export_of_an_unpadded_example_takes_the_mask(minilm_dir, reference, real_texts, tmp_path):
    """torch.onnx.export(dynamo=False) traces as torch.jit.trace does: the graph exported from one unpadded
    sentence had no attention_mask input, and gave onnxruntime 0.49 from transformers on a padded batch."""
    onnxruntime = pytest.importorskip("onnxruntime")
    model = BertModel.from_pretrained(minilm_dir, gemm="mkl", return_dict=False)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = _args(_batch(minilm_dir, "Hello world"))
    with torch.no_grad():
        traced = torch.jit.trace(model, example)  # (the legacy exporter fills keyword-only parameters in by position)
        torch.onnx.export(traced, example, tmp_path / "model.onnx", dynamo=False,
                          input_names=names, output_names=["last_hidden_state", "pooler_output"],
                          dynamic_axes={name: {0: "batch", 1: "tokens"} for name in names})  # fmt: skip
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"))
    assert [graph_input.name for graph_input in session.get_inputs()] == names
    batch = _batch(minilm_dir, real_texts[:4])
    hidden, _ = session.run(None, {name: batch[name].numpy() for name in names})
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        theirs = reference(**batch).last_hidden_state[real]
    assert_close(torch.from_numpy(hidden)[real], theirs, "onnxruntime, on a padded batch", ATOL)
