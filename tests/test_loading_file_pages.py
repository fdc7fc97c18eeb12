"""A loaded model holds each weight once (loading/file_pages.py): the .safetensors file (or the
pytorch_model.bin, mapped by torch.load) is mapped, not copied; a projection packed into oneDNN's
layout, or made int8, gives its float32 pages back, and so do the embedding tables; what reads a
weight later gets the file's bytes back.

Residency is read from the kernel, not inferred: /proc/self/smaps gives each mapping's resident
kilobytes, and the mapping of the weights file is found by its path. A page the model needs (a
LayerNorm, a bias) may be resident; a packed projection's pages must not be, and the test says
how many kilobytes it found. The small checkpoint (2 layers, 128 wide, 512 feed-forward) is enough:
the mechanism does not depend on the size, and its projections span whole pages (128 × 512 × 4 B
= 64 pages each)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
from page_tables import assert_forward_reads_no_packed_weight, resident_kb

from minibert import BertForPreTraining, BertModel
from minibert.errors import CheckpointError
from minibert.speed.gemm import onednn_available
from minibert.speed.int8 import int8_layers, unavailable_reason
from minibert.speed.packed_linear import PackedLinear


@pytest.fixture(params=["safetensors", "bin"])
def checkpoint(request, tmp_path) -> Path:
    """A private copy of the small checkpoint, as model.safetensors and as pytorch_model.bin: the
    tests write over it."""
    made = request.getfixturevalue("google_small" if request.param == "safetensors" else "google_small_bin")
    directory = tmp_path / "small"
    shutil.copytree(made[0], directory)
    return directory


def weights(directory: Path) -> Path:
    found = [directory / name for name in ("model.safetensors", "pytorch_model.bin") if (directory / name).is_file()]
    assert len(found) == 1, found
    return found[0]


def file_tensors(directory: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    path = weights(directory)
    if path.suffix == ".bin":
        return torch.load(path, weights_only=True)
    return load_file(str(path))


def test_packed_projections_and_embeddings_give_their_pages_back(checkpoint):
    model = BertModel.from_pretrained(checkpoint, gemm="onednn")
    if not onednn_available(model):
        pytest.skip("oneDNN cannot run here: nothing is packed")
    packed = [module for module in model.modules() if isinstance(module, PackedLinear)]
    assert len(packed) == 12
    size = os.path.getsize(weights(checkpoint)) // 1024
    resident = resident_kb(weights(checkpoint))
    print(f"after loading: {resident} kB of the {size} kB file resident")
    # Every page was given back after loading: at most one page per tensor's edge stays (two tensors
    # share a page where one ends and the next begins).
    edges = 4 * len(dict(model.named_parameters()))
    assert resident <= edges, f"{resident} kB of the weights file resident after loading (edges: {edges} kB)"
    assert_forward_reads_no_packed_weight(model, packed)


def test_what_reads_a_released_weight_gets_the_files_bytes(checkpoint, tmp_path):
    model = BertForPreTraining.from_pretrained(checkpoint, gemm="onednn")
    stored = file_tensors(checkpoint)
    ours = model.state_dict()
    assert model.bert.layers[0].attention.query.weight.data_ptr() != 0
    from minibert.loading.names import minibert_to_checkpoint

    compared = 0
    for name, tensor in ours.items():
        if not name.startswith("bert."):
            continue
        in_file = "bert." + minibert_to_checkpoint(name.removeprefix("bert."))  # Google's hub names
        in_file = in_file.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        if in_file in stored:
            assert torch.equal(tensor, stored[in_file]), name
            compared += 1
    assert compared == 2 * 16 + 5 + 2, compared  # 16 tensors a layer, 5 embeddings' and 2 the pooler's
    model.save_pretrained(tmp_path / "saved")
    again = BertForPreTraining.from_pretrained(tmp_path / "saved", gemm="mkl")
    for name, tensor in again.state_dict().items():
        assert torch.equal(tensor, ours[name]), name
    book = BertModel.from_pretrained(checkpoint, gemm="onednn").use_book_modules()
    weight = book.layers[1].feed_forward.output.weight
    assert type(book.layers[1].feed_forward.output) is torch.nn.Linear
    assert torch.equal(weight, stored["bert.encoder.layer.1.output.dense.weight"])


def test_a_change_to_a_weight_stays_in_the_process(checkpoint):
    """Copy-on-write: a weight changed in place (as training changes it) never reaches the file."""
    before = weights(checkpoint).read_bytes()
    model = BertModel.from_pretrained(checkpoint)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(2.0)
    assert weights(checkpoint).read_bytes() == before
    stored = file_tensors(checkpoint)
    query = model.layers[0].attention.query.weight
    assert torch.equal(query, 2 * stored["bert.encoder.layer.0.attention.self.query.weight"])


def test_a_file_written_over_in_place_is_refused_and_a_replaced_one_is_not(checkpoint):
    ids = torch.tensor([[101, 7592, 2088, 102]])
    model = BertModel.from_pretrained(checkpoint)
    with torch.inference_mode():
        expected = model(input_ids=ids).last_hidden_state
    path = weights(checkpoint)
    replacement = path.with_name("new" + path.suffix)
    replacement.write_bytes(path.read_bytes()[:-8] + b"\0" * 8)
    os.replace(replacement, path)  # a new file under the old name: the mapping keeps the old one
    with torch.inference_mode():
        assert torch.equal(model(input_ids=ids).last_hidden_state, expected)
    model = BertModel.from_pretrained(checkpoint)
    with open(path, "r+b") as handle:  # in place: the same file, other bytes
        handle.seek(-8, os.SEEK_END)
        handle.write(b"\1" * 8)
    with pytest.raises(CheckpointError, match="was written over while a model loaded from it was in use"):
        model(input_ids=ids)


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"int8 cannot run here: {unavailable_reason()}")
def test_int8_gives_its_float32_pages_back(checkpoint):
    model = BertModel.from_pretrained(checkpoint, dtype="int8")
    assert len(int8_layers(model)) == 12
    resident = resident_kb(weights(checkpoint))
    print(f"int8 after loading: {resident} kB of the weights file resident")
    assert resident <= 4 * len(dict(model.named_parameters())) + 4 * 12 * 2


def test_a_bin_saved_in_the_other_byte_order_keeps_its_swapped_pages(google_small, tmp_path):
    """torch.load swaps a big-endian .bin's bytes in place (a write to the private mapping): those
    pages must not be given back, or they would revert to the file's bytes (NaN and nonsense)."""
    import sys

    from safetensors.torch import load_file

    directory = tmp_path / "big-endian"
    directory.mkdir()
    shutil.copy(google_small[0] / "config.json", directory)
    stored = load_file(str(google_small[0] / "model.safetensors"))
    swapped = {name: torch.from_numpy(tensor.numpy().byteswap().copy()).view(tensor.dtype)
               for name, tensor in stored.items()}  # fmt: skip
    native, sys.byteorder = sys.byteorder, "big"  # as torch.save writes it on a big-endian machine
    try:
        torch.save(swapped, directory / "pytorch_model.bin")
    finally:
        sys.byteorder = native
    expected = BertModel.from_pretrained(google_small[0], gemm="mkl")
    model = BertModel.from_pretrained(directory, gemm="onednn")
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, expected.state_dict()[name]), name


