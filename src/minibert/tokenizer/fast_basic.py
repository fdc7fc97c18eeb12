"""The fast path of stage 1: ``BasicTokenizer``'s words at C speed, with offsets.

Read ``BasicTokenizer`` in algorithm.py first: it is the algorithm. This module computes the same
words another way, because ``BertTokenizer`` runs it on every text and NER/QA need to know where
each piece came from.

The trick: the whole of stage 1 is a rule per character — what the character becomes in a text
that is then split on spaces (removed, a space, its lowercase without accents, or itself between
spaces when it is punctuation or a CJK ideograph). ``str.translate`` applies such a table in C; the
table (``_TranslationTable``) asks the plain rules of algorithm.py about each character the first
time it is seen, so a text of known characters never runs Python per character. Tracking offsets
applies the same table one character at a time, remembering each output character's origin.

The one place where a per-character rule is not the whole story: NFD puts the combining marks of a
text in canonical order, which can move a spacing mark past another (``reorderable``); a text with
one of those characters takes an exact, slower path (``_decomposed``). tests/test_tokenizer_fast_basic.py
proves ``FastBasicTokenizer`` equal to ``BasicTokenizer`` on the real-text corpus and on random
characters.
"""

from __future__ import annotations

import functools
import re

from .algorithm import BasicTokenizer, canonical_order
from .tokenizers_unicode import TOKENIZERS_UNICODE


@functools.cache
def tokenizers_reorderable() -> re.Pattern:
    """Spacing marks with a non-zero combining class (viramas, two Hangul tone marks, musical
    symbols), and the characters that decompose into them, in tokenizers' tables. NFD puts a text's
    combining marks in canonical order; once the nonspacing marks (Mn) are stripped, these are the
    only characters whose order that can change. A text with one of them takes the exact path
    through ``_decomposed`` (rare: none occurs in the test corpora)."""
    return re.compile("[" + "".join(map(re.escape, TOKENIZERS_UNICODE.reorderable_characters())) + "]")


class _TranslationTable(dict):
    """A ``str.translate`` table that computes each code point's replacement on first sight.

    ``str.translate`` runs in C; only characters never seen before call back into Python. That is
    what, with the word cache, brings the pure-Python tokenizer to about the Rust one's speed over a
    stream of new text (docs/performance.md measures it, over 198 texts and over 1,942).
    """

    def __init__(self, rule):
        super().__init__()
        self._rule = rule

    def __missing__(self, code_point: int):
        replacement = self._rule(chr(code_point)) if code_point < 0x110000 else None
        self[code_point] = replacement
        return replacement


