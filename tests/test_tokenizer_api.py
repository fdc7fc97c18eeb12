"""The transformers tokenizer API beyond ids, against transformers' fast BertTokenizer (the Rust
`tokenizers`) on real text: offsets, word ids and the other alignment maps, special-tokens masks,
left padding and truncation, pad_to_multiple_of, tokenizer.pad, overflow windows of pairs,
is_split_into_words, do_basic_tokenize=False (against the slow tokenizer, which has it),
save_pretrained, a folder with no model_max_length (no limit), repr and max_len_*, and the too-long
warning."""

from __future__ import annotations

import json
import logging
import os
import random
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

import corpus
from minibert import BertTokenizer
from minibert.errors import CheckpointError, FileWriteError

transformers = pytest.importorskip("transformers")

KEYS = ("input_ids", "token_type_ids", "attention_mask")


@pytest.fixture(scope="module")
def texts():
    pool = corpus.all_texts()
    sample = [pool[i] for i in range(0, len(pool), max(1, len(pool) // 2500))]
    return sample + ["A, naïve [MASK] AllenNLP sentence.", "cafe\u0301 x", "a\x00b c\u200bd", "\u0301abc", "中文x"]


@pytest.fixture(scope="module")
def long_texts():
    return [text for text in corpus.docstrings() if len(text) > 300][:120]


@pytest.fixture(scope="module")
def pairs(texts):
    rng = random.Random(7)
    return rng.sample(texts, 600), rng.sample(texts, 600)


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def both(request, vocab_file):
    """(minibert, reference) with the same settings."""
    lower = request.param
    return BertTokenizer(vocab_file, do_lower_case=lower), transformers.BertTokenizerFast(
        str(vocab_file), do_lower_case=lower
    )


def _same(mine, theirs, keys, label):
    for key in keys:
        assert mine[key] == theirs[key], f"{label}: {key} differs"


def _same_alignment(mine, theirs, rows, label):
    for row in range(rows):
        assert mine.word_ids(row) == theirs.word_ids(row), f"{label}: word_ids of row {row}"
        assert mine.sequence_ids(row) == theirs.sequence_ids(row), f"{label}: sequence_ids of row {row}"


# ----------------------------------------------------------------------------- offsets, words, masks


def test_offsets_word_ids_and_special_tokens_mask_on_real_text(both, texts):
    mine, reference = both
    kwargs = dict(return_offsets_mapping=True, return_special_tokens_mask=True)
    ours, theirs = mine(texts, **kwargs), reference(texts, **kwargs)
    _same(ours, theirs, (*KEYS, "offset_mapping", "special_tokens_mask"), "singles")
    _same_alignment(ours, theirs, len(texts), "singles")
    assert ours["input_ids"] == mine(texts)["input_ids"]  # tracking changes no id
    assert sum(len(row) for row in ours["input_ids"]) > 40_000
    print(f"\n{len(texts)} texts, {sum(map(len, ours['input_ids']))} tokens: offsets and word ids identical")


def test_offsets_and_alignment_of_pairs(both, pairs):
    mine, reference = both
    first, second = pairs
    kwargs = dict(return_offsets_mapping=True, return_special_tokens_mask=True, padding=True)
    ours, theirs = mine(first, second, **kwargs), reference(first, second, **kwargs)
    _same(ours, theirs, (*KEYS, "offset_mapping", "special_tokens_mask"), "pairs")
    _same_alignment(ours, theirs, len(first), "pairs")


def test_alignment_maps_agree_with_reference(both, pairs):
    """char_to_token (what extractive QA uses), token_to_chars, word_to_tokens, word_to_chars,
    char_to_word, token_to_word, token_to_sequence, on real pairs, every index."""
    mine, reference = both
    first, second = pairs[0][:40], pairs[1][:40]
    ours, theirs = mine(first, second), reference(first, second)
    checked = 0
    for row in range(len(first)):
        length = len(ours["input_ids"][row])
        for token in range(length):
            assert ours.token_to_word(row, token) == theirs.token_to_word(row, token)
            assert ours.token_to_sequence(row, token) == theirs.token_to_sequence(row, token)
            assert ours.token_to_chars(row, token) == theirs.token_to_chars(row, token)
        for sequence, text in ((0, first[row]), (1, second[row])):
            for char in range(len(text)):
                assert ours.char_to_token(row, char, sequence) == theirs.char_to_token(row, char, sequence)
                assert ours.char_to_word(row, char, sequence) == theirs.char_to_word(row, char, sequence)
                checked += 1
            words = {w for w, s in zip(ours.word_ids(row), ours.sequence_ids(row)) if s == sequence}
            for word in words:  # (transformers' word_to_chars fails on a word the text does not have)
                assert ours.word_to_tokens(row, word, sequence) == theirs.word_to_tokens(row, word, sequence)
                assert ours.word_to_chars(row, word, sequence) == theirs.word_to_chars(row, word, sequence)
    assert checked > 1000


def test_word_ids_after_tensors_windows_and_left_padding(vocab_file, long_texts):
    mine = BertTokenizer(vocab_file)
    reference = transformers.BertTokenizerFast(str(vocab_file))
    kwargs = dict(truncation=True, max_length=64, stride=16, return_overflowing_tokens=True, padding=True,
                  padding_side="left", return_tensors="pt", return_offsets_mapping=True)  # fmt: skip
    ours, theirs = mine(long_texts[:20], **kwargs), reference(long_texts[:20], **kwargs)
    for key in (*KEYS, "offset_mapping", "overflow_to_sample_mapping"):
        assert torch.equal(ours[key], theirs[key]), key
    assert ours["offset_mapping"].shape[-1] == 2
    _same_alignment(ours, theirs, len(ours["input_ids"]), "windows")


def test_is_split_into_words(both, texts):
    """An NER dataset's pre-split words: pieces map back to the word they came from."""
    mine, reference = both
    words = [text.split() for text in texts[:800] if text.split()]
    kwargs = dict(is_split_into_words=True, return_offsets_mapping=True, padding=True)
    ours, theirs = mine(words, **kwargs), reference(words, **kwargs)
    _same(ours, theirs, (*KEYS, "offset_mapping"), "pre-split words")
    _same_alignment(ours, theirs, len(words), "pre-split words")
    pair = mine(["a", "b"], ["c"], is_split_into_words=True)
    assert pair["input_ids"] == reference(["a", "b"], ["c"], is_split_into_words=True)["input_ids"]
    with pytest.raises(TypeError, match="is_split_into_words=True, text must be a list of words"):
        mine("not split", is_split_into_words=True)


# ----------------------------------------------------------------------------- sides and multiples


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("multiple", [None, 8, 13])
def test_padding_side_and_pad_to_multiple_of(both, texts, side, multiple):
    mine, reference = both
    batch = texts[::40]
    for padding, max_length in ((True, None), ("max_length", 100), ("longest", 64), ("max_length", 104)):
        kwargs = dict(padding=padding, max_length=max_length, pad_to_multiple_of=multiple, padding_side=side,
                      truncation=max_length is not None, return_special_tokens_mask=True,
                      return_offsets_mapping=True)  # fmt: skip
        try:
            theirs = reference(batch, **kwargs)
        except ValueError as error:  # truncation to a length that is not a multiple: refused by both
            assert "not a multiple of pad_to_multiple_of" in str(error)
            with pytest.raises(ValueError, match="make max_length a multiple of pad_to_multiple_of"):
                mine(batch, **kwargs)
            continue
        ours = mine(batch, **kwargs)
        _same(ours, theirs, (*KEYS, "special_tokens_mask", "offset_mapping"), f"{padding} {side} {multiple}")
        _same_alignment(ours, theirs, len(batch), f"{padding} {side} {multiple}")
    mine.padding_side = reference.padding_side = side  # the attribute, as in transformers
    try:
        assert mine(batch[:5], padding=True)["input_ids"] == reference(batch[:5], padding=True)["input_ids"]
    finally:
        mine.padding_side = reference.padding_side = "right"


@pytest.mark.parametrize("strategy", ["longest_first", "only_first", "only_second"])
def test_left_truncation(both, pairs, strategy):
    mine, reference = both
    first, second = pairs[0][:300], pairs[1][:300]
    mine.truncation_side = reference.truncation_side = "left"
    try:
        for max_length in (16, 48):
            kwargs = dict(truncation=strategy, max_length=max_length, padding=True, return_offsets_mapping=True)
            kept = []
            for a, b in zip(first, second):
                try:
                    reference([a], [b], **kwargs)
                    kept.append((a, b))
                except Exception:  # noqa: BLE001  (the reference cannot cut only one text here)
                    with pytest.raises(ValueError, match="cannot truncate only"):
                        mine([a], [b], **kwargs)
            a, b = [k[0] for k in kept], [k[1] for k in kept]
            _same(
                mine(a, b, **kwargs), reference(a, b, **kwargs), (*KEYS, "offset_mapping"), f"{strategy} {max_length}"
            )
            singles = dict(
                truncation=True, max_length=max_length, stride=4, return_overflowing_tokens=True, padding=True
            )
            _same(mine(first, **singles), reference(first, **singles), (*KEYS, "overflow_to_sample_mapping"), "windows")
    finally:
        mine.truncation_side = reference.truncation_side = "right"


@pytest.mark.parametrize("max_length,stride", [(12, 0), (20, 3), (40, 9)])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pair_overflow_windows_longest_first(vocab_file, long_texts, max_length, stride, side):
    """Pairs windowed with truncation="longest_first": the rows and their order are the Rust
    library's combinations of both texts' windows (Encoding::merge_with)."""
    mine = BertTokenizer(vocab_file, truncation_side=side)
    reference = transformers.BertTokenizerFast(str(vocab_file), truncation_side=side)
    first, second = long_texts[:30], [text[: 40 + 7 * i] for i, text in enumerate(long_texts[30:60])]
    kwargs = dict(truncation="longest_first", max_length=max_length, stride=stride,
                  return_overflowing_tokens=True, padding=True, return_offsets_mapping=True)  # fmt: skip
    ours, theirs = mine(first, second, **kwargs), reference(first, second, **kwargs)
    _same(ours, theirs, (*KEYS, "offset_mapping", "overflow_to_sample_mapping"), f"{max_length}/{stride}/{side}")
    assert len(ours["input_ids"]) > 3 * len(first)


# ----------------------------------------------------------------------------- tokenizer.pad


def test_pad_matches_reference(both, texts):
    mine, reference = both
    features = [mine(text, truncation=True, max_length=40, return_special_tokens_mask=True) for text in texts[:30]]
    features = [dict(f, labels=i) for i, f in enumerate(features)]  # other keys pass through
    cases = [
        dict(), dict(padding="max_length", max_length=48), dict(pad_to_multiple_of=16), dict(padding_side="left"),
        dict(return_attention_mask=False), dict(padding=False),
    ]  # fmt: skip
    for kwargs in cases:
        ours, theirs = mine.pad(features, **kwargs), reference.pad(features, **kwargs)
        if kwargs.get("return_attention_mask") is False:  # a deliberate difference (README): no mask at all,
            assert "attention_mask" not in ours  # where transformers returns the old one, unpadded
            theirs.pop("attention_mask")
        assert dict(ours) == dict(theirs), kwargs
    batch = {key: [f[key] for f in features] for key in ("input_ids", "token_type_ids")}  # dict of lists, no mask
    assert dict(mine.pad(batch)) == dict(reference.pad(batch))
    single = {"input_ids": features[0]["input_ids"]}
    assert dict(mine.pad(single, padding="max_length", max_length=50)) == dict(
        reference.pad(single, padding="max_length", max_length=50)
    )
    tensors = [{"input_ids": torch.tensor(f["input_ids"])} for f in features[:4]]
    ours, theirs = mine.pad(tensors), reference.pad(tensors)
    assert isinstance(ours["input_ids"], torch.Tensor) and torch.equal(ours["input_ids"], theirs["input_ids"])
    ours = mine.pad(features[:4], return_tensors="np")
    assert isinstance(ours["input_ids"], np.ndarray) and ours["input_ids"].dtype == np.int64
    with pytest.raises(ValueError, match="input_ids"):
        mine.pad([{"attention_mask": [1]}])


# ----------------------------------------------------------------------------- do_basic_tokenize=False


def test_do_basic_tokenize_false_matches_the_slow_tokenizer(vocab_file, texts):
    """The fast tokenizer has no such option; transformers' slow (legacy) BertTokenizer does:
    words are what whitespace separates, nothing is cleaned, lowercased or split on punctuation."""
    legacy = pytest.importorskip("transformers.models.bert.tokenization_bert_legacy")
    reference = legacy.BertTokenizerLegacy(str(vocab_file), do_basic_tokenize=False)
    mine = BertTokenizer(vocab_file, do_basic_tokenize=False)
    sample = texts[::5] + ["hello world, [MASK] x", "Hello World", "tab\there\u00a0now"]
    mismatches = [t for t in sample if mine(t)["input_ids"] != reference(t)["input_ids"]]
    assert not mismatches, f"{len(mismatches)} differ, first {mismatches[0][:80]!r}"
    assert mine.tokenize("Hello world,") == ["[UNK]", "world", "##,"]  # no lowercasing, no split on ","
    offsets = mine("ab  cd", return_offsets_mapping=True)["offset_mapping"]
    assert offsets == [(0, 0), (0, 2), (4, 6), (0, 0)]


def test_do_basic_tokenize_false_is_saved_for_the_class_that_honours_it(vocab_file, tmp_path, texts):
    """transformers 5's BertTokenizer (also what use_fast=False gives) ignores do_basic_tokenize
    without a word: the folder names BertTokenizerLegacy, so AutoTokenizer gives minibert's ids;
    minibert reads its own folder back alike."""
    mine = BertTokenizer(vocab_file, do_basic_tokenize=False)
    mine.save_pretrained(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "BertTokenizerLegacy" and config["do_basic_tokenize"] is False
    again = BertTokenizer.from_pretrained(tmp_path / "saved")
    sample = texts[::25] + ["Hello, world!", "tab\there\u00a0now"]
    expected = mine(sample)["input_ids"]
    assert again.do_basic_tokenize is False and again(sample)["input_ids"] == expected
    for use_fast in (True, False):
        theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "saved"), use_fast=use_fast)
        assert theirs(sample)["input_ids"] == expected, type(theirs).__name__
    BertTokenizer(vocab_file).save_pretrained(tmp_path / "basic")  # the usual tokenizer keeps the usual class
    assert json.loads((tmp_path / "basic" / "tokenizer_config.json").read_text())["tokenizer_class"] == "BertTokenizer"


# ----------------------------------------------------------------------------- save_pretrained


@pytest.mark.parametrize("lower", [True, False])
def test_save_pretrained_round_trip(vocab_file, tmp_path, texts, lower):
    mine = BertTokenizer(vocab_file, do_lower_case=lower, model_max_length=256, padding_side="left")
    old = os.umask(0o027)
    try:
        files = mine.save_pretrained(tmp_path / "saved")
    finally:
        os.umask(old)
    assert sorted(os.path.basename(f) for f in files) == [
        "special_tokens_map.json",
        "tokenizer_config.json",
        "vocab.txt",
    ]
    assert all(stat.S_IMODE(os.stat(f).st_mode) == 0o640 for f in files)  # the umask's mode
    assert (tmp_path / "saved" / "vocab.txt").read_bytes() == vocab_file.read_bytes()
    again = BertTokenizer.from_pretrained(tmp_path / "saved")
    assert (again.basic.do_lower_case, again.model_max_length, again.padding_side) == (lower, 256, "left")
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "saved"))
    assert theirs.model_max_length == 256 and theirs.padding_side == "left"
    sample = texts[::20]
    assert (
        again(sample, padding=True)["input_ids"]
        == theirs(sample, padding=True)["input_ids"]
        == mine(sample, padding=True)["input_ids"]
    )
    with pytest.raises(FileWriteError, match=r"vocab\.txt: it is a file, not a directory$"):
        mine.save_pretrained(tmp_path / "saved" / "vocab.txt")


