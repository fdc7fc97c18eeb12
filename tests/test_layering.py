"""The package's imports point one way, down through its rooms (function-level imports included):

    apps/        the command, file outputs, the server, Ray, convert, verify     (top)
    explorer/    the explorer page: what one forward pass shows, and the page that draws it
    training/    making a BERT, in rooms of its own, bottom up: pretraining_data/ (Google's instances),
                 tasks/ (one record per task), options, run/ (the one loop), the sweeps
    tasks/       one-call tasks: fill_mask, next_sentence, classify, tag, answer, rerank
    embedding/   Embedder, sentence-transformers recipes, streams
    heads        the networks with heads on top of BertModel; auto, transformers' Auto names for them
    core         config, activations, tokenizer/, inputs, model, pretrained, loading/ (hub, checkpoint files,
                 the rename table, the strict loader, saving); speed/ (what makes the book fast and
                 plugs in through its seams: the fast path, the GEMM backend, bf16, int8, the one
                 measurement rule and the one cache, the CPU's facts, malloc settings)
    formats/     generic file formats: TFRecord, protobuf, CRC32C, JSON, atomic files, line files, the text check
    base         errors, limits                                                   (bottom)

A module imports only modules of its own room or the rooms below; within apps/, the optional
rooms (the server, the Ray adapter, the verifier, the explorer) are imported by the commands alone
(apps/commands.py, apps/explore_command.py), or by nothing but the re-export minibert.ray; of the
server's package, apps/serve/, the parser imports only the settings (no server library).

Nothing imports in a circle: not the package's modules, nor the scripts (scripts/*.py), which may
import each other and tests' helpers but never back.
"""

from __future__ import annotations

import ast
from pathlib import Path

import minibert

PACKAGE = Path(minibert.__file__).parent
ROOT = PACKAGE.parents[1]
ROOMS = ["base", "formats", "core", "heads", "embedding", "tasks", "training", "explorer", "apps"]
BASE = {"errors", "limits", "__init__"}
CORE = {"config", "activations", "inputs", "pretrained", "model",
        "task_choices"}
# Each optional room in apps/, and the only modules outside it allowed to import it (a package's
# modules import each other freely); apps.serve.settings is not optional: the parser builds its flags.
OPTIONAL = {"apps.serve": {"apps.commands"}, "apps.verify": {"apps.commands"}, "apps.ray": {"ray"},
            "explorer": {"apps.explore_command"}, "training.ray_trials": {"training.sweep"}}  # fmt: skip
NOT_OPTIONAL = {"apps.serve.settings"}


