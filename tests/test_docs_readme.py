"""The README's Python examples run as written, here in this process (those that name hub
checkpoints say so in their first line and are left out here; tests/test_docs_examples.py runs
every example of the README and docs/, those too, against a loopback hub), and its test command is
the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_the_readmes_python_examples_run(tmp_path, monkeypatch):
    runnable = [block for block in python_blocks() if "needs the hub" not in block.splitlines()[0]]
    assert runnable, "the README should have an example that runs offline"
    monkeypatch.chdir(tmp_path)
    for block in runnable:
        namespace: dict = {}
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102  (our own README)
    assert namespace["vectors"].shape == (2, 384)  # the quickstart's last block computed what it says


def test_the_readmes_test_command_is_what_ci_runs():
    command = re.search(r"\*\*Run the tests\*\*.*?```bash\n(.*?)\n```", README, flags=re.S).group(1)
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
