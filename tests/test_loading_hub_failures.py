"""The hub and from_pretrained's arguments (loading/from_pretrained.py), on a loopback hub
(hub_server.py): arguments are checked before a byte is downloaded.

The tests run in this process (a subprocess per case would spend seconds importing torch):
huggingface_hub reads HF_HUB_OFFLINE and its cache folder when it is imported, so the fixture sets
them on its ``constants``; its retries of a server error (about 23 s of waiting) are made without
the waits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hub_server import HubServer
from minibert import BertModel, Embedder

TINY = Path(__file__).parent / "data" / "tiny_hub"  # config.json, model.safetensors, tokenizer_config.json, vocab.txt


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """A loopback hub serving tests/data/tiny_hub as org/tiny, this process's cache in tmp_path."""
    from huggingface_hub import constants

    with HubServer({"org/tiny": TINY}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
        monkeypatch.setattr("huggingface_hub.utils._http.time.sleep", lambda seconds: None)  # retries, no waits
        yield server


# ----------------------------------------------------------------------------- 4. arguments before downloads


@pytest.mark.parametrize("keywords", [{"dtype": "float33"}, {"num_label": 3}, {"dtype": "int32"}])
def test_arguments_are_checked_before_any_download(hub, keywords):
    """A misspelt keyword or dtype is refused before config.json, let alone the weights, is fetched."""
    with pytest.raises((TypeError, ValueError)):
        BertModel.from_pretrained("org/tiny", **keywords)
    with pytest.raises((TypeError, ValueError)):
        Embedder.from_pretrained("org/tiny", dtype=keywords.get("dtype", "fp33"))
    assert not hub.requests, hub.requests
