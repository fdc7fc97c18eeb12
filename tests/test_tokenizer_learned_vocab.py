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
