"""Repositories with tokenizer.json and no vocab.txt (minibert/tokenizer_json.py): ids identical to
what the `tokenizers` library computes from the same file, for every normalizer setting BERT uses;
every pipeline minibert does not compute is refused, naming the file and the field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import corpus
from helpers import assert_same_ids
from minibert import BertTokenizer, CheckpointError, ModelNotFoundError

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def texts():
    pool = corpus.all_texts()
    return [pool[i] for i in range(0, len(pool), max(1, len(pool) // 1500))] + [
        "Crème BRÛLÉE naïve café", "ΣΊΣΥΦΟΣ", "中文混合 English 日本語", "un\u0301accented", "tab\there\x00null",
    ]  # fmt: skip


def _saved_by_transformers(directory: Path, vocab_file: Path, expected_size: int = 30522, **options) -> Path:
    """transformers 5 saves tokenizer.json + tokenizer_config.json, no vocab.txt."""
    reference = transformers.BertTokenizer(vocab=str(vocab_file), **options)  # v5: vocab=, not vocab_file=
    assert len(reference) == expected_size
    reference.save_pretrained(str(directory))
    assert not (directory / "vocab.txt").exists() and (directory / "tokenizer.json").exists()
    return directory


def _edit(directory: Path, change, name: str = "tokenizer.json") -> Path:
    path = directory / name
    values = json.loads(path.read_text(encoding="utf-8"))
    change(values)
    path.write_text(json.dumps(values), encoding="utf-8")
    return directory


def _compare(directory: Path, texts, label: str) -> None:
    reference = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
    reference.no_truncation()
    reference.no_padding()
    ours = BertTokenizer.from_pretrained(directory)
    assert len(ours) == 30522
    assert_same_ids(ours, reference, texts, label, pairs=200, max_unknown=0.3)


SETTINGS = {
    "uncased": {},
    "cased": {"do_lower_case": False},
    "lowercase, accents kept": {"do_lower_case": True, "strip_accents": False},
    "cased, accents stripped": {"do_lower_case": False, "strip_accents": True},
    "no chinese-character split": {"tokenize_chinese_chars": False},
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_ids_match_tokenizers_on_the_same_file(name, vocab_file, tmp_path, texts):
    _compare(_saved_by_transformers(tmp_path / "tok", vocab_file, **SETTINGS[name]), texts, name)


def _lowercase_first(values):
    values["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Lowercase"}, values["normalizer"]]}


def test_sentence_transformers_lowercase_in_front(vocab_file, tmp_path, texts):
    """sentence-transformers 6 saves its do_lower_case as a Lowercase step before a cased BertNormalizer.
    With a config that lowercases too (accents kept, as the step keeps them), tokenizers and
    transformers agree, and minibert gives their ids."""
    directory = _saved_by_transformers(tmp_path / "tok", vocab_file, do_lower_case=False)
    _edit(directory, _lowercase_first)
    _edit(directory, lambda values: values.update(do_lower_case=True, strip_accents=False), "tokenizer_config.json")
    _compare(directory, texts, "Lowercase + cased BertNormalizer, config lowercases")
    reference = transformers.AutoTokenizer.from_pretrained(str(directory))
    ours = BertTokenizer.from_pretrained(directory)
    assert [ours(text)["input_ids"] for text in texts] == reference(texts)["input_ids"]


def test_lowercase_in_front_with_a_cased_config_is_refused(vocab_file, tmp_path, texts):
    """The same step with tokenizer_config.json's do_lower_case false, as sentence-transformers 6
    leaves it: transformers 5 (and so sentence-transformers 6.2) rebuilds the normalizer from the
    config and does not lowercase, tokenizers runs the file and does. minibert followed tokenizers and
    called it sentence-transformers' reading; now the folder is refused naming both files, and the
    error's two edits each give one reading, which all three libraries then share."""
    directory = _edit(_saved_by_transformers(tmp_path / "tok", vocab_file, do_lower_case=False), _lowercase_first)
    sample = [text for text in texts if text != text.lower()][:50]
    auto = transformers.AutoTokenizer.from_pretrained(str(directory))
    raw = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
    assert auto(sample[0])["input_ids"] != raw.encode(sample[0]).ids  # the references disagree here
    with pytest.raises(CheckpointError) as caught:
        BertTokenizer.from_pretrained(directory)
    message = str(caught.value)
    assert f"{directory / 'tokenizer.json'} lowercases first" in message
    assert f"{directory / 'tokenizer_config.json'} says do_lower_case false" in message
    assert 'remove {"type": "Lowercase"}' in message and '"do_lower_case": true and "strip_accents": false' in message
    cased = _edit(shutil.copytree(directory, tmp_path / "cased"),
                  lambda values: values.update(normalizer=values["normalizer"]["normalizers"][1]))  # fmt: skip
    lowered = _edit(shutil.copytree(directory, tmp_path / "lowered"),
                    lambda values: values.update(do_lower_case=True, strip_accents=False), "tokenizer_config.json")
    for folder, lowercases in ((cased, False), (lowered, True)):
        ours, auto = BertTokenizer.from_pretrained(folder), transformers.AutoTokenizer.from_pretrained(str(folder))
        raw = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        assert ours.basic.do_lower_case is lowercases
        expected = auto(sample)["input_ids"]
        assert [ours(text)["input_ids"] for text in sample] == expected == [raw.encode(t).ids for t in sample]


