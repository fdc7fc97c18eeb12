"""The int8 tests' small random checkpoints (test_speed_int8*.py): a TINY BertModel saved, the same
loaded once in int8, and a fresh measurement cache in which int8 is measured faster. The fixtures
are offered to every test by conftest.py."""

from __future__ import annotations

import pytest
import torch

from minibert import BertConfig, BertModel
from minibert.speed import int8_check

TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=120)
IDS = torch.tensor([[5, 6, 7, 8]])


def saved(cls, directory, seed=0, **fields):
    """A small random ``cls`` (TINY, ``fields`` changed) drawn from ``seed``, saved in ``directory``."""
    torch.manual_seed(seed)
    cls(BertConfig(**{**TINY, **fields})).eval().save_pretrained(directory)
    return directory


def measured_faster(patch: pytest.MonkeyPatch, cache) -> None:
    """Through ``patch``: the measurement cache in ``cache``, and int8 measured twice float32's speed on
    FBGEMM (the speed verdict fixed: no timing in the tests that use it)."""
    patch.setenv("MINIBERT_CACHE_DIR", str(cache))
    patch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 2.0})


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A small random BertModel saved as a checkpoint (no vocabulary: calibrated on random ids)."""
    return saved(BertModel, tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def int8_model(tiny_dir, tmp_path_factory):
    """One int8 model for the cases that only run it (loading costs ~2 s on a loaded 2-core machine)."""
    with pytest.MonkeyPatch.context() as patch:
        measured_faster(patch, tmp_path_factory.mktemp("cache"))
        return BertModel.from_pretrained(tiny_dir, dtype="int8")


@pytest.fixture
def int8_measured_faster(tmp_path, monkeypatch):
    """A fresh measurement cache per test, and the speed verdict fixed (no timing in these tests)."""
    measured_faster(monkeypatch, tmp_path / "cache")


@pytest.fixture
def int8_fresh_cache(tmp_path, monkeypatch):
    """A fresh measurement cache per test, and int8's warnings not yet given (each test sees its own)."""
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(int8_check, "_warned", set())
