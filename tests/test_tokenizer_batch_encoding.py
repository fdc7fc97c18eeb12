"""``BatchEncoding`` beside transformers' on the same vocabulary: ``tokens(i)`` of every row of an unpadded
``return_tensors="np"`` batch (an array of rows), negative row indices, ``is_fast``, ``convert_to_tensors``,
and the error that ``encoding[0]`` / ``encoding.encodings`` (transformers' Rust ``tokenizers.Encoding``) raise."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minibert import BertTokenizer
from minibert.errors import InputTypeError, TransformersNameError

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def both(minilm_dir):
    return BertTokenizer.from_pretrained(minilm_dir), transformers.BertTokenizerFast.from_pretrained(str(minilm_dir))


# (not "pt" unpadded: a tensor has one length, refused by minibert; transformers returns an empty tensor)
@pytest.mark.parametrize("padding, return_tensors", [(False, None), (True, None), (False, "np"), (True, "np"),
                                                     (True, "pt")])  # fmt: skip
def test_tokens_of_every_row_as_transformers(both, padding, return_tensors):
    """Unpadded "np" rows are an object array of rows (each row is a row, not one token each)."""
    texts = ["a b", "c", "hello there world"]
    ours, theirs = (t(texts, padding=padding, return_tensors=return_tensors) for t in both)
    for row in range(len(texts)):
        assert ours.tokens(row) == theirs.tokens(row), row
    ours, theirs = (t("hello world", return_tensors=return_tensors) for t in both)
    assert ours.tokens() == theirs.tokens() == ["[CLS]", "hello", "world", "[SEP]"]


def test_negative_rows_count_from_the_end_as_in_transformers(both):
    ours, theirs = (t(["a b", "c d e"], ["x", "y z"], return_offsets_mapping=True) for t in both)
    for row in (-1, -2):
        assert ours.word_ids(row) == theirs.word_ids(row)
        assert ours.sequence_ids(row) == theirs.sequence_ids(row)
        assert ours.token_to_chars(row, 1) == tuple(theirs.token_to_chars(row, 1))
        assert ours.char_to_token(row, 0, 1) == theirs.char_to_token(row, 0, 1)
    for row in (2, -3):
        with pytest.raises(IndexError, match=f"batch_index {row} is outside this batch of 2 rows"):
            ours.word_ids(row)
        with pytest.raises(IndexError, match=f"batch_index {row} is outside this batch of 2 rows"):
            ours.tokens(row)


def test_is_fast_as_transformers(both):
    ours, theirs = (t("Hello world") for t in both)
    assert ours.is_fast is theirs.is_fast is True


@pytest.mark.parametrize("tensor_type", ["pt", "np"])
@pytest.mark.parametrize("texts", ["hello world", ["a b", "c d"]])
def test_convert_to_tensors_as_transformers(both, tensor_type, texts):
    ours, theirs = (t(texts) for t in both)
    assert ours.convert_to_tensors(tensor_type) is ours
    theirs.convert_to_tensors(tensor_type)
    for key in theirs:
        kind = torch.Tensor if tensor_type == "pt" else np.ndarray
        assert isinstance(ours[key], kind), key
        assert ours[key].shape == theirs[key].shape and ours[key].tolist() == theirs[key].tolist(), key
    ours, theirs = (t("a b") for t in both)
    ours.convert_to_tensors("pt", prepend_batch_axis=True)
    theirs.convert_to_tensors("pt", prepend_batch_axis=True)
    assert ours["input_ids"].tolist() == theirs["input_ids"].tolist() and ours["input_ids"].shape == (1, 4)
    assert ours.tokens() == theirs.tokens()


def test_rust_encodings_are_refused_with_what_answers_instead(both):
    """transformers hands out tokenizers.Encoding rows; minibert has none, and says where each fact is."""
    ours, theirs = (t(["a b", "c"]) for t in both)
    assert theirs[0].tokens == ours.tokens(0)
    with pytest.raises(InputTypeError, match=r"tokens\(i\), word_ids\(i\), sequence_ids\(i\)"):
        ours[0]
    with pytest.raises(TransformersNameError, match=r"no attribute 'encodings'.*tokens\(i\)"):
        _ = ours.encodings
    assert not hasattr(ours, "encodings")
    assert ours[:1] == {key: value[:1] for key, value in theirs.items()}  # a slice, as transformers
