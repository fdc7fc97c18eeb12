"""transformers 4's tokenizer calls (tokenizer/transformers4_calls.py) give transformers' numbers:
``encode_plus`` / ``batch_encode_plus`` with the tutorials' arguments equal transformers' own call
with those arguments in today's spelling (transformers 4's rules, as its
``_get_padding_truncation_strategies`` applies them: ``max_length`` alone truncates, longest first,
before ``pad_to_max_length=True`` becomes ``padding="max_length"``, or ``"longest"`` without a
``max_length``); and ``max_length`` alone truncates in today's call too, as in transformers."""

from __future__ import annotations

import re
import warnings

import pytest

import corpus
from minibert import BertTokenizer, InputTypeError

transformers = pytest.importorskip("transformers")

KEYS = ("input_ids", "token_type_ids", "attention_mask")


@pytest.fixture(scope="module")
def tokenizers(minilm_dir):
    return BertTokenizer.from_pretrained(minilm_dir), transformers.BertTokenizerFast.from_pretrained(str(minilm_dir))


@pytest.fixture(scope="module")
def texts():
    return [text for text in corpus.translations()[::400] if text.strip()][:60]


def _same(got, want, what: str) -> None:
    for key in KEYS:
        mine, theirs = got[key], want[key]
        mine, theirs = (mine.tolist(), theirs.tolist()) if hasattr(mine, "tolist") else (mine, theirs)
        assert mine == theirs, f"{what}: {key}"


# (the tutorial's arguments, the same in transformers 5's spelling)
ONE_TEXT = [
    ({"add_special_tokens": True, "max_length": 16, "pad_to_max_length": True, "return_attention_mask": True,
      "return_tensors": "pt"},
     {"max_length": 16, "padding": "max_length", "truncation": "longest_first", "return_tensors": "pt"}),  # McCormick
    ({"add_special_tokens": True, "max_length": 16, "padding": "max_length", "truncation": True,
      "return_attention_mask": True, "return_tensors": "pt"},
     {"max_length": 16, "padding": "max_length", "truncation": True, "return_tensors": "pt"}),  # ... on 4.57
    ({"max_length": 12}, {"max_length": 12, "truncation": "longest_first"}),
    ({"pad_to_max_length": True}, {"padding": "longest"}),
    ({"max_length": 40, "pad_to_max_length": True, "truncation": False}, {"max_length": 40, "padding": "max_length"}),
    ({}, {}),
]  # fmt: skip


@pytest.mark.parametrize(("older", "today"), ONE_TEXT)
def test_encode_plus_as_transformers(tokenizers, texts, older, today):
    ours, theirs = tokenizers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        for text in texts:
            _same(ours.encode_plus(text, **older), theirs(text, **today), f"{older} {text!r}")
        for first, second in zip(texts[::2], texts[1::2]):
            _same(ours.encode_plus(first, second, **older), theirs(first, second, **today), f"pair {older}")


@pytest.mark.parametrize(("older", "today"), ONE_TEXT)
def test_batch_encode_plus_as_transformers(tokenizers, texts, older, today):
    ours, theirs = tokenizers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        _same(ours.batch_encode_plus(texts, **older), theirs(texts, **today), f"batch {older}")
        pairs = list(zip(texts[::2], texts[1::2]))
        firsts, seconds = [a for a, _ in pairs], [b for _, b in pairs]
        _same(ours.batch_encode_plus(pairs, **older), theirs(firsts, seconds, **today), f"pairs {older}")


def test_pad_to_max_length_says_what_replaces_it_once(tokenizers):
    with pytest.warns(FutureWarning, match="pad_to_max_length=True is transformers 4's spelling of padding='max_len"):
        tokenizers[0].encode_plus("a text", max_length=8, pad_to_max_length=True)


@pytest.mark.parametrize("max_length", [5, 9, 16])
def test_max_length_alone_truncates_in_todays_call_as_in_transformers(tokenizers, texts, max_length):
    ours, theirs = tokenizers
    _same(ours(texts[:10], max_length=max_length), theirs(texts[:10], max_length=max_length), f"{max_length}")
    _same(ours(texts[0], texts[1], max_length=max_length), theirs(texts[0], texts[1], max_length=max_length), "pair")
    with warnings.catch_warnings():  # with padding=True, max_length alone does not truncate (transformers warns)
        warnings.simplefilter("ignore")
        want = theirs(texts[:10], max_length=max_length, padding=True)
    _same(ours(texts[:10], max_length=max_length, padding=True), want, "padding=True")


@pytest.mark.parametrize(
    ("call", "says"),
    [(lambda t: t.encode_plus(["a", "b"]), "encode_plus() takes one text"),
     (lambda t: t.batch_encode_plus("a text"), "batch_encode_plus() takes a list of texts"),
     (lambda t: t.batch_encode_plus([("a", "b"), "c"]), "all texts alone or all as"),
     (lambda t: t.batch_encode_plus([("a", "b", "c")]), "a (text, pair) tuple of two texts"),
     (lambda t: t.encode_plus("a", pad_to_max_length="yes"), "pad_to_max_length must be True or False")],
)  # fmt: skip
def test_wrong_inputs_are_named(tokenizers, call, says):
    with pytest.raises(InputTypeError, match=re.escape(says)):
        call(tokenizers[0])
