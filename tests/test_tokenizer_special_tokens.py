"""Special tokens beyond the roles, and transformers 5's names around added tokens, against
transformers' fast BertTokenizer on all-MiniLM-L6-v2: ``extra_special_tokens`` and
``add_special_tokens``' replace semantics and counts, ``all_special_tokens`` / ``all_special_ids``
in transformers' order, ``get_special_tokens_mask(already_has_special_tokens=True)``,
``get_added_vocab``, ``added_tokens_encoder``, ``convert_ids_to_tokens(skip_special_tokens=)``,
``tokenize(add_special_tokens=)``, ``is_fast``, and the roles, bos/eos included (None until set)."""

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
    for tokenizer in both:  # a key that is no role: refused by both (bos_token is one: see ROLE_CHANGES)
        with pytest.raises(ValueError, match="foo_token"):
            tokenizer.add_special_tokens({"foo_token": "<s>"})


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


def _seen(tokenizer) -> dict:
    """What a user sees of a tokenizer's roles: the roles and ids, the special ids, a batch of
    pairs framed and padded, the special-token mask of framed ids, the pieces of a text holding the
    pieces in play, and decode skipping special tokens."""
    text = "a [unused0] b [PAD] c [SEP] d [unused6] e [CLS] [unused1] [unused2] <sep> zzz\u2603"
    try:
        batch = tokenizer(["a b", "a"], ["c", "c"], padding=True, return_special_tokens_mask=True)
        batch = {key: batch[key] for key in ("input_ids", "token_type_ids", "attention_mask", "special_tokens_mask")}
    except ValueError:  # no pad token (each library says so in its words)
        batch = "cannot pad"
    return {
        "roles": {name: (getattr(tokenizer, name), getattr(tokenizer, f"{name}_id")) for name in ROLE_NAMES},
        "map": list(tokenizer.special_tokens_map.items()),  # in transformers' order, no None roles
        "all_special_tokens": tokenizer.all_special_tokens,
        "all_special_ids": tokenizer.all_special_ids,
        "batch": batch,
        "framed": tokenizer("a", "b")["input_ids"],
        "mask": tokenizer.get_special_tokens_mask([101, 5, 102, 7, 1, 0, 2, 3], already_has_special_tokens=True),
        "tokens": tokenizer.tokenize(text),
        "decoded": tokenizer.decode([101, 1, 0, 1037, 102, 7, 2, 3, 100], skip_special_tokens=True),
        "unknown": (tokenizer.convert_tokens_to_ids("qqqzzz"), tokenizer("\u2603")["input_ids"]),
        "len": len(tokenizer),
    }


ROLE_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
ROLE_CHANGES = {  # as a user changes a role: the attribute (token or id), or add_special_tokens
    "pad_token = [unused0]": lambda t: setattr(t, "pad_token", "[unused0]"),
    "pad_token_id = 1": lambda t: setattr(t, "pad_token_id", 1),
    "pad_token = None": lambda t: setattr(t, "pad_token", None),
    "mask_token = [unused3]": lambda t: setattr(t, "mask_token", "[unused3]"),
    "cls_token = [unused1]": lambda t: setattr(t, "cls_token", "[unused1]"),
    "sep_token_id = 7": lambda t: setattr(t, "sep_token_id", 7),
    "unk_token = [unused2]": lambda t: setattr(t, "unk_token", "[unused2]"),
    "then add_special_tokens": lambda t: (setattr(t, "pad_token", "[unused0]"),
                                          t.add_special_tokens({"pad_token": "[unused0]"}))[1],  # fmt: skip
    "add_special_tokens sep [unused6]": lambda t: t.add_special_tokens({"sep_token": "[unused6]"}),
    "add_special_tokens sep <sep>": lambda t: t.add_special_tokens({"sep_token": "<sep>"}),
    "add_special_tokens cls [unused1]": lambda t: t.add_special_tokens({"cls_token": "[unused1]"}),
    # bos/eos: None on BERT until set; the warm-started bert2bert recipe sets them to [CLS] and [SEP]
    "bos_token = cls, eos_token = sep": lambda t: (setattr(t, "bos_token", t.cls_token),
                                                   setattr(t, "eos_token", t.sep_token)),  # fmt: skip
    "eos_token_id = 102": lambda t: setattr(t, "eos_token_id", 102),
    "add_special_tokens bos [CLS] eos [SEP]": lambda t: t.add_special_tokens({"bos_token": "[CLS]",
                                                                              "eos_token": "[SEP]"}),  # fmt: skip
    "add_special_tokens bos <s>": lambda t: t.add_special_tokens({"bos_token": "<s>"}),
    "bos_token set, then None": lambda t: (setattr(t, "bos_token", "[CLS]"), setattr(t, "bos_token", None)),
    "mask_token = None, its map given back": lambda t: (setattr(t, "mask_token", None),
                                                        t.add_special_tokens(t.special_tokens_map))[1],  # fmt: skip
}


