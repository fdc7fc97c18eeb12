"""A test run leaves nothing in the machine's temporary folder (tests/conftest.py's scratch folder).

Temporary files made outside ``tmp_path`` (a doctest's ``tempfile.mkdtemp()``, torchrun's
``torchelastic_*`` folders, Ray's session folders, anything a subprocess makes) land in one scratch
folder per test process, removed when the session ends. Before it, every CI run left some thirty
folders in /tmp.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import conftest


def test_temporary_files_of_this_process_land_in_the_scratch_folder():
    made = Path(tempfile.mkdtemp())
    assert made.parent == Path(conftest.SCRATCH_DIR)
    assert Path(os.environ["MINIBERT_CACHE_DIR"]).parent == Path(conftest.SCRATCH_DIR)


def test_a_subprocess_makes_its_temporary_files_there_too():
    where = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
                           capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert where == conftest.SCRATCH_DIR


def test_a_workers_scratch_sits_beside_its_controllers_not_inside():
    """An xdist worker inherits its controller's $TMPDIR; its own scratch is named after the
    controller's, in the same folder, so the controller can remove it and paths stay short (Ray's
    Unix sockets live under it, 107 bytes at most)."""
    controller = Path(os.environ["MINIBERT_TESTS_SCRATCH"])
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    here = Path(conftest.SCRATCH_DIR)
    assert here == (controller.with_name(f"{controller.name}-{worker}") if worker else controller)
    assert here.parent == controller.parent and not controller.parent.name.startswith("mb-tests-")