@pytest.mark.parametrize("strip_accents", [None, True, False])
def test_do_lower_case_false_on_a_transformers_5_save_keeps_accents_as_transformers_does(tmp_path, strip_accents):
    """``from_pretrained(folder, do_lower_case=False)`` on tokenizer.json + tokenizer_config.json (no
    vocab.txt). The normalizer's strip_accents null was resolved to the lowercase flag (True) and kept
    once lowercasing was turned off, so accents were stripped where transformers keeps them (null
    follows do_lower_case); a config's explicit true or false stays as it is, in both."""
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Café", "Cafe", "café", "cafe", "naïve", "naive",
              "The", "the", "RÉSUMÉ", "RESUME", "résumé", "resume", "."]  # fmt: skip
    (tmp_path / "vocab.txt").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    directory = _saved_by_transformers(tmp_path / "tok", tmp_path / "vocab.txt", strip_accents=strip_accents,
                                       expected_size=len(pieces))  # fmt: skip
    text = "The Café naïve RÉSUMÉ résumé cafe ."
    for lower in (False, True):
        reference = transformers.AutoTokenizer.from_pretrained(str(directory), do_lower_case=lower)
        ours = BertTokenizer.from_pretrained(directory, do_lower_case=lower)
        expected = reference(text)["input_ids"]
        assert ours(text)["input_ids"] == expected, (lower, ours.tokenize(text), reference.tokenize(text))
        kept = strip_accents is False or (strip_accents is None and not lower)  # (None, False: the case the bug hid)
        assert ("naïve" in reference.tokenize(text)) is kept


def test_tokenizer_json_alone_loads_and_settings_come_from_it(vocab_file, tmp_path):
    directory = _saved_by_transformers(tmp_path / "tok", vocab_file, do_lower_case=False)
    (directory / "tokenizer_config.json").unlink()
    tokenizer = BertTokenizer.from_pretrained(directory)
    assert tokenizer.basic.do_lower_case is False and len(tokenizer) == 30522
    assert tokenizer.convert_ids_to_tokens(tokenizer("Hello")["input_ids"]) == ["[CLS]", "[UNK]", "[SEP]"]


