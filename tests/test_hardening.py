"""Hostile files: work and memory bounded by the real input, never by what a file claims.

Each case breaks one thing in a copy of the real MiniLM checkpoint and expects one short
``CheckpointError`` naming the file and the field (or tensor), at once."""

from __future__ import annotations

import json
import shutil
import struct
import time

import pytest

from minibert import BertModel, Embedder
from minibert.errors import CheckpointError


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


def _refused(directory, *fragments) -> str:
    started = time.perf_counter()
    with pytest.raises(CheckpointError) as caught:
        BertModel.from_pretrained(directory)
    message = str(caught.value)
    assert time.perf_counter() - started < 5, "refusing should be immediate"
    assert len(message) < 700 and "\n" not in message.strip(), message
    for fragment in fragments:
        assert fragment in message, message
    return message


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
    _refused(checkpoint, "config.json", field, says)


def test_a_huge_value_is_not_copied_into_the_error(checkpoint):
    _edit_config(checkpoint, num_hidden_layers=[1] * 1_000_000)
    message = _refused(checkpoint, "config.json", "num_hidden_layers")
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
    import minibert.weights

    def no_reading(path):
        raise AssertionError("the weights' data was read before the header was checked against config.json")

    monkeypatch.setattr(minibert.weights, "read_state_dict", no_reading)
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
        ({"a": {"dtype": "F32", "shape": [-2, -1], "data_offsets": [0, 8]}}, b"\0" * 8, "does not fit"),
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "does not fit"),
    ],
)
def test_safetensors_header_is_checked_against_the_file_before_reading(tmp_path, tensors, data, says):
    from minibert.weights import read_safetensors, safetensors_shapes

    path = tmp_path / "model.safetensors"
    _safetensors(path, tensors, data)
    for read in (read_safetensors, safetensors_shapes):
        with pytest.raises(CheckpointError, match="model.safetensors") as caught:
            read(path)
        assert says in str(caught.value), caught.value


def test_a_well_formed_safetensors_file_reads(tmp_path):
    from minibert.weights import read_safetensors

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


# ----------------------------------------------------------------------------- a hub that never answers


@pytest.fixture
def silent_hub():
    """A host that accepts connections and never answers."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    accepted, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    server.close()


def test_a_hub_that_never_answers_is_given_up_on_in_bounded_time(silent_hub, tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_ENDPOINT": silent_hub, "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf"),
           "MINIBERT_HUB_TIMEOUT": "3"}  # fmt: skip
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "minibert", "embed", "hello", "--model", "someone/some-bert"],
                            capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    took = time.monotonic() - started
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "did not answer within 3 s" in lines[0] and "HF_HUB_OFFLINE=1" in lines[0], lines[0]
    assert took < 20, f"took {took:.1f} s"


def test_the_hub_timeout_setting_is_checked(monkeypatch):
    from minibert.hub import hub_timeout

    monkeypatch.setenv("MINIBERT_HUB_TIMEOUT", "-5")
    with pytest.raises(ValueError, match="MINIBERT_HUB_TIMEOUT"):
        hub_timeout()
    monkeypatch.setenv("MINIBERT_HUB_TIMEOUT", "2.5")
    assert hub_timeout() == 2.5
    monkeypatch.delenv("MINIBERT_HUB_TIMEOUT")
    assert hub_timeout() == 30.0
