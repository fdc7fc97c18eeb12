"""The house's sizes (docs/CONTRIBUTING.md, Style): a file, a class and a function each hold one idea,
so none grows past the size a reader takes in at once.

* no module of src/minibert or scripts/ over 400 lines;
* no function over 60 lines in the core (the book a newcomer reads: model.py, heads.py, losses.py,
  config.py, activations.py, inputs.py, tokenizer/, loading/), none over 100 anywhere in
  src/ and scripts/;
* no class over 300 lines;
* at most 12 modules directly in src/minibert/ (the rest live in the folders that show the layers).

Sizes are counted in lines from the ``def``/``class`` line to the last line of the body (ast's
``lineno`` to ``end_lineno``); a method counts as a function, named ``Class.method``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "minibert"
SCRIPTS = ROOT / "scripts"

MAX_FILE_LINES = 400
MAX_CORE_FUNCTION_LINES = 60
MAX_FUNCTION_LINES = 100
MAX_CLASS_LINES = 300
MAX_TOP_LEVEL_MODULES = 12
CORE_FILES = ("model.py", "heads.py", "losses.py", "config.py", "activations.py", "inputs.py")
CORE_FOLDERS = ("tokenizer", "loading")


def python_files() -> list[Path]:
    """Every module of the package (src/minibert/**) and of scripts/."""
    return sorted(PACKAGE.rglob("*.py")) + sorted(SCRIPTS.glob("*.py"))


def core_files() -> list[Path]:
    files = [PACKAGE / name for name in CORE_FILES if (PACKAGE / name).exists()]
    return files + [path for folder in CORE_FOLDERS for path in sorted((PACKAGE / folder).rglob("*.py"))]


def named(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def definitions(path: Path, kinds: tuple[type, ...]) -> list[tuple[str, int]]:
    """[(qualified name, lines)] of every definition of ``kinds`` in the file, nested ones too."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if isinstance(child, kinds):
                    found.append((name, child.end_lineno - child.lineno + 1))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), "")
    return found


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _too_long(files: list[Path], kinds: tuple[type, ...], limit: int) -> list[str]:
    return [
        f"{named(path)}: {name} is {length} lines"
        for path in files
        for name, length in definitions(path, kinds)
        if length > limit
    ]


def test_no_file_is_over_400_lines():
    long_files = [f"{named(path)} is {count} lines" for path in python_files()
                  if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES]  # fmt: skip
    assert not long_files, f"files over {MAX_FILE_LINES} lines (split along a concept): {long_files}"


def test_no_function_of_the_core_is_over_60_lines():
    long_functions = _too_long(core_files(), FUNCTIONS, MAX_CORE_FUNCTION_LINES)
    assert not long_functions, f"core functions over {MAX_CORE_FUNCTION_LINES} lines: {long_functions}"


def test_no_function_is_over_100_lines():
    long_functions = _too_long(python_files(), FUNCTIONS, MAX_FUNCTION_LINES)
    assert not long_functions, f"functions over {MAX_FUNCTION_LINES} lines: {long_functions}"


def test_no_class_is_over_300_lines():
    long_classes = _too_long(python_files(), (ast.ClassDef,), MAX_CLASS_LINES)
    assert not long_classes, f"classes over {MAX_CLASS_LINES} lines: {long_classes}"


def test_at_most_12_modules_directly_in_the_package():
    modules = sorted(path.name for path in PACKAGE.glob("*.py") if path.name not in ("__init__.py", "__main__.py"))
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, (
        f"{len(modules)} modules directly in src/minibert/ (at most {MAX_TOP_LEVEL_MODULES}; move the rest into "
        f"the folder of their layer): {modules}"
    )


@pytest.mark.parametrize(
    "source, kinds, limit, expected",
    [
        ("def f():\n" + "    x = 1\n" * 60 + "\n", FUNCTIONS, 60, ["f is 61 lines"]),
        ("def f():\n" + "    x = 1\n" * 59 + "\n", FUNCTIONS, 60, []),
        ("class A:\n    def m(self):\n" + "        x = 1\n" * 60, FUNCTIONS, 60, ["A.m is 61 lines"]),
        ("class A:\n" + "    x = 1\n" * 300, (ast.ClassDef,), 300, ["A is 301 lines"]),
    ],
)  # fmt: skip
def test_the_counter_names_the_function_and_its_length(tmp_path, source, kinds, limit, expected):
    """The control: a definition one line past a limit is reported with its name and length."""
    path = tmp_path / "example.py"
    path.write_text(source, encoding="utf-8")
    found = [f"{name} is {length} lines" for name, length in definitions(path, kinds) if length > limit]
    assert found == expected
