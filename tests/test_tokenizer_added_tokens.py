"""``add_tokens``: ordinary added tokens, matched after normalization, against transformers' fast
BertTokenizer (the reference: ``tokenizers``' AddedVocabulary) on the real all-MiniLM-L6-v2
vocabulary (uncased) and a cased one. Every comparison is of transformers' own output: ids, the
pieces, offsets, word ids, decoding, ``len``, the counts ``add_tokens`` returns, the vocabulary,
and the files saved by each, reloaded by the other."""

from __future__ import annotations

import itertools
import json
import random

import pytest
import transformers

import corpus
from minibert import BertTokenizer
from minibert.errors import CheckpointError
from minibert.tokenizer import AddedToken

# Each case: tokens added (in calls), texts. The cases name the classes of behaviour: a token
# inside a longer word, case and accents folded by normalization, a token holding punctuation or
# spaces, a CJK token (normalized with spaces around each ideograph), overlapping tokens (leftmost,
# then longest), tokens the vocabulary already has (they keep their id), a one-letter token that
# cuts every word holding it, whitespace tokens, and special tokens among them.
CASES = [
    ([["NewWord"]], ["NewWords and newword! NEWWORD", "x.newword,newwordy", "no match here"]),
    ([["Élan", "naïve"]], ["the élan of NAIVE naïve Élan élans", "ÉLAN"]),
    ([["e-mail", "hello world", "!!"]], ["E-Mails: hello world, HELLO   WORLD wow!!! hello\tworld"]),
    ([["中文", "日本"]], ["中文字 日本語 中 文 中文", "ab中文cd"]),
    ([["ab", "abc", "bcd"], ["cde"]], ["abcd abcde xabcdex bcde", "ABCDE"]),
    ([["the", "a", "##ing"]], ["the theme of banana and running", "A bAnAnA"]),
    ([[" ", "foo "], ["İ"]], ["a b  foo bar foo", "İstanbul i̇ I"]),
    ([["x"], ["x", "y", "x"], ["z"]], ["x y z [CLS] xyz", "[MASK] x[SEP]"]),
    ([["covid-19", "sars-cov-2"]], ["COVID-19 and SARS-CoV-2 (covid-19's cousin)", "covid-191"]),
]


@pytest.fixture(scope="module")
def pair_of(minilm_dir):
    def make(directory=minilm_dir):
        return BertTokenizer.from_pretrained(directory), transformers.AutoTokenizer.from_pretrained(str(directory))

    return make


def assert_same(ours, theirs, texts):
    """Everything a user sees of the two tokenizers, on ``texts``, alone, as a batch and as pairs."""
    assert len(ours) == len(theirs) and ours.vocab_size == theirs.vocab_size
    for text in texts:
        a, b = ours(text, return_offsets_mapping=True), theirs(text, return_offsets_mapping=True)
        assert a["input_ids"] == b["input_ids"], text
        assert a.tokens() == b.tokens(), text
        assert a["offset_mapping"] == b["offset_mapping"], text
        assert a.word_ids() == b.word_ids(), text
        assert ours.tokenize(text) == theirs.tokenize(text), text
        assert ours.decode(a["input_ids"]) == theirs.decode(b["input_ids"]), text
        assert ours.decode(a["input_ids"], skip_special_tokens=True) == theirs.decode(
            b["input_ids"], skip_special_tokens=True
        ), text
    a, b = ours(texts, texts[::-1], padding=True), theirs(texts, texts[::-1], padding=True)
    assert a["input_ids"] == b["input_ids"] and a["token_type_ids"] == b["token_type_ids"]
    words = [text.split() for text in texts]
    a = ours(words, is_split_into_words=True, return_offsets_mapping=True)
    b = theirs(words, is_split_into_words=True, return_offsets_mapping=True)
    assert a["input_ids"] == b["input_ids"] and a["offset_mapping"] == b["offset_mapping"]
    added = range(ours.vocab_size, len(ours))
    assert ours.convert_ids_to_tokens(list(added)) == theirs.convert_ids_to_tokens(list(added))
    assert ours.get_vocab() == theirs.get_vocab()
    assert sorted(ours.all_special_ids) == sorted(theirs.all_special_ids)


