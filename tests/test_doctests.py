"""The examples in minibert's docstrings run (those marked +SKIP need a hub checkpoint)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "tokenizer",
    "embed",
    "weights",
    "model",
    "config",
    "hub",
    "tasks",
    "io",
    "cli",
    "verify",
    "runtime",
    "streams",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"minibert.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in minibert.{name}"
