"""Google's tokenizer, character for character: ``google_tokenizer(vocab)`` = ``FullTokenizer``.

minibert's ``BertTokenizer`` follows Hugging Face ``tokenizers`` (what ``AutoTokenizer`` gives).
Where Google's output is the contract — pre-training instances equal to those of
``create_pretraining_data.py``, features equal to ``run_classifier.py``'s — the text must be cut
as google-research/bert's ``tokenization.py`` cuts it. The two differ on a few characters only,
and ``GoogleBasicTokenizer`` is the plain ``BasicTokenizer`` (algorithm.py) with those rules
changed (docs/tokenizer.md's table lists every difference):

- private-use characters (category Co) are text to Google (removed by ``tokenizers``);
- U+2B820–U+2B91F are CJK ideographs to Google, each a word of its own (``tokenizers``' table starts
  CJK Extension E at U+2B920);
- Google lowercases a whole word with ``str.lower`` (a word-final Σ becomes ς), then strips
  accents; ``tokenizers`` strips accents, then lowercases each character (σ);
- a word of more than 200 characters is ``[UNK]`` (``tokenizers``: 100);
- every character class (control, whitespace, punctuation, nonspacing mark, NFD, lowercase) is the
  running Python's ``unicodedata``, as Google's code asks it (``tokenizers`` has its own tables,
  tokenizers_unicode.py).

``preserve_unused_tokens=True`` is the flag of the same name in Google's tokenization.py (as
released in bert-tensorflow 1.0.4): a whitespace-separated word that is exactly a vocabulary entry
``[unused<digits>]`` stays whole (not lowercased, not cut at ``[`` and ``]``).

>>> vocab = {t: i for i, t in enumerate(["[UNK]", "[unused0]", "ο", "##δ", "##ος"])}
>>> google_tokenizer(vocab).tokenize("ΟΔΟΣ [unused0]")
['ο', '##δ', '##ος', '[UNK]', '[UNK]', '[UNK]']
>>> google_tokenizer(vocab, preserve_unused_tokens=True).tokenize("ΟΔΟΣ [unused0]")
['ο', '##δ', '##ος', '[unused0]']
"""

from __future__ import annotations

import re
import unicodedata

from .algorithm import CJK_RANGES, BasicTokenizer, WordPieceTokenizer
from .fast_basic import FastBasicTokenizer

GOOGLE_MAX_CHARS_PER_WORD = 200  # google-research/bert's WordpieceTokenizer default
UNUSED_TOKEN = re.compile(r"^\[unused\d+\]$")  # Google's _UNUSED_TOKEN_RE, as Google wrote it

# Google's _is_chinese_char: tokenizers' ranges, but CJK Extension E starts at 0x2B820, not 0x2B920.
GOOGLE_CJK_RANGES = tuple((0x2B820 if low == 0x2B920 else low, high) for low, high in CJK_RANGES)

# Spacing marks with a non-zero combining class, and the characters that decompose into them, in
# Python 3.11's unicodedata (Unicode 14; a test checks the list against the running Python): the
# characters whose order NFD of a whole text can change once nonspacing marks are stripped
# (fast_basic.py's ``reorderable``; tokenizers' own list comes from its tables).
GOOGLE_REORDERABLE = re.compile(
    "[\u1715\u1734\u1b44\u1baa\u1bf2\u1bf3\u302e\u302f\ua953\ua9c0\U000111c0\U00011235\U0001134d"
    "\U000116b6\U0001193d\U00016ff0\U00016ff1\U0001d15e-\U0001d166\U0001d16d-\U0001d172\U0001d1bb-\U0001d1c0]"
)


def python_strip_accents(text: str) -> str:
    """Google's _run_strip_accents: NFD, then drop category Mn (the running Python's unicodedata)."""
    return "".join(char for char in unicodedata.normalize("NFD", text) if unicodedata.category(char) != "Mn")


def python_is_punctuation(char: str) -> bool:
    """Google's _is_punctuation: non-alphanumeric printable ASCII, or a category P* in unicodedata."""
    code_point = ord(char)
    if 33 <= code_point <= 47 or 58 <= code_point <= 64 or 91 <= code_point <= 96 or 123 <= code_point <= 126:
        return True
    return unicodedata.category(char).startswith("P")


