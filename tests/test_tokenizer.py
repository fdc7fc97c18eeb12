"""minibert.BertTokenizer against Hugging Face `tokenizers` (what AutoTokenizer gives for
bert-base-uncased), Google's published test cases, and the ids published in BERT tutorials."""

from __future__ import annotations

import functools
import random
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpus
from minibert import BertTokenizer
from minibert.errors import CheckpointError
from minibert.tokenizer import BasicTokenizer, WordPieceTokenizer

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def uncased(vocab_file):
    return BertTokenizer(vocab_file)


@pytest.fixture(scope="module")
def cased(vocab_file):
    return BertTokenizer(vocab_file, do_lower_case=False)


@pytest.fixture(scope="module")
def reference(vocab_file):
    return {
        True: transformers.BertTokenizerFast(str(vocab_file), do_lower_case=True),
        False: transformers.BertTokenizerFast(str(vocab_file), do_lower_case=False),
    }


def _first_mismatch(texts, expected, actual):
    for text, want, got in zip(texts, expected, actual):
        if want != got:
            count = sum(1 for w, g in zip(expected, actual) if w != g)
            return f"{count} mismatches; first: {text[:120]!r}\n  reference {want[:30]}\n  minibert  {got[:30]}"
    return None


# ----------------------------------------------------------------------------- published ids


def test_tutorial_ids(uncased):
    assert uncased("I love Paris")["input_ids"] == [101, 1045, 2293, 3000, 102]
    assert uncased("She is a MachineLearning Engineer and works in California")["input_ids"] == [
        101, 2016, 2003, 1037, 3698, 19738, 6826, 2075, 3992, 1998, 2573, 1999, 2662, 102,
    ]  # fmt: skip
    pair = uncased("I was thirsty!", "I drank water :D")
    assert pair["input_ids"] == [101, 1045, 2001, 24907, 999, 102, 1045, 10749, 2300, 1024, 1040, 102]
    assert pair["token_type_ids"] == [0] * 6 + [1] * 6
    assert pair["attention_mask"] == [1] * 12


def test_special_token_ids(uncased):
    assert (uncased.pad_token_id, uncased.unk_token_id, uncased.cls_token_id) == (0, 100, 101)
    assert (uncased.sep_token_id, uncased.mask_token_id, uncased.vocab_size) == (102, 103, 30522)


# ----------------------------------------------------------------------------- google-research/bert's cases

TOY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ",",
             "low", "lowest"]  # fmt: skip


@pytest.fixture
def toy(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(token + "\n" for token in TOY_VOCAB), encoding="utf-8")
    return BertTokenizer(path)


def test_google_wordpiece_cases(toy):
    assert toy.tokenize("") == []
    assert toy.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert toy.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
    assert toy.tokenize("UNwant\u00e9d,running") == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert toy.convert_tokens_to_ids(["un", "##want", "##ed", "runn", "##ing"]) == [9, 6, 7, 10, 11]


def test_google_basic_tokenizer_cases():
    assert BasicTokenizer().tokenize("ah\u535a\u63a8zz") == ["ah", "\u535a", "\u63a8", "zz"]
    assert BasicTokenizer().tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert BasicTokenizer().tokenize("H\u00e9llo") == ["hello"]
    assert BasicTokenizer(do_lower_case=False).tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
        "HeLLo", "!", "how", "Are", "yoU", "?",
    ]  # fmt: skip
    assert BasicTokenizer(do_lower_case=True, strip_accents=False).tokenize("H\u00e9llo") == ["h\u00e9llo"]
    assert BasicTokenizer(do_lower_case=False, strip_accents=True).tokenize("H\u00e9llo") == ["Hello"]


def test_wordpiece_limits():
    vocab = {"[UNK]": 0, "a": 1, "##a": 2}
    wordpiece = WordPieceTokenizer(vocab, unk_id=0)
    assert wordpiece.pieces("a" * 100) == [1] + [2] * 99
    assert wordpiece.pieces("a" * 101) == [0]  # longer than 100 characters
    # such a word is no cache key: 3,000 distinct 50 kB words held 143 MB of keys (3 MB a request in serve)
    before = len(wordpiece._cache)
    assert all(wordpiece.pieces(f"{i:06d}" + "a" * 5_000) == [0] for i in range(100))
    assert len(wordpiece._cache) == before


def test_special_tokens_are_never_split(uncased):
    assert uncased.tokenize("Paris is the [MASK] of France.[SEP]x") == [
        "paris", "is", "the", "[MASK]", "of", "france", ".", "[SEP]", "x",
    ]  # fmt: skip
    assert uncased.tokenize("[mask]") == ["[", "mask", "]"]  # special tokens match case-sensitively


