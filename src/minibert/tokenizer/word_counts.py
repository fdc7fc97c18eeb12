"""How often each word occurs in a corpus: the first step of learning a vocabulary, and its hot loop.

A word here is what BERT's basic tokenizer (algorithm.py) makes of a text — cleaned, for an uncased
vocabulary lowercased without accents, split on whitespace and around every punctuation mark and
Chinese character — exactly the words ``tokenizers``' trainer counts (its BertNormalizer and
BertPreTokenizer, line by line)::

    "The cat.\\nTHE CAT!"  →  {"the": 2, "cat": 2, ".": 1, "!": 1}

Running the basic tokenizer over every line in Python would be the slow part. Instead:

1. the text is split at whitespace by ``str.split`` (C speed) and the pieces are counted with a
   ``Counter`` (C speed too). BERT splits at the same whitespace, and nothing it does crosses a space
   (cleaning, accents, lowercasing and punctuation are decided character by character), so the
   words of a text are the words of its pieces, one after the other;
2. each DISTINCT piece ("Cat!", "cat", "CAT") goes through the basic tokenizer once, and its words
   inherit its count.

Real text repeats itself: 20 MB of English has ~4 million pieces but ~400,000 distinct ones. The
input is read in blocks of 1 MiB, so memory is bounded by the number of distinct pieces, not by the
corpus (a *word* of more than ``MAX_RUN_CHARS`` characters is refused: the learner would hold it,
and merge inside it, as one word. A long run without whitespace is no such word when BERT splits it:
a line of Chinese is one word per ideograph, and punctuation is a word of its own; only the words
BERT makes of a run are measured). Invalid UTF-8 is refused, naming the file and the line
(``CorpusError``); a file that is not text — UTF-16, binary, megabytes without a line break — naming
the file and the byte offset (``NotTextError``, formats/plain_text.py).
"""

from __future__ import annotations

import codecs
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable

from ..errors import CorpusError
from ..formats.plain_text import BLOCK_BYTES, TextCheck  # corpora are read in blocks of 1 MiB
from .algorithm import BasicTokenizer

MAX_RUN_CHARS = 1_000_000  # a longer word (a run without whitespace, punctuation or CJK ideograph) is refused

# Python's str.split() splits at these, but BERT's cleaning deletes them (they are control
# characters, category Cc): they are deleted first, as the cleaning would, so "a\x0bb" stays one
# piece. (Every other character str.split() splits at, BERT turns into a space; a test checks this.)
_SPLIT_BUT_DELETED = re.compile("[\x0b\x0c\x1c-\x1f\x85]")
_SPLIT_BUT_DELETED_TABLE = dict.fromkeys(map(ord, "\x0b\x0c\x1c\x1d\x1e\x1f\x85"))
# Once those are deleted, whitespace is what str.split() splits at (str.isspace(): " ", "\t", "\n",
# U+00A0, U+3000, U+2028, ...): a block is cut, and a run of text measured, at exactly those.

Progress = Callable[[str], None]


def count_words(
    files: str | os.PathLike | Iterable[str | os.PathLike], basic: BasicTokenizer, progress: Progress | None = None
) -> Counter[str]:
    """{word: number of occurrences} over all ``files`` (UTF-8 text), words as ``basic`` makes them.
    One path (a str or a ``pathlib.Path``) is one file, as ``tokenizers``' ``train(files)`` takes it.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "corpus.txt"
    >>> _ = path.write_text("The cat.\\nTHE CAT!\\n", encoding="utf-8")
    >>> count_words([path], BasicTokenizer(do_lower_case=True))
    Counter({'the': 2, 'cat': 2, '.': 1, '!': 1})
    """
    files = input_files(files)
    total_bytes = sum(_size(path) for path in files)
    pieces: Counter[str] = Counter()
    done = 0
    for path in files:
        for block_bytes in _count_pieces(path, pieces, basic):
            done += block_bytes
            if progress is not None:
                progress(f"counting words: {done / 1e6:,.0f} of {total_bytes / 1e6:,.0f} MB")
    words: Counter[str] = Counter()
    tokenize = basic.tokenize
    for piece, count in pieces.items():
        for word in tokenize(piece):
            words[word] += count
    if not words:
        raise CorpusError(f"no words in {', '.join(map(str, files))}: the corpus is empty (or only whitespace "
                          "and control characters)")  # fmt: skip
    return words


def input_files(files: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str | os.PathLike]:
    """``files`` as a list: one path is a list of one (not of its characters); none is a ValueError.
    A path must be a ``str`` or a ``pathlib.Path`` (a TypeError otherwise, as in ``tokenizers``): the
    bytes of ``b"corpus.txt"`` or an ``int`` would be taken as file descriptors, and read stdin.

    >>> input_files("corpus.txt"), input_files(("a.txt", "b.txt"))
    (['corpus.txt'], ['a.txt', 'b.txt'])
    """
    if isinstance(files, (bytes, bytearray)) or not isinstance(files, (str, os.PathLike, Iterable)):
        raise TypeError(f"files must be a path (str or Path) or a list of paths, got {type(files).__name__}")
    files = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    if not files:
        raise ValueError("no input file given: files is empty (give a path, or a list of paths)")
    for path in files:
        if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
            raise TypeError(f"files must be paths (str or Path), got {path!r}")
    return files