def _break(field: str):
    def change(values):
        if field == "model":
            values["model"] = {"type": "BPE", "vocab": values["model"]["vocab"], "merges": []}
        elif field == "prefix":
            values["model"]["continuing_subword_prefix"] = "@@"
        elif field == "max_input_chars_per_word":
            values["model"]["max_input_chars_per_word"] = 200
        elif field == "normalizer":
            values["normalizer"] = {"type": "NFKC"}
        elif field == "clean_text":
            values["normalizer"]["clean_text"] = False
        elif field == "pre_tokenizer":
            values["pre_tokenizer"] = {"type": "Whitespace"}
        elif field == "post_processor":
            values["post_processor"] = {"type": "RobertaProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}
        elif field == "template":  # no [SEP] between the pair's texts
            pair = values["post_processor"]["pair"]
            values["post_processor"]["pair"] = pair[:2] + pair[3:]
        elif field == "added_tokens":
            # Matched as a whole word only (ordinary added tokens load: test_tokenizer_added_tokens.py).
            values["added_tokens"].append({"id": 30522, "content": "<new>", "special": True, "single_word": True,
                                           "lstrip": False, "rstrip": False, "normalized": False})  # fmt: skip

    return change


@pytest.mark.parametrize(
    ("field", "message"),
    [("model", "model.type"), ("prefix", "continuing_subword_prefix"), ("max_input_chars_per_word", "200"),
     ("normalizer", "NFKC"), ("clean_text", "clean_text"), ("pre_tokenizer", "Whitespace"),
     ("post_processor", "RobertaProcessing"), ("template", "post_processor"), ("added_tokens", "single_word")],
)  # fmt: skip
def test_pipelines_minibert_does_not_compute_are_refused(field, message, vocab_file, tmp_path):
    directory = _edit(_saved_by_transformers(tmp_path / "tok", vocab_file), _break(field))
    with pytest.raises(CheckpointError, match=message) as caught:
        BertTokenizer.from_pretrained(directory)
    assert str(directory / "tokenizer.json") in str(caught.value)


DECODERS = {  # name: tokenizer.json's decoder
    "no clean-up": {"type": "WordPiece", "prefix": "##", "cleanup": False},
    "null": None,
    "another prefix": {"type": "WordPiece", "prefix": "@@", "cleanup": True},
    "BERT's own": {"type": "WordPiece", "prefix": "##", "cleanup": True},
}
DECODED = [[101, 7592, 1010, 2088, 999, 1045, 1005, 1049, 2025, 102], [2293, 3000, 2040, 2140, 1029, 1012],
           [2009, 1005, 1055, 2079, 2025, 2175, 1996, 5256, 1029]]  # fmt: skip


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_decode_follows_tokenizer_json_s_decoder_as_tokenizers_does(name, vocab_file, tmp_path):
    """tokenizer.json alone (no tokenizer_config.json: transformers runs the file, as the tokenizers
    library does): ``decode`` follows its decoder, the clean-up flag, the prefix, and none (null: the
    pieces joined by spaces). It was read as BERT's whatever the file said."""
    directory = _saved_by_transformers(tmp_path / "tok", vocab_file)
    (directory / "tokenizer_config.json").unlink()
    _edit(directory, lambda values: values.update(decoder=DECODERS[name]))
    ours = BertTokenizer.from_pretrained(directory)
    reference = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
    theirs = transformers.AutoTokenizer.from_pretrained(str(directory))
    for ids in DECODED:
        expected = reference.decode(ids, skip_special_tokens=False)
        assert ours.decode(ids) == expected == theirs.decode(ids), (name, ids)
        tokens = ours.convert_ids_to_tokens(ids)
        assert ours.convert_tokens_to_string(tokens) == theirs.convert_tokens_to_string(tokens)


def test_a_decoder_other_than_wordpiece_s_is_refused(vocab_file, tmp_path):
    directory = _saved_by_transformers(tmp_path / "tok", vocab_file)
    _edit(directory, lambda values: values.update(decoder={"type": "Metaspace", "replacement": "_"}))
    with pytest.raises(CheckpointError, match=r'tokenizer.json: decoder = \{"type": "Metaspace".*not WordPiece'):
        BertTokenizer.from_pretrained(directory)


@pytest.mark.parametrize("name", ["no clean-up", "null"])
def test_a_decoder_transformers_ignores_beside_a_config_refuses_to_decode(name, vocab_file, tmp_path, caplog):
    """With tokenizer_config.json beside it, transformers 5 builds BertTokenizer with BERT's own
    decoder and ignores the file's, which the tokenizers library follows: the two decode one id list
    to two texts. The folder loads (the ids are the same), and ``decode`` refuses, naming both files;
    a save writes files that decode with BERT's own, and says so."""
    directory = _saved_by_transformers(tmp_path / "tok", vocab_file)
    _edit(directory, lambda values: values.update(decoder=DECODERS[name]))
    ours = BertTokenizer.from_pretrained(directory)
    theirs = transformers.AutoTokenizer.from_pretrained(str(directory))
    reference = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
    assert theirs.decode(DECODED[0]) != reference.decode(DECODED[0], skip_special_tokens=False)  # the reason
    assert ours("hello, world!")["input_ids"] == theirs("hello, world!")["input_ids"]
    for decode in (ours.decode, ours.batch_decode, lambda ids: ours.convert_tokens_to_string(["a", "!"])):
        with pytest.raises(CheckpointError, match=r"cannot decode: .*tokenizer.json has decoder = .*"
                                                  r"tokenizer_config.json .*refuses rather than pick one"):
            decode(DECODED[0])
    with caplog.at_level("WARNING", logger="minibert"):
        ours.save_pretrained(tmp_path / "saved")
    assert "decode with BERT's own, WordPiece's" in caplog.text
    assert BertTokenizer.from_pretrained(tmp_path / "saved").decode(DECODED[0]) == theirs.decode(DECODED[0])


@pytest.mark.parametrize("config_says", [None, "right"])
@pytest.mark.parametrize("section", ["truncation", "padding"])
def test_the_sides_come_from_tokenizer_json_where_the_config_names_none(section, config_says, minilm_dir, tmp_path):
    """transformers 5 takes tokenizer.json's ``truncation``/``padding`` direction as the side a call
    cuts or pads on where tokenizer_config.json names none (all-MiniLM-L6-v2's names none): a long text
    was cut on the right here and on the left there (an embedding at cosine 0.92 of
    sentence-transformers'). A side the config names wins, in both."""
    directory = tmp_path / "model"
    shutil.copytree(minilm_dir, directory)
    default = {"truncation": {"max_length": 128, "strategy": "LongestFirst", "stride": 0},
               "padding": {"strategy": "BatchLongest", "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"}}[section]
    _edit(directory, lambda values: values.update({section: {**(values[section] or default), "direction": "Left"}}))
    setting = f"{section}_side" if section == "padding" else "truncation_side"
    if config_says:
        _edit(directory, lambda values: values.update({setting: config_says}), "tokenizer_config.json")
    ours = BertTokenizer.from_pretrained(directory)
    theirs = transformers.AutoTokenizer.from_pretrained(str(directory))
    assert getattr(ours, setting) == getattr(theirs, setting) == (config_says or "left")
    text = " ".join(["alpha", "beta", "gamma"] * 40)
    for call in ({"truncation": True, "max_length": 16}, {"padding": True}):
        assert ours([text, "short"], **call)["input_ids"] == theirs([text, "short"], **call)["input_ids"]


def test_a_direction_that_is_neither_side_is_refused(vocab_file, tmp_path):
    directory = _saved_by_transformers(tmp_path / "tok", vocab_file)
    _edit(directory, lambda values: values.update(truncation={"max_length": 8, "direction": "Middle"}))
    with pytest.raises(CheckpointError, match=r'tokenizer.json: truncation.direction = "Middle": not Left or Right'):
        BertTokenizer.from_pretrained(directory)


def test_neither_file_is_a_clear_error(tmp_path, vocab_file):
    directory = _saved_by_transformers(tmp_path / "tok", vocab_file)
    (directory / "tokenizer.json").unlink()
    with pytest.raises(ModelNotFoundError, match="has neither vocab.txt nor tokenizer.json"):
        BertTokenizer.from_pretrained(directory)


def test_tokenizer_json_beside_vocab_txt_is_checked_as_without_it(vocab_file, tmp_path):
    """A pipeline minibert does not compute is refused whether or not vocab.txt is there: the
    `tokenizers` library runs it either way (vocab.txt used to hide it: the file was read for its
    vocabulary alone)."""
    directory = _saved_by_transformers(tmp_path / "tok", vocab_file)
    shutil.copy(vocab_file, directory / "vocab.txt")
    _edit(directory, _break("normalizer"))
    with pytest.raises(CheckpointError, match=r"tokenizer.json: normalizer = .*not BERT's normalizer"):
        BertTokenizer.from_pretrained(directory)


CASED_PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "The", "Cat", "Paris", "Hello", "World", "the", "cat",
                "paris", "hello", "world", "##s", ",", "."]  # fmt: skip


