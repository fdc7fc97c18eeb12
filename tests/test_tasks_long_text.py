"""The tasks on texts longer than the model's positions: nothing cut silently, nothing refused falsely.

fill_mask: a [MASK] beyond the positions is an error naming its piece and the limit (it was "the
text has no [MASK]"); a text cut after its [MASK]s warns once, and the guesses are those of the
text the model read. next_sentence: a pair cut to the positions warns once. tag: without stride, a
text cut at the positions warns once (stride= reads it in windows, no warning). The bundled
fortunes-mini has 64 positions, so a few sentences are enough to pass them.
"""

from __future__ import annotations

import re
import warnings

import pytest
from test_tasks import make, ner_model  # noqa: F401  (make: the fixture)

import minibert
from minibert import BertTokenizer

TOY = "minibert/fortunes-mini"
LIMIT = 64  # fortunes-mini's max_position_embeddings
LONG = "the cat sat on the mat and looked at the dog. " * 12  # well over 64 pieces


def _caught(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(warning.message) for warning in caught]


def test_a_mask_beyond_the_positions_is_an_error_naming_its_piece_and_the_limit():
    tokenizer = BertTokenizer.from_pretrained(TOY)
    text = LONG + "the [MASK] sat."
    piece = tokenizer(text, verbose=False)["input_ids"].index(tokenizer.mask_token_id)
    assert piece > LIMIT
    with pytest.raises(ValueError, match=rf"the \[MASK\] is piece {piece} of the text's \d+ \(counting \[CLS\] as 0\), "
                       rf"beyond the model's {LIMIT} positions") as raised:  # fmt: skip
        minibert.fill_mask(text, model=TOY)
    assert "no [MASK]" not in str(raised.value)
    with pytest.raises(ValueError, match=re.escape("the text has no [MASK] token to fill")):  # still, when it has none
        minibert.fill_mask(LONG, model=TOY)


def test_a_mask_at_the_last_position_that_fits_is_filled():
    tokenizer = BertTokenizer.from_pretrained(TOY)
    words = tokenizer.tokenize(LONG)[: LIMIT - 3]  # [CLS], 61 pieces, the [MASK] at piece 62, then [SEP]: 64
    text = tokenizer.convert_tokens_to_string(words) + " [MASK] " + LONG
    assert tokenizer(text, verbose=False)["input_ids"].index(tokenizer.mask_token_id) == LIMIT - 2
    answers, caught = _caught(lambda: minibert.fill_mask(text, model=TOY))
    assert len(answers) == 5 and len(caught) == 1


def test_a_cut_after_the_mask_warns_once_with_the_guesses_of_what_was_read():
    text = "the [MASK] sat on the mat. " + LONG
    answers, caught = _caught(lambda: minibert.fill_mask(text, model=TOY))
    assert len(caught) == 1
    assert re.search(rf"fill_mask: the text is \d+ pieces long .* more than the model's {LIMIT} positions: \d+ pieces "
                     r"were cut; the \[MASK\]s are before the cut", caught[0])  # fmt: skip
    tokenizer = BertTokenizer.from_pretrained(TOY)
    kept = tokenizer.decode(tokenizer(text, truncation=True, max_length=LIMIT)["input_ids"][1:-1])
    read, none = _caught(lambda: minibert.fill_mask(kept, model=TOY))
    assert none == [] and [a["token_str"] for a in read] == [a["token_str"] for a in answers]
    assert [a["score"] for a in read] == pytest.approx([a["score"] for a in answers], abs=1e-6)
    assert _caught(lambda: minibert.fill_mask("the [MASK] sat on the mat.", model=TOY))[1] == []


def test_next_sentence_warns_when_the_pair_is_cut():
    _, caught = _caught(lambda: minibert.next_sentence("the cat sat on the mat.", LONG, model=TOY))
    assert len(caught) == 1 and "next_sentence: the text is" in caught[0]
    assert f"more than the model's {LIMIT} positions" in caught[0] and "the longer text loses its end" in caught[0]
    assert _caught(lambda: minibert.next_sentence("the cat sat.", "it was tired.", model=TOY))[1] == []


def test_tag_warns_when_a_text_is_cut_and_not_with_stride(make):  # noqa: F811
    directory = ner_model(make)
    tokenizer = BertTokenizer.from_pretrained(directory)
    limit = min(tokenizer.model_max_length, 512)
    long = "Ada Lovelace was born in London. " * (limit // 4)
    _, caught = _caught(lambda: minibert.tag(["Ada was born in London.", long], model=directory))
    assert len(caught) == 1 and re.search(rf"tag, text 1: the text is \d+ pieces long .* more than the {limit} this "
                                          r"model takes: .* its end is not tagged; stride=", caught[0])  # fmt: skip
    _, windows = _caught(lambda: minibert.tag(long, model=directory, aggregation_strategy="simple", stride=16))
    assert windows == []
