"""The tokenizer call at its edges, against transformers' own tokenizer on the same vocabulary:
a max_length that holds the special tokens alone (for a pair too, with ``only_first`` /
``only_second``), ``only_second`` without a second text, ``return_overflowing_tokens`` without truncation,
``return_length``, a batch of (text, pair) tuples, ``decode`` / ``batch_decode`` with
``clean_up_tokenization_spaces``, ``decode`` of rows of ids, ``return_tensors="np"`` without padding,
``BatchEncoding.to`` and ``.data``, and arguments the call does not take (named as the tokenizer's,
not an internal parser's). Ids are compared exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minibert import BertTokenizer

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def both(minilm_dir):
    return BertTokenizer.from_pretrained(minilm_dir), transformers.AutoTokenizer.from_pretrained(str(minilm_dir))


def _outcome(tokenizer, *args, **kwargs):
    try:
        return {key: value.tolist() if hasattr(value, "tolist") else value  # tensors compared as lists
                for key, value in tokenizer(*args, **kwargs).items()}  # fmt: skip
    except Exception as error:  # noqa: BLE001 — the outcome compared is "it raised"
        return type(error).__name__


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("hello world",), dict(truncation=True, max_length=2)),  # [CLS] [SEP]: room for no piece, and no error
        (("hello world", "foo bar"), dict(truncation=True, max_length=3)),
        # no room at all: tokenizers empties both texts whatever the strategy ([CLS] [SEP] [SEP])
        (("hello", "x"), dict(truncation="only_second", max_length=3, return_offsets_mapping=True)),
        (("x", "hello world"), dict(truncation="only_first", max_length=3)),
        (("", "x"), dict(truncation="only_first", max_length=3)),
        ((["hello world", "a"], ["x", "b c"]), dict(truncation="only_second", max_length=3, padding="max_length")),
        (("hello world",), dict(truncation="only_second", max_length=2)),  # no second text, yet no error
        (("a b",), dict(truncation="only_second", max_length=5)),  # no cut needed: no error in either
        ((["a b", "c"],), dict(return_length=True, padding=True)),
        (("a b",), dict(return_length=True, padding="max_length", max_length=8)),
        (("a b c d e f",), dict(return_length=True, truncation=True, max_length=4, return_overflowing_tokens=True,
                                stride=1)),
        (([("a", "b"), ("c d", "e")],), {}),  # a batch of pairs, as tuples
        (([["a", "b"], ["c d", "e"]],), {}),  # ... or as lists of two texts
        (([("a", "b c d e"), ("c d", "e")],), dict(padding=True, truncation="only_second", max_length=6)),
        # an empty text_pair: one input drops it ([CLS] a [SEP]), a batch keeps its [SEP]
        (("a", ""), {}),
        (("", ""), {}),
        ((), dict(text="a", text_pair="", return_offsets_mapping=True, return_special_tokens_mask=True)),
        (("a", ""), dict(return_tensors="pt")),
        (("a", ""), dict(return_tensors="np", padding="max_length", max_length=6)),
        (("a", []), {}),
        ((["a", "b"], []), dict(is_split_into_words=True)),
        ((["a", "b"], ["", "c"]), {}),
        ((["a"], [""]), dict(return_tensors="pt")),
        (([("a", ""), ("b", "c")],), {}),
        # return_overflowing_tokens without truncation: every row whole, overflow_to_sample_mapping its index
        ((["a b", "c"],), dict(return_overflowing_tokens=True)),
        ((["a b c", "c"],), dict(return_overflowing_tokens=True, truncation=False, padding=True)),
        (("a b c d e f",), dict(return_overflowing_tokens=True, truncation="do_not_truncate", max_length=3, stride=1)),
        (("a b", "c d"), dict(return_overflowing_tokens=True, truncation=False, return_tensors="pt")),
        ((["a b", "c"], ["d", "e f"]), dict(return_overflowing_tokens=True, padding="max_length", max_length=9,
                                            return_offsets_mapping=True, return_special_tokens_mask=True)),
    ],
)
def test_the_same_ids_as_transformers(both, args, kwargs):
    ours, theirs = both
    assert _outcome(ours, *args, **kwargs) == _outcome(theirs, *args, **kwargs)


def test_encode_of_an_empty_text_pair(both):
    ours, theirs = both
    assert ours.encode("a", "") == theirs.encode("a", "") == ours.encode("a")


def test_return_length_as_tensors(both):
    ours, theirs = both
    arguments = dict(return_length=True, padding=True, return_tensors="pt")
    assert torch.equal(ours(["a b", "c"], **arguments)["length"], theirs(["a b", "c"], **arguments)["length"])


def test_only_second_without_a_second_text_is_refused_when_it_must_cut(both):
    ours, theirs = both
    with pytest.raises(Exception, match="Second sequence not provided"):
        theirs("the quick brown fox jumps", truncation="only_second", max_length=5)
    with pytest.raises(ValueError, match="no second text was given"):  # it used to cut the first text, silently
        ours("the quick brown fox jumps", truncation="only_second", max_length=5)
    with pytest.raises(Exception, match="Second sequence not provided"):  # an empty one is none, in one input
        theirs("the quick brown fox jumps", "", truncation="only_second", max_length=5)
    with pytest.raises(ValueError, match="no second text was given"):
        ours("the quick brown fox jumps", "", truncation="only_second", max_length=5)


def test_too_small_a_max_length_says_what_is_true(both):
    ours, _ = both
    with pytest.raises(ValueError, match="too small to hold even the special tokens"):
        ours("hello world", truncation=True, max_length=1)
    with pytest.raises(ValueError, match="max_length=2 leaves no room for text beside the 2 special tokens"):
        ours("hello world", truncation=True, max_length=2, return_overflowing_tokens=True)


def test_arguments_the_call_does_not_take_are_named_as_the_tokenizers(both):
    ours, _ = both
    with pytest.raises(TypeError, match=r"^tokenizer\(\) got an unexpected keyword argument 'return_lenght'$"):
        ours("hi", return_lenght=True)
    with pytest.raises(TypeError, match="does not take split_special_tokens="):
        ours("hi", split_special_tokens=True)
    assert ours("a [MASK]", split_special_tokens=False)["input_ids"] == ours("a [MASK]")["input_ids"]
    with pytest.raises(TypeError, match="item 1 is a int"):
        ours(["a", 3])


@pytest.mark.parametrize("clean_up", [None, True, False])
@pytest.mark.parametrize("skip_special_tokens", [False, True])
def test_decode_and_batch_decode(both, clean_up, skip_special_tokens):
    ours, theirs = both
    texts = ["It's a dog, isn't it? I'm sure! We've seen they're here.", "He said 'hi' . ok", "héllo 日本語 ##x"]
    keywords = {} if clean_up is None else {"clean_up_tokenization_spaces": clean_up}
    ids = theirs(texts, padding=True, return_tensors="pt")["input_ids"]
    for row in ids:
        assert ours.decode(row, skip_special_tokens, **keywords) == theirs.decode(row, skip_special_tokens, **keywords)
    assert ours.batch_decode(ids, skip_special_tokens=skip_special_tokens, **keywords) == theirs.batch_decode(
        ids, skip_special_tokens=skip_special_tokens, **keywords
    )
    assert ours.decode(7592) == theirs.decode(7592) == "hello"  # one id


def test_clean_up_setting_is_read_and_saved(both, tmp_path):
    """tokenizer_config.json's clean_up_tokenization_spaces is decode's default, both ways."""
    ours, theirs = both
    theirs_cleaning = transformers.AutoTokenizer.from_pretrained(theirs.name_or_path, clean_up_tokenization_spaces=True)
    theirs_cleaning.save_pretrained(tmp_path / "theirs")
    loaded = BertTokenizer.from_pretrained(tmp_path / "theirs")
    ids = theirs("It's a dog , isn't it ?")["input_ids"]
    assert loaded.clean_up_tokenization_spaces is True and loaded.decode(ids) == theirs_cleaning.decode(ids)
    loaded.save_pretrained(tmp_path / "ours")
    assert transformers.AutoTokenizer.from_pretrained(str(tmp_path / "ours")).clean_up_tokenization_spaces is True


def test_batch_encoding_to_a_device(both):
    ours, _ = both
    encoding = ours(["a b", "c"], padding=True, return_tensors="pt")
    moved = encoding.to("meta")  # another device than the CPU, on any machine
    assert moved is encoding and all(value.device.type == "meta" for value in moved.values())
    assert ours("a b").to("meta")["input_ids"] == ours("a b")["input_ids"]  # lists stay lists
    with pytest.raises(AttributeError, match="no attribute or key 'pixel_values'; its keys are input_ids"):
        _ = encoding.pixel_values


@pytest.mark.parametrize(
    "ids",
    [
        [[101, 7592, 102]],
        [[101, 7592, 102], [101, 102]],
        [[101]],
        [[]],
        [],
        101,
        (101, 7592),
        torch.tensor([[101, 7592, 102]]),
        np.array([[101, 7592, 102], [101, 2088, 102]]),
    ],
    ids=repr,
)
@pytest.mark.parametrize("skip_special_tokens", [False, True])
def test_decode_of_rows_gives_a_list_as_transformers_5(both, ids, skip_special_tokens):
    """transformers 5's decode: rows of ids (a list of lists, a 2-D tensor or array) give one text
    per row, as batch_decode; one row or one id, a text."""
    ours, theirs = both
    mine, reference = (tokenizer.decode(ids, skip_special_tokens=skip_special_tokens) for tokenizer in both)
    assert mine == reference and type(mine) is type(reference)
    for nested in ([[[101]]], [[101, [7592]]]):  # deeper: a TypeError in both
        with pytest.raises(TypeError):
            theirs.decode(nested)
        with pytest.raises(TypeError):
            ours.decode(nested)


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((["Short one.", "A much longer text here"],), {}),
        ((["Short one.", "A much longer text here"], ["x", "y z"]), {}),
        (
            (["Short one.", "A much longer text"],),
            dict(return_offsets_mapping=True, return_special_tokens_mask=True, return_length=True),
        ),
        ((["a b c d e f g h", "x"],), dict(truncation=True, max_length=6, return_overflowing_tokens=True, stride=1)),
        ((["Short one.", "Short two."],), {}),  # equal lengths: (B, T) int64, as ever
    ],
)
def test_numpy_rows_of_different_lengths_as_transformers(both, args, kwargs):
    """``return_tensors="np"`` without padding: transformers gives each column as a (B,) object array
    of the rows' own int64 arrays (ragged), not an error; the same here, array by array."""
    ours, theirs = both
    mine, reference = ours(*args, return_tensors="np", **kwargs), theirs(*args, return_tensors="np", **kwargs)
    assert list(mine) == list(reference)
    for key in reference:
        a, b = mine[key], reference[key]
        assert (type(a), a.dtype, a.shape) == (type(b), b.dtype, b.shape), key
        for row_a, row_b in zip(a, b) if a.dtype == object else [(a, b)]:
            assert (row_a.dtype, row_a.shape) == (row_b.dtype, row_b.shape) and np.array_equal(row_a, row_b), key
    with pytest.raises(ValueError, match="different lengths; pass padding=True"):  # a tensor has one length
        ours(["Short one.", "A much longer text here"], return_tensors="pt")


