"""Length groups in training (speed/fast_path.py): on a CPU, rows of very different lengths attend
in groups, each padded only to its own longest, where a gradient is recorded too.

- laying packed tokens out by group and packing them back are each other's adjoint (the backward
  of one is the other), checked by torch's gradcheck in float64;
- a model training in groups gives the hidden states and every gradient of the packed path that
  attends as one group (the path fine-tuning took before) and of the book's plain path, in float32
  within the rounding of sums in another order, and in float64 to the last digits;
- with dropout on, a step in groups is still a step: the same seed, the same gradients;
- torch.func's transforms go through them (``setup_context``), and without a gradient the groups
  attend one at a time (one group's tensors alive, not all of them).

Tolerances: float32 sums in another order (softmax over a group's padded row or the batch's, GEMMs
of other shapes): 1e-5 absolute on the O(1) LayerNorm'd states, as tests/test_model.py's parity;
gradients 1e-5 of each tensor's largest (or of a thousandth of the largest anywhere). In float64
the same sums agree to about 1e-15 relative; 1e-10 leaves room for the sums' lengths and still
fails for any token laid out in the wrong place (an O(1) difference).
"""

from __future__ import annotations

import pytest
import torch

from helpers import worst_relative_difference
from minibert import BertModel, BertTokenizer
from minibert.speed import fast_path, varlen
from minibert.speed.packing import AttentionGroup, Packing


def test_laying_out_by_group_and_packing_back_are_adjoint():
    lengths = torch.tensor([9, 2, 8, 3, 1, 9])
    groups = AttentionGroup.of(lengths)
    assert groups is not None and len(groups) >= 3
    generator = torch.Generator().manual_seed(0)
    packed = [torch.randn(int(lengths.sum()), 4, dtype=torch.float64, generator=generator, requires_grad=True)
              for _ in range(2)]  # fmt: skip
    assert torch.autograd.gradcheck(lambda *x: fast_path._ToGroups.apply(groups, *x), packed)
    parts = [torch.randn(len(g.rows), g.tokens, 4, dtype=torch.float64, generator=generator, requires_grad=True)
             for g in groups]  # fmt: skip
    assert torch.autograd.gradcheck(lambda *x: fast_path._FromGroups.apply(groups, *x), parts)
    back = fast_path._FromGroups.apply(groups, *fast_path._ToGroups.apply(groups, packed[0])[0::1])
    assert torch.equal(back, packed[0])  # there and back: every real token where it was


