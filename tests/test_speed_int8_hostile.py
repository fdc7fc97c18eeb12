"""dtype="int8" attacked as a hostile user would (issue 45's own hostile pass): every case ends in a
clear error of a documented type naming what is wrong (QuantizationError, ValueError, a usage error
on the command line), or in the right behaviour. Here: the dtype's spellings, training calls,
moving, casting and copying, book modules and saving, the measurement cache. Inputs, checkpoints
and the command line are in test_speed_int8_hostile_inputs.py, broken weights in
test_speed_int8_hostile_weights.py. Small random checkpoints (int8_checkpoints.py).
"""

from __future__ import annotations

import copy
import io
import json
import os
import pickle
import shutil

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from helpers import assert_close, run_minibert
from int8_checkpoints import IDS, saved
from minibert import (
    BertForSequenceClassification,
    BertModel,  # fmt: skip
)
from minibert.errors import QuantizationError
from minibert.speed.int8 import Int8Linear, int8_layers
from minibert.speed.int8_twin import float32_twin
from minibert.speed.packed_linear import AppliedBy

pytestmark = pytest.mark.usefixtures("int8_measured_faster")  # a fresh measurement cache per test, int8 faster


# --- dtype spellings ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["INT8", "int 8", "qint8", " int8", "int9", 8, "int4"])
def test_a_misspelled_dtype_is_a_value_error_naming_int8_and_the_value(tiny_dir, dtype):
    with pytest.raises(ValueError, match=rf"dtype must be one of .*'int8'.*got {repr(dtype)}"):
        BertModel.from_pretrained(tiny_dir, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.int8, torch.qint8])
def test_torch_int8_dtypes_mean_int8_layers(tiny_dir, dtype):
    """Before: torch.qint8 failed deep inside torch ("empty_strided not supported on quantized tensors")."""
    assert len(int8_layers(BertModel.from_pretrained(tiny_dir, dtype=dtype))) == 12


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.bool, torch.quint8])
def test_an_integer_torch_dtype_is_refused_by_name(tiny_dir, dtype):
    """Before: a RuntimeError from load_state_dict about copying a parameter."""
    with pytest.raises(ValueError, match=rf"dtype {dtype} cannot hold a model's weights.*dtype='int8'"):
        BertModel.from_pretrained(tiny_dir, dtype=dtype)


def test_dtype_none_is_float32_without_int8(tiny_dir):
    model = BertModel.from_pretrained(tiny_dir, dtype=None)
    assert not int8_layers(model) and model.dtype == torch.float32


# --- training calls ------------------------------------------------------------------------------------


def test_train_mode_and_backward_is_one_clear_error(tiny_dir):
    model = BertModel.from_pretrained(tiny_dir, dtype="int8").train()
    with pytest.raises(QuantizationError, match="backward pass reached a layer loaded in int8"):
        model(IDS).last_hidden_state.sum().backward()


def test_requires_grad_then_backward_is_one_clear_error(tiny_dir):
    model = BertModel.from_pretrained(tiny_dir, dtype="int8").requires_grad_(True)
    with pytest.raises(QuantizationError, match="train or fine-tune the float32 model"):
        model(IDS).last_hidden_state.sum().backward()


def test_an_optimizer_step_on_a_classifier_head_in_int8_is_refused(tiny_dir):
    model = BertForSequenceClassification.from_pretrained(tiny_dir, dtype="int8", new_heads=True, num_labels=2)
    loss = model(IDS, labels=torch.tensor([1])).loss
    with pytest.raises(QuantizationError, match="int8"):
        loss.backward()


def test_book_modules_of_an_int8_model_train_in_float32(tiny_dir):
    """The way out the error names: the checkpoint's float32 layers back, and a backward pass runs."""
    model = BertModel.from_pretrained(tiny_dir, dtype="int8").use_book_modules().train()
    model(IDS).last_hidden_state.sum().backward()
    assert model.layers[0].attention.query.weight.grad is not None