@pytest.mark.parametrize("calls, texts", CASES, ids=[" ".join(c[0][0]) for c in CASES])
def test_added_tokens_as_transformers(calls, texts, pair_of, tmp_path):
    ours, theirs = pair_of()
    for tokens in calls:
        assert ours.add_tokens(tokens) == theirs.add_tokens(tokens), tokens
    assert ours.convert_tokens_to_ids([t for call in calls for t in call]) == theirs.convert_tokens_to_ids(
        [t for call in calls for t in call]
    )
    assert_same(ours, theirs, texts)
    # Saved by each, reloaded by both: the added tokens keep their ids and how they match.
    ours.save_pretrained(tmp_path / "ours")
    theirs.save_pretrained(tmp_path / "theirs")
    for directory in (tmp_path / "ours", tmp_path / "theirs"):
        reloaded_ours, reloaded_theirs = pair_of(directory)
        for text in texts:
            expected = theirs(text)["input_ids"]
            assert reloaded_ours(text)["input_ids"] == reloaded_theirs(text)["input_ids"] == expected, (directory, text)


def test_added_tokens_on_real_text_and_a_cased_vocabulary(pair_of, tmp_path, minilm_dir):
    """Random tokens cut from real text (many scripts), added in random calls, then the corpus
    tokenized by both; and the same on a cased copy of the vocabulary (no lowercasing)."""
    texts = [text for text in corpus.translations() if 5 < len(text) < 200][::40][:150]
    rng = random.Random(7)
    for lowercase in (True, False):
        ours, theirs = pair_of()
        if not lowercase:
            config = json.loads((minilm_dir / "tokenizer_config.json").read_text())
            directory = tmp_path / "cased"
            directory.mkdir()
            (directory / "vocab.txt").write_bytes((minilm_dir / "vocab.txt").read_bytes())
            config.update(do_lower_case=False, strip_accents=False)
            (directory / "tokenizer_config.json").write_text(json.dumps(config))
            ours, theirs = pair_of(directory)
            assert ours.basic.do_lower_case is False
        candidates = []
        for text in rng.sample(texts, 40):
            start = rng.randrange(len(text))
            candidates.append(text[start : start + rng.randint(2, 8)].strip())
        seen = set()
        for token in candidates:
            normalized = ours._normalized(token)
            if not normalized or normalized in seen:
                continue  # refused by minibert (see below); transformers' choice there is random
            seen.add(normalized)
            assert ours.add_tokens([token]) == theirs.add_tokens([token]), token
        assert len(ours) > ours.vocab_size + 10
        assert_same(ours, theirs, texts)


def test_special_tokens_through_add_tokens(pair_of, tmp_path):
    """``special_tokens=True``: matched as typed (not lowercased), anywhere, next to ordinary ones."""
    ours, theirs = pair_of()
    for tokens, special in [(["<e1>", "</e1>"], True), (["Acme"], False), (["NEW"], True), (["<e1>"], True)]:
        assert ours.add_tokens(tokens, special_tokens=special) == theirs.add_tokens(tokens, special_tokens=special)
    texts = ["<e1>Acme</e1> renewal NEW new <E1> acme", "x<e1>y[CLS]NEWS"]
    assert_same(ours, theirs, texts)
    ours.add_special_tokens({"additional_special_tokens": ["[ENT]"]})
    theirs.add_special_tokens({"additional_special_tokens": ["[ENT]"]})
    texts.append("[ENT] acme [ent]")
    assert_same(ours, theirs, texts)
    # Saved by each (transformers: tokenizer.json alone), reloaded by both.
    ours.save_pretrained(tmp_path / "ours")
    theirs.save_pretrained(tmp_path / "theirs")
    for directory in (tmp_path / "ours", tmp_path / "theirs"):
        reloaded_ours, reloaded_theirs = pair_of(directory)
        assert_same(reloaded_ours, reloaded_theirs, texts)
        assert [reloaded_ours(text)["input_ids"] for text in texts] == [theirs(text)["input_ids"] for text in texts]