def test_batch_encoding_data_is_its_dict(both):
    """transformers' BatchEncoding is a UserDict: ``.data`` is the dict of its keys."""
    ours, theirs = both
    encoding = ours(["a b", "c"], padding=True)
    assert encoding.data == theirs(["a b", "c"], padding=True).data
    encoding.data["labels"] = [0, 1]
    assert encoding["labels"] == [0, 1]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_batch_encoding_to_a_dtype_keeps_the_ids(both, dtype, caplog):
    """``inputs.to(model.dtype)``: transformers logs and keeps the ids as int64; a cast to float16 would
    turn 2829 ("brown") into 2828, and 14523 into 14520."""
    ours, theirs = both
    text = "the quick brown fox jumps over 123 dogs"
    expected = theirs(text, return_tensors="pt").to(dtype)
    with caplog.at_level("WARNING", logger="minibert"):
        moved = ours(text, return_tensors="pt").to(dtype)
    assert all(moved[key].dtype == expected[key].dtype == torch.int64 for key in expected)
    assert all(torch.equal(moved[key], expected[key]) for key in expected)
    assert f"Attempting to cast a BatchEncoding to type {dtype}. This is not supported." in caplog.text


def test_batch_encoding_to_takes_non_blocking_and_a_device_index(both):
    ours, theirs = both
    expected = theirs(["a b", "c"], padding=True, return_tensors="pt").to(torch.device("cpu"), non_blocking=True)
    moved = ours(["a b", "c"], padding=True, return_tensors="pt").to("cpu", non_blocking=True)
    assert all(torch.equal(moved[key], expected[key]) for key in expected)
    assert ours("a b", return_tensors="pt").to(torch.device("meta"))["input_ids"].device.type == "meta"


