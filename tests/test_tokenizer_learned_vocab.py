"""A vocabulary learned by minibert (``train_wordpiece`` + ``save_vocabulary``, what ``minibert vocab``
writes) from text holding every Unicode category is read the same way by minibert's BertTokenizer
and transformers' BertTokenizerFast (the Rust tokenizers): the same ids for every line.

One known exception, documented in docs/tokenizer.md: characters newer than tokenizers' Unicode
tables (it takes them for unassigned letters; minibert follows the running Python's Unicode 14,
e.g. U+119E2, a punctuation mark since Unicode 12). A line holding one is compared after those
characters are found one by one against tokenizers (``_unknown_to_tokenizers``) — and the test
says how many lines that left out.
"""

from __future__ import annotations

import functools

import pytest
from unicode_text import every_category_lines

from minibert.tokenizer import BertTokenizer, save_vocabulary, train_wordpiece

transformers = pytest.importorskip("transformers")


def _learned(tmp_path, lines, lowercase):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines * 2) + "\n", encoding="utf-8")
    pieces = train_wordpiece([corpus], vocab_size=9000, min_frequency=1, limit_alphabet=None, lowercase=lowercase)
    save_vocabulary(tmp_path, pieces, lowercase=lowercase)
    return BertTokenizer.from_pretrained(str(tmp_path)), transformers.BertTokenizerFast.from_pretrained(str(tmp_path))


def _compare(tmp_path, lines, lowercase) -> int:
    ours, reference = _learned(tmp_path, lines, lowercase)

    @functools.cache
    def unknown_to_tokenizers(char: str) -> bool:
        text = f"x{char}y {char}"
        return ours(text)["input_ids"] != reference(text)["input_ids"]

    left_out = 0
    for line, want, got in zip(lines, reference(lines)["input_ids"], ours(lines)["input_ids"], strict=True):
        if want != got:
            assert any(unknown_to_tokenizers(char) for char in set(line)), (
                f"{line!r}:\n  tokenizers {reference.convert_ids_to_tokens(want)}\n"
                f"  minibert   {ours.convert_ids_to_tokens(got)}")  # fmt: skip
            left_out += 1
    assert left_out < len(lines) * 0.05, f"{left_out} of {len(lines)} lines hold characters tokenizers does not know"
    return left_out


@pytest.mark.parametrize("lowercase", [True, False])
def test_a_learned_vocabulary_reads_the_same_in_both_tokenizers(tmp_path, lowercase):
    lines = every_category_lines(step=211)
    _compare(tmp_path, lines, lowercase)


@pytest.mark.slow
def test_a_learned_vocabulary_reads_the_same_on_every_code_point(tmp_path):
    lines = every_category_lines(step=3)
    _compare(tmp_path, lines, True)