def module_name(path: Path) -> str:
    """src/minibert/loading/hub.py → 'loading.hub'; a package's __init__ → its folder's name."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def room(module: str) -> str:
    first = module.split(".")[0]
    if module in BASE:
        return "base"
    if first in ("formats", "embedding", "tasks", "training", "explorer", "apps"):
        return first
    if first in ("tokenizer", "loading", "speed") or module in CORE:
        return "core"
    if module in ("ray", "__main__"):  # the re-export of apps.ray where users import it; python -m minibert
        return "apps"
    # heads (auto.py: transformers' Auto names for them; losses.py: their losses, the labels checked)
    return "heads" if module in ("auto", "losses") else module


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
    assert {"loading.hub", "embedding.embedder", "apps.cli", "tokenizer.bert_tokenizer", "model"} <= set(GRAPH)
    assert GRAPH["embedding.embedder"] >= {"model", "embedding.hidden_states"}  # the parser sees imports
    assert GRAPH["embedding.hidden_states"] >= {"embedding.batches"}
    assert GRAPH["apps.serve.service"] >= {"embedding.options"}
    for module in GRAPH:
        assert room(module) in ROOMS, f"{module} belongs to no room"


def test_imports_point_down_only():
    for module, imported in GRAPH.items():
        for target in imported:
            assert ROOMS.index(room(target)) <= ROOMS.index(room(module)), (
                f"{module} ({room(module)}) imports {target} ({room(target)}), a room above it"
            )


def _inside(module: str, top: str) -> bool:
    return module == top or module.startswith(top + ".")


def test_the_optional_rooms_are_imported_only_by_the_command():
    for top, allowed in OPTIONAL.items():
        importers = {module for module, imported in GRAPH.items() if not _inside(module, top)
                     and any(_inside(target, top) and target not in NOT_OPTIONAL for target in imported)}  # fmt: skip
        assert importers <= allowed, f"{sorted(importers - allowed)} import {top}, an optional room"


def test_the_server_settings_import_no_server_library():
    """The parser builds `serve`'s flags from apps/serve/settings.py without the serve extra."""
    for module in ("apps.serve", "apps.serve.settings"):
        source = ast.parse(MODULES[module].read_text(encoding="utf-8"))
        names = {alias.name for node in ast.walk(source) if isinstance(node, ast.Import) for alias in node.names}
        names |= {node.module or "" for node in ast.walk(source) if isinstance(node, ast.ImportFrom)}
        assert not {name.split(".")[0] for name in names} & {"starlette", "uvicorn", "h11"}, module
        assert GRAPH[module] <= {"apps.flag_types"}, (module, GRAPH[module])


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in ``graph`` ({module: modules it imports}) as a path, or None."""
    visiting, done = [], set()

    def visit(module: str) -> list[str] | None:
        if module in done:
            return None
        if module in visiting:
            return [*visiting[visiting.index(module) :], module]
        visiting.append(module)
        for imported in sorted(graph.get(module, ())):
            if (cycle := visit(imported)) is not None:
                return cycle
        visiting.pop()
        done.add(module)
        return None

    return next((cycle for module in sorted(graph) if (cycle := visit(module)) is not None), None)


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_import_graph_has_no_cycle():
    cycle = find_cycle(GRAPH)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def script_imports() -> dict[str, set[str]]:
    """{script: the scripts and tests' helpers it imports}, function-level imports included (the
    scripts put scripts/ and tests/ on sys.path and import each other's modules by name)."""
    local = {path.stem: path for folder in ("scripts", "tests") for path in (ROOT / folder).glob("*.py")}
    graph = {}
    for name, path in local.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
        graph[name] = (found & set(local)) - {name}
    return graph


def test_the_scripts_import_no_circle():
    graph = script_imports()
    assert "bench" in graph and "corpus" in graph["bench"]  # the parser sees the scripts' imports
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle among scripts/ and tests/: {' -> '.join(cycle)}"


# training/'s own rooms, bottom up: the pre-training data needs nothing of training; the tasks read
# it; the options name the tasks; the run (its loop) takes a task and its options; the sweeps and
# the package's re-exports stand on the run.
TRAINING_ROOMS = ["training.pretraining_data", "training.tasks", "training.options", "training.run", "training"]


def training_room(module: str) -> str:
    return next(inner for inner in TRAINING_ROOMS if _inside(module, inner))


def test_training_rooms_point_down():
    training = {module: imported for module, imported in GRAPH.items() if _inside(module, "training")}
    assert {"training.run.loop", "training.tasks.classify", "training.pretraining_data.create"} <= set(training)
    for module, imported in training.items():
        for target in (target for target in imported if _inside(target, "training")):
            here, there = TRAINING_ROOMS.index(training_room(module)), TRAINING_ROOMS.index(training_room(target))
            assert there <= here, f"{module} ({TRAINING_ROOMS[here]}) imports {target} ({TRAINING_ROOMS[there]})"


def test_import_minibert_does_not_import_training_serving_or_ray():
    """Training, the server and Ray are loaded by their commands alone."""
    import subprocess
    import sys

    prefixes = ("minibert.training", "minibert.apps.serve", "ray", "starlette", "uvicorn")
    code = f"import sys, minibert; print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
