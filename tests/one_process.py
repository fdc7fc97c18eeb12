"""A docs page's shell block with its ``minibert`` commands run in one Python process.

Each ``python -m minibert`` pays ~3 s of imports (torch, and matplotlib for a run's loss plot)
before it does anything; a block of five commands pays it five times. Here bash still reads the
block exactly as a user's shell would (quotes, ``\\`` continuations, ``$MODEL``), but ``minibert``
is a shell function that records each command's arguments (NUL-separated, one file per command);
after the block, one process runs them in order with ``minibert.apps.cli.main``, the function the
``minibert`` script and ``python -m minibert`` call. Before each command it prints the command to
stderr, and it stops at the first that fails, naming it, so a failure is still the command's own.

A recorded command runs after every other command of the block, so ``minibert_commands_come_last``
checks what makes that order the page's: in the block, no other command follows a ``minibert`` one.
"""

from __future__ import annotations

import re
import shlex

# argv of each recorded command, run in order; the exit status of the first that fails is the process's.
RUNNER = r"""
import os, shlex, sys
from pathlib import Path
from minibert.apps.cli import main

for path in sorted(Path(sys.argv[1]).iterdir(), key=lambda path: int(path.name)):
    argv = [os.fsdecode(argument) for argument in path.read_bytes().split(b"\0")[:-1]]
    command = "minibert " + shlex.join(argv)
    print(f"[test] $ {command}", file=sys.stderr, flush=True)
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's usage errors
        code = exit.code if isinstance(exit.code, int) else 1
    sys.stdout.flush()
    if code:
        print(f"[test] FAILED with exit status {code}: {command}", file=sys.stderr, flush=True)
        sys.exit(code)
"""


def minibert_commands_come_last(block: str) -> None:
    """The block's commands (``\\``-continued lines joined): after the first ``minibert`` command, only
    ``minibert`` commands, and no pipe or redirection of one (a recorded command's output is not there
    until the block's end)."""
    commands = [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    first = next(index for index, command in enumerate(commands) if command.startswith("minibert "))
    later = commands[first:]
    assert all(command.startswith("minibert ") for command in later), later
    assert not any(re.search(r"[|<>;&`]|\$\(", command) for command in later), later


def shell(block: str, python: str) -> str:
    """``block`` as a bash script: ``minibert`` records, and the recorded commands run at its end in one
    ``python`` process (``set -e``: a failed recording or a failed command fails the script)."""
    minibert_commands_come_last(block)
    record = ('_minibert_commands=$(mktemp -d)\n_minibert_count=0\n'
              'minibert() { _minibert_count=$((_minibert_count + 1)); '
              'printf \'%s\\0\' "$@" > "$_minibert_commands/$_minibert_count"; }\n')  # fmt: skip
    run = f'\n"{python}" -c {shlex.quote(RUNNER)} "$_minibert_commands"\nrm -rf "$_minibert_commands"\n'
    return record + block + run
