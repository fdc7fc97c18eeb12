"""dtype="int8" attacked as a hostile user would (issue 45's own hostile pass): every case ends in a
clear error of a documented type naming what is wrong (QuantizationError, ValueError, a usage error
on the command line), or in the right behaviour. Small random checkpoints made here, as
tests/test_speed_int8.py does."""

from __future__ import annotations

import copy
import json
import os
import pickle
import shutil

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from helpers import assert_close, run_minibert
from minibert import (
    BertConfig,
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertModel,  # fmt: skip
)
from minibert.errors import QuantizationError
from minibert.speed import int8_check
from minibert.speed.int8 import Int8Linear, int8_layers, is_int8
from minibert.speed.int8_twin import float32_twin
from minibert.speed.packed_linear import AppliedBy

TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=120)
IDS = torch.tensor([[5, 6, 7, 8]])


def _save(cls, directory, seed=0, **fields):
    torch.manual_seed(seed)
    cls(BertConfig(**{**TINY, **fields})).eval().save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return _save(BertModel, tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def int8_model(tiny_dir, tmp_path_factory):
    """One int8 model for the cases that only run it (loading costs ~2 s on a loaded 2-core machine)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINIBERT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        patch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 2.0})
        return BertModel.from_pretrained(tiny_dir, dtype="int8")


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """A fresh measurement cache per test, and the speed verdict fixed (no timing in these tests)."""
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 2.0})


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


@pytest.mark.parametrize("update", ["an optimizer step", "a write through .data"])
def test_an_int8_model_trained_in_its_book_modules_does_not_go_back_to_int8(tiny_dir, tmp_path, update):
    """use_book_modules(False) put back the int8 layers of the weights as loaded beside the trained
    LayerNorms and embeddings, a mix that never existed (0.25 from the trained model), and
    save_pretrained wrote that mix. Now it is refused, the model keeps its float32 modules, and what
    it saves is the trained model; untrained, the way back still works."""
    model = BertModel.from_pretrained(tiny_dir, dtype="int8")
    with torch.no_grad():
        int8_output = model(IDS).last_hidden_state
    assert torch.equal(model.use_book_modules().use_book_modules(False)(IDS).last_hidden_state, int8_output)
    model.use_book_modules().train()
    if update == "an optimizer step":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(IDS).last_hidden_state[0, 0, 0].backward()
        optimizer.step()
    else:
        model.layers[0].attention.query.weight.data.mul_(0.5)
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


def test_an_int8_model_whose_head_alone_was_trained_goes_back_to_int8(tmp_path):
    """Only the int8 projections can be out of date: a classifier (or LayerNorm) trained in the book
    modules beside frozen projections goes back to int8, its training kept."""
    directory = _save(BertModel, tmp_path / "encoder")
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
    directory = _save(BertModel, tmp_path / "model")
    model = BertModel.from_pretrained(directory, dtype="int8")
    if change == "rewritten":
        _save(BertModel, directory, seed=1)
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

    directory = _save(BertModel, tmp_path / "model")
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

    directory = _save(BertModel, tmp_path / "model")
    assert BertModel.from_pretrained(directory, dtype="int8").int8_check.reason == "measured"
    assert BertModel.from_pretrained(directory, dtype="int8").int8_check.reason == "cached"
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(dict(config, hidden_act="relu")))
    assert BertModel.from_pretrained(directory, dtype="int8").int8_check.reason == "measured"


def test_a_replaced_shard_means_measuring_again(tmp_path):
    """A sharded checkpoint's verdict is keyed by every shard, not the index alone: a shard written
    anew (another inode) is another checkpoint, measured again, and its float32 twin is refused."""
    import json

    from safetensors.torch import load_file, save_file

    directory = _save(BertModel, tmp_path / "model")
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


# --- checkpoints, heads, shapes, inputs ----------------------------------------------------------------------


def test_pytorch_model_bin_in_int8_equals_the_safetensors_file(tiny_dir, int8_model, tmp_path):
    shutil.copy(tiny_dir / "config.json", tmp_path)
    torch.save(load_file(tiny_dir / "model.safetensors"), tmp_path / "pytorch_model.bin")
    with torch.inference_mode():
        assert torch.equal(BertModel.from_pretrained(tmp_path, dtype="int8")(IDS).last_hidden_state,
                           int8_model(IDS).last_hidden_state)  # fmt: skip


def test_googles_tf_checkpoint_loads_in_int8():
    model = BertModel.from_pretrained("tests/data/uncased_L-2_H-32_A-2", dtype="int8")
    assert len(int8_layers(model)) == 12 and model.int8_check.worst_cosine > int8_check.COSINE_FLOOR


@pytest.mark.parametrize("cls", [BertForMaskedLM, BertForSequenceClassification, BertForQuestionAnswering])
def test_heads_stay_float32_around_an_int8_encoder(tmp_path, cls):
    directory = _save(cls, tmp_path / "model")
    model = cls.from_pretrained(directory, dtype="int8")
    assert len(int8_layers(model)) == 12 and all(p.dtype == torch.float32 for p in model.parameters())
    with torch.inference_mode():
        out = model(IDS)
    assert all(torch.isfinite(tensor).all() for tensor in out.to_tuple())


@pytest.mark.slow
def test_the_bundled_model_loads_in_int8():
    model = BertForMaskedLM.from_pretrained("minibert/fortunes-mini", dtype="int8")
    assert model.int8_check.worst_cosine > int8_check.COSINE_FLOOR


def test_tiny_and_odd_hidden_sizes_in_int8(tmp_path):
    directory = _save(BertModel, tmp_path / "odd", hidden_size=32, num_attention_heads=2, intermediate_size=37,
                      num_hidden_layers=1)  # fmt: skip
    model = BertModel.from_pretrained(directory, dtype="int8")
    with torch.inference_mode():
        assert model(IDS).last_hidden_state.shape == (1, 4, 32)


@pytest.mark.parametrize("length", [1, 512])
def test_the_shortest_and_longest_inputs_in_int8(int8_model, length):
    model = int8_model
    with torch.inference_mode():
        assert torch.isfinite(model(torch.randint(5, 120, (2, length))).last_hidden_state).all()


def test_an_input_longer_than_the_positions_is_refused_by_name(int8_model):
    with pytest.raises(ValueError, match="513 tokens is longer than max_position_embeddings=512"):
        int8_model(torch.randint(5, 120, (1, 513)))


def test_an_all_padding_batch_in_int8_is_finite(int8_model):
    model = int8_model
    with torch.inference_mode():
        out = model(torch.zeros(2, 4, dtype=torch.long), attention_mask=torch.zeros(2, 4, dtype=torch.long))
    assert torch.isfinite(out.last_hidden_state).all()


@pytest.mark.parametrize("shape", [(0, 4), (2, 0)])
def test_an_empty_batch_in_int8_is_refused_by_shape(int8_model, shape):
    with pytest.raises(ValueError, match=rf"input_ids has shape \({shape[0]}, {shape[1]}\)"):
        int8_model(torch.zeros(shape, dtype=torch.long))


# --- the command line ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["INT8", "int 8", ""])
def test_a_misspelled_dtype_flag_is_a_usage_error(value):
    result = run_minibert("embed", "x", "--dtype", value)
    assert result.returncode == 2 and "'int8'" in result.stderr, result.stderr


def test_verify_int8_on_a_model_without_a_classifier(tmp_path):
    directory = _save(BertModel, tmp_path / "plain", vocab_size=10)
    (directory / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c",
                                                    "d", "e"]) + "\n")  # fmt: skip
    result = run_minibert("verify", "--dtype", "int8", "--model", str(directory), "--text", "a b", "--text", "c")
    assert result.returncode == 0, result.stderr
    assert "cosine to float32 over 2 texts" in result.stdout and "labels changed" not in result.stdout, result.stdout


def test_verify_int8_on_a_missing_model_is_one_line(tmp_path):
    result = run_minibert("verify", "--dtype", "int8", "--model", str(tmp_path / "nowhere"), "--text", "a")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "nowhere" in result.stderr


def test_a_command_on_a_model_refused_for_int8_says_so_in_one_line(tmp_path):
    from test_speed_int8 import outlier_checkpoint

    directory = outlier_checkpoint(tmp_path / "outliers", 1000.0)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"word{n}" for n in range(115)]
    (directory / "vocab.txt").write_text("\n".join(words) + "\n")
    (directory / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    result = run_minibert("embed", "--model", str(directory), "--dtype", "int8", "word1 word2")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "refused for dtype='int8'" in result.stderr and "load it in float32" in result.stderr, result.stderr


@pytest.fixture(scope="module")
def int8_server(minilm_dir):
    """One `minibert serve --dtype int8` for the bad requests below: each is answered and the server
    keeps serving, so the next request (a good one after each bad one) finds it as a fresh one would."""
    from serve_server import Server

    server = Server(minilm_dir, "--dtype", "int8")
    yield server
    server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("body", [{"input": []}, {"input": [{"text": "a"}]}, {"input": None}, {"input": "x" * 200_000}],
                         ids=["empty", "objects", "null", "huge"])  # fmt: skip
def test_serve_int8_answers_bad_requests_with_a_json_error_and_keeps_serving(int8_server, body):
    httpx = pytest.importorskip("httpx")
    response = httpx.post(f"{int8_server.url}/v1/embeddings", json={"model": "all-MiniLM-L6-v2", **body}, timeout=60)
    assert 400 <= response.status_code < 500 and "error" in response.json(), response.text
    assert "Traceback" not in response.text
    good = httpx.post(f"{int8_server.url}/v1/embeddings", json={"model": "all-MiniLM-L6-v2", "input": ["ok"]},
                      timeout=60)  # fmt: skip
    assert good.status_code == 200, good.text


# --- broken weights (issue 53, item 3) -----------------------------------------------------------------------

BROKEN = {  # a name in the checkpoint, where in it, what is put there
    "inf in a feed-forward weight": ("encoder.layer.0.intermediate.dense.weight", (3, 5), float("inf")),
    "-inf in an output projection": ("encoder.layer.1.output.dense.weight", (0, 0), float("-inf")),
    "NaN in a query weight": ("encoder.layer.0.attention.self.query.weight", (1, 2), float("nan")),
    "NaN in one word's embedding row": ("embeddings.word_embeddings.weight", (7, slice(None)), float("nan")),
    "NaN in a LayerNorm": ("embeddings.LayerNorm.weight", (4,), float("nan")),
    "inf in a bias": ("encoder.layer.1.attention.output.dense.bias", (2,), float("inf")),
    "NaN in the pooler": ("pooler.dense.weight", (0, 1), float("nan")),
    # issue 53's own hostile pass: every kind of tensor the encoder reads, and more than one value
    "NaN in a position's row": ("embeddings.position_embeddings.weight", (3, slice(None)), float("nan")),
    "inf in a segment's row": ("embeddings.token_type_embeddings.weight", (1, 0), float("inf")),
    "-inf in a middle LayerNorm bias": ("encoder.layer.0.attention.output.LayerNorm.bias", (9,), float("-inf")),
    "inf in a key weight": ("encoder.layer.1.attention.self.key.weight", (10, 11), float("inf")),
    "NaN in a value bias": ("encoder.layer.0.attention.self.value.bias", (0,), float("nan")),
    "NaN in a feed-forward bias": ("encoder.layer.1.intermediate.dense.bias", (127,), float("nan")),
    "NaN in the last output LayerNorm": ("encoder.layer.1.output.LayerNorm.weight", (63,), float("nan")),
    "a whole weight of NaN": ("encoder.layer.0.output.dense.weight", (slice(None), slice(None)), float("nan")),
}
COUNTS = {"a whole weight of NaN": 64 * 128}


def _broken(directory, tmp_path, name, where, value):
    from safetensors.torch import save_file

    state = load_file(directory / "model.safetensors")
    state[name] = state[name].clone()
    state[name][where] = value
    target = tmp_path / "broken"
    shutil.copytree(directory, target)
    save_file(state, target / "model.safetensors")
    return target


@pytest.mark.parametrize("case", list(BROKEN))
def test_int8_refuses_a_non_finite_weight_naming_it_and_float32_warns(tiny_dir, tmp_path, case):
    name, where, value = BROKEN[case]
    broken = _broken(tiny_dir, tmp_path, name, where, value)
    count = COUNTS.get(case, 64 if isinstance(where[-1], slice) else 1)
    with pytest.raises(QuantizationError, match=rf"refused for dtype='int8': NaN or infinite weights \(\S*"
                                                rf"{name.split('.')[-2]}\S* holds {count:,} of "):  # fmt: skip
        BertModel.from_pretrained(broken, dtype="int8")
    cache = tmp_path / "cache" / "gemm.json"
    assert not cache.exists() or "nan" not in cache.read_text().lower()  # no verdict kept for it
    with pytest.warns(UserWarning, match=rf"NaN or infinite weights .* holds {count:,} of .*every output that reads"):
        model = BertModel.from_pretrained(broken)
    assert model.dtype == torch.float32  # float32 computes what the checkpoint holds: NaN where it is read


def test_the_command_refuses_an_int8_model_with_broken_weights_in_one_line(tmp_path):
    from pathlib import Path

    broken = _broken(Path("tests/data/tiny_hub"), tmp_path, "bert.encoder.layer.0.intermediate.dense.weight", (3, 5),
                     float("inf"))  # fmt: skip
    result = run_minibert("embed", "hello world", "--model", str(broken), "--dtype", "int8")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "NaN or infinite weights" in result.stderr and "ChooseQuantizationParams" not in result.stderr


def test_a_nan_cosine_is_never_a_pass_nor_kept(monkeypatch):
    nan = float("nan")
    monkeypatch.setattr(int8_check, "read_cache", lambda: {"k": {"int8_mean_cosine": nan, "int8_worst_cosine": nan,
                                                                 "texts": 8}})  # fmt: skip
    assert int8_check._cached_check("k") is None


def test_the_finite_check_is_exact_where_a_sum_overflows():
    """Loading screens each tensor by its sum (speed): a sum that overflows on huge finite weights must
    not make them count as broken, and one NaN or a pair of opposite infinities must."""
    from minibert.loading.from_pretrained import _all_finite

    assert _all_finite(torch.full((4,), 3e38)) and _all_finite(torch.tensor([60000.0, 60000.0]).half())
    for values in ([1.0, float("nan")], [float("inf")], [float("inf"), float("-inf")], [-float("inf"), 2.0]):
        assert not _all_finite(torch.tensor(values)), values


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_a_half_precision_checkpoint_with_an_infinity_is_refused_for_int8(tiny_dir, tmp_path, dtype):
    """float16 holds only up to 65,504: a checkpoint saved in half precision may carry an inf where the
    float32 weight was large. Read in int8 it is refused like any other, by the name in the file."""
    from safetensors.torch import save_file

    state = {name: tensor.to(dtype) for name, tensor in load_file(tiny_dir / "model.safetensors").items()}
    state["encoder.layer.1.intermediate.dense.weight"][0, 0] = float("inf")
    target = tmp_path / "half"
    shutil.copytree(tiny_dir, target)
    save_file(state, target / "model.safetensors")
    with pytest.raises(QuantizationError, match=r"encoder\.layer\.1\.intermediate\.dense\.weight holds 1 of "):
        BertModel.from_pretrained(target, dtype="int8")


def test_a_broken_weight_in_a_pickled_checkpoint_is_refused_for_int8(tiny_dir, tmp_path):
    state = load_file(tiny_dir / "model.safetensors")
    state["encoder.layer.0.attention.self.query.weight"][2, 2] = float("nan")
    target = tmp_path / "bin"
    target.mkdir()
    shutil.copy(tiny_dir / "config.json", target)
    torch.save(state, target / "pytorch_model.bin")
    with pytest.raises(QuantizationError, match=r"query\.weight holds 1 of "):
        BertModel.from_pretrained(target, dtype="int8")


def test_a_broken_classifier_head_is_refused_for_int8_though_the_head_stays_float32(tmp_path):
    """The head of an int8 model is float32, but a NaN there is still a NaN in every answer."""
    from safetensors.torch import save_file

    directory = _save(BertForSequenceClassification, tmp_path / "cls")
    state = load_file(directory / "model.safetensors")
    state["classifier.weight"][1, 4] = float("nan")
    save_file(state, directory / "model.safetensors")
    with pytest.raises(QuantizationError, match=r"classifier\.weight holds 1 of "):
        BertForSequenceClassification.from_pretrained(directory, dtype="int8")
    result = run_minibert("classify", "a text", "--model", str(directory), "--dtype", "int8")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "classifier.weight" in result.stderr and "NaN or infinite weights" in result.stderr


def test_the_embedder_and_verify_refuse_a_broken_weight_for_int8(tiny_dir, tmp_path):
    from minibert import Embedder

    broken = _broken(tiny_dir, tmp_path, "encoder.layer.0.intermediate.dense.weight", (3, 5), float("nan"))
    (broken / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                                                + [f"w{n}" for n in range(115)]) + "\n")  # fmt: skip
    (broken / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    with pytest.raises(QuantizationError, match=r"intermediate\.dense\.weight holds 1 of "):
        Embedder.from_pretrained(broken, dtype="int8")
    result = run_minibert("verify", "--model", str(broken), "--dtype", "int8")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "NaN or infinite weights" in result.stderr


def test_a_cached_pass_does_not_let_a_broken_file_through(tiny_dir, tmp_path):
    """The verdict of the check at load is cached by the file's size and time: a broken file written
    over a good one with the same size and time is still refused (the finite check reads the weights
    every time, before any cached verdict is looked at)."""
    good = _broken(tiny_dir, tmp_path / "good", "encoder.layer.1.output.dense.weight", (1, 1), 0.5)  # (finite)
    BertModel.from_pretrained(good, dtype="int8")  # the verdict is cached
    weights = good / "model.safetensors"
    stat = weights.stat()
    broken = _broken(tiny_dir, tmp_path / "bad", "encoder.layer.1.output.dense.weight", (1, 1), float("nan"))
    shutil.copyfile(broken / "model.safetensors", weights)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert weights.stat().st_size == stat.st_size
    with pytest.raises(QuantizationError, match=r"output\.dense\.weight holds 1 of "):
        BertModel.from_pretrained(good, dtype="int8")


# --- a NaN or an infinity that reaches an int8 projection after loading -----------------------------------

LIBRARIES_HERE = [library for library in int8_check.LIBRARIES if int8_check.library_unavailable(library) is None]


def _int8_layers_of(linear):
    """(an int8 layer of ``linear`` on each library here, the float32 function it stands for): on
    oneDNN also with GELU applied as the product is written, beside the function's own GELU."""
    from minibert.activations import ACTIVATIONS
    from minibert.speed.packed_linear import FUSIBLE, AppliedBy

    layers = [(Int8Linear(linear, library), linear) for library in LIBRARIES_HERE]
    if "onednn" in LIBRARIES_HERE:
        gelu = ACTIVATIONS["gelu"]
        fused, pair = Int8Linear(linear, "onednn", FUSIBLE["gelu"], gelu), nn.Module()
        pair.intermediate, pair.activation = fused, AppliedBy(pair, fused)  # (the post-op applies only in its pair)
        layers.append((fused, lambda x: gelu(linear(x))))
    return layers


def test_an_int8_layer_is_nan_or_infinite_exactly_where_float32_is():
    """Before: FBGEMM's quantizer skipped the NaN when it took the range and rounded it to a number
    (finite outputs, where float32 gives NaN), and oneDNN's raised torch's own "min should be less
    than or equal to max". Now both give the rows float32 gives NaN or infinite as such, and the
    other rows the numbers they get without the bad ones in the call."""
    torch.manual_seed(0)
    linear = nn.Linear(16, 8)
    x = torch.randn(2, 3, 16)
    x[0, 1, 4], x[1, 2, 7], x[1, 0, 2] = float("nan"), float("inf"), -float("inf")
    clean = torch.cat([x[0, [0, 2]], x[1, [1]]])  # the rows without a NaN or an infinity
    for layer, function in _int8_layers_of(linear):
        with torch.inference_mode():
            out, expected = layer(x), function(x)  # (2, 3, 8)
            assert torch.equal(out.isfinite(), expected.isfinite()), (layer, out)
            assert torch.equal(out[0, 1].isnan(), expected[0, 1].isnan())  # a NaN row: NaN throughout
            assert torch.equal(torch.cat([out[0, [0, 2]], out[1, [1]]]), layer(clean))


@pytest.mark.parametrize("library", LIBRARIES_HERE)
def test_a_nan_written_into_an_embedding_after_loading_gives_nan_in_int8_as_in_float32(tiny_dir, monkeypatch,
                                                                                       library):
    """The report's case: the embeddings stay float32 and writable; a NaN in one row reaches the
    int8 projections. float32 gives that text NaN throughout (attention spreads it over its tokens)
    and the other text of the batch its own numbers: so does int8, on either library, the other
    text's vectors as close to float32's as int8 keeps any (the loader's floor)."""
    monkeypatch.setenv("MINIBERT_INT8", library)
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 2.0, "onednn": 2.0})
    models = BertModel.from_pretrained(tiny_dir), BertModel.from_pretrained(tiny_dir, dtype="int8")
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    with torch.inference_mode():
        for model in models:
            model.get_input_embeddings().weight[7, 3] = float("nan")
        exact, approximate = (model(ids).last_hidden_state for model in models)
    assert exact[0].isnan().all() and exact[1].isfinite().all()
    assert torch.equal(approximate.isnan(), exact.isnan())
    assert nn.functional.cosine_similarity(approximate[1], exact[1], dim=-1).min() > int8_check.COSINE_FLOOR


