"""JSON as minibert reads it from files it did not write (config.json, tokenizer.json,
sentence-transformers' configs, a safetensors header) and from requests: parsed, with its nesting
bounded, or refused in an error that says what is wrong.

Python's parser recurses once per nested list or object: 100,000 levels raise a RecursionError
from deep inside it, and a few hundred that do parse still break later code that walks the value
(``json.dumps`` in an error message, say). No file or request minibert reads nests deeper than a
handful of levels, so ``MAX_NESTING`` (64) refuses such input up front, whatever reads it.

Python's parser also reads ``NaN``, ``Infinity`` and ``-Infinity``, which are not JSON, and turns
``1e999`` into infinity. Files written by Python may hold them, so files are read as Python reads
them; a request is read ``strict``ly, as RFC 8259 defines JSON (and as other servers read it):

>>> parse_json('{"dimensions": NaN}', strict=True)
Traceback (most recent call last):
ValueError: NaN is not JSON (JSON has no NaN or Infinity)
>>> parse_json("[1e999]", strict=True)
Traceback (most recent call last):
ValueError: the number 1e999 is too large for a 64-bit float

An integer of more than 4,300 digits is refused as Python 3.11 refuses it (converting it takes time
that grows with the square of its length), but in words that do not send an HTTP client to a Python
function it cannot call (``sys.set_int_max_str_digits``). From 3.11 on Python's own refusal is
reworded, so integers stay on the C parser's fast path (a Python ``parse_int`` hook makes a body of
token ids 4-5 times slower to read); 3.10, whose ``int()`` has no limit, checks each integer itself:

>>> parse_json('{"dimensions": ' + "9" * 5000 + "}")
Traceback (most recent call last):
ValueError: a number of 5000 digits, more than the 4300 an integer may have
"""

from __future__ import annotations

import json
import math
import os
import re
import sys

from ..errors import CheckpointError

MAX_NESTING = 64
MAX_INTEGER_DIGITS = 4_300  # Python's own default limit (sys.get_int_max_str_digits, from 3.11 on)
# Python's words when int() refuses a long integer (3.11 on): the limit and the length are read from them
_PYTHON_DIGIT_LIMIT = re.compile(r"^Exceeds the limit \((\d+) digits\) for integer string conversion.*?(\d+) digits")


def parse_json(text: str | bytes, max_nesting: int = MAX_NESTING, *, strict: bool = False, unique_keys: bool = False):
    """The value of ``text``, or ValueError (not JSON, not UTF-8, or nested deeper than
    ``max_nesting`` lists and objects; ``strict``: NaN, Infinity or a number beyond a float;
    ``unique_keys``: an object that gives a key twice, whose first value json.loads drops)."""
    hooks = {"parse_int": _bounded_int} if _checks_integers_itself() else {}
    if strict:
        hooks.update(parse_constant=_not_json, parse_float=_finite_float)
    if unique_keys:
        hooks.update(object_pairs_hook=refusing_duplicate_keys)
    try:
        value = json.loads(text, **hooks)
    except RecursionError:
        raise ValueError(f"nested deeper than {max_nesting} levels") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"not UTF-8 (byte {error.start})") from None
    except ValueError as error:
        raise _reworded(error) from None
    depth = _depth(value)
    if depth > max_nesting:
        raise ValueError(f"nested more than {max_nesting} levels deep (lists and objects)")
    return value


def read_json(path: str | os.PathLike, what: str = "file"):
    """A JSON file's value; a file that is not (bounded, UTF-8) JSON is a CheckpointError naming it."""
    try:
        with open(path, "rb") as handle:
            return parse_json(handle.read())
    except ValueError as error:
        raise CheckpointError(f"malformed {what} {os.fspath(path)}: {error}") from None


def read_json_object(path: str | os.PathLike, what: str = "file") -> dict:
    value = read_json(path, what)
    if not isinstance(value, dict):
        raise CheckpointError(f"malformed {what} {os.fspath(path)}: the top level is not a JSON object")
    return value


def _depth(value, limit: int = MAX_NESTING + 1) -> int:
    """How deeply lists and objects nest in ``value`` (a scalar: 0), counted level by level without
    recursion, up to ``limit`` (deeper is reported as ``limit``)."""
    deepest, level = 0, [value] if isinstance(value, (dict, list)) else []
    while level and deepest < limit:
        deepest += 1
        level = [child for item in level for child in (item.values() if isinstance(item, dict) else item)
                 if isinstance(child, (dict, list))]
    return deepest


def refusing_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object as a dict; a key given twice (json.loads would keep the last) is a ValueError."""
    value = dict(pairs)
    if len(value) < len(pairs):  # (one pass: a served body may hold many keys, and keys.count() each was quadratic)
        seen, twice = set(), set()
        for key, _ in pairs:
            (twice if key in seen else seen).add(key)
        raise ValueError(f"the key {min(twice)!r} is given twice")
    return value


def _not_json(name: str):
    raise ValueError(f"{name} is not JSON (JSON has no NaN or Infinity)")


def _checks_integers_itself() -> bool:
    """Whether integers need the (slow) Python hook: on 3.10, which has no limit, and where a program
    lifted Python's limit (``sys.set_int_max_str_digits(0)`` or above 4,300) but JSON keeps it."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()
    return not 0 < limit <= MAX_INTEGER_DIGITS


def _bounded_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INTEGER_DIGITS:
        raise _too_many_digits(digits, MAX_INTEGER_DIGITS)
    return int(text)


def _reworded(error: ValueError) -> ValueError:
    """Python's refusal of a long integer in minibert's words; any other ValueError as it is."""
    found = _PYTHON_DIGIT_LIMIT.match(str(error)) if type(error) is ValueError else None
    return _too_many_digits(int(found[2]), int(found[1])) if found else error


def _too_many_digits(digits: int, limit: int) -> ValueError:
    return ValueError(f"a number of {digits} digits, more than the {limit} an integer may have")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a 64-bit float")
    return value


def short_json(value) -> str:
    """A value as JSON, cut to 60 characters: an error line never carries a megabyte of config."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):  # not JSON (a value set from Python, not read from a file)
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def dumps_finite(value, **options) -> str:
    """``json.dumps(value, **options)`` of a result to write as JSON: a NaN or infinite number in it
    (which Python writes as ``NaN``/``Infinity``, and no JSON reader, minibert's included, takes back)
    is a ValueError naming where it is (``labels[1].score``)."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        where = _not_finite_at(value) or "a number"
        raise ValueError(f"the result's {where} is not a finite number, which JSON cannot write (the model computed "
                         "NaN or infinity: are its weights finite?); nothing was written after it") from None


def _not_finite_at(value, where: str = "") -> str | None:
    """The path of the first NaN or infinite float in ``value`` (dicts and lists), or None."""
    if isinstance(value, float):
        return where if not math.isfinite(value) else None
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found = _not_finite_at(child, f"{where}.{key}" if isinstance(key, str) else f"{where}[{key}]")
        if found is not None:
            return found.lstrip(".")
    return None