def test_save_pretrained_from_tokenizer_json(vocab_file, tmp_path):
    """A tokenizer read from tokenizer.json (no vocab.txt) writes a vocab.txt in id order."""
    transformers.BertTokenizer(vocab=str(vocab_file)).save_pretrained(str(tmp_path / "json"))
    mine = BertTokenizer.from_pretrained(tmp_path / "json")
    mine.save_pretrained(tmp_path / "out")
    assert (tmp_path / "out" / "vocab.txt").read_bytes() == vocab_file.read_bytes()


def test_save_pretrained_over_a_transformers_5_folder_removes_its_tokenizer_json(vocab_file, tmp_path, texts):
    """transformers 5 saves tokenizer.json, which transformers and `tokenizers` read before
    vocab.txt (and minibert takes added tokens from when the config lists none): saving another
    tokenizer into that folder removes it, as transformers' own save replaces it, so every reader
    gets the tokenizer saved, not the one before."""
    folder = tmp_path / "folder"
    before = transformers.AutoTokenizer.from_pretrained(str(vocab_file.parent))  # uncased, with a token added
    before.add_tokens(["zebrafish"])
    before.save_pretrained(str(folder))
    assert (folder / "tokenizer.json").exists()
    mine = BertTokenizer(vocab_file, do_lower_case=False)  # another tokenizer: cased, no added token
    files = mine.save_pretrained(folder)
    assert not (folder / "tokenizer.json").exists() and not list(folder.glob(".*partial"))
    reference = transformers.BertTokenizer(vocab=str(vocab_file), do_lower_case=False)  # transformers' of mine
    sample = texts[::40] + ["A zebrafish Café"]
    expected = reference(sample)["input_ids"]
    assert mine(sample)["input_ids"] == expected
    assert BertTokenizer.from_pretrained(folder)(sample)["input_ids"] == expected
    for use_fast in (True, False):
        theirs = transformers.AutoTokenizer.from_pretrained(str(folder), use_fast=use_fast)
        assert theirs(sample)["input_ids"] == expected, type(theirs).__name__
    assert sorted(os.path.basename(f) for f in files) == ["special_tokens_map.json", "tokenizer_config.json",
                                                          "vocab.txt"]  # fmt: skip