def test_what_minibert_refuses(pair_of):
    ours, _ = pair_of()
    ours.add_tokens(["The"])
    with pytest.raises(ValueError, match="both 'the' once normalized"):
        ours.add_tokens(["THE"])  # transformers: one of the two ids, chosen at random per process
    size = len(ours)
    with pytest.raises(ValueError, match="both 'fresh1' once normalized"):
        ours.add_tokens(["Fresh0", "Fresh1", "FRESH1"])  # the clash inside one call
    assert len(ours) == size and "fresh0" not in ours.tokenize("fresh0")  # a refused call adds nothing
    with pytest.raises(ValueError, match=r"empty once normalized \(cleaning removes control and format"):
        ours.add_tokens(["\u200b"])  # transformers: matches between every two characters
    with pytest.raises(ValueError, match=r"empty once normalized \(stripping accents removes nonspacing marks"):
        ours.add_tokens(["\u0301"])  # a combining acute accent: cleaning keeps it, the uncased vocabulary strips it
    with pytest.raises(ValueError, match="is a special token"):
        ours.add_tokens(["[MASK]"])  # transformers: [MASK] becomes an ordinary token, "[mask]" matches it
    for option in ("single_word", "lstrip", "rstrip"):
        with pytest.raises(NotImplementedError, match=option):
            ours.add_tokens([AddedToken("word", **{option: True})])
    with pytest.raises(TypeError, match="str or AddedToken"):
        ours.add_tokens([3])
    assert ours.add_tokens([]) == 0 and ours.add_tokens([""]) == 0


# A token's options: (special, normalized) — ordinary (matched after normalization), matched as
# typed, special (matched as typed).
READD_OPTIONS = {"ordinary": (False, True), "as-typed": (False, False), "special": (True, False)}


@pytest.mark.parametrize("content", ["newword", "NewWord", "<e1>", "中文", "café"])
@pytest.mark.parametrize("first, second", itertools.permutations(READD_OPTIONS, 2))
def test_a_token_re_added_with_other_options(content, first, second, pair_of, tmp_path):
    """The same content added twice with other options. transformers' tokenizer then sometimes
    disagrees with its own saved and reloaded copy (tokenizers keeps a once-special token in the
    set decode's skip_special_tokens looks up, and shows a once-normalized token normalized): there
    minibert refuses the second add; everywhere else it does what transformers does, in ids, pieces,
    decoding (skipping special tokens or not), special_tokens_mask and added_tokens_decoder."""
    import tokenizers

    ours, theirs = pair_of()

    def add(tokenizer, options):
        special, normalized = READD_OPTIONS[options]
        token = tokenizers.AddedToken(content, normalized=normalized, special=special)
        return tokenizer.add_tokens([token], special_tokens=special)

    assert add(ours, first) == add(theirs, first)
    count = add(theirs, second)
    text = f"a {content} {content.upper()} b{content.lower()}c"
    ids = theirs(text)["input_ids"]
    theirs.save_pretrained(tmp_path)
    reloaded = transformers.AutoTokenizer.from_pretrained(str(tmp_path))

    def shown(tokenizer):
        decoded = tokenizer.decode(ids, skip_special_tokens=True)
        return tokenizer(text)["input_ids"], tokenizer.convert_ids_to_tokens(ids), decoded

    if shown(theirs) != shown(reloaded):
        with pytest.raises(ValueError, match="re-added"):
            add(ours, second)
        return
    assert add(ours, second) == count
    assert_same(ours, theirs, [text])
    a, b = ours(text, return_special_tokens_mask=True), theirs(text, return_special_tokens_mask=True)
    assert a["special_tokens_mask"] == b["special_tokens_mask"]

    def added(tokenizer):
        return {index: (token.content, token.special, token.normalized)
                for index, token in tokenizer.added_tokens_decoder.items()}  # fmt: skip

    assert added(ours) == added(theirs)


