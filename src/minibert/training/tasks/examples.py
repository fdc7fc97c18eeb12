"""Labelled examples as people have them: the GLUE files as Google's and transformers' processors
read them, and any CSV, TSV or JSON-lines file with named columns.

An example is one text (``text_a``) or a pair (``text_a``, ``text_b``) and its label, as in Google's
``run_classifier.py`` (``InputExample``). ``line`` remembers where it came from, so that an error
can name the file and the line.

The GLUE files (``--glue NAME``), read as the reference processors read them — tab-separated,
without quote characters (``csv.reader(delimiter="\\t", quotechar=None)``), by column number:

    name    header   text_a  text_b  label    labels                              processor
    mrpc    skipped  3       4       0        0, 1                                Google's MrpcProcessor
    cola    none     3       —       1        0, 1                                Google's ColaProcessor
    mnli    skipped  8       9       last     contradiction, entailment, neutral  Google's MnliProcessor
    xnli    skipped  0       1       2        contradiction, entailment, neutral  Google's XnliProcessor (train)
    sst-2   skipped  0       —       1        0, 1                                transformers' Sst2Processor
    sts-b   skipped  7       8       last     (a score: --task regress)           transformers' StsbProcessor
    qqp     skipped  3       4       5        0, 1  (short lines skipped)         transformers' QqpProcessor
    qnli    skipped  1       2       last     entailment, not_entailment          transformers' QnliProcessor
    rte     skipped  1       2       last     entailment, not_entailment          transformers' RteProcessor
    wnli    skipped  1       2       last     0, 1                                transformers' WnliProcessor

(XNLI's training file says "contradictory" where its dev file says "contradiction": Google maps
the first to the second, and so does this reader. XNLI's dev file ``xnli.dev.tsv`` holds every
language: columns 6 and 7, the label in column 1, the language in column 0 — read with ``xnli-dev``.)

A generic file is chosen by its suffix: ``.csv`` (commas, a header row, quotes as Excel writes
them), ``.tsv`` (tabs, a header row; quotes as in a .csv, as pandas and ``datasets`` read it) or
``.jsonl`` (one JSON object per line). Its columns are named by ``--text-column`` (default
``text``), ``--pair-column`` (none by default) and ``--label-column`` (default ``label``).

A JSON-lines label may be a string or a number. A number is a label by its exact decimal value
(read as ``decimal.Decimal``, never rounded to a float): equal numbers are one label (``1``, ``1.0``
and ``1e0`` are the label "1"; ``1e20`` and ``100000000000000000000`` are one label; ``0.5`` is
"0.5"). ``NaN`` and ``Infinity``, which Python's ``json`` reads, are not JSON: refused. A
classifier's file that gives some labels as numbers and others as strings of numbers (``1`` and
``"1.0"``) is refused, naming both lines (``check_label_kinds``): whether they are one class would
depend on spelling. A number is written in ASCII digits (``DECIMAL``): ``1_5`` and ``٣``, which
Python's ``float()`` reads, are not numbers here, as they are not to pandas.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "reviews.csv"
>>> _ = path.write_text('text,label\\n"Great, really",pos\\nDull,neg\\n')
>>> [(e.text_a, e.label, e.line) for e in read_examples(path, ExampleFormat())]
[('Great, really', 'pos', 2), ('Dull', 'neg', 3)]
"""

from __future__ import annotations

import contextlib
import csv
import decimal
import io
import json
import os
import re
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path

from ...errors import DataError
from ...formats.json_files import refusing_duplicate_keys
from ...formats.line_files import name_suffix
from ...formats.plain_text import TextCheck
from ...loading.head_labels import shown_labels


@dataclass(frozen=True)
class Example:
    """One labelled text or pair (Google's ``InputExample``), and the line it was read from."""

    guid: str  # "train-3", as Google's processors name them
    text_a: str
    text_b: str | None
    label: str
    line: int  # 1-based line of the file (where a CSV record starts: a quoted field may span lines)
    label_is_number: bool = False  # it was a JSON number (a .jsonl file), spelled by its value (label_of_number)


