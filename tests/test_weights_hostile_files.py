"""Hostile files: work and memory bounded by the real input, never by what a file claims.

Each case breaks one thing in a copy of the real MiniLM checkpoint and expects one short
``CheckpointError`` naming the file and the field (or tensor), at once. Hostile pickles are in
test_weights_hostile_pickles.py, a hub that never answers in test_loading_hub_deadline.py, the
cold start in test_loading_cold_start.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import refused_at_load
from minibert import BertModel, Embedder
from minibert.errors import CheckpointError
from tiny_hub import TINY


@pytest.fixture
def checkpoint(tmp_path, minilm_dir):
    directory = tmp_path / "ckpt"
    directory.mkdir()
    for name in ("config.json", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(minilm_dir / name, directory / name)
    (directory / "model.safetensors").symlink_to(minilm_dir / "model.safetensors")
    return directory


def _edit_config(directory, **changes) -> None:
    path = directory / "config.json"
    values = json.loads(path.read_text())
    values.update(changes)
    path.write_text(json.dumps(values))


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("num_hidden_layers", 1_000_000, "from 1 to 1,024"),
        ("num_hidden_layers", 0, "from 1 to 1,024"),
        ("num_hidden_layers", 6.0, "must be an integer"),
        ("num_hidden_layers", True, "must be an integer"),
        ("hidden_size", -384, "must be an integer"),
        ("vocab_size", "30522", "must be an integer"),
        ("max_position_embeddings", 10**12, "from 1 to 1,048,576"),
        ("layer_norm_eps", -1e-12, "greater than 0"),
        ("layer_norm_eps", "1e-12", "finite number"),
        ("layer_norm_eps", float("nan"), "finite number"),
        ("layer_norm_eps", float("inf"), "finite number"),
        ("hidden_dropout_prob", 1.5, "from 0 to 1"),
        ("attention_probs_dropout_prob", -0.1, "from 0 to 1"),
        ("pad_token_id", 30522, "[0, 30522)"),
        ("pad_token_id", -1, "[0, 30522)"),
        ("num_attention_heads", 5, "not a multiple"),
        ("hidden_act", "x" * 1_000_000, "hidden_act"),
    ],
    ids=lambda value: str(value)[:20],
)
def test_config_values_outside_their_domain_are_refused_at_once(checkpoint, field, value, says):
    _edit_config(checkpoint, **{field: value})
    refused_at_load(checkpoint, "config.json", field, says)


def test_a_huge_value_is_not_copied_into_the_error(checkpoint):
    _edit_config(checkpoint, num_hidden_layers=[1] * 1_000_000)
    message = refused_at_load(checkpoint, "config.json", "num_hidden_layers")
    assert len(message) < 300


@pytest.mark.parametrize(
    ("field", "value", "tensor"),
    [
        ("num_hidden_layers", 7, "encoder.layer.6"),  # the file has 6
        ("num_hidden_layers", 5, "encoder.layer.5"),
        ("hidden_size", 768, "wrong shape"),
        ("vocab_size", 30_000, "word_embeddings"),
        ("intermediate_size", 1024, "intermediate"),
        ("max_position_embeddings", 1024, "position_embeddings"),
    ],
)
def test_config_is_checked_against_the_weights_header_before_the_data_is_read(checkpoint, monkeypatch, field, value,
                                                                             tensor):  # fmt: skip
    import minibert.loading.from_pretrained

    def no_reading(path):
        raise AssertionError("the weights' data was read before the header was checked against config.json")

    monkeypatch.setattr(minibert.loading.from_pretrained, "map_state_dict", no_reading)  # where every format is read
    _edit_config(checkpoint, **{field: value})
    with pytest.raises(CheckpointError) as caught:
        BertModel.from_pretrained(checkpoint)
    assert "config.json" in str(caught.value) and tensor in str(caught.value), caught.value


def _safetensors(path, tensors: dict, data: bytes) -> None:
    header = json.dumps(tensors).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


@pytest.mark.parametrize(
    ("tensors", "data", "says"),
    [
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 12, "4 trailing bytes"),
        ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8, "leaves a gap at byte 0"),
        (
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
            },
            b"\0" * 8,
            "overlaps",
        ),  # fmt: skip
        ({"a": {"dtype": "F32", "shape": [2**40], "data_offsets": [0, 2**42]}}, b"\0" * 8, "does not fit"),
        ({"a": {"dtype": "F32", "shape": [-2, -1], "data_offsets": [0, 8]}}, b"\0" * 8, "whole numbers from 0"),
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "does not fit"),
    ],
)
def test_safetensors_header_is_checked_against_the_file_before_reading(tmp_path, tensors, data, says):
    from minibert.loading.safetensors import read_safetensors, safetensors_shapes

    path = tmp_path / "model.safetensors"
    _safetensors(path, tensors, data)
    for read in (read_safetensors, safetensors_shapes):
        with pytest.raises(CheckpointError, match="model.safetensors") as caught:
            read(path)
        assert says in str(caught.value), caught.value


@pytest.mark.parametrize(
    ("shape", "offsets", "says"),
    [
        ([2**70, 0], [0, 0], "whole numbers from 0 to 2**63 - 1"),  # no element, no byte: every range fits
        ([2**62, 2**62, 0], [0, 0], "multiply past 2**63"),  # torch: "Storage size calculation overflowed"
        ([2**61, 2], [0, 8], "multiply past 2**63"),
        ([62.9], [0, 248], "whole numbers"),  # int() took it as 62
        (["62"], [0, 248], "whole numbers"),
        ([True], [0, 4], "whole numbers"),
        ([1], [0.0, 4.0], "whole numbers"),
        (7, [0, 4], "whole numbers"),
    ],
)
def test_a_shape_that_is_not_whole_numbers_or_overflows_is_refused_as_the_library_refuses_it(tmp_path, shape, offsets,
                                                                                            says):  # fmt: skip
    """A shape the safetensors library refuses (a float, a string, a bool, dimensions whose product
    overflows 64 bits even when one is 0) escaped as torch's TypeError or RuntimeError, with C++
    frames and no file named, or was read as another shape (62.9 as 62). Now one CheckpointError
    naming the file and the tensor, from every reader and from the command."""
    from safetensors import SafetensorError, safe_open

    from helpers import run_minibert
    from minibert.loading.safetensors import map_safetensors, read_safetensors, safetensors_shapes

    directory = tmp_path / "model"
    shutil.copytree(TINY, directory)
    weights = directory / "model.safetensors"
    raw = weights.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header, data = json.loads(raw[8 : 8 + size]), raw[8 + size :]
    end = len(data) + int(offsets[1])
    header["extra"] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data) + offsets[0], end]}
    header["extra"]["data_offsets"] = [type(offsets[0])(len(data) + offsets[0]), type(offsets[1])(end)]
    _safetensors(weights, header, data + b"\0" * int(offsets[1]))
    with pytest.raises(SafetensorError):  # the reference refuses the file
        with safe_open(str(weights), "pt") as handle:
            handle.get_tensor("extra")
    for read in (read_safetensors, safetensors_shapes, map_safetensors):
        with pytest.raises(CheckpointError, match="model.safetensors: tensor extra") as caught:
            read(weights)
        assert says in str(caught.value), caught.value
    refused_at_load(directory, "model.safetensors: tensor extra", says)
    result = run_minibert("embed", "hello", "--model", str(directory))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "tensor extra" in result.stderr and "frame #" not in result.stderr, result.stderr


def _with_extra(tmp_path, name: str, tensor: torch.Tensor):
    """A copy of the tiny checkpoint with one more tensor, saved by the safetensors library."""
    from safetensors.torch import load_file, save_file

    directory = tmp_path / "model"
    shutil.copytree(TINY, directory)
    state = load_file(str(directory / "model.safetensors"))
    save_file({**state, name: tensor}, str(directory / "model.safetensors"))
    return directory


@pytest.mark.parametrize(
    "dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.uint32, torch.uint64]
)
def test_an_unused_tensor_of_a_dtype_minibert_does_not_compute_from_is_ignored_as_in_transformers(
    tmp_path, tiny_tensors_and_output, dtype
):
    """A valid file with a tensor the model does not use (a float8 scale, an unsigned count) was
    "truncated or corrupt — download it again". transformers loads the file and reports the tensor
    unexpected; minibert loads it too, with its usual warning, and computes the same numbers."""
    transformers = pytest.importorskip("transformers")
    _, ids, expected = tiny_tensors_and_output
    directory = _with_extra(tmp_path, "extra.scale", torch.zeros(4, dtype=torch.float32).to(dtype))
    reference = transformers.BertModel.from_pretrained(directory)  # loads: extra.scale is unexpected
    with pytest.warns(UserWarning, match="ignoring 1 tensors minibert does not use: extra.scale"):
        model = BertModel.from_pretrained(directory)
    with torch.no_grad():
        got = model(ids, attention_mask=(ids != 0).long()).last_hidden_state
        theirs = reference(ids, attention_mask=(ids != 0).long()).last_hidden_state
    assert torch.equal(got, expected), (got - expected).abs().max()
    assert (got - theirs).abs().max() < 1e-5, (got - theirs).abs().max()
    with pytest.warns(UserWarning, match="ignoring 1"):  # the first floating-point tensor is not the float8 one
        model = BertModel.from_pretrained(directory, dtype="auto")
    assert model.embeddings.word_embeddings.weight.dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.uint32])
def test_a_weight_in_a_dtype_minibert_does_not_compute_from_is_refused_naming_it(tmp_path, dtype):
    """A float8 word-embedding matrix (a quantized model's, meant to be scaled) is refused by dtype,
    not cast as it is, and not called corrupt."""
    from safetensors.torch import load_file, save_file

    directory = tmp_path / "model"
    shutil.copytree(TINY, directory)
    state = load_file(str(directory / "model.safetensors"))
    name = next(name for name in state if name.endswith("word_embeddings.weight"))
    state[name] = state[name].to(dtype) if dtype.is_floating_point else state[name].view(dtype)
    save_file(state, str(directory / "model.safetensors"))
    with pytest.raises(CheckpointError) as caught:  # the strict loader's list of what does not fit
        BertModel.from_pretrained(directory)
    message = str(caught.value)
    assert (f"tensors of a dtype minibert does not compute from (1): {name} of dtype "
            f"{str(dtype).removeprefix('torch.')} (it reads a weight from float32") in message, message  # fmt: skip
    assert "corrupt" not in message and "wrong shape" not in message, message


@pytest.mark.parametrize(("code", "dtype"), [("C64", torch.complex64), ("F8_E8M0", torch.float8_e8m0fnu)])
def test_a_dtype_transformers_does_not_read_either_is_named(tmp_path, code, dtype):
    """Dtypes of the format that transformers 5 does not load either ("unknown dtype"): said by
    name, not "truncated or corrupt"."""
    transformers = pytest.importorskip("transformers")
    directory = _with_extra(tmp_path, "extra.scale", torch.zeros(4).to(dtype))
    with pytest.raises(ValueError, match=f"unknown dtype {code}"):
        transformers.BertModel.from_pretrained(directory)
    message = refused_at_load(directory, f"tensor extra.scale has dtype {code}, which minibert does not read")
    assert "corrupt" not in message, message


@pytest.mark.parametrize("code", [["F32"], {"F32": 1}, 32, None], ids=["list", "object", "number", "null"])
def test_a_dtype_that_is_not_a_string_is_a_corrupt_header(tmp_path, code):
    """A header's dtype that is no string (a list, an object: unhashable) is a corrupt file, never a
    raw TypeError from the dtype table's lookup."""
    from minibert.loading.safetensors import read_safetensors

    path = tmp_path / "model.safetensors"
    _safetensors(path, {"a": {"dtype": code, "shape": [1], "data_offsets": [0, 4]}}, struct.pack("<f", 1.5))
    with pytest.raises(CheckpointError, match="tensor a has an unreadable entry"):
        read_safetensors(path)


def test_a_well_formed_safetensors_file_reads(tmp_path):
    from minibert.loading.safetensors import read_safetensors

    path = tmp_path / "model.safetensors"
    _safetensors(path, {"b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
                        "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
                 struct.pack("<ff", 1.5, -2.0))  # fmt: skip
    tensors = read_safetensors(path)
    assert tensors["a"].tolist() == [1.5] and tensors["b"].tolist() == [-2.0]


def test_a_tokenizer_longer_than_the_model_vocabulary_is_refused_at_load(checkpoint):
    with (checkpoint / "vocab.txt").open("a", encoding="utf-8") as handle:
        handle.write("".join(f"extra{i}\n" for i in range(10)))
    with pytest.raises(CheckpointError, match=r"ids up to 30,531 but the model's vocab_size is 30,522"):
        Embedder.from_pretrained(checkpoint)


def test_a_tokenizer_shorter_than_the_model_vocabulary_is_fine(checkpoint):
    lines = (checkpoint / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (checkpoint / "vocab.txt").write_text("\n".join(lines[:-100]) + "\n", encoding="utf-8")
    assert Embedder.from_pretrained(checkpoint).embed("hello world").shape == (384,)


# ----------------------------------------------------------------------------- a name that is not a file


@pytest.fixture
def sentence_model(tmp_path, minilm_dir):
    """A copy of all-MiniLM-L6-v2 with its recipe (mean pooling, then Normalize); the weights linked."""
    directory = tmp_path / "minilm"
    shutil.copytree(minilm_dir, directory, ignore=shutil.ignore_patterns("model.safetensors", "README.md"))
    (directory / "model.safetensors").symlink_to(minilm_dir / "model.safetensors")
    return directory


def _replace(path: Path, kind: str) -> None:
    path.unlink()
    if kind == "a directory":
        path.mkdir()
    elif kind == "a FIFO (named pipe)":
        os.mkfifo(path)  # opening it would wait for a writer: only stat may look at it
    else:
        path.symlink_to("/dev/zero")


KINDS = ["a directory", "a FIFO (named pipe)", "a link to /dev/zero, a character device"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["modules.json", "tokenizer_config.json", "1_Pooling/config.json", "config.json"])
def test_a_name_that_is_there_but_not_a_file_is_refused_saying_what_it_is(sentence_model, name, kind):
    """An optional file (modules.json, tokenizer_config.json) that is there but is not a regular
    file was taken as absent: all-MiniLM embedded without its Normalize step (norm 5.7, not 1), or
    with the casing guessed. A required one was "not found". Now it is named for what it is, at once."""
    _replace(sentence_model / name, kind)
    started = time.perf_counter()
    with pytest.raises(CheckpointError) as caught:
        Embedder.from_pretrained(sentence_model)
    assert time.perf_counter() - started < 5, "a FIFO must not be opened"
    assert str(caught.value) == f"{name} in the directory {sentence_model} is {kind}, not a regular file"


def test_sentence_transformers_refuses_a_modules_json_directory_too(sentence_model):
    from sentence_transformers import SentenceTransformer

    _replace(sentence_model / "modules.json", "a directory")
    with pytest.raises(IsADirectoryError, match="modules.json"):
        SentenceTransformer(str(sentence_model), device="cpu")


def test_weights_that_are_a_fifo_are_not_passed_over_for_the_bin_beside_them(sentence_model, tiny_tensors_and_output):
    """model.safetensors as a FIFO gave "has config.json but no weights", or with a
    pytorch_model.bin beside it loaded the .bin silently; a shard named by the index likewise."""
    _replace(sentence_model / "model.safetensors", "a FIFO (named pipe)")
    message = f"model.safetensors in the directory {sentence_model} is a FIFO (named pipe), not a regular file"
    with pytest.raises(CheckpointError, match=re.escape(message)):
        BertModel.from_pretrained(sentence_model)
    torch.save(tiny_tensors_and_output[0], sentence_model / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=re.escape(message)):
        BertModel.from_pretrained(sentence_model)
    (sentence_model / "model.safetensors").unlink()
    (sentence_model / "pytorch_model.bin").unlink()
    shard = "model-00001-of-00001.safetensors"
    index = {"metadata": {}, "weight_map": {"embeddings.word_embeddings.weight": shard}}
    (sentence_model / "model.safetensors.index.json").write_text(json.dumps(index))
    os.mkfifo(sentence_model / shard)
    with pytest.raises(CheckpointError, match=re.escape(f"{shard} in the directory {sentence_model} is a FIFO")):
        BertModel.from_pretrained(sentence_model)


def test_a_dangling_link_is_absent_as_in_sentence_transformers(sentence_model):
    """A link to nothing is absent for sentence-transformers (os.path.exists), so minibert too:
    without modules.json both embed with mean pooling and no Normalize."""
    from sentence_transformers import SentenceTransformer

    (sentence_model / "modules.json").unlink()
    (sentence_model / "modules.json").symlink_to(sentence_model / "nowhere.json")
    expected = SentenceTransformer(str(sentence_model), device="cpu").encode(["hello world"])[0]
    actual = Embedder.from_pretrained(sentence_model).embed("hello world")
    assert abs(float(np.linalg.norm(expected)) - 1) > 0.1  # no Normalize, in both
    assert np.abs(actual - expected).max() < 1e-5, np.abs(actual - expected).max()