@pytest.mark.parametrize("special_first", [True, False], ids=["special-first", "ordinary-first"])
def test_an_ordinary_token_shown_as_a_special_one_is_skipped_by_decode(special_first, pair_of, tmp_path):
    """decode(skip_special_tokens=True) skips a token by the piece it shows (tokenizers looks the
    piece up among the special tokens' contents): "NewWord", ordinary, shows as ``newword``, and is
    skipped once "newword" is added as special, in memory and once saved and reloaded."""
    ours, theirs = pair_of()
    calls = [(["newword"], True), (["NewWord"], False)]
    for tokens, special in calls if special_first else calls[::-1]:
        assert ours.add_tokens(tokens, special_tokens=special) == theirs.add_tokens(tokens, special_tokens=special)
    texts = ["a NewWord newword xNEWWORDs"]
    assert_same(ours, theirs, texts)
    ours.save_pretrained(tmp_path / "ours")
    theirs.save_pretrained(tmp_path / "theirs")
    ids = theirs(texts[0])["input_ids"]
    for directory in (tmp_path / "ours", tmp_path / "theirs"):
        reloaded_ours, reloaded_theirs = pair_of(directory)
        assert_same(reloaded_ours, reloaded_theirs, texts)
        assert reloaded_ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True)


def test_tokenizers_added_token_objects_are_accepted(pair_of):
    import tokenizers

    ours, theirs = pair_of()
    tokens = [tokenizers.AddedToken("Ada99", normalized=True), tokenizers.AddedToken("<b>", normalized=False)]
    assert ours.add_tokens(tokens) == theirs.add_tokens(tokens) == 2
    assert_same(ours, theirs, ["ada99 ADA99 <b>x</b> <B>"])


