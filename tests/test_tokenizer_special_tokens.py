"""Special tokens beyond the roles, and transformers 5's names around added tokens, against
transformers' fast BertTokenizer on all-MiniLM-L6-v2: ``extra_special_tokens`` and
``add_special_tokens``' replace semantics and counts, ``all_special_tokens`` / ``all_special_ids``
in transformers' order, ``get_special_tokens_mask(already_has_special_tokens=True)``,
``get_added_vocab``, ``added_tokens_encoder``, ``convert_ids_to_tokens(skip_special_tokens=)``,
``tokenize(add_special_tokens=)`` and ``is_fast``."""

from __future__ import annotations

import pytest
import transformers

from minibert import BertTokenizer


@pytest.fixture
def both(minilm_dir):
    return BertTokenizer.from_pretrained(minilm_dir), transformers.AutoTokenizer.from_pretrained(str(minilm_dir))


def same(call, ours, theirs):
    """``call`` of each tokenizer (once each), compared; the value returned."""
    value = call(ours)
    assert value == call(theirs)
    return value


def test_extra_special_tokens_replace_or_extend(both):
    """transformers 5: the list given replaces extra_special_tokens (additional_special_tokens is
    the older key for it), or extends it with replace_extra_special_tokens=False; a token dropped
    from the list stays an added token, but leaves all_special_ids."""
    ours, theirs = both
    calls = [
        ({"additional_special_tokens": ["<e1>"]}, {}),
        ({"extra_special_tokens": ["<e2>", "dog"]}, {}),
        ({"extra_special_tokens": ["<e3>", "<e2>"]}, {"replace_extra_special_tokens": False}),
        ({"cls_token": "[CLS]"}, {}),
        ({"mask_token": "<m>", "extra_special_tokens": ["Dog", "<e2>"]}, {}),
    ]
    for tokens, keywords in calls:
        assert ours.add_special_tokens(tokens, **keywords) == theirs.add_special_tokens(tokens, **keywords)
        for name in ("extra_special_tokens", "all_special_tokens", "all_special_ids", "mask_token_id"):
            assert getattr(ours, name) == getattr(theirs, name), name
        assert len(ours) == len(theirs)
    text = "<e1> <e2> dog Dog <m> [CLS] <e3>x"
    ids = same(lambda t: t(text)["input_ids"], ours, theirs)
    for skip in (False, True):
        assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)
    assert ours.additional_special_tokens == ours.extra_special_tokens == ["Dog", "<e2>"]
    same(lambda t: t.extra_special_tokens_ids, ours, theirs)


def test_add_special_tokens_counts_vocabulary_pieces(both):
    """A piece the vocabulary has, not yet an added token, counts (transformers 5 counts it)."""
    ours, theirs = both
    assert (
        same(lambda t: t.add_special_tokens({"additional_special_tokens": ["dog", "Dog", "<e1>"]}), ours, theirs) == 3
    )
    same(len, ours, theirs)
    with pytest.raises(ValueError, match="unknown keys"):
        ours.add_special_tokens({"bos_token": "<s>"})


def test_constructor_extra_special_tokens_are_added(minilm_dir):
    """transformers 5's constructor adds an additional (extra) special token the vocabulary lacks."""
    vocab_file = str(minilm_dir / "vocab.txt")
    for name in ("additional_special_tokens", "extra_special_tokens"):
        ours = BertTokenizer(vocab_file, **{name: ["<e1>", "[unused0]"]})
        theirs = transformers.BertTokenizer.from_pretrained(str(minilm_dir), **{name: ["<e1>", "[unused0]"]})
        for call in (len, lambda t: t.tokenize("<e1>x[unused0]"), lambda t: t.all_special_ids):
            same(call, ours, theirs)


def test_special_tokens_mask_of_framed_ids(both):
    """DataCollatorForLanguageModeling's call: 1 on every id of all_special_ids."""
    ours, theirs = both
    for tokenizer in both:
        tokenizer.add_special_tokens({"additional_special_tokens": ["<e1>"]})
        tokenizer.add_tokens(["<plain>"], special_tokens=True)
    ids = same(lambda t: t("<e1> hi <plain>", "[MASK] [PAD]")["input_ids"], ours, theirs)
    same(lambda t: t.get_special_tokens_mask(ids, already_has_special_tokens=True), ours, theirs)
    with pytest.raises(ValueError, match="token_ids_1 must be None"):
        ours.get_special_tokens_mask(ids, ids, already_has_special_tokens=True)
    collator = transformers.DataCollatorForLanguageModeling(ours, mlm_probability=0.5)
    batch = collator([{"input_ids": ids}])
    special = ours.get_special_tokens_mask(ids, already_has_special_tokens=True)
    assert all(label == -100 for label, is_special in zip(batch["labels"][0].tolist(), special) if is_special)


def test_added_vocab_and_the_ids_back_to_tokens(both):
    ours, theirs = both
    for tokenizer in both:
        tokenizer.add_tokens(["NewWord", "<x>"])
        tokenizer.add_special_tokens({"additional_special_tokens": ["<e1>", "[unused0]"]})
    same(lambda t: t.get_added_vocab(), ours, theirs)
    same(lambda t: t.added_tokens_encoder, ours, theirs)
    ids = same(lambda t: t("<e1> newword [unused0] x <x>", "b")["input_ids"], ours, theirs)
    for skip in (False, True):
        assert ours.convert_ids_to_tokens(ids, skip_special_tokens=skip) == theirs.convert_ids_to_tokens(
            ids, skip_special_tokens=skip
        )
    same(lambda t: t.convert_ids_to_tokens(101, skip_special_tokens=True), ours, theirs)  # one id: never skipped


def test_tokenize_with_special_tokens_and_a_pair(both):
    ours, theirs = both
    text, pair = "Hello, World!", "and  more"
    same(lambda t: t.tokenize(text), ours, theirs)
    same(lambda t: t.tokenize(text, add_special_tokens=True), ours, theirs)
    same(lambda t: t.tokenize(text, pair), ours, theirs)
    same(lambda t: t.tokenize(text, pair, add_special_tokens=True), ours, theirs)
    with pytest.raises(TypeError):
        ours.tokenize(text, truncation=True)  # transformers ignores it silently


def test_is_fast(both):
    """is_fast gates offsets and word_ids in transformers' scripts; minibert has both, as the fast one."""
    ours, theirs = both
    assert ours.is_fast is theirs.is_fast is True
    text = "Hello, World!"
    same(lambda t: t(text, return_offsets_mapping=True)["offset_mapping"], ours, theirs)
    same(lambda t: t(text).word_ids(), ours, theirs)


def test_a_refused_call_changes_nothing_and_a_str_is_not_a_list(both):
    """add_special_tokens with one bad key changed extra_special_tokens before refusing (and a save
    then held one token more than the model's embeddings); a plain str assigned to
    extra_special_tokens was split into its characters ("e" counted as special). Both are refused
    with nothing changed, as transformers refuses a str there."""
    ours, _ = both
    before = (ours.extra_special_tokens, ours.all_special_ids, len(ours))
    with pytest.raises(TypeError, match="mask_token must be non-empty"):
        ours.add_special_tokens({"extra_special_tokens": ["<e1>"], "mask_token": ""})
    assert (ours.extra_special_tokens, ours.all_special_ids, len(ours)) == before
    with pytest.raises(TypeError, match="must be a list of tokens, got the str '<e1>'"):
        ours.extra_special_tokens = "<e1>"
    assert (ours.extra_special_tokens, ours.all_special_ids, len(ours)) == before