# --- the calibration fits the model ------------------------------------------------------------------------

LETTERS = [chr(code) for code in range(ord("a"), ord("z") + 1)]
PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *LETTERS, *(f"##{letter}" for letter in LETTERS)]


@pytest.mark.parametrize("vocabulary", ["none", "letters", "another model's"])
def test_a_model_that_loads_in_float32_loads_in_int8_whatever_its_positions_and_tokenizer(tmp_path, vocabulary,
                                                                                          caplog):
    """Before: the calibration cut its texts at 128 tokens (and drew 32 random ids without a
    tokenizer) whatever the model's max_position_embeddings, and used a tokenizer whose ids the
    model has no embedding for: a model of 16 positions, or beside another model's vocabulary, was
    refused for int8 with an error about "a sequence of 45 tokens" or "input_ids contains 190" that
    the user never gave. Now the texts are cut to the model's positions, and such a tokenizer is
    passed over for random ids (config.check_vocabulary), as no tokenizer is."""
    import logging

    positions = 512 if vocabulary == "another model's" else 16  # (each case refused for one reason before)
    directory = _save(BertModel, tmp_path / "short", max_position_embeddings=positions)
    others = PIECES[:5] + [f"w{n}" for n in range(150)] + PIECES[5:]  # the letters at ids 155 to 206
    pieces = {"none": [], "letters": PIECES, "another model's": others}[vocabulary]
    if pieces:  # letters only: each word a piece a letter, every calibration text longer than 16 tokens
        (directory / "vocab.txt").write_text("\n".join(pieces) + "\n")
    BertModel.from_pretrained(directory)
    with caplog.at_level(logging.DEBUG, logger="minibert.int8"):
        model = BertModel.from_pretrained(directory, dtype="int8")
    assert model.int8_check.worst_cosine >= int8_check.COSINE_FLOOR
    assert ("calibration on random ids" in caplog.text) == (vocabulary != "letters"), caplog.text
    if vocabulary == "another model's":
        assert "the tokenizer has ids up to 206 but the model's vocab_size is 120" in caplog.text


