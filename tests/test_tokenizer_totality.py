"""The tokenizer is total: any text (hypothesis draws them from all of Unicode) gives [CLS] ... [SEP]
with ids inside the vocabulary, in windows too; and decode(encode(x)) gives x back for text made of
vocabulary words, after the basic tokenizer's normalisation."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibert import BertTokenizer


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    return BertTokenizer(vocab_file)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_tokenizer_is_total(tokenizer, text):
    ids = tokenizer(text)["input_ids"]
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert all(0 <= index < tokenizer.vocab_size for index in ids)
    windows = tokenizer(text, truncation=True, max_length=8, stride=2, return_overflowing_tokens=True)
    assert all(len(row) <= 8 and row[0] == 101 and row[-1] == 102 for row in windows["input_ids"])


VOCABULARY_PIECES = ["hello", "world", "paris", "is", "the", "capital", "un", "##want", "##ed", "runn", "##ing",
                     "water", "bank", "river", "à", "中", "'", "-", "(", ")"]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(VOCABULARY_PIECES), max_size=30))
def test_decode_round_trip(tokenizer, pieces):
    """decode(encode(x)) == x for text made of vocabulary words after normalisation."""
    words, current = [], ""
    for piece in pieces:
        if piece.startswith("##"):
            current += piece[2:]
        else:
            if current:
                words.append(current)
            current = piece
    if current:
        words.append(current)
    text = " ".join(words)
    normalized = " ".join(tokenizer.basic.tokenize(text))
    decoded = tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True)
    assert decoded == normalized
