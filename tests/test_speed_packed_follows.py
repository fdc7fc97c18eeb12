"""The packed GEMM's caches follow the model (speed/packed_linear.py): the packed weights after an
optimizer's step, and ``onednn-fused``'s activation applied inside the intermediate GEMM only while
the feed-forward still holds the pair it was built from.

Each case compares the fast path's output with the book path's (``use_book_modules()``, the
documented way to turn the speed off: model.py's ``nn.Linear`` and activation) on the same model,
at the real tokens' rows. Tolerance 1e-5, the parity bound of tests/test_model.py: a backend
changes only the order of each output element's fp32 sum of 384–1,536 products (tens of fp32 ulps
at MiniLM's hidden values of magnitude ≤ ~10; 1 ulp at 8 is 9.5e-7), while a stale packed weight
or an activation applied at the wrong place moves values by 1e-1 and more (measured: 4.2 after one
fused AdamW step, 0.63 with a LoRA-style wrapper), so the check can fail. After an optimizer's
step the values move beyond the loaded model's, so that check is against the float64 result, within
1e-5 plus twice the book path's own fp32 error there (helpers.bound_from_exact).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers import assert_close, bound_from_exact
from minibert import BertModel, BertTokenizer
from minibert.speed import packed_linear
from minibert.training.run.optimization import AdamWeightDecay, hub_named_parameters

ATOL = 1e-5
pytestmark = [pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN"),
              pytest.mark.usefixtures("own_gemm_cache")]  # fmt: skip


@pytest.fixture(scope="module")
def batch(minilm_dir, real_texts):
    return BertTokenizer.from_pretrained(minilm_dir)(real_texts[:4], padding=True, truncation=True, return_tensors="pt")


def fast_and_book(model: BertModel, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """The real tokens' rows as the model runs now, then with the book's modules (and back)."""
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        fast = model(**batch).last_hidden_state[real]
        model.use_book_modules()
        book = model(**batch).last_hidden_state[real]
        model.use_book_modules(False)
    return fast, book


OPTIMIZERS = {
    "AdamW(fused=True)": lambda model: torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True),
    "SGD(fused=True)": lambda model: torch.optim.SGD(model.parameters(), lr=1.0, fused=True),
    "Adam(foreach=True)": lambda model: torch.optim.Adam(model.parameters(), lr=1e-2, foreach=True),
    "minibert's AdamWeightDecay": lambda model: AdamWeightDecay(hub_named_parameters(model)),
}


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("backend", ["onednn", "onednn-fused"])
def test_an_optimizer_step_is_seen_by_the_packed_weights(minilm_dir, batch, optimizer, backend):
    """torch's fused CPU kernels write the parameters without bumping their version counter: the
    packed copies stayed as loaded, 4.2 away from the book path after one AdamW(fused=True) step on
    MiniLM. Any torch.optim step now counts as a change (a process-wide step hook); minibert's own
    AdamWeightDecay (not a torch.optim.Optimizer) writes with torch._foreach_sub_, which the version
    counter sees."""
    model = BertModel.from_pretrained(minilm_dir, gemm=backend).eval()
    with torch.no_grad():
        before = model(**batch).last_hidden_state[batch["attention_mask"].bool()]  # packs every weight
    stepper = OPTIMIZERS[optimizer](model)
    model.train()
    model(**batch).last_hidden_state.pow(2).mean().backward()
    if isinstance(stepper, AdamWeightDecay):
        stepper.step(1e-2)
    else:
        stepper.step()
    model.eval()
    fast, book = fast_and_book(model, batch)
    exact_model = BertModel(model.config)  # the stepped weights in float64: the exact numbers, to fp32's eyes
    exact_model.load_state_dict(model.state_dict())
    with torch.no_grad():
        exact = exact_model.double().eval()(**batch).last_hidden_state[batch["attention_mask"].bool()]
    # A step of SGD at lr=1 moves the hidden values well beyond the loaded model's: the flat 1e-5 no
    # longer bounds another GEMM order's rounding there (1.75e-5 seen with one thread a worker). The
    # bound is the book path's own fp32 error at these values, doubled, plus 1e-5 (bound_from_exact);
    # a stale packed weight is 1e-1 and more away.
    assert_close(fast, exact, f"{backend} after one {optimizer} step", bound_from_exact(book, exact))
    assert float((fast - before).abs().max()) > 1e-2  # the step mattered: this comparison can fail


class LoraLike(nn.Module):
    """peft's LoraLayer in miniature: base_layer(x) + B(A(x)), the adapter's delta added after the product."""

    def __init__(self, base: nn.Module):
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.Linear(base.in_features, 8, bias=False)
        self.lora_B = nn.Linear(8, base.out_features, bias=False)
        nn.init.normal_(self.lora_B.weight, std=0.05)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base_layer(x) + self.lora_B(self.lora_A(x))


def _lora(feed_forward) -> None:
    feed_forward.intermediate = LoraLike(feed_forward.intermediate)


def _fresh_linear(feed_forward) -> None:
    old = feed_forward.intermediate
    new = nn.Linear(old.in_features, old.out_features)
    new.load_state_dict(old.state_dict())  # the same weights, a plain nn.Linear
    feed_forward.intermediate = new


def _relu(feed_forward) -> None:
    feed_forward.activation = lambda x, inplace=False: torch.relu(x)


@pytest.mark.parametrize("change", [_lora, _fresh_linear, _relu], ids=["LoRA-like wrapper", "fresh nn.Linear", "ReLU"])
def test_a_changed_feed_forward_on_onednn_fused_computes_the_book_numbers(minilm_dir, batch, change):
    """onednn-fused applied GELU inside the intermediate GEMM and skipped the feed-forward's own
    activation, whatever the feed-forward had become: gelu(Wx) + BAx under a LoRA wrapper (0.63 from
    the book), no GELU at all after a fresh nn.Linear (5.7), relu(gelu(x)) after a new activation;
    and use_book_modules() then raised AttributeError. The pair is checked by identity at each call."""
    model = BertModel.from_pretrained(minilm_dir, gemm="onednn-fused").eval()
    torch.manual_seed(0)
    with torch.no_grad():
        before = model(**batch).last_hidden_state[batch["attention_mask"].bool()]
    for layer in model.layers:
        change(layer.feed_forward)
    fast, book = fast_and_book(model, batch)
    assert_close(fast, book, f"onednn-fused after {change.__name__}", ATOL)
    if change is not _fresh_linear:  # (the same weights: the same function, which the old code lost 5.7 from)
        assert float((fast - before).abs().max()) > 1e-2  # the change mattered: this comparison can fail
    assert not any(isinstance(m, packed_linear.PackedLinear) for m in _book(model).modules())


def _book(model: BertModel) -> BertModel:
    model.use_book_modules()
    return model


def test_an_intact_pair_still_applies_the_activation_in_the_gemm(minilm_dir, batch):
    """The check costs nothing where nothing changed: the post-op is still used."""
    model = BertModel.from_pretrained(minilm_dir, gemm="onednn-fused").eval()
    fast, book = fast_and_book(model, batch)
    assert_close(fast, book, "onednn-fused as loaded", ATOL)
    intermediate = model.layers[0].feed_forward.intermediate
    assert intermediate.post_op is not None and intermediate.applied


def test_a_weight_at_a_freed_weights_address_is_packed_again():
    """The cache key is the weight's address and version: a new Parameter at the address of one that
    was packed and freed (``layer.weight = None``, or ``torch.func.functional_call`` looping over loaded
    checkpoints, each file mapped where the last one was: 0.156 from its own numbers) had the same key,
    and was multiplied by the freed weight's packed copy. The layer holds the memory it packed, so no
    other tensor takes that address while the key names it."""
    layer = packed_linear.PackedLinear(nn.Linear(128, 64))  # 32 KB: glibc hands a freed block of it out again
    x = torch.randn(3, 128)
    for _ in range(60):  # (without the hold, the new weight took the freed one's address 27 times in 60)
        layer.weight = nn.Parameter(torch.randn(64, 128))
        with torch.no_grad():
            layer(x)
        layer.weight = None
        layer.weight = nn.Parameter(torch.randn(64, 128))
        with torch.no_grad():
            expected = nn.functional.linear(x, layer.weight, layer.bias)
            # any order of a sum of 128 fp32 products: within 128·eps·Σ|products| (a stale weight: ~10 off)
            bound = 128 * torch.finfo(torch.float32).eps * float((x.abs() @ layer.weight.abs().T).max())
            assert_close(layer(x), expected, "a new weight at a freed one's address", bound)
