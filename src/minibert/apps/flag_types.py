"""Argument types the commands' flags share: one rule, one message, wherever a flag takes it."""

from __future__ import annotations

import argparse


def positive_int(value: str) -> int:
    """A whole number of 1 or more (``--steps``, ``--batch-size``, ``--top-k``, ``--max-batch-tokens``, ...).

    >>> positive_int("32")
    32
    >>> positive_int("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be a positive integer (1 or more), got 0
    """
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer (1 or more), got {value}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (1 or more), got {value}")
    return number
