"""The commands' flags, made one way: every count, seed and rate flag parsed by one rule that names
its limits (argparse names the flag: "argument --top-k: must be a whole number of at least 1, got
0"), and the flags of an options dataclass made from its fields, so that each default, limit and
help is written once, beside the field (limits.py holds the rule).

>>> positive_int("32")
32
>>> whole_number(0, 65_535)("70000")
Traceback (most recent call last):
argparse.ArgumentTypeError: must be a whole number from 0 to 65535, got 70000
"""

from __future__ import annotations

import argparse
import dataclasses

from ..formats.atomic_files import refuse_a_name_too_long
from ..limits import (  # noqa: F401 (model_name, output_name, output_names: the commands' types for --model, --output)
    Limits,
    OutputName,
    limits_of,
    model_name,
    output_name,
    output_names,
)


def parser_of(limits: Limits):
    """An argparse type for numbers within ``limits``."""

    def parse(value: str):
        try:
            return limits.parse(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = "whole number" if limits.kind is int else "number"  # argparse's fallback names the type
    return parse


def whole_number(low: int | None = 1, high: int | None = None):
    """An argparse type: a whole number from ``low`` to ``high`` (None: no limit on that side).

    >>> whole_number(1)("²")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be a whole number of at least 1, got '²'
    """
    return parser_of(Limits(int, low, high))


def number(low: float | None = None, high: float | None = None, unit: str = ""):
    """An argparse type: a finite number from ``low`` to ``high``, in ``unit``."""
    return parser_of(Limits(float, low, high, unit=unit))


positive_int = whole_number(1)  # --steps, --batch-size, --top-k, --max-batch-tokens, ...


def number_list(limits: Limits, each: str = "each value"):
    """An argparse type: one or more numbers joined by commas, each within ``limits``, none twice
    (nor two that print alike with ``:g``, as a sweep names its trial folders: 1e-05 and 1.0000001e-05).

    >>> number_list(Limits(float, 0.0, above_low=True), "each rate")("2e-5, 3e-5")
    [2e-05, 3e-05]
    >>> number_list(Limits(float, 0.0, above_low=True), "each rate")("1e-3,-1")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: each rate must be a number above 0, got -1 (in '1e-3,-1')
    """

    def parse(text: str) -> list:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"names no value: give one or more, joined by commas (got {text!r})")
        values = []
        for word in text.split(","):
            try:
                values.append(limits.parse(word))
            except ValueError as error:
                raise argparse.ArgumentTypeError(f"{each} {error} (in {text!r})") from None
        spelled = [f"{value:g}" for value in values]
        twice = next((word for word in spelled if spelled.count(word) > 1), None)
        if twice is not None:
            given = [word.strip() for word, printed in zip(text.split(","), spelled) if printed == twice]
            alike = {value for value, printed in zip(values, spelled) if printed == twice}
            said = (f"{given[0]} is given {len(given)} times" if len(set(given)) == 1 else
                    f"{' and '.join(given)} are the same number" if len(alike) == 1 else
                    f"{' and '.join(given)} print alike ({twice}, as a sweep names its trial folders)")  # fmt: skip
            raise argparse.ArgumentTypeError(f"{said}: give each once")
        return values

    parse.__name__ = "list of numbers"
    return parse

# --dtype of the commands that run a model (embed, similarity, classify, tag, answer, rerank, serve)
DTYPES = ("float32", "bfloat16", "float16", "auto", "fastest", "int8")
DTYPE_HELP = ("the model's weights: float32 (default), bfloat16 or float16 (for a GPU); auto: the checkpoint's own "
              "(as transformers' dtype='auto'); fastest: bfloat16 on a GPU that has it and where it is measured "
              "faster on this CPU, else float32; int8: the encoder's linear layers in int8 on the CPU, checked "
              "against float32 at load (docs/int8.md)")  # fmt: skip


DEVICE_HELP = ("where the model runs: auto (default: CUDA where torch sees a GPU, else the CPU; a GPU used is named "
               "on stderr), cpu, cuda, cuda:N")  # fmt: skip


def label_list(text: str) -> list[str]:
    """An argparse type: a classifier's labels in id order, comma-separated (a label holding a comma
    is quoted, as in a CSV row: loading/head_labels.py ``parse_labels``).

    >>> label_list("contradiction, entailment,neutral")
    ['contradiction', 'entailment', 'neutral']
    >>> label_list('pos,neg,"a,b"')
    ['pos', 'neg', 'a,b']
    """
    import argparse

    from ..loading.head_labels import parse_labels

    try:
        return parse_labels(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


ARGPARSE_KEYS = ("help", "action", "choices", "nargs", "required", "metavar", "type")


def add_flags(parser, options_class, *, only: list[str] | None = None, groups: dict | None = None) -> None:
    """A ``--flag`` for each field of ``options_class`` whose metadata has a ``help``: its type (the
    metadata's, else its limits' parser), its default (the field's), its ``flag`` name where that is
    not the field's (``--cased`` for ``do_lower_case``, with ``action="store_false"``). ``only``:
    these fields alone; ``groups``: {field: the argparse group to add it to}."""
    for setting in dataclasses.fields(options_class):
        if "help" not in setting.metadata or (only is not None and setting.name not in only):
            continue
        options = {key: setting.metadata[key] for key in ARGPARSE_KEYS if setting.metadata.get(key) is not None}
        options["dest"] = setting.name
        if options.get("action") not in ("store_true", "store_false"):
            limits = limits_of(setting)
            if "type" not in options and limits is not None:
                options["type"] = parser_of(limits)
            if setting.default is not dataclasses.MISSING:
                options["default"] = setting.default
                if setting.default is not None and "default" not in options["help"]:
                    options["help"] += (
                        f" (default {setting.default:g})"
                        if isinstance(setting.default, float)
                        else f" (default {setting.default})"
                    )
        flag = setting.metadata.get("flag") or "--" + setting.name.replace("_", "-")
        ((groups or {}).get(setting.name) or parser).add_argument(flag, **options)


def values_of(args: argparse.Namespace, options_class) -> dict:
    """{field: the parsed flag's value} for each field of ``options_class`` that has a flag."""
    return {setting.name: getattr(args, setting.name) for setting in dataclasses.fields(options_class)
            if "help" in setting.metadata and hasattr(args, setting.name)}  # fmt: skip


def refuse_output_names_too_long(args: argparse.Namespace) -> None:
    """"cannot write OUT: File name too long" (exit 1) for any output a command was given whose name
    the file system cannot hold, before any work: every flag typed ``output_name``/``output_names``
    is checked here, whether the command writes a file (embed, explore, plot) or a folder (convert,
    vocab, example-data, a run's --output), instead of each failing later in its own words."""
    for value in vars(args).values():
        for name in value if isinstance(value, list) else [value]:
            if isinstance(name, OutputName):
                for file in name.files():
                    refuse_a_name_too_long(file)
