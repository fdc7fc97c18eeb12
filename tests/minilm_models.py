"""all-MiniLM-L6-v2 as the model tests read it: minibert's BertModel, transformers' eager BertModel
(the reference) and that reference in float64 (the exact values), each once per test module, so a
test that switches a path off and on again changes no other module's model. The fixtures are
offered to every test by conftest.py.
"""

from __future__ import annotations

import pytest

from helpers import exact_reference
from minibert import BertModel, BertTokenizer


def batch_of(directory, texts):
    """``texts`` tokenized by the checkpoint's tokenizer as one padded batch of tensors."""
    return BertTokenizer.from_pretrained(directory)(texts, padding=True, truncation=True, return_tensors="pt")


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    return BertModel.from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def minilm_reference(minilm_dir):
    transformers = pytest.importorskip("transformers")
    return transformers.BertModel.from_pretrained(str(minilm_dir), attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def minilm_exact(minilm_reference):
    """The reference in float64: each output of the 6-layer model is held to 1e-5 from exact beyond
    fp32's own rounding at that depth (helpers.bound_from_exact)."""
    return exact_reference(minilm_reference)
