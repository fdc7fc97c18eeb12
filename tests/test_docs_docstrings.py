"""The examples in minibert's docstrings run: every module of the package is found (not listed by
hand), imported, and its examples run. Those marked ``# doctest: +SKIP`` need a hub checkpoint and
say so beside them.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import minibert

# ``python -m minibert`` runs the command when imported: it has no docstring examples to run.
NOT_IMPORTED = {"minibert.__main__"}
MODULES = ["minibert"] + sorted(
    info.name for info in pkgutil.walk_packages(minibert.__path__, "minibert.") if info.name not in NOT_IMPORTED
)


def test_every_module_is_found():
    """A module the walk missed would have its examples silently never run."""
    package = Path(minibert.__path__[0])
    files = {
        ".".join(["minibert", *path.relative_to(package).with_suffix("").parts]).removesuffix(".__init__")
        for path in package.rglob("*.py")
    }
    assert files - NOT_IMPORTED == set(MODULES), sorted((files - NOT_IMPORTED).symmetric_difference(MODULES))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