@dataclass(frozen=True)
class GlueLayout:
    """Where one GLUE task keeps its fields (column numbers; -1 = the last column)."""

    header: bool  # the first line is a header, skipped
    text_a: int
    text_b: int | None
    label: int
    labels: tuple[str, ...]  # the processor's get_labels(), in its order ((): a score)
    skip_short_lines: bool = False  # QQP: transformers skips lines without the columns (IndexError)
    language: tuple[int, str] | None = None  # xnli-dev: (column, language kept)
    guid_column: int | None = None  # the guid is "train-" + this column (else + the line's index)


NLI = ("contradiction", "entailment", "neutral")
BINARY = ("0", "1")
GLUE = {
    "mrpc": GlueLayout(True, 3, 4, 0, BINARY),
    "cola": GlueLayout(False, 3, None, 1, BINARY),
    "mnli": GlueLayout(True, 8, 9, -1, NLI, guid_column=0),
    "xnli": GlueLayout(True, 0, 1, 2, NLI),
    "xnli-dev": GlueLayout(True, 6, 7, 1, NLI, language=(0, "zh")),
    "sst-2": GlueLayout(True, 0, None, 1, BINARY),
    "sts-b": GlueLayout(True, 7, 8, -1, (), guid_column=0),
    "qqp": GlueLayout(True, 3, 4, 5, BINARY, skip_short_lines=True, guid_column=0),
    "qnli": GlueLayout(True, 1, 2, -1, ("entailment", "not_entailment"), guid_column=0),
    "rte": GlueLayout(True, 1, 2, -1, ("entailment", "not_entailment"), guid_column=0),
    "wnli": GlueLayout(True, 1, 2, -1, BINARY, guid_column=0),
}
REGRESSION_TASKS = {"sts-b"}


@dataclass(frozen=True)
class ExampleFormat:
    """How to read a file: a GLUE task's layout, or the columns of a generic CSV/TSV/JSONL file."""

    glue: str | None = None  # a key of GLUE
    text_column: str = "text"
    pair_column: str | None = None
    label_column: str = "label"
    set_type: str = "train"  # the guid's prefix: "train", "dev"


def read_examples(path: str | os.PathLike, form: ExampleFormat) -> list[Example]:
    """Every example of ``path``; a DataError naming the file and line for a missing file, an empty
    one, a missing column or field, or text that is not UTF-8."""
    path = Path(path)
    text = read_labelled_text(path)
    if not text.strip():
        raise DataError(f"{path} is empty: it holds no examples")
    if form.glue is not None:
        examples = _glue_examples(path, text, form)
    elif name_suffix(path).lower() == ".jsonl":  # (a file named .jsonl alone too)
        examples = _jsonl_examples(path, text, form)
    elif name_suffix(path).lower() in (".csv", ".tsv"):
        examples = _table_examples(path, text, form, "," if name_suffix(path).lower() == ".csv" else "\t")
    else:
        raise DataError(f"{path}: name a GLUE task with --glue, or give a .csv, .tsv or .jsonl file "
                        f"(its suffix says how to read it)")  # fmt: skip
    if not examples:
        raise DataError(f"{path} holds no examples")
    return examples


def read_labelled_text(path: Path) -> str:
    """The file's text (CoNLL files too: tag.py): refused by name when it is missing, is not
    text (UTF-16, a binary file: formats/plain_text.py, with the byte offset) or is not UTF-8 (the line)."""
    if not path.is_file():
        raise DataError(f"{path} does not exist" if not path.exists() else f"{path} is not a file")
    data = path.read_bytes()
    check = TextCheck(path)
    check.feed(data)
    check.finish()
    try:  # a byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DataError(f"{path}, line {line}: not UTF-8 text ({error.reason}, byte offset {error.start})") from None