@pytest.mark.parametrize("device", ["cpu", " cpu", "cpu:0", torch.device("cpu"), torch.device("cpu", 0), "meta",
                                    torch.device("meta")])  # fmt: skip
def test_batch_encoding_to_moves_where_transformers_moves(both, device):
    """.to() now reads the device as minibert's entry points do (resolve_device): where transformers'
    .to works, the tensors land on the same device with the same ids. (" cpu": torch's own name
    refuses the space, transformers' too; minibert strips it, as for every device= it takes.)"""
    ours, theirs = both
    moved = ours(["a b", "c"], padding=True, return_tensors="pt").to(device)
    expected = theirs(["a b", "c"], padding=True, return_tensors="pt").to(device.strip() if isinstance(
        device, str) else device)  # fmt: skip
    for key in expected:
        assert moved[key].device == expected[key].device and moved[key].dtype == expected[key].dtype, key
        if moved[key].device.type == "cpu":
            assert torch.equal(moved[key], expected[key]), key


@pytest.mark.parametrize("device", ["cuda", "cuda:1", 0, torch.device("cuda")])
def test_batch_encoding_to_a_missing_gpu_is_minibert_device_error(both, device, monkeypatch):
    """docs/gpu.md: a GPU that is not there is minibert's DeviceError, naming what is missing; .to()
    raised torch's "AssertionError: Torch not compiled with CUDA enabled" ("Cannot access accelerator
    device when none is available" for 0). -1 is the CPU here, as on every entry point (torch
    refuses a negative index, transformers with it)."""
    from minibert.errors import DeviceError

    ours, _ = both
    encoding = ours("a b", return_tensors="pt")
    monkeypatch.setattr(torch.version, "cuda", None)  # (so on a GPU machine too)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match="is built without CUDA"):
        encoding.to(device)
    assert encoding["input_ids"].device.type == "cpu"
    assert encoding.to(-1)["input_ids"].device == torch.device("cpu")


