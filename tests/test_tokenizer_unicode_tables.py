"""Every Unicode character, alone and between letters, gets the same ids and offsets from minibert's
BertTokenizer as from Hugging Face ``tokenizers`` (what transformers' BertTokenizerFast runs), for a
vocabulary that holds every piece ``tokenizers`` makes of them.

minibert answers BERT's questions about a character (control? whitespace? punctuation? nonspacing
mark? its NFD, its lowercase) from tokenizers' own tables (tokenizer/tokenizers_unicode.txt), not from
the running Python's unicodedata: tokenizers' categories are Unicode 8.0, its NFD 9.0, its whitespace
and lowercase Rust's 17.0. The default run takes every character on which Python 3.11 and those
tables disagree (585, where minibert used to differ) and every 97th code point; the slow run all
1,111,998, packed into long texts and spread over the cores.
"""

from __future__ import annotations

import sys
import unicodedata

import pytest
from spread import split, spread
from unicode_text import python_and_tokenizers_disagree

from minibert.tokenizer import BertTokenizer
from minibert.tokenizer.tokenizers_unicode import TOKENIZERS_UNICODE

tokenizers = pytest.importorskip("tokenizers")

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _reference_pipeline(lowercase: bool):
    """tokenizers' BERT pipeline, as transformers' BertTokenizerFast builds it from a vocab.txt."""
    from tokenizers import normalizers, pre_tokenizers

    normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                            lowercase=lowercase)  # fmt: skip
    return normalizer, pre_tokenizers.BertPreTokenizer()


def _compare(texts: list[str], lowercase: bool) -> None:
    """Build a vocabulary of every piece tokenizers makes of ``texts`` (each word's characters, the
    first alone and the others as ``##`` pieces), then compare the ids and offsets of both tokenizers."""
    from tokenizers import Tokenizer, models

    normalizer, pre_tokenizer = _reference_pipeline(lowercase)
    pieces = dict.fromkeys(SPECIALS)
    for text in texts:
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)):
            pieces.update(dict.fromkeys([word[0], *("##" + char for char in word[1:])]))
    vocab = {piece: index for index, piece in enumerate(pieces)}
    reference = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    reference.normalizer, reference.pre_tokenizer = normalizer, pre_tokenizer
    ours = BertTokenizer("<every piece of the texts>", do_lower_case=lowercase, vocab=vocab)
    want = [(encoding.ids, encoding.offsets) for encoding in reference.encode_batch(texts, add_special_tokens=False)]
    got = ours(texts, add_special_tokens=False, return_offsets_mapping=True)
    got = list(zip(got["input_ids"], got["offset_mapping"]))
    differing = [(f"U+{ord(text[len(text) // 2]):04X}", text, w, g) for text, w, g in zip(texts, want, got) if w != g]
    assert not differing, f"{len(differing)} of {len(texts)} texts differ, e.g. {differing[:5]}"


def _alone_and_between_letters(chars) -> list[str]:
    return [text for char in chars for text in (char, f"a{char}b")]


def _every_code_point(step: int) -> list[str]:
    return [chr(code_point) for code_point in range(0, sys.maxunicode + 1, step) if not 0xD800 <= code_point <= 0xDFFF]


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_every_character_python_disagrees_on_and_every_97th(lowercase):
    chars = sorted(set(python_and_tokenizers_disagree() + _every_code_point(97)))
    _compare(_alone_and_between_letters(chars), lowercase)


@pytest.mark.slow
@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_every_code_point(lowercase):
    """Each character alone and between letters, 256 such words to a text (BERT never looks across
    a space, so a word's ids do not depend on the other words of its text), on every core."""
    words = _alone_and_between_letters(_every_code_point(1))
    texts = [" ".join(words[start : start + 256]) for start in range(0, len(words), 256)]
    spread(_compare_part, [(part, lowercase) for part in split(texts)])


def _compare_part(part: tuple[list[str], bool]) -> None:
    _compare(*part)


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_combining_marks_in_every_order(lowercase):
    """NFD reorders the marks of a text by combining class: every pair of the characters whose order
    that can change in tokenizers' tables (spacing marks with a class, and what decomposes into
    them), with nonspacing marks of several classes, marks newer than tokenizers' NFD (class 0 to
    it) and one that is a mark to its NFD but not to its categories (U+08D4). The offsets too: a
    reordered character takes the place (the original index) of the one it moved over, as in
    tokenizers, so a word's span still covers all of its characters."""
    marks = TOKENIZERS_UNICODE.reorderable_characters() + list("\u0301\u0316\u0334\u0345\u05b0\u1df6\u1abf\u0c3c")
    texts = [f"a{first}{second}b" for first in marks for second in marks]
    _compare(texts + [f"{first}x{second}" for first in marks for second in marks[::7]], lowercase)


