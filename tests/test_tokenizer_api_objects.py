"""The small parts of transformers' tokenizer API users reach for, against transformers' fast
tokenizer on the same files; and every object a user hands to another process pickles and comes
back computing the same numbers."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

import minibert

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tokenizers(minilm_dir):
    return minibert.BertTokenizer.from_pretrained(minilm_dir), transformers.AutoTokenizer.from_pretrained(
        str(minilm_dir))  # fmt: skip


@pytest.mark.parametrize("pair", [False, True])
def test_tokens_and_n_sequences(tokenizers, pair):
    ours, theirs = tokenizers
    texts, pairs = ["Héllo, world!", "unbelievably long words"], (["a b", "c"] if pair else None)
    for kwargs in ({}, {"padding": True}, {"padding": True, "return_tensors": "pt"}):
        a, b = ours(texts, pairs, **kwargs), theirs(texts, pairs, **kwargs)
        for row in range(2):
            assert a.tokens(row) == b.tokens(row)
        assert a.n_sequences == b.n_sequences == (2 if pair else 1)
    assert ours("one text").tokens() == theirs("one text").tokens()
    with pytest.raises(IndexError):
        ours(texts).tokens(5)


def test_special_tokens_map_and_input_names(tokenizers):
    ours, theirs = tokenizers
    assert ours.special_tokens_map == theirs.special_tokens_map
    assert ours.all_special_tokens == theirs.all_special_tokens
    assert sorted(ours.model_input_names) == sorted(theirs.model_input_names)
    for tokens in (["love", "##ly", "paris", "!"], ["##ab", "cd", ",", "'", "s"], []):
        assert ours.convert_tokens_to_string(tokens) == theirs.convert_tokens_to_string(tokens)


def test_config_embedder_and_models_pickle(minilm_dir):
    config = minibert.BertConfig.from_json_file(minilm_dir / "config.json")
    assert pickle.loads(pickle.dumps(config)) == config
    embedder = minibert.Embedder.from_pretrained(minilm_dir)
    texts = ["a first text", "and a second one, longer than the first"]
    copy = pickle.loads(pickle.dumps(embedder))
    np.testing.assert_array_equal(copy.embed(texts), embedder.embed(texts))
    model = minibert.BertModel.from_pretrained(minilm_dir)
    batch = embedder.tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch).last_hidden_state
        assert torch.equal(pickle.loads(pickle.dumps(model))(**batch).last_hidden_state, expected)
    classifier = minibert.BertForSequenceClassification.from_pretrained(minilm_dir, new_heads=True, num_labels=3)
    with torch.no_grad():
        assert torch.equal(pickle.loads(pickle.dumps(classifier))(**batch).logits, classifier(**batch).logits)


def test_add_special_tokens_and_resize_as_transformers(minilm_dir, tmp_path):
    ours = minibert.BertTokenizer.from_pretrained(minilm_dir)
    theirs = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    new = {"additional_special_tokens": ["<e1>", "</e1>", "[NEW]"]}
    assert ours.add_special_tokens(new) == theirs.add_special_tokens(new) == 3
    assert len(ours) == len(theirs) and ours.vocab_size == theirs.vocab_size
    texts = ["<e1>Ada</e1> met [NEW] Babbage <E1> x<e1>y", "no specials here", "[MASK] and <e1>"]
    for text in texts:
        a, b = ours(text, return_offsets_mapping=True), theirs(text, return_offsets_mapping=True)
        assert a["input_ids"] == b["input_ids"], text
        assert a.tokens() == b.tokens() and a["offset_mapping"] == b["offset_mapping"], text
        decoded = ours.decode(a["input_ids"], skip_special_tokens=True)
        assert decoded == theirs.decode(b["input_ids"], skip_special_tokens=True)
    assert sorted(ours.all_special_ids) == sorted(theirs.all_special_ids)
    assert ours.add_special_tokens({"additional_special_tokens": ["<e1>"]}) == 0
    ours.save_pretrained(tmp_path / "saved")
    for reloaded in (minibert.BertTokenizer.from_pretrained(tmp_path / "saved"),
                     transformers.AutoTokenizer.from_pretrained(str(tmp_path / "saved"))):  # fmt: skip
        assert reloaded(texts[0])["input_ids"] == theirs(texts[0])["input_ids"]
    assert ours.add_tokens(["newword"]) == theirs.add_tokens(["newword"]) == 1  # more: test_tokenizer_added_tokens.py
    assert ours("newwords")["input_ids"] == theirs("newwords")["input_ids"]

    model = minibert.BertModel.from_pretrained(minilm_dir)
    reference = transformers.BertModel.from_pretrained(str(minilm_dir))
    before = model.embeddings.word_embeddings.weight.detach().clone()
    model.resize_token_embeddings(len(ours))
    reference.resize_token_embeddings(len(theirs))
    ours_weight, theirs_weight = model.embeddings.word_embeddings.weight, reference.get_input_embeddings().weight
    assert ours_weight.shape == theirs_weight.shape == (len(theirs), 384) and model.config.vocab_size == len(ours)
    assert torch.equal(ours_weight[: before.shape[0]], before)
    # transformers samples the new rows within 1e-9 × the covariance of the old rows' mean: ~1e-6
    assert float((ours_weight - theirs_weight).abs().max()) <= 1e-5
    # The forward with the new tokens, on the same rows (transformers' are a sample: the mean's tiny
    # noise, amplified by LayerNorm over a short mean vector, is not what this compares).
    with torch.no_grad():
        ours_weight[before.shape[0] :] = theirs_weight[before.shape[0] :]
        batch = ours(texts, padding=True, return_tensors="pt")
        difference = model(**batch).last_hidden_state - reference(**batch).last_hidden_state
        assert float(difference.abs().max()) <= 1e-5  # every position, [PAD] rows included


def test_resize_grows_the_masked_lm_bias(tmp_path):
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=37)  # fmt: skip
    transformers.BertForMaskedLM(config).save_pretrained(tmp_path / "mlm")
    model = minibert.BertForMaskedLM.from_pretrained(tmp_path / "mlm")
    model.resize_token_embeddings(103)
    logits = model(torch.tensor([[1, 100, 102, 2]])).logits
    assert logits.shape == (1, 4, 103) and not model.mlm_head.bias[99:].any()


@pytest.mark.parametrize("new_num_tokens, multiple", [(103, 8), (None, 8), (104, 8), (100, 1), (None, None)])
def test_resize_pads_to_a_multiple_as_transformers(tmp_path, new_num_tokens, multiple):
    """``resize_token_embeddings(n, pad_to_multiple_of=m)``: n rounded up to a multiple of m (the
    current size when n is None), as transformers computes it; with neither, the table as it is."""
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=37)  # fmt: skip
    transformers.BertForMaskedLM(config).save_pretrained(tmp_path / "mlm")
    model = minibert.BertForMaskedLM.from_pretrained(tmp_path / "mlm")
    reference = transformers.BertForMaskedLM.from_pretrained(str(tmp_path / "mlm"))
    table = model.resize_token_embeddings(new_num_tokens, pad_to_multiple_of=multiple)
    theirs = reference.resize_token_embeddings(new_num_tokens, pad_to_multiple_of=multiple)
    assert table is model.get_input_embeddings() and table.num_embeddings == theirs.num_embeddings
    assert model.config.vocab_size == reference.config.vocab_size == theirs.num_embeddings
    assert model(torch.tensor([[1, 2]])).logits.shape[-1] == theirs.num_embeddings
    with pytest.raises(ValueError, match="pad_to_multiple_of must be a positive int"):
        model.resize_token_embeddings(100, pad_to_multiple_of=2.5)


def test_resize_below_the_pad_row_gives_transformers_table_and_a_config_that_loads(tmp_path):
    """Fewer rows than pad_token_id + 1 was torch's bare AssertionError ('Padding_idx must be within
    num_embeddings'). transformers' table: the first rows, no padding row. Here too, and config.pad_token_id
    is None, which the table now says (transformers keeps 50, and its own from_pretrained of the saved
    folder then fails on that same assertion); a warning names the row dropped."""
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=37, pad_token_id=50)  # fmt: skip
    transformers.BertForMaskedLM(config).save_pretrained(tmp_path / "mlm")
    model = minibert.BertForMaskedLM.from_pretrained(tmp_path / "mlm")
    reference = transformers.BertForMaskedLM.from_pretrained(str(tmp_path / "mlm"))
    with pytest.warns(UserWarning, match=r"resize_token_embeddings\(40\) drops the \[PAD\] row \(pad_token_id = 50\)"):
        table = model.resize_token_embeddings(40)
    theirs = reference.resize_token_embeddings(40)
    assert (table.num_embeddings, table.padding_idx) == (theirs.num_embeddings, theirs.padding_idx) == (40, None)
    assert torch.equal(table.weight, theirs.weight)
    assert model.config.pad_token_id is None and model.config.vocab_size == 40
    ids = torch.tensor([[1, 39, 2, 3]])
    with torch.no_grad():
        assert float((model(ids).logits - reference(ids).logits).abs().max()) <= 1e-5  # (ATOL of the float32 forward)
    model.save_pretrained(tmp_path / "resized")
    again = minibert.BertForMaskedLM.from_pretrained(tmp_path / "resized")
    assert again.get_input_embeddings().num_embeddings == 40 and again.config.pad_token_id is None


FROM_PRETRAINED_SETTINGS = [  # the constructor's settings, which transformers' from_pretrained passes on
    dict(strip_accents=False),
    dict(tokenize_chinese_chars=False),
    dict(do_lower_case=True, strip_accents=True, tokenize_chinese_chars=False),
    dict(additional_special_tokens=["<e1>", "</e1>"]),  # relation extraction
    dict(extra_special_tokens=["<e1>"]),
    dict(pad_token="[unused3]"),
    dict(bos_token="[CLS]", eos_token="[SEP]"),
    dict(model_max_length=8, truncation_side="left"),
]


@pytest.mark.parametrize("settings", FROM_PRETRAINED_SETTINGS, ids=lambda settings: ",".join(settings))
def test_from_pretrained_passes_the_constructors_settings_as_transformers(minilm_dir, settings):
    """from_pretrained refused every keyword but model_max_length, the sides and
    clean_up_tokenization_spaces with a TypeError; now, as transformers, the constructor's settings
    replace the files' (compared with BertTokenizerFast given the same keywords)."""
    ours = minibert.BertTokenizer.from_pretrained(minilm_dir, **settings)
    theirs = transformers.BertTokenizerFast.from_pretrained(str(minilm_dir), **settings)
    texts = ["Héllo 東京 <e1> x </e1>", "a b c d e f g h i j"]
    for text in texts:
        assert ours.tokenize(text) == theirs.tokenize(text)
    batch = dict(padding=True, truncation=True)
    assert ours(texts, **batch)["input_ids"] == theirs(texts, **batch)["input_ids"]
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "all_special_tokens", "special_tokens_map"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert len(ours) == len(theirs)