def test_show_work(uncased):
    steps = uncased.encode_and_show_work("Héllo,  WORLD 中文!")
    assert steps["cleaned"] == "Héllo,  WORLD  中  文 !"
    assert steps["normalized"] == "hello,  world  中  文 !"
    assert steps["basic_tokens"] == ["hello", ",", "world", "中", "文", "!"]
    assert steps["tokens"] == ["[CLS]", "hello", ",", "world", "中", "文", "!", "[SEP]"]
    assert steps["input_ids"] == uncased("Héllo,  WORLD 中文!")["input_ids"]


@pytest.mark.parametrize(
    ("setting", "text", "normalized", "words"),
    [
        ("basic", "Héllo, unaffable!", "hello, unaffable!", ["hello", ",", "unaffable", "!"]),
        ("do_basic_tokenize=False", "Héllo WORLD, hi", "Héllo WORLD, hi", ["Héllo", "WORLD,", "hi"]),
        ("special token added", "A[E1]B", "a[E1]b", ["a", "[E1]", "b"]),
        ("token added", "Hi COVID-19!", "hi covid-19!", ["hi", "covid-19", "!"]),
    ],
    ids=["basic", "do_basic_tokenize=False", "special token added", "token added"],
)
def test_show_work_reports_the_steps_the_tokenizer_took(vocab_file, setting, text, normalized, words):
    """``normalized`` is the text as stage 1 normalized it, not as it might have: nothing is
    lowercased or accent-stripped with ``do_basic_tokenize=False`` (those words become [UNK]), a
    special token stays as typed, an ordinary added token is matched normalized; the words are
    that text split. ``word_pieces`` are the pieces of each word (bert-base-uncased's vocabulary)."""
    tokenizer = BertTokenizer(vocab_file, do_basic_tokenize=setting != "do_basic_tokenize=False")
    if setting == "special token added":
        tokenizer.add_tokens(["[E1]"], special_tokens=True)
    if setting == "token added":
        tokenizer.add_tokens(["COVID-19"])
    steps = tokenizer.encode_and_show_work(text)
    assert (steps["normalized"], steps["basic_tokens"]) == (normalized, words)
    assert "".join(steps["basic_tokens"]) == "".join(steps["normalized"].split())
    assert steps["input_ids"] == tokenizer(text)["input_ids"]
    if setting == "basic":  # the docstring's example
        assert steps["word_pieces"] == [["hello"], [","], ["una", "##ffa", "##ble"], ["!"]]


# ----------------------------------------------------------------------------- corpus parity


# The corpus sweeps: every 20th text in the default run, all of them in the full run (-m slow;
# single texts: every distinct word of all of them).
SAMPLES = [pytest.param(20, id="every-20th"), pytest.param(1, id="all", marks=pytest.mark.slow)]


def _every_distinct_word(texts: list[str]) -> list[str]:
    """Every distinct space-separated word of ``texts``, 64 to a text: the words of the whole
    corpus in 5.7 times fewer characters. BERT never looks across a space (the basic tokenizer's
    steps are per character or per word, WordPiece per word), so a word's ids do not depend on its
    neighbours; the every-20th run keeps whole texts, each word among its real neighbours."""
    words = list(dict.fromkeys(word for text in texts for word in text.split(" ")))
    return [" ".join(words[start : start + 64]) for start in range(0, len(words), 64)]


@pytest.mark.parametrize("step", SAMPLES)
@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_real_corpus_single_texts(lowercase, step, uncased, cased, reference):
    texts = corpus.all_texts()
    scripts = {  # code point ranges of each script
        "latin+accents": (0x00C0, 0x024F),
        "cyrillic": (0x0400, 0x04FF),
        "greek": (0x0370, 0x03FF),
        "cjk": (0x4E00, 0x9FFF),
        "emoji": (0x1F300, 0x1FAFF),
    }
    for script, (low, high) in scripts.items():
        count = sum(1 for text in texts if any(low <= ord(char) <= high for char in text))
        assert count >= 800, f"the corpus has only {count} texts in {script}"
    assert len(texts) >= 20_000
    texts = texts[::step] if step > 1 else _every_distinct_word(texts)
    mine = uncased if lowercase else cased
    expected = reference[lowercase](texts)
    actual = mine(texts)
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        problem = _first_mismatch(texts, expected[key], actual[key])
        assert problem is None, f"{key}: {problem}"


