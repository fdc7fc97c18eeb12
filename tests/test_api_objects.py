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
