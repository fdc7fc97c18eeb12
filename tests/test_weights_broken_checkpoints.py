"""Broken checkpoints: every fault (a truncated or garbage file, a missing tensor, a shape or config that
disagrees, a missing folder or repo) gets a clear error of a documented type naming the culprit.
(The model's inputs: test_model_input_checks.py; the tokenizer on any text: test_tokenizer_totality.py.)"""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch

from minibert import BertModel, Embedder
from minibert.errors import CheckpointError, ModelNotFoundError


@pytest.fixture
def checkpoint(tmp_path, minilm_dir):
    """A writable copy of the MiniLM checkpoint to break."""
    directory = tmp_path / "ckpt"
    directory.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(minilm_dir / name, directory / name)
    return directory


# ----------------------------------------------------------------------------- broken checkpoints


def test_truncated_safetensors(checkpoint):
    path = checkpoint / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="cannot read weights file .*model.safetensors.*truncated or corrupt"):
        BertModel.from_pretrained(checkpoint)


def test_garbage_safetensors(checkpoint):
    (checkpoint / "model.safetensors").write_bytes(b"\x00" * 100)
    with pytest.raises(CheckpointError, match="model.safetensors"):
        BertModel.from_pretrained(checkpoint)


def test_corrupt_pytorch_model_bin(checkpoint):
    (checkpoint / "model.safetensors").unlink()
    (checkpoint / "pytorch_model.bin").write_bytes(b"not a zip file at all")
    with pytest.raises(CheckpointError, match="cannot read weights file .*pytorch_model.bin"):
        BertModel.from_pretrained(checkpoint)


