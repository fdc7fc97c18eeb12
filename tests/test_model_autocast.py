"""Mixed precision (``torch.autocast``, what ``--precision bf16`` trains under): the matrix products
run in bfloat16 and everything between them (the residual sums, LayerNorm, the stream of hidden
states) stays float32, as in transformers. Two things are checked, on the model's every path (the
fast path with and without padding skipped, with a gradient recorded or not, and the book's
modules):

- every hidden state comes out float32;
- its error against the float64 truth is no larger than transformers' own under the same autocast
  (within twice it: the same roundings, in another order; or a few bfloat16 units of the states'
  magnitude where both are tiny).

Both once failed: the residual sums were taken in place into the attention's (and the feed-forward's)
bfloat16 output, so the residual stream was rounded to 8 bits of mantissa at every layer. On a CPU
LayerNorm then ran in bfloat16 too, and the states came out bfloat16, 40-60x further from the truth
than transformers' (all-MiniLM-L6-v2, 13 texts). The batch here is six real texts of 5-64
tokens (``TEXTS``), the fifteen's worst-case rows among them.

The Q, K, V projections as one product (speed/fast_path.py's ``fused_projections``: on a GPU, where
a gradient is recorded) are checked here too, turned on for the CPU (``one_product``): it runs
exactly there, its gradients are the three products', and layers that are not plain keep theirs.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils import prune

from helpers import worst_relative_difference
from minibert import BertModel, BertTokenizer
from minibert.speed import fast_path

transformers = pytest.importorskip("transformers")

BF16_UNIT = 2.0**-8  # bfloat16's unit roundoff (8 bits of mantissa, one implicit)


@pytest.fixture
def one_product(monkeypatch):
    """Q, K, V as one product on this CPU too (by default only where launches bind: a GPU)."""
    monkeypatch.setattr(fast_path, "ONE_PRODUCT_ON", frozenset({"cpu", "cuda"}))


def _states(model, batch: dict, skip_padding: bool, grad: bool):
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.set_grad_enabled(grad):
        if isinstance(model, BertModel):
            out = model(**batch, output_hidden_states=True, skip_padding=skip_padding)
        else:
            out = model(**batch, output_hidden_states=True)
    return [state.detach() for state in out.hidden_states]


# Six of conftest's real texts, 5 to 64 tokens (padded to 64): its shortest and longest rows, whose tokens
# hold the largest error against float64 of all fifteen on every path (ours and transformers' alike: the
# worst layer's error is 0.21 of the bound on the fast path and 0.28 on the book's, with the fifteen or
# with these six). Each bfloat16 forward here computes 6 x 64 tokens instead of 15 x 64: on a CPU without
# bfloat16 instructions those products are the file's cost.
TEXTS = [0, 6, 9, 12, 13, 14]


@pytest.fixture(scope="module")
def models(minilm_dir, real_texts):
    tokenizer = BertTokenizer.from_pretrained(minilm_dir)
    texts = [real_texts[i] for i in TEXTS]
    batch = dict(tokenizer(texts, padding=True, truncation=True, max_length=64, return_tensors="pt"))
    assert batch["input_ids"].shape[1] == 64 and not bool(batch["attention_mask"].all())  # long rows and padding
    truth = BertModel.from_pretrained(minilm_dir, dtype=torch.float64).eval()
    with torch.no_grad():
        exact = truth(**batch, output_hidden_states=True).hidden_states
    theirs = transformers.BertModel.from_pretrained(minilm_dir, dtype=torch.float32).eval()
    reference = _states(theirs, batch, skip_padding=False, grad=False)
    return batch, exact, reference


def _short(batch: dict) -> dict:
    """Four of the batch's rows (8, 6, 5 and 14 tokens), cut to the longest: right-padded still, 4 x 14
    tokens. For the tests that count which product ran, or compare a layer's own call with itself:
    what they check is per layer and per token, not per text."""
    rows = torch.tensor([0, 2, 3, 4])
    tokens = int(batch["attention_mask"][rows].sum(1).max())
    return {name: tensor[rows, :tokens] for name, tensor in batch.items()}


@pytest.mark.parametrize("skip_padding", [False, True], ids=["padded", "skip_padding"])
@pytest.mark.parametrize("grad", [False, True], ids=["inference", "gradient"])
@pytest.mark.parametrize("book", [False, True], ids=["fast", "book"])
@pytest.mark.parametrize("one", [False, True], ids=["three-products", "one-product"])
def test_under_autocast_the_residual_stream_stays_float32(minilm_dir, models, monkeypatch, skip_padding, grad, book,
                                                          one):  # fmt: skip
    batch, exact, reference = models
    monkeypatch.setattr(fast_path, "ONE_PRODUCT_ON", frozenset({"cpu"}) if one else frozenset())
    ours = BertModel.from_pretrained(minilm_dir).eval()
    if book:
        ours.use_book_modules()
    states = _states(ours, batch, skip_padding, grad)
    real = batch["attention_mask"].bool()
    for layer, (x, y, t) in enumerate(zip(states, reference, exact)):
        assert x.dtype == torch.float32, f"hidden state {layer} is {x.dtype} under autocast"
        ours_error = (x[real].double() - t[real]).abs().max().item()
        theirs_error = (y[real].double() - t[real]).abs().max().item()
        unit = BF16_UNIT * t[real].abs().max().item()
        print(f"layer {layer}: minibert {ours_error:.3e}, transformers {theirs_error:.3e} from float64")
        assert ours_error <= 2 * theirs_error + 4 * unit, (layer, ours_error, theirs_error)


def test_q_k_v_are_one_product_where_a_gradient_is_recorded(minilm_dir, models, monkeypatch):
    batch = _short(models[0])
    assert fast_path.ONE_PRODUCT_ON == {"cuda"}  # the default: a GPU's steps are launch-bound, a CPU's are not
    monkeypatch.setattr(fast_path, "ONE_PRODUCT_ON", frozenset({"cpu"}))
    calls = []
    original = fast_path.fused_projections
    monkeypatch.setattr(fast_path, "fused_projections", lambda x, attention: calls.append(
        original(x, attention) is not None) or original(x, attention))  # fmt: skip
    model = BertModel.from_pretrained(minilm_dir).eval()
    with torch.no_grad():
        model(**batch)
    assert calls == [False] * model.config.num_hidden_layers  # inference: three products (seam.py's)
    calls.clear()
    model(**batch, skip_padding=True)
    assert calls == [True] * model.config.num_hidden_layers
    calls.clear()
    model.requires_grad_(False)  # frozen: nothing to record, even with gradients on (a tutorial's plain call)
    model(**batch)
    assert calls == [False] * model.config.num_hidden_layers


@pytest.mark.parametrize("skip_padding", [False, True], ids=["padded", "skip_padding"])
def test_one_product_gives_the_three_products_gradients(minilm_dir, models, monkeypatch, one_product, skip_padding):
    """float32: the gradients of Wq, Wk, Wv and every other weight, one product against three. The
    same sums in another order (a GEMM of 3H columns blocks its work otherwise): 1e-5 of each
    tensor's largest gradient, or of a thousandth of the largest anywhere (the key bias's gradient
    is 0 in exact arithmetic, so what is left is the rounding of sums that cancel)."""
    batch, _, _ = models
    gradients = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(fast_path, "fused_projections", lambda x, attention: None)
        model = BertModel.from_pretrained(minilm_dir).eval()
        out = model(**batch, skip_padding=skip_padding)
        (out.last_hidden_state.square().mean() + out.pooler_output.sum()).backward()
        gradients.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
    one, three = gradients
    assert one.keys() == three.keys() and any(".query." in name for name in one)
    worst = worst_relative_difference([one[name] for name in three], list(three.values()))
    print(f"{len(one)} gradients, worst relative max |Δ| {worst:.2e}")
    assert worst <= 1e-5


class LowRankAdapted(nn.Linear):
    """A LoRA-style layer: an nn.Linear subclass whose forward adds a trained low-rank term."""

    def __init__(self, linear: nn.Linear, rank: int = 4):
        super().__init__(linear.in_features, linear.out_features)
        self.weight, self.bias = linear.weight, linear.bias
        self.down = nn.Parameter(torch.randn(rank, linear.in_features) * 0.05)
        self.up = nn.Parameter(torch.randn(linear.out_features, rank) * 0.05)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + (x @ self.down.T) @ self.up.T


def _adapted(model):
    for layer in model.layers:
        layer.attention.value = LowRankAdapted(layer.attention.value)
    return lambda: model.layers[0].attention.value.down.grad is not None  # the adapter is trained


def _pruned(model):
    prune.l1_unstructured(model.layers[0].attention.key, "weight", amount=0.5)  # a forward pre-hook
    return lambda: model.layers[0].attention.key.weight_orig.grad is not None  # the kept weights are trained


def _backward_hooked(model):
    seen = []
    model.layers[0].attention.query.register_full_backward_hook(lambda module, into, out: seen.append(1))
    return lambda: bool(seen)  # the hook saw the layer's gradient


def _forward_replaced(model):
    query = model.layers[0].attention.query  # as accelerate wraps a forward on the instance
    query.forward = lambda x, plain=query.forward: plain(x) * 0.5
    return lambda: True  # (what is checked: the states match the call that ran it)


@pytest.mark.parametrize("change", [_adapted, _pruned, _backward_hooked, _forward_replaced],
                         ids=["lora-adapter", "pruned", "backward-hook", "forward-replaced"])  # fmt: skip
def test_layers_with_their_own_forward_or_hooks_compute_their_own_products(minilm_dir, models, one_product,
                                                                          change):  # fmt: skip
    """One product for Q, K, V is only for plain linear layers: a subclass with its own forward (a
    LoRA adapter), a forward replaced on the instance, a forward pre-hook (torch's pruning, which
    rebuilds the weight on every call) and a backward hook each make the layer run itself, so
    training computes what inference computes, trains what it should, and runs every hook."""
    batch = _short(models[0])
    model = BertModel.from_pretrained(minilm_dir).eval()
    done = change(model)
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        expected = model(**batch).last_hidden_state
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(2):  # pruning's rebuilt weight is a new tensor each call: a second step must work
        out = model(**batch).last_hidden_state
        if step == 0:  # the layer's own call ran: the states of the call without a gradient
            # (real tokens; that call multiplies through seam.py's GEMM library, this one through F.linear:
            # each within tests/test_model.py's 1e-5 of transformers, so within 2e-5 of each other. The
            # adapter's term skipped moved them by 4e-2.)
            assert (out - expected)[real].abs().max().item() <= 2e-5
        out.square().mean().backward()
        assert done()
        optimizer.step()
        optimizer.zero_grad()


def test_weights_of_different_dtypes_are_not_stacked_into_one(one_product):
    """Three products of a float32 and a bfloat16 weight refuse (F.linear wants one dtype); a stack
    would cast them to one without a word. So they stay three, and refuse as the book's layers do."""
    from minibert import BertConfig

    model = BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=64))  # fmt: skip
    model.layers[0].attention.key.to(torch.bfloat16)
    x = torch.randn(1, 3, 32, requires_grad=True)
    assert fast_path.fused_projections(x, model.layers[0].attention) is None
    with pytest.raises(RuntimeError):
        model(torch.tensor([[2, 5, 7]]))