def _size(path: str | os.PathLike) -> int:
    try:
        if os.path.isdir(path):
            raise CorpusError(f"input {path} is a directory, not a text file")
        return os.path.getsize(path)
    except FileNotFoundError:
        raise CorpusError(f"input file not found: {path}") from None
    except OSError as error:
        raise CorpusError(f"cannot read input file {path}: {error.strerror}") from None


def _count_pieces(path: str | os.PathLike, pieces: Counter[str], basic: BasicTokenizer) -> Iterable[int]:
    """Add the whitespace-separated pieces of one file to ``pieces``; yield the bytes read per block.
    A piece that ``basic`` makes a word of more than ``MAX_RUN_CHARS`` of is refused (``CorpusError``).

    A block is cut after its last whitespace; the rest (the start of a piece) is carried into the
    next block. The UTF-8 decoder is incremental: a character split between two blocks is whole."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    check = TextCheck(path)  # UTF-16, binary, megabytes without a line break: NotTextError
    carried = ""
    line = 1  # of the block's start, for error messages
    try:
        with open(path, "rb") as handle:
            while True:
                block = handle.read(BLOCK_BYTES)
                check.feed(block)
                if len(block) < BLOCK_BYTES:  # the last block
                    check.finish()
                pending = decoder.getstate()[0]  # bytes of a character the last block cut
                try:
                    text = carried + _deleted(decoder.decode(block, final=not block))
                except UnicodeDecodeError as error:
                    where = line + (pending + block)[: error.start].count(b"\n")
                    raise CorpusError(f"{path}, line {where}: not UTF-8 text ({error.reason})") from None
                if not block:
                    _add_pieces(text, pieces, basic, path, line)
                    return
                cut = len(text) - len(_last_run(text))  # where the run the text ends with starts
                if _longest_word(text[cut:], basic) > MAX_RUN_CHARS:  # a word of the carried run is too long already
                    _refuse_long_word(path, line + text[:cut].count("\n"))
                _add_pieces(text[:cut], pieces, basic, path, line)
                carried = text[cut:]
                line += block.count(b"\n")
                yield len(block)
    except OSError as error:
        raise CorpusError(f"cannot read input file {path}: {error.strerror}") from None


def _deleted(text: str) -> str:
    """``text`` without the control characters BERT's cleaning deletes but str.split() splits at."""
    return text.translate(_SPLIT_BUT_DELETED_TABLE) if _SPLIT_BUT_DELETED.search(text) else text


def _last_run(text: str) -> str:
    """The characters after the last whitespace of ``text`` ("" if it ends with whitespace, all of it
    if it has none): the start of a piece that may go on in the next block.

    >>> _last_run("ab cd"), _last_run("ab\u3000cd"), _last_run("ab "), _last_run("abcd")
    ('cd', 'cd', '', 'abcd')
    """
    if not text or text[-1].isspace():
        return ""
    return text.rsplit(None, 1)[-1]  # (rsplit scans from the end: the last piece, then its whitespace)


def _add_pieces(text: str, pieces: Counter[str], basic: BasicTokenizer, path, line: int) -> None:
    split = text.split()
    if split and max(map(len, split)) > MAX_RUN_CHARS:
        for piece in split:
            if _longest_word(piece, basic) > MAX_RUN_CHARS:
                _refuse_long_word(path, line + text[: text.index(piece)].count("\n"))
    pieces.update(split)


def _longest_word(run: str, basic: BasicTokenizer) -> int:
    """The length of the longest word ``basic`` makes of ``run`` (a text without whitespace): BERT
    splits it around every punctuation mark and CJK ideograph, so a line of Chinese or a run of
    words joined by hyphens holds no long word. (Cleaning and accent stripping only shorten a word,
    so a run no longer than ``MAX_RUN_CHARS`` is not tokenized.)

    >>> from minibert.tokenizer.fast_basic import FastBasicTokenizer
    >>> basic = FastBasicTokenizer()
    >>> [_longest_word(run, basic) for run in ("中文" * 600_000, "yes-" * 300_000, "a" * 1_200_000)]
    [1, 3, 1200000]
    """
    if len(run) <= MAX_RUN_CHARS:
        return len(run)
    return max(map(len, basic.tokenize(run)), default=0)


def _refuse_long_word(path, line: int):
    raise CorpusError(
        f"{path}, line {line}: a word of more than {MAX_RUN_CHARS:,} characters (no whitespace, punctuation or "
        "Chinese character in it: the learner holds each word in memory); break such text into words or lines"
    )