@pytest.mark.parametrize("change", sorted(ROLE_CHANGES))
def test_a_role_changed_as_transformers_changes_it(both, tmp_path, change):
    """``tokenizer.pad_token = "[unused0]"`` left pad_token_id at 0 (padding with [PAD] where
    transformers pads with [unused0], and disagreeing with minibert's own saved copy), and
    ``add_special_tokens({"sep_token": ...})`` re-framed every input where transformers keeps its
    post-processor's [SEP]. Now, as in transformers 5: the role and its id change together (padding,
    all_special_ids, the mask of framed ids), while the framing, the pieces cut out as typed,
    decode's skipping and WordPiece's [UNK] stay as the tokenizer was made; saved and loaded again
    (by either library), the tokenizer takes the new roles for all of them, as transformers' own
    save does. bos_token / eos_token (and their ids) were no attributes at all: reading them raised,
    assigning them made a stray attribute lost on save, add_special_tokens refused them; now None
    until set, as transformers' BERT has them. A role set to None leaves special_tokens_map (it was
    there as None, which add_special_tokens then refused)."""
    ours, theirs = both
    assert ROLE_CHANGES[change](ours) == ROLE_CHANGES[change](theirs)
    assert _seen(ours) == _seen(theirs)
    ours.save_pretrained(tmp_path / "ours")
    theirs.save_pretrained(str(tmp_path / "theirs"))
    reloaded = _seen(BertTokenizer.from_pretrained(tmp_path / "ours"))
    assert reloaded == _seen(transformers.AutoTokenizer.from_pretrained(str(tmp_path / "ours")))
    assert reloaded == _seen(transformers.AutoTokenizer.from_pretrained(str(tmp_path / "theirs")))


def test_a_role_the_tokenizer_cannot_take_is_refused(both, vocab_file):
    """A piece the tokenizer lacks (transformers silently gives it [UNK]'s id: padding with [UNK]),
    and no [UNK], [CLS] or [SEP] at all, are refused; the error of padding without a pad piece
    names the tokenizer's pad_token (it named [PAD] whatever the pad token was)."""
    ours, _ = both
    with pytest.raises(ValueError, match=r"pad_token = '<pad>': the tokenizer has no such piece .*add_special_tokens"):
        ours.pad_token = "<pad>"
    for name in ("unk_token", "cls_token", "sep_token"):
        with pytest.raises(ValueError, match=f"{name} cannot be None"):
            setattr(ours, name, None)
    with pytest.raises(ValueError, match="no piece has that id"):
        ours.pad_token_id = 10**6
    assert ours.pad_token == "[PAD]" and ours(["a b", "a"], padding=True)["input_ids"][1][-1] == 0
    with pytest.raises(ValueError, match=r"cannot pad: the vocabulary vocab.txt has no <pad> piece"):
        BertTokenizer(vocab_file, pad_token="<pad>")(["a b", "a"], padding=True)
