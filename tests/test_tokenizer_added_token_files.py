"""A folder's added tokens, wherever transformers has kept them (added_token_files.py), loaded as
transformers 5 loads them: added_tokens.json and special_tokens_map.json (transformers < 4.34), a
tokenizer.json beside vocab.txt (transformers 5 saving into a copy of a checkpoint), and
tokenizer_config.json's added_tokens_decoder, which wins over all of them. Each folder is loaded by
both libraries and everything a user sees compared; what transformers cannot load reproducibly is
refused, naming the file."""

from __future__ import annotations

import json
import shutil

import pytest
import tokenizers
import transformers

from minibert import BertTokenizer
from minibert.errors import CheckpointError

ROLES = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"}


def folder(tmp_path, minilm_dir, files=("vocab.txt", "tokenizer_config.json"), **contents):
    """A copy of all-MiniLM-L6-v2's ``files``, with ``contents`` ({name: JSON value}) written beside."""
    directory = tmp_path / "tokenizer"
    directory.mkdir()
    for name in files:
        shutil.copy(minilm_dir / name, directory / name)
    for name, value in contents.items():
        (directory / name.replace("__", ".")).write_text(json.dumps(value))
    return directory


def assert_loaded_alike(directory, texts):
    """ids, pieces, len, the special ids, the added vocabulary and decoding, as transformers 5."""
    ours, theirs = BertTokenizer.from_pretrained(directory), transformers.AutoTokenizer.from_pretrained(str(directory))
    assert len(ours) == len(theirs)
    assert ours.all_special_ids == theirs.all_special_ids
    assert ours.get_added_vocab() == theirs.get_added_vocab()
    for text in texts:
        a, b = ours(text)["input_ids"], theirs(text)["input_ids"]
        assert a == b and ours.tokenize(text) == theirs.tokenize(text), text
        for skip in (False, True):
            assert ours.decode(a, skip_special_tokens=skip) == theirs.decode(b, skip_special_tokens=skip), text
    return ours


def test_transformers4_folder_with_added_tokens_json(tmp_path, minilm_dir):
    """transformers < 4.34: added_tokens.json, special_tokens_map.json naming ``<e1>`` additional
    special, tokenizer.json listing both, a config without added_tokens_decoder. transformers 5
    keeps ``<e1>`` matched after normalization (``<E1>`` matches) though it lists it as special."""
    added = [{"id": 30522, "content": "newword", "special": False, "normalized": True},
             {"id": 30523, "content": "<e1>", "special": False, "normalized": True}]  # fmt: skip
    tokenizer_json = json.loads((minilm_dir / "tokenizer.json").read_text())
    tokenizer_json["added_tokens"] += [{**entry, "single_word": False, "lstrip": False, "rstrip": False}
                                       for entry in added]  # fmt: skip
    for extra in ({}, {"tokenizer__json": tokenizer_json}):
        special_tokens_map = {**ROLES, "additional_special_tokens": ["<e1>"]}
        added_tokens = {"<e1>": 30523, "newword": 30522}
        directory = folder(
            tmp_path, minilm_dir, added_tokens__json=added_tokens, special_tokens_map__json=special_tokens_map, **extra
        )
        ours = assert_loaded_alike(directory, ["<e1> NewWord </e1> <E1>", "xnewwordy"])
        assert len(ours) == 30524 and ours.extra_special_tokens == ["<e1>"]
        shutil.rmtree(directory)


def test_special_tokens_map_names_vocabulary_pieces_and_new_tokens(tmp_path, minilm_dir):
    """special_tokens_map.json's additional tokens: ``[unused0]`` kept whole with its own id, a new
    one added with the next; its roles replace the config's; its additional_special_tokens are
    ignored where the config names extra special tokens (transformers 5's precedence)."""
    directory = folder(
        tmp_path, minilm_dir, special_tokens_map__json={"additional_special_tokens": ["[unused0]", "<new>"]}
    )
    assert_loaded_alike(directory, ["x[unused0]y<new> [UNUSED0]"])
    shutil.rmtree(directory)
    config = {
        **json.loads((minilm_dir / "tokenizer_config.json").read_text()),
        "additional_special_tokens": ["[unused1]"],
    }
    special_tokens_map = {"additional_special_tokens": ["[unused0]"], "mask_token": "[unused2]"}
    directory = folder(
        tmp_path,
        minilm_dir,
        files=("vocab.txt",),
        tokenizer_config__json=config,
        special_tokens_map__json=special_tokens_map,
    )
    ours = assert_loaded_alike(directory, ["x[unused0]y[unused1][unused2]"])
    assert ours.mask_token == "[unused2]"


