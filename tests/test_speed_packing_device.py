"""A layout computed where the mask was given (speed/packing.py): a model on a GPU fed from the CPU
reads its mask on the CPU, without waiting for the GPU, and gets its index tensors copied over.

These run on the CPU, with torch's meta device standing in for the GPU: every index tensor of the
layout must end up on the model's device (one left behind would be read across devices), and
the choices that depend on the device (length groups in training, attention by sequence) must
follow the model's device, not the mask's. tests/test_gpu.py checks on a GPU that an Embedder's
batches then run without the CPU waiting for the GPU."""

from __future__ import annotations

import pytest
import torch

from minibert import BertModel
from minibert.speed import fast_path, packing, varlen
from minibert.speed.fast_path import FastLayout

META = torch.device("meta")
TINY = "tests/data/tiny_hub"


def _mask(lengths: list[int]) -> torch.Tensor:
    """(B, T) right-padded, rows of these lengths: lengths this unequal attend in groups."""
    tokens = max(lengths)
    return (torch.arange(tokens)[None, :] < torch.tensor(lengths)[:, None]).long()


def _index_tensors(layout: FastLayout) -> dict[str, torch.Tensor]:
    found = {"index": layout.packing.index, "padding_index": layout.packing.padding_index}
    for number, group in enumerate(layout.packing.groups or []):
        found.update({f"group {number} {name}": getattr(group, name) for name in ("rows", "local", "packed")})
    if layout.sequences is not None:
        found["starts"] = layout.sequences.starts
    return found


def test_a_layout_for_another_device_has_every_index_tensor_there():
    mask = _mask([9, 9, 2, 3, 8, 1])
    with torch.no_grad():  # groups without a gradient, on every device
        here, there = FastLayout(mask), FastLayout(mask, device=META)
    assert here.packing.groups is not None and len(there.packing.groups) == len(here.packing.groups) >= 3
    ours, theirs = _index_tensors(here), _index_tensors(there)
    assert ours.keys() == theirs.keys()
    assert {name: t.device.type for name, t in theirs.items()} == dict.fromkeys(theirs, "meta")
    assert {name: t.shape for name, t in theirs.items()} == {name: t.shape for name, t in ours.items()}
    assert all(t.device.type == "cpu" for t in ours.values()), "the mask's own device: nothing moved"


def test_by_sequence_starts_go_to_the_models_device(monkeypatch):
    monkeypatch.setattr(varlen, "applies", lambda device: device.type == "meta")  # the GPU's choice, on meta
    layout = FastLayout(_mask([5, 3, 4]), device=META)
    assert layout.sequences is not None and layout.sequences.starts.device == META
    assert layout.sequences.longest == 5


@pytest.mark.parametrize(("device", "grouped"), [(torch.device("cpu"), True), (META, False)])
def test_groups_in_training_follow_the_models_device_not_the_masks(device, grouped):
    assert fast_path.GROUPS_IN_TRAINING_ON == {"cpu"}
    with torch.enable_grad():
        layout = FastLayout(_mask([9, 9, 2, 3, 8, 1]), device=device)
    assert (layout.packing.groups is not None) == grouped


def test_a_tensor_already_there_is_not_copied():
    index = torch.arange(4)
    assert packing.on_device(index, torch.device("cpu")) is index
    assert packing.on_device(index, META).device == META


def test_a_model_that_cannot_be_read_back_runs_on_a_mask_given_on_the_cpu(monkeypatch):
    """BertModel.forward hands FastLayout the caller's mask itself (for a GPU's model: the CPU tensor,
    not its copy on the GPU) and the model's device. On the meta device, where no value can be read
    back (the stand-in for a GPU that must not be waited for), the whole forward pass runs: no
    choice of the model reads a tensor on its device, without a gradient (length groups) or with."""
    model = BertModel.from_pretrained(TINY, device=META)
    seen = []
    original = FastLayout.for_call.__func__
    monkeypatch.setattr(FastLayout, "for_call", classmethod(lambda cls, mask, *rest: seen.append((mask, rest[-1]))
                                                             or original(cls, mask, *rest)))  # fmt: skip
    mask = _mask([9, 9, 2, 3, 8, 1])
    ids = torch.randint(5, 100, mask.shape) * mask
    with torch.inference_mode():
        out = model.eval()(ids, mask, skip_padding=True, output_hidden_states=True)
    assert out.last_hidden_state.device == META and out.last_hidden_state.shape == (6, 9, 32)
    out = model.train()(ids, mask, skip_padding=True)
    assert out.last_hidden_state.requires_grad
    assert [(given is mask, device) for given, device in seen] == [(True, META)] * 2
