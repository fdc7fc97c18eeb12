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
    assert ours.all_special_tokens == theirs.all_special_tokens and ours.all_special_ids == theirs.all_special_ids
    assert ours.get_added_vocab() == theirs.get_added_vocab()
    for text in texts:
        a, b = ours(text, return_special_tokens_mask=True), theirs(text, return_special_tokens_mask=True)
        assert a["input_ids"] == b["input_ids"] and ours.tokenize(text) == theirs.tokenize(text), text
        assert a["special_tokens_mask"] == b["special_tokens_mask"], text
        ids = a["input_ids"]
        mask = ours.get_special_tokens_mask(ids, already_has_special_tokens=True)
        assert mask == theirs.get_special_tokens_mask(ids, already_has_special_tokens=True), text
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip), text
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


# A piece the vocabulary already has ("cafe", id 7668; "[unused0]", id 1), added as special or not:
# it keeps its id, and is cut out whole wherever it occurs ("bcafec": b cafe c), as transformers does.
ADD_A_VOCABULARY_PIECE = {
    "special": lambda tok: tok.add_tokens(["cafe"], special_tokens=True),
    "special, not a role": lambda tok: tok.add_tokens(["[unused0]"], special_tokens=True),
    "extra special": lambda tok: tok.add_special_tokens({"additional_special_tokens": ["cafe"]}),
    "a role re-added": lambda tok: tok.add_tokens(["[MASK]"], special_tokens=True),
    "a role as extra special": lambda tok: tok.add_special_tokens({"additional_special_tokens": ["[SEP]"]}),
    "ordinary": lambda tok: tok.add_tokens(["cafe"]),
    "ordinary, normalized=False": lambda tok: tok.add_tokens([tokenizers.AddedToken("cafe", normalized=False)]),
    "ordinary, normalized=True": lambda tok: tok.add_tokens([tokenizers.AddedToken("Cafe", normalized=True)]),
    "special and new ones": lambda tok: [
        tok.add_tokens(["cafe", "<e1>"], special_tokens=True),
        tok.add_tokens(["newword"]),
    ],
}
PIECE_TEXTS = ["bcafec cafe CAFE Café", "cafe", "x[unused0]y [UNUSED0] [MASK] [mask] [SEP] <e1> <E1> newwords"]


@pytest.mark.parametrize("add", ADD_A_VOCABULARY_PIECE.values(), ids=ADD_A_VOCABULARY_PIECE)
def test_transformers5_folder_with_a_vocabulary_piece_added(tmp_path, minilm_dir, add):
    """transformers 5 saves tokenizer.json + tokenizer_config.json: the piece is listed only in
    tokenizer.json's added_tokens, beside the roles (which it resembles: in the vocabulary, special).
    The folder loads as transformers loads it, and as minibert's own add_tokens made it in memory."""
    theirs = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    add(theirs)
    theirs.save_pretrained(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
    ours = assert_loaded_alike(tmp_path, PIECE_TEXTS)
    in_memory = BertTokenizer.from_pretrained(minilm_dir)
    add(in_memory)
    for text in PIECE_TEXTS:
        ids = theirs(text)["input_ids"]
        assert in_memory(text)["input_ids"] == ours(text)["input_ids"] == ids, text
        for skip in (False, True):
            assert in_memory.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)
    assert in_memory.all_special_tokens == theirs.all_special_tokens


def _entry(content, special, normalized):
    return {"content": content, "single_word": False, "lstrip": False, "rstrip": False, "normalized": normalized,
            "special": special}  # fmt: skip


@pytest.mark.parametrize("special, normalized", [(True, False), (False, True), (False, False)])
@pytest.mark.parametrize("vocab_txt", [True, False], ids=["vocab.txt", "tokenizer.json alone"])
@pytest.mark.parametrize("listed_in", ["tokenizer.json", "added_tokens_decoder", "both", "both, disagreeing"])
def test_a_vocabulary_piece_listed_in_each_file(tmp_path, minilm_dir, special, normalized, vocab_txt, listed_in):
    """The piece "cafe" listed in tokenizer.json's added_tokens, in tokenizer_config.json's
    added_tokens_decoder (which then wins: transformers reads no other file), or in both (the
    config's entry the opposite kind where they disagree), with and without vocab.txt."""
    tokenizer_json = json.loads((minilm_dir / "tokenizer.json").read_text())
    config = json.loads((minilm_dir / "tokenizer_config.json").read_text())
    roles = {
        str(entry.pop("id")): entry for entry in json.loads((minilm_dir / "tokenizer.json").read_text())["added_tokens"]
    }
    cafe = _entry("cafe", special, normalized)
    if listed_in != "added_tokens_decoder":
        tokenizer_json["added_tokens"].append({"id": 7668, **cafe})
    if listed_in != "tokenizer.json":
        in_config = _entry("cafe", not special, special) if listed_in == "both, disagreeing" else cafe
        config["added_tokens_decoder"] = {**roles, "7668": in_config}
    files = ("vocab.txt",) if vocab_txt else ()
    directory = folder(tmp_path, minilm_dir, files=files, tokenizer__json=tokenizer_json, tokenizer_config__json=config)
    ours = assert_loaded_alike(directory, PIECE_TEXTS)
    assert ours.tokenize("bcafec") == ["b", "cafe", "c"]


