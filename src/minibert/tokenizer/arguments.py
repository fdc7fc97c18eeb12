"""Checks of the arguments users pass to the tokenizer: a flag is True or False (a "no" is not
quietly truthy), a count an int in range, a token id an int."""

from __future__ import annotations

import operator


def check_flags(optional: bool = False, **flags) -> None:
    """Each flag True or False (or None where that means "the default"): a "no" is not falsy here."""
    for name, value in flags.items():
        if not (isinstance(value, bool) or (optional and value is None)):
            raise TypeError(f"{name} must be True or False{' or None' if optional else ''}, got {value!r}")


def token_id(value) -> int:
    """A token id as an int: ints and integer scalars (numpy, 0-d tensors) pass; "7", 7.0, None do not."""
    if isinstance(value, bool):
        raise TypeError(f"a token id must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"a token id must be an int, got {value!r}") from None


def check_count(value, name: str, *, minimum: int, optional: bool = False) -> None:
    """An int argument (not a bool) of at least ``minimum``, or None where that is allowed."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}{' or None' if optional else ''}, got {value!r}")
