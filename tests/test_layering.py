"""The package's imports point one way: lower modules never import higher ones (function-level
imports included), and the optional rooms on top (the server, the Ray adapter, the verifier, the
command) are imported by nothing below them."""

from __future__ import annotations

import ast
from pathlib import Path

import minibert

PACKAGE = Path(minibert.__file__).parent
# Each room on top, and the only modules allowed to import it.
TOP = {"cli": {"__main__"}, "serve": {"cli"}, "verify": {"cli"}, "ray": set(), "__main__": set()}


def imports_of(path: Path) -> set[str]:
    """The minibert modules a file imports anywhere in it (top level or inside functions)."""
    modules = {file.stem for file in PACKAGE.glob("*.py")}
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module.split(".")[0]] if node.module else [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("minibert."):
            names = [node.module.split(".")[1]]
        elif isinstance(node, ast.Import):
            names = [alias.name.split(".")[1] for alias in node.names if alias.name.startswith("minibert.")]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def test_the_import_graph_has_no_cycle_and_nothing_below_imports_the_rooms_on_top():
    graph = {path.stem: imports_of(path) - {path.stem} for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    assert graph["embed"] >= {"model", "streams"} and graph["serve"] >= {"embed"}  # the parser sees imports
    for top, allowed in TOP.items():
        importers = {module for module, imported in graph.items() if top in imported}
        assert importers <= allowed, f"{sorted(importers - allowed)} import {top}.py, a module above them"
    visiting, done = [], set()

    def visit(module: str) -> None:
        if module in done:
            return
        assert module not in visiting, f"import cycle: {' -> '.join([*visiting[visiting.index(module) :], module])}"
        visiting.append(module)
        for imported in graph.get(module, ()):
            visit(imported)
        visiting.pop()
        done.add(module)

    for module in graph:
        visit(module)
