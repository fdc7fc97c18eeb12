"""Text holding every Unicode general category, for the tests that compare tokenizers on every
character (Google's FullTokenizer, transformers' BertTokenizerFast).

``every_category_lines(step)`` takes every ``step``-th code point of Unicode (step 1: all
1,114,112 but the lone surrogates, which UTF-8 cannot carry), adds the characters on which the
tokenizers are known to differ, and cuts them into lines of short words, so that characters meet
letters, punctuation and each other inside words.
"""

from __future__ import annotations

import functools
import random
import string
import sys
import unicodedata

# Where tokenizers and Google differ, or could: private use, the CJK Extension E bound (U+2B820 vs
# U+2B920), the final sigma, İ (lowercase has a combining dot), combining marks in non-canonical
# order, spacing marks with a combining class (NFD reorders them), the unassigned, [unused0].
SPECIAL_WORDS = [
    "\ue1e5", "a\ue1e5b", "\U000f0001x", "\U0002b820\U0002b91f\U0002b920", "ΟΔΟΣ", "ΣΟΦΟΣ.", "ΑΣ-ΑΣ", "Σ",
    "İstanbul", "a\u0316\u0301", "a\u0301\u0316", "\u1715\u0301x", "\U0001d165\u0301", "\U000e0080",
    "\u0378", "[unused0]", "[UNUSED0]", "x[unused1]", "\ufffd", "a\x00b", "ǅ", "ﬀ", "Ⅻ", "ß", "ẞ",
]  # fmt: skip


@functools.cache
def _by_category() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for code_point in range(sys.maxunicode + 1):
        found.setdefault(unicodedata.category(chr(code_point)), []).append(chr(code_point))
    return found


def every_category_chars(step: int) -> list[str]:
    """Every ``step``-th code point, and the first and last five of each category (but no lone
    surrogate and no newline)."""
    chars = {chr(code_point) for code_point in range(0, sys.maxunicode + 1, step)}
    for members in _by_category().values():
        chars.update(members[:5] + members[-5:])
    return sorted(char for char in chars if unicodedata.category(char) != "Cs" and char != "\n")


def every_category_lines(step: int, seed: int = 0) -> list[str]:
    """Lines of words of 1–4 characters (every ``step``-th code point, in a shuffled order) mixed
    with ASCII words and ``SPECIAL_WORDS``; no line is empty and none holds a newline."""
    rng = random.Random(seed)
    chars = every_category_chars(step)
    rng.shuffle(chars)
    words, position = [], 0
    while position < len(chars):
        length = rng.randint(1, 4)
        words.append("".join(chars[position : position + length]))
        position += length
        if rng.random() < 0.3:
            words.append(rng.choice(["the", "Cat", "naïve", "CAFÉ", "x", "ok,"]))
    words += SPECIAL_WORDS * 3
    rng.shuffle(words)
    lines = [" ".join(words[start : start + 12]) for start in range(0, len(words), 12)]
    return [line for line in lines if line.strip()]


def categories(lines: list[str]) -> set[str]:
    return {unicodedata.category(char) for line in lines for char in line}


def vocabulary_of(lines: list[str]) -> list[str]:
    """Every character of the text, lowercased and decomposed too, alone and as a ``##`` piece,
    after BERT's special tokens and ten ``[unusedN]``: each word of the text then has pieces (one
    per character), so pieces compared show every character's fate. Whitespace characters are left
    out (a vocab.txt line is stripped)."""
    text = "".join(lines)
    chars = sorted(set(text + text.lower() + unicodedata.normalize("NFD", text.lower())))
    chars = [char for char in chars if not char.isspace() and char not in "\r\n"]
    specials = ["[PAD]", *(f"[unused{number}]" for number in range(10)), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    return list(dict.fromkeys(specials + ["the", "cat", "##s"] + chars + ["##" + char for char in chars]))


@functools.cache
def python_and_tokenizers_disagree() -> list[str]:
    """Every character on which the running Python's unicodedata and tokenizers' tables
    (tokenizers_unicode.txt) answer one of BERT's questions differently: control/format/private use,
    whitespace, punctuation, nonspacing mark, combining class, NFD, lowercase — where minibert's
    tokenizer went wrong while it asked Python (585 characters under Python 3.11)."""
    from minibert.tokenizer.tokenizers_unicode import TOKENIZERS_UNICODE as tables

    python: dict[str, set[str]] = {name: set() for name in ("other", "whitespace", "punctuation", "mark", "changed")}
    for char in map(chr, range(sys.maxunicode + 1)):
        category = unicodedata.category(char)
        if category in ("Cc", "Cf", "Co"):
            python["other"].add(char)
        elif category[0] == "P" or (category == "Mn"):
            python["punctuation" if category[0] == "P" else "mark"].add(char)
        if char.isspace():
            python["whitespace"].add(char)
        if unicodedata.combining(char) or unicodedata.decomposition(char) or char.lower() != char:
            python["changed"].add(char)
    python["punctuation"].update(string.punctuation)

    def expand(ranges) -> set[str]:
        return {chr(code_point) for low, high in ranges.spans for code_point in range(low, high + 1)}

    theirs = {"other": tables.other, "whitespace": tables.whitespace, "punctuation": tables.punctuation,
              "mark": tables.nonspacing_mark}  # fmt: skip
    found = set().union(*(python[name] ^ expand(ranges) for name, ranges in theirs.items()))
    changed = python["changed"].union(tables.combining_classes, tables.lowercases, tables.decompositions)

    def python_says(char: str) -> tuple:
        return unicodedata.combining(char), unicodedata.normalize("NFD", char), char.lower()

    def tables_say(char: str) -> tuple:
        return tables.combining_class(char), tables.decompose(char), tables.lowercase(char)

    found.update(char for char in changed if python_says(char) != tables_say(char))
    return sorted(char for char in found if not "\ud800" <= char <= "\udfff")
