"""What ``Embedder.embed`` takes as texts: one str, or a sequence of str (an ordered collection).

The rows ``embed`` returns are in the order of the texts, so the texts must have an order, and each
must be a str. Anything else is a ``TextsError`` (a TypeError, and a ValueError as
sentence-transformers' ``encode`` raises for it) that names what to pass, never read some other way:

* a dict: sentence-transformers reads ``{"text": "..."}`` as one input (its multimodal form), where
  iterating it would embed its keys; minibert embeds texts, so the dict is refused and the message
  says to pass ``row["text"]``;
* a set or a frozenset (or a dict's keys or items): no order to match the rows back to the texts;
* None, bytes, a number, a 0-d numpy array, a list holding anything but str.

A list, a tuple, a numpy array of str, a pandas Series, a generator: read in their order.

    >>> texts_as_list(("a", "b"))
    ['a', 'b']
    >>> texts_as_list({"b", "a"})   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    minibert.errors.TextsError: texts is a set, which has no order: ... pass a list (sorted(texts), for one)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set

from ..errors import TextsError

_WHAT = "texts must be a str or a sequence of str"


def texts_as_list(texts) -> list[str]:
    """``texts`` (not a single str: ``embed`` wraps one itself) as a list of str, in order, or a
    TextsError naming what to pass."""
    if isinstance(texts, Mapping):
        raise TextsError(
            f"{_WHAT}, got a {type(texts).__name__}: a dict is sentence-transformers' multimodal input "
            '({"text": ...}), which minibert does not read; pass its text, embed(row["text"]), or '
            '[row["text"] for row in rows]'
        )
    if isinstance(texts, Set):
        raise TextsError(f"texts is a {type(texts).__name__}, which has no order: the rows could not be "
                         "matched back to the texts; pass a list (sorted(texts), for one)")  # fmt: skip
    zero_d = getattr(texts, "ndim", None) == 0  # a numpy array of one value, which cannot be iterated
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Iterable) or zero_d:
        hint = " (a 0-d array: pass [str(texts)])" if zero_d else ""
        raise TextsError(f"{_WHAT}, got {type(texts).__name__}{hint}")
    texts = list(texts)
    wrong = next((index for index, text in enumerate(texts) if not isinstance(text, str)), None)
    if wrong is not None:
        kind = type(texts[wrong]).__name__
        hint = ' (a dict: pass its text, row["text"])' if isinstance(texts[wrong], Mapping) else ""
        raise TextsError(f"{_WHAT}: item {wrong} is a {kind}{hint}")
    return texts