def test_from_pretrained_do_basic_tokenize_as_transformers_legacy_tokenizer(minilm_dir):
    """do_basic_tokenize=False: what transformers' BertTokenizerLegacy does (its fast BertTokenizer
    ignores the flag, docs/tokenizer.md); it was a TypeError here."""
    legacy = pytest.importorskip("transformers.models.bert.tokenization_bert_legacy").BertTokenizerLegacy
    ours = minibert.BertTokenizer.from_pretrained(minilm_dir, do_basic_tokenize=False)
    theirs = legacy.from_pretrained(str(minilm_dir), do_basic_tokenize=False)
    assert ours.tokenize("Héllo 東京 <e1> x") == theirs.tokenize("Héllo 東京 <e1> x") == [
        "[UNK]", "東", "##京", "<", "##e", "##1", "##>", "x"]  # fmt: skip


def test_vocab_keyword_names_the_file_as_in_transformers_5(minilm_dir):
    """transformers 5's BertTokenizer(vocab="vocab.txt") reads the file; here it was a TypeError
    (vocab named only a dict, and vocab_file was required)."""
    path = str(minilm_dir / "vocab.txt")
    expected = transformers.BertTokenizer(vocab=path)("hello world")["input_ids"]
    assert minibert.BertTokenizer(vocab=path)("hello world")["input_ids"] == expected == [101, 7592, 2088, 102]
    pieces = minibert.BertTokenizer(path).get_vocab()
    assert minibert.BertTokenizer(vocab=pieces)("hello world")["input_ids"] == expected
    with pytest.raises(TypeError, match="vocabulary file twice"):
        minibert.BertTokenizer(path, vocab=path)
    with pytest.raises(TypeError, match="needs a vocabulary"):
        minibert.BertTokenizer()