def test_a_new_embedding_table_does_not_stop_the_in_place_check(checkpoint):
    """The check watches every tensor that lay in the file, not only the first: with the word
    embeddings replaced, the packed projections still read the file's pages."""
    model = BertModel.from_pretrained(checkpoint, gemm="onednn")
    if not onednn_available(model):
        pytest.skip("oneDNN cannot run here: nothing is packed")
    old = model.embeddings.word_embeddings
    model.embeddings.word_embeddings = torch.nn.Embedding.from_pretrained(old.weight.detach().clone(), freeze=False)
    del old
    with open(weights(checkpoint), "r+b") as handle:  # in place: the same file, other bytes
        handle.seek(-8, os.SEEK_END)
        handle.write(b"\1" * 8)
    with pytest.raises(CheckpointError, match="was written over while a model loaded from it was in use"):
        model(input_ids=torch.tensor([[101, 7592, 102]]))


@pytest.mark.parametrize("gemm", ["mkl", "onednn"])
def test_a_cast_by_swapping_tensors_works_and_computes_what_a_plain_cast_does(checkpoint, gemm):
    """``torch.__future__.set_swap_module_params_on_conversion(True)`` makes ``.to()`` swap each
    parameter's contents in place (``torch.utils.swap_tensors``), which torch refuses for a tensor
    something holds a weak reference to: the in-place check watches the models, not their tensors.
    The cast model computes exactly what a plain cast of the same model does."""
    ids = torch.tensor([[101, 7592, 2088, 1010, 2003, 102]])
    outputs = {}
    for swap in (False, True):
        model = BertModel.from_pretrained(checkpoint, gemm=gemm)
        with torch.inference_mode():
            model(input_ids=ids)  # the fast path packs its weights first
        torch.__future__.set_swap_module_params_on_conversion(swap)
        try:
            model.to(torch.bfloat16)
        finally:
            torch.__future__.set_swap_module_params_on_conversion(False)
        assert {parameter.dtype for parameter in model.parameters()} == {torch.bfloat16}
        with torch.inference_mode():
            outputs[swap] = model(input_ids=ids).last_hidden_state
    assert outputs[True].dtype == torch.bfloat16
    assert torch.equal(outputs[True], outputs[False]), (outputs[True] - outputs[False]).abs().max()