def _refused(tokenizer, *args, **kwargs) -> bool | list:
    """The ids, or True where the call refuses: a ValueError, or ``tokenizers``' PanicException (a
    BaseException: its ``Encoding.truncate`` asserts ``stride < max_len`` when it cuts a text)."""
    try:
        return tokenizer(*args, **kwargs)["input_ids"]
    except BaseException as error:  # noqa: BLE001
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        return True


STRIDE_TEXTS = [("hello",), ("hello world " * 6,), ("hello", "hi"), ("hello world " * 6, "hi"),
                ("hi", "hello world " * 6), ("hello world " * 6, "hello world " * 4)]  # fmt: skip


@pytest.mark.parametrize("args", STRIDE_TEXTS, ids=["short", "long", "short pair", "long first", "long second",
                                                     "both long"])  # fmt: skip
def test_a_stride_is_refused_exactly_where_transformers_refuses_it(both, args):
    """minibert refused a stride >= the room (max_length minus the special tokens) only with
    return_overflowing_tokens, and then for any text; transformers (tokenizers 0.23) refuses a stride
    over max_length - 2 with any text and any flags (even for a pair, even without special tokens),
    and a stride >= what a text that must be cut keeps (a panic), flags or not. Every combination
    here of stride, max_length, strategy and flags gives the same ids or a refusal in both, but for
    the cases docs/tokenizer.md lists: a max_length that leaves no room for windows, or holds not
    even the special tokens, is refused where transformers returns rows longer than max_length or
    does not truncate."""
    ours, theirs = both
    compared = 0
    for max_length in (2, 3, 4, 5, 8):
        for stride in range(8):
            for strategy in (True, "only_first", "only_second"):
                for overflow in (False, True):
                    for special in (True, False):
                        kwargs = dict(truncation=strategy, max_length=max_length, stride=stride,
                                      return_overflowing_tokens=overflow, add_special_tokens=special)  # fmt: skip
                        framing = (3 if len(args) == 2 else 2) if special else 0
                        if max_length - framing < (1 if overflow else 0):
                            continue  # documented: no room for windows, or not even for the special tokens
                        if overflow and len(args) == 2 and strategy is True and max_length - framing == 1:
                            continue  # documented: a pair's one piece of room leaves one text no room
                        expected = _refused(theirs, *args, **kwargs)
                        assert _refused(ours, *args, **kwargs) == expected, kwargs
                        compared += 1
    assert compared >= 400