class FastBasicTokenizer(BasicTokenizer):
    """``BasicTokenizer`` through translation tables, with offsets (``words_with_origins``).

    >>> FastBasicTokenizer().tokenize("Héllo, WORLD!  中文")
    ['hello', ',', 'world', '!', '中', '文']
    """

    def __init__(self, do_lower_case: bool = True, strip_accents: bool | None = None,
                 tokenize_chinese_chars: bool = True):  # fmt: skip
        super().__init__(do_lower_case, strip_accents, tokenize_chinese_chars)
        self._make_tables()

    def _make_tables(self) -> None:
        # Each table is a plain rule of algorithm.py applied to one character (None: removed).
        self._clean_table = _TranslationTable(lambda char: super(FastBasicTokenizer, self).clean(char) or None)
        self._table = _TranslationTable(self.words_of_char)
        self._normalized_table = _TranslationTable(lambda char: self.normalize(self._clean_table[ord(char)] or ""))
        self._punctuation_table = _TranslationTable(self.is_punctuation)

    def __getstate__(self) -> dict:  # the tables are caches of the rules: rebuilt after unpickling
        return {key: value for key, value in self.__dict__.items() if not key.endswith("_table")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._make_tables()

    def words_of_char(self, char: str) -> str:
        r"""The whole stage for one character: clean, normalize, space out punctuation.

        >>> tokenizer = FastBasicTokenizer()
        >>> [tokenizer.words_of_char(c) for c in "É,\t中\x00"]
        ['e', ' , ', ' ', ' 中 ', '']
        """
        cleaned = self._clean_table[ord(char)]  # None (removed), " ", the char, or " 中 "
        if not cleaned:
            return ""
        return "".join(f" {c} " if self.is_punctuation(c) else c for c in self.normalize(cleaned))

    def clean(self, text: str) -> str:
        return text.translate(self._clean_table)

    def tokenize(self, text: str) -> list[str]:
        if self._reorders(text):
            return "".join(self._table[ord(char)] for char, _ in self._decomposed(text, 0)).split()
        return text.translate(self._table).split()

    def _reorders(self, text: str) -> bool:
        """Whether NFD of the whole text could order it differently than character by character."""
        return self.strip_accents and not text.isascii() and self.reorderable().search(text) is not None

    def reorderable(self) -> re.Pattern:
        """The characters whose order NFD of a whole text can change (``tokenizers_reorderable``)."""
        return tokenizers_reorderable()

    def _decomposed(self, text: str, base: int) -> list[tuple[str, int]]:
        """The cleaned text in NFD, as NFD of the whole text gives it, each character with the index
        of the one it came from: decomposed character by character, then every run of combining
        marks sorted (stably) by combining class — Unicode's canonical ordering.

        Where each character came from follows tokenizers' rule, not the characters: each cleaned
        character is a slot, and the first part of a decomposition takes the next slot, wherever the
        sorting moved it; the other parts of a decomposition share the slot before them. So a word's
        origins still increase, and its span covers all of its characters, as in transformers:

        >>> decomposed = FastBasicTokenizer()._decomposed("\u032f\ua953", 0)  # classes 220, 9: swapped
        >>> [(f"U+{ord(char):04X}", origin) for char, origin in decomposed]  # the slots stay in place
        [('U+A953', 0), ('U+032F', 1)]
        """
        parts = [  # (character, index of the cleaned character it came from, first part of its decomposition?)
            (part, index, number == 0)
            for index, original in enumerate(text, start=base)
            for char in self._clean_table[ord(original)] or ""
            for number, part in enumerate(self.decompose(char))
        ]
        slots = iter([index for _, index, first in parts if first])
        ordered = []
        for part, _, first in canonical_order(parts, lambda item: self.combining_class(item[0])):
            if first:  # a text's first part always is: a decomposition's own parts are in canonical order
                origin = next(slots)
            ordered.append((part, origin))
        return ordered

    def words_with_origins(self, text: str, base: int = 0) -> list[tuple[str, list[int]]]:
        """``tokenize``, keeping track of where each character came from: for each word, the word
        and, for each of its characters, the index in ``text`` (plus ``base``) of the character
        that produced it. A piece's span in the original text follows (offsets for NER and QA).

        >>> FastBasicTokenizer().words_with_origins("Né, x")
        [('ne', [0, 1]), (',', [2]), ('x', [4])]
        """
        return self.split_words(self.normalized_with_origins(text, base))

    def normalized_with_origins(self, text: str, base: int = 0) -> list[tuple[str, int]]:
        """The text cleaned and normalized (``normalize(clean(text))``), one character at a time,
        each with the index in ``text`` (plus ``base``) of the character it came from. Added tokens
        (added_tokens.py) are matched in this text, before it is split into words.

        >>> FastBasicTokenizer().normalized_with_origins("Né中")
        [('n', 0), ('e', 1), (' ', 2), ('中', 2), (' ', 2)]
        """
        if self._reorders(text):  # NFD of the whole text, then each character on its own
            return [(out, index) for char, index in self._decomposed(text, base) for out in self.normalize(char)]
        table = self._normalized_table
        return [(out, index) for index, char in enumerate(text, start=base) for out in table[ord(char)]]

    def split_words(self, pairs: list[tuple[str, int]]) -> list[tuple[str, list[int]]]:
        """Split normalized characters (with their origins) into words: at whitespace, and around
        each punctuation character, which is a word of its own."""
        words: list[tuple[str, list[int]]] = []
        chars: list[str] = []
        origins: list[int] = []
        punctuation = self._punctuation_table
        for char, index in pairs:
            if char == " " or punctuation[ord(char)]:
                if chars:
                    words.append(("".join(chars), origins))
                    chars, origins = [], []
                if char != " ":
                    words.append((char, [index]))
            else:
                chars.append(char)
                origins.append(index)
        if chars:
            words.append(("".join(chars), origins))
        return words
