"""The references' own test cases, ported: each test names its upstream file and test, and keeps
its assertions' meaning (and, where upstream has literal expected values, the values).

* google-research/bert ``tokenization_test.py`` (all of it)
* transformers ``tests/models/bert/test_tokenization_bert.py`` (BertTokenizationTest)
* transformers ``tests/test_tokenization_common.py`` (TokenizerTesterMixin: the BERT-relevant cases)
* tokenizers ``bindings/python/tests`` bert-base-uncased goldens (test_bert_wordpiece.py,
  test_encoding.py, test_tokenizer.py::test_encode_formats)

transformers' ``tests/models/bert/test_modeling_bert.py`` is ported in test_model_ported_modeling_bert.py.

Where minibert deliberately differs, the test says so and the README lists it."""

from __future__ import annotations

import pytest

from minibert import BertTokenizer
from minibert.tokenizer import BasicTokenizer, WordPieceTokenizer, is_punctuation, is_removed_in_cleaning

transformers = pytest.importorskip("transformers")

# The vocabulary of BertTokenizationTest.setUp (google's test_full_tokenizer has the same pieces
# without [PAD]/[MASK]/low/lowest; that one is ported in test_tokenizer.py).
HF_TOY_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "want", "##want", "##ed", "wa", "un", "runn", "##ing",
                ",", "low", "lowest"]  # fmt: skip
GOOGLE_WORDPIECE_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing"]


@pytest.fixture
def toy(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(token + "\n" for token in HF_TOY_VOCAB), encoding="utf-8")
    return BertTokenizer(path)


@pytest.fixture(scope="module")
def bert_uncased(vocab_file):
    """bert-base-uncased's vocabulary (the goldens of `tokenizers` are computed with it)."""
    return BertTokenizer(vocab_file)


# ============================================================================ google-research/bert
# tokenization_test.py


def test_google_test_chinese():
    assert BasicTokenizer().tokenize("ah\u535a\u63a8zz") == ["ah", "\u535a", "\u63a8", "zz"]


def test_google_test_basic_tokenizer_lower():
    tokenizer = BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert tokenizer.tokenize("H\u00e9llo") == ["hello"]


def test_google_test_basic_tokenizer_no_lower():
    tokenizer = BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["HeLLo", "!", "how", "Are", "yoU", "?"]


