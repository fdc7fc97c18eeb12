"""Checks of the arguments users pass to the tokenizer: a flag is True or False (a "no" is not
quietly truthy), a count an int in range, a token id an int, one text where one text is taken."""

from __future__ import annotations

import operator

from ..errors import InputTypeError


def one_text(value, method: str, for_a_batch: str) -> str:
    """``value`` if it is one str; else an InputTypeError saying what was passed and, for a list of
    texts, what to call instead (``for_a_batch``): ``tokenize(["a", "b"])`` is a common first mistake."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        raise InputTypeError(
            f"{method} takes one str, got a {type(value).__name__} of {len(value)} texts; for a batch: {for_a_batch}"
        )
    raise InputTypeError(f"{method} takes one str, got {type(value).__name__} {_short(value)}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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


def check_count(value, name: str, *, minimum: int, optional: bool = False) -> int | None:
    """An int argument of at least ``minimum``, or None where that is allowed, returned as a Python
    int: ints and integer scalars pass (``np.max(lengths)``, a 0-d tensor), as transformers takes them;
    bools, floats and strings do not."""
    if value is None and optional:
        return None
    count = None if isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool") else \
        _index_or_none(value)  # fmt: skip
    if count is None or count < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}{' or None' if optional else ''}, got {value!r}")
    return count


def _index_or_none(value) -> int | None:
    try:
        return operator.index(value)
    except TypeError:
        return None


# transformers' ``model_max_length`` for "no limit": what a tokenizer gets when its folder states
# none (``VERY_LARGE_INTEGER``, int(1e30) = 1000000000000000019884624838656, the number its
# save_pretrained then writes). Any value above ``LARGE_INTEGER`` means "no limit" to transformers'
# call: ``truncation=True`` without ``max_length`` does not cut, ``padding="max_length"`` does not pad.
VERY_LARGE_INTEGER = int(1e30)
LARGE_INTEGER = int(1e20)


def has_length_limit(model_max_length) -> bool:
    """Whether a tokenizer's ``model_max_length`` is a length (False: transformers' "no limit").
    A caller that needs a length takes the model's ``max_position_embeddings`` when it is not, as
    sentence-transformers does: ``min(tokenizer.model_max_length, config.max_position_embeddings)``.

    >>> has_length_limit(512), has_length_limit(VERY_LARGE_INTEGER)
    (True, False)
    """
    return model_max_length <= LARGE_INTEGER
