"""docs/walkthrough.md runs as written: every code block is a doctest, so its printed values are
what a reader sees (tokens, ids, shapes, the hand-computed attention head and pooler against the
model's, the "bank" cosines, sentence cosines)."""

from __future__ import annotations

import doctest
from pathlib import Path

WALKTHROUGH = Path(__file__).resolve().parents[1] / "docs" / "walkthrough.md"


def test_the_walkthrough_runs_as_written():
    result = doctest.testfile(str(WALKTHROUGH), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 30, f"only {result.attempted} examples found in {WALKTHROUGH.name}"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {WALKTHROUGH.name} failed"