def test_google_test_wordpiece_tokenizer():
    vocab = {token: i for i, token in enumerate(GOOGLE_WORDPIECE_VOCAB)}
    wordpiece = WordPieceTokenizer(vocab, unk_id=0)
    tokens = lambda text: [GOOGLE_WORDPIECE_VOCAB[i] for word in text.split() for i in wordpiece.pieces(word)]  # noqa: E731
    assert tokens("") == []
    assert tokens("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tokens("unwantedX running") == ["[UNK]", "runn", "##ing"]


def test_google_test_convert_tokens_to_ids(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(token + "\n" for token in GOOGLE_WORDPIECE_VOCAB), encoding="utf-8")
    tokenizer = BertTokenizer(path)
    assert tokenizer.convert_tokens_to_ids(["un", "##want", "##ed", "runn", "##ing"]) == [7, 4, 5, 8, 9]


def test_google_test_is_whitespace():
    # minibert has no _is_whitespace: cleaning turns whitespace into a space (and keeps letters)
    clean = BasicTokenizer().clean
    for char in (" ", "\t", "\r", "\n", "\u00a0"):
        assert clean(char) == " ", repr(char)
    for char in ("A", "-"):
        assert clean(char) == char


def test_google_test_is_control():
    assert is_removed_in_cleaning("\u0005")
    for char in ("A", " ", "\t", "\r"):
        assert not is_removed_in_cleaning(char), repr(char)


def test_google_test_is_punctuation():
    for char in ("-", "$", "`", "."):
        assert is_punctuation(char)
    for char in ("A", " "):
        assert not is_punctuation(char)


# ============================================================================ transformers
# tests/models/bert/test_tokenization_bert.py :: BertTokenizationTest


def test_hf_bert_test_full_tokenizer(toy):
    tokens = toy.tokenize("UNwant\u00e9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert toy.convert_tokens_to_ids(tokens) == [9, 6, 7, 12, 10, 11]


def test_hf_bert_test_rust_and_python_full_tokenizers(toy):
    """Upstream compares its slow and fast tokenizers; here minibert against the fast one."""
    reference = transformers.BertTokenizerFast(str(toy.vocab_file), do_lower_case=True)
    sequence = "UNwant\u00e9d,running"
    assert toy.tokenize(sequence) == reference.tokenize(sequence)
    assert toy.encode(sequence, add_special_tokens=False) == reference.encode(sequence, add_special_tokens=False)
    assert toy.encode(sequence) == reference.encode(sequence)


@pytest.mark.parametrize(
    "lower,strip,expected",
    [
        (True, False, ["hällo", "!", "how", "are", "you", "?"]),  # test_basic_tokenizer_lower_strip_accents_false
        (True, True, ["hallo", "!", "how", "are", "you", "?"]),  # test_basic_tokenizer_lower_strip_accents_true
        (True, None, ["hallo", "!", "how", "are", "you", "?"]),  # test_basic_tokenizer_lower_strip_accents_default
        (False, False, ["HäLLo", "!", "how", "Are", "yoU", "?"]),  # test_basic_tokenizer_no_lower_strip_accents_false
        (False, True, ["HaLLo", "!", "how", "Are", "yoU", "?"]),  # test_basic_tokenizer_no_lower_strip_accents_true
    ],
)
def test_hf_bert_strip_accents_variants(lower, strip, expected):
    tokenizer = BasicTokenizer(do_lower_case=lower, strip_accents=strip)
    assert tokenizer.tokenize(" \tHäLLo!how  \n Are yoU?  ") == expected
    if lower:
        assert tokenizer.tokenize("H\u00e9llo") == (["h\u00e9llo"] if strip is False else ["hello"])


def test_hf_bert_test_basic_tokenizer_respects_never_split_tokens(bert_uncased):
    # upstream: BasicTokenizer(never_split=["[UNK]"]); minibert keeps every special token whole
    tokenizer = BertTokenizer(bert_uncased.vocab_file, do_lower_case=False)
    assert tokenizer.words_and_pieces(" \tHeLLo!how  \n Are yoU? [UNK]")[0] == [
        "HeLLo", "!", "how", "Are", "yoU", "?", "[UNK]",
    ]  # fmt: skip


def test_hf_bert_test_basic_tokenizer_splits_on_punctuation():
    expected = ["a", "'", "ll", "!", "!", "to", "?", "'", "d", "of", ",", "can", "'", "t", "."]
    assert BasicTokenizer().tokenize("a\n'll !!to?'d of, can't.") == expected


def test_hf_bert_test_basic_tokenizer_remove_control_chars_true():
    # \u200E (left-to-right mark), \u200F (right-to-left mark). minibert always removes them (the
    # fast tokenizer does too); remove_control_chars=False, a slow-tokenizer option, is not offered.
    assert BasicTokenizer().tokenize("\u200e\u200f") == []


def test_hf_bert_test_wordpiece_tokenizer():
    vocab = {token: i for i, token in enumerate(GOOGLE_WORDPIECE_VOCAB)}
    wordpiece = WordPieceTokenizer(vocab, unk_id=0)
    assert wordpiece.pieces("unwantedX") == [0]
    assert [i for word in "unwanted running".split() for i in wordpiece.pieces(word)] == [7, 4, 5, 8, 9]


def test_hf_bert_test_clean_text(toy):
    # Example taken from tokenizers issue #340: the soft hyphen \xad is removed
    assert [toy.tokenize(t) for t in ["Test", "\xad", "test"]] == [["[UNK]"], [], ["[UNK]"]]


def test_hf_bert_test_sequence_builders(bert_uncased):
    text = bert_uncased.encode("sequence builders", add_special_tokens=False)
    text_2 = bert_uncased.encode("multi-sequence build", add_special_tokens=False)
    assert bert_uncased.build_inputs_with_special_tokens(text) == [101] + text + [102]
    assert bert_uncased.build_inputs_with_special_tokens(text, text_2) == [101] + text + [102] + text_2 + [102]


@pytest.mark.parametrize("lower", [True, False])
def test_hf_bert_test_offsets_with_special_characters(vocab_file, tmp_path, lower):
    """Upstream runs it on the first pretrained vocabulary (bert-base-uncased) with its casing; the
    cased branch here uses a vocabulary with the cased pieces the expected values name."""
    if not lower:
        vocab_file = tmp_path / "vocab.txt"
        pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "A", ",", "na", "##ï", "##ve", "Allen", "##NL", "##P",
                  "sentence", "."]  # fmt: skip
        vocab_file.write_text("".join(p + "\n" for p in pieces), encoding="utf-8")
    tokenizer = BertTokenizer(vocab_file, do_lower_case=lower)
    tokens = tokenizer("A, naïve [MASK] AllenNLP sentence.", return_offsets_mapping=True)
    expected = (
        [((0, 0), "[CLS]"), ((0, 1), "A"), ((1, 2), ","), ((3, 5), "na"), ((5, 6), "##ï"), ((6, 8), "##ve"),
         ((9, 15), "[MASK]"), ((16, 21), "Allen"), ((21, 23), "##NL"), ((23, 24), "##P"), ((25, 33), "sentence"),
         ((33, 34), "."), ((0, 0), "[SEP]")]
        if not lower
        else [((0, 0), "[CLS]"), ((0, 1), "a"), ((1, 2), ","), ((3, 8), "naive"), ((9, 15), "[MASK]"),
              ((16, 21), "allen"), ((21, 23), "##nl"), ((23, 24), "##p"), ((25, 33), "sentence"), ((33, 34), "."),
              ((0, 0), "[SEP]")]
    )  # fmt: skip
    assert tokenizer.convert_ids_to_tokens(tokens["input_ids"]) == [e[1] for e in expected]
    assert tokens["offset_mapping"] == [e[0] for e in expected]


def test_hf_bert_test_change_tokenize_chinese_chars(vocab_file):
    chars = ["的", "人", "有"]
    on = BertTokenizer(vocab_file, tokenize_chinese_chars=True)
    assert on.convert_ids_to_tokens(on.encode("".join(chars), add_special_tokens=False)) == chars
    off = BertTokenizer(vocab_file, tokenize_chinese_chars=False)
    expected = [f"##{c}" if i else c for i, c in enumerate(chars)]  # only the first is not a continuation
    assert off.convert_ids_to_tokens(off.encode("".join(chars), add_special_tokens=False)) == expected


# ============================================================================ transformers
# tests/test_tokenization_common.py :: TokenizerTesterMixin (the cases that apply to BERT)

SEQUENCE, PAIR = "unwanted running", "want low lowest"


def test_mixin_test_number_of_added_tokens(toy):
    assert toy.num_special_tokens_to_add(pair=False) == 2 and toy.num_special_tokens_to_add(pair=True) == 3
    for pair in (False, True):
        plain = toy(SEQUENCE, PAIR if pair else None, add_special_tokens=False)["input_ids"]
        framed = toy(SEQUENCE, PAIR if pair else None)["input_ids"]
        assert len(framed) - len(plain) == toy.num_special_tokens_to_add(pair=pair)


def test_mixin_test_special_tokens_mask(toy):
    ids = toy.encode(SEQUENCE, add_special_tokens=False)
    encoded = toy(SEQUENCE, return_special_tokens_mask=True)
    mask = encoded["special_tokens_mask"]
    assert len(mask) == len(encoded["input_ids"])
    assert [x for i, x in enumerate(encoded["input_ids"]) if not mask[i]] == ids


def test_mixin_test_special_tokens_mask_input_pairs(toy):
    ids = toy.encode(SEQUENCE, add_special_tokens=False) + toy.encode(PAIR, add_special_tokens=False)
    encoded = toy(SEQUENCE, PAIR, return_special_tokens_mask=True)
    mask = encoded["special_tokens_mask"]
    assert [x for i, x in enumerate(encoded["input_ids"]) if not mask[i]] == ids
    assert toy.get_special_tokens_mask(toy.encode(SEQUENCE, add_special_tokens=False)) == [1, 0, 0, 0, 0, 0, 1]


def test_mixin_test_maximum_encoding_length_single_input(toy):
    ids = toy.encode(SEQUENCE, add_special_tokens=False)  # un ##want ##ed runn ##ing
    total = len(ids)
    stride = 1
    out = toy(SEQUENCE, add_special_tokens=False, truncation=True, max_length=total - 2, stride=stride,
              return_overflowing_tokens=True)  # fmt: skip
    assert out["input_ids"][0] == ids[: total - 2]
    assert out["input_ids"][1] == ids[-(2 + stride) :]  # the overflow keeps `stride` tokens of context
    assert len(out["input_ids"]) == 2
    assert toy(SEQUENCE, add_special_tokens=False, truncation=True, max_length=total)["input_ids"] == ids
    assert toy(SEQUENCE, add_special_tokens=False, truncation=True, max_length=total + 5)["input_ids"] == ids


def test_mixin_test_maximum_encoding_length_pair_input(toy):
    a = toy.encode(SEQUENCE, add_special_tokens=False)
    b = toy.encode(PAIR, add_special_tokens=False)
    budget = len(a) + len(b) - 2
    only_first = toy(SEQUENCE, PAIR, add_special_tokens=False, truncation="only_first", max_length=budget)
    assert only_first["input_ids"] == a[:-2] + b
    only_second = toy(SEQUENCE, PAIR, add_special_tokens=False, truncation="only_second", max_length=budget)
    assert only_second["input_ids"] == a + b[:-2]
    longest = toy(SEQUENCE, PAIR, add_special_tokens=False, truncation="longest_first", max_length=budget)
    assert longest["input_ids"] == a[:-2] + b  # the longer (first) loses its last two
    with pytest.raises(ValueError, match="cannot truncate only the second"):
        toy(SEQUENCE, PAIR, add_special_tokens=False, truncation="only_second", max_length=len(a) - 1)


def test_mixin_test_right_and_left_padding(toy):
    ids = toy.encode(SEQUENCE)
    padding = 6
    right = toy(SEQUENCE, padding="max_length", max_length=len(ids) + padding)["input_ids"]
    assert right == ids + [toy.pad_token_id] * padding
    left = toy(SEQUENCE, padding="max_length", max_length=len(ids) + padding, padding_side="left")["input_ids"]
    assert left == [toy.pad_token_id] * padding + ids
    for padding in (True, "longest", False, "do_not_pad"):  # one sequence: nothing to pad
        assert toy(SEQUENCE, padding=padding)["input_ids"] == ids


def test_mixin_test_right_and_left_truncation(toy):
    ids = toy.encode(SEQUENCE, add_special_tokens=False)
    toy.truncation_side = "right"
    assert toy(SEQUENCE, add_special_tokens=False, truncation=True, max_length=3)["input_ids"] == ids[:3]
    toy.truncation_side = "left"
    assert toy(SEQUENCE, add_special_tokens=False, truncation=True, max_length=3)["input_ids"] == ids[-3:]
    assert toy(SEQUENCE, add_special_tokens=False, truncation=False)["input_ids"] == ids


def test_mixin_test_padding_to_multiple_of(toy):
    for text in ("", "want", SEQUENCE, SEQUENCE + " " + PAIR):
        assert len(toy(text, padding=True, pad_to_multiple_of=8)["input_ids"]) % 8 == 0
    # padding=False: pad_to_multiple_of alone pads nothing
    assert len(toy("want", pad_to_multiple_of=8)["input_ids"]) == 3
    with pytest.raises(ValueError, match="multiple"):  # truncation length not a multiple: refused
        toy(SEQUENCE, padding=True, truncation=True, max_length=12, pad_to_multiple_of=8)


def test_mixin_test_padding_side_and_truncation_side_in_kwargs(toy):
    left = BertTokenizer(toy.vocab_file, padding_side="left", truncation_side="left")
    assert (left.padding_side, left.truncation_side) == ("left", "left")
    with pytest.raises(ValueError, match="padding_side must be"):
        BertTokenizer(toy.vocab_file, padding_side="unauthorized")


def test_mixin_test_encode_plus_with_padding(toy):
    ids = toy.encode(SEQUENCE)
    out = toy(SEQUENCE, padding="max_length", max_length=len(ids) + 2, return_special_tokens_mask=True)
    assert out["input_ids"] == ids + [toy.pad_token_id] * 2
    assert out["attention_mask"] == [1] * len(ids) + [0] * 2
    assert out["special_tokens_mask"] == [1] + [0] * (len(ids) - 2) + [1] + [1] * 2
    assert out["token_type_ids"] == [0] * (len(ids) + 2)


def test_mixin_test_offsets_mapping(toy):
    text, pair = "Wonderful no inspiration example with subtoken", "Along with an awesome pair"
    single = toy(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    assert len(single["offset_mapping"]) == len(single["input_ids"])
    assert sum(single["special_tokens_mask"]) == toy.num_special_tokens_to_add(pair=False)
    both = toy(text, pair, return_offsets_mapping=True, return_special_tokens_mask=True)
    assert len(both["offset_mapping"]) == len(both["input_ids"])
    assert sum(both["special_tokens_mask"]) == toy.num_special_tokens_to_add(pair=True)


def test_mixin_test_pretokenized_inputs(toy):
    words = SEQUENCE.split()
    assert toy(words, is_split_into_words=True)["input_ids"] == toy(SEQUENCE)["input_ids"]
    pair_words = PAIR.split()
    assert toy(words, pair_words, is_split_into_words=True)["input_ids"] == toy(SEQUENCE, PAIR)["input_ids"]
    batch = toy([words, pair_words], is_split_into_words=True, padding=True)
    assert batch["input_ids"] == toy([SEQUENCE, PAIR], padding=True)["input_ids"]


def test_mixin_test_save_and_load_tokenizer(toy, tmp_path):
    toy.model_max_length = 42
    before = toy(SEQUENCE)["input_ids"]
    toy.save_pretrained(tmp_path / "saved")
    after = BertTokenizer.from_pretrained(tmp_path / "saved")
    assert after(SEQUENCE)["input_ids"] == before and after.model_max_length == 42
    assert after.get_vocab() == toy.get_vocab() and len(after) == len(HF_TOY_VOCAB)


def test_mixin_test_call_and_batch(toy):
    single = toy(SEQUENCE)
    batch = toy([SEQUENCE, PAIR])
    assert batch["input_ids"][0] == single["input_ids"] and batch["attention_mask"][0] == single["attention_mask"]
    assert toy(SEQUENCE, PAIR)["input_ids"] == toy([SEQUENCE], [PAIR])["input_ids"][0]


def test_mixin_test_tokenizer_pad_on_encodings(toy):
    """test_padding_with_attention_mask / the data-collator path: pad a list of encodings."""
    features = [toy(SEQUENCE), toy("want")]
    padded = toy.pad(features, padding="longest")
    assert padded["input_ids"][1] == toy("want")["input_ids"] + [toy.pad_token_id] * 4
    assert padded["attention_mask"][1] == [1, 1, 1, 0, 0, 0, 0]
    left = toy.pad(features, padding_side="left")
    assert left["attention_mask"][1] == [0, 0, 0, 0, 1, 1, 1]


# ============================================================================ tokenizers goldens
# bindings/python/tests (bert-base-uncased vocabulary)


def test_tokenizers_bert_wordpiece_test_basic_encode(bert_uncased):
    output = bert_uncased("My name is John", "pair", return_offsets_mapping=True)
    assert output["input_ids"] == [101, 2026, 2171, 2003, 2198, 102, 3940, 102]
    assert bert_uncased.convert_ids_to_tokens(output["input_ids"]) == [
        "[CLS]", "my", "name", "is", "john", "[SEP]", "pair", "[SEP]",
    ]  # fmt: skip
    assert output["offset_mapping"] == [(0, 0), (0, 2), (3, 7), (8, 10), (11, 15), (0, 0), (0, 4), (0, 0)]
    assert output["token_type_ids"] == [0, 0, 0, 0, 0, 0, 1, 1]
    output = bert_uncased("My name is John", "pair", add_special_tokens=False, return_offsets_mapping=True)
    assert output["input_ids"] == [2026, 2171, 2003, 2198, 3940]
    assert output["offset_mapping"] == [(0, 2), (3, 7), (8, 10), (11, 15), (0, 4)]
    assert output["token_type_ids"] == [0, 0, 0, 0, 1]


@pytest.fixture(scope="module")
def encodings(bert_uncased):
    """test_encoding.py's fixture: a single text and a pair. Upstream calls the Rust Encoding's
    ``f(index, sequence_index)``; transformers' BatchEncoding (which minibert follows) reads two
    positional numbers as (batch, index), so the sequence is passed by keyword here."""
    return bert_uncased("I love HuggingFace"), bert_uncased("I love HuggingFace", "Do you?")


def test_tokenizers_encoding_test_sequence_ids(encodings):
    single, pair = encodings
    assert single.sequence_ids() == [None, 0, 0, 0, 0, None]
    assert pair.sequence_ids() == [None, 0, 0, 0, 0, None, 1, 1, 1, None]


def test_tokenizers_encoding_test_word_to_tokens(encodings, bert_uncased):
    single, pair = encodings
    assert bert_uncased.convert_ids_to_tokens(single["input_ids"]) == [
        "[CLS]",
        "i",
        "love",
        "hugging",
        "##face",
        "[SEP]",
    ]
    assert single.word_to_tokens(0) == (1, 2)
    assert pair.word_to_tokens(0) == (1, 2)
    assert pair.word_to_tokens(0, sequence_index=0) == (1, 2)
    assert pair.word_to_tokens(6, sequence_index=0) is None
    assert pair.word_to_tokens(0, sequence_index=1) == (6, 7)


def test_tokenizers_encoding_test_word_to_chars(encodings):
    single, pair = encodings
    assert single.word_to_chars(2) == (7, 18)
    assert pair.word_to_chars(2) == (7, 18)
    assert pair.word_to_chars(2, sequence_index=0) == (7, 18)
    assert pair.word_to_chars(2, sequence_index=1) == (6, 7)


def test_tokenizers_encoding_test_token_to_sequence(encodings):
    single, pair = encodings
    assert single.token_to_sequence(2) == 0
    assert [pair.token_to_sequence(t) for t in (2, 0, 5, 6, 8, 9)] == [0, None, None, 1, 1, None]


def test_tokenizers_encoding_test_token_to_chars(encodings):
    single, pair = encodings
    assert single.token_to_chars(0) is None
    assert single.token_to_chars(2) == (2, 6)
    assert pair.token_to_chars(2) == (2, 6)
    assert pair.token_to_chars(5) is None
    assert pair.token_to_chars(6) == (0, 2)


def test_tokenizers_encoding_test_token_to_word(encodings):
    single, pair = encodings
    assert [single.token_to_word(t) for t in (0, 1, 4)] == [None, 0, 2]
    assert [pair.token_to_word(t) for t in (1, 4, 5, 6, 7)] == [0, 2, None, 0, 1]


def test_tokenizers_encoding_test_char_to_token(encodings):
    single, pair = encodings
    assert single.char_to_token(0) == 1
    assert pair.char_to_token(0) == 1
    assert pair.char_to_token(0, sequence_index=0) == 1
    assert pair.char_to_token(1, sequence_index=0) is None
    assert pair.char_to_token(0, sequence_index=1) == 6
    assert pair.char_to_token(2, sequence_index=1) is None


def test_tokenizers_encoding_test_char_to_word(encodings):
    single, pair = encodings
    assert single.char_to_word(0) == 0
    assert single.char_to_word(1) is None
    assert pair.char_to_word(2) == 1
    assert pair.char_to_word(2, sequence_index=0) == 1
    assert pair.char_to_word(2, sequence_index=1) is None
    assert pair.char_to_word(3, sequence_index=1) == 1


def test_tokenizers_encoding_test_truncation(bert_uncased):
    """Upstream cuts a finished encoding to 2 tokens with stride 1 ([CLS] i, then the overflow
    i love): consecutive windows share one token. minibert frames after cutting, so the same
    windows are taken over the pieces (encoding.py's ``truncation_plan``). A tokenizer call asking
    for them (max_length=2, stride=1) is refused, as transformers refuses it: ``tokenizers``'
    truncation parameters take no stride over max_length - 2 (tests/test_tokenizer_call_edges.py)."""
    from minibert.tokenizer.encoding import truncation_plan

    pieces = bert_uncased.tokenize("I love HuggingFace")
    windows = [pieces[start:stop] for (start, stop), _ in truncation_plan(len(pieces), None, 2, "longest_first", 1,
                                                                          "right", overflow=True)]  # fmt: skip
    assert windows[:2] == [["i", "love"], ["love", "hugging"]]
    with pytest.raises(ValueError, match="stride=1 is more than max_length=2"):
        bert_uncased("I love HuggingFace", add_special_tokens=False, truncation=True, max_length=2, stride=1,
                     return_overflowing_tokens=True)  # fmt: skip


def test_tokenizers_tokenizer_test_encode_formats(bert_uncased):
    tokens = lambda ids: bert_uncased.convert_ids_to_tokens(ids)  # noqa: E731
    assert tokens(bert_uncased.encode("my name is john")) == ["[CLS]", "my", "name", "is", "john", "[SEP]"]
    pair = ["[CLS]", "my", "name", "is", "john", "[SEP]", "pair", "[SEP]"]
    assert tokens(bert_uncased.encode("my name is john", "pair")) == pair
    assert tokens(bert_uncased.encode(["my", "name", "is", "john"], is_split_into_words=True))[1:-1] == pair[1:5]
    assert tokens(bert_uncased.encode(["my", "name", "is", "john"], ["pair"], is_split_into_words=True)) == pair
    batch = bert_uncased(["My name is John", "My name is Georges"])["input_ids"]
    assert [tokens(ids) for ids in batch] == [
        ["[CLS]", "my", "name", "is", "john", "[SEP]"], ["[CLS]", "my", "name", "is", "georges", "[SEP]"],
    ]  # fmt: skip
    pretokenized = bert_uncased(
        [["My", "name", "is", "John"], ["My", "name", "is", "Georges"]], is_split_into_words=True
    )
    assert pretokenized["input_ids"] == batch
