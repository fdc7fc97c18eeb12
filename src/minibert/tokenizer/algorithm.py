"""BERT's tokenizer algorithm, written out: text → basic tokens → WordPiece pieces.

BERT never sees characters. Its input is a sequence of ids from a fixed vocabulary of ~30,000
*word pieces* (``vocab.txt``: one piece per line, the line number is the id). Turning text into
pieces happens in two stages, exactly as in google-research/bert's ``tokenization.py``:

1. **Basic tokenization** (``BasicTokenizer``) cuts the text into words and punctuation marks:
   clean it (drop NUL, U+FFFD and control characters; every kind of whitespace becomes a space),
   put spaces around Chinese/Japanese/Korean *ideographs* (each is its own word), for uncased
   vocabularies strip accents (Unicode NFD, then drop the combining marks) and lowercase, then
   split on whitespace and make every punctuation character a token of its own::

       "Héllo, WORLD!"  →  ["hello", ",", "world", "!"]

2. **WordPiece** (``WordPieceTokenizer``) splits each word into the longest pieces found in the
   vocabulary, left to right; a piece that continues a word is spelled with a ``##`` prefix::

       "unwanted"  →  ["un", "##want", "##ed"]          (google-research/bert's toy vocabulary)
       "unwantedX" →  ["[UNK]"]   (no segmentation exists, so the whole word is unknown)

``BertTokenizer`` (bert_tokenizer.py) holds the vocabulary and frames the pieces the way BERT was
pre-trained: ``[CLS] A [SEP]``, or ``[CLS] A [SEP] B [SEP]`` for a pair.

Where the reference implementations disagree, minibert follows Hugging Face ``tokenizers`` (what
``AutoTokenizer`` gives): unassigned code points are kept (not dropped as "control"), accents are
stripped before lowercasing, and Σ lowercases to σ everywhere (no final-ς rule). Lone surrogates,
which ``tokenizers`` cannot even receive, are dropped like control characters. See docs/tokenizer.md.
"""

from __future__ import annotations

import re
import unicodedata

# Code point ranges of the "CJK Unified Ideographs" blocks, as in Hugging Face tokenizers.
# (Hangul, Hiragana and Katakana are not ideographs: they go through WordPiece like any word.)
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),  # tokenizers' bound; Google's tokenization.py says 0x2B820 (see README)
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# Characters of these Unicode categories are removed while cleaning: controls (Cc), formatting
# characters such as zero-width joiners (Cf), private use (Co) and lone surrogates (Cs).
_REMOVED_CATEGORIES = {"Cc", "Cf", "Co", "Cs"}

MAX_CHARS_PER_WORD = 100  # a longer word becomes a single [UNK]

# Spacing marks with a non-zero combining class (viramas, two Hangul tone marks, musical symbols),
# and the characters that decompose into them (Unicode 14, Python 3.11's unicodedata; a test checks
# the list). NFD puts a text's combining marks in canonical order; once the nonspacing marks (Mn)
# are stripped, these are the only characters whose order that can change. A text with one of them
# takes the exact path through ``_decomposed`` (rare: none occurs in the test corpora).
_REORDERABLE = re.compile(
    "[\u1715\u1734\u1b44\u1baa\u1bf2\u1bf3\u302e\u302f\ua953\ua9c0\U000111c0\U00011235\U0001134d"
    "\U000116b6\U0001193d\U00016ff0\U00016ff1\U0001d15e-\U0001d166\U0001d16d-\U0001d172\U0001d1bb-\U0001d1c0]"
)


def is_cjk_ideograph(code_point: int) -> bool:
    """True for a CJK ideograph, e.g. 0x4E2D ("中"); False for Hangul, Hiragana, Katakana."""
    return any(low <= code_point <= high for low, high in _CJK_RANGES)


def is_punctuation(char: str) -> bool:
    """BERT's punctuation: every non-alphanumeric printable ASCII character (``$``, ``+``, ``^`` are
    symbols to Unicode but punctuation to BERT) and every Unicode character of a category P*.

    >>> [c for c in "a,b$c¿d" if is_punctuation(c)]
    [',', '$', '¿']
    """
    code_point = ord(char)
    if 33 <= code_point <= 47 or 58 <= code_point <= 64 or 91 <= code_point <= 96 or 123 <= code_point <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_removed_in_cleaning(char: str) -> bool:
    """NUL, U+FFFD and control/format/private-use characters, but not tab, newline, carriage return."""
    if char in "\t\n\r":
        return False
    return char in "\x00\ufffd" or unicodedata.category(char) in _REMOVED_CATEGORIES


