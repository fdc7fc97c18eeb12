"""tests/data/tiny_hub served as org/tiny on a loopback hub (hub_server.py), and what the hub tests
(test_loading_hub_*.py) share; the checkpoint's tensors and output, for tests that write them in
another form. The fixtures are offered to every test by conftest.py.

The tests run in this process (a subprocess per case would spend seconds importing torch):
huggingface_hub reads HF_HUB_OFFLINE and its cache folder when it is imported, so the fixture sets
them on its ``constants``; its retries of a server error (about 23 s of waiting) are made without
the waits.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from hub_server import HubServer

TINY = Path(__file__).parent / "data" / "tiny_hub"  # config.json, model.safetensors, tokenizer_config.json, vocab.txt
IDS = [[2, 5, 7, 9, 3]]


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """A loopback hub serving tests/data/tiny_hub as org/tiny, this process's cache in tmp_path."""
    with HubServer({"org/tiny": TINY}) as server:
        yield server.in_this_process(monkeypatch, tmp_path / "hub")


@pytest.fixture(scope="module")
def tiny_tensors_and_output():
    """The tiny checkpoint's tensors (as saved) and its output on a few ids."""
    from safetensors.torch import load_file

    from minibert import BertModel

    state = load_file(str(TINY / "model.safetensors"))
    model = BertModel.from_pretrained(TINY)
    ids = torch.tensor([[2, 17, 33, 9, 3, 0], [2, 40, 41, 3, 0, 0]])
    with torch.no_grad():
        expected = model(ids, attention_mask=(ids != 0).long()).last_hidden_state
    return state, ids, expected


def offline(monkeypatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def gets(server: HubServer, filename: str) -> int:
    return sum(count for (method, _, name), count in server.requests.items() if method == "GET" and name == filename)


def classifier(folder: Path, swapped: bool = False) -> Path:
    """tiny_hub's encoder with a 2-label classifier, saved by transformers. ``swapped``: the same model
    pushed again with its labels, and their classifier rows, in the other order: it answers the same."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    names = ["negative", "positive"][::-1] if swapped else ["negative", "positive"]
    model = transformers.BertForSequenceClassification.from_pretrained(
        TINY, num_labels=2, id2label=dict(enumerate(names)), label2id={name: i for i, name in enumerate(names)})
    if swapped:
        with torch.no_grad():
            model.classifier.weight.copy_(model.classifier.weight.flip(0))
            model.classifier.bias.copy_(model.classifier.bias.flip(0))
    model.save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(TINY / name, folder / name)
    return folder
