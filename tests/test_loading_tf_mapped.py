"""A Google TensorFlow checkpoint loads mapped, like model.safetensors (loading/file_pages.py), and
computes the same numbers whatever it is stored as.

A TF kernel is stored (in, out); the model's Linear weight is (out, in). The loader keeps each
kernel as a transposed view of the mapped file while oneDNN's packed copy is the only thing
multiplied (packed from the view: the same bytes), gives its pages back, and lays the weight out in
its own memory the moment anything else reads it: training, the book's modules, a move
(speed/packed_linear.py). So the numbers are those of the same weights loaded from
model.safetensors, bit for bit, on every backend — the tests below compare with ``torch.equal``,
since the same float32 products in the same order give the same bits. The checkpoint is the
small google_small one (2 layers, 128 wide, 512 feed-forward), written under Google's names by
tests/tf_bundles.py: each feed-forward kernel spans 64 pages."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from page_tables import assert_forward_reads_no_packed_weight, resident_kb
from tf_bundles import write_checkpoint

from minibert import BertForPreTraining, BertModel
from minibert.loading.names import checkpoint_to_minibert
from minibert.loading.tf_checkpoint import read_index
from minibert.speed.gemm import onednn_available
from minibert.speed.int8 import int8_layers, unavailable_reason
from minibert.speed.packed_linear import PackedLinear

GOOGLE_NAMES = Path(__file__).parent / "data" / "uncased_L-2_H-32_A-2" / "bert_model.ckpt"  # the same 2 layers
IDS = torch.tensor([[101, 7592, 2088, 1010, 2129, 2024, 2017, 102], [101, 2748, 102, 0, 0, 0, 0, 0]])
MASK = (IDS != 0).long()


@pytest.fixture
def google_tf(google_small, tmp_path) -> Path:
    """google_small's weights as Google's release holds them: bert_config.json, vocab.txt and
    bert_model.ckpt.{index,data-00000-of-00001}, kernels (in, out)."""
    source = google_small[0]
    state = BertForPreTraining.from_pretrained(source, gemm="mkl").state_dict()
    names, _ = read_index(GOOGLE_NAMES)
    tensors = {}
    for name, entry in names.items():
        ours = checkpoint_to_minibert(name) if entry is not None else None
        if ours is None:  # the optimizer slots and global_step
            continue
        tensor = state[ours if ours.startswith(("mlm_head", "nsp_head")) else "bert." + ours]
        tensors[name] = tensor.t() if name.endswith("/kernel") else tensor
    directory = tmp_path / "google-tf"
    directory.mkdir()
    shutil.copy(source / "config.json", directory / "bert_config.json")
    shutil.copy(source / "vocab.txt", directory / "vocab.txt")
    write_checkpoint(directory / "bert_model.ckpt", tensors)
    return directory


def data_file(directory: Path) -> Path:
    return directory / "bert_model.ckpt.data-00000-of-00001"


def outputs(model) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=IDS, attention_mask=MASK).last_hidden_state


def test_packed_kernels_stay_views_of_the_file_with_their_pages_given_back(google_tf):
    model = BertModel.from_pretrained(google_tf, gemm="onednn")
    if not onednn_available(model):
        pytest.skip("oneDNN cannot run here: nothing is packed, every kernel is laid out")
    packed = [module for module in model.modules() if isinstance(module, PackedLinear)]
    assert len(packed) == 12 and not any(module.weight.is_contiguous() for module in packed)
    unpacked = [p for name, p in model.named_parameters() if "pooler" in name or "embeddings" in name]
    assert all(parameter.is_contiguous() for parameter in unpacked)
    resident = resident_kb(data_file(google_tf))
    edges = 4 * len(dict(model.named_parameters()))
    print(f"after loading: {resident} kB of the TF data file resident (edges: {edges} kB)")
    assert resident <= edges
    assert_forward_reads_no_packed_weight(model, packed)


@pytest.mark.parametrize("gemm", ["onednn", "onednn-fused", "mkl"])
def test_the_same_numbers_as_the_same_weights_in_safetensors(google_tf, google_small, gemm):
    from_tf = BertModel.from_pretrained(google_tf, gemm=gemm)
    if gemm != "mkl" and not onednn_available(from_tf):
        pytest.skip("oneDNN cannot run here: every kernel is laid out, none kept as a view")
    from_safetensors = BertModel.from_pretrained(google_small[0], gemm=gemm)
    expected = outputs(from_safetensors)
    assert torch.equal(outputs(from_tf), expected)
    for name, tensor in from_tf.state_dict().items():
        assert torch.equal(tensor, from_safetensors.state_dict()[name]), name
    from_tf.use_book_modules()  # the book's nn.Linear: every weight laid out afresh first
    from_safetensors.use_book_modules()
    assert all(parameter.is_contiguous() for parameter in from_tf.parameters())
    assert torch.equal(outputs(from_tf), outputs(from_safetensors))
    from_tf.use_book_modules(False)
    assert torch.equal(outputs(from_tf), expected)


def test_training_and_moving_lay_the_kernels_out(google_tf, google_small):
    """A training forward (F.linear, for autograd) lays each packed kernel out before it multiplies:
    the gradients are those of the safetensors model, bit for bit. ``.train()`` and ``.to()`` lay
    them out too (a weight broadcast to other processes must be contiguous)."""
    grads = []
    for source in (google_tf, google_small[0]):
        model = BertModel.from_pretrained(source, gemm="onednn").train()
        torch.manual_seed(0)
        model(input_ids=IDS, attention_mask=MASK).last_hidden_state.square().sum().backward()
        assert all(parameter.is_contiguous() for parameter in model.parameters())
        grads.append({name: p.grad for name, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 30
    for name, grad in grads[0].items():
        assert torch.equal(grad, grads[1][name]), name
    assert all(parameter.is_contiguous() for parameter in BertModel.from_pretrained(google_tf).train().parameters())
    moved = BertModel.from_pretrained(google_tf, gemm="onednn").to(torch.float64)
    assert all(parameter.is_contiguous() for parameter in moved.parameters())
    twin = BertModel.from_pretrained(google_small[0], gemm="onednn").to(torch.float64)
    assert torch.equal(outputs(moved), outputs(twin))


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"int8 cannot run here: {unavailable_reason()}")
def test_int8_quantizes_the_kernels_from_the_file_as_from_safetensors(google_tf, google_small):
    """int8 quantizes each kernel straight from its transposed view (per output channel: the same
    scales and the same int8 values), so the int8 model is the safetensors one's, bit for bit."""
    from_tf = BertModel.from_pretrained(google_tf, dtype="int8")
    resident = resident_kb(data_file(google_tf))
    print(f"int8 after loading: {resident} kB of the TF data file resident")
    assert resident <= 4 * len(dict(from_tf.named_parameters())) + 4 * 12 * 2
    from_safetensors = BertModel.from_pretrained(google_small[0], dtype="int8")
    assert len(int8_layers(from_tf)) == 12
    assert torch.equal(outputs(from_tf), outputs(from_safetensors))


def test_kernels_laid_out_under_inference_mode_are_ordinary_tensors(google_tf, google_small):
    """Laid out inside ``torch.inference_mode()`` (the book's modules asked for there, or a forward
    that falls back to F.linear under bfloat16 autocast), a weight is still an ordinary tensor:
    packable again afterwards, and trainable."""
    model = BertModel.from_pretrained(google_tf, gemm="onednn")
    if not onednn_available(model):
        pytest.skip("oneDNN cannot run here: nothing is packed")
    with torch.inference_mode():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(input_ids=IDS, attention_mask=MASK)
        model.use_book_modules()
    assert not any(parameter.is_inference() for parameter in model.parameters())
    assert all(parameter.is_contiguous() for parameter in model.parameters())
    model.use_book_modules(False)
    packed = [module for module in model.modules() if isinstance(module, PackedLinear)]
    assert len(packed) == 12 and all(module.packed_weight() is not None for module in packed)
    assert torch.equal(outputs(model), outputs(BertModel.from_pretrained(google_small[0], gemm="onednn")))
