"""One reading order: the README's table is the order, and the walkthrough's last section and
docs/CONTRIBUTING.md name the same files in the same order. Every stop exists, and the first
stops of the code open with what a learner came for (config.py with ``BertConfig``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "minibert"


def readme_order() -> list[str]:
    """The numbered rows' files, in order (docs/walkthrough.md, then paths under src/minibert/)."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Reading order")[1].split("\n## ")[0]
    rows = re.findall(r"^\| \d+ \| (.*?) \|", section, flags=re.MULTILINE)
    return [re.sub(r"^src/minibert/", "", name) for row in rows for name in re.findall(r"`([^`]+\.(?:py|md))`", row)]


def named_files(text: str) -> list[str]:
    return [re.sub(r"^src/minibert/", "", name) for name in re.findall(r"`([^`]+\.(?:py|md))`", text)]


def test_every_stop_exists_and_the_walkthrough_comes_first():
    order = readme_order()
    assert order[0] == "docs/walkthrough.md" and order[1] == "model.py", order
    missing = [name for name in order[1:] if not (PACKAGE / name).is_file()]
    assert not missing and (ROOT / order[0]).is_file(), missing


def stops_named_in(page: str, first: str) -> list[str]:
    """The reading order's files as the paragraph of ``page`` that names ``first`` gives them, in its order."""
    order = readme_order()
    paragraphs = (ROOT / page).read_text(encoding="utf-8").split("\n\n")
    paragraph = next((text for text in paragraphs if f"`{first}`" in text), "")
    return [name for name in named_files(paragraph) if name in order]


def test_the_walkthrough_ends_with_the_readme_order():
    assert stops_named_in("docs/walkthrough.md", "src/minibert/model.py") == readme_order()[1:]


def test_contributing_gives_the_readme_order():
    assert stops_named_in("docs/CONTRIBUTING.md", "docs/walkthrough.md") == readme_order()


def test_config_py_opens_with_bert_config():
    """The first definition after the imports is the class a learner opened the file for."""
    tree = ast.parse((PACKAGE / "config.py").read_text(encoding="utf-8"))
    statements = [node for node in tree.body[1:] if not isinstance(node, (ast.Import, ast.ImportFrom))]
    assert isinstance(statements[0], ast.ClassDef) and statements[0].name == "BertConfig", ast.dump(statements[0])[:80]