def _glue_examples(path: Path, text: str, form: ExampleFormat) -> list[Example]:
    layout = GLUE[form.glue]
    lines = text.replace("\r\n", "\n").split("\n")  # a file's lines, as Python's file reader gives them
    reader = csv.reader(lines[:-1] if lines[-1] == "" else lines, delimiter="\t", quotechar=None)
    try:
        with _fields_as_long_as(text):
            rows = list(reader)
    except csv.Error as error:  # a carriage return alone
        raise DataError(f"{path}, line {reader.line_num}: {error}") from None  # (the line it read last)
    examples, languages = [], set()
    for number, row in enumerate(rows, start=1):
        if number == 1 and layout.header:
            continue
        columns = [layout.text_a, layout.label] + ([layout.text_b] if layout.text_b is not None else [])
        if layout.language is not None:
            columns.append(layout.language[0])
        if any(column >= len(row) for column in columns if column >= 0) or not row:
            if layout.skip_short_lines:
                continue
            needed = max(columns) + 1
            raise DataError(f"{path}, line {number}: {form.glue.upper()} lines have at least {needed} "
                            f"tab-separated fields, this one has {len(row)}")  # fmt: skip
        if layout.language is not None and row[layout.language[0]] != layout.language[1]:
            languages.add(row[layout.language[0]])
            continue
        label = row[layout.label]
        if form.glue == "xnli" and label == "contradictory":
            label = "contradiction"
        text_b = row[layout.text_b] if layout.text_b is not None else None
        guid = row[layout.guid_column] if layout.guid_column is not None else number - 1
        examples.append(Example(f"{form.set_type}-{guid}", row[layout.text_a], text_b, label, number))
    if not examples and languages:
        raise DataError(f"{path} holds no examples in {layout.language[1]!r}, the only language --glue {form.glue} "
                        f"keeps (its rows are in {', '.join(sorted(map(repr, languages))[:10])})")  # fmt: skip
    return examples


def _table_examples(path: Path, text: str, form: ExampleFormat, delimiter: str) -> list[Example]:
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        with _fields_as_long_as(text):
            return _table_rows(path, reader, form)
    except csv.Error as error:  # a stray quote, ...
        # (line_num counts the lines read before the one the error is on)
        raise DataError(f"{path}, line {reader.line_num + 1}: {error}") from None


@contextlib.contextmanager
def _fields_as_long_as(text: str):
    """``csv`` refuses a field over 131,072 characters (its default ``field_size_limit``), where
    pandas and ``datasets`` read it: the limit raised to the file's length while it is read (the
    text is in memory already, so no field costs more), then put back."""
    before = csv.field_size_limit()
    csv.field_size_limit(max(before, len(text)))
    try:
        yield
    finally:
        csv.field_size_limit(before)


def _table_rows(path: Path, reader: csv.DictReader, form: ExampleFormat) -> list[Example]:
    header = reader.fieldnames or []
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:  # csv.DictReader would keep the last such column's field, silently
        raise DataError(f"{path}, line 1: the header names {', '.join(repr(name) for name in twice)} more than once; "
                        "each column needs its own name")  # fmt: skip
    for flag, column in _columns(form):
        if column not in header:
            raise DataError(f"{path}, line 1: no column {column!r} ({flag}); the header names "
                            f"{', '.join(repr(name) for name in header) or 'nothing'}")  # fmt: skip
    examples, last = [], reader.line_num
    for row in reader:  # (not after the last row's end: a quote never closed takes the file's final line break)
        fields = [field for value in row.values() for field in (value if isinstance(value, list) else [value])]
        breaks = sum(_line_breaks(field) for field in fields if isinstance(field, str))  # (row[None]: extra fields)
        number, last = max(reader.line_num - breaks, last + 1), reader.line_num
        where = f"line {number}" if number == last else f"lines {number}-{last} (one row: a quoted field spans them)"
        for flag, column in _columns(form):
            if row.get(column) is None:
                raise DataError(f"{path}, {where}: the row has no field {column!r} ({flag}): too few columns")
        if None in row:  # DictReader's key for fields past the header's
            raise DataError(f"{path}, {where}: the row has {len(header) + len(row[None])} fields, the header "
                            f"names {len(header)}")  # fmt: skip
        examples.append(_example(form, row, number))
    return examples


