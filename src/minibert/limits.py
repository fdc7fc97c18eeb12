"""The limits of a number a user gives (a flag, an option): one rule, one sentence naming them.

Options dataclasses put a field's limits in its metadata (``low``, ``high``; ``above_low``: the low
end excluded, ``below_high``: the high end excluded; ``unit``); ``limits_of(field)`` reads them
with the field's kind (int or float). The commands' flags are parsed by them (apps/flag_types.py)
and values made in Python are checked by them (``refuse_out_of_limits``): the same numbers, the same words.
A field whose metadata lists ``choices`` (``--precision``: fp32, bf16, fp16) is checked the same way
(``refuse_other_choices``): argparse refuses another word on the command line, this in Python.

>>> Limits(int, 0, 65_535).parse("70000")
Traceback (most recent call last):
ValueError: must be a whole number from 0 to 65535, got 70000
>>> Limits(float, 0.0, 1.0, above_low=True).rule
'a number above 0 and at most 1'
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import numbers
import operator
import os
import re

from .errors import DataError

_WHOLE = re.compile(r"[+-]?[0-9]+")  # ASCII digits only: int() would take '٣' and reject '²' with a raw message


@dataclasses.dataclass(frozen=True)
class Limits:
    kind: type  # int or float
    low: float | None = None
    high: float | None = None
    above_low: bool = False  # low itself is out
    below_high: bool = False  # high itself is out
    unit: str = ""

    @property
    def rule(self) -> str:
        """What a good value is, in words: "a whole number from 1 to 512"."""
        kind = "a whole number" if self.kind is int else "a number"
        low, high = _shown(self.low), _shown(self.high)
        unit = f" {self.unit}" if self.unit else ""
        lower = f"above {low}" if self.above_low else f"at least {low}"
        upper = f"below {high}" if self.below_high else f"at most {high}"
        if self.low is not None and self.high is not None:
            if self.above_low or self.below_high:
                return f"{kind} {lower} and {upper}{unit}"
            return f"{kind} from {low} to {high}{unit}"
        if self.low is not None:
            return f"{kind} {'above' if self.above_low else 'of at least'} {low}{unit}"
        if self.high is not None:
            return f"{kind} {'below' if self.below_high else 'of at most'} {high}{unit}"
        return f"{kind}{unit and ' of' + unit}"

    def parse(self, text: str):
        """The number ``text`` says, if it is within the limits; else ValueError saying them."""
        text = text.strip()
        if self.kind is int:
            if not _WHOLE.fullmatch(text):
                raise ValueError(f"must be {self.rule}, got {text!r}")
            value = int(text)
        else:
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"must be {self.rule}, got {text!r}") from None
        try:
            self.check(value)
        except ValueError:
            raise ValueError(f"must be {self.rule}, got {text}") from None  # as the user wrote it
        return value

    def check(self, value):
        """``value`` as a plain ``int`` or ``float`` (``plain_number``) if it is a number of this kind
        within the limits; else ValueError."""
        number = plain_number(value, self.kind)
        if number is None:  # the type is what is wrong: said (True is 1 to Python, 2.0 whole to a reader)
            raise ValueError(f"must be {self.rule}, got {value!r} (a {type(value).__name__})")
        if not math.isfinite(number):
            raise ValueError(f"must be {self.rule}, got {value!r}")
        value = number
        too_low = self.low is not None and (value <= self.low if self.above_low else value < self.low)
        too_high = self.high is not None and (value >= self.high if self.below_high else value > self.high)
        if too_low or too_high:
            raise ValueError(f"must be {self.rule}, got {value}")
        return value


def plain_number(value, kind: type) -> int | float | None:
    """``value`` as Python's own number if it is one of ``kind`` (int: a whole number; float: any real
    number, a whole one too), else None. NumPy's numbers (``np.int64(2)``, ``np.float32(0.15)``,
    what ``np.arange`` or a config read with NumPy gives) are numbers too: a whole one becomes the
    ``int`` it equals (``operator.index``), a real one the ``float`` (``np.float32(0.15)`` is
    0.15000000596046448, its exact value). ``True``/``False`` (NumPy's too) are not numbers here.

    >>> import numpy as np
    >>> plain_number(np.int64(2), int), plain_number(np.float32(0.5), float), plain_number(3, float)
    (2, 0.5, 3)
    >>> plain_number(2.0, int), plain_number(True, int), plain_number("2", int)
    (None, None, None)
    """
    if isinstance(value, bool) or type(value).__name__ == "bool_":  # (np.bool_: not a number either)
        return None
    if isinstance(value, int):
        return int(value)  # (a subclass of int: the int it is)
    try:
        return operator.index(value)  # np.int64, np.uint8 ...: whole numbers
    except TypeError:
        pass
    if kind is float and isinstance(value, numbers.Real):
        return float(value)
    return None


def _shown(bound) -> str:
    return f"{bound:g}" if isinstance(bound, float) else str(bound)


def limits_of(setting: dataclasses.Field) -> Limits | None:
    """The limits of an options field (its metadata's, with its kind: int or float), or None for a
    field that is not a number."""
    names = {"int": int, "int | None": int, "float": float, "float | None": float}
    kind = setting.type if setting.type in (int, float) else names.get(str(setting.type))
    if kind is None:
        return None
    metadata = setting.metadata
    return Limits(kind, metadata.get("low"), metadata.get("high"), metadata.get("above_low", False),
                  metadata.get("below_high", False), metadata.get("unit", ""))  # fmt: skip


def plain_numbers(options) -> None:
    """Set each number field of the dataclass value ``options`` that holds another type of number
    (``np.int64(2)``, ``np.float32(0.15)``) to Python's ``int``/``float`` it equals (``plain_number``),
    frozen dataclasses too: the options hold the numbers they print, compare and save as JSON. A value
    that is not a number of the field's kind is left for ``fields_out_of_limits`` to name."""
    for setting in dataclasses.fields(options):
        limits, value = limits_of(setting), getattr(options, setting.name)
        if limits is None or value is None or type(value) in (int, float):
            continue
        number = plain_number(value, limits.kind)
        if number is not None:
            object.__setattr__(options, setting.name, number)


def fields_out_of_limits(options) -> list[tuple[str, str]]:
    """(field name, what is wrong) for each number field of the dataclass value ``options`` outside
    its limits (None is allowed where the field's default is None)."""
    problems = []
    for setting in dataclasses.fields(options):
        limits, value = limits_of(setting), getattr(options, setting.name)
        if limits is None or (value is None and setting.default is None):
            continue
        try:
            limits.check(value)
        except ValueError as error:
            problems.append((setting.name, str(error)))
    return problems


def option(help: str, **metadata) -> dict:
    """A field's flag: its help, its limits (``low``, ``high``, ``above_low``, ``below_high``) and
    other argparse options; ``why``: what a limit is for, said when a value passes it;
    ``unset_means``: the value a default of None becomes (a resume command leaves it out too)."""
    return {"help": help, **metadata}


def refuse_out_of_limits(options, flags: bool) -> None:
    """DataError naming the first field outside its limits (as its ``--flag`` when ``flags``), and
    why the limit is there where the field says. NumPy numbers within the limits are accepted, made
    Python's own first (``plain_numbers``)."""
    plain_numbers(options)
    problems = fields_out_of_limits(options)
    if problems:
        name, problem = problems[0]
        why = {setting.name: setting.metadata.get("why") for setting in dataclasses.fields(options)}[name]
        shown = "--" + name.replace("_", "-") if flags else name
        raise DataError(f"{shown} {problem}" + (f" ({why})" if why else ""))


def refuse_other_choices(options, flags: bool) -> None:
    """DataError naming the first field whose value is not among its metadata's ``choices`` (as its
    ``--flag`` when ``flags``), and the choices; None passes where the field's default is None."""
    for setting in dataclasses.fields(options):
        choices, value = setting.metadata.get("choices"), getattr(options, setting.name)
        if choices is None or (value is None and setting.default is None) or value in choices:
            continue
        shown = "--" + setting.name.replace("_", "-") if flags else setting.name
        raise DataError(f"{shown} {value!r}: must be one of {', '.join(map(str, choices))}")


def model_name(text: str) -> str:
    """An argparse type for --model (and pretrain's --init): a hub id or a directory, never empty
    (``--model "$MODEL"`` with the variable unset is a usage error naming the flag, not "no --model":
    that would load another model, the default or a bundled one).

    >>> model_name("")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: is empty: give a hub id or a local directory
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a hub id or a local directory")
    return text


def file_name(text: str) -> str:
    """An argparse type for a file read (finetune's --train and --dev): never empty (``--dev "$DEV"``
    with the variable unset is a usage error naming the flag, not "no --dev": a run without its
    evaluation, nor "." for --train)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name the file to read (a variable left unset?)")
    return text


class OutputName(str):
    """A name an --output flag (or convert's destination) gave: a str, marked as what the command
    writes, so that the command line can check every output's name before any work
    (``apps.flag_types.refuse_output_names_too_long``)."""

    def files(self) -> list[str]:
        return [str(self)]


class OutputNames(OutputName):
    """Several output files joined by commas (pretraining-data's --output)."""

    def files(self) -> list[str]:
        return self.split(",")


def output_name(text: str) -> str:
    """An argparse type for every --output (and convert's destination): a file or folder name, never
    empty. ``--output "$OUT"`` with the variable unset must not become ``Path("")``, the current
    folder (files scattered into it), nor "no --output" (printed instead of written): it is a usage
    error naming the flag, and nothing is written.

    >>> output_name("run")
    'run'
    >>> output_name(" ")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: is empty: name the file or folder to write (a variable left unset?)
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name the file or folder to write (a variable left unset?)")
    return OutputName(text)


def output_names(text: str) -> str:
    """An argparse type for an --output that may name several files joined by commas (pretraining-data
    writes its instances round-robin over them): none of them empty, none a folder. ``shards/`` can
    only mean a folder (``Path("shards/")`` would drop the slash and write a file named ``shards``),
    and an existing directory is not a file to write: each is a usage error naming it.

    >>> output_names("a.tfrecord,b.tfrecord")
    'a.tfrecord,b.tfrecord'
    >>> output_names("a.tfrecord,")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: names an empty file in 'a.tfrecord,': join file names by single commas
    >>> output_names("shards/")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: 'shards/' names a folder: name the file(s) to write
    """
    output_name(text)
    names = text.split(",")
    if any(not name.strip() for name in names):
        raise argparse.ArgumentTypeError(f"names an empty file in {text!r}: join file names by single commas")
    for name in names:
        if names_a_folder(name):
            raise argparse.ArgumentTypeError(f"{name!r} names a folder: name the file(s) to write")
        if os.path.isdir(name):
            raise argparse.ArgumentTypeError(f"{name!r} is a directory: name the file(s) to write in it")
    return OutputNames(text)


def names_a_folder(name: str | os.PathLike) -> bool:
    """Whether the path as written can only be a folder: it ends in a separator (``shards/``) or in
    ``.``/``..``. A ``Path`` drops a trailing slash, so the check reads the name as given.

    >>> names_a_folder("shards/"), names_a_folder("out/.."), names_a_folder("out/a.tfrecord")
    (True, True, False)
    """
    text = os.fspath(name)
    separators = (os.sep, os.altsep) if os.altsep else (os.sep,)
    return text.endswith(separators) or os.path.basename(text) in (".", "..")
