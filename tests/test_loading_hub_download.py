"""The hub for real, on loopback (hub_server.py), in a fresh process as a user runs it: a download
into the Hugging Face cache, then the same load offline from the cache alone; only the weights
needed are fetched, pytorch_model.bin where there is no safetensors file.
"""

from __future__ import annotations

import pytest

from helpers import run_python
from hub_server import HubServer

pytest.importorskip("transformers")  # (google_small_bin is written by transformers)


def test_hub_download_then_offline_cache(minilm_dir, tmp_path):
    """from_pretrained('some-org/some-bert') downloads from a hub-like server into the HF cache;
    with HF_HUB_OFFLINE=1 it loads again from the cache alone."""
    code = (
        "import torch, minibert\n"
        "m = minibert.BertModel.from_pretrained('some-org/some-bert')\n"
        "t = minibert.BertTokenizer.from_pretrained('some-org/some-bert')\n"
        "b = t(['hello world'], return_tensors='pt')\n"
        "print(float(m(**b).pooler_output.sum()))\n"
        "import sys\n"
        "try:\n"  # then a repository that does not exist: online, the hub says so; offline, the cache does
        "    minibert.BertModel.from_pretrained(sys.argv[1])\n"
        "except Exception as error:\n"
        "    print(f'{type(error).__name__}: {error}', file=sys.stderr)\n"
    )
    with HubServer({"some-org/some-bert": minilm_dir}) as hub:
        env = hub.environment(tmp_path / "hf")
        online = run_python(code, env, "some-org/absent")
        assert online.returncode == 0, online.stderr
        assert hub.requests[("GET", "some-org/some-bert", "model.safetensors")] == 1
        assert hub.requests[("GET", "some-org/some-bert", "pytorch_model.bin")] == 0  # only what is needed
        cached = list((tmp_path / "hf" / "hub").glob("models--some-org--some-bert/snapshots/*/model.safetensors"))
        assert len(cached) == 1
        before = sum(hub.requests.values())
        offline = run_python(code, dict(env, HF_HUB_OFFLINE="1"), "other-org/never-seen")
        assert offline.returncode == 0, offline.stderr
        assert sum(hub.requests.values()) == before, "offline mode must not touch the network"
        assert offline.stdout == online.stdout
        assert "ModelNotFoundError: some-org/absent: no such repository" in online.stderr
    assert "the model other-org/never-seen is not in the local Hugging Face cache" in offline.stderr
    assert "HF_HUB_OFFLINE=1 is set" in offline.stderr


def test_hub_falls_back_to_pytorch_model_bin(google_small_bin, tmp_path):
    directory, _ = google_small_bin
    with HubServer({"google-like/bert": directory}) as hub:
        env = hub.environment(tmp_path / "hf")
        result = run_python(
            "import minibert; m = minibert.BertForPreTraining.from_pretrained('google-like/bert'); "
            "print(m.config.num_hidden_layers)",
            env,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "2"
        assert hub.requests[("GET", "google-like/bert", "pytorch_model.bin")] == 1
