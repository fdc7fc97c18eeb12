"""docs/CONTRIBUTING.md's map of tests/ is complete: every Python file in tests/ has its line, once, with
what it checks, and the map names no file that does not exist (a renamed or deleted test shows here)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CONTRIBUTING = TESTS.parent / "docs" / "CONTRIBUTING.md"


def map_lines() -> list[str]:
    """The lines of the module map from ``tests/`` to the next top-level folder (``scripts/``)."""
    lines = CONTRIBUTING.read_text(encoding="utf-8").split("\ntests/", 1)[1].splitlines()[1:]
    return lines[: next(i for i, line in enumerate(lines) if line and not line.startswith(" "))]


def mapped() -> Counter:
    """{file or folder named at the start of a line (not a description's continuation): how many times}."""
    return Counter(match.group(1) for line in map_lines() if (match := re.match(r" {2,4}(\S+\.py|\S+/)\s", line)))


def test_every_file_in_tests_is_in_the_map_once():
    names = mapped()
    missing = sorted(path.name for path in TESTS.glob("*.py") if path.name not in names)
    assert not missing, f"docs/CONTRIBUTING.md's map of tests/ lacks (add one line each, under its room): {missing}"
    twice = sorted(name for name, count in names.items() if count > 1)
    assert not twice, f"named more than once in the map: {twice}"


def test_the_map_names_only_files_that_exist():
    gone = sorted(name for name in mapped() if not (TESTS / name).exists())
    assert not gone, f"docs/CONTRIBUTING.md's map of tests/ names files that do not exist: {gone}"


def test_every_line_says_what_the_file_checks():
    bare = [line.strip() for line in map_lines() if re.fullmatch(r"\s+\S+\.py\s*", line)]
    assert not bare, f"map lines without a description: {bare}"
