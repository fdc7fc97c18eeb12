"""BERT's tokenizer algorithm, written out: text → basic tokens → WordPiece pieces.

BERT never sees characters. Its input is a sequence of ids from a fixed vocabulary of ~30,000
*word pieces* (``vocab.txt``: one piece per line, the line number is the id). Turning text into
pieces happens in two stages, exactly as in google-research/bert's ``tokenization.py``:

1. **Basic tokenization** (``BasicTokenizer``) cuts the text into words and punctuation marks:
   clean it (drop NUL, U+FFFD and control characters; every kind of whitespace becomes a space),
   put spaces around Chinese/Japanese/Korean *ideographs* (each is its own word), for uncased
   vocabularies strip accents (Unicode NFD, then drop the nonspacing marks, category Mn: spacing
   and enclosing marks, Mc and Me, stay) and lowercase, then
   split on whitespace and make every punctuation character a token of its own::

       "Héllo, WORLD!"  →  ["hello", ",", "world", "!"]

2. **WordPiece** (``WordPieceTokenizer``) splits each word into the longest pieces found in the
   vocabulary, left to right; a piece that continues a word is spelled with a ``##`` prefix::

       "unwanted"  →  ["un", "##want", "##ed"]          (google-research/bert's toy vocabulary)
       "unwantedX" →  ["[UNK]"]   (no segmentation exists, so the whole word is unknown)

``BertTokenizer`` (bert_tokenizer.py) holds the vocabulary and frames the pieces the way BERT was
pre-trained: ``[CLS] A [SEP]``, or ``[CLS] A [SEP] B [SEP]`` for a pair.

This module is the algorithm, written to be read. ``BertTokenizer`` runs the same rules through
``FastBasicTokenizer`` (fast_basic.py: translation tables at C speed, and offsets), which a test
proves equal to this one on real text and random characters.

Where the reference implementations disagree, these rules follow Hugging Face ``tokenizers`` (what
``AutoTokenizer`` gives): private-use characters are removed, accents are stripped before
lowercasing, and Σ lowercases to σ everywhere (no final-ς rule). ``google_tokenizer`` (google.py)
follows Google's ``FullTokenizer`` instead, for ``pretraining-data``; docs/tokenizer.md has the table.
The character classes (control, whitespace, punctuation, nonspacing mark, NFD, lowercase) are
``tokenizers``' own tables, not the running Python's ``unicodedata``: tokenizers_unicode.py says
which Unicode versions they are and why.
"""

from __future__ import annotations

from .tokenizers_unicode import TOKENIZERS_UNICODE

# Code point ranges of the "CJK Unified Ideographs" blocks, as in Hugging Face tokenizers.
# (Hangul, Hiragana and Katakana are not ideographs: they go through WordPiece like any word.)
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),  # tokenizers' bound; Google's tokenization.py says 0x2B820 (google.py)
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

MAX_CHARS_PER_WORD = 100  # a longer word becomes a single [UNK]


def is_cjk_ideograph(code_point: int) -> bool:
    """True for a CJK ideograph, e.g. 0x4E2D ("中"); False for Hangul, Hiragana, Katakana."""
    return code_point >= 0x3400 and any(low <= code_point <= high for low, high in CJK_RANGES)  # (none below)


def is_punctuation(char: str) -> bool:
    """BERT's punctuation: every non-alphanumeric printable ASCII character (``$``, ``+``, ``^`` are
    symbols to Unicode but punctuation to BERT) and every Unicode character of a category P*
    (in tokenizers' tables: U+061D, punctuation since Unicode 14, is not).

    >>> [c for c in "a,b$c¿d\u061d" if is_punctuation(c)]
    [',', '$', '¿']
    """
    code_point = ord(char)
    if 33 <= code_point <= 47 or 58 <= code_point <= 64 or 91 <= code_point <= 96 or 123 <= code_point <= 126:
        return True
    return TOKENIZERS_UNICODE.is_punctuation_category(char)