def _line_breaks(field: str) -> int:
    """Line breaks inside a quoted field (\n, \r\n or \r, as csv counts lines): lines the row spans
    beyond its first."""
    return field.count("\n") + field.count("\r") - field.count("\r\n")


def _jsonl_examples(path: Path, text: str, form: ExampleFormat) -> list[Example]:
    examples = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:  # (numbers with a point or an exponent as Decimal: a label's exact value, label_of_number)
            row = json.loads(line, object_pairs_hook=refusing_duplicate_keys, parse_float=Decimal,
                             parse_constant=_refusing_constants)  # fmt: skip
        except ValueError as error:
            raise DataError(f"{path}, line {number}: not a JSON object ({error})") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}, line {number}: not a JSON object")
        for flag, column in _columns(form):
            if column not in row:
                raise DataError(f"{path}, line {number}: no field {column!r} ({flag})")
            if not isinstance(row[column], (str, int, Decimal)) or isinstance(row[column], bool):
                raise DataError(f"{path}, line {number}: field {column!r} must be a string or number, "
                                f"got {type(row[column]).__name__}")  # fmt: skip
        label = row[form.label_column]
        is_number = not isinstance(label, str)  # (a bool was refused above)
        fields = {**{key: str(float(value) if isinstance(value, Decimal) else value) for key, value in row.items()},
                  form.label_column: label_of_number(label) if is_number else label}  # fmt: skip
        examples.append(replace(_example(form, fields, number), label_is_number=is_number))
    return examples


def label_of_number(value: int | Decimal | float) -> str:
    """A JSON number as a label, by its exact value: equal numbers are one label, other numbers
    other labels. A whole number below 10**21 is its digits; any other number its shortest
    decimal spelling, exponent in lower case (a float: the decimal ``repr`` gives, which names it exactly).

    >>> [label_of_number(Decimal(text)) for text in ("1.0", "1e0", "-0.0", "0.5", "2.5e-7", "1e20", "1.5e30")]
    ['1', '1', '0', '0.5', '2.5e-7', '100000000000000000000', '1.5e+30']
    >>> label_of_number(100000000000000000000), label_of_number(10**21), label_of_number(1e21)
    ('100000000000000000000', '1e+21', '1e+21')
    """
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not number.is_finite():
        raise ValueError(f"{value!r} is not a finite number")
    if number == number.to_integral_value() and abs(number) < 10**21:
        return str(int(number))
    with decimal.localcontext() as context:  # normalize() rounds to the context's digits (28 by default)
        context.prec = max(context.prec, len(number.as_tuple().digits))
        return str(number.normalize()).lower()


def check_label_kinds(examples: list[Example], path: str | os.PathLike, flag: str, separator: str | None = None
                      ) -> None:  # fmt: skip
    """A classifier's labels given one way in a file: a JSON number on one line and a string that
    reads as a number on another (``1`` and ``"1.0"``) is a DataError naming both lines, since
    whether they are one class would otherwise depend on how each was spelled."""
    number = next((example for example in examples if example.label_is_number), None)
    if number is None:
        return
    for example in examples:
        spelled = [] if example.label_is_number else split_labels(example.label, separator)
        if any(_reads_as_number(label) for label in spelled):
            raise DataError(f"{flag} {path}, line {example.line}: the label {example.label!r} is a string of a "
                            f"number, line {number.line}'s label a JSON number ({number.label}): give the labels "
                            "one way, all numbers or all strings (1 and \"1.0\" would be two labels)")  # fmt: skip


