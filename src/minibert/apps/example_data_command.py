"""``minibert example-data``: the small labelled files the fine-tuning lesson and recipes start from.

    minibert example-data languages --output languages     # the lesson's data: train.csv, dev.csv
    minibert example-data mrpc --output glue/MRPC          # a few rows in GLUE's layout
    minibert example-data squad --output squad             # SQuAD v1.1 and v2.0, train and dev

The files ship inside the package (``minibert/bundled/examples/``), so the lesson needs nothing
the installation did not bring. ``languages`` is real labelled text: 856 of Django's admin
messages as its translators wrote them, in six languages (scripts/language_examples.py made it
from Django 5.2.19's catalogues; Django's BSD licence). The others are samples of a format: a few
rows written for the purpose, in the exact layout of the real data set, so that docs/finetuning.md's
commands run as written before the real files are downloaded (where from: ``SOURCES``, and the
line this command prints).

A file that is already there with the same bytes is left alone; one with other bytes stops the
command before anything is written (it is someone's data, perhaps the real data set).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from .flag_types import output_name

EXAMPLES = Path(__file__).resolve().parent.parent / "bundled" / "examples"

# name → (what it is, where the real data set is)
SOURCES = {
    "languages": ("856 Django admin messages labelled with their language (de, es, fr, it, nl, pt)",
                  "real data: Django's translation catalogues (BSD licence), as the lesson uses them"),
    "mrpc": ("16 sentence pairs in GLUE's MRPC layout (Quality, #1 ID, #2 ID, #1 String, #2 String)",
             "the real MRPC: GLUE's download_glue_data.py (github.com/nyu-mll/GLUE-baselines), https://gluebenchmark.com"),
    "sts-b": ("16 scored sentence pairs in GLUE's STS-B layout (ten columns, the score last)",
              "the real STS-B: GLUE's download_glue_data.py (github.com/nyu-mll/GLUE-baselines), "
              "https://gluebenchmark.com"),
    "conll": ("14 sentences in CoNLL-2003's layout (word, part of speech, chunk, entity tag)",
              "the real CoNLL-2003 English NER files: https://www.clips.uantwerpen.be/conll2003/ner/ (the Reuters "
              "text needs its own licence)"),
    "squad": ("3 paragraphs in SQuAD v1.1's and v2.0's JSON (train and dev): 7 questions in v1.1's, 10 (3 of them "
              "unanswerable) in v2.0's",
              "the real SQuAD: https://rajpurkar.github.io/SQuAD-explorer/ (train-v1.1.json, dev-v1.1.json, "
              "train-v2.0.json, dev-v2.0.json; CC BY-SA 4.0)"),
}  # fmt: skip


def add_parser(commands, parents: list) -> None:
    """Add the ``example-data`` command; ``parents``: the process flags every command takes (--debug)."""
    names = ", ".join(f"{name} ({what})" for name, (what, _) in SOURCES.items())
    example = commands.add_parser("example-data", parents=parents,
                                  help="write the small labelled files the fine-tuning lesson and recipes use",
                                  description=f"Write a bundled data set into a folder: {names}.")  # fmt: skip
    example.add_argument("name", choices=list(SOURCES), help="which data set")
    example.add_argument(
        "--output", required=True, metavar="DIR", type=output_name, help="the folder for its files (made if missing)"
    )
    example.set_defaults(run=cmd_example_data)


def example_files(name: str) -> list[Path]:
    """The bundled files of data set ``name``, sorted: ``example_files("mrpc")`` → [dev.tsv, train.tsv]."""
    if name not in SOURCES:
        raise ValueError(f"no example data set named {name!r}: one of {', '.join(SOURCES)}")
    return sorted(path for path in (EXAMPLES / name).iterdir() if path.is_file())


def write_example_data(name: str, output: str | Path) -> list[Path]:
    """Copy data set ``name``'s files into ``output`` (made if missing) and return their new paths.
    Raises FileExistsError, before writing any, when a file there holds other bytes. The files are
    written together or not at all (a full disk leaves no part of the set, nor a folder it made)."""
    from ..formats.atomic_files import naming_the_file
    from ..formats.file_sets import write_files_together

    output = Path(output)
    contents = {output / source.name: source.read_bytes() for source in example_files(name)}
    for target, content in contents.items():
        if target.is_dir() or (target.exists() and target.read_bytes() != content):
            raise FileExistsError(f"{target} already exists and is not {name}'s example file: nothing written "
                                  "(choose another --output, or move it away)")  # fmt: skip
    made = [folder for folder in (output, *output.parents) if not os.path.lexists(folder)]  # innermost first
    try:
        with naming_the_file(output):  # a read-only parent: "cannot write OUTPUT: Read-only file system"
            output.mkdir(parents=True, exist_ok=True)
        write_files_together({target: content for target, content in contents.items() if not target.exists()})
    except BaseException:
        for folder in made:  # only the folders this call made, and only if empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return list(contents)


def cmd_example_data(args) -> None:
    from ..errors import InputFileError
    from ..loading.local_files import not_a_file

    if Path(args.output).exists() and not Path(args.output).is_dir():
        kind = not_a_file(args.output) or "a file"  # (None: a regular one; /dev/full: a character device)
        raise InputFileError(f"--output {args.output} is {kind}, not a folder: give a folder for the data set's files")
    for path in write_example_data(args.name, args.output):
        print(path)
    what, where = SOURCES[args.name]
    print(f"minibert: {args.output}: {what}; {where}", file=sys.stderr)
