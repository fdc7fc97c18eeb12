"""Bad input and faults: every one gets a clear error of a documented type naming the culprit."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibert import BertConfig, BertModel, BertTokenizer, Embedder
from minibert.errors import CheckpointError, ModelNotFoundError

TINY = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                  max_position_embeddings=20, type_vocab_size=2)  # fmt: skip


@pytest.fixture(scope="module")
def tiny():
    return BertModel(TINY).eval()


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    return BertTokenizer(vocab_file)


@pytest.fixture
def checkpoint(tmp_path, minilm_dir):
    """A writable copy of the MiniLM checkpoint to break."""
    directory = tmp_path / "ckpt"
    directory.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(minilm_dir / name, directory / name)
    return directory


# ----------------------------------------------------------------------------- model input validation


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch=st.integers(1, 3),
    tokens=st.integers(0, 25),
    low=st.integers(-5, 120),
    high=st.integers(-5, 120),
    type_high=st.integers(0, 3),
    mask_shape_off=st.booleans(),
    as_float=st.booleans(),
)
def test_model_validation_never_crashes_deep_inside(
    tiny, batch, tokens, low, high, type_high, mask_shape_off, as_float
):
    low, high = min(low, high), max(low, high)
    ids = torch.randint(low, high + 1, (batch, tokens))
    type_ids = torch.randint(0, type_high + 1, (batch, tokens))
    mask = torch.ones(batch, tokens + (1 if mask_shape_off else 0), dtype=torch.long)
    if as_float:
        ids = ids.float()
    try:
        out = tiny(ids, attention_mask=mask, token_type_ids=type_ids)
    except TypeError as error:
        assert as_float and "input_ids must hold integers" in str(error)
        return
    except ValueError as error:
        message = str(error)
        problems = []
        if tokens == 0:
            problems.append("at least one sequence of one token")
        if tokens > 20:
            problems.append("max_position_embeddings=20")
        if tokens and (ids.min() < 0 or ids.max() >= 100):
            problems.append("outside the vocabulary [0, 100)")
        if mask_shape_off:
            problems.append("attention_mask has shape")
        if tokens and type_ids.max() >= 2:
            problems.append("type_vocab_size=2")
        assert problems, f"unexpected ValueError: {message}"
        assert any(problem in message for problem in problems), message
        return
    assert not as_float and 0 < tokens <= 20 and not mask_shape_off
    assert 0 <= ids.min() and ids.max() < 100 and type_ids.max() < 2
    assert out.last_hidden_state.shape == (batch, tokens, 16)


def test_validation_messages(tiny):
    with pytest.raises(ValueError, match="sequence of 21 tokens is longer than max_position_embeddings=20"):
        tiny(torch.zeros(1, 21, dtype=torch.long))
    with pytest.raises(ValueError, match="input_ids contains 100, outside the vocabulary \\[0, 100\\)"):
        tiny(torch.tensor([[1, 100]]))
    with pytest.raises(ValueError, match="input_ids contains -1"):
        tiny([[1, -1]])
    with pytest.raises(TypeError, match="input_ids must hold integers, got dtype torch.float32"):
        tiny(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="token_type_ids contains 2, outside \\[0, type_vocab_size=2\\)"):
        tiny([[1, 2]], token_type_ids=[[0, 2]])
    with pytest.raises(ValueError, match="attention_mask has shape \\(1, 3\\) but input_ids has \\(1, 2\\)"):
        tiny([[1, 2]], attention_mask=[[1, 1, 1]])
    with pytest.raises(ValueError, match="attention_mask must hold only 0"):
        tiny([[1, 2]], attention_mask=[[1, 5]])
    with pytest.raises(TypeError, match="input_ids must be a tensor or a \\(nested\\) list of ints"):
        tiny([[1, 2], [3]])
    assert tiny([1, 2, 3]).last_hidden_state.shape == (1, 3, 16)  # one unbatched sequence is fine


# ----------------------------------------------------------------------------- tokenizer totality


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_tokenizer_is_total(tokenizer, text):
    ids = tokenizer(text)["input_ids"]
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert all(0 <= index < tokenizer.vocab_size for index in ids)
    windows = tokenizer(text, truncation=True, max_length=8, stride=2, return_overflowing_tokens=True)
    assert all(len(row) <= 8 and row[0] == 101 and row[-1] == 102 for row in windows["input_ids"])


VOCABULARY_PIECES = ["hello", "world", "paris", "is", "the", "capital", "un", "##want", "##ed", "runn", "##ing",
                     "water", "bank", "river", "à", "中", "'", "-", "(", ")"]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(VOCABULARY_PIECES), max_size=30))
def test_decode_round_trip(tokenizer, pieces):
    """decode(encode(x)) == x for text made of vocabulary words after normalisation."""
    words, current = [], ""
    for piece in pieces:
        if piece.startswith("##"):
            current += piece[2:]
        else:
            if current:
                words.append(current)
            current = piece
    if current:
        words.append(current)
    text = " ".join(words)
    normalized = " ".join(tokenizer.basic.tokenize(text))
    decoded = tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True)
    assert decoded == normalized


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
    assert "encoder.layer.0.intermediate.dense.weight" not in message or "wrong shape" in message
    assert "layers.0.feed_forward.intermediate.weight (1536, 384) (expected (1024, 384))" in message
    assert "config.json belongs to another model" in message


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

    # Google's names are read through the rename table's TensorFlow column (tests/test_tf_checkpoint.py);
    # a file with only one of them, of the wrong shape, names what is missing and mis-shaped.
    save_file({"bert/embeddings/word_embeddings": torch.zeros(2, 2)}, str(checkpoint / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"(?s)missing tensors \(\d+\): .*wrong shape \(1\): embeddings"):
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
