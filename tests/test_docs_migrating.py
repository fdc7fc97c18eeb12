"""docs/migrating.md runs as written: McCormick's "BERT Word Embeddings" notebook, cell by cell, with
pytorch-pretrained-bert's call changed as the page says, on all-MiniLM-L6-v2 (its printed values:
the three "bank"s, the layers, the shapes; the warning the old call gets), and transformers' quick
tour with the Auto names. The model is compared with transformers in tests/test_model.py; the
page's mistakes table is checked against the messages in tests/test_model_mistakes.py."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import torch

PAGE = Path(__file__).resolve().parents[1] / "docs" / "migrating.md"


def test_the_migration_page_runs_as_written():
    result = doctest.testfile(str(PAGE), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 40, f"only {result.attempted} examples found in {PAGE.name}"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {PAGE.name} failed"
    assert torch.is_grad_enabled()


def test_the_page_keeps_the_tutorials_lesson():
    """The financial banks closer than the river bank, as the notebook teaches (its numbers: 0.94, 0.69)."""
    text = PAGE.read_text(encoding="utf-8")
    similar = float(re.search(r"\*similar\*  meanings:  ([\d.]+)", text).group(1))
    different = float(re.search(r"\*different\* meanings:  ([\d.]+)", text).group(1))
    assert similar > different
    assert "token_type_ids=segments_tensors" in text and "hidden_states[1:]" in text
    assert 'tokenizer("I was thirsty!", "I drank water")' in text  # the mistake no error can catch