@pytest.mark.parametrize("in_map", [True, False], ids=["named special", "not named"])
@pytest.mark.parametrize("listed_in", [("added_tokens.json",), ("tokenizer.json",), ("added_tokens.json",
                                                                                     "tokenizer.json")])  # fmt: skip
def test_transformers4_folder_with_a_vocabulary_piece_added(tmp_path, minilm_dir, in_map, listed_in):
    """transformers 4's layout, written as 4.x writes it: vocab.txt, a config without
    added_tokens_decoder, special_tokens_map.json (naming "cafe" an additional special token, or
    not), and "cafe" in added_tokens.json (where transformers 5 reads it as special if the map names
    it) and/or tokenizer.json (special, as 4.x's fast tokenizer saves add_tokens(special_tokens=True))."""
    special_tokens_map = {**ROLES, **({"additional_special_tokens": ["cafe"]} if in_map else {})}
    contents = {"special_tokens_map__json": special_tokens_map}
    if "added_tokens.json" in listed_in:
        contents["added_tokens__json"] = {"cafe": 7668}
    if "tokenizer.json" in listed_in:
        tokenizer_json = json.loads((minilm_dir / "tokenizer.json").read_text())
        tokenizer_json["added_tokens"].append({"id": 7668, **_entry("cafe", True, False)})
        contents["tokenizer__json"] = tokenizer_json
    assert_loaded_alike(folder(tmp_path, minilm_dir, **contents), PIECE_TEXTS)


ROLE_FLAG_CASES = {  # a role given as a serialized AddedToken whose options transformers honours
    "single_word": {"single_word": True},  # "the[MASK]of" is not [MASK] to transformers
    "lstrip": {"lstrip": True},  # "a  [MASK]" swallows the spaces: offsets (1, 9), not (3, 9)
    "normalized": {"normalized": True},  # transformers shows it as "[mask]"
}


@pytest.mark.parametrize("where", ["special_tokens_map.json", "tokenizer_config.json"])
@pytest.mark.parametrize("flag", sorted(ROLE_FLAG_CASES))
def test_a_role_with_options_minibert_does_not_match_is_refused(tmp_path, minilm_dir, where, flag):
    """A role written as an AddedToken dict kept only its content: transformers honours its
    single_word / lstrip / normalized (other ids or offsets), so minibert now refuses it, naming the
    file and the field, as it refuses the same token in added_tokens_decoder. Where the config's
    added_tokens_decoder lists the token, transformers takes that entry's options: loaded alike."""
    mask = {"content": "[MASK]", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
            **ROLE_FLAG_CASES[flag]}  # fmt: skip
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": True}
    if where == "tokenizer_config.json":
        contents = {"tokenizer_config__json": {**config, "mask_token": {**mask, "__type": "AddedToken"}}}
    else:
        contents = {"tokenizer_config__json": config, "special_tokens_map__json": {"mask_token": mask}}
    directory = folder(tmp_path, minilm_dir, files=("vocab.txt",), **contents)
    text = "a  [MASK] b the[MASK]of"
    ours_then = BertTokenizer(minilm_dir / "vocab.txt")(text, return_offsets_mapping=True)  # what minibert gave
    theirs = transformers.AutoTokenizer.from_pretrained(str(directory))(text, return_offsets_mapping=True)
    seen = [(x["input_ids"], x["offset_mapping"], x.tokens()) for x in (theirs, ours_then)]
    assert seen[0] != seen[1]  # ids, offsets, or the piece shown ("[mask]")
    with pytest.raises(CheckpointError, match=rf"{where}: mask_token: added token '\[MASK\]': "):
        BertTokenizer.from_pretrained(directory)
    if where == "tokenizer_config.json":
        listed = {"103": {"content": "[MASK]", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}}  # fmt: skip
        config = {**contents["tokenizer_config__json"], "added_tokens_decoder": listed}
        (directory / where).write_text(json.dumps(config))
        assert_loaded_alike(directory, [text])