def test_the_encoder_of_a_loaded_head_model_is_still_checked_without_it(checkpoint):
    """The check watches the loaded model and each BertModel inside: the encoder taken out of a
    pretraining model, which is then dropped, still refuses a file written over in place."""
    import gc

    encoder = BertForPreTraining.from_pretrained(checkpoint).bert
    gc.collect()
    write_over(weights(checkpoint), "same size")
    with pytest.raises(CheckpointError, match=WRITTEN_OVER):
        encoder(input_ids=torch.tensor([[101, 7592, 102]]))


def test_a_mapping_whose_path_is_not_utf8_does_not_stop_a_bin_load(google_small_bin, tmp_path):
    """/proc/self/maps lists every mapping's path as bytes; another one's need not be UTF-8."""
    import mmap

    odd = tmp_path / os.fsdecode(b"caf\xe9.dat")
    odd.write_bytes(bytes(mmap.PAGESIZE))
    with open(odd, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ):
        model = BertModel.from_pretrained(google_small_bin[0])
    assert model.layers[0].attention.query.weight.shape == (128, 128)


def write_over(path: Path, how: str) -> None:
    """Write over ``path`` in place (the same file: a program that opens it for writing, or ``cp``
    onto it): "same size", other numbers in its middle; "cut short", a third of it (``cp`` of a
    smaller file), whose pages past the end would end a process that reads them (SIGBUS)."""
    data = path.read_bytes()
    if how == "same size":
        middle = len(data) // 2
        with open(path, "r+b") as handle:
            handle.seek(middle)
            handle.write(bytes(byte ^ 0x40 for byte in data[middle : middle + 4096]))
    else:
        with open(path, "wb") as handle:  # O_TRUNC, as cp opens its target
            handle.write(data[: len(data) // 3])


WRITTEN_OVER = "was written over while a model loaded from it was in use"


@pytest.mark.parametrize("how", ["same size", "cut short"])
def test_every_read_of_the_weights_is_refused_once_the_file_is_written_over(checkpoint, how, tmp_path):
    """Not only the forward pass: state_dict (and so save_pretrained), the book's modules, moves and
    casts, copies and load_state_dict read every weight from the file's pages, and refuse before
    they read one (no other numbers saved, no SIGBUS; loading/file_pages.py ChecksItsFile). So does
    a forward pass under torch.func.grad, whose wrapped weights the check once took for no file's."""
    import copy

    model = BertForPreTraining.from_pretrained(checkpoint)
    loaded = {name: tensor.clone() for name, tensor in model.state_dict().items()}

    def on_given_weights(weights):  # under torch.func's transforms the weights are wrappers of the file's tensors
        return torch.func.functional_call(model, weights, (torch.tensor([[2, 5, 7, 3]]),)).prediction_logits.sum()

    write_over(weights(checkpoint), how)
    refusals = {
        "state_dict": model.state_dict,
        "bert.state_dict": model.bert.state_dict,
        "save_pretrained": lambda: model.save_pretrained(tmp_path / "saved"),
        "use_book_modules": model.use_book_modules,
        "to(float16)": lambda: model.to(torch.float16),
        "deepcopy": lambda: copy.deepcopy(model),
        "load_state_dict": lambda: model.load_state_dict(loaded),
        "resize_token_embeddings": lambda: model.resize_token_embeddings(model.config.vocab_size + 8),
        "torch.func.grad": lambda: torch.func.grad(on_given_weights)(dict(model.named_parameters())),
    }
    for what, read in refusals.items():
        with pytest.raises(CheckpointError, match=WRITTEN_OVER):
            read()
            pytest.fail(f"{what}: no CheckpointError")
    assert not (tmp_path / "saved" / "model.safetensors").exists()


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"int8 cannot run here: {unavailable_reason()}")
def test_an_int8_model_refuses_to_save_from_a_file_written_over(checkpoint, tmp_path):
    """int8 saves (and gives the book's modules) from float32 weights read from its checkpoint again:
    written over in place, that would be the file's new numbers. Its embeddings still read the mapping."""
    model = BertModel.from_pretrained(checkpoint, dtype="int8")
    write_over(weights(checkpoint), "same size")
    for read in (lambda: model.save_pretrained(tmp_path / "saved"), model.use_book_modules):
        with pytest.raises(CheckpointError, match=WRITTEN_OVER):
            read()
