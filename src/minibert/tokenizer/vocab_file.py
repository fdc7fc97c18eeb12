"""``vocab.txt``: one piece per line, the line's number (from 0) its id. Read by the tokenizer, by
``minibert pretraining-data`` and by the check of a new added token's id, which needs the line a
piece is listed on a second time (files.py and added_tokens.py import this module, which imports
neither)."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import CheckpointError

# What ends a line but not its piece: Unicode's White_Space, which `tokenizers` (Rust's trim_end) and so
# transformers 5's BertTokenizer trim, and Google's load_vocab strips (str.strip also takes \x1c-\x1f,
# which `tokenizers` keeps: not trimmed here).
TRAILING_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)


def load_vocab(vocab_file: str | os.PathLike, *, kept_by: str | os.PathLike | None = None) -> dict[str, int]:
    """Read ``vocab.txt`` (one piece per line; the line number is the id) into {piece: id}.

    A line's trailing whitespace is not part of its piece (``_pieces``), as in `tokenizers`,
    transformers 5's BertTokenizer and Google's code. transformers' BertTokenizerLegacy keeps it: given
    ``kept_by`` (the tokenizer_config.json that names that class), a line with trailing whitespace
    is a CheckpointError, since the references then give other ids."""
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
    if text.startswith("\ufeff"):
        first = text.split("\n", 1)[0].rstrip("\r")
        raise CheckpointError(f"vocabulary file {path} starts with a byte-order mark (U+FEFF): its first piece would "
                              f"be {first!r}, not {first[1:]!r} (as tokenizers reads it; then no role finds it, and "
                              "transformers adds a new one past the vocabulary); save it without one")  # fmt: skip
    if kept_by is not None and (trimmed := trimmed_line(text)):
        raise CheckpointError(f"vocabulary file {path}: {trimmed} ends in whitespace, which tokenizers and "
                              f"transformers' BertTokenizer drop from the piece but {kept_by} names "
                              "BertTokenizerLegacy, which keeps it, so the libraries give other ids; minibert "
                              "refuses the folder: remove the whitespace")  # fmt: skip
    vocab: dict[str, int] = {}
    for index, token in enumerate(_pieces(text)):
        # A piece listed twice keeps its last line's id, as in Google's load_vocab, transformers and
        # `tokenizers` (each fills a dict line by line).
        vocab[token] = index
    if not vocab:
        raise CheckpointError(f"vocabulary file {path} is empty")
    return vocab


def _lines(text: str) -> list[str]:
    """vocab.txt's lines: the final newline ends the last line, a carriage return before a
    newline (a file written on Windows) is not part of its line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _pieces(text: str) -> list[str]:
    """vocab.txt's pieces, one a line, trailing whitespace trimmed (``TRAILING_WHITESPACE``): "hello "
    is the piece "hello", as `tokenizers` reads it. A leading space stays, as there."""
    return [line.rstrip(TRAILING_WHITESPACE) for line in _lines(text)]


def trimmed_line(text: str) -> str | None:
    """The first line of vocab.txt's ``text`` that ends in whitespace ("line 7593 ('hello ')"), or None."""
    for number, line in enumerate(_lines(text), start=1):
        if line != line.rstrip(TRAILING_WHITESPACE):
            return f"line {number} ({line!r})"
    return None


def vocab_bytes(vocab_file: str | os.PathLike) -> bytes:
    """vocab.txt as ``save_pretrained`` writes it: the file itself (a piece listed twice keeps its
    lines), or, where a line ends in whitespace, its pieces one a line, which every reader (transformers'
    BertTokenizerLegacy included, which would keep the whitespace) then reads as minibert did."""
    data = Path(vocab_file).read_bytes()
    text = data.decode("utf-8")
    if trimmed_line(text) is None:
        return data
    return "".join(piece + "\n" for piece in _pieces(text)).encode("utf-8")


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