def test_an_extra_special_token_with_options_minibert_does_not_match_is_refused(tmp_path, minilm_dir):
    """extra_special_tokens entries are checked as the roles are: transformers matches a
    single_word ``<e1>`` only as a word of its own (not in ``x<e1>y``)."""
    e1 = {"__type": "AddedToken", "content": "<e1>", "single_word": True, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True}  # fmt: skip
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "extra_special_tokens": [e1]}
    directory = folder(tmp_path, minilm_dir, files=("vocab.txt",), tokenizer_config__json=config)
    assert "<e1>" not in transformers.AutoTokenizer.from_pretrained(str(directory)).tokenize("x<e1>y")
    with pytest.raises(CheckpointError, match="extra_special_tokens: added token '<e1>': single_word=True"):
        BertTokenizer.from_pretrained(directory)


@pytest.mark.parametrize("role", ["pad_token", "mask_token"])
def test_a_null_pad_or_mask_is_no_such_role(tmp_path, minilm_dir, role):
    """tokenizer_config.json's ``"pad_token": null`` (or mask_token) was read as the default [PAD]:
    minibert padded where transformers has no pad token and refuses. Now null is no such role, as
    in transformers: padding (or fill_mask) raises, naming the file; special_tokens_map.json naming
    the role wins over the config's null, unless the config has added_tokens_decoder (then the map
    is not read); a null in the map is no such role too."""
    config = {**json.loads((minilm_dir / "tokenizer_config.json").read_text()), role: None}
    listed = {"0": {"content": "[PAD]", "special": True, "normalized": False},
              "103": {"content": "[MASK]", "special": True, "normalized": False}}  # fmt: skip
    layouts = {  # name: (config, map, the role's token in transformers)
        "config null": (config, None, None),
        "map names it": (config, {role: ROLES[role]}, ROLES[role]),
        "map null": ({**config, role: ROLES[role]}, {role: None}, None),
        "decoder, map not read": ({**config, "added_tokens_decoder": listed}, {role: ROLES[role]}, None),
    }
    for name, (tokenizer_config, special_tokens_map, token) in layouts.items():
        contents = {"tokenizer_config__json": tokenizer_config}
        if special_tokens_map is not None:
            contents["special_tokens_map__json"] = special_tokens_map
        directory = folder(tmp_path, minilm_dir, files=("vocab.txt",), **contents)
        ours = BertTokenizer.from_pretrained(directory)
        theirs = transformers.AutoTokenizer.from_pretrained(str(directory))
        assert getattr(theirs, role) == getattr(ours, role) == token, name
        assert getattr(theirs, f"{role}_id") == getattr(ours, f"{role}_id"), name
        assert ours.all_special_ids == theirs.all_special_ids, name
        file = "special_tokens_map.json" if name == "map null" else "tokenizer_config.json"
        if role == "pad_token" and token is None:
            with pytest.raises(ValueError, match="padding token"):
                theirs(["a b", "a"], padding=True)
            with pytest.raises(ValueError, match=rf"cannot pad: the tokenizer has no pad_token \(.*{file} sets it"):
                ours(["a b", "a"], padding=True)
        elif role == "pad_token":
            assert ours(["a b", "a"], padding=True)["input_ids"] == theirs(["a b", "a"], padding=True)["input_ids"]
        elif token is None:  # what fill_mask says
            assert ours.role_missing(role).endswith(f"{file} sets it null)")
        shutil.rmtree(directory)


@pytest.mark.parametrize("role", ["unk_token", "cls_token", "sep_token"])
def test_a_null_unk_cls_or_sep_is_refused(tmp_path, minilm_dir, role):
    """A null [CLS] or [SEP]: transformers frames with stand-in ids 2 and 3 ([unused1], [unused2]
    here), whatever the vocabulary holds; minibert used [CLS]/[SEP] silently. Now refused, naming
    the file and the field (the map's naming of the role wins, as in transformers)."""
    config = {**json.loads((minilm_dir / "tokenizer_config.json").read_text()), role: None}
    directory = folder(tmp_path, minilm_dir, files=("vocab.txt",), tokenizer_config__json=config)
    if role != "unk_token":
        assert transformers.AutoTokenizer.from_pretrained(str(directory))("a")["input_ids"] != [101, 1037, 102]
    with pytest.raises(CheckpointError, match=rf"tokenizer_config.json: {role} is null"):
        BertTokenizer.from_pretrained(directory)
    (directory / "special_tokens_map.json").write_text(json.dumps({role: ROLES[role]}))
    assert_loaded_alike(directory, ["a [CLS] b [SEP] c"])
    (directory / "special_tokens_map.json").write_text(json.dumps({role: None}))
    with pytest.raises(CheckpointError, match=rf"special_tokens_map.json: {role} is null"):
        BertTokenizer.from_pretrained(directory)