@pytest.mark.parametrize("update", ["an optimizer step", "a write through .data", "two rows swapped through .data"])
def test_an_int8_model_trained_in_its_book_modules_does_not_go_back_to_int8(tiny_dir, tmp_path, update):
    """use_book_modules(False) put back the int8 layers of the weights as loaded beside the trained
    LayerNorms and embeddings, a mix that never existed (0.25 from the trained model), and
    save_pretrained wrote that mix. Now it is refused, the model keeps its float32 modules, and what
    it saves is the trained model; untrained, the way back still works. Two rows swapped keep every
    value and their sum, which the check once compared: it compares the bytes in order (a CRC)."""
    model = BertModel.from_pretrained(tiny_dir, dtype="int8")
    with torch.no_grad():
        int8_output = model(IDS).last_hidden_state
    assert torch.equal(model.use_book_modules().use_book_modules(False)(IDS).last_hidden_state, int8_output)
    model.use_book_modules().train()
    if update == "an optimizer step":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(IDS).last_hidden_state[0, 0, 0].backward()
        optimizer.step()
    elif update == "a write through .data":
        model.layers[0].attention.query.weight.data.mul_(0.5)
    else:
        weight = model.layers[0].attention.query.weight.data
        weight[[0, 1]] = weight[[1, 0]].clone()
    model.eval()
    with torch.no_grad():
        trained = model(IDS).last_hidden_state
    with pytest.raises(QuantizationError, match=r"float32 weights changed since use_book_modules\(\).*save_pretrained"):
        model.use_book_modules(False)
    assert model.book_modules and not int8_layers(model)
    model.save_pretrained(tmp_path / "trained")
    with torch.no_grad():
        saved = BertModel.from_pretrained(tmp_path / "trained", gemm="mkl")(IDS).last_hidden_state
    assert_close(saved, trained, "the trained model saved and loaded", 1e-5)


def _saved_and_loaded(model):
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


COPIES = {"pickle": lambda model: pickle.loads(pickle.dumps(model)), "deepcopy": copy.deepcopy,
          "torch.save, torch.load": _saved_and_loaded,
          "its own state dict loaded": lambda model: model.load_state_dict(model.state_dict()) and model}  # fmt: skip


@pytest.mark.parametrize("copy_of", COPIES.values(), ids=COPIES)
def test_an_identical_copy_of_an_int8_model_in_its_book_modules_goes_back_to_int8(tiny_dir, copy_of):
    """The check that the float32 weights did not change since use_book_modules() read each tensor's
    version counter, which a copy starts again (pickle, torch.load) and load_state_dict bumps: the same
    bytes were refused as "72 tensors changed" on MiniLM. It compares their content now: the copy goes
    back to int8 and computes what the int8 model computed, bit for bit."""
    model = BertModel.from_pretrained(tiny_dir, dtype="int8")
    with torch.inference_mode():
        int8_output = model(IDS).last_hidden_state
    copied = copy_of(model.use_book_modules())
    with torch.inference_mode():
        assert torch.equal(copied.use_book_modules(False)(IDS).last_hidden_state, int8_output)
    assert int8_layers(copied) and not copied.book_modules


def test_an_int8_model_whose_head_alone_was_trained_goes_back_to_int8(tmp_path):
    """Only the int8 projections can be out of date: a classifier (or LayerNorm) trained in the book
    modules beside frozen projections goes back to int8, its training kept."""
    directory = saved(BertModel, tmp_path / "encoder")
    model = BertForSequenceClassification.from_pretrained(directory, dtype="int8", new_heads=True, num_labels=2)
    model.use_book_modules()
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name.startswith("classifier."))
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    model(IDS, labels=torch.tensor([1])).loss.backward()
    optimizer.step()
    with torch.no_grad():
        book = model(IDS).logits
        back = model.use_book_modules(False)(IDS).logits
    assert int8_layers(model) and not model.book_modules
    assert float((back - book).abs().max()) < 0.05  # int8's error only (the head's step moved them by more)


@pytest.mark.parametrize("command", [["pretrain", "--data", "d", "--output", "o", "--steps", "1", "--batch-size", "1",
                                      "--init", "m"], ["finetune", "--model", "m", "--train", "t"]])  # fmt: skip
def test_training_commands_take_no_dtype_int8(command):
    """Training runs float32 (or bf16 autocast): an int8 model cannot be trained, so the flag is not there."""
    result = run_minibert(*command, "--dtype", "int8")
    assert result.returncode == 2 and "unrecognized arguments: --dtype int8" in result.stderr, result.stderr


# --- moving, casting, copying ----------------------------------------------------------------------------


@pytest.mark.parametrize("cast", [lambda m: m.to(torch.bfloat16), lambda m: m.half(), lambda m: m.double()],
                         ids=["bf16", "half", "double"])  # fmt: skip
def test_casting_an_int8_model_after_loading_is_a_clear_error(tiny_dir, cast):
    """Before: "expected scalar type Float but found BFloat16" from FBGEMM, naming no layer."""
    model = cast(BertModel.from_pretrained(tiny_dir, dtype="int8"))
    with pytest.raises(QuantizationError, match=r"int8 layer \(64->64\) got a (bfloat16|float16|float64) input"):
        model(IDS)


