"""fast_basic.py (``FastBasicTokenizer``: translation tables, offsets — what ``BertTokenizer`` runs)
computes the words of the plain algorithm in algorithm.py (``BasicTokenizer``, the one to read),
and ``FastGoogleBasicTokenizer`` those of ``GoogleBasicTokenizer``: on the real-text corpus
(tests/corpus.py: every 100th text by default, every distinct word of all of them in the slow run)
and on characters drawn by hypothesis from all of Unicode, in every setting."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spread import split, spread

import corpus
from minibert.tokenizer.algorithm import BasicTokenizer
from minibert.tokenizer.fast_basic import FastBasicTokenizer
from minibert.tokenizer.google import FastGoogleBasicTokenizer, GoogleBasicTokenizer

SETTINGS = [(True, None, True), (False, None, True), (True, False, True), (False, True, False)]


def _pairs():
    for lower, strip, chinese in SETTINGS:
        options = (lower, strip, chinese)
        yield f"{lower}-{strip}-{chinese}", BasicTokenizer(*options), FastBasicTokenizer(*options)
    for lower in (True, False):
        yield f"google-{lower}", GoogleBasicTokenizer(lower), FastGoogleBasicTokenizer(lower)


PAIRS = list(_pairs())


def _assert_same(text: str) -> None:
    for name, plain, fast in PAIRS:
        want = plain.tokenize(text)
        assert fast.tokenize(text) == want, f"{name} {text!r}: fast {fast.tokenize(text)} plain {want}"
        if not name.startswith("google"):  # the words of the offset path too
            assert [word for word, _ in fast.words_with_origins(text)] == want, f"{name} {text!r}: offsets path"
            assert fast.clean(text) == plain.clean(text)


def _without_sigma(text: str) -> str:
    # Google's per-character path is only used on texts without Σ (google.py): so here too.
    return text.replace("Σ", "S")


def _assert_same_on_each(texts: list[str]) -> None:
    for text in texts:
        _assert_same(text)


def test_fast_equals_plain_on_every_100th_text_of_the_real_text_corpus():
    texts = corpus.all_texts()[::100]
    assert len(texts) >= 1000
    _assert_same_on_each([_without_sigma(text) for text in texts])


@pytest.mark.slow
def test_fast_equals_plain_on_every_word_of_the_real_text_corpus():
    """Every distinct space-separated word of the whole corpus (6.5 M characters, 1.1 M of them in
    distinct words), 64 to a text, on every core. The same words as the whole texts, 5.7 times
    fewer characters: BERT's basic tokenizer never looks across a space (its clean-up, the spaces
    round CJK characters, lowercasing and accent stripping are per character or per word), so a
    word's result does not depend on its neighbours; and the every-100th test above runs whole
    texts, each word with its real neighbours."""
    words = list(dict.fromkeys(word for text in corpus.all_texts() for word in _without_sigma(text).split(" ")))
    assert len(words) > 100_000
    texts = [" ".join(words[start : start + 64]) for start in range(0, len(words), 64)]
    spread(_assert_same_on_each, split(texts))


def test_fast_equals_plain_on_characters_that_reorder_and_combine():
    for text in ["a\u0316\u0301 x", "\u1715\u0301x", "e\u0301\u0327\u0300", "\U0001d165\u0301\U0001d16d",
                 "İSTANBUL ǅemal ﬀ Ⅻ ẞ", "a\x00b\ufffd\u200bc", "中文\U0002b820 \ue000x",
                 "a\u08d5\u0316\u08d4b \u1734\u0301 \U00011938\u0301"]:  # fmt: skip
        _assert_same(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(exclude_characters="Σ"), max_size=60))
def test_fast_equals_plain_on_any_characters(text):
    _assert_same(text)
