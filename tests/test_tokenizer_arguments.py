"""Every argument the tokenizer takes is checked (a wrong type or value names the argument), ids
outside the vocabulary are refused by decode and convert_ids_to_tokens, and vocab.txt's corner cases
are read as Google's load_vocab, transformers and `tokenizers` read them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiny_hub import TINY  # a small BERT checkpoint with its vocab.txt

BAD_TOKENIZER_ARGUMENTS = [
    ("max_length", -1), ("max_length", "16"), ("max_length", 1.5), ("max_length", True),
    ("stride", -1), ("stride", "2"), ("stride", 1.0),
    ("pad_to_multiple_of", 0), ("pad_to_multiple_of", -8), ("pad_to_multiple_of", 8.0),
    ("padding", "sideways"), ("padding", 3), ("truncation", "bogus"), ("truncation", 2),
    ("padding_side", "middle"), ("return_tensors", "tf"), ("return_tensors", 1),
    ("add_special_tokens", "yes"), ("is_split_into_words", "no"), ("return_token_type_ids", 1),
    ("return_attention_mask", "no"), ("return_overflowing_tokens", "no"), ("return_special_tokens_mask", 2),
    ("return_offsets_mapping", "yes"), ("verbose", "x"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "value"), BAD_TOKENIZER_ARGUMENTS, ids=[f"{n}={v!r}" for n, v in BAD_TOKENIZER_ARGUMENTS]
)
def test_every_tokenizer_argument_is_validated(name, value):
    from minibert import BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(TINY)
    arguments = {"truncation": True, "max_length": 16, "padding": True, name: value}
    with pytest.raises((TypeError, ValueError)) as caught:
        tokenizer(["a first text", "and a second, longer text"], **arguments)
    assert name in str(caught.value), caught.value


@pytest.mark.parametrize("ids", [[-1], [10**9], ["7"], [1.0], [None]], ids=str)
def test_decode_and_convert_ids_refuse_ids_outside_the_vocabulary(ids):
    from minibert import BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(TINY)
    for method in (tokenizer.decode, tokenizer.convert_ids_to_tokens):
        with pytest.raises((TypeError, ValueError), match="id"):
            method(ids)


def test_an_unknown_id_is_refused_with_the_ids_that_exist(vocab_file):
    """decode's error names the ids that exist: [0, len(tokenizer)), the added tokens counted
    (``vocab_size`` leaves them out), so the last added id decodes and the next one is refused; in a
    vocabulary with gaps (TINY's vocab.txt lists "a" and "i" twice, so ids 6 and 66 have no piece)
    a gap is named as one, and the range is the ids' own."""
    from minibert import BertTokenizer

    tokenizer = BertTokenizer(vocab_file)  # bert-base-uncased's 30,522 pieces, ids without gaps
    assert tokenizer.add_tokens(["covid-19", "sars-cov-2"]) == 2 and len(tokenizer) == 30524
    assert tokenizer.decode([30523]) == "sars-cov-2"
    for method in (tokenizer.decode, tokenizer.convert_ids_to_tokens):
        with pytest.raises(ValueError, match=r"token id 30524 is outside the vocabulary \[0, 30524\)$"):
            method([30524])
    with_gaps = BertTokenizer.from_pretrained(TINY)
    assert len(with_gaps) == 109 and max(with_gaps.ids_to_tokens) == 110
    gap = r"token id 66 is not in the vocabulary \(its 109 pieces have ids in \[0, 111\), with gaps\)$"
    with pytest.raises(ValueError, match=gap):
        with_gaps.decode([66])
    with pytest.raises(ValueError, match=r"token id 111 is outside the vocabulary \[0, 111\)$"):
        with_gaps.decode([111])


# ----------------------------------------------------------------------------- vocabulary corner cases


def test_vocabulary_corner_cases_where_google_transformers_and_tokenizers_agree(tmp_path):
    """A piece listed twice keeps its last line's id; an empty line takes an id (the empty piece);
    a last line without a newline counts. Google's load_vocab, transformers' BertTokenizer and
    `tokenizers`' WordPiece all read it so; minibert must too."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    from minibert import BertTokenizer
    from minibert.tokenizer import load_vocab

    lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "", "##s", "sat", "the", "mat"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(lines), encoding="utf-8")  # no newline at the end
    google = {}
    with open(path, encoding="utf-8") as reader:  # google-research/bert tokenization.load_vocab
        index = 0
        while True:
            token = reader.readline()
            if not token:
                break
            google[token.strip()] = index
            index += 1
    theirs = transformers.BertTokenizer(str(path), do_lower_case=True)
    rust = models.WordPiece.read_file(str(path))
    ours = load_vocab(path)
    assert ours == google == dict(theirs.vocab) == rust, (ours, google)
    assert ours["the"] == 10 and ours[""] == 7 and ours["mat"] == 11
    fast = Tokenizer(models.WordPiece(rust, unk_token="[UNK]"))
    fast.normalizer, fast.pre_tokenizer = normalizers.BertNormalizer(), pre_tokenizers.BertPreTokenizer()
    text = "The cats sat on the mat"
    expected = theirs.convert_tokens_to_ids(theirs.tokenize(text))
    assert BertTokenizer(path).convert_tokens_to_ids(BertTokenizer(path).tokenize(text)) == expected
    assert fast.encode(text).ids == expected


def _vocab_folder(directory: Path, vocab_file: Path, edit, config: dict | None) -> Path:
    """all-MiniLM's vocab.txt, its lines changed by ``edit`` (line → line), and a tokenizer_config.json."""
    import json

    directory.mkdir()
    lines = vocab_file.read_text(encoding="utf-8").split("\n")[:-1]
    (directory / "vocab.txt").write_bytes(("\n".join(map(edit, lines)) + "\n").encode("utf-8"))
    if config is not None:
        (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory


@pytest.mark.parametrize("space", [" ", "\t", "\u3000", "\x85"])
def test_trailing_whitespace_ends_the_line_not_the_piece_as_tokenizers_and_transformers_read_it(
    space, vocab_file, tmp_path
):
    """vocab.txt's "hello " is the piece "hello" to `tokenizers` (Rust's trim_end), transformers 5's
    BertTokenizer (AutoTokenizer) and Google's load_vocab; minibert kept the space ("hello" fell
    apart into pieces: other ids). Read as they read it now, and saved so that transformers'
    BertTokenizerLegacy (which keeps the space) reads the saved folder as minibert does."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import models

    from minibert import BertTokenizer

    config = {"do_lower_case": True, "tokenizer_class": "BertTokenizer"}
    edit = lambda line: line + space if line in ("hello", "world") else line  # noqa: E731
    directory = _vocab_folder(tmp_path / "tok", vocab_file, edit, config)
    text = "Hello world, hello!"
    expected = transformers.AutoTokenizer.from_pretrained(str(directory))(text)["input_ids"]
    assert expected[1] == models.WordPiece.read_file(str(directory / "vocab.txt"))["hello"] == 7592
    ours = BertTokenizer.from_pretrained(directory)
    assert ours(text)["input_ids"] == expected
    ours.do_basic_tokenize = False  # saved as BertTokenizerLegacy
    ours.save_pretrained(tmp_path / "saved")
    legacy = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "saved"))
    assert type(legacy).__name__ == "BertTokenizerLegacy"
    assert legacy("hello world")["input_ids"] == ours("hello world")["input_ids"] == [101, 7592, 2088, 102]


def test_trailing_whitespace_under_bert_tokenizer_legacy_is_refused(vocab_file, tmp_path):
    """tokenizer_class BertTokenizerLegacy keeps "hello " whole, `tokenizers` trims it: the references
    disagree, so minibert refuses the folder, naming the line and the config."""
    transformers = pytest.importorskip("transformers")
    from minibert import BertTokenizer, CheckpointError

    config = {"do_lower_case": True, "tokenizer_class": "BertTokenizerLegacy"}
    edit = lambda line: line + " " if line == "hello" else line  # noqa: E731
    directory = _vocab_folder(tmp_path / "tok", vocab_file, edit, config)
    assert transformers.AutoTokenizer.from_pretrained(str(directory))("hello")["input_ids"] != [101, 7592, 102]
    with pytest.raises(CheckpointError, match=r"line 7593 \('hello '\) ends in whitespace.*BertTokenizerLegacy"):
        BertTokenizer.from_pretrained(directory)


def test_never_split_under_bert_tokenizer_legacy_is_refused(vocab_file, tmp_path):
    """transformers' BertTokenizerLegacy keeps never_split's words whole ("don't" → [UNK]); minibert
    split them and said nothing. Refused, naming the file and the field; under BertTokenizer (which
    ignores never_split, as minibert does) the folder loads with transformers' ids."""
    transformers = pytest.importorskip("transformers")
    from minibert import BertTokenizer, CheckpointError

    text = "don't stop e.g. here"
    for tokenizer_class in ("BertTokenizerLegacy", "BertTokenizer"):
        config = {"tokenizer_class": tokenizer_class, "do_lower_case": True, "never_split": ["don't", "e.g."]}
        directory = _vocab_folder(tmp_path / tokenizer_class, vocab_file, lambda line: line, config)
        expected = transformers.AutoTokenizer.from_pretrained(str(directory))(text)["input_ids"]
        if tokenizer_class == "BertTokenizerLegacy":
            assert expected == [101, 100, 2644, 100, 2182, 102]
            with pytest.raises(CheckpointError, match=r"tokenizer_config.json: never_split .*BertTokenizerLegacy"):
                BertTokenizer.from_pretrained(directory)
        else:
            assert BertTokenizer.from_pretrained(directory)(text)["input_ids"] == expected


def test_a_byte_order_mark_in_vocab_txt_is_refused(vocab_file, tmp_path):
    """A vocab.txt starting with U+FEFF: its first piece is "\\ufeff[PAD]" (to `tokenizers` too), so
    the tokenizer had no [PAD] and failed at the first padded batch with a message that hid the cause.
    Refused at load, naming the mark."""
    from tokenizers import models

    from minibert import BertTokenizer, CheckpointError

    directory = _vocab_folder(tmp_path / "tok", vocab_file, lambda line: "\ufeff" + line if line == "[PAD]" else line,
                              {"do_lower_case": True})  # fmt: skip
    assert models.WordPiece.read_file(str(directory / "vocab.txt"))["\ufeff[PAD]"] == 0
    with pytest.raises(CheckpointError, match=r"starts with a byte-order mark \(U\+FEFF\)"):
        BertTokenizer.from_pretrained(directory)


# --- arguments parsed once per set of them (call_request.parse_call) --------------------------------

ARGUMENT_SETS = [
    {}, {"truncation": True, "max_length": 8}, {"padding": "max_length", "max_length": 12},
    {"truncation": "only_first", "max_length": 9, "return_overflowing_tokens": True, "stride": 2},
    {"return_offsets_mapping": True, "add_special_tokens": False}, {"padding": True, "pad_to_multiple_of": 4},
    {"max_length": 6}, {"return_tensors": "np", "return_length": True},
]  # fmt: skip


def test_a_remembered_request_is_the_request_parsed_afresh():
    """Each argument set, asked again with other texts (one input, a pair, a batch), gives the
    request CallRequest.parse gives for that call, field by field; and the tokenizer's own sides
    and model_max_length, changed between calls, are read again."""
    from dataclasses import asdict

    from minibert import BertTokenizer
    from minibert.tokenizer.call_request import CallRequest, parse_call

    tokenizer = BertTokenizer.from_pretrained(TINY)
    calls = [("a first text", None), ("one", "and its pair"), (["a", "batch of", "texts"], None),
             (["a", "b"], ["pairs", "of a batch"])]  # fmt: skip
    for arguments in ARGUMENT_SETS:
        for model_max_length, side in [(512, "right"), (10, "left"), (512, "left")]:
            tokenizer.model_max_length, tokenizer.padding_side, tokenizer.truncation_side = model_max_length, side, side
            for _ in range(2):  # the second time round, every request comes from what was remembered
                for text, pair in calls:
                    expected = asdict(CallRequest.parse(tokenizer, text, pair, **arguments))
                    assert asdict(parse_call(tokenizer, text, pair, arguments)) == expected, (arguments, text, pair)


def test_an_argument_refused_once_is_refused_again_after_a_look_alike_was_taken():
    """A remembered request is keyed by each argument's type as well as its value: padding=1 equals
    padding=True in Python (and hashes alike) but is refused, before and after a call with True;
    so is stride=True after stride=1."""
    from minibert import BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(TINY)
    for good, bad in [({"padding": True}, {"padding": 1}), ({"stride": 1}, {"stride": True})]:
        tokenizer("a text", **good)
        with pytest.raises((TypeError, ValueError), match=next(iter(bad))):
            tokenizer("a text", **bad)


def test_a_pair_is_checked_for_room_after_one_text_with_the_same_arguments():
    """max_length=3 leaves one piece of room beside [CLS] and [SEP] for one text, none for a pair's
    three special tokens: the windows of a pair are refused even after the same arguments were
    taken for one text (the room depends on the input, so the remembered request does too)."""
    from minibert import BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(TINY)
    arguments = {"truncation": True, "max_length": 3, "return_overflowing_tokens": True}
    assert len(tokenizer("a few words", **arguments)["input_ids"]) >= 2  # windows of one piece each
    with pytest.raises(ValueError, match="no room for text"):
        tokenizer("a few words", "and a pair", **arguments)


def test_arguments_of_other_types_are_parsed_at_every_call():
    """A numpy integer or a 0-d tensor is taken where an int is (check_count), but never remembered:
    a tensor's hash is its identity, not its value."""
    import numpy as np
    import torch

    from minibert import BertTokenizer
    from minibert.tokenizer import call_request

    tokenizer = BertTokenizer.from_pretrained(TINY)
    call_request._PARSED.clear()
    for value in (np.int64(5), torch.tensor(5)):
        assert len(tokenizer("a b c d e f g", max_length=value)["input_ids"]) == 5
    assert not call_request._PARSED
    assert len(tokenizer("a b c d e f g", max_length=5)["input_ids"]) == 5 and len(call_request._PARSED) == 1


def test_remembered_arguments_hold_no_caller_text():
    """What is kept for later calls is the arguments alone: a first call's texts (a batch of a
    million characters, say) are the caller's, and freed with them."""
    from minibert import BertTokenizer
    from minibert.tokenizer import call_request

    tokenizer = BertTokenizer.from_pretrained(TINY)
    call_request._PARSED.clear()
    tokenizer(["a long text " * 100, "another"], ["and", "pairs"], truncation=True, max_length=16)
    tokenizer("one text", padding="max_length", max_length=8)
    assert len(call_request._PARSED) == 2
    assert all(kept.texts == [] and kept.pairs is None for kept in call_request._PARSED.values())
