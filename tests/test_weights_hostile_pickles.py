"""What torch reads, minibert reads (loading/pickles.py): every pytorch_model.bin torch itself loads
with weights_only=True (the legacy format, a state_dict wrapper, shared storage, non-contiguous
tensors) gives the same model as the safetensors file; a pickle that runs code, asks for code or
uses a protocol torch does not read is refused with minibert's own error, naming the file.
"""

from __future__ import annotations

import collections
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from helpers import refused_at_load
from minibert import BertModel
from minibert.errors import CheckpointError
from tiny_hub import TINY

# ----------------------------------------------------------------------------- what torch reads, minibert reads

def _bin_checkpoint(tmp_path, state, **save_options):
    directory = tmp_path / "bin"
    directory.mkdir()
    for name in ("config.json", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(TINY / name, directory / name)
    torch.save(state, directory / "pytorch_model.bin", **save_options)
    return directory


def _shared(state):  # two names over one storage, as a tied decoder is saved
    first = next(name for name in state if name.endswith("word_embeddings.weight"))
    return {**state, "cls.predictions.decoder.weight": state[first]}


def _strided(state):  # every matrix stored transposed, seen through .t(): not contiguous
    return {name: t.t().contiguous().t() if t.dim() == 2 else t for name, t in state.items()}


@pytest.mark.parametrize(
    ("variant", "save_options"),
    [
        (lambda state: state, {}),
        (lambda state: state, {"_use_new_zipfile_serialization": False}),  # torch's legacy format (before 1.6)
        (lambda state: {"state_dict": state}, {}),
        (lambda state: collections.OrderedDict(state), {}),
        (_shared, {}),
        (_strided, {}),
        (_strided, {"_use_new_zipfile_serialization": False}),
    ],
    ids=["plain", "legacy-format", "state_dict-wrapper", "ordered-dict", "shared-storage", "non-contiguous",
         "non-contiguous-legacy"],
)  # fmt: skip
def test_every_weights_file_torch_reads_safely_loads(tmp_path, tiny_tensors_and_output, variant, save_options):
    state, ids, expected = tiny_tensors_and_output
    directory = _bin_checkpoint(tmp_path, variant(state), **save_options)
    torch.load(directory / "pytorch_model.bin", weights_only=True)  # torch itself reads it safely
    model = BertModel.from_pretrained(directory)
    with torch.no_grad():
        got = model(ids, attention_mask=(ids != 0).long()).last_hidden_state
    assert torch.equal(got, expected), (got - expected).abs().max()


def test_a_pickle_that_runs_code_is_refused_with_minibert_error(tmp_path, tiny_tensors_and_output):
    state, _, _ = tiny_tensors_and_output
    directory = _bin_checkpoint(tmp_path, {**state, "payload": collections.Counter("abc")})
    with pytest.raises(CheckpointError, match="pytorch_model.bin"):
        BertModel.from_pretrained(directory)


class _RunsCode:  # what a hostile pickle holds: unpickling it would call os.system
    def __reduce__(self):
        return os.system, ("touch RAN",)


def _hostile_pickle(path: Path, zipped: bool) -> None:
    """A pytorch_model.bin whose pickle asks for os.system: a bare pickle (protocol 2), or torch's zip
    format with data.pkl replaced."""
    if not zipped:
        path.write_bytes(pickle.dumps({"x": _RunsCode()}, protocol=2))
        return
    torch.save({"a": torch.zeros(2)}, path)
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info.filename)) for info in archive.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for info, data in members:
            archive.writestr(info, pickle.dumps({"x": _RunsCode()}, protocol=2) if info.filename.endswith("data.pkl")
                             else data)  # fmt: skip


@pytest.mark.parametrize("zipped", [False, True], ids=["bare-pickle", "zip-format"])
def test_a_pickle_that_asks_for_code_is_refused_saying_so(tmp_path, zipped, monkeypatch):
    """torch refuses it (weights_only=True), and minibert said "truncated or corrupt", quoting torch's
    first line, which reads as if minibert re-ran the load with weights_only=False. Now it says what
    the pickle asks for and that minibert will not run it; the command prints that one line only
    (not torch's "Detected pickle protocol" warning), and nothing of the file runs."""
    directory = _bin_checkpoint(tmp_path, {})
    _hostile_pickle(directory / "pytorch_model.bin", zipped)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL posix.system"):  # torch's own verdict
        torch.load(directory / "pytorch_model.bin", weights_only=True)
    with pytest.raises(CheckpointError) as caught:
        BertModel.from_pretrained(directory)
    message = str(caught.value)
    assert message.startswith(f"cannot read weights file {directory / 'pytorch_model.bin'}: its pickle asks for the "
                              "Python global posix.system, code a weights-only load"), message  # fmt: skip
    assert "minibert runs no code from a weights file" in message and "corrupt" not in message, message
    assert "Re-running" not in message and "\n" not in message, message
    result = subprocess.run([sys.executable, "-m", "minibert", "embed", "hello", "--model", str(directory)],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 1 and result.stderr.splitlines() == [f"minibert: error: {message}"], result.stderr
    assert not (tmp_path / "RAN").exists()


def test_a_pickle_protocol_torch_does_not_read_weights_only_is_named(tmp_path, monkeypatch):
    """A bare protocol-4 pickle (pickle.dumps's default): torch's weights-only unpickler stops at its
    FRAME instruction, after warning "Detected pickle protocol 4": the command says one line."""
    directory = _bin_checkpoint(tmp_path, {})
    (directory / "pytorch_model.bin").write_bytes(pickle.dumps({"x": _RunsCode()}, protocol=4))
    message = refused_at_load(directory, "its pickle uses the instruction FRAME (pickle protocol 4), which torch's "
                                  "weights-only load")  # fmt: skip
    assert "corrupt" not in message and "Re-running" not in message, message
    monkeypatch.chdir(tmp_path)
    result = subprocess.run([sys.executable, "-m", "minibert", "embed", "hello", "--model", str(directory)],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 1 and result.stderr.splitlines() == [f"minibert: error: {message}"], result.stderr
    assert not (tmp_path / "RAN").exists()


@pytest.mark.parametrize(("content", "says"), [(b"", "EOFError"), (b"\xa1 not a pickle", "the byte 0xa1 is no pickle")])
def test_a_bin_that_is_not_a_pickle_is_still_corrupt(tmp_path, content, says):
    directory = _bin_checkpoint(tmp_path, {})
    (directory / "pytorch_model.bin").write_bytes(content)
    refused_at_load(directory, says, "truncated or corrupt")