def test_missing_tensor(checkpoint):
    from safetensors.torch import load_file, save_file

    state = load_file(str(checkpoint / "model.safetensors"))
    del state["encoder.layer.3.attention.self.key.weight"]
    save_file(state, str(checkpoint / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"missing tensors \(1\): encoder.layer.3.attention.self.key.weight"):
        BertModel.from_pretrained(checkpoint)


def test_shape_disagrees_with_config(checkpoint):
    config = json.loads((checkpoint / "config.json").read_text())
    config["intermediate_size"] = 1024
    (checkpoint / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as error:
        BertModel.from_pretrained(checkpoint)
    message = str(error.value)
    # under the file's own names, as the missing ones (minibert's layers.0.feed_forward... is in no file)
    assert "encoder.layer.0.intermediate.dense.weight (1536, 384) (expected (1024, 384))" in message
    assert "config.json belongs to another model" in message


@pytest.mark.parametrize("copy_as", ["embeddings.LayerNorm.gamma", "bert.embeddings.LayerNorm.weight"])
def test_one_weight_stored_twice_with_different_values_is_refused_naming_both(checkpoint, copy_as):
    """Two stored names that give one weight (TensorFlow's gamma beside weight, bert.X beside X): which copy
    is the model's the file does not say (transformers keeps one without a word; minibert kept the other)."""
    from safetensors.torch import load_file, save_file

    state = load_file(str(checkpoint / "model.safetensors"))
    state[copy_as] = state["embeddings.LayerNorm.weight"] + 0.5
    save_file(state, str(checkpoint / "model.safetensors"))
    names = sorted(["embeddings.LayerNorm.weight", copy_as])
    said = f"{names[0]} and {names[1]} both give embeddings.layer_norm.weight, with different values (max |Δ| 0.5)"
    with pytest.raises(CheckpointError, match=r"weights stored twice, under two names \(1\): " + re.escape(said)):
        BertModel.from_pretrained(checkpoint)
    state[copy_as] = state["embeddings.LayerNorm.weight"].clone()  # the same values: one weight, loaded
    save_file(state, str(checkpoint / "model.safetensors"))
    loaded = BertModel.from_pretrained(checkpoint).embeddings.layer_norm.weight
    assert torch.equal(loaded, state["embeddings.LayerNorm.weight"])


def test_one_weight_in_two_shards_under_two_spellings_is_refused(checkpoint):
    """docs/checkpoints.md: a shard holding a tensor another shard holds is an error naming it, under
    either spelling (bert.X in one shard, X in the other), with a different shape too."""
    from safetensors.torch import load_file, save_file

    state = load_file(str(checkpoint / "model.safetensors"))
    (checkpoint / "model.safetensors").unlink()
    save_file(state, str(checkpoint / "model-00001-of-00002.safetensors"))
    name = "bert.embeddings.word_embeddings.weight"
    for other, said in [(state["embeddings.word_embeddings.weight"] * 3, "with different values"),
                        (state["embeddings.word_embeddings.weight"][:7], "(7, 384) both give")]:  # fmt: skip
        save_file({name: other.contiguous()}, str(checkpoint / "model-00002-of-00002.safetensors"))
        weight_map = {**dict.fromkeys(state, "model-00001-of-00002.safetensors"),
                      name: "model-00002-of-00002.safetensors"}  # fmt: skip
        (checkpoint / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
        both = r"embeddings.word_embeddings.weight .*and " + re.escape(name)
        with pytest.raises(CheckpointError, match=both) as error:
            BertModel.from_pretrained(checkpoint)
        assert said in str(error.value), str(error.value)


def test_malformed_config(checkpoint):
    (checkpoint / "config.json").write_text('{"hidden_size": 384,')
    with pytest.raises(CheckpointError, match="malformed config file .*config.json"):
        BertModel.from_pretrained(checkpoint)
    (checkpoint / "config.json").write_text('{"hidden_size": 384, "num_attention_heads": 5}')
    with pytest.raises(CheckpointError, match="hidden_size = 384 is not a multiple of num_attention_heads = 5"):
        BertModel.from_pretrained(checkpoint)
    (checkpoint / "config.json").write_text('{"model_type": "gpt2"}')
    with pytest.raises(CheckpointError, match="describes a 'gpt2' model"):
        BertModel.from_pretrained(checkpoint)


def test_directory_without_weights(checkpoint):
    (checkpoint / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="has config.json but no weights: expected one of model.safetensors"):
        BertModel.from_pretrained(checkpoint)


def test_weights_only_in_formats_minibert_does_not_read_are_named(checkpoint):
    """A folder with tf_model.h5 / flax_model.msgpack has weights: the error names them, says minibert
    does not read them and how transformers converts them, instead of "no weights"."""
    (checkpoint / "model.safetensors").rename(checkpoint / "tf_model.h5")  # (only the name is looked at)
    with pytest.raises(CheckpointError) as raised:
        BertModel.from_pretrained(checkpoint)
    message = str(raised.value)
    assert "no weights" not in message, message
    assert "only as tf_model.h5 (Keras (TensorFlow 2) weights), which minibert does not read" in message, message
    assert "from_tf=True" in message, message


def test_directory_without_config(tmp_path):
    with pytest.raises(ModelNotFoundError, match="config.json not found in the directory"):
        BertModel.from_pretrained(tmp_path)


def test_unknown_repo_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(
        ModelNotFoundError, match="the model someone/unknown-bert is not in the local Hugging Face cache"
    ):
        Embedder.from_pretrained("someone/unknown-bert")


def test_tensorflow_style_names(checkpoint):
    from safetensors.torch import save_file

    # Google's names are read through the rename table's TensorFlow column (tests/test_formats_tf_checkpoint.py);
    # a file with only one of them, of the wrong shape, names what is missing and mis-shaped.
    save_file({"bert/embeddings/word_embeddings": torch.zeros(2, 2)}, str(checkpoint / "model.safetensors"))
    named = r"(?s)missing tensors \(\d+\): .*wrong shape \(1\): bert/embeddings/word_embeddings \(2, 2\)"
    with pytest.raises(CheckpointError, match=named):
        BertModel.from_pretrained(checkpoint)


def test_unused_tensors_warn_but_load(checkpoint):
    from safetensors.torch import load_file, save_file

    state = load_file(str(checkpoint / "model.safetensors"))
    state["cls.species.weight"] = torch.zeros(6, 384)  # a head of no known kind (antiberty has it)
    save_file(state, str(checkpoint / "model.safetensors"))
    with pytest.warns(UserWarning, match="ignoring 1 tensors minibert does not use: cls.species.weight"):
        BertModel.from_pretrained(checkpoint)
    del state["cls.species.weight"]
    state["classifier.weight"] = torch.zeros(2, 384)  # a known head: the bare encoder leaves it out, silently
    save_file(state, str(checkpoint / "model.safetensors"))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BertModel.from_pretrained(checkpoint)


def test_unresolvable_hub_fails_fast(monkeypatch, tmp_path):
    """No DNS for the hub: a clear error at once, not huggingface_hub's ~25 s of retries."""
    import time

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.invalid")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    start = time.perf_counter()
    with pytest.raises(ModelNotFoundError, match=r"the hub \(http://hub.invalid\) cannot be reached"):
        BertModel.from_pretrained("someone/some-bert")
    assert time.perf_counter() - start < 10


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket is closed


def test_a_hub_that_refuses_connections_fails_fast_and_says_so(monkeypatch, tmp_path):
    """A refused connection (a firewall that rejects, a mirror that is down) is known at once: the
    error says so, instead of "did not answer within 30 s" after huggingface_hub's retries."""
    import time

    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    start = time.perf_counter()
    with pytest.raises(ModelNotFoundError, match=rf"the hub \({endpoint}\) cannot be reached: it refused the conn"):
        BertModel.from_pretrained("someone/some-bert")
    assert time.perf_counter() - start < 5


def test_behind_a_proxy_the_hub_is_not_probed(monkeypatch):
    """With HTTPS_PROXY (or ALL_PROXY) set, the proxy is what huggingface_hub's requests reach: a
    host that neither resolves nor accepts a direct connection is not declared unreachable."""
    from minibert.loading import hub_reach

    for variable in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(variable, raising=False)
    refused, unresolvable = f"https://127.0.0.1:{_closed_port()}", "https://hub_reach.invalid"
    hub_reach._probed.clear()
    assert "refused" in hub_reach._unreachable(refused) and "resolve" in hub_reach._unreachable(unresolvable)
    for variable in ("HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(variable, "http://proxy.example:3128")
        hub_reach._probed.clear()
        assert hub_reach._unreachable(refused) is None and hub_reach._unreachable(unresolvable) is None, variable
        monkeypatch.delenv(variable)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # a host the proxy is bypassed for is probed again
    hub_reach._probed.clear()
    assert "refused" in hub_reach._unreachable(refused)
    hub_reach._probed.clear()


def test_a_probes_verdict_is_kept_a_minute_then_asked_again(monkeypatch):
    """One probe serves the several files of a load; after PROBE_KEPT_SECONDS the hub is probed
    again (the network may have come back in a long session)."""
    from minibert.loading import hub_reach

    calls, clock = [], [1000.0]
    monkeypatch.setattr(hub_reach, "_probe", lambda endpoint: calls.append(endpoint) or "it refused the connection")
    monkeypatch.setattr(hub_reach, "_now", lambda: clock[0])
    hub_reach._probed.clear()
    for _ in range(3):
        assert hub_reach._unreachable("http://mirror.example") == "it refused the connection"
    assert len(calls) == 1
    clock[0] += hub_reach.PROBE_KEPT_SECONDS + 1
    hub_reach._unreachable("http://mirror.example")
    assert len(calls) == 2
    hub_reach._probed.clear()
