"""tokenizer/wordpiece_plain.py (``learn_vocabulary_plainly``, the trainer to read) learns the vocabulary
of wordpiece_trainer.py (``learn_vocabulary``, the fast one ``minibert vocab`` runs): every piece at
the same id, on real text — English fortunes by default (1,000 lines, 120 merges, so the plain one takes
seconds), the multi-script translation catalogue of tests/corpus.py with 1,000 merges in the slow run.
(wordpiece_trainer.py itself is compared with tokenizers' trainer in test_tokenizer_wordpiece_trainer.py.)"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import corpus
from minibert.tokenizer.fast_basic import FastBasicTokenizer
from minibert.tokenizer.wordpiece_plain import learn_vocabulary_plainly
from minibert.tokenizer.wordpiece_trainer import learn_vocabulary

FORTUNES = Path("/usr/share/games/fortunes")


def _word_counts(texts, lowercase=True) -> Counter[str]:
    basic = FastBasicTokenizer(do_lower_case=lowercase)
    return Counter(word for text in texts for word in basic.tokenize(text))


def _assert_equal(word_counts, merges: int, **settings) -> None:
    before_merges = {**settings, "min_frequency": 10**9}
    start = len(learn_vocabulary(word_counts, 10**6, **before_merges))  # special tokens, alphabet, ## forms
    fast = learn_vocabulary(word_counts, start + merges, **settings)
    plain = learn_vocabulary_plainly(word_counts, start + merges, **settings)
    assert len(fast) == start + merges
    first = next((index for index, (a, b) in enumerate(zip(fast, plain)) if a != b), None)
    assert plain == fast, f"first difference at id {first}: plain {plain[first:first + 3]} fast {fast[first:first + 3]}"


@pytest.mark.parametrize("lowercase", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["uncased", "cased"])
def test_plain_trainer_equals_fast_on_fortunes(lowercase):
    if not FORTUNES.is_dir():
        pytest.fail("Debian's fortunes are missing: apt-get install -y fortunes")
    lines = (FORTUNES / "wisdom").read_text(encoding="utf-8").split("\n")[:1000]
    _assert_equal(_word_counts(lines, lowercase), merges=120, min_frequency=2, limit_alphabet=1000)


@pytest.mark.slow
def test_plain_trainer_equals_fast_on_many_scripts():
    _assert_equal(_word_counts(corpus.translations()[:3000]), merges=1000, min_frequency=2, limit_alphabet=200)