class GoogleBasicTokenizer(BasicTokenizer):
    """``BasicTokenizer`` with Google's rules (the list above); ``kept_whole``: words left as they are.

    >>> GoogleBasicTokenizer().tokenize("ΣΟΦΟΣ \\ue000x")
    ['σοφος', '\\ue000x']
    """

    def __init__(self, do_lower_case: bool = True, kept_whole: frozenset[str] = frozenset()):
        # Google strips accents exactly when it lowercases, and always spaces out ideographs.
        super().__init__(do_lower_case, strip_accents=do_lower_case, tokenize_chinese_chars=True)
        self.kept_whole = kept_whole

    def words_of(self, word: str) -> list[str]:
        if word in self.kept_whole:  # preserve_unused_tokens
            return [word]
        return super().words_of(word)

    def normalize(self, text: str) -> str:
        """Google lowercases a whole word with ``str.lower`` (final ς), then strips accents."""
        return python_strip_accents(text.lower()) if self.do_lower_case else text

    def is_removed_in_cleaning(self, char: str) -> bool:
        """Google's _clean_text: NUL, U+FFFD and categories Cc and Cf, except tab, newline, return."""
        return char in "\x00\ufffd" or (char not in "\t\n\r" and unicodedata.category(char) in ("Cc", "Cf"))

    def is_cjk_ideograph(self, char: str) -> bool:
        code_point = ord(char)
        return any(low <= code_point <= high for low, high in GOOGLE_CJK_RANGES)

    def is_whitespace(self, char: str) -> bool:
        """Python's str.isspace: Google's _is_whitespace makes " ", tab, newline, return and Zs a
        space; the other characters isspace() knows are controls (removed) or U+2028/U+2029, on which
        Google's whitespace_tokenize (str.split) splits all the same."""
        return char.isspace()

    def is_punctuation(self, char: str) -> bool:
        return python_is_punctuation(char)

    def decompose(self, char: str) -> str:
        return unicodedata.normalize("NFD", char)

    def combining_class(self, char: str) -> int:
        return unicodedata.combining(char)


class FastGoogleBasicTokenizer(FastBasicTokenizer, GoogleBasicTokenizer):
    """Google's rules through fast_basic.py's translation tables (a rule per character), for a text
    where Google's rules are per character: without Σ (Google lowercases whole words) and without
    a word kept whole. ``GoogleFullTokenizer`` sends the other texts to the plain version."""

    def __init__(self, do_lower_case: bool = True):
        GoogleBasicTokenizer.__init__(self, do_lower_case)
        self._make_tables()

    def reorderable(self) -> re.Pattern:
        return GOOGLE_REORDERABLE


class GoogleFullTokenizer:
    """Google's ``FullTokenizer`` over a vocabulary {piece: id}: stage 1 with Google's rules, then
    WordPiece with Google's 200-character limit. ``tokenize`` gives pieces, ``piece_ids`` ids.
    Texts run through ``FastGoogleBasicTokenizer`` unless a rule of Google's needs the whole word."""

    def __init__(self, vocab: dict[str, int], do_lower_case: bool = True, preserve_unused_tokens: bool = False,
                 unk_token: str = "[UNK]"):  # fmt: skip
        self.vocab = vocab
        kept = frozenset(token for token in vocab if preserve_unused_tokens and UNUSED_TOKEN.search(token))
        self.basic = GoogleBasicTokenizer(do_lower_case, kept)
        self._fast = FastGoogleBasicTokenizer(do_lower_case)
        self.wordpiece = WordPieceTokenizer(vocab, vocab[unk_token], GOOGLE_MAX_CHARS_PER_WORD)
        self._tokens = {index: token for token, index in vocab.items()}

    def piece_ids(self, text: str) -> list[int]:
        per_character = not (self.basic.do_lower_case and "Σ" in text) and not (self.basic.kept_whole and "[" in text)
        ids = []
        for word in (self._fast if per_character else self.basic).tokenize(text):
            ids.extend([self.vocab[word]] if word in self.basic.kept_whole else self.wordpiece.pieces(word))
        return ids

    def tokenize(self, text: str) -> list[str]:
        return [self._tokens[index] for index in self.piece_ids(text)]


def google_tokenizer(vocab: dict[str, int], do_lower_case: bool = True,
                     preserve_unused_tokens: bool = False) -> GoogleFullTokenizer:  # fmt: skip
    """Google's ``FullTokenizer(vocab_file, do_lower_case)`` over an already-read vocabulary: the
    tokenizer of ``pretraining-data`` and of every output that must equal Google's."""
    return GoogleFullTokenizer(vocab, do_lower_case, preserve_unused_tokens)
