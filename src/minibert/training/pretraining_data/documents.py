"""Input files → documents → sentences → piece ids, with Google's line rules.

The input format of Google's ``create_pretraining_data.py``: one sentence per line, a blank line
between documents (next-sentence pairs never cross a document boundary)::

    The cat sat on the mat.          ← document 1, sentence 1
    It was warm there.               ← document 1, sentence 2
                                     ← blank: a new document starts
    Stocks fell on Monday.           ← document 2, sentence 1

Google's rules, kept exactly (each changes which instances come out):

- Lines end at ``\\n`` only (TensorFlow's file reader), not at the other line breaks Python's
  ``str.splitlines`` knows (``\\x0b``, ``\\x0c``, ``\\x1c``, U+2028, ...): those are whitespace inside a line.
- Every ``\\r`` is dropped, inside a line too: TensorFlow's ``ReadLine`` never appends one, so
  ``"one\\rtwo"`` is the word ``onetwo`` to Google's script, not two words (measured: ``GFile.readline``
  of ``b"one two\\rthree"`` is ``"one twothree"``).
- Each line is ``str.strip()``-ed; a line empty after that ends the document. Google's script
  starts a new, empty one at every such line, blank lines in a row too, and drops the empty ones
  before it shuffles the documents: here a new one starts only after a document that holds a
  sentence, the same documents in the same order, without holding a list per blank line until the
  end (5 MB of blank lines were 479 MB of empty documents).
- A line whose pieces are none (only control characters, say) is skipped, but does not end the
  document.
- Files are read one after the other *without* a break between them: a file that does not start
  with a blank line continues the last document of the file before it.

A file that is not text (UTF-16, binary, megabytes without a line break) stops the run, naming the
file and the byte offset (``NotTextError``, formats/plain_text.py); so does a NUL byte anywhere,
whatever ``invalid_utf8`` says (no text holds one; random bytes hold one in every 256). Invalid UTF-8 stops the run,
naming the file and line (``invalid_utf8="error"``), or its bytes are dropped (``"ignore"``, what
Google's ``convert_to_unicode`` does to bytes; under TensorFlow 2 its file reader decodes strictly
first, so the script itself dies with a UnicodeDecodeError).

All documents are held in memory, as in Google's script: a sentence is a list of int ids.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ...errors import DataError
from ...formats.plain_text import read_text_lines

Document = list[list[int]]  # sentences, each a list of piece ids
INVALID_UTF8 = ("error", "ignore")
NUL = b"\0"


def read_documents(
    paths: Sequence[str | os.PathLike],
    piece_ids: Callable[[str], list[int]],
    invalid_utf8: str = "error",
) -> list[Document]:
    """The documents of ``paths`` (read in order), each a list of sentences of piece ids; documents
    without sentences are dropped. Raises ``DataError`` for a missing file, invalid UTF-8 (unless
    ``invalid_utf8="ignore"``) or a corpus without a single sentence."""
    check_invalid_utf8(invalid_utf8)
    documents: list[Document] = [[]]
    for path in map(Path, paths):
        for number, line in enumerate(_lines(path), start=1):
            if NUL in line:
                raise DataError(f"input file {path}, line {number}: a NUL byte (byte {line.index(NUL)} of the "
                                "line): not text, whatever --invalid-utf8 says")  # fmt: skip
            line = line.replace(b"\r", b"")  # TensorFlow's ReadLine drops every \r (above)
            try:
                text = line.decode("utf-8", errors="strict" if invalid_utf8 == "error" else "ignore").strip()
            except UnicodeDecodeError as error:
                raise DataError(f"input file {path}, line {number}: not UTF-8 ({error.reason} at byte "
                                f"{error.start} of the line); --invalid-utf8 ignore drops such bytes, "
                                "as Google's script did") from None  # fmt: skip
            if not text:
                if documents[-1]:  # (a run of blank lines ends one document, not one per line: above)
                    documents.append([])
                continue
            try:
                pieces = piece_ids(text)
            except DataError as error:
                raise DataError(f"input file {path}, line {number}: {error}") from None
            if pieces:
                documents[-1].append(pieces)
    documents = [document for document in documents if document]
    if not documents:
        raise DataError(f"no sentences in the input ({', '.join(map(str, paths))}): nothing to make instances of")
    return documents


def check_invalid_utf8(invalid_utf8) -> None:
    """Refuse an ``invalid_utf8`` that is neither "error" nor "ignore" (a DataError, as every bad argument)."""
    if not isinstance(invalid_utf8, str) or invalid_utf8 not in INVALID_UTF8:
        raise DataError(f"invalid_utf8 must be one of {INVALID_UTF8}, got {invalid_utf8!r}")


def _lines(path: Path):
    """The file's lines as bytes, split at b"\\n" only; a missing file is a DataError, a file that is
    not text (formats/plain_text.py) a NotTextError."""
    if not path.is_file():
        problem = "does not exist" if not path.exists() else "is not a file"
        raise DataError(f"input file {path} {problem}")
    try:
        yield from read_text_lines(path)
    except OSError as error:
        raise DataError(f"cannot read input file {path}: {error.strerror}") from None