def test_save_pretrained_over_an_added_tokens_json_takes_nothing_from_it(vocab_file, tmp_path, monkeypatch):
    """A folder holding an added_tokens.json (transformers < 4.34, or transformers' slow tokenizer):
    save_pretrained of a tokenizer without added tokens wrote no added_tokens_decoder and left the
    file, which both libraries then read: the saved tokenizer came back with ``newword`` added
    (``newwords``: ``newword`` + ``s``). Now the config always lists the roles in
    added_tokens_decoder (as transformers' slow tokenizer writes it) and the file is removed with
    the save, put back if the save fails."""
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "added_tokens.json").write_text('{"newword": 30522}')
    mine = BertTokenizer(vocab_file)
    expected = transformers.BertTokenizerFast(str(vocab_file))("newwords")["input_ids"]
    unlink = Path.unlink

    def interrupted(path, missing_ok=False):
        unlink(path, missing_ok=missing_ok)
        if path.name == "added_tokens.json":
            raise KeyboardInterrupt

    monkeypatch.setattr(Path, "unlink", interrupted)
    with pytest.raises(KeyboardInterrupt):
        mine.save_pretrained(folder)
    monkeypatch.undo()
    assert sorted(path.name for path in folder.iterdir()) == ["added_tokens.json"]
    mine.save_pretrained(folder)
    assert not (folder / "added_tokens.json").exists()
    for left in (False, True):  # and if one is put back, no reader takes it (added_tokens_decoder)
        if left:
            (folder / "added_tokens.json").write_text('{"newword": 30522}')
        theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
        again = BertTokenizer.from_pretrained(folder)
        assert len(again) == len(theirs) == 30522
        assert again("newwords")["input_ids"] == theirs("newwords")["input_ids"] == expected