@pytest.mark.parametrize("side_at_the_call", ["right", "left"])
def test_word_ids_computed_later_are_the_calls_own_as_in_transformers(both, side_at_the_call):
    """Without offsets, word_ids() & co. are computed on first use; they read the tokenizer's
    truncation_side at that moment: a side changed since gave the other end's words ("one two three
    four" aligned as words 6 to 9, chars 28-33). They are the call's, as transformers computes them."""
    text, outcomes = "one two three four five six seven eight nine ten", []
    for tokenizer in both:
        tokenizer.truncation_side = side_at_the_call
        try:
            encodings = [tokenizer(text, truncation=True, max_length=6),
                         tokenizer([text, "a b"], ["c", "d"], truncation="only_first", max_length=9, padding=True)]
            tokenizer.truncation_side = "left" if side_at_the_call == "right" else "right"  # e.g. for the next batch
            outcomes.append([(encoding.word_ids(0), encoding.sequence_ids(0), encoding.token_to_chars(0, 2),
                              encoding.char_to_token(0, 45)) for encoding in encodings])  # fmt: skip
        finally:
            tokenizer.truncation_side = "right"
    ours, theirs = outcomes
    assert ours == theirs


def test_word_ids_after_tokens_were_added_are_refused_not_misaligned(minilm_dir):
    """After ``add_tokens``, the alignment computed on first use was that of the new tokenization
    (5 word ids for 6 tokens); now it is a ValueError, and an encoding made with offsets (aligned
    with the call) gives transformers' answer."""
    ours = BertTokenizer.from_pretrained(minilm_dir)
    theirs = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    lazy, eager, reference = ours("hello newword world"), ours("hello newword world", return_offsets_mapping=True), \
        theirs("hello newword world")  # fmt: skip
    ours.add_tokens(["newword"])
    theirs.add_tokens(["newword"])
    with pytest.raises(ValueError, match=r"the tokenizer changed since the call .* return_offsets_mapping=True"):
        lazy.word_ids()
    assert eager.word_ids() == reference.word_ids() == [None, 0, 1, 1, 2, None]
    after = ours("hello newword world")  # a call made after the change aligns as transformers
    assert after.word_ids() == theirs("hello newword world").word_ids()


def test_padding_none_is_no_padding_and_max_length_alone_still_truncates(both):
    """``padding=None`` was read as "no padding" but defeated transformers' rule that ``max_length``
    alone truncates: the whole text came back. transformers refuses None; minibert reads it as False."""
    ours, theirs = both
    for text in ("a b c d e f g h", ["a b c d e f g h", "x"]):
        expected = theirs(text, padding=False, max_length=5)["input_ids"]
        assert ours(text, padding=None, max_length=5)["input_ids"] == expected
        assert ours(text, padding="do_not_pad", max_length=5)["input_ids"] == \
            theirs(text, padding="do_not_pad", max_length=5)["input_ids"]  # fmt: skip  (transformers: no cut)


@pytest.mark.parametrize("count", [np.int64(5), np.int32(5), torch.tensor(5), np.array(5)], ids=repr)
def test_integer_scalars_are_counts_as_in_transformers(both, count):
    """``max_length=np.max(lengths)`` (or a 0-d tensor) was "max_length must be an int >= 1"; transformers
    takes any integer, and so do the call and ``pad``, which compute on Python ints."""
    ours, theirs = both
    texts = ["a b c d e f g h", "x"]
    for arguments in (dict(truncation=True, max_length=count), dict(padding=True, pad_to_multiple_of=count - 1),
                      dict(truncation=True, max_length=count + 2, stride=count - 3, return_overflowing_tokens=True)):
        assert _outcome(ours, texts, **arguments) == _outcome(theirs, texts, **arguments), arguments
    rows = [{"input_ids": [101, 102]}]
    padded = ours.pad(rows, padding="max_length", max_length=count)["input_ids"]
    assert padded == theirs.pad(rows, padding="max_length", max_length=count)["input_ids"] == [[101, 102, 0, 0, 0]]
    for refused in (np.float64(5), torch.tensor(5.0), np.bool_(True), torch.tensor(True), "5"):
        with pytest.raises(ValueError, match="max_length must be an int >= 1"):
            ours(texts, truncation=True, max_length=refused)
