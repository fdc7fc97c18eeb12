"""A machine made to look like it has no CUDA, or one GPU, for the CPU half of the device tests
(test_devices*.py): what minibert's devices.py asks of torch is answered as such a machine answers
it, on any machine (a GPU machine too), and nothing runs on the stand-in GPU. The fixtures are
offered to every test by conftest.py."""

from __future__ import annotations

import pytest
import torch

TINY = "tests/data/tiny_hub"  # a small checkpoint every command can load


@pytest.fixture
def without_cuda(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # (so on a GPU machine too)


@pytest.fixture
def with_one_gpu(monkeypatch):
    """A CUDA build that sees one GPU (what devices.py asks; nothing runs on it)."""
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "NVIDIA Stand-In")