def test_decode_and_pad_take_transformers_keywords(tokenizers):
    """decode(spaces_between_special_tokens=) and pad(verbose=) were TypeErrors; transformers 5 takes both
    (the first changes nothing in its fast tokenizer)."""
    ours, theirs = tokenizers
    for value in (True, False):
        ids = [101, 7592, 103, 102]
        assert ours.decode(ids, spaces_between_special_tokens=value) == theirs.decode(
            ids, spaces_between_special_tokens=value)  # fmt: skip
    rows = {"input_ids": [[101, 102], [101, 7592, 102]]}
    assert dict(ours.pad(rows, verbose=False)) == dict(theirs.pad(rows, verbose=False))


@pytest.mark.parametrize("ids", [[101, 7592, 2088, 102], [7592], [], "tensor"])
def test_batch_decode_of_one_flat_row_as_transformers_5(tokenizers, ids):
    """A flat list of ids (or a 1-D tensor) is one row in transformers 5; each id was a row here."""
    ours, theirs = tokenizers
    ids = torch.tensor([101, 7592, 102]) if ids == "tensor" else ids
    assert ours.batch_decode(ids) == theirs.batch_decode(ids)
    assert ours.batch_decode([[101, 7592], [2088]]) == theirs.batch_decode([[101, 7592], [2088]])


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("hello",), dict(text_target="world")),
        ((["hello", "a b c"],), dict(text_target=["world", "x"], padding=True)),
        (("hello", "there"), dict(text_target="a", text_pair_target="b", return_tensors="pt")),
        ((), dict(text_target=["world", "x y"], truncation=True, max_length=3)),
        (("hello", None, "world"), {}),  # text_target is the third positional argument, as in transformers
    ],
)
def test_text_target_gives_labels_as_transformers(tokenizers, args, kwargs):
    """text_target (transformers' seq2seq examples build labels with it) was a TypeError."""
    ours, theirs = (t(*args, **kwargs) for t in tokenizers)
    as_lists = lambda encoding: {key: value.tolist() if hasattr(value, "tolist") else value  # noqa: E731
                                 for key, value in encoding.items()}  # fmt: skip
    assert as_lists(ours) == as_lists(theirs)