def test_added_tokens_from_files_are_checked(minilm_dir, tmp_path):
    directory = tmp_path / "tok"
    directory.mkdir()
    (directory / "vocab.txt").write_bytes((minilm_dir / "vocab.txt").read_bytes())
    good = {"content": "NewWord", "normalized": True, "special": False}
    for decoder, message in [
        ({"30530": good}, "the next free id is 30522"),
        ({"1997": {**good, "content": "the"}}, "has id 1997, but the vocabulary gives it 1996"),
        ({"x": good}, "is not a token id"),
        ({"30522": {"content": 5}}, "content string"),
        ({"30522": {**good, "lstrip": "yes"}}, "non-boolean flags"),
        ({"30522": {**good, "single_word": True}}, "single_word=True is not implemented"),
        ([good], "must be a JSON object {id: added token}, got list"),
    ]:
        (directory / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": decoder}))
        with pytest.raises(CheckpointError, match=message) as caught:
            BertTokenizer.from_pretrained(directory)
        assert "tokenizer_config.json" in str(caught.value)


TINY_HUB = "tests/data/tiny_hub"  # its vocab.txt lists 'a' and 'i' twice: 111 lines, 109 pieces
REPEATED = r"tiny_hub/vocab.txt: line 86 repeats line 7 \('a'\)"


def test_no_new_id_on_a_vocab_txt_that_lists_a_piece_twice(tmp_path):
    """Each piece keeps its last line's id, so ids run to 110 over 109 pieces. transformers numbers a
    new token from the count of pieces (109, also the id of the piece on line 110), minibert after
    the last line (111): it gave and saved 111, which transformers read back as 109. Now no token
    gets a new id there, by add_tokens, add_special_tokens or a file: a CheckpointError names the
    repeated line, as `minibert pretraining-data` does."""
    ours = BertTokenizer.from_pretrained(TINY_HUB)
    theirs = transformers.AutoTokenizer.from_pretrained(TINY_HUB)
    theirs.add_tokens(["zebra"])
    assert theirs.convert_tokens_to_ids("zebra") == len(ours) == 109 < max(ours.vocab.values()) + 1 == 111
    size = len(ours)
    with pytest.raises(CheckpointError, match=REPEATED + ".*109 pieces with ids up to 110"):
        ours.add_tokens(["zebra"])
    with pytest.raises(CheckpointError, match=REPEATED):
        ours.add_special_tokens({"extra_special_tokens": ["[E1]"]})
    with pytest.raises(CheckpointError, match=REPEATED):
        BertTokenizer(f"{TINY_HUB}/vocab.txt", extra_special_tokens=["[E1]"])
    assert len(ours) == size and "zebra" not in ours.get_vocab()  # a refused call adds nothing
    assert ours.add_tokens(["a"]) == theirs.add_tokens(["a"]) == 1  # a piece it has keeps its id: allowed
    assert ours("a")["input_ids"] == theirs("a")["input_ids"]
    theirs.save_pretrained(str(tmp_path / "theirs"))  # tokenizer.json (its vocabulary with gaps), zebra at 109
    with pytest.raises(CheckpointError, match="theirs/tokenizer.json: the vocabulary's ids have gaps"):
        BertTokenizer.from_pretrained(tmp_path / "theirs")
    saved_before = tmp_path / "saved_before"  # what minibert wrote before: vocab.txt, zebra at 111
    saved_before.mkdir()
    (saved_before / "vocab.txt").write_bytes((ours.vocab_file).read_bytes())
    zebra = {"content": "zebra", "normalized": True, "special": False}
    (saved_before / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": {"111": zebra}}))
    with pytest.raises(CheckpointError, match=r"saved_before/vocab.txt: line 86 repeats line 7"):
        BertTokenizer.from_pretrained(saved_before)


def test_a_vocabulary_with_gaps_given_as_a_dict_is_refused_without_reading_a_file(tmp_path):
    """The check names the repeated line by reading vocab.txt; a vocabulary given as a dict (beside a
    vocab_file that does not exist), or a file gone since, has no lines to read: the same
    CheckpointError, naming the gap, not FileNotFoundError."""
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "a": 6}
    tokenizer = BertTokenizer(tmp_path / "vocab.txt", vocab=vocab)
    with pytest.raises(CheckpointError, match="the vocabulary's ids have gaps, so it has 6 pieces with ids up to 6"):
        tokenizer.add_tokens(["newtok"])


def test_a_tokenizer_with_added_tokens_pickles(pair_of):
    import pickle

    ours, _ = pair_of()
    ours.add_tokens(["NewWord", "中文"])
    ours.add_tokens(["<x>"], special_tokens=True)
    text = "NEWWORDS 中文字 a<x>b"
    copy = pickle.loads(pickle.dumps(ours))
    assert dict(copy(text, return_offsets_mapping=True)) == dict(ours(text, return_offsets_mapping=True))
    assert copy.added_tokens_decoder == ours.added_tokens_decoder and len(copy) == len(ours)


def test_add_tokens_one_call_per_token_is_linear(pair_of, monkeypatch):
    """A loop of ``add_tokens(word)`` (a vocabulary extended word by word) used to re-normalize every
    added token and recompile the matchers' regular expressions at each call: 1,000 calls took 66 s
    (transformers: 0.9 s). Now each token is normalized a bounded number of times and the matchers
    are built once, when a text is next tokenized; the ids, and the refusal of a clash found through
    the index of spellings, are transformers'."""
    import minibert.tokenizer.added_tokens as added_tokens

    counts = {"normalized": 0, "Matcher": 0}
    normalize, matcher = added_tokens.AddedTokens.normalized, added_tokens.Matcher

    def counting_normalized(self, text):
        counts["normalized"] += 1
        return normalize(self, text)

    def counting_matcher(ids):
        counts["Matcher"] += 1
        return matcher(ids)

    monkeypatch.setattr(added_tokens.AddedTokens, "normalized", counting_normalized)
    monkeypatch.setattr(added_tokens, "Matcher", counting_matcher)
    ours, theirs = pair_of()
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(6, 12))) for _ in range(300)]
    words[150] = words[10].upper()  # the same once normalized: transformers then picks an id at random
    for index, word in enumerate(words):
        if index == 150:
            with pytest.raises(ValueError, match="once normalized"):
                ours.add_tokens(word)
            continue
        assert ours.add_tokens(word) == theirs.add_tokens(word) == 1
    assert counts["Matcher"] == 0 and counts["normalized"] <= 3 * len(words)
    text = " ".join(words[::7]) + " " + "".join(words[:40:3]) + " plain text"
    assert_same(ours, theirs, [text])
    assert counts["Matcher"] == 2  # as typed and after normalization: built once, for the first text