def is_removed_in_cleaning(char: str) -> bool:
    """NUL, U+FFFD and control, format or private-use characters (categories Cc, Cf, Co in tokenizers'
    tables), but not tab, newline, carriage return; and lone surrogates, which tokenizers cannot receive."""
    if char in "\t\n\r":
        return False
    return char in "\x00\ufffd" or TOKENIZERS_UNICODE.is_other(char) or "\ud800" <= char <= "\udfff"


class BasicTokenizer:
    """Stage 1: clean the text, space out CJK ideographs, then for each word: strip accents and
    lowercase, and cut it at punctuation. The plain algorithm, in the order Google wrote it
    (``BasicTokenizer.tokenize`` of google-research/bert's tokenization.py).

    >>> BasicTokenizer().tokenize("Héllo, WORLD!  中文")
    ['hello', ',', 'world', '!', '中', '文']

    This is the version to read. ``BertTokenizer`` runs ``FastBasicTokenizer`` (fast_basic.py), which
    computes the same words with ``str.translate`` tables and also reports where each character came
    from (offsets); a test proves the two equal on real text and on random characters. Google's own
    rules, where they differ from these, are ``GoogleBasicTokenizer`` (google.py).
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

    # Fixed once made (the fast version caches what they imply): make a new one for other settings.
    do_lower_case = property(lambda self: self._do_lower_case)
    strip_accents = property(lambda self: self._strip_accents)
    tokenize_chinese_chars = property(lambda self: self._tokenize_chinese_chars)

    def tokenize(self, text: str) -> list[str]:
        """The words of ``text``: each whitespace-separated word normalized, then cut at punctuation."""
        words = []
        for word in self.clean(text).split():
            words.extend(self.words_of(word))
        return words

    def words_of(self, word: str) -> list[str]:
        """One whitespace-separated word of the cleaned text → its normalized words."""
        return split_on_punctuation(self.normalize(word), self.is_punctuation)

    def clean(self, text: str) -> str:
        r"""Drop control characters, turn whitespace into spaces, space out CJK ideographs.

        >>> BasicTokenizer().clean("a\tb\x00c中")
        'a bc 中 '
        """
        output = []
        for char in text:
            if self.is_removed_in_cleaning(char):
                continue
            if self.is_whitespace(char):
                output.append(" ")
            elif self.tokenize_chinese_chars and self.is_cjk_ideograph(char):
                output.append(f" {char} ")
            else:
                output.append(char)
        return "".join(output)

    def normalize(self, text: str) -> str:
        """Strip accents (NFD, then drop nonspacing marks, Mn) and lowercase, as the vocabulary expects.

        >>> BasicTokenizer().normalize("Crème BRÛLÉE")
        'creme brulee'
        """
        if text.isascii():  # no accents to strip, and A-Z → a-z is all of lowercasing
            return text.lower() if self.do_lower_case else text
        if self.strip_accents:
            text = strip_accents(text)
        if self.do_lower_case:
            # Each character on its own, as the Rust tokenizer does: Σ is σ even at the end of a word
            # (Python's str.lower would write the final ς).
            text = "".join(TOKENIZERS_UNICODE.lowercase(char) for char in text)
        return text

    # The character classes, as methods so that GoogleBasicTokenizer can say where Google differs.
    def is_removed_in_cleaning(self, char: str) -> bool:
        return is_removed_in_cleaning(char)

    def is_whitespace(self, char: str) -> bool:
        return TOKENIZERS_UNICODE.is_whitespace(char)

    def is_cjk_ideograph(self, char: str) -> bool:
        return is_cjk_ideograph(ord(char))

    def is_punctuation(self, char: str) -> bool:
        return is_punctuation(char)

    def decompose(self, char: str) -> str:  # NFD of one character, for the fast path (fast_basic.py)
        return TOKENIZERS_UNICODE.decompose(char)

    def combining_class(self, char: str) -> int:
        return TOKENIZERS_UNICODE.combining_class(char)


def strip_accents(text: str) -> str:
    """Decompose (NFD: "é" → "e" + U+0301) and drop the nonspacing marks (category Mn).

    >>> strip_accents("Crème brûlée")
    'Creme brulee'
    """
    decomposed = canonical_decomposition(text, TOKENIZERS_UNICODE.decompose, TOKENIZERS_UNICODE.combining_class)
    return "".join(char for char in decomposed if not TOKENIZERS_UNICODE.is_nonspacing_mark(char))


def canonical_decomposition(text: str, decompose, combining_class) -> str:
    """NFD: each character decomposed, then the marks put in canonical order (``canonical_order``).
    ``decompose`` and ``combining_class`` say which Unicode's tables.

    >>> import unicodedata
    >>> canonical_decomposition("é\u0316", lambda c: unicodedata.normalize("NFD", c), unicodedata.combining)
    'e\u0316\u0301'
    """
    return "".join(canonical_order([part for char in text for part in decompose(char)], combining_class))


def canonical_order(items: list, combining_class) -> list:
    """Unicode's canonical ordering: each run of combining marks (class > 0) sorted by class, the
    text's order kept between equal classes. ``items`` are characters, or anything ``combining_class``
    gives a class to (fast_basic.py sorts characters paired with their origins)."""
    if len(items) < 2:  # (one character is in order: the usual case, each character asked about on its own)
        return items
    start = 0
    while start < len(items):
        end = start
        while end < len(items) and combining_class(items[end]):
            end += 1
        items[start:end] = sorted(items[start:end], key=combining_class)  # sorted() is stable
        start = end + 1
    return items


def split_on_punctuation(word: str, is_punctuation=is_punctuation) -> list[str]:
    """Cut a word at punctuation; each punctuation character is a word of its own.

    >>> split_on_punctuation("can't!")
    ['can', "'", 't', '!']
    """
    words, current = [], ""
    for char in word:
        if is_punctuation(char):
            words += [current, char] if current else [char]
            current = ""
        else:
            current += char
    return words + [current] if current else words


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
        if len(word) > self.max_chars_per_word:  # [UNK] at once, and never a cache key: the cache's memory
            return [self.unk_id]  # is bounded by its count of words of at most max_chars_per_word characters
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        ids = self._segment(word)
        if len(self._cache) > 200_000:  # bound the memory of a long-running process
            self._cache.clear()
        self._cache[word] = ids
        return ids

    def cached_pieces(self):
        """``pieces``' cache as a function, word → its ids where already segmented, else None: a
        caller looping over many words (``BertTokenizer.piece_ids``) looks each up without a method
        call, a fifth of the time of a text whose words are all known."""
        return self._cache.get

    def _segment(self, word: str) -> list[int]:
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


def join_pieces(tokens, prefix: str | None = "##", cleanup: bool = True) -> str:
    """Word pieces back to text, as the tokenizers library's WordPiece decoder does it (BERT's, in
    transformers too): a piece that starts with ``prefix`` is glued to the piece before it (the
    first piece keeps its prefix), other pieces follow a space, and with ``cleanup`` each piece, the
    first too, loses a space before ``.``, ``?``, ``!``, ``,`` and a few English contractions.
    ``prefix=None`` is tokenizer.json's ``"decoder": null``: the pieces joined by spaces, nothing else.

    >>> join_pieces(["love", "##ly", "paris", "!"])
    'lovely paris!'
    >>> join_pieces(["love", "##ly", "paris", "!"], cleanup=False), join_pieces(["love", "##ly"], prefix=None)
    ('lovely paris !', 'love ##ly')
    """
    if prefix is None:
        return " ".join(tokens)
    parts = []
    for number, token in enumerate(tokens):
        if number:
            token = token[len(prefix) :] if token.startswith(prefix) else " " + token
        if cleanup:  # (an added token may hold a space: "wait !" is cleaned as the first piece too)
            for spaced, glued in _CLEANUPS:
                token = token.replace(spaced, glued)
        parts.append(token)
    return "".join(parts)


def clean_up_tokenization(text: str) -> str:
    """transformers' ``clean_up_tokenization`` (what ``decode(clean_up_tokenization_spaces=True)``
    applies after the decoder): the space before punctuation and English contractions removed.

    >>> clean_up_tokenization("it ' s a dog , isn ' t it ?")
    "it's a dog, isn't it?"
    """
    for spaced, glued in _TRANSFORMERS_CLEANUPS:
        text = text.replace(spaced, glued)
    return text


_TRANSFORMERS_CLEANUPS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))  # fmt: skip

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
