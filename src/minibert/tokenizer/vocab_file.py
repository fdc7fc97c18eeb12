"""``vocab.txt``: one piece per line, the line's number (from 0) its id. Read by the tokenizer, by
``minibert pretraining-data`` and by the check of a new added token's id, which needs the line a
piece is listed on a second time (files.py and added_tokens.py import this module, which imports
neither)."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import CheckpointError


def load_vocab(vocab_file: str | os.PathLike) -> dict[str, int]:
    """Read ``vocab.txt`` (one piece per line; the line number is the id) into {piece: id}."""
    path = Path(vocab_file)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CheckpointError(f"vocabulary file not found: {path}") from None
    except UnicodeDecodeError as error:
        raise CheckpointError(
            f"vocabulary file {path} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    except OSError as error:
        raise CheckpointError(f"cannot read vocabulary file {path}: {error.strerror}") from None
    vocab: dict[str, int] = {}
    for index, token in enumerate(_pieces(text)):
        # A piece listed twice keeps its last line's id, as in Google's load_vocab, transformers and
        # `tokenizers` (each fills a dict line by line).
        vocab[token] = index
    if not vocab:
        raise CheckpointError(f"vocabulary file {path} is empty")
    return vocab


def _pieces(text: str) -> list[str]:
    """vocab.txt's lines, one piece each: the final newline ends the last line, and a line's
    trailing carriage return (a file written on Windows) is not part of its piece."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def repeated_line(vocab_file: str | os.PathLike) -> str | None:
    """Where ``vocab.txt`` lists a piece a second time, or None: "line 86 repeats line 7 ('a')".
    ``load_vocab`` gives such a piece its last line's id, so the file has fewer pieces than lines
    and the earlier line's id belongs to no piece.

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "vocab.txt"
    >>> _ = path.write_text("[UNK]\\na\\nb\\na\\n")
    >>> repeated_line(path)
    "line 4 repeats line 2 ('a')"
    """
    seen: dict[str, int] = {}
    for number, token in enumerate(_pieces(Path(vocab_file).read_text(encoding="utf-8")), start=1):
        if token in seen:
            return f"line {number} repeats line {seen[token]} ({token!r})"
        seen[token] = number
    return None