# --- gemm= beside dtype="int8" ---------------------------------------------------------------------------


def test_gemm_is_checked_beside_int8_and_a_library_refused_as_unused(tiny_dir, tmp_path, monkeypatch):
    """Before: speed_up replaced gemm with "mkl" for int8 before it was looked at, so gemm="bogus"
    was accepted, and a library named was ignored. Now a bad name is float32's own ValueError, a
    library named is refused (int8 replaces the layers it picks for), both before a file is read."""
    from minibert.speed import BACKENDS

    with pytest.raises(ValueError, match=r"gemm must be one of auto, mkl, onednn, onednn-fused; got 'bogus'"):
        BertModel.from_pretrained(tmp_path / "nowhere", dtype="int8", gemm="bogus")
    for gemm in BACKENDS:
        with pytest.raises(ValueError, match=rf"gemm='{gemm}' picks the float32 linear layers' library, but "
                                             r"dtype='int8' runs .* leave gemm out"):  # fmt: skip
            BertModel.from_pretrained(tmp_path / "nowhere", dtype="int8", gemm=gemm)
    assert is_int8(BertModel.from_pretrained(tiny_dir, dtype="int8", gemm="auto"))
    monkeypatch.setenv("MINIBERT_GEMM", "onednn")  # a process-wide wish: int8 runs, as it has its own library
    assert is_int8(BertModel.from_pretrained(tiny_dir, dtype="int8"))
    monkeypatch.setenv("MINIBERT_GEMM", "bogus")
    with pytest.raises(ValueError, match="MINIBERT_GEMM must be one of auto, mkl, onednn, onednn-fused; got 'bogus'"):
        BertModel.from_pretrained(tiny_dir, dtype="int8")


def test_the_command_refuses_gemm_beside_dtype_int8_as_a_usage_error():
    result = run_minibert("embed", "x", "--dtype", "int8", "--gemm", "onednn-fused")
    assert result.returncode == 2 and "--gemm onednn-fused picks the float32 linear layers' library" in result.stderr