def test_tokenizer_json_settings_count_beside_vocab_txt(minilm_dir, tmp_path):
    """vocab.txt + tokenizer.json, no tokenizer_config.json: AutoTokenizer runs tokenizer.json (no
    config.json), or rebuilds BertTokenizer's defaults (a BERT's config.json), as without vocab.txt;
    `tokenizers` runs the file. minibert read only the file's vocabulary there and guessed the casing
    from vocab.txt: a lowercasing tokenizer.json over a cased vocabulary was read cased ("Hello", where
    every reference reads "hello"), and a cased tokenizer.json beside config.json loaded without a word,
    though the same folder without vocab.txt is refused. Now its settings are read and checked as there."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(CASED_PIECES) + "\n", encoding="utf-8")
    lowering = _saved_by_transformers(tmp_path / "lowering", vocab, expected_size=len(CASED_PIECES))
    (lowering / "tokenizer_config.json").unlink()
    shutil.copy(vocab, lowering / "vocab.txt")
    text = "Hello World, the Cats of Paris"
    expected = tokenizers.Tokenizer.from_file(str(lowering / "tokenizer.json")).encode(text).ids
    assert transformers.AutoTokenizer.from_pretrained(str(lowering))(text)["input_ids"] == expected
    assert BertTokenizer.from_pretrained(lowering)(text)["input_ids"] == expected
    for with_vocab in (False, True):
        directory = _model_folder(tmp_path / f"cased-{with_vocab}", minilm_dir, {"lowercase": False})
        if with_vocab:
            shutil.copy(minilm_dir / "vocab.txt", directory)
        with pytest.raises(CheckpointError, match=r"tokenizer.json and .*config.json .*differ on do_lower_case "):
            BertTokenizer.from_pretrained(directory)


def test_each_file_is_read_once_when_both_are_there(minilm_dir, monkeypatch):
    """A folder with vocab.txt and tokenizer.json (every sentence-transformers repository): vocab.txt
    is read once (it was read twice, ~40 ms a load), and a save still writes its own bytes."""
    import minibert.tokenizer.bert_tokenizer as bert_tokenizer
    import minibert.tokenizer.directory as directory
    import minibert.tokenizer.tokenizer_json as tokenizer_json

    reads = []

    def counting(read, name):
        def wrapper(*args, **kwargs):
            reads.append(name)
            return read(*args, **kwargs)
        return wrapper

    for module in (directory, bert_tokenizer):
        monkeypatch.setattr(module, "load_vocab", counting(module.load_vocab, "vocab.txt"))
    monkeypatch.setattr(directory, "read_tokenizer_json",
                        counting(tokenizer_json.read_tokenizer_json, "tokenizer.json"))  # fmt: skip
    tokenizer = BertTokenizer.from_pretrained(minilm_dir)
    assert sorted(reads) == ["tokenizer.json", "vocab.txt"]
    assert tokenizer._vocab_is_file and len(tokenizer) == 30522


def _edit_config(directory: Path, change) -> Path:
    return _edit(directory, change, "tokenizer_config.json")


CONFIG_DISAGREEMENTS = {  # name: (the setting refused, the tokenizer saved, the config changed)
    "do_lower_case false": ("do_lower_case", {}, lambda c: c.update(do_lower_case=False)),
    "do_lower_case left out (true)": ("do_lower_case", {"do_lower_case": False}, lambda c: c.pop("do_lower_case")),
    "strip_accents false": ("strip_accents", {}, lambda c: c.update(strip_accents=False)),
    "tokenize_chinese_chars false": ("tokenize_chinese_chars", {}, lambda c: c.update(tokenize_chinese_chars=False)),
    "cls_token": ("cls_token", {}, lambda c: c.update(cls_token="[unused1]")),
    "unk_token": ("unk_token", {}, lambda c: c.update(unk_token="[unused2]")),
}


@pytest.mark.parametrize("case", sorted(CONFIG_DISAGREEMENTS))
def test_a_config_that_disagrees_with_tokenizer_json_is_refused(case, vocab_file, tmp_path):
    """transformers 5's BertTokenizer rebuilds the normalizer, the framing and [UNK] from
    tokenizer_config.json and ignores tokenizer.json's; minibert took tokenizer.json's (as the
    `tokenizers` library does), so a folder whose two files disagree gave other ids than
    AutoTokenizer. Such a folder is now refused, naming both files and the setting."""
    name, options, change = CONFIG_DISAGREEMENTS[case]
    directory = _edit_config(_saved_by_transformers(tmp_path / "tok", vocab_file, **options), change)
    text = "Héllo 中文 wörld \u2603 [unused1]"
    file_ids = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json")).encode(text).ids
    assert transformers.AutoTokenizer.from_pretrained(str(directory))(text)["input_ids"] != file_ids
    with pytest.raises(CheckpointError, match=rf"tokenizer.json and .*tokenizer_config.json disagree on {name} "):
        BertTokenizer.from_pretrained(directory)


def test_transformers_save_after_a_new_sep_token_is_refused(vocab_file, tmp_path):
    """transformers' own save after ``add_special_tokens({"sep_token": "[unused6]"})``: tokenizer.json
    frames with [SEP] (102), the config names [unused6], and transformers' reload frames with 7;
    minibert framed with 102. Refused, naming sep_token (minibert's own save of the same tokenizer
    loads, and frames as transformers' reload: test_tokenizer_special_tokens.py)."""
    reference = transformers.BertTokenizer(vocab=str(vocab_file))
    reference.add_special_tokens({"sep_token": "[unused6]"})
    reference.save_pretrained(str(tmp_path / "tok"))
    reloaded = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert reloaded("a", "b")["input_ids"] == [101, 1037, 7, 1038, 7]
    with pytest.raises(CheckpointError, match="disagree on sep_token"):
        BertTokenizer.from_pretrained(tmp_path / "tok")


# tokenizer.json's normalizer changed from BertTokenizer's defaults, and what a tokenizer_config.json
# must say to read the file as it is (the setting named in the refusal).
DEFAULTS_DISAGREEMENTS = {
    "cased": ({"lowercase": False}, "do_lower_case"),
    "accents kept": ({"strip_accents": False}, "strip_accents"),
    "no chinese-character split": ({"handle_chinese_chars": False}, "tokenize_chinese_chars"),
}


def _model_folder(directory: Path, minilm_dir: Path, normalizer: dict) -> Path:
    """all-MiniLM's tokenizer.json (normalizer changed) and config.json (model_type bert), without
    tokenizer_config.json or vocab.txt: AutoTokenizer picks BertTokenizer from config.json."""
    directory.mkdir()
    shutil.copy(minilm_dir / "config.json", directory)
    values = json.loads((minilm_dir / "tokenizer.json").read_text(encoding="utf-8"))
    values["normalizer"].update(normalizer)
    values["padding"] = values["truncation"] = None
    (directory / "tokenizer.json").write_text(json.dumps(values), encoding="utf-8")
    return directory


@pytest.mark.parametrize("case", sorted(DEFAULTS_DISAGREEMENTS))
def test_tokenizer_json_beside_a_bert_config_json_that_transformers_rebuilds_is_refused(case, minilm_dir, tmp_path):
    """tokenizer.json + config.json (model_type bert), no tokenizer_config.json: AutoTokenizer (and so
    SentenceTransformer) builds BertTokenizer from its defaults and ignores tokenizer.json's normalizer;
    `tokenizers` runs the file. minibert ran the file, silently (all-MiniLM's embeddings with a cased
    tokenizer.json: cosine 0.16 with sentence-transformers'). Refused now, naming both files and the
    setting; the tokenizer_config.json the message gives makes all three libraries agree."""
    normalizer, name = DEFAULTS_DISAGREEMENTS[case]
    directory = _model_folder(tmp_path / "model", minilm_dir, normalizer)
    text = "Héllo Wörld from Paris 中文"
    auto = transformers.AutoTokenizer.from_pretrained(str(directory))
    file_ids = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json")).encode(text).ids
    assert type(auto).__name__ == "BertTokenizer" and auto(text)["input_ids"] != file_ids  # the references disagree
    with pytest.raises(CheckpointError, match=rf"tokenizer.json and .*config.json .*differ on {name} ") as error:
        BertTokenizer.from_pretrained(directory)
    config = json.loads(str(error.value).split("save a tokenizer_config.json with ")[1].split(" beside it")[0])
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    auto = transformers.AutoTokenizer.from_pretrained(str(directory))
    assert auto(text)["input_ids"] == file_ids == BertTokenizer.from_pretrained(directory)(text)["input_ids"]


def test_tokenizer_json_beside_a_config_json_loads_where_the_references_agree(minilm_dir, tmp_path):
    """The same layout with tokenizer.json's settings at BertTokenizer's defaults (all-MiniLM's own),
    and with a cased tokenizer.json where config.json names no BERT tokenizer (AutoTokenizer then runs
    the file): loaded, with AutoTokenizer's ids. So does the usual save, with tokenizer_config.json."""
    text = "Héllo Wörld from Paris 中文"
    agreeing = _model_folder(tmp_path / "defaults", minilm_dir, {})
    runs_the_file = _model_folder(tmp_path / "fast", minilm_dir, {"lowercase": False})
    _edit(runs_the_file, lambda c: c.update(tokenizer_class="PreTrainedTokenizerFast"), "config.json")
    saved = tmp_path / "saved"
    transformers.AutoTokenizer.from_pretrained(str(minilm_dir)).save_pretrained(str(saved))
    shutil.copy(minilm_dir / "config.json", saved)
    assert (saved / "tokenizer_config.json").exists() and not (saved / "vocab.txt").exists()
    for directory in (agreeing, runs_the_file, saved):
        expected = transformers.AutoTokenizer.from_pretrained(str(directory))(text)["input_ids"]
        assert BertTokenizer.from_pretrained(directory)(text)["input_ids"] == expected, directory.name