@pytest.mark.parametrize("step", SAMPLES)
@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_real_corpus_pairs_with_truncation(lowercase, step, uncased, cased, reference):
    texts = corpus.all_texts()
    rng = random.Random(1234)
    firsts = rng.sample(texts, 3000)[::step]
    seconds = rng.sample(texts, 3000)[::step]
    mine = uncased if lowercase else cased
    for strategy in ("longest_first", "only_first", "only_second"):
        for max_length in (16, 64, 256):
            kwargs = dict(truncation=strategy, max_length=max_length)
            # Keep pairs that the reference can truncate with this strategy (it raises otherwise).
            pairs = []
            for first, second in zip(firsts, seconds):
                try:
                    reference[lowercase]([first], [second], **kwargs)
                except Exception:  # noqa: BLE001
                    with pytest.raises(ValueError, match="cannot truncate only"):
                        mine([first], [second], **kwargs)
                    continue
                pairs.append((first, second))
            assert len(pairs) > 500 // step
            a, b = [p[0] for p in pairs], [p[1] for p in pairs]
            expected = reference[lowercase](a, b, padding=True, **kwargs)
            actual = mine(a, b, padding=True, **kwargs)
            for key in ("input_ids", "token_type_ids", "attention_mask"):
                problem = _first_mismatch(a, expected[key], actual[key])
                assert problem is None, f"{strategy} max_length={max_length} {key}: {problem}"


@pytest.mark.parametrize("max_length,stride", [(16, 0), (32, 8), (128, 64)])
def test_windows_with_stride_match_reference(max_length, stride, uncased, reference):
    texts = [text for text in corpus.docstrings() if len(text) > 400][:300]
    kwargs = dict(truncation=True, max_length=max_length, stride=stride, return_overflowing_tokens=True, padding=True)
    expected = reference[True](texts, **kwargs)
    actual = uncased(texts, **kwargs)
    assert actual["overflow_to_sample_mapping"] == expected["overflow_to_sample_mapping"]
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert actual[key] == expected[key], key
    # question + windows over a long context, the extractive-QA layout
    questions = ["what does it return?"] * len(texts)
    kwargs["truncation"] = "only_second"
    expected = reference[True](questions, texts, **kwargs)
    actual = uncased(questions, texts, **kwargs)
    assert actual["overflow_to_sample_mapping"] == expected["overflow_to_sample_mapping"]
    assert actual["input_ids"] == expected["input_ids"]
    assert actual["token_type_ids"] == expected["token_type_ids"]


def test_padding_and_tensors_match_reference(uncased, reference):
    texts = list(corpus.translations()[:50])
    for padding in (True, "longest", "max_length"):
        for kind in ("pt", "np"):
            expected = reference[True](texts, padding=padding, truncation=True, max_length=40, return_tensors=kind)
            actual = uncased(texts, padding=padding, truncation=True, max_length=40, return_tensors=kind)
            for key in ("input_ids", "token_type_ids", "attention_mask"):
                assert actual[key].shape == expected[key].shape
                assert (actual[key] == expected[key]).all(), f"{padding} {kind} {key}"
                assert str(actual[key].dtype).endswith("int64")
    assert uncased("hi", return_tensors="pt")["input_ids"].shape == (1, 3)
    with pytest.raises(ValueError, match="padding=True"):
        uncased(["a", "a b c"], return_tensors="pt")


def test_decode_matches_reference(uncased, reference):
    texts = list(corpus.translations()[::50]) + ["Hello, world! Is it? Yes. don't"]
    for text in texts:
        ids = reference[True](text)["input_ids"]
        assert uncased.decode(ids) == reference[True].decode(ids), text
        assert uncased.decode(ids, skip_special_tokens=True) == reference[True].decode(ids, skip_special_tokens=True)


# ----------------------------------------------------------------------------- all of Unicode


@pytest.fixture(scope="module")
def disagrees(uncased, reference):
    """Whether minibert and `tokenizers` treat one character differently (every character, alone
    and between letters, is compared in test_tokenizer_unicode_tables.py; here, one character at a
    time, as hypothesis draws them)."""

    @functools.cache
    def check(char: str) -> bool:
        text = f"x{char}y {char}"
        return uncased(text)["input_ids"] != reference[True](text)["input_ids"]

    return check


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=80), st.text(max_size=40))
def test_hypothesis_unicode(disagrees, uncased, reference, text, pair):
    known = any(disagrees(char) for char in text + pair)
    for lowercase in (True,):
        single = reference[lowercase]([text])["input_ids"][0]
        both = reference[lowercase]([text], [pair], truncation="longest_first", max_length=32)
        if known:
            continue
        assert uncased(text)["input_ids"] == single
        mine = uncased([text], [pair], truncation="longest_first", max_length=32)
        assert mine["input_ids"] == both["input_ids"] and mine["token_type_ids"] == both["token_type_ids"]


