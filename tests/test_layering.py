"""The package's imports point one way, down through its rooms (function-level imports included):

    apps/        the command, file outputs, the server, Ray, convert, verify     (top)
    explore/     the explorer page: what one forward pass shows, and the page that draws it
    training/    making a BERT: pre-training instances (create_pretraining_data), the training loop
    tasks/       one-call tasks: fill_mask, next_sentence, classify, tag, answer, rerank
    embedding/   Embedder, sentence-transformers recipes, streams
    heads        the networks with heads on top of BertModel
    core         config, activations, tokenizer/, inputs, fast_path, gemm, speed, int8, pretrained, model, weights
    formats/     safetensors, .bin, TensorFlow bundles, CRC32C, the hub, atomic files, the commands' line files
    base         errors, runtime                                                  (bottom)

A module imports only modules of its own room or the rooms below; within apps/, the optional
rooms (the server, the Ray adapter, the verifier, the explorer) are imported by the commands alone
(apps/commands.py, apps/explore_command.py), or by nothing but the re-export minibert.ray.
"""

from __future__ import annotations

import ast
from pathlib import Path

import minibert

PACKAGE = Path(minibert.__file__).parent
ROOMS = ["base", "formats", "core", "heads", "embedding", "tasks", "training", "explore", "apps"]
BASE = {"errors", "runtime", "__init__"}
CORE = {"config", "activations", "inputs", "fast_path", "gemm", "speed", "int8", "int8_check", "pretrained", "model",
        "weights", "transformers_names"}  # fmt: skip
# Each optional room in apps/, and the only modules allowed to import it.
OPTIONAL = {"apps.serve": {"apps.commands"}, "apps.verify": {"apps.commands"}, "apps.ray": {"ray"},
            "apps.http_limits": {"apps.serve"}, "explore": {"apps.explore_command"}}  # fmt: skip


def module_name(path: Path) -> str:
    """src/minibert/formats/hub.py → 'formats.hub'; a package's __init__ → its folder's name."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def room(module: str) -> str:
    first = module.split(".")[0]
    if module in BASE:
        return "base"
    if first in ("formats", "embedding", "tasks", "training", "explore", "apps"):
        return first
    if first == "tokenizer" or module in CORE:
        return "core"
    if module in ("ray", "__main__"):  # the re-export of apps.ray where users import it; python -m minibert
        return "apps"
    return module  # heads


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def resolve(module: str, node: ast.ImportFrom) -> list[str]:
    """The minibert modules an ``import`` node names, as dotted names under minibert."""
    if node.level == 0:
        if not (node.module or "").startswith("minibert"):
            return []
        base = node.module.split(".")[1:]
    else:
        is_package = MODULES[module].name == "__init__.py"
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
    found = []
    for alias in node.names:  # `from .formats import hub` names a module; `from .model import X` does not
        candidate = ".".join([*base, alias.name])
        found.append(candidate if candidate in MODULES else ".".join(base) or "__init__")
    missing = [name for name in found if name not in MODULES]
    assert not missing, f"{module} imports {missing[0]!r}, which is not a minibert module"
    return found


def imports_of(module: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            found.update(resolve(module, node))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("minibert."):
                    name = alias.name.removeprefix("minibert.")
                    found.add(name if name in MODULES else name.rsplit(".", 1)[0])
    return found - {module, "__init__"}


GRAPH = {module: imports_of(module) for module in MODULES if module}


def test_every_import_of_minibert_names_a_module_that_exists():
    """(Checked while GRAPH is built: an import of a moved module that nothing else exercises.)"""
    assert len(GRAPH) > 30


def test_the_rooms_are_the_folders_and_every_module_has_one():
    assert {"formats.hub", "embedding.embedder", "apps.cli", "tokenizer.bert_tokenizer", "model"} <= set(GRAPH)
    assert GRAPH["embedding.embedder"] >= {"model", "embedding.batches"}  # the parser sees imports
    assert GRAPH["apps.serve"] >= {"embedding.embedder"}
    for module in GRAPH:
        assert room(module) in ROOMS, f"{module} belongs to no room"


def test_imports_point_down_only():
    for module, imported in GRAPH.items():
        for target in imported:
            assert ROOMS.index(room(target)) <= ROOMS.index(room(module)), (
                f"{module} ({room(module)}) imports {target} ({room(target)}), a room above it"
            )


def test_the_optional_rooms_are_imported_only_by_the_command():
    for top, allowed in OPTIONAL.items():
        importers = {module for module, imported in GRAPH.items() if top in imported}
        assert importers <= allowed, f"{sorted(importers - allowed)} import {top}, an optional room"


def test_the_import_graph_has_no_cycle():
    visiting, done = [], set()

    def visit(module: str) -> None:
        if module in done:
            return
        assert module not in visiting, f"import cycle: {' -> '.join([*visiting[visiting.index(module) :], module])}"
        visiting.append(module)
        for imported in GRAPH.get(module, ()):
            visit(imported)
        visiting.pop()
        done.add(module)

    for module in GRAPH:
        visit(module)