# A number as a label or a score spells it: ASCII digits, an optional sign, point and exponent
# (what pandas reads as a number; Python's float() also reads "1_5", "٣" and "nan").
DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _reads_as_number(text: str) -> bool:
    return DECIMAL.fullmatch(text) is not None


def _refusing_constants(name: str):
    """``json.loads``' reading of NaN, Infinity and -Infinity, which are not JSON: a ValueError."""
    raise ValueError(f"{name} is not JSON: a JSON number is finite")


def _columns(form: ExampleFormat) -> list[tuple[str, str]]:
    columns = [("--text-column", form.text_column), ("--label-column", form.label_column)]
    return columns + ([("--pair-column", form.pair_column)] if form.pair_column else [])


def _example(form: ExampleFormat, row: dict, number: int) -> Example:
    text_b = row[form.pair_column] if form.pair_column else None
    return Example(f"{form.set_type}-{number}", row[form.text_column], text_b, row[form.label_column].strip(), number)


def label_list(train: list[Example], form: ExampleFormat, given: list[str] | None = None,
               separator: str | None = None) -> list[str]:  # fmt: skip
    """The labels in their stated order: ``--labels`` as given; a GLUE task's own list (its
    processor's ``get_labels()``); otherwise the training file's labels sorted (``sorted_labels``:
    numbers by value). The position in this list is the label's id (config.json's ``id2label``)."""
    if given:
        if not all(given):
            raise DataError(f"--labels names an empty label: {shown_labels(given)}")
        if len(set(given)) != len(given):
            raise DataError(f"--labels names a label twice: {shown_labels(given)}")
        return list(given)
    if form.glue is not None and GLUE[form.glue].labels:
        return list(GLUE[form.glue].labels)
    return sorted_labels({label for example in train for label in split_labels(example.label, separator)})


def sorted_labels(labels: set[str]) -> list[str]:
    """A file's labels in id order: by value when every one is a number (JSON numbers, or ``DECIMAL``
    strings in a CSV/TSV), else as strings. transformers' run_glue sorts the label column as
    ``datasets`` reads it — integers from a CSV or JSON file —, so there class ``2`` of ``0`` … ``11``
    is id 2, and a logits' argmax is the class number; sorted as strings it would be id 4 (after
    ``10`` and ``11``). Equal values spelled apart in a CSV (``1``, ``1.0``) are two labels, ordered
    by their spelling.

    >>> sorted_labels({"10", "2", "-1", "0.5", "11"}), sorted_labels({"10", "2", "b"})
    (['-1', '0.5', '2', '10', '11'], ['10', '2', 'b'])
    """
    if labels and all(_reads_as_number(label) for label in labels):
        return sorted(labels, key=lambda label: (Decimal(label), label))
    return sorted(labels)


def split_labels(field: str, separator: str | None) -> list[str]:
    """A label field's labels: itself, or (multilabel) its parts joined by ``separator`` ("" → none)."""
    if separator is None:
        return [field]
    return [part.strip() for part in field.split(separator) if part.strip()]


def check_labels(examples: list[Example], labels: list[str], path: str | os.PathLike, flag: str,
                 separator: str | None = None) -> None:  # fmt: skip
    """Every example's label is one of ``labels``, given one way (``check_label_kinds``): else a
    DataError naming the file, line and label."""
    check_label_kinds(examples, path, flag, separator)
    known = set(labels)
    for example in examples:
        if separator is None and not example.label:  # (multilabel: an empty field is a text with no label)
            raise DataError(f"{flag} {path}, line {example.line}: the label field is empty")
        for label in split_labels(example.label, separator):
            if label not in known:
                raise DataError(f"{flag} {path}, line {example.line}: label {label!r} is not among the "
                                f"training labels ({shown_labels(labels)}); give them all with --labels")  # fmt: skip
