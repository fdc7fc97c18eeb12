"""Write src/minibert/tokenizer/tokenizers_unicode.txt: the Unicode tables of Hugging Face ``tokenizers``.

minibert's ``BertTokenizer`` promises the ids of ``tokenizers``' BertTokenizerFast for every text. The
Rust tokenizer answers each question of BERT's basic tokenizer from a different Unicode table, none
of them the running Python's ``unicodedata``:

| question | tokenizers asks | Unicode version |
|---|---|---|
| removed (control, format, private use) | ``unicode_categories`` 0.1.1 ``is_other`` (Cc, Cf, Co) | 8.0 |
| punctuation | ``char::is_ascii_punctuation`` or ``unicode_categories`` ``is_punctuation`` (P*) | 8.0 |
| nonspacing mark (stripped with accents) | ``unicode_categories`` ``is_mark_nonspacing`` (Mn) | 8.0 |
| NFD (decomposition, canonical order) | ``unicode-normalization-alignments`` 0.1 | 9.0 |
| whitespace | Rust's ``char::is_whitespace`` | the Rust that built the wheel (17.0 for 0.23.3) |
| lowercase | Rust's ``char::to_lowercase`` | the Rust that built the wheel (17.0 for 0.23.3) |

This script does not read those crates: it asks the installed ``tokenizers`` about every code point
(its BertNormalizer, BertPreTokenizer, NFD and Lowercase normalizers, one character at a time) and
writes down the answers, as code point ranges and maps. (The versions in the table are read off
the answers: U+08E3, Unicode 8.0, is a nonspacing mark to tokenizers and U+08D4, Unicode 9.0, is not,
yet its NFD gives U+08D4 its combining class 230 and U+1DF6, Unicode 10.0, none; U+16EA0, Unicode 17.0,
lowercases.) Run it again after upgrading ``tokenizers``
(``python scripts/make_tokenizers_unicode_table.py``, about two minutes on one core); the tests
tests/test_tokenizer_unicode_tables.py then say whether minibert still equals it on every character.
"""

from __future__ import annotations

import argparse
import sys
import unicodedata
from pathlib import Path

import tokenizers
from tokenizers import normalizers, pre_tokenizers

OUTPUT = Path(__file__).resolve().parent.parent / "src" / "minibert" / "tokenizer" / "tokenizers_unicode.txt"
SURROGATES = range(0xD800, 0xE000)  # a Rust char cannot be one: tokenizers never receives them
HANGUL_SYLLABLES = range(0xAC00, 0xD7A4)  # decomposed by a formula (in the module, not in the table)

CLEAN = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
STRIP = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
NFD = normalizers.NFD()
LOWERCASE = normalizers.Lowercase()
PRE_TOKENIZER = pre_tokenizers.BertPreTokenizer()
LOW_CLASS_MARK, HIGH_CLASS_MARK = "\u0334", "\u0345"  # combining classes 1 and 240


def words(text: str) -> list[str]:
    return [word for word, _ in PRE_TOKENIZER.pre_tokenize_str(text)]


def has_a_combining_class(char: str) -> bool:
    """Whether tokenizers' NFD reorders ``char`` among combining marks (a non-zero class): a mark of
    class 1 after it, or one of class 240 before it, moves."""
    return NFD.normalize_str(char + LOW_CLASS_MARK) != char + LOW_CLASS_MARK or (
        NFD.normalize_str(HIGH_CLASS_MARK + char) != HIGH_CLASS_MARK + char
    )


def probe() -> dict:
    sets = {"other": set("\t\n\r"), "whitespace": set(), "punctuation": set(), "nonspacing_mark": set()}
    decomposition, combining_class, lowercase = {}, {}, {}
    for code_point in range(sys.maxunicode + 1):
        if code_point in SURROGATES:
            continue
        char = chr(code_point)
        cleaned = CLEAN.normalize_str(char)
        split = words(f"a{char}b")
        if split == ["a", "b"]:
            sets["whitespace"].add(char)
        elif split == ["a", char, "b"]:
            sets["punctuation"].add(char)
        else:
            assert split == [f"a{char}b"], (hex(code_point), split)
        if cleaned == "" and char != "\ufffd":
            sets["other"].add(char)
        else:  # kept: a space exactly when the pre-tokenizer splits on it
            assert cleaned == (" " if char in sets["whitespace"] else char) or char == "\ufffd", hex(code_point)
        decomposed = NFD.normalize_str(char)
        if decomposed != char:
            if code_point not in HANGUL_SYLLABLES:
                decomposition[char] = decomposed
        else:
            if STRIP.normalize_str(char) == "":
                sets["nonspacing_mark"].add(char)
            if has_a_combining_class(char):
                # Classes never change once assigned; Python's database is newer than tokenizers' NFD.
                assert unicodedata.combining(char) > 0, hex(code_point)
                combining_class[char] = unicodedata.combining(char)
        lowered = LOWERCASE.normalize_str(char)
        if lowered != char:
            lowercase[char] = lowered
    return {**sets, "decomposition": decomposition, "combining_class": combining_class, "lowercase": lowercase}


def ranges(chars: set[str]) -> list[str]:
    code_points = sorted(map(ord, chars))
    lines, start = [], 0
    for index in range(1, len(code_points) + 1):
        if index == len(code_points) or code_points[index] != code_points[index - 1] + 1:
            low, high = code_points[start], code_points[index - 1]
            lines.append(f"{low:04X}" if low == high else f"{low:04X}..{high:04X}")
            start = index
    return lines


def hexes(text: str) -> str:
    return " ".join(f"{ord(char):04X}" for char in text)


SECTION_NOTES = {
    "other": "Cc, Cf, Co (unicode_categories' is_other): removed while cleaning, but tab, newline, return",
    "whitespace": "Rust's char::is_whitespace: a space while cleaning, and where words are split",
    "punctuation": "ASCII punctuation and P* (unicode_categories): a word of its own",
    "nonspacing_mark": "Mn (unicode_categories): dropped after NFD when accents are stripped",
    "decomposition": "NFD of one character (unicode-normalization-alignments); Hangul syllables by formula",
    "combining_class": "canonical combining class, for NFD's reordering of marks (0 when not listed)",
    "lowercase": "Rust's char::to_lowercase, where it changes the character",
}


def render(tables: dict) -> str:
    """The text of tokenizers_unicode.txt: a header, then one section per table."""
    lines = [
        "# The Unicode tables of Hugging Face tokenizers' BERT normalizer and pre-tokenizer, as the installed",
        f"# tokenizers {tokenizers.__version__} answers them for every code point. Written by",
        "# scripts/make_tokenizers_unicode_table.py (its docstring says where each table comes from); read by",
        "# src/minibert/tokenizer/tokenizers_unicode.py. Do not edit by hand: run the script again.",
    ]
    for name, note in SECTION_NOTES.items():
        lines.append(f"[{name}]  # {note}")
        table = tables[name]
        if isinstance(table, set):
            lines += ranges(table)
        elif name == "combining_class":
            for value in sorted(set(table.values())):
                lines += [f"{span} {value}" for span in ranges({c for c, v in table.items() if v == value})]
        else:
            lines += [f"{ord(char):04X} {hexes(value)}" for char, value in sorted(table.items())]
    return "\n".join(lines) + "\n"


def main() -> None:
    tables = probe()
    OUTPUT.write_text(render(tables), encoding="ascii")
    sizes = ", ".join(f"{name} {len(table)}" for name, table in tables.items())
    print(f"wrote {OUTPUT} ({sizes})")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()  # --help: what it writes
    main()