def test_added_token_str_is_its_content_as_tokenizers(tokenizers):
    ours, theirs = tokenizers
    for index in (100, 103):
        assert str(ours.added_tokens_decoder[index]) == str(theirs.added_tokens_decoder[index]) == (
            f"{ours.added_tokens_decoder[index]}")  # fmt: skip
    assert "special=True" in repr(ours.added_tokens_decoder[103])  # repr still shows the options


def test_batch_decode_of_rows_given_as_tensors_or_arrays(tokenizers):
    """``list(batch_tensor)`` (a generation loop's rows) and a list of 1-D arrays: each a row, as in
    transformers; each row was read as one id, a TypeError."""
    ours, theirs = tokenizers
    batch = torch.tensor([[101, 7592, 102], [101, 2088, 102]])
    for rows in (list(batch), [row.numpy() for row in batch], list(batch.numpy())):
        assert ours.batch_decode(rows) == theirs.batch_decode(rows) == ["[CLS] hello [SEP]", "[CLS] world [SEP]"]


def test_the_first_piece_is_cleaned_up_too(minilm_dir):
    """The WordPiece decoder cleans every piece, the first too: an added token holding " !" or " 's"
    decoded first kept its space ("wait ! it's" where transformers says "wait! it's")."""
    ours = minibert.BertTokenizer.from_pretrained(minilm_dir)
    theirs = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    for tokenizer in (ours, theirs):
        tokenizer.add_tokens(["wait !", "it 's", "x ."])
    for text in ("wait ! it 's", "it 's wait !", "x . wait !"):
        ids = ours(text)["input_ids"]
        assert ids == theirs(text)["input_ids"]
        for skip in (True, False):
            assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip), text
        tokens = ours.convert_ids_to_tokens(ids[1:-1])
        assert ours.convert_tokens_to_string(tokens) == theirs.convert_tokens_to_string(tokens)