@pytest.fixture
def mixed_batch(minilm_dir):
    """Texts of very different lengths, as fine-tuning's batches are: several length groups."""
    import corpus

    by_length = sorted((text for text in corpus.docstrings() if 20 < len(text) < 900), key=len)
    texts = [by_length[-1], by_length[3], by_length[len(by_length) // 2], by_length[10], by_length[-30],
             by_length[len(by_length) // 3], by_length[0]]  # fmt: skip
    tokenizer = BertTokenizer.from_pretrained(minilm_dir)
    batch = dict(tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt"))
    groups = Packing(batch["attention_mask"]).groups
    assert groups is not None and len(groups) >= 3, "the batch should split into groups"
    return batch


def _step(model, batch, **call):
    model.zero_grad(set_to_none=True)
    out = model(**batch, **call)
    real = batch["attention_mask"].bool()  # (the plain path computes [PAD] rows too: they are left out)
    (out.last_hidden_state[real].square().mean() + out.pooler_output.sum()).backward()
    return out.last_hidden_state.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _in_groups(on: bool, monkeypatch):
    monkeypatch.setattr(fast_path, "GROUPS_IN_TRAINING_ON", frozenset({"cpu"} if on else ()))


@pytest.mark.parametrize("dtype, states_tolerance, gradients_tolerance",
                         [(torch.float32, 1e-5, 1e-5), (torch.float64, 1e-10, 1e-10)])  # fmt: skip
def test_training_in_groups_gives_one_groups_states_and_gradients(mixed_batch, minilm_dir, monkeypatch, dtype,
                                                                  states_tolerance, gradients_tolerance):  # fmt: skip
    model = BertModel.from_pretrained(minilm_dir).to(dtype).eval()  # dropout off: the same arithmetic each way
    real = mixed_batch["attention_mask"].bool()
    calls = []
    original = fast_path._ToGroups.forward
    monkeypatch.setattr(fast_path._ToGroups, "forward", lambda *args: calls.append(1) or original(*args))
    _in_groups(True, monkeypatch)
    grouped_states, grouped = _step(model, mixed_batch, skip_padding=True)
    assert len(calls) == model.config.num_hidden_layers  # every layer attended in groups
    _in_groups(False, monkeypatch)
    whole_states, whole = _step(model, mixed_batch, skip_padding=True)
    plain_states, plain = _step(model, mixed_batch, use_fast_path=False)
    assert len(calls) == model.config.num_hidden_layers  # neither of those did
    for name, states, gradients in (("one group", whole_states, whole), ("the plain path", plain_states, plain)):
        difference = (grouped_states[real] - states[real]).abs().max().item()
        assert difference <= states_tolerance, (name, difference)
        worst = worst_relative_difference([grouped[n] for n in gradients], list(gradients.values()))
        assert grouped.keys() == gradients.keys() and worst <= gradients_tolerance, (name, worst)
    assert bool((grouped_states[~real] == 0).all())  # [PAD] rows: zeros, as the packed path leaves them


def test_a_step_in_groups_with_dropout_repeats_with_its_seed(mixed_batch, minilm_dir, monkeypatch):
    _in_groups(True, monkeypatch)
    model = BertModel.from_pretrained(minilm_dir).train()
    steps = []
    for _ in range(2):
        torch.manual_seed(7)
        steps.append(_step(model, mixed_batch, skip_padding=True))
    (first_states, first), (second_states, second) = steps
    assert torch.equal(first_states, second_states)
    assert all(torch.equal(first[name], second[name]) for name in first)
    model.eval()
    _, undropped = _step(model, mixed_batch, skip_padding=True)
    assert worst_relative_difference(list(first.values()), list(undropped.values())) > 1e-3  # dropout did drop


def test_torch_func_goes_through_the_groups(mixed_batch, minilm_dir, monkeypatch):
    _in_groups(True, monkeypatch)
    model = BertModel.from_pretrained(minilm_dir).eval()
    real = mixed_batch["attention_mask"].bool()
    parameters = {name: p.detach() for name, p in model.named_parameters()}

    def loss(weights):
        out = torch.func.functional_call(model, weights, (), {**mixed_batch, "skip_padding": True})
        return out.last_hidden_state[real].square().mean() + out.pooler_output.sum()

    by_func = torch.func.grad(loss)(parameters)
    _, by_backward = _step(model, mixed_batch, skip_padding=True)
    assert worst_relative_difference([by_func[n] for n in by_backward], list(by_backward.values())) <= 1e-6


def test_without_a_gradient_the_groups_attend_one_at_a_time(mixed_batch, minilm_dir, monkeypatch):
    calls = []
    original = fast_path._ToGroups.forward
    monkeypatch.setattr(fast_path._ToGroups, "forward", lambda *args: calls.append(1) or original(*args))
    model = BertModel.from_pretrained(minilm_dir).eval()
    with torch.no_grad():
        unrecorded = model(**mixed_batch, skip_padding=True).last_hidden_state
    assert calls == []  # the loop of one group at a time, not the autograd functions' all at once
    recorded = _step(model, mixed_batch, skip_padding=True)[0]
    assert len(calls) == model.config.num_hidden_layers
    real = mixed_batch["attention_mask"].bool()  # the same numbers (torch's CPU attention kernel without a
    assert (unrecorded[real] - recorded[real]).abs().max().item() <= 1e-5  # gradient is another: 1e-5, as above)



MASK_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int32, torch.float16, torch.bfloat16, torch.float32,
               torch.float64]  # fmt: skip


def test_a_mask_of_any_dtype_groups_as_an_int64_mask_does(mixed_batch, minilm_dir):
    """A float 0./1. mask (as transformers takes it) gave float lengths, so float group indices:
    ``skip_padding=True`` raised torch's "index_select(): Expected dtype int32 or int64". The lengths
    are counted as integers: the same layout, so the very same numbers as the int64 mask's (exactly),
    without a gradient for every dtype, and in a training step (length groups on a CPU) for float32."""
    model = BertModel.from_pretrained(minilm_dir).eval()
    mask = mixed_batch["attention_mask"]
    with torch.no_grad():
        expected = model(**mixed_batch, skip_padding=True).last_hidden_state
        for dtype in MASK_DTYPES:
            got = model(**dict(mixed_batch, attention_mask=mask.to(dtype)), skip_padding=True).last_hidden_state
            assert torch.equal(got, expected), f"a {dtype} mask"
    states, gradients = _step(model, mixed_batch, skip_padding=True)
    states_here, gradients_here = _step(model, dict(mixed_batch, attention_mask=mask.float()), skip_padding=True)
    assert torch.equal(states_here, states) and all(torch.equal(gradients_here[n], g) for n, g in gradients.items())
    sequences = varlen.Sequences.of(varlen.real_lengths(mask.float()))  # (the GPU's varlen layout)
    assert sequences.starts.dtype == torch.int32 and sequences.starts.tolist() == [0, *mask.sum(1).cumsum(0).tolist()]