def test_documented_differences_from_google(uncased):
    # Lone surrogates (which `tokenizers` refuses) are dropped like control characters.
    assert uncased.tokenize("a\ud800b") == ["ab"]
    # Σ lowercases to σ everywhere, as in `tokenizers` (Python's str.lower would give final ς).
    assert uncased.basic.normalize("ΟΔΟΣ") == "οδοσ"
    # An empty second text: one input drops it, as transformers' single-input path does; a batch keeps its [SEP]
    # (tests/test_tokenizer_call_edges.py compares both with transformers).
    assert uncased("hi", "")["input_ids"] == [101, 7632, 102]
    assert uncased(["hi"], [""])["input_ids"] == [[101, 7632, 102, 102]]


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "text",
    ["", " ", "\t\n\r ", "\x00\x01\x7f", "\ufffd", "\ud800\udfff", "\ue000\U000f0000", "\u0378", "a" * 200_000,
     "!" * 100_000, "Ünïcödé Кириллица Ελληνικά 中文 한국어 😀👍🏽", "[CLS][SEP][PAD]"],
    ids=["empty", "space", "whitespace", "controls", "fffd", "surrogates", "private-use", "unassigned",
         "long-word", "punctuation-run", "mixed-scripts", "specials"],
)  # fmt: skip
def test_any_string_tokenizes(uncased, text):
    ids = uncased(text)["input_ids"]
    assert ids[0] == uncased.cls_token_id and ids[-1] == uncased.sep_token_id
    if text == "a" * 200_000:
        assert ids == [101, 100, 102]


def test_megabyte_text_is_fast_enough(uncased):
    text = " ".join(corpus.docstrings())[:1_000_000]
    ids = uncased(text)["input_ids"]
    assert len(ids) > 100_000  # (no timing here: speed lives in scripts/bench.py)


def test_bad_vocab_files(tmp_path):
    with pytest.raises(CheckpointError, match="vocabulary file not found: .*missing.txt"):
        BertTokenizer(tmp_path / "missing.txt")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CheckpointError, match="binary.txt is not UTF-8"):
        BertTokenizer(binary)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(CheckpointError, match="empty.txt is empty"):
        BertTokenizer(empty)
    no_specials = tmp_path / "words.txt"
    no_specials.write_text("hello\nworld\n")
    with pytest.raises(CheckpointError, match=r"lacks the special tokens .*\[UNK\]"):
        BertTokenizer(no_specials)


def test_bad_arguments(uncased):
    with pytest.raises(TypeError, match="text must be a str or a list of str"):
        uncased(42)
    with pytest.raises(ValueError, match="text has 2 items but text_pair has 1"):
        uncased(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="truncation must be"):
        uncased("a", truncation="sideways")
    with pytest.raises(ValueError, match="stride=9 is more than max_length=10 minus the 2 special tokens"):
        uncased("a b c", truncation=True, max_length=10, stride=9)  # any text, any flags, as transformers
    with pytest.raises(ValueError, match="stride=8 must be smaller than the room for this text"):
        uncased("a b c d e f g h i", truncation=True, max_length=10, stride=8)  # a text that must be cut
    with pytest.raises(ValueError, match="outside the vocabulary"):
        uncased.decode([10**6])


def test_from_pretrained_reads_tokenizer_config(minilm_dir, tmp_path):
    tok = BertTokenizer.from_pretrained(minilm_dir)
    assert tok.basic.do_lower_case and tok.model_max_length == 512
    (tmp_path / "vocab.txt").write_bytes((minilm_dir / "vocab.txt").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false, "model_max_length": 128}')
    tok = BertTokenizer.from_pretrained(tmp_path)
    assert not tok.basic.do_lower_case and tok.model_max_length == 128
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="malformed tokenizer config .*tokenizer_config.json"):
        BertTokenizer.from_pretrained(tmp_path)