# Where Python 3.11's unicodedata and tokenizers disagree, one example of each kind: the text, then
# the words tokenizers makes of it (uncased). Each is checked against tokenizers and against Python.
KNOWN_DIFFERENCES = [
    # a category changed or added after Unicode 8.0, tokenizers' categories
    ("a\u061db", ["a\u061db"], "U+061D ARABIC END OF TEXT MARK: Po since Unicode 14, a letter to tokenizers"),
    ("a\u166db", ["a", "\u166d", "b"], "U+166D CANADIAN SYLLABICS CHI SIGN: So since Unicode 12, Po to tokenizers"),
    ("a\U000111c9b", ["a", "\U000111c9", "b"], "U+111C9 SHARADA SANDHI MARK: Mn since Unicode 12, Po to tokenizers"),
    ("a\u1734b", ["ab"], "U+1734 HANUNOO SIGN PAMUDPOD: Mc since Unicode 14, an Mn (stripped) to tokenizers"),
    ("a\u0890b", ["a\u0890b"], "U+0890 ARABIC POUND MARK ABOVE: Cf of Unicode 14, a letter (kept) to tokenizers"),
    ("a\u08d4b", ["a\u08d4b"], "U+08D4: an Mn of Unicode 9.0, not stripped by tokenizers (categories of 8.0)"),
    # NFD of Unicode 9.0
    ("a\U00011938b", ["a\U00011938b"], "U+11938 DIVES AKURU VOWEL SIGN O (Unicode 13): no decomposition to tokenizers"),
    # lowercase of Rust's Unicode 17.0
    ("\u1c89", ["\u1c8a"], "U+1C89 CYRILLIC CAPITAL LETTER TJE (Unicode 16): lowercased by tokenizers"),
    ("\U00016ea0", ["\U00016ebb"], "U+16EA0 BERIA ERFE CAPITAL LETTER (Unicode 17): lowercased by tokenizers"),
]


@pytest.mark.parametrize("text, words, why", KNOWN_DIFFERENCES, ids=[why[:7] for _, _, why in KNOWN_DIFFERENCES])
def test_the_named_differences_from_python(text, words, why):
    """minibert's words equal tokenizers' (the ``words`` column, checked here against tokenizers
    itself) and not what Python 3.11's unicodedata would have given."""
    from minibert.tokenizer.google import GoogleBasicTokenizer

    normalizer, pre_tokenizer = _reference_pipeline(lowercase=True)
    assert [word for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))] == words, why
    assert BertTokenizer("<none>", vocab={token: i for i, token in enumerate(SPECIALS)}).basic.tokenize(text) == words
    if unicodedata.unidata_version == "14.0.0":  # Python 3.11: its rules (Google's) give other words
        assert GoogleBasicTokenizer().tokenize(text) != words, why


@pytest.mark.slow
def test_the_table_is_what_the_installed_tokenizers_answers():
    """tokenizers_unicode.txt is what scripts/make_tokenizers_unicode_table.py writes today: an upgraded
    tokenizers with other tables fails here (run the script again)."""
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "scripts" / "make_tokenizers_unicode_table.py"
    spec = importlib.util.spec_from_file_location("make_tokenizers_unicode_table", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.render(module.probe()) == module.OUTPUT.read_text(encoding="ascii")


def test_ascii_is_normalized_by_its_shortcut_as_by_the_tables():
    """``BasicTokenizer.normalize`` takes ASCII text by a shortcut (``str.lower``, no accent
    stripping): tokenizers' tables must agree for every ASCII character, or the shortcut is wrong."""
    from minibert.tokenizer.algorithm import BasicTokenizer, strip_accents

    for code_point in range(128):
        char = chr(code_point)
        assert strip_accents(char) == char and TOKENIZERS_UNICODE.lowercase(char) == char.lower()
        assert not TOKENIZERS_UNICODE.is_nonspacing_mark(char) and TOKENIZERS_UNICODE.decompose(char) == char
    text = "".join(map(chr, range(128)))
    for lower, strip in [(True, None), (True, False), (False, True), (False, False)]:
        expected = "".join(TOKENIZERS_UNICODE.lowercase(char) for char in text) if lower else text
        assert BasicTokenizer(do_lower_case=lower, strip_accents=strip).normalize(text) == expected


def test_the_tables_are_read_once_and_then_asked_directly():
    """TOKENIZERS_UNICODE reads tokenizers_unicode.txt on its first question, then is the tables
    (no lookup through the lazy stand-in at every question), with the same answers."""
    from helpers import child_environment, run_python

    code = ("from minibert.tokenizer import tokenizers_unicode as u\n"
            "before = type(u.TOKENIZERS_UNICODE).__name__\n"
            "answer = u.TOKENIZERS_UNICODE.lowercase('\\u1c89')\n"
            "after = type(u.TOKENIZERS_UNICODE).__name__\n"
            "print(before, after, answer == '\\u1c8a', u.TOKENIZERS_UNICODE.is_whitespace(' '))")  # fmt: skip
    result = run_python(code, child_environment())
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["_Lazy", "TokenizersUnicode", "True", "True"], result.stderr