def test_moving_an_int8_model_off_the_cpu_is_a_clear_error(int8_model):
    """Before: NotImplementedError "could not find the fake impl" naming a caffe2 module."""
    layer = int8_model.layers[0].attention.query
    with pytest.raises(QuantizationError, match="input on meta: a model loaded with dtype='int8' runs .* on the CPU"):
        layer(torch.zeros(1, 4, 64, device="meta"))


def test_loading_onto_the_meta_device_in_int8_is_refused(tiny_dir):
    with pytest.raises(QuantizationError, match="runs on the CPU .*asked for meta"):  # before anything is read
        BertModel.from_pretrained(tiny_dir, dtype="int8", device="meta")


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))], ids=["deepcopy", "pickle"])
def test_a_copied_int8_model_gives_the_same_numbers(int8_model, clone):
    model = int8_model
    with torch.inference_mode():
        assert torch.equal(clone(model)(IDS).last_hidden_state, model(IDS).last_hidden_state)


def test_onednn_fused_then_int8_puts_the_activation_back(tiny_dir, int8_model):
    from minibert.speed.int8 import quantize

    model = BertModel.from_pretrained(tiny_dir, gemm="onednn-fused")
    quantize(model)  # (from_pretrained refuses gemm= with dtype="int8": int8 replaces the layers it picks for)
    feed_forward = model.layers[0].feed_forward
    assert isinstance(feed_forward.intermediate, Int8Linear) and not isinstance(feed_forward.activation, AppliedBy)
    with torch.inference_mode():
        assert torch.equal(model(IDS).last_hidden_state, int8_model(IDS).last_hidden_state)


# --- book modules, saving, the checkpoint file ----------------------------------------------------------


def test_book_modules_twice_and_back_twice(tiny_dir):
    model = BertModel.from_pretrained(tiny_dir, dtype="int8")
    model.use_book_modules().use_book_modules()
    assert type(model.layers[0].attention.query) is nn.Linear
    model.use_book_modules(False).use_book_modules(False)
    assert isinstance(model.layers[0].attention.query, Int8Linear) and model.gemm_backend == "int8"


@pytest.mark.parametrize("change", ["rewritten", "removed"])
def test_book_modules_refuse_a_checkpoint_changed_since_loading(tmp_path, change):
    """Before: the float32 weights were read from whatever file now sat at the path (another model's)."""
    directory = saved(BertModel, tmp_path / "model")
    model = BertModel.from_pretrained(directory, dtype="int8")
    if change == "rewritten":
        saved(BertModel, directory, seed=1)
    else:
        shutil.rmtree(directory)
    with pytest.raises(QuantizationError, match=r"model\.safetensors changed \(or was removed\) since this model"):
        model.use_book_modules()
    with pytest.raises(QuantizationError, match="load the model again"):
        model.save_pretrained(tmp_path / "saved")


def test_saved_then_reloaded_in_int8_is_the_same_model(int8_model, tmp_path):
    first = int8_model
    first.save_pretrained(tmp_path / "saved")
    again = BertModel.from_pretrained(tmp_path / "saved", dtype="int8")
    with torch.inference_mode():
        assert torch.equal(first(IDS).last_hidden_state, again(IDS).last_hidden_state)


def test_an_int8_model_loaded_with_config_fields_saves_them(tiny_dir, tmp_path):
    """The float32 twin that save_pretrained writes is built with the fields the int8 model was
    (from_pretrained(path, hidden_dropout_prob=..., layer_norm_eps=...)), and config.json records them."""
    model = BertModel.from_pretrained(tiny_dir, dtype="int8", hidden_dropout_prob=0.3, layer_norm_eps=1e-6)
    twin = float32_twin(model)
    assert {module.eps for module in twin.modules() if isinstance(module, torch.nn.LayerNorm)} == {1e-6}
    assert {module.p for module in twin.modules() if isinstance(module, torch.nn.Dropout)} >= {0.3}
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert (saved["hidden_dropout_prob"], saved["layer_norm_eps"]) == (0.3, 1e-6)


def test_an_int8_model_without_the_record_of_its_files_is_refused_for_book_modules(tiny_dir):
    """The twin is read from the files recorded at load (int8_twin.Int8Source), not from the name."""
    model = BertModel.from_pretrained(tiny_dir, dtype="int8")
    del model.int8_source
    with pytest.raises(QuantizationError, match=r"does not know the files it was loaded from \(int8_source"):
        model.use_book_modules()


# --- the measurement cache --------------------------------------------------------------------------------