def test_google_test_vocabulary_without_pad_and_mask(tmp_path):
    """google-research/bert tokenization_test.py, test_full_tokenizer: its vocabulary has no [PAD]
    and no [MASK]. It loads and tokenizes as there; only padding (and fill_mask) then raise."""
    vocab = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]
    path = tmp_path / "vocab.txt"
    path.write_text("".join(token + "\n" for token in vocab), encoding="utf-8")
    tokenizer = BertTokenizer(path)
    tokens = tokenizer.tokenize("UNwant\u00e9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
    assert tokenizer.pad_token_id is None and tokenizer.mask_token_id is None
    assert tokenizer(["want", "want"], padding=True)["input_ids"] == [[1, 3, 2], [1, 3, 2]]  # nothing to pad
    with pytest.raises(ValueError, match=r"cannot pad: the vocabulary vocab.txt has no \[PAD\] piece"):
        tokenizer(["want", "unwanted running"], padding=True)
    assert tokenizer.tokenize("[MASK] want") == ["[UNK]", "[UNK]", "[UNK]", "want"]  # not a special token here


# ----------------------------------------------------------------------------- one rule, two walks


def test_the_reorderable_characters_are_the_ones_unicode_says():
    """google.GOOGLE_REORDERABLE lists the characters whose order NFD's canonical reordering can
    change once nonspacing marks are stripped: spacing marks (not Mn) with a combining class, and
    what decomposes into them. Computed here from the running Python's Unicode database (Google's
    code asks it; tokenizers' own list is checked in tests/test_tokenizer_unicode_tables.py)."""
    import sys

    from minibert.tokenizer.google import GOOGLE_REORDERABLE as _REORDERABLE

    spacing = {c for c in map(chr, range(sys.maxunicode + 1)) if unicodedata.combining(c)
               and unicodedata.category(c) != "Mn"}  # fmt: skip
    expected = {c for c in map(chr, range(sys.maxunicode + 1))
                if any(d in spacing for d in unicodedata.normalize("NFD", c))}  # fmt: skip
    listed = {c for c in map(chr, range(sys.maxunicode + 1)) if _REORDERABLE.fullmatch(c)}
    assert listed == expected, sorted(hex(ord(c)) for c in listed ^ expected)


@pytest.mark.parametrize(
    "text",
    [
        "a\U0001d16d\U0001d165b",  # two spacing combining marks out of canonical order (226 before 216)
        "a\U0001d16d\u0301\U0001d165b x",  # a stripped accent between them
        "Ça\U0001d16d\u200d\U0001d165b, \U0001d15fé",  # a removed ZWJ between them; a note that decomposes
        "\u1b44\u1b34x \u302e\u302f",  # a virama and a nukta; Hangul tone marks
        "xy\u08d6\ua953 z",  # a virama (class 9) moves before a mark (230) that tokenizers keeps
        " \ua953\U0001e94a",  # the same in an [UNK] word
        "\u032f\ua953",  # ... before a mark it strips: the virama keeps the first place
        "x\u1e09\ua953\u0344",  # a virama moves into a decomposition's place (c, U+0327, U+0301)
    ],
)
@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_canonical_reordering_matches_tokenizers(text, lowercase, uncased, cased, reference):
    """NFD of the whole text (what `tokenizers` runs) can reorder marks of neighbouring characters;
    the per-character rule takes the exact path for such texts, in ids and in offsets alike (and in
    what derives from offsets: char_to_token)."""
    ours = uncased if lowercase else cased
    theirs = reference[lowercase](text, return_offsets_mapping=True)
    mine = ours(text, return_offsets_mapping=True)
    assert mine["input_ids"] == theirs["input_ids"]
    assert mine["offset_mapping"] == theirs["offset_mapping"]
    assert [mine.char_to_token(i) for i in range(len(text))] == [theirs.char_to_token(i) for i in range(len(text))]
    words = [word for word, _ in ours.basic.words_with_origins(text)]
    assert words == ours.basic.tokenize(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=60))
def test_tokenize_and_the_offsets_walk_are_one_rule(uncased, cased, text):
    """The words ``tokenize`` gives at C speed and the words the offsets walk gives, character by
    character, are the same on any text: both apply BasicTokenizer's one table."""
    for tokenizer in (uncased, cased):
        assert [word for word, _ in tokenizer.basic.words_with_origins(text)] == tokenizer.basic.tokenize(text)
        tracked = tokenizer(text, return_offsets_mapping=True)["input_ids"]
        assert tracked == tokenizer(text)["input_ids"]


def test_a_tokenizer_pickles_and_works_after(uncased):
    """DataLoader workers (spawn), datasets.map(num_proc=...) and Ray tasks pickle the tokenizer."""
    import pickle

    copy = pickle.loads(pickle.dumps(uncased))
    text = "Héllo, WORLD! 中文 unaffable"
    assert copy(text, return_offsets_mapping=True) == uncased(text, return_offsets_mapping=True)
    assert copy.basic.words_with_origins(text) == uncased.basic.words_with_origins(text)
    encoding = pickle.loads(pickle.dumps(uncased([text, "a pair"], ["of texts", "b"], padding=True)))
    assert encoding.word_ids(0) == uncased([text, "a pair"], ["of texts", "b"], padding=True).word_ids(0)
