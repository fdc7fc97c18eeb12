"""speed/varlen.py on a CPU: packed sequences attending as they lie (a GPU's variable-length kernels),
run here with ``reference_kernel`` standing in for the CUDA kernel (tests/test_gpu.py runs the real
one where a GPU is lent).

- the reference kernel computes each sequence's attention over its own keys, against the formula
  written out in float64, sequence by sequence;
- a model whose packed batches attend by sequence gives the hidden states and gradients of the
  packed path that unpacks to (B, T, H) in every layer, and unpacks only once, at the end;
- where it applies: a CUDA device, turned on, deterministic algorithms off, a head size the
  kernels take.

Tolerances: float32 sums in another order (softmax over a sequence's own keys or over the padded
row, GEMMs of other shapes): 1e-5 absolute on the O(1) LayerNorm'd states, as tests/test_model.py's
parity; gradients 1e-5 of each tensor's largest (or of a thousandth of the largest anywhere).
"""

from __future__ import annotations

import pytest
import torch

from helpers import worst_relative_difference
from minibert import BertConfig, BertModel, BertTokenizer
from minibert.speed import fast_path, varlen


@pytest.fixture
def by_sequence(monkeypatch):
    """Packed batches attend by sequence on this CPU, through the reference kernel."""
    monkeypatch.setattr(varlen, "applies", lambda device: True)
    monkeypatch.setattr(varlen, "kernel", varlen.reference_kernel)


def test_starts_are_the_running_total_of_the_lengths():
    sequences = varlen.Sequences.of(torch.tensor([3, 5, 2]))
    assert sequences.starts.tolist() == [0, 3, 8, 10] and sequences.starts.dtype == torch.int32
    assert sequences.longest == 5


def test_the_reference_kernel_attends_within_each_sequence():
    generator = torch.Generator().manual_seed(0)
    lengths, heads, size = [3, 7, 1, 5], 2, 8
    q, k, v = (torch.randn(sum(lengths), heads, size, generator=generator) for _ in range(3))
    out = varlen.reference_kernel(q, k, v, varlen.Sequences.of(torch.tensor(lengths)), 0.0)
    start = 0
    for length in lengths:  # softmax(q·Kᵀ/√S)·V over the sequence's own tokens, in float64
        part = slice(start, start + length)
        qs, ks, vs = (t[part].double().transpose(0, 1) for t in (q, k, v))  # (N, n, S)
        expected = ((qs @ ks.transpose(-1, -2)) / size**0.5).softmax(-1) @ vs
        assert (out[part].double() - expected.transpose(0, 1)).abs().max().item() <= 1e-6
        start += length


def _batch(minilm_dir, real_texts):
    tokenizer = BertTokenizer.from_pretrained(minilm_dir)
    return dict(tokenizer(real_texts, padding=True, truncation=True, max_length=64, return_tensors="pt"))


def _gradients(model, batch):
    out = model(**batch, skip_padding=True)
    (out.last_hidden_state.square().mean() + out.pooler_output.sum()).backward()
    return out.last_hidden_state.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def test_by_sequence_gives_the_packed_paths_states_and_gradients(minilm_dir, real_texts, monkeypatch):
    batch = _batch(minilm_dir, real_texts)
    real = batch["attention_mask"].bool()
    states, gradients = _gradients(BertModel.from_pretrained(minilm_dir).eval(), batch)
    with torch.no_grad():
        inferred = BertModel.from_pretrained(minilm_dir)(**batch, skip_padding=True).last_hidden_state

    monkeypatch.setattr(varlen, "applies", lambda device: True)
    monkeypatch.setattr(varlen, "kernel", varlen.reference_kernel)
    monkeypatch.setattr(fast_path, "ONE_PRODUCT_ON", frozenset({"cpu"}))  # as on a GPU: q, k, v thirds of one product
    unpacked = []
    original = fast_path.Packing.unpack
    monkeypatch.setattr(fast_path.Packing, "unpack", lambda self, x: unpacked.append(x.shape) or original(self, x))
    ours_states, ours_gradients = _gradients(BertModel.from_pretrained(minilm_dir).eval(), batch)
    assert len(unpacked) == 1  # the last hidden state; no layer lays its tokens out again
    with torch.no_grad():
        ours_inferred = BertModel.from_pretrained(minilm_dir)(**batch, skip_padding=True).last_hidden_state

    assert (ours_states[real] - states[real]).abs().max().item() <= 1e-5
    assert (ours_inferred[real] - inferred[real]).abs().max().item() <= 1e-5
    assert bool((ours_states[~real] == 0).all())  # [PAD] rows: zeros, as the packed path leaves them
    worst = worst_relative_difference([ours_gradients[n] for n in gradients], list(gradients.values()))
    assert ours_gradients.keys() == gradients.keys() and worst <= 1e-5, worst


def test_a_head_size_the_kernels_do_not_take_keeps_the_packed_path(by_sequence, monkeypatch):
    config = BertConfig(vocab_size=50, hidden_size=24, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32)  # head size 12  # fmt: skip
    model = BertModel(config).eval()
    ids = torch.tensor([[2, 5, 7, 9], [2, 6, 0, 0]])
    mask = (ids != 0).long()
    ran = []
    monkeypatch.setattr(varlen, "kernel", lambda *args: ran.append(args) or varlen.reference_kernel(*args))
    with torch.no_grad():
        out = model(ids, mask, skip_padding=True).last_hidden_state
        plain = model(ids, mask, use_fast_path=False).last_hidden_state
    assert not ran and not varlen.takes(out, 12)
    assert (out[mask.bool()] - plain[mask.bool()]).abs().max().item() <= 1e-5


def test_it_applies_on_a_gpu_when_turned_on_and_not_under_deterministic_algorithms(monkeypatch):
    gpu = torch.device("cuda", 0)
    assert not varlen.applies(torch.device("cpu"))
    monkeypatch.setattr(varlen, "ON_GPU", False)
    assert not varlen.applies(gpu)
    monkeypatch.setattr(varlen, "ON_GPU", True)
    assert varlen.applies(gpu) and not varlen.applies(torch.device("cpu"))
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert not varlen.applies(gpu)
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    heads = torch.zeros(3, 2, 64)
    assert varlen.takes(heads, 64) and not varlen.takes(heads, 12) and not varlen.takes(heads, 256)
    assert varlen.takes(heads.half(), 64) and not varlen.takes(heads.double(), 64)  # float64 is not the kernels'