def test_tokens_are_those_tokenized_whatever_is_written_into_the_ids_after(tokenizers):
    """A masking collator writes [MASK] into ``input_ids`` in place; ``tokens()`` still says what the
    call tokenized, as transformers' (from its Rust encodings). It read the ids at the time of asking."""
    ours, theirs = tokenizers
    for return_tensors in ("pt", None):
        a, b = (tokenizer(["the quick brown fox", "a b"], return_tensors=return_tensors, padding=True)
                for tokenizer in (ours, theirs))  # fmt: skip
        for encoding, tokenizer in ((a, ours), (b, theirs)):
            if return_tensors == "pt":
                encoding["input_ids"][0, 2] = tokenizer.mask_token_id
            else:
                encoding["input_ids"][0][2] = tokenizer.mask_token_id
        assert a.tokens(0) == b.tokens(0) == ["[CLS]", "the", "quick", "brown", "fox", "[SEP]"]


@pytest.mark.parametrize(
    "call, positional",
    [("encode", ("a b", None, False)), ("encode", ("a b c d e", None, True, "max_length", True, 4)),
     ("__call__", ("a b", None, None, None, False)),
     ("__call__", ("a b", None, None, None, True, "max_length", True, 6)),
     ("__call__", (["a b", "c"], None, None, None, True, True, False, None, 0, False, 4))],
)  # fmt: skip
def test_the_call_s_arguments_by_position_in_transformers_order(tokenizers, call, positional):
    """``tok.encode("a b", None, False)`` is add_special_tokens=False in transformers (its signature's
    order after the texts); it was a TypeError here. The same value by position and by name is refused."""
    ours, theirs = tokenizers
    result = [getattr(tokenizer, call)(*positional) for tokenizer in (ours, theirs)]
    if call == "__call__":
        result = [dict(encoding) for encoding in result]
    assert result[0] == result[1]
    with pytest.raises(TypeError, match="got multiple values for argument 'add_special_tokens'"):
        getattr(ours, call)(*positional[:4], False, add_special_tokens=True)
    with pytest.raises(TypeError, match=r"takes at most \d+ arguments by position after its texts"):
        getattr(ours, call)("a", None, *([None] * 20))


@pytest.mark.parametrize("strategy", ["first", "average", "max", "simple"])
def test_transformers_token_classification_pipeline_groups_words_as_with_its_own_tokenizer(minilm_dir, strategy):
    """transformers' pipeline tells a word's later pieces from new words by the Rust tokenizer's
    WordPiece prefix (``tokenizer._tokenizer.model.continuing_subword_prefix``); without it, it warned
    and guessed from spaces: "welcome to new - york" was one entity where its own tokenizer gives
    "welcome to new -" and "york city"."""
    import warnings

    torch.manual_seed(0)
    model = transformers.AutoModelForTokenClassification.from_pretrained(str(minilm_dir), num_labels=3).eval()
    texts = ["Welcome to New-York City!", "unaffable naïveté, café!", "He's at [UNK] o'clock."]
    found = []
    for tokenizer in (minibert.BertTokenizer.from_pretrained(minilm_dir),
                      transformers.AutoTokenizer.from_pretrained(str(minilm_dir))):  # fmt: skip
        tagger = transformers.pipeline("token-classification", model=model, tokenizer=tokenizer,
                                       aggregation_strategy=strategy)  # fmt: skip
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="Tokenizer does not support real words")
            found.append([[(e["word"], e["start"], e["end"], e["entity_group"]) for e in row] for row in tagger(texts)])
    assert found[0] == found[1]