class _TranslationTable(dict):
    """A ``str.translate`` table that computes each code point's replacement on first sight.

    ``str.translate`` runs in C; only characters never seen before call back into Python. That is
    what makes the pure-Python tokenizer as fast as the Rust one on real text.
    """

    def __init__(self, rule):
        super().__init__()
        self._rule = rule

    def __missing__(self, code_point: int):
        replacement = self._rule(chr(code_point)) if code_point < 0x110000 else None
        self[code_point] = replacement
        return replacement


def _clean_rule(char: str, *, space_ideographs: bool):
    if is_removed_in_cleaning(char):
        return None
    if char.isspace():
        return " "
    if space_ideographs and is_cjk_ideograph(ord(char)):
        return f" {char} "
    return char


class BasicTokenizer:
    """Stage 1: cleaning, accent stripping, lowercasing, splitting on whitespace and punctuation.

    >>> BasicTokenizer().tokenize("Héllo, WORLD!  中文")
    ['hello', ',', 'world', '!', '中', '文']

    The whole stage is one rule per character (``words_of_char``): what the character becomes in
    a text that is then split on spaces — removed (a control character), a space (whitespace), its
    lowercase without accents, or itself between spaces (a punctuation mark or a Chinese character:
    a word of its own). ``tokenize`` applies the rule to a whole text at C speed through a
    ``str.translate`` table; ``words_with_origins`` applies the same table one character at a time,
    keeping track of where each output character came from (offsets for NER and QA). One rule, so
    ids and offsets always agree.
    """

    def __init__(
        self,
        do_lower_case: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
    ):
        self._do_lower_case = do_lower_case
        # strip_accents=None follows do_lower_case: uncased vocabularies have no accents.
        self._strip_accents = do_lower_case if strip_accents is None else strip_accents
        self._tokenize_chinese_chars = tokenize_chinese_chars
        self._make_tables()

    # The settings are fixed once made (the tables cache what they imply): make a new BasicTokenizer
    # for other settings.
    do_lower_case = property(lambda self: self._do_lower_case)
    strip_accents = property(lambda self: self._strip_accents)
    tokenize_chinese_chars = property(lambda self: self._tokenize_chinese_chars)

    def _make_tables(self) -> None:
        self._clean_table = _TranslationTable(self._clean_char)
        self._table = _TranslationTable(self.words_of_char)
        self._normalized_table = _TranslationTable(lambda char: self.normalize(self._clean_char(char) or ""))
        self._punctuation_table = _TranslationTable(is_punctuation)

    def __getstate__(self) -> dict:  # the tables are caches of the rules: rebuilt after unpickling
        return {key: value for key, value in self.__dict__.items() if not key.endswith("_table")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._make_tables()

    def _clean_char(self, char: str) -> str | None:
        return _clean_rule(char, space_ideographs=self.tokenize_chinese_chars)

    def words_of_char(self, char: str) -> str:
        r"""The whole stage for one character: clean, normalize, space out punctuation.

        >>> tokenizer = BasicTokenizer()
        >>> [tokenizer.words_of_char(c) for c in "É,\t中\x00"]
        ['e', ' , ', ' ', ' 中 ', '']
        """
        cleaned = self._clean_table[ord(char)]  # None (removed), " ", the char, or " 中 "
        if not cleaned:
            return ""
        return "".join(f" {c} " if is_punctuation(c) else c for c in self.normalize(cleaned))

    def clean(self, text: str) -> str:
        """Drop control characters, turn whitespace into spaces, space out CJK ideographs."""
        return text.translate(self._clean_table)

    def normalize(self, text: str) -> str:
        """Strip accents (NFD, then drop combining marks) and lowercase, as the vocabulary expects.

        >>> BasicTokenizer().normalize("Crème BRÛLÉE")
        'creme brulee'
        """
        if self.strip_accents and not text.isascii():
            text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
        if self.do_lower_case:
            # Lowercase each character on its own, as the Rust tokenizer does: no final-sigma rule.
            text = text.replace("Σ", "σ").lower()
        return text

    def tokenize(self, text: str) -> list[str]:
        if self._reorders(text):
            return "".join(self._table[ord(char)] for char, _ in self._decomposed(text, 0)).split()
        return text.translate(self._table).split()

    def _reorders(self, text: str) -> bool:
        """Whether NFD of the whole text could order it differently than character by character."""
        return self._strip_accents and not text.isascii() and _REORDERABLE.search(text) is not None

    def _decomposed(self, text: str, base: int) -> list[tuple[str, int]]:
        """The cleaned text in NFD, as NFD of the whole text gives it, each character with the index
        of the one it came from: decomposed character by character, then every run of combining
        marks sorted (stably) by combining class — Unicode's canonical ordering."""
        pairs = [
            (char, index)
            for index, original in enumerate(text, start=base)
            for char in unicodedata.normalize("NFD", self._clean_table[ord(original)] or "")
        ]
        start = 0
        while start < len(pairs):
            end = start
            while end < len(pairs) and unicodedata.combining(pairs[end][0]):
                end += 1
            if end > start:
                pairs[start:end] = sorted(pairs[start:end], key=lambda pair: unicodedata.combining(pair[0]))
            start = end + 1
        return pairs

    def words_with_origins(self, text: str, base: int = 0) -> list[tuple[str, list[int]]]:
        """``tokenize``, keeping track of where each character came from: for each word, the word
        and, for each of its characters, the index in ``text`` (plus ``base``) of the character
        that produced it. A piece's span in the original text follows (offsets for NER and QA).

        >>> BasicTokenizer().words_with_origins("Né, x")
        [('ne', [0, 1]), (',', [2]), ('x', [4])]
        """
        return self.split_words(self.normalized_with_origins(text, base))

    def normalized_with_origins(self, text: str, base: int = 0) -> list[tuple[str, int]]:
        """The text cleaned and normalized (``normalize(clean(text))``), one character at a time,
        each with the index in ``text`` (plus ``base``) of the character it came from. Added tokens
        (added_tokens.py) are matched in this text, before it is split into words.

        >>> BasicTokenizer().normalized_with_origins("Né中")
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


class WordPieceTokenizer:
    """Stage 2: greedy longest-match-first segmentation of one word into vocabulary pieces.

    Start at the first character, take the longest prefix that is in the vocabulary, then continue
    from where it ended with ``##``-prefixed pieces. If at some point no piece matches, the whole
    word is ``[UNK]`` (BERT does not fall back to characters).

    >>> vocab = {t: i for i, t in enumerate(["[UNK]", "un", "##want", "##ed", "runn", "##ing"])}
    >>> WordPieceTokenizer(vocab, unk_id=0).pieces("unwanted")
    [1, 2, 3]
    """

    def __init__(self, vocab: dict[str, int], unk_id: int, max_chars_per_word: int = MAX_CHARS_PER_WORD):
        self.vocab = vocab
        self.unk_id = unk_id
        self.max_chars_per_word = max_chars_per_word
        self._cache: dict[str, list[int]] = {}

    def pieces(self, word: str) -> list[int]:
        """The ids of ``word``'s pieces (cached: real text repeats its words)."""
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        ids = self._segment(word)
        if len(self._cache) > 200_000:  # bound the memory of a long-running process
            self._cache.clear()
        self._cache[word] = ids
        return ids

    def _segment(self, word: str) -> list[int]:
        if len(word) > self.max_chars_per_word:
            return [self.unk_id]
        vocab = self.vocab
        ids = []
        start = 0
        while start < len(word):
            end = len(word)
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                piece_id = vocab.get(piece)
                if piece_id is not None:
                    break
                end -= 1
            else:  # no piece of the vocabulary starts here
                return [self.unk_id]
            ids.append(piece_id)
            start = end
        return ids


def piece_spans(pieces: list[str], origins: list[int]) -> list[tuple[int, int]]:
    """Each word piece's (start, end) in the text, from the text index of each of the word's
    characters (``origins``): a ``##`` piece's two marks are not characters of the word.

    >>> piece_spans(["una", "##ff", "##able"], [10, 11, 12, 13, 14, 15, 16, 17, 18])
    [(10, 13), (13, 15), (15, 19)]
    """
    spans, position = [], 0
    for number, piece in enumerate(pieces):
        length = len(piece) - (2 if number else 0)  # "##"
        spans.append((origins[position], origins[position + length - 1] + 1))
        position += length
    return spans


def join_pieces(tokens) -> str:
    """Word pieces back to text, as transformers' WordPiece decoder does it: a ``##`` piece is glued
    to the piece before it (the first piece keeps its ``##``), other pieces follow a space, and a
    space before ``.``, ``?``, ``!``, ``,`` and a few English contractions is removed.

    >>> join_pieces(["love", "##ly", "paris", "!"])
    'lovely paris!'
    """
    parts = []
    for number, token in enumerate(tokens):
        if number == 0:
            parts.append(token)
            continue
        part = token[2:] if token.startswith("##") else " " + token
        for spaced, glued in _CLEANUPS:
            part = part.replace(spaced, glued)
        parts.append(part)
    return "".join(parts)


# The WordPiece decoder's clean-up, applied to each piece with the space before it (tokenizers'
# decoders/wordpiece.rs).
_CLEANUPS = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)
