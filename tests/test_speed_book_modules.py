"""The loaded model is the book's code one switch away (speed/seam.py, ``model.use_book_modules()``).

On real weights (all-MiniLM-L6-v2), per GEMM backend: the model as loaded (speed swapped in), the
same model after ``use_book_modules()`` (made only of model.py's classes, attention written out),
and after ``use_book_modules(False)`` (the speed back) each compute transformers' numbers at every
position, [PAD] rows included. Tolerance: the parity bound of tests/test_model.py, 1e-5 beyond
fp32's own rounding at MiniLM's depth as transformers measures it against float64
(helpers.bound_from_exact): the backends change only the order of fp32 sums.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers import assert_close, bound_from_exact, exact_reference
from minibert import BertConfig, BertModel, BertTokenizer
from minibert import model as book
from minibert.activations import activation
from minibert.speed.cache import cache_file
from minibert.speed.fast_path import FastLayout
from minibert.speed.packed_linear import PackedLinear

transformers = pytest.importorskip("transformers")
ATOL = 1e-5
# Every class a BertModel is made of in model.py: the book's own and the torch.nn ones it uses.
BOOK_CLASSES = {book.BertModel, book.Embeddings, book.EncoderLayer, book.SelfAttention, book.FeedForward,
                book.Pooler, nn.ModuleList, nn.Linear, nn.Embedding, nn.LayerNorm, nn.Dropout}  # fmt: skip


pytestmark = pytest.mark.usefixtures("own_gemm_cache")  # each test measures into its own cache


@pytest.fixture(scope="module")
def expected(minilm_dir, real_texts):
    """(batch, transformers' last_hidden_state, its float64 counterpart, transformers' pooler)."""
    batch = BertTokenizer.from_pretrained(minilm_dir)(real_texts, padding=True, return_tensors="pt")
    reference = transformers.BertModel.from_pretrained(str(minilm_dir), attn_implementation="eager").eval()
    with torch.no_grad():
        theirs = reference(**batch)
        exact = exact_reference(reference)(**batch).last_hidden_state
    return batch, theirs.last_hidden_state, exact, theirs.pooler_output


def is_book(model: BertModel) -> bool:
    """Made of model.py's classes only, each feed-forward applying the config's activation itself."""
    function = activation(model.config.hidden_act)
    return all(type(module) in BOOK_CLASSES for module in model.modules()) and all(
        layer.feed_forward.activation is function for layer in model.layers
    )


def check(model, expected, name: str) -> float:
    batch, theirs, exact, pooler = expected
    assert (batch["attention_mask"] == 0).any(), "the batch should hold [PAD] rows"
    with torch.no_grad():
        out = model(**batch)
    assert_close(out.pooler_output, pooler, f"{name}: pooler", ATOL)
    return assert_close(out.last_hidden_state, theirs, f"{name}: every position", bound_from_exact(theirs, exact, ATOL))


@pytest.mark.parametrize("backend", ["onednn-fused", "onednn", "mkl"])
def test_use_book_modules_both_ways_on_real_weights(backend, minilm_dir, expected, monkeypatch):
    if backend != "mkl" and not torch.backends.mkldnn.is_available():
        pytest.skip("torch built without oneDNN")
    model = BertModel.from_pretrained(minilm_dir, gemm=backend)
    swapped = sum(isinstance(module, PackedLinear) for module in model.modules())
    assert swapped == (0 if backend == "mkl" else 6 * model.config.num_hidden_layers)
    assert not model.book_modules and model.use_fast_path
    loaded = check(model, expected, f"{backend} as loaded")

    assert model.use_book_modules() is model and model.book_modules
    assert is_book(model) and not model.use_fast_path and model.gemm_backend == "mkl"
    with monkeypatch.context() as patch:  # the book's attention formula runs, not the fast path's
        patch.setattr(FastLayout, "self_attention", lambda *args: pytest.fail("the fast path ran in book mode"))
        plain = check(model, expected, f"{backend} -> book modules")
    model.use_book_modules()  # twice is once
    assert is_book(model)

    model.use_book_modules(False)
    assert not model.book_modules and model.use_fast_path and model.gemm_backend == backend
    assert sum(isinstance(module, PackedLinear) for module in model.modules()) == swapped
    if backend == "onednn-fused":
        assert not is_book(model)  # the activation is inside the GEMM again
    back = check(model, expected, f"book modules -> {backend}")
    print(
        f"\n{backend}: max |Δ| vs transformers, every position: loaded {loaded:.1e}, book {plain:.1e}, back {back:.1e}"
    )  # noqa: E501


def test_a_model_built_by_hand_is_the_book_and_the_switch_keeps_it(minilm_dir):
    """``BertModel(config)``: model.py's code and nothing else, with no weights loaded and nothing measured."""
    model = BertModel(BertConfig.from_json_file(minilm_dir / "config.json"))
    assert is_book(model) and model.use_fast_path and not model.book_modules
    assert not cache_file().exists()  # no speed was chosen: nothing was measured
    model.use_book_modules()
    assert is_book(model) and not model.use_fast_path and model.book_modules
    model.use_book_modules(False)
    assert is_book(model) and model.use_fast_path and not model.book_modules


def test_a_model_loaded_on_mkl_has_only_the_book_classes(minilm_dir):
    model = BertModel.from_pretrained(minilm_dir, gemm="mkl")
    assert is_book(model)  # mkl: nothing swapped, only attention's fast path on
    model.use_book_modules()
    assert is_book(model) and not model.use_fast_path
    model.use_book_modules(False)
    assert is_book(model) and model.use_fast_path


@pytest.mark.parametrize("backend", ["onednn", "mkl"])
def test_torch_quantize_dynamic_after_the_book_modules_quantizes_every_projection(backend, minilm_dir):
    """torch's ``quantize_dynamic`` matches layers by exact class: on a model loaded on oneDNN it left
    the 36 ``PackedLinear`` projections in float32 without a word (the pooler only). docs/int8.md says
    to call ``use_book_modules()`` first: then every projection is torch's dynamic int8 Linear."""
    if backend != "mkl" and not torch.backends.mkldnn.is_available():
        pytest.skip("torch built without oneDNN")
    model = BertModel.from_pretrained(minilm_dir, gemm=backend).use_book_modules()
    quantized = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    dynamic = torch.ao.nn.quantized.dynamic.Linear
    assert sum(type(module) is dynamic for module in quantized.modules()) == 6 * model.config.num_hidden_layers + 1
    assert not any(type(module) in (nn.Linear, PackedLinear) for module in quantized.modules())