def test_transformers5_saving_into_a_folder_with_vocab_txt(tmp_path, minilm_dir):
    """transformers 5 saves tokenizer.json + tokenizer_config.json (no added_tokens_decoder) into a
    copy of a checkpoint: the old vocab.txt stays, the added tokens are only in tokenizer.json."""
    directory = tmp_path / "copy"
    shutil.copytree(minilm_dir, directory)
    theirs = transformers.AutoTokenizer.from_pretrained(str(directory))
    theirs.add_tokens(["NewWord"])
    theirs.add_special_tokens({"additional_special_tokens": ["<e1>"]})
    theirs.save_pretrained(directory)
    assert "added_tokens_decoder" not in json.loads((directory / "tokenizer_config.json").read_text())
    ours = assert_loaded_alike(directory, ["<e1> NewWord <E1> newwords"])
    assert len(ours) == 30524


def test_the_configs_added_tokens_decoder_wins(tmp_path, minilm_dir):
    """With added_tokens_decoder in tokenizer_config.json, transformers reads no other file for
    added tokens: added_tokens.json and special_tokens_map.json are not read."""
    config = json.loads((minilm_dir / "tokenizer_config.json").read_text())
    config["added_tokens_decoder"] = {"30522": {"content": "qqaa", "normalized": True, "special": False}}
    files = {
        "added_tokens__json": {"qqbb": 30523},
        "special_tokens_map__json": {"additional_special_tokens": ["[unused0]"]},
    }
    directory = folder(tmp_path, minilm_dir, files=("vocab.txt",), tokenizer_config__json=config, **files)
    ours = assert_loaded_alike(directory, ["qqaa qqbb [unused0]"])
    assert len(ours) == 30523


def test_vocab_txt_and_a_tokenizer_json_that_disagree_are_refused(tmp_path, minilm_dir):
    """transformers 5 takes the vocabulary from tokenizer.json, minibert from vocab.txt: refused."""
    tokenizer_json = json.loads((minilm_dir / "tokenizer.json").read_text())
    vocab = tokenizer_json["model"]["vocab"]
    vocab["hello"], vocab["world"] = vocab["world"], vocab["hello"]
    directory = folder(tmp_path, minilm_dir, tokenizer__json=tokenizer_json)
    assert transformers.AutoTokenizer.from_pretrained(str(directory))("hello")["input_ids"] == [101, 2088, 102]
    with pytest.raises(CheckpointError, match=r"tokenizer.json's model.vocab differs from .*vocab.txt"):
        BertTokenizer.from_pretrained(directory)


def test_added_tokens_json_with_a_gap_is_refused(tmp_path, minilm_dir):
    """transformers renumbers it silently (``bbb`` 30530 becomes 30522): refused, naming the file."""
    directory = folder(tmp_path, minilm_dir, added_tokens__json={"bbb": 30530})
    assert transformers.AutoTokenizer.from_pretrained(str(directory))("bbb")["input_ids"] == [101, 30522, 102]
    with pytest.raises(CheckpointError, match=r"added_tokens.json: added token 'bbb' has id 30530"):
        BertTokenizer.from_pretrained(directory)


def test_tokenizer_json_added_tokens_out_of_id_order_are_refused(tmp_path, minilm_dir):
    """``tokenizers`` numbers added tokens in list order (the id fields unread); transformers 5's
    BertTokenizer, in a folder with a tokenizer_config.json, in id order. Such a file has no one
    answer: refused, naming the file, with or without vocab.txt."""
    tokenizer_json = json.loads((minilm_dir / "tokenizer.json").read_text())
    entry = {"special": False, "single_word": False, "lstrip": False, "rstrip": False, "normalized": True}
    tokenizer_json["added_tokens"] += [
        {"id": 30523, "content": "qqyy", **entry},
        {"id": 30522, "content": "qqzz", **entry},
    ]
    for files in (("tokenizer_config.json",), ("vocab.txt", "tokenizer_config.json")):
        directory = folder(tmp_path, minilm_dir, files=files, tokenizer__json=tokenizer_json)
        by_tokenizers = (
            tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json")).encode("qqzz qqyy").ids[:4]
        )  # (padded)
        by_transformers = transformers.AutoTokenizer.from_pretrained(str(directory))("qqzz qqyy")["input_ids"]
        assert by_tokenizers == [101, 30523, 30522, 102] and by_transformers == [101, 30522, 30523, 102]
        with pytest.raises(CheckpointError, match=r"tokenizer.json: added_tokens: not in id order \('qqyy', id 30523"):
            BertTokenizer.from_pretrained(directory)
        shutil.rmtree(directory)
