"""The examples in minibert's docstrings run (those marked +SKIP need a hub checkpoint)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "tokenizer.bert_tokenizer",
    "embedding.embedder",
    "embedding.streams",
    "weights",
    "model",
    "heads",
    "fast_path",
    "speed",
    "tokenizer.framing",
    "inputs",
    "config",
    "formats.hub",
    "formats.crc32c",
    "formats.atomic_files",
    "tasks",
    "apps.cli",
    "apps.verify",
    "runtime",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"minibert.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in minibert.{name}"
