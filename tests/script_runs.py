"""Running scripts/ from the tests (test_scripts*.py): the folder on sys.path (a test imports a
script's functions), one script run in a subprocess, an environment in which a package is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))


def run_script(name: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPTS / name), *args], capture_output=True, text=True,
                          timeout=900, cwd=cwd, env=dict(os.environ))  # fmt: skip


def environment_without(tmp_path, *modules: str) -> dict:
    """An environment in which importing each of ``modules`` fails as if it were not installed."""
    for module in modules:
        package = tmp_path / "hidden" / module
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(
            f"raise ModuleNotFoundError({f'No module named {module!r}'!r}, name={module!r})\n"
        )
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "hidden"), os.environ.get("PYTHONPATH", "")])}
