"""fast_basic.py (``FastBasicTokenizer``: translation tables, offsets — what ``BertTokenizer`` runs)
computes the words of the plain algorithm in algorithm.py (``BasicTokenizer``, the one to read),
and ``FastGoogleBasicTokenizer`` those of ``GoogleBasicTokenizer``: on the real-text corpus
(tests/corpus.py: every 100th text by default, all of them in the slow run) and on characters drawn
by hypothesis from all of Unicode, in every setting."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpus
from minibert.tokenizer.algorithm import BasicTokenizer
from minibert.tokenizer.fast_basic import FastBasicTokenizer
from minibert.tokenizer.google import FastGoogleBasicTokenizer, GoogleBasicTokenizer

SETTINGS = [(True, None, True), (False, None, True), (True, False, True), (False, True, False)]
SAMPLES = [pytest.param(100, id="every-100th"), pytest.param(1, id="all", marks=pytest.mark.slow)]


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


@pytest.mark.parametrize("step", SAMPLES)
def test_fast_equals_plain_on_the_real_text_corpus(step):
    texts = corpus.all_texts()[::step]
    assert len(texts) >= 1000
    for text in texts:
        # Google's per-character path is only used on texts without Σ (google.py): so here too.
        _assert_same(text if "Σ" not in text else text.replace("Σ", "S"))


def test_fast_equals_plain_on_characters_that_reorder_and_combine():
    for text in ["a\u0316\u0301 x", "\u1715\u0301x", "e\u0301\u0327\u0300", "\U0001d165\u0301\U0001d16d",
                 "İSTANBUL ǅemal ﬀ Ⅻ ẞ", "a\x00b\ufffd\u200bc", "中文\U0002b820 \ue000x",
                 "a\u08d5\u0316\u08d4b \u1734\u0301 \U00011938\u0301"]:  # fmt: skip
        _assert_same(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(exclude_characters="Σ"), max_size=60))
def test_fast_equals_plain_on_any_characters(text):
    _assert_same(text)
