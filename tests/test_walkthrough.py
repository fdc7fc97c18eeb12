"""docs/walkthrough.md runs as written: every code block is a doctest, so its printed values are
what a reader sees (tokens, ids, shapes; one whole encoder layer by hand against the model's
hidden_states[1] and attention weights, the stack against last_hidden_state, padding against the
unpadded text, the pooler, the masked-LM head by hand against fill_mask's scores, the "bank"
cosines, sentence cosines). The model's outputs are the references here; the model itself is
compared with transformers, layer by layer, in tests/test_model.py."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import torch

WALKTHROUGH = Path(__file__).resolve().parents[1] / "docs" / "walkthrough.md"


def test_the_walkthrough_runs_as_written():
    result = doctest.testfile(str(WALKTHROUGH), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 80, f"only {result.attempted} examples found in {WALKTHROUGH.name}"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {WALKTHROUGH.name} failed"
    assert torch.is_grad_enabled()  # the page changes no global state of the process that runs it


def test_every_size_letter_is_defined_before_the_first_code():
    text = WALKTHROUGH.read_text(encoding="utf-8")
    legend = text.split("```python")[0]
    defined = set(re.findall(r"^\| ([A-Z]) \|", legend, flags=re.MULTILINE))
    used = set(re.findall(r"\(([A-Z](?:, [A-Z])*)\)", text.replace("(B, T) = (1, 5)", "(B, T)")))
    letters = {letter for group in used for letter in group.split(", ")}
    assert letters <= defined, f"used in shapes but not defined first: {sorted(letters - defined)}"
    assert defined == set("BTHLNSFV")


def test_the_walkthrough_has_every_step_of_a_layer_and_reads_in_one_sitting():
    text = WALKTHROUGH.read_text(encoding="utf-8")
    for heading in ("3.1 Queries, keys and values", "3.2 The attention weights", "3.3 Weights × values",
                    "3.4 Add, then LayerNorm", "3.5 The feed-forward network", "4. The stack", "5. Padding",
                    "7. The masked-LM head", "10. Why these numbers differ"):  # fmt: skip
        assert f" {heading}" in text, heading
    assert len(text.splitlines()) < 450
