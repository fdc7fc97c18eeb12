"""The Unicode that Hugging Face ``tokenizers`` sees: the character tables of its BERT rules.

BERT's basic tokenizer asks a few questions about each character — is it a control character, a
space, punctuation, a nonspacing mark; how does it decompose (NFD), how does it lowercase. Python
answers them from ``unicodedata`` (Unicode 14 in Python 3.11, 15 in 3.12...). The Rust tokenizer,
whose ids ``BertTokenizer`` promises, answers them from tables of other versions:

- control/format/private use (removed), punctuation and nonspacing marks: the ``unicode_categories``
  crate 0.1.1, whose tables are Unicode 8.0 (e.g. U+061D, punctuation since Unicode 14, is a letter
  to tokenizers; U+1734, a spacing mark since Unicode 14, is still stripped as an accent);
- NFD: the ``unicode-normalization-alignments`` crate, also older than Python's database (e.g.
  U+11938, Unicode 13, does not decompose);
- whitespace and lowercase: Rust's standard library, of the Rust release that built the wheel
  (newer than Python 3.11's: e.g. U+1C89, a capital letter of Unicode 16, lowercases to U+1C8A).

tokenizers_unicode.txt holds those answers for every code point, as ranges and maps. It is not
copied from the crates: scripts/make_tokenizers_unicode_table.py asks the installed ``tokenizers``
about each character and writes the file (run it again after upgrading tokenizers;
tests/test_tokenizer_unicode_tables.py compares every character with tokenizers).

>>> TOKENIZERS_UNICODE.is_punctuation_category("\u061d"), TOKENIZERS_UNICODE.lowercase("\u1c89") == "\u1c8a"
(False, True)
"""

from __future__ import annotations

import bisect
import functools
from importlib import resources

_HANGUL_FIRST, _HANGUL_LAST = 0xAC00, 0xD7A3  # Hangul syllables: NFD by Unicode's formula


class CodePointRanges:
    """A set of code points stored as sorted ranges: ``char in ranges`` by binary search."""

    def __init__(self, spans: list[tuple[int, int]]):
        self.spans = spans  # [(first, last)], sorted
        self._starts = [low for low, _ in spans]
        self._ends = [high for _, high in spans]

    def __contains__(self, char: str) -> bool:
        code_point = ord(char)
        index = bisect.bisect_right(self._starts, code_point) - 1
        return index >= 0 and code_point <= self._ends[index]


class TokenizersUnicode:
    """The answers of ``tokenizers`` (tokenizers_unicode.txt) to BERT's questions about a character."""

    def __init__(self, sections: dict[str, list[list[str]]]):
        spans = {name: [_span(row[0]) for row in rows] for name, rows in sections.items()}
        self.other = CodePointRanges(spans["other"])
        self.whitespace = CodePointRanges(spans["whitespace"])
        self.punctuation = CodePointRanges(spans["punctuation"])
        self.nonspacing_mark = CodePointRanges(spans["nonspacing_mark"])
        # {character: what it becomes}, for the characters it changes (classes: the non-zero ones)
        self.decompositions = {chr(int(row[0], 16)): _chars(row[1:]) for row in sections["decomposition"]}
        self.lowercases = {chr(int(row[0], 16)): _chars(row[1:]) for row in sections["lowercase"]}
        self.combining_classes = {
            chr(code_point): int(row[1])
            for row in sections["combining_class"]
            for code_point in range(_span(row[0])[0], _span(row[0])[1] + 1)
        }

    def is_other(self, char: str) -> bool:
        """Category Cc, Cf or Co (control, format, private use) in tokenizers' tables."""
        return char in self.other

    def is_whitespace(self, char: str) -> bool:
        """Rust's ``char::is_whitespace`` (the White_Space property)."""
        return char in self.whitespace

    def is_punctuation_category(self, char: str) -> bool:
        """ASCII punctuation, or category P* in tokenizers' tables."""
        return char in self.punctuation

    def is_nonspacing_mark(self, char: str) -> bool:
        """Category Mn in tokenizers' tables."""
        return char in self.nonspacing_mark

    def decompose(self, char: str) -> str:
        """The canonical decomposition (NFD) of one character, e.g. "é" → "e" + U+0301."""
        code_point = ord(char)
        if _HANGUL_FIRST <= code_point <= _HANGUL_LAST:
            return _decompose_hangul(code_point)
        return self.decompositions.get(char, char)

    def combining_class(self, char: str) -> int:
        """The canonical combining class (0 for a starter), which orders marks in NFD."""
        return self.combining_classes.get(char, 0)

    def reorderable_characters(self) -> list[str]:
        """The spacing marks (not Mn) with a non-zero combining class, and the characters that
        decompose into one: the only characters whose order NFD can change once the nonspacing
        marks are stripped (fast_basic.py takes an exact path for a text holding one)."""
        spacing = {char for char in self.combining_classes if not self.is_nonspacing_mark(char)}
        decomposing = [char for char, parts in self.decompositions.items() if spacing.intersection(parts)]
        return sorted(spacing.union(decomposing))

    def lowercase(self, char: str) -> str:
        """Rust's ``char::to_lowercase`` of one character (Σ → σ, İ → i + U+0307)."""
        return self.lowercases.get(char, char)


def _span(text: str) -> tuple[int, int]:
    low, _, high = text.partition("..")
    return int(low, 16), int(high or low, 16)


def _chars(hexes: list[str]) -> str:
    return "".join(chr(int(value, 16)) for value in hexes)


def _decompose_hangul(code_point: int) -> str:
    """A Hangul syllable → its two or three jamo (Unicode's formula, chapter 3.12)."""
    index = code_point - _HANGUL_FIRST
    lead, vowel, tail = 0x1100 + index // 588, 0x1161 + (index % 588) // 28, 0x11A7 + index % 28
    return chr(lead) + chr(vowel) + (chr(tail) if tail != 0x11A7 else "")


@functools.cache
def _load() -> TokenizersUnicode:
    sections: dict[str, list[list[str]]] = {}
    rows: list[list[str]] = []
    text = resources.files(__package__).joinpath("tokenizers_unicode.txt").read_text(encoding="ascii")
    for line in text.splitlines():
        if line.startswith("["):
            rows = sections.setdefault(line[1 : line.index("]")], [])
        elif line and not line.startswith("#"):
            rows.append(line.split())
    return TokenizersUnicode(sections)


class _Lazy:
    """``TOKENIZERS_UNICODE``: the tables, read from tokenizers_unicode.txt on first use. Then it
    becomes them (a ``TokenizersUnicode`` holding the loaded tables), so that every later question
    is a plain method call: a new character asks about seven of them, and going through
    ``__getattr__`` each time was a third of what a character seen for the first time costs."""

    def __getattr__(self, name: str):
        tables = _load()
        self.__dict__.update(tables.__dict__)
        self.__class__ = TokenizersUnicode  # (after its tables: another thread may read them at once)
        return getattr(tables, name)


TOKENIZERS_UNICODE: TokenizersUnicode = _Lazy()  # type: ignore[assignment]
