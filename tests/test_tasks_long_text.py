"""The tasks on texts longer than the model's positions: nothing cut silently, nothing refused falsely.

fill_mask: a [MASK] beyond the positions is an error naming its piece and the limit (it was "the
text has no [MASK]"); a text cut after its [MASK]s warns once, and the guesses are those of the
text the model read. next_sentence: a pair cut to the positions warns once. tag: without stride, a
text cut at the positions warns once (stride= reads it in windows, no warning). A tokenizer whose
``truncation_side`` is "left" cuts a text's start: the [MASK]s are found in the row the model reads
(one the cut loses is an error), the results are transformers', and the warnings name the start.
The bundled fortunes-mini has 64 positions, so a few sentences are enough to pass them.
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch

import minibert
from minibert import BertTokenizer
from task_checkpoints import ner_model

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
                     r"were cut; the text's end is lost; its \[MASK\]s are all kept", caught[0])  # fmt: skip
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


def test_tag_warns_when_a_text_is_cut_and_not_with_stride(make):
    directory = ner_model(make)
    tokenizer = BertTokenizer.from_pretrained(directory)
    limit = min(tokenizer.model_max_length, 512)
    long = "Ada Lovelace was born in London. " * (limit // 4)
    _, caught = _caught(lambda: minibert.tag(["Ada was born in London.", long], model=directory))
    assert len(caught) == 1 and re.search(rf"tag, text 1: the text is \d+ pieces long .* more than the {limit} this "
                                          r"model takes: .* its end is not tagged; stride=", caught[0])  # fmt: skip
    _, windows = _caught(lambda: minibert.tag(long, model=directory, aggregation_strategy="simple", stride=16))
    assert windows == []


# ----------------------------------------------------------------------------- a tokenizer that cuts a text's start


@pytest.fixture
def left_toy(tmp_path):
    """fortunes-mini with ``"truncation_side": "left"`` in tokenizer_config.json: a long text loses its start."""
    import json
    import shutil

    from minibert.loading.hub import bundled_path

    folder = tmp_path / "fortunes-left"
    shutil.copytree(bundled_path(TOY), folder)
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "truncation_side": "left"}))
    return folder


def _transformers_left(folder):
    """transformers' fp32 model with both heads and fast tokenizer of the same folder (truncation_side read)."""
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert tokenizer.truncation_side == "left"
    return transformers.BertForPreTraining.from_pretrained(str(folder), dtype=torch.float32).eval(), tokenizer


def test_a_mask_the_left_cut_loses_is_an_error_not_another_pieces_guesses(left_toy):
    """A tokenizer that cuts a long text's start lost the [MASK] at its start: fill_mask found the
    [MASK]s in the uncut text, checked them against a cut of the end, and answered with the guesses
    for the piece that had moved into the [MASK]'s place ("cat"), warning "the [MASK]s are before the cut"."""
    text = "I [MASK] your father. " + LONG
    with pytest.raises(ValueError, match=r"the \[MASK\] is piece 2 of the text's \d+ \(counting \[CLS\] as 0\), and "
                       r"this tokenizer cuts a long text's start \(truncation_side \"left\"\).*shorten the text after "
                       r"the \[MASK\]"):  # fmt: skip
        minibert.fill_mask(text, model=left_toy)


def test_a_mask_the_left_cut_keeps_is_filled_as_transformers_reads_the_cut_text(left_toy):
    """A [MASK] near the end of a long text, which a cut of the start keeps, was refused ("beyond the
    model's positions"); it is filled from the row the model reads, as transformers computes it."""
    text = LONG + "I [MASK] your father."
    answers, caught = _caught(lambda: minibert.fill_mask(text, model=left_toy))
    assert len(caught) == 1 and "the text's start is lost; its [MASK]s are all kept" in caught[0], caught
    reference, tokenizer = _transformers_left(left_toy)
    batch = tokenizer(text, truncation=True, max_length=LIMIT, return_tensors="pt")
    assert batch["input_ids"][0, -2].item() != tokenizer.mask_token_id  # the text's end is kept
    position = batch["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    with torch.no_grad():
        scores, ids = reference(**batch).prediction_logits[0, position].softmax(-1).topk(5)
    assert [answer["token"] for answer in answers] == ids.tolist()
    # probabilities of a 64-position, 2-layer float32 model: a few ulp of values below 1
    assert [answer["score"] for answer in answers] == pytest.approx(scores.tolist(), abs=1e-6)
    assert answers[0]["sequence"].endswith("i " + answers[0]["token_str"] + " your father.")


def test_next_sentence_names_the_start_a_left_cut_loses_and_reads_what_transformers_reads(left_toy):
    first, second = "the cat sat on the mat.", LONG
    probability, caught = _caught(lambda: minibert.next_sentence(first, second, model=left_toy))
    assert len(caught) == 1 and "the longer text loses its start first" in caught[0], caught
    reference, tokenizer = _transformers_left(left_toy)
    with torch.no_grad():
        expected = reference(**tokenizer(first, second, truncation=True, max_length=LIMIT, return_tensors="pt"))
    assert probability == pytest.approx(expected.seq_relationship_logits[0].softmax(-1)[0].item(), abs=1e-6)


def test_tag_of_a_left_cut_text_is_the_pipelines_and_warns_that_its_start_is_not_tagged(make, tmp_path):
    """The pipeline cuts a long text where the tokenizer says (its start for ``truncation_side: "left"``);
    tag reads the same row, and its warning said "its end is not tagged" whatever was cut."""
    import json
    import shutil

    from task_checkpoints import same

    transformers = pytest.importorskip("transformers")
    directory = tmp_path / "left-tagger"
    shutil.copytree(ner_model(make), directory)
    settings = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(json.dumps({**settings, "truncation_side": "left"}))
    long = "Ada Lovelace was born in London. " * 40 + "Charles Babbage lived in Paris."
    ours, caught = _caught(lambda: minibert.tag(long, model=directory, aggregation_strategy="simple"))
    assert len(caught) == 1 and "its start is not tagged" in caught[0], caught
    pipeline = transformers.pipeline("token-classification", model=str(directory), aggregation_strategy="simple")
    assert pipeline.tokenizer.truncation_side == "left"
    theirs = pipeline(long)
    assert theirs and max(entity["end"] for entity in theirs) > len(long) - 10  # the end was read
    same(ours, theirs, "tag, cut at the start")
    from helpers import run_minibert

    done = run_minibert("tag", long, "--model", str(directory), "--aggregation", "simple")
    assert done.returncode == 0 and re.search(r"text 1 is \d+ pieces long .* its first \d+ pieces are not tagged; "
                                              "--stride N", done.stderr), done.stderr  # fmt: skip
