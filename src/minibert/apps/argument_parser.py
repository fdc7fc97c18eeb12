"""argparse as minibert's commands use it: one line for a usage error, and help that reaches stdout.

argparse prints a usage error as the command's whole usage and then the message; minibert says one
line, as for every other error (docs/cli.md), with the way to the help. Words left over get the
command's own hint (``tokenize "A" "B"``: a pair is ``--pair``). ``--gemm`` given after the name of a
command that runs no model is said as such: argparse took its value for the command's text and
called the text "unrecognized". Help and version text go through ``standard_streams.write_help``
(argparse drops a failed write and exits 0).
"""

from __future__ import annotations

import argparse

from .standard_streams import write_help

# A command that runs no model given --gemm (before its name, or after it).
NO_GEMM = "--gemm picks the linear layers' library of a model the command runs; minibert {command} runs none"


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr like every other error."""

    def error(self, message: str):
        self.exit(2, f"minibert: error: {message} (see '{self.prog} --help')\n")

    def _print_message(self, message, file=None):  # (argparse drops a failed write: standard_streams.py)
        if message:
            write_help(message, file)

    def parse_args(self, args=None, namespace=None):
        """argparse's, with the command's hint for words left over (``tokenize "A" "B"``: use --pair)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if any(extra.split("=")[0] == "--gemm" for extra in extras):  # (after the name of a command that takes none)
            self.error(NO_GEMM.format(command=parsed.command))
        if extras:  # (the hint is for words left over, not for a flag the command does not take)
            hint = "" if any(extra.startswith("-") for extra in extras) else getattr(parsed, "extras_hint", "")
            self.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed
