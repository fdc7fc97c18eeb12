"""``BertTokenizer.from_pretrained(path, do_lower_case=...)``, as the tutorials call it: the ids
equal transformers' tokenizer loaded with the same argument; a value that contradicts the
vocabulary (lowercasing for a cased one, not lowercasing for an uncased one) is refused, unless it
is the checkpoint's own setting; a vocabulary with no casing (SMILES, amino acids) takes either."""

from __future__ import annotations

import json
import logging

import pytest

from minibert import BertTokenizer, InputTypeError

transformers = pytest.importorskip("transformers")

TEXTS = ["Hello World, Paris is NICE.", "The Cat sat", "ÉCOLE naïve Straße"]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _folder(tmp_path, name: str, pieces: list[str], config: dict | None) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(SPECIALS + pieces) + "\n", encoding="utf-8")
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return str(folder)


def _same_ids_as_transformers(folder: str, lower: bool) -> None:
    """The ids and ``tokenizer.do_lower_case`` as transformers': given ``lower``, and the checkpoint's own."""
    ours = BertTokenizer.from_pretrained(folder, do_lower_case=lower)
    theirs = transformers.BertTokenizerFast.from_pretrained(folder, do_lower_case=lower)
    assert ours(TEXTS)["input_ids"] == theirs(TEXTS)["input_ids"], (folder, lower)
    assert ours.do_lower_case is theirs.do_lower_case is lower
    own = BertTokenizer.from_pretrained(folder).do_lower_case
    assert own is transformers.BertTokenizerFast.from_pretrained(folder).do_lower_case, folder


def test_the_tutorials_call_on_an_uncased_checkpoint(minilm_dir):
    _same_ids_as_transformers(str(minilm_dir), True)
    with pytest.raises(ValueError, match=r"do_lower_case=False contradicts .*vocabulary is uncased \(21722 lowercase"):
        BertTokenizer.from_pretrained(minilm_dir, do_lower_case=False)


CASED = ["The", "Cat", "Paris", "Hello", "World", "the", "cat", "sat", "is", "nice", "##s", ",", "."]


def test_a_cased_checkpoint(tmp_path):
    folder = _folder(tmp_path, "cased", CASED, {"do_lower_case": False})
    _same_ids_as_transformers(folder, False)
    with pytest.raises(ValueError, match=r"do_lower_case=True contradicts .*vocabulary is cased \(5 of 18 pieces"):
        BertTokenizer.from_pretrained(folder, do_lower_case=True)


def test_the_checkpoints_own_setting_is_never_refused(tmp_path):
    """A cased vocabulary whose own config lowercases (a checkpoint made that way): passing its own
    setting changes nothing and is taken."""
    folder = _folder(tmp_path, "own", CASED, {"do_lower_case": True})
    _same_ids_as_transformers(folder, True)


@pytest.mark.parametrize("lower", [True, False])
def test_a_vocabulary_without_casing_takes_either(tmp_path, lower):
    atoms = ["C", "N", "O", "Cl", "Br", "c", "n", "(", ")", "=", "#", "@", "[", "]"]  # rxnfp's vocabulary in small:
    folder = _folder(tmp_path, "smiles", atoms + [str(n) for n in range(300)], None)  # 2 of 319 capitalised
    _same_ids_as_transformers(folder, lower)


@pytest.mark.parametrize("bad", ["yes", 1, None.__class__])
def test_a_value_that_is_not_a_bool_is_refused(minilm_dir, bad):
    with pytest.raises(InputTypeError, match="do_lower_case must be True or False"):
        BertTokenizer.from_pretrained(minilm_dir, do_lower_case=bad)


def test_other_keywords_are_still_refused(minilm_dir):
    """use_fast (one tokenizer here) is taken and changes nothing; a keyword minibert has no meaning for is named."""
    assert BertTokenizer.from_pretrained(minilm_dir, use_fast=True)("Hello")["input_ids"] == [101, 7592, 102]
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['add_prefix_space'\]"):
        BertTokenizer.from_pretrained(minilm_dir, add_prefix_space=True)


@pytest.mark.parametrize("field", ["do_lower_case", "strip_accents", "tokenize_chinese_chars", "do_basic_tokenize",
                                   "clean_up_tokenization_spaces"])  # fmt: skip
@pytest.mark.parametrize("value", ["false", 0, "true"])
def test_a_flag_in_tokenizer_config_that_is_not_a_bool_is_refused(tmp_path, field, value):
    """``"do_lower_case": "false"`` in tokenizer_config.json used to be skipped, so a cased model was
    lowercased (other ids, other vectors, exit 0); transformers refuses the file. Each flag must be
    true or false (null: the default); a CheckpointError names the file, the field and the value."""
    from minibert.errors import CheckpointError

    folder = _folder(tmp_path, "cased", ["Hello", "hello", "World", "world"], {field: value})
    with pytest.raises(CheckpointError, match=f"tokenizer_config.json: {field} must be true or false, got "
                                              f"{json.dumps(value)}"):  # fmt: skip
        BertTokenizer.from_pretrained(folder)
    if field == "do_lower_case" and value == "false":
        settings = {field: value, "tokenizer_class": "BertTokenizer"}
        reference = _folder(tmp_path, "reference", ["Hello", "hello"], settings)
        with pytest.raises(TypeError):  # the reference refuses it too
            transformers.AutoTokenizer.from_pretrained(reference)
    _folder(tmp_path, "null", ["Hello", "hello"], {field: None})
    assert BertTokenizer.from_pretrained(tmp_path / "null")("Hello")["input_ids"] == [2, 6, 3]  # default: lowercased


# ----------------------------------------------------------------------------- no tokenizer_config.json

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _hub_cache(tmp_path, files: dict[str, str]):
    """(cache folder, snapshot folder) of a hub cache holding the repository me/cased at one commit with
    ``files``, and the cache's records of the tokenizer files it lacks, as huggingface_hub leaves them."""
    repo = tmp_path / "hub" / "models--me--cased"
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for name, text in files.items():
        (snapshot / name).write_text(text, encoding="utf-8")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    (repo / ".no_exist" / COMMIT).mkdir(parents=True)
    for name in ("tokenizer_config.json", "tokenizer.json", "special_tokens_map.json", "added_tokens.json"):
        (repo / ".no_exist" / COMMIT / name).touch()
    return tmp_path / "hub", snapshot


def test_vocab_txt_without_tokenizer_config_is_lowercased_as_transformers_does(tmp_path, caplog):
    """A cased vocab.txt with no tokenizer_config.json: transformers 5 lowercases it (BertTokenizer's
    default), named by its hub id, its snapshot folder or a folder of its own. minibert guessed the
    casing from the vocabulary for a local folder only: the snapshot read "Hello" where its hub id read
    "hello", and transformers "hello" for both. Now all lowercase, and a warning names the file that
    would say otherwise (a cased vocabulary loses its capitalised words)."""
    import minibert

    vocab = "\n".join(SPECIALS + CASED) + "\n"
    cache, snapshot = _hub_cache(tmp_path, {"vocab.txt": vocab, "config.json": json.dumps({"model_type": "bert"})})
    alone = _folder(tmp_path, "alone", CASED, None)
    hub = {"cache_dir": str(cache), "local_files_only": True}
    expected = transformers.AutoTokenizer.from_pretrained("me/cased", **hub)(TEXTS)["input_ids"]
    for name, options in (("me/cased", hub), (str(snapshot), {}), (alone, {})):
        for library in (minibert, transformers):
            for cls in ("AutoTokenizer", "BertTokenizer"):
                if name == alone and library is transformers and cls == "AutoTokenizer":
                    continue  # (no config.json to pick a class by: transformers' AutoTokenizer cannot load it)
                with caplog.at_level(logging.WARNING, logger="minibert"):
                    tokenizer = getattr(library, cls).from_pretrained(name, **options)
                assert tokenizer(TEXTS)["input_ids"] == expected, (name, library.__name__, cls)
                assert tokenizer.do_lower_case is True
    warned = [record for record in caplog.records if record.name == "minibert" and record.levelno == logging.WARNING]
    assert len(warned) == 6 and all("its vocabulary is cased (5 of 18 pieces" in one.getMessage() for one in warned)
    advice = f'save {{"do_lower_case": false}} as tokenizer_config.json beside {snapshot / "vocab.txt"}'
    assert advice in warned[2].getMessage()


def test_googles_releases_keep_their_readmes_casing(tmp_path):
    """Google's zips have no tokenizer config, and transformers loads no model from them: their casing is
    Google's README's (the zip's name, else the vocabulary), for a folder that holds bert_config.json, a
    TensorFlow checkpoint, or bears a zip's name; a copy with config.json alone is transformers' (lowercase)."""
    named = _folder(tmp_path, "cased_L-2_H-32_A-2", CASED, None)
    with_config = _folder(tmp_path, "my-google-bert", CASED, None)
    (tmp_path / "my-google-bert" / "bert_config.json").write_text(json.dumps({"vocab_size": 18}))
    with_checkpoint = _folder(tmp_path, "run", CASED, None)
    (tmp_path / "run" / "model.ckpt-3.index").write_bytes(b"")
    for folder in (named, with_config, with_checkpoint):
        assert BertTokenizer.from_pretrained(folder).do_lower_case is False, folder
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "vocab.txt").write_bytes((tmp_path / "my-google-bert" / "vocab.txt").read_bytes())
    assert BertTokenizer.from_pretrained(tmp_path / "copy").do_lower_case is True
