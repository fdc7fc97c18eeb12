"""A vocabulary learned by minibert (``train_wordpiece`` + ``save_vocabulary``, what ``minibert vocab``
writes) from text holding every Unicode category is read the same way by minibert's BertTokenizer
and transformers' BertTokenizerFast (the Rust tokenizers): the same ids for every line, no exception.

(Until tokenizer/tokenizers_unicode.py, minibert asked Python's unicodedata, a newer Unicode than
tokenizers' tables, and ~1 line in 20 differed. Every character alone is compared in
tests/test_tokenizer_unicode_tables.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from unicode_text import every_category_lines

from minibert.tokenizer import BasicTokenizer, BertTokenizer, save_vocabulary, train_wordpiece

transformers = pytest.importorskip("transformers")


def _learned(tmp_path, lines, lowercase):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines * 2) + "\n", encoding="utf-8")
    # The whole alphabet is kept (no [UNK] hides a character) with its ## forms, and at least 1,000 merges.
    alphabet = {char for line in lines for word in BasicTokenizer(lowercase).tokenize(line) for char in word}
    vocab_size = max(9000, 5 + 2 * len(alphabet) + 1000)
    pieces = train_wordpiece([corpus], vocab_size, min_frequency=1, limit_alphabet=None, lowercase=lowercase)
    save_vocabulary(tmp_path, pieces, lowercase=lowercase)
    return BertTokenizer.from_pretrained(str(tmp_path)), transformers.BertTokenizerFast.from_pretrained(str(tmp_path))


def _compare(tmp_path, lines, lowercase) -> None:
    ours, reference = _learned(tmp_path, lines, lowercase)
    differing = [
        (line, reference.convert_ids_to_tokens(want), ours.convert_ids_to_tokens(got))
        for line, want, got in zip(lines, reference(lines)["input_ids"], ours(lines)["input_ids"], strict=True)
        if want != got
    ]
    assert not differing, f"{len(differing)} of {len(lines)} lines differ; the first: {differing[0]}"


@pytest.mark.parametrize("lowercase", [True, False])
def test_a_learned_vocabulary_reads_the_same_in_both_tokenizers(tmp_path, lowercase):
    lines = every_category_lines(step=211)
    _compare(tmp_path, lines, lowercase)


@pytest.mark.slow
def test_a_learned_vocabulary_reads_the_same_on_every_code_point(tmp_path):
    lines = every_category_lines(step=3)
    _compare(tmp_path, lines, True)


def test_a_vocabulary_saved_over_a_transformers_5_folder_removes_its_tokenizer_json(tmp_path):
    """``minibert vocab`` into a folder where transformers 5 saved a tokenizer (tokenizer.json, which
    transformers reads before vocab.txt): that file goes, so transformers reads the new vocabulary."""
    lines = ["the cat sat on the mat", "Zebrafish swim in schools", "a cat and a zebrafish"] * 20
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pieces = train_wordpiece([corpus], 120, min_frequency=1, limit_alphabet=None, lowercase=False)
    old = tmp_path / "old-vocab.txt"
    old.write_text("".join(piece + "\n" for piece in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat"]))
    folder = tmp_path / "folder"
    transformers.BertTokenizerFast(str(old)).save_pretrained(str(folder))
    assert (folder / "tokenizer.json").exists()
    save_vocabulary(folder, pieces, lowercase=False)
    assert not (folder / "tokenizer.json").exists()
    ours = BertTokenizer.from_pretrained(str(folder))
    reference = transformers.BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=False)
    assert transformers.AutoTokenizer.from_pretrained(str(folder))(lines)["input_ids"] == \
        reference(lines)["input_ids"] == ours(lines)["input_ids"]  # fmt: skip


def test_a_vocabulary_saved_over_an_older_save_takes_nothing_from_it(tmp_path, minilm_dir):
    """``minibert vocab --special-tokens [PAD] [UNK] [CLS] [SEP]`` into a folder holding a tokenizer
    saved before left its special_tokens_map.json (and an added_tokens.json), which transformers
    reads where the config has no added_tokens_decoder: the old map's [MASK] replaced the config's
    null, and transformers added [MASK] past the end of vocab.txt (65 ids for 64 pieces). Now they are
    removed with the files written, and the config lists the roles in added_tokens_decoder, so
    neither library reads such a file even if one is put back."""
    folder = tmp_path / "folder"
    BertTokenizer.from_pretrained(minilm_dir).save_pretrained(folder)
    (folder / "added_tokens.json").write_text('{"zebrafish": 30522}')
    lines = ["the cat sat on the mat", "Zebrafish swim in schools", "a cat and a zebrafish"] * 20
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pieces = train_wordpiece([corpus], 64, min_frequency=1, limit_alphabet=None,
                             special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])  # fmt: skip
    save_vocabulary(folder, pieces)
    assert sorted(path.name for path in folder.iterdir()) == ["tokenizer_config.json", "vocab.txt"]
    for left in (None, "special_tokens_map.json"):
        if left:
            (folder / left).write_text('{"mask_token": "[MASK]", "pad_token": "[UNK]"}')
        ours, theirs = BertTokenizer.from_pretrained(folder), transformers.AutoTokenizer.from_pretrained(str(folder))
        assert len(theirs) == len(ours) == len(pieces) and theirs.mask_token is ours.mask_token is None
        assert theirs.pad_token == ours.pad_token == "[PAD]"
        text = "a zebrafish [MASK] cat [PAD]"
        assert theirs(text)["input_ids"] == ours(text)["input_ids"]


@pytest.mark.parametrize("stale", ["tokenizer.json", "special_tokens_map.json", "added_tokens.json"])
def test_a_vocabulary_save_that_fails_puts_the_removed_files_back(tmp_path, monkeypatch, stale):
    """The removal is part of the save (formats/file_sets.py): interrupted after removing any of the
    stale files, every file, the removed ones included, is what it was."""
    folder = tmp_path / "folder"
    folder.mkdir()
    old = {"vocab.txt": "old\n", "tokenizer_config.json": "{}", "tokenizer.json": '{"old": 1}',
           "special_tokens_map.json": '{"mask_token": "[MASK]"}', "added_tokens.json": '{"x": 6}'}  # fmt: skip
    for name, text in old.items():
        (folder / name).write_text(text)
    unlink = Path.unlink

    def interrupted(path, missing_ok=False):
        unlink(path, missing_ok=missing_ok)
        if path.name == stale:
            raise KeyboardInterrupt

    monkeypatch.setattr(Path, "unlink", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_vocabulary(folder, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "new"])
    monkeypatch.undo()
    assert {path.name: path.read_text() for path in folder.iterdir()} == old


def test_a_vocabulary_without_pad_and_mask_has_no_id_past_its_end_in_either_library(tmp_path):
    """Special tokens without [PAD] and [MASK] (`minibert vocab --special-tokens [UNK] [CLS] [SEP]`):
    tokenizer_config.json says those roles are none (null), as transformers itself saves them, so
    transformers adds no [PAD]/[MASK] of its own past the end of vocab.txt (it did: ids 33 and 34 of a
    33-piece vocabulary) and gives minibert's ids; saved again by minibert, the same."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello world hello world\nthe cat the cat\n", encoding="utf-8")
    pieces = train_wordpiece([corpus], 100, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    save_vocabulary(tmp_path, pieces)
    text = "hello [MASK] world [PAD]"
    for folder in (tmp_path, tmp_path / "saved-again"):
        ours = BertTokenizer.from_pretrained(str(folder))
        theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
        assert len(theirs) == len(ours) == len(pieces)
        assert theirs.pad_token is None and theirs.mask_token is None
        assert theirs(text)["input_ids"] == ours(text)["input_ids"]
        assert max(theirs(text)["input_ids"]) < len(pieces)
        ours.save_pretrained(str(tmp_path / "saved-again"))


EXTRA_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<e1>", "</e1>", "[unused0]", "[E2]"]
SPECIAL_TEXTS = ["a <e1> cat [unused0] [MASK] mat", "the<e1>cat</e1>sat [E2][E2]", "<E1> [UNUSED0] [e2] <e1",
                 "[unused0]", "caf\u00e9 <e1>\u00c9t\u00e9</e1> \u4e2d\u6587 [SEP] [CLS]"]  # fmt: skip


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_special_tokens_beyond_the_roles_stay_whole_as_in_tokenizers(tmp_path, lowercase):
    """tokenizers' trainer adds every special token it is given as a special token (kept whole,
    left out by decode(skip_special_tokens=True)); the folder save_vocabulary wrote listed only the
    five roles, so minibert and transformers split "<e1>" into < e ##1 > and a model trained with
    that vocabulary never saw its id. Now the folder holds them as tokenizers' tokenizer does: its
    pieces saved by save_vocabulary tokenize and decode in transformers and minibert as in tokenizers."""
    from tokenizers import BertWordPieceTokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat. Caf\u00e9 \u00e9t\u00e9 \u4e2d\u6587!\n" * 40, encoding="utf-8")
    trained = BertWordPieceTokenizer(lowercase=lowercase)
    trained.train([str(corpus)], vocab_size=120, special_tokens=EXTRA_SPECIALS, show_progress=False)
    pieces = sorted(trained.get_vocab(), key=trained.get_vocab().get)
    save_vocabulary(tmp_path, pieces, lowercase=lowercase, special_tokens=EXTRA_SPECIALS)
    for tokenizer in (transformers.AutoTokenizer.from_pretrained(str(tmp_path)),
                      BertTokenizer.from_pretrained(str(tmp_path))):  # fmt: skip
        for text in SPECIAL_TEXTS:
            want = trained.encode(text)  # (no [CLS] ... [SEP] after train: none on ours either)
            got = tokenizer(text, add_special_tokens=False)["input_ids"]
            assert (tokenizer.convert_ids_to_tokens(got), got) == (want.tokens, want.ids), (type(tokenizer), text)
            assert tokenizer.decode(got, skip_special_tokens=True) == trained.decode(want.ids), (type(tokenizer), text)


def test_minibert_vocab_keeps_its_special_tokens_whole(tmp_path):
    from helpers import run_minibert

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b the cat sat on the mat\n" * 30, encoding="utf-8")
    (tmp_path / "v").mkdir()
    result = run_minibert("vocab", "--input", str(corpus), "--output", str(tmp_path / "v"), "--vocab-size", "80",
                          "--special-tokens", *EXTRA_SPECIALS)  # fmt: skip
    assert result.returncode == 0, result.stderr
    for tokenizer in (transformers.AutoTokenizer.from_pretrained(str(tmp_path / "v")),
                      BertTokenizer.from_pretrained(str(tmp_path / "v"))):  # fmt: skip
        assert tokenizer.tokenize("a <e1> b [unused0]") == ["a", "<e1>", "b", "[unused0]"]
        assert tokenizer.convert_tokens_to_ids(["<e1>", "[unused0]"]) == [5, 7]