# ----------------------------------------------------------------------------- no model_max_length: no limit

NO_LIMIT_CONFIGS = {  # tokenizer_config.json's model_max_length, as checkpoints give it
    "no tokenizer_config.json": None,
    "no model_max_length": {},
    "null": {"model_max_length": None},
    "transformers' int(1e30)": {"model_max_length": int(1e30)},
    "a float 1e30": {"model_max_length": 1e30},
}


@pytest.mark.parametrize("config", NO_LIMIT_CONFIGS.values(), ids=NO_LIMIT_CONFIGS)
def test_a_folder_without_a_length_has_no_limit_as_transformers(vocab_file, tmp_path, config, long_texts):
    """transformers' "no limit" (model_max_length int(1e30), what a folder without one gets):
    truncation=True and padding="max_length" without a max_length neither cut nor pad, windows
    are one per text; minibert cut at 512 and save_pretrained wrote 512 into the copy."""
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "vocab.txt").write_bytes(vocab_file.read_bytes())
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    mine = BertTokenizer.from_pretrained(folder)
    theirs = transformers.BertTokenizerFast.from_pretrained(str(folder))
    assert mine.model_max_length == int(theirs.model_max_length) == int(1e30) == 1000000000000000019884624838656
    if not isinstance(theirs.model_max_length, float):  # (transformers keeps a float 1e30: its 1e30 - 2 is 1e30)
        assert (mine.max_len_single_sentence, mine.max_len_sentences_pair) == (
            theirs.max_len_single_sentence, theirs.max_len_sentences_pair)  # fmt: skip
    long = [" ".join(long_texts[:6]), long_texts[6]]  # 1,000 pieces and more: past 512
    assert len(theirs(long[0])["input_ids"]) > 600
    for arguments in ({"truncation": True}, {"truncation": "only_first"}, {"padding": "max_length"},
                      {"truncation": True, "padding": "max_length", "pad_to_multiple_of": 8},
                      {"truncation": True, "return_overflowing_tokens": True, "stride": 4}):  # fmt: skip
        want = theirs(long, **arguments)
        got = mine(long, **arguments)
        assert sorted(got) == sorted(want), arguments
        for key in want:
            assert got[key] == want[key], f"{arguments}: {key} differs"
        got, want = mine(long[0], long[1], **arguments), theirs(long[0], long[1], **arguments)
        assert got["input_ids"] == want["input_ids"], f"a pair, {arguments}"
    rows = [{"input_ids": [101, 7592, 102]}, {"input_ids": [101, 102]}]
    assert mine.pad(rows, padding="max_length")["input_ids"] == theirs.pad(rows, padding="max_length")["input_ids"]
    mine.save_pretrained(tmp_path / "mine")
    theirs.save_pretrained(str(tmp_path / "theirs"))
    written, reference = (json.loads((tmp_path / name / "tokenizer_config.json").read_text())["model_max_length"]
                          for name in ("mine", "theirs"))  # fmt: skip
    assert written == int(reference) == int(1e30)  # (a float 1e30 read is written as transformers' int)
    assert BertTokenizer.from_pretrained(tmp_path / "mine").model_max_length == int(1e30)