def test_a_cached_pass_is_not_trusted_for_a_file_replaced_with_the_same_size_and_time(tmp_path):
    """Before: the cache key was path, size and mtime; a file replaced by another model of the same
    shape, its mtime set back (cp -p, rsync -t, a restored backup), took the first file's verdict."""
    from test_speed_int8 import outlier_checkpoint

    good = outlier_checkpoint(tmp_path / "good", 1.0)
    assert BertModel.from_pretrained(good, dtype="int8").int8_check.reason == "measured"
    bad = outlier_checkpoint(tmp_path / "bad", 1000.0)
    weights = good / "model.safetensors"
    stat = weights.stat()
    shutil.copyfile(bad / "model.safetensors", weights)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert weights.stat().st_size == stat.st_size
    with pytest.raises(QuantizationError, match="refused for dtype='int8'"):
        BertModel.from_pretrained(good, dtype="int8")


@pytest.mark.parametrize("content", [b"{garbage", b"[1, 2]", b'{"int8 vs float32": "passes"}', b"\xff\xfe\x00"])
def test_a_damaged_cache_file_means_measuring_again(tiny_dir, tmp_path, monkeypatch, content):
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / "gemm.json").write_bytes(content)
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "damaged"))
    assert BertModel.from_pretrained(tiny_dir, dtype="int8").int8_check.reason == "measured"


@pytest.mark.slow
def test_a_cache_dir_that_is_a_file_means_measuring_every_time(tiny_dir, tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("not a folder")
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "a_file"))
    assert BertModel.from_pretrained(tiny_dir, dtype="int8").int8_check.reason == "measured"
    assert BertModel.from_pretrained(tiny_dir, dtype="int8").int8_check.reason == "measured"
    assert (tmp_path / "a_file").read_text() == "not a folder"


def test_a_forged_passing_entry_for_the_same_file_is_what_the_floor_reads(tmp_path):
    """A verdict forged with a cosine below the floor (the cache's number is what is compared) refuses."""
    import json

    from minibert.speed.int8_check import _check_key, calibration_batch

    directory = saved(BertModel, tmp_path / "model")
    model = BertModel.from_pretrained(directory)
    key = _check_key(directory / "model.safetensors", "fbgemm", model.config, calibration_batch(model))  # own_cache:
    # FBGEMM measured fastest
    cache = tmp_path / "cache" / "gemm.json"  # (loading in float32 measured the GEMM choice into it)
    entries = json.loads(cache.read_text()) if cache.exists() else {}
    cache.parent.mkdir(exist_ok=True)
    cache.write_text(json.dumps({**entries, key: {"int8_mean_cosine": 0.5, "int8_worst_cosine": 0.4, "texts": 8}}))
    with pytest.raises(QuantizationError, match=r"cosine of only 0\.400000"):
        BertModel.from_pretrained(directory, dtype="int8")


def test_a_config_changed_beside_the_same_weights_means_measuring_again(tmp_path):
    """The verdict was keyed by the weights file alone, so a config.json changed beside it (hub
    revisions that change only the config share one weights blob) reused a pass measured under the
    old config: a model int8 breaks under the new one (cosine 0.67) loaded. The config is in the key."""
    import json

    directory = saved(BertModel, tmp_path / "model")
    assert BertModel.from_pretrained(directory, dtype="int8").int8_check.reason == "measured"
    assert BertModel.from_pretrained(directory, dtype="int8").int8_check.reason == "cached"
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(dict(config, hidden_act="relu")))
    assert BertModel.from_pretrained(directory, dtype="int8").int8_check.reason == "measured"


def test_a_replaced_shard_means_measuring_again(tmp_path):
    """A sharded checkpoint's verdict is keyed by every shard, not the index alone: a shard written
    anew (another inode) is another checkpoint, measured again, and its float32 twin is refused."""
    import json

    from safetensors.torch import save_file

    directory = saved(BertModel, tmp_path / "model")
    state = load_file(directory / "model.safetensors")
    names = sorted(state)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2 :]}  # fmt: skip
    for shard, shard_names in halves.items():
        save_file({name: state[name] for name in shard_names}, directory / shard, metadata={"format": "pt"})
    weight_map = {name: shard for shard, shard_names in halves.items() for name in shard_names}
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (directory / "model.safetensors").unlink()
    loaded = BertModel.from_pretrained(directory, dtype="int8")
    assert loaded.int8_check.reason == "measured"
    assert BertModel.from_pretrained(directory, dtype="int8").int8_check.reason == "cached"
    second = directory / "model-00002-of-00002.safetensors"
    replacement = directory / "replacement.safetensors"
    replacement.write_bytes(second.read_bytes())
    os.replace(replacement, second)  # the same bytes, another file
    assert BertModel.from_pretrained(directory, dtype="int8").int8_check.reason == "measured"
    with pytest.raises(QuantizationError, match="changed .* since this model was loaded in int8"):
        float32_twin(loaded)