def test_a_tokenizer_made_without_a_length_has_no_limit_as_transformers(vocab_file):
    mine, theirs = BertTokenizer(vocab_file), transformers.BertTokenizerFast(str(vocab_file))
    assert mine.model_max_length == theirs.model_max_length == int(1e30)
    text = "word " * 600
    assert mine(text, truncation=True)["input_ids"] == theirs(text, truncation=True)["input_ids"]


@pytest.mark.parametrize("value", ["512", 0, -1, 512.0, True, [512]])
def test_a_model_max_length_that_is_no_length_is_refused(vocab_file, tmp_path, value):
    """Such a value was skipped (and 512 used); now nothing would be cut: refused, naming the file."""
    (tmp_path / "vocab.txt").write_bytes(vocab_file.read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": value}))
    with pytest.raises(CheckpointError, match=r"tokenizer_config.json: model_max_length must be a positive int"):
        BertTokenizer.from_pretrained(tmp_path)


def test_repr_and_max_len_as_transformers(minilm_dir, vocab_file):
    """``print(tokenizer)`` showed ``<...BertTokenizer object at 0x...>``; ``max_len_single_sentence``
    and ``max_len_sentences_pair`` (older code's block_size) were AttributeErrors."""
    for mine, theirs in ((BertTokenizer.from_pretrained(minilm_dir), transformers.BertTokenizerFast.from_pretrained(
            str(minilm_dir))), (BertTokenizer(vocab_file, model_max_length=64),
                                transformers.BertTokenizerFast(str(vocab_file), model_max_length=64))):  # fmt: skip
        assert repr(mine) == repr(theirs).split(", added_tokens_decoder=")[0] + ")"  # (its added-token list left out)
        assert (mine.max_len_single_sentence, mine.max_len_sentences_pair) == (
            theirs.max_len_single_sentence, theirs.max_len_sentences_pair)  # fmt: skip
    assert (mine.max_len_single_sentence, mine.max_len_sentences_pair) == (62, 61)
    assert str(BertTokenizer.from_pretrained(minilm_dir)).startswith(
        f"BertTokenizer(name_or_path='{minilm_dir}', vocab_size=30522, model_max_length=512,"
    )


# ----------------------------------------------------------------------------- the too-long warning


def test_too_long_warning_once_as_transformers(vocab_file, caplog):
    mine = BertTokenizer(vocab_file, model_max_length=16)
    long_text = "word " * 40
    with caplog.at_level(logging.WARNING, logger="minibert"):
        mine("short")
        mine(long_text, truncation=True)  # truncated: nothing to warn about
        mine(long_text, max_length=20, padding="max_length")  # max_length given: no warning (as transformers)
        mine(long_text, verbose=False)
        assert not caplog.records
        mine(long_text)
        mine(long_text)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1, messages
    assert (
        "sequence length is longer than the specified maximum sequence length for this model (42 > 16)" in messages[0]
    )
    assert "Pass truncation=True to keep the first 16 tokens" in messages[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="minibert"):  # a tokenizer that cuts the start keeps the last
        BertTokenizer(vocab_file, model_max_length=16, truncation_side="left")(long_text)
    assert "Pass truncation=True to keep the last 16 tokens" in caplog.records[0].getMessage()


def test_bad_api_arguments(vocab_file):
    mine = BertTokenizer(vocab_file)
    for kwargs, match in [
        (dict(padding_side="middle"), "padding_side must be 'right' or 'left'"),
        (dict(padding=True, pad_to_multiple_of=0), "pad_to_multiple_of must be an int >= 1"),
        (dict(truncation=True, stride=-1), "stride must be an int >= 0"),
        (dict(truncation=True, max_length=0), "max_length must be an int >= 1"),
        (dict(truncation=True, max_length=True), "max_length must be an int >= 1"),
        (dict(truncation=True, max_length=2.5), "max_length must be an int >= 1"),
    ]:
        with pytest.raises(ValueError, match=match):
            mine("text", **kwargs)
    with pytest.raises(ValueError, match="truncation_side must be"):
        BertTokenizer(vocab_file, truncation_side="up")
    with pytest.raises(TypeError, match="do_basic_tokenize must be True or False"):
        BertTokenizer(vocab_file, do_basic_tokenize="no")
    with pytest.raises(ValueError, match="word_ids"):
        from minibert import BatchEncoding

        BatchEncoding(input_ids=[1]).word_ids()


@pytest.mark.parametrize("name", ["truncation_side", "padding_side"])
def test_a_misspelt_side_is_refused_when_assigned(vocab_file, tmp_path, name):
    """``tokenizer.truncation_side = "rigth"``: transformers raises a ValueError at the call; minibert
    used to keep the end of every text (any side but "right" was read as "left") and save a
    tokenizer_config.json it then refused. Now the assignment is refused, the side stays as it was,
    and the tokenizer (and its saved copy) cut and pad as transformers' does with the side it had."""
    mine, reference = BertTokenizer(vocab_file), transformers.BertTokenizerFast(str(vocab_file))
    kwargs = dict(truncation=True, max_length=4, padding="max_length")
    expected = reference(["a b c d e f", "a"], **kwargs)["input_ids"]
    setattr(reference, name, "rigth")
    with pytest.raises(ValueError, match="rigth"):
        reference(["a b c d e f", "a"], **kwargs)
    with pytest.raises(ValueError, match=f"{name} must be 'right' or 'left', got 'rigth'"):
        setattr(mine, name, "rigth")
    assert getattr(mine, name) == "right" and mine(["a b c d e f", "a"], **kwargs)["input_ids"] == expected
    mine.save_pretrained(tmp_path / "saved")
    assert BertTokenizer.from_pretrained(tmp_path / "saved")(["a b c d e f", "a"], **kwargs)["input_ids"] == expected


def test_token_maps_past_the_end_answer_none_as_transformers(vocab_file):
    """token_to_word / token_to_sequence / token_to_chars with a token index past a row's end:
    None, as transformers' fast BatchEncoding answers (it used to be an IndexError here); a batch
    index outside the batch stays an IndexError in both; a negative token index is an IndexError
    (transformers raises an AttributeError from its Rust binding)."""
    ours = BertTokenizer(vocab_file)(["hello world, again", "a b"], padding=True)
    theirs = transformers.BertTokenizerFast(str(vocab_file))(["hello world, again", "a b"], padding=True)
    length = len(ours["input_ids"][0])
    for row in (0, 1):
        for token in range(length + 3):
            for method in ("token_to_word", "token_to_sequence", "token_to_chars"):
                mine, reference = getattr(ours, method)(row, token), getattr(theirs, method)(row, token)
                assert mine == reference, (method, row, token, mine, reference)
    assert ours.token_to_word(length + 5) is None  # one argument: row 0
    with pytest.raises(IndexError):
        ours.token_to_word(2, 0)
    with pytest.raises(IndexError, match="negative"):
        ours.token_to_chars(0, -1)
