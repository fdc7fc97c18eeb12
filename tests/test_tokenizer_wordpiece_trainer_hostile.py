"""`minibert vocab` attacked: inputs that are missing, empty, binary, not UTF-8, full of control
characters or of every Unicode category, a corpus smaller than the special tokens, one enormous
line, sizes and limits at their extremes. Each ends in one of two ways: a clear error (exit 1, one
line on stderr naming the file, line or limit, nothing written), or the result tokenizers' trainer
gives (its own normalizer and pre-tokenizer count the same words, and from its numbering minibert
makes the same merges)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from helpers import run_minibert
from minibert.errors import CorpusError, VocabularySizeError
from minibert.tokenizer import BasicTokenizer, train_wordpiece
from minibert.tokenizer import word_counts as word_counts_module
from minibert.tokenizer.word_counts import MAX_RUN_CHARS, count_words
from vocab_reference import SPECIALS, assert_same_merges_as_tokenizers, reference_vocabulary, reference_word_counts

TEXT = "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs! " * 20


def corpus(tmp_path: Path, content: str | bytes, name: str = "corpus.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def vocab(tmp_path: Path, *arguments: str):
    """Run `minibert vocab ARGUMENTS --output tmp_path/out` (the directory made first, holding an old
    vocab.txt that a refused run must leave alone)."""
    output = tmp_path / "out"
    output.mkdir(exist_ok=True)
    (output / "vocab.txt").write_text("old\n")
    result = run_minibert("vocab", *arguments, "--output", str(output))
    result.output = output
    return result


def assert_refused(result, *words: str, code: int = 1) -> None:
    """Exit 1, one line on stderr naming what is wrong, the old output untouched."""
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("minibert: error:"), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert result.stdout == ""
    if code == 1:
        assert sorted(os.listdir(result.output)) == ["vocab.txt"]
        assert (result.output / "vocab.txt").read_text() == "old\n"


def assert_learns_as_tokenizers(path: Path, vocab_size: int = 200, **settings) -> list[str]:
    """The same words counted as tokenizers counts them, and the same merges from its numbering."""
    lowercase = settings.get("lowercase", True)
    ours = count_words([path], BasicTokenizer(do_lower_case=lowercase))
    theirs = reference_word_counts([path], lowercase=lowercase)
    assert ours == theirs, sorted(set(ours.items()) ^ set(theirs.items()))[:10]
    return assert_same_merges_as_tokenizers([path], vocab_size, **settings)


# ----------------------------------------------------------------------------- missing, empty, not text


def test_missing_input_file(tmp_path):
    assert_refused(vocab(tmp_path, "--input", str(tmp_path / "absent.txt")), "input file not found", "absent.txt")


def test_one_missing_file_among_several_is_found_before_any_is_read(tmp_path, monkeypatch):
    good = corpus(tmp_path, TEXT)
    monkeypatch.setattr(word_counts_module, "_count_pieces", lambda *_: pytest.fail("read before all were checked"))
    assert_refused(vocab(tmp_path, "--input", str(good), str(tmp_path / "gone.txt")), "gone.txt")


def test_input_is_a_directory(tmp_path):
    assert_refused(vocab(tmp_path, "--input", str(tmp_path)), "is a directory", str(tmp_path))


def test_empty_file(tmp_path):
    assert_refused(vocab(tmp_path, "--input", str(corpus(tmp_path, ""))), "no words", "corpus.txt")


def test_dev_null(tmp_path):
    assert_refused(vocab(tmp_path, "--input", os.devnull), "no words", os.devnull)


def test_only_whitespace_and_control_characters(tmp_path):
    path = corpus(tmp_path, " \n\t\r\n\x00\x01\x7f\x85\u200b\u200d\ufeff\u2028\u3000\n" * 100)
    assert_refused(vocab(tmp_path, "--input", str(path)), "no words")
    assert reference_word_counts([path]) == {}  # tokenizers finds no words either


def test_invalid_utf8_names_the_file_and_line(tmp_path):
    path = corpus(tmp_path, b"fine\nstill fine\nbroken \xff here\n")
    assert_refused(vocab(tmp_path, "--input", str(path)), "corpus.txt, line 3", "not UTF-8")


def test_invalid_utf8_in_a_later_block_names_the_right_line(tmp_path, monkeypatch):
    monkeypatch.setattr(word_counts_module, "BLOCK_BYTES", 64)
    path = corpus(tmp_path, ("a line of text\n" * 40).encode() + "café ".encode() + b"\xc3(\n")
    with pytest.raises(CorpusError, match=r"corpus.txt, line 41: not UTF-8"):
        count_words([path], BasicTokenizer())


def test_a_character_cut_between_blocks_is_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(word_counts_module, "BLOCK_BYTES", 3)
    path = corpus(tmp_path, "€ 𝄞 ü " * 10)
    assert count_words([path], BasicTokenizer(do_lower_case=False)) == {"€": 10, "𝄞": 10, "ü": 10}


def test_binary_data(tmp_path):
    path = corpus(tmp_path, os.urandom(200_000), "random.bin")
    assert_refused(vocab(tmp_path, "--input", str(path)), "random.bin, line", "not UTF-8")


def test_an_executable(tmp_path):
    assert_refused(vocab(tmp_path, "--input", sys.executable), sys.executable, "is not text", "byte offset")


def test_utf16_text(tmp_path):
    path = corpus(tmp_path, "hello world\n".encode("utf-16"))
    assert_refused(vocab(tmp_path, "--input", str(path)), "is not text", "byte offset 3", "UTF-16")


def test_encoded_surrogates_are_not_utf8(tmp_path):
    path = corpus(tmp_path, b"ok\n\xed\xa0\x80 lone surrogate\n")
    assert_refused(vocab(tmp_path, "--input", str(path)), "line 2", "not UTF-8")


# ----------------------------------------------------------------------------- strange text, right result


def test_control_characters_inside_words(tmp_path):
    """Every C0 and C1 control character and DEL, inside words, at their ends and alone: deleted
    (tab, newline, carriage return: whitespace), as tokenizers does."""
    controls = [chr(code) for code in [*range(0x20), 0x7F, *range(0x80, 0xA0)]]
    path = corpus(tmp_path, "".join(f"wo{c}rd {c}start end{c} {c} " for c in controls) + TEXT)
    assert_learns_as_tokenizers(path, 120)


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_every_unicode_category(tmp_path, lowercase):
    """Five characters of every general category (surrogates excepted: UTF-8 cannot hold them;
    unassigned: from a plane no Unicode version assigns), alone, inside words and next to
    punctuation."""
    by_category: dict[str, list[str]] = {}
    for code in range(0x110000):
        category = unicodedata.category(chr(code))
        if category not in ("Cs", "Cn") and len(by_category.setdefault(category, [])) < 5:
            by_category[category].append(chr(code))
    by_category["Cn"] = [chr(0x50000 + index) for index in range(5)]
    assert len(by_category) == 29  # all of Unicode's categories but Cs
    text = "".join(f"{c} a{c}b {c}{c}x ({c}) " for chars in by_category.values() for c in chars) + TEXT
    assert_learns_as_tokenizers(corpus(tmp_path, text), 400, lowercase=lowercase, min_frequency=1)


def test_crlf_line_ends_and_a_byte_order_mark(tmp_path):
    assert_learns_as_tokenizers(corpus(tmp_path, "\ufeff" + TEXT.replace(". ", ".\r\n")), 80)


def test_accents_combining_marks_and_emoji(tmp_path):
    """Accents stripped (uncased) or kept (cased), marks in non-canonical order, ZWJ sequences,
    flags, skin tones, Chinese characters."""
    text = "Crème brûlée à Zürich. e\u0301\u0323 e\u0323\u0301 ḍ̇ 👩‍👩‍👧 🇫🇷 👍🏽 中文字 " * 30 + TEXT
    for lowercase in (True, False):
        assert_learns_as_tokenizers(corpus(tmp_path, text), 150, lowercase=lowercase)


def test_text_that_spells_the_special_tokens(tmp_path):
    """ "[CLS]" in the corpus is text: the words [, cls and ] (tokenizers' trainer does not match
    special tokens in the text it counts)."""
    assert_learns_as_tokenizers(corpus(tmp_path, "[CLS] hello [SEP] [MASK] [UNK] [PAD] " * 10), 60)


def test_a_corpus_smaller_than_the_special_tokens(tmp_path):
    path = corpus(tmp_path, "a")
    assert train_wordpiece([path]) == [*SPECIALS, "a"] == reference_vocabulary([path], 30000)
    result = vocab(tmp_path, "--input", str(path))
    assert result.returncode == 0, result.stderr
    assert (result.output / "vocab.txt").read_text() == "".join(f"{piece}\n" for piece in [*SPECIALS, "a"])
    import minibert

    assert minibert.BertTokenizer.from_pretrained(result.output).tokenize("a b") == ["a", "[UNK]"]


def test_one_word_repeated_many_times(tmp_path):
    assert_learns_as_tokenizers(corpus(tmp_path, "the " * 100_000), 100)


def test_a_long_word(tmp_path):
    """A 20,000-character word (no whitespace, no punctuation): merged like any other."""
    word = "".join("abcdefghij"[(index * 7 + index // 10) % 10] for index in range(20_000))
    assert_learns_as_tokenizers(corpus(tmp_path, f"{word} {TEXT}"), 300)


def test_a_run_without_whitespace_longer_than_the_limit(tmp_path):
    path = corpus(tmp_path, "first line\n" + "x" * (MAX_RUN_CHARS + 1) + "\n")
    assert_refused(vocab(tmp_path, "--input", str(path)), "line 2", f"{MAX_RUN_CHARS:,} characters")


def test_a_run_longer_than_the_limit_across_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(word_counts_module, "MAX_RUN_CHARS", 100)
    monkeypatch.setattr(word_counts_module, "BLOCK_BYTES", 16)
    path = corpus(tmp_path, "a b\nc d\n" + "y" * 101 + " z\n")
    with pytest.raises(CorpusError, match="line 3: a word of more than 100 characters"):
        count_words([path], BasicTokenizer())


# Whitespace beyond ASCII (each category Zs or Zl/Zp: str.split() and tokenizers split there, and
# BERT's cleaning keeps it): it ends a run as " " does, and the refusal does not depend on the blocks.
UNICODE_SPACES = ["\u3000", "\xa0", "\u2028", "\u2029", "\u2009", "\u1680", "\u202f", "\u205f"]


@pytest.mark.parametrize("space", UNICODE_SPACES + [" "], ids=lambda space: f"U+{ord(space):04X}")
def test_unicode_whitespace_ends_a_run_wherever_the_blocks_fall(tmp_path, monkeypatch, space):
    monkeypatch.setattr(word_counts_module, "MAX_RUN_CHARS", 8)
    words = ["日本語", "abcdefgh", "éa\x0bb", "x", "Ünï", "zz,yy"] * 7  # "éa\x0bb": 4 characters once \x0b is deleted
    allowed = corpus(tmp_path, "first line\n" + space.join(words) + "\n", "allowed.txt")
    refused = corpus(tmp_path, "first line\n" + space.join(words + ["y" * 9] + words) + "\n", "refused.txt")
    for block_bytes in (1, 2, 3, 5, 7, 64, 1 << 20):
        monkeypatch.setattr(word_counts_module, "BLOCK_BYTES", block_bytes)
        assert count_words([allowed], BasicTokenizer()) == reference_word_counts([allowed]), block_bytes
        with pytest.raises(CorpusError, match="refused.txt, line 2: a word of more than 8 characters"):
            count_words([refused], BasicTokenizer())


def test_a_megabyte_line_of_words_between_ideographic_spaces(tmp_path):
    """1.5 million characters on one line, in words of two separated by U+3000 (as Japanese text may
    be): learned as tokenizers learns it, not refused as a run without whitespace."""
    line = "\u3000".join(("東京", "大阪", "言葉", "ab")[index % 4] for index in range(500_000))
    path = corpus(tmp_path, line + "\n")
    assert len(line) > MAX_RUN_CHARS
    assert count_words([path], BasicTokenizer()) == reference_word_counts([path])
    assert train_wordpiece([path], 100) == reference_vocabulary([path], 100)


JOINED = {"Chinese": "中文", "Japanese": "日本語と", "hyphens": "a-b", "commas": "x,", "CJK stops": "。"}


@pytest.mark.parametrize("joined", JOINED.values(), ids=JOINED.keys())
def test_a_long_run_that_bert_splits_into_short_words_is_learned(tmp_path, monkeypatch, joined):
    """A line of Chinese (one article per line) has no whitespace: its million characters were refused
    as "a run the learner holds as one word". BERT makes every ideograph, and every punctuation mark,
    a word of its own, so no long word exists: tokenizers learns from it, and so does minibert now,
    wherever the blocks fall. Only a *word* over the limit is refused (the "yy..." after it)."""
    monkeypatch.setattr(word_counts_module, "MAX_RUN_CHARS", 20)
    run = joined * (60 // len(joined))
    path = corpus(tmp_path, f"first line\n{run}\n{run}b{run}\n")
    refused = corpus(tmp_path, f"first line\n{run}\n{run}{'y' * 21}{run}\n", "refused.txt")
    for block_bytes in (1, 7, 64, 1 << 20):
        monkeypatch.setattr(word_counts_module, "BLOCK_BYTES", block_bytes)
        assert count_words([path], BasicTokenizer()) == reference_word_counts([path]), block_bytes
        with pytest.raises(CorpusError, match="refused.txt, line 3: a word of more than 20 characters"):
            count_words([refused], BasicTokenizer())


def test_a_million_characters_of_chinese_on_one_line_learn_as_tokenizers(tmp_path):
    """The report's case at the real limit: 1,100,000 characters of Chinese and its punctuation on one line."""
    import random

    rng = random.Random(0)
    characters = ("的一是不了人我在有他这为之大来以个中上们到说国和地"
                  "也子时道出而要于就下得可你年生自会那后能对着事其里所去。，")  # fmt: skip
    path = corpus(tmp_path, "".join(rng.choice(characters) for _ in range(1_100_000)) + "\n")
    result = vocab(tmp_path, "--input", str(path), "--vocab-size", "500")
    assert result.returncode == 0, result.stderr
    pieces = (result.output / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert pieces == reference_vocabulary([path], 500)


# ----------------------------------------------------------------------------- which files


@pytest.mark.parametrize("files", [b"corpus.txt", [b"corpus.txt"], [0], 3], ids=["bytes", "[bytes]", "[0]", "3"])
def test_a_path_that_is_not_str_or_path_is_a_type_error_as_in_tokenizers(tmp_path, monkeypatch, files):
    """train_wordpiece(b"fort.txt") took each byte as a file descriptor ("cannot read input file 102:
    Bad file descriptor"; a small one would read stdin). tokenizers' train refuses it with a TypeError."""
    from tokenizers import BertWordPieceTokenizer

    monkeypatch.chdir(tmp_path)
    corpus(tmp_path, TEXT)
    with pytest.raises(TypeError):
        BertWordPieceTokenizer().train(files, vocab_size=60, show_progress=False)
    with pytest.raises(TypeError, match="files must be"):
        train_wordpiece(files, 60)


def test_one_path_is_one_file_as_tokenizers_takes_it(tmp_path, monkeypatch):
    """tokenizers' train(files) takes one path as a list of one; so does train_wordpiece (a str was
    read as a list of its characters: "input c is a directory", where a folder c/ exists)."""
    monkeypatch.chdir(tmp_path)
    path = corpus(tmp_path, TEXT)
    (tmp_path / "c").mkdir()
    expected = train_wordpiece(["corpus.txt"], 60, min_frequency=1)
    assert train_wordpiece("corpus.txt", 60, min_frequency=1) == expected
    assert train_wordpiece(Path("corpus.txt"), 60, min_frequency=1) == expected
    assert train_wordpiece(path, 60, min_frequency=1) == expected


@pytest.mark.parametrize("files", [[], ()], ids=["list", "tuple"])
def test_no_input_file_is_a_clear_error(files):
    with pytest.raises(ValueError, match="no input file given"):
        train_wordpiece(files, 100)


def test_input_given_twice_reads_the_files_of_both(tmp_path):
    """`--input a --input b` learns from a and b, as `--input a b` does (argparse kept only b)."""
    first = corpus(tmp_path, "alpha beta alpha beta\n", "a1.txt")
    second = corpus(tmp_path, "gamma delta gamma delta\n", "a2.txt")
    result = vocab(tmp_path, "--input", str(first), "--input", str(second), "--vocab-size", "100")
    assert result.returncode == 0, result.stderr
    written = (result.output / "vocab.txt").read_text().splitlines()
    assert {"alpha", "beta", "gamma", "delta"} <= set(written)
    assert written == train_wordpiece([first, second], 100)


# ----------------------------------------------------------------------------- sizes and limits


def test_vocab_size_tiny(tmp_path):
    result = vocab(tmp_path, "--input", str(corpus(tmp_path, TEXT)), "--vocab-size", "1")
    assert_refused(result, "--vocab-size 1 is below the 5 special tokens (--special-tokens)", code=2)  # (a flag)
    result = vocab(tmp_path, "--input", str(corpus(tmp_path, TEXT)), "--vocab-size", "6")
    assert_refused(result, "vocab_size 6 is below the", "pieces every vocabulary learned from this corpus holds")


@pytest.mark.parametrize("value", ["0", "-5", "ten", "1e3", ""])
def test_vocab_size_not_a_positive_integer_is_a_usage_error(tmp_path, value):
    assert_refused(vocab(tmp_path, "--input", str(corpus(tmp_path, TEXT)), "--vocab-size", value), "--vocab-size",
                   code=2)  # fmt: skip


def test_vocab_size_just_below_and_at_the_base(tmp_path):
    """The base (special tokens, alphabet, ## forms) is what tokenizers would make even when asked
    for fewer: minibert refuses one less, and at the base makes no merge, as tokenizers."""
    path = corpus(tmp_path, TEXT)
    base = len(reference_vocabulary([path], 1))  # tokenizers' answer to "1": the base, too big
    with pytest.raises(VocabularySizeError, match=f"below the {base} pieces"):
        train_wordpiece([path], base - 1)
    assert len(assert_learns_as_tokenizers(path, base)) == base


def test_vocab_size_huge(tmp_path):
    """A size no corpus fills: merging stops when no pair occurs min_frequency times, as tokenizers
    stops. (tokenizers itself aborts the process at 10**9: it reserves memory for vocab_size pieces;
    it is compared at 10**6.)"""
    path = corpus(tmp_path, TEXT)
    pieces = assert_learns_as_tokenizers(path, 10**6)
    assert len(pieces) < 200
    assert train_wordpiece([path], 10**18)[: len(pieces)] == train_wordpiece([path], 10**6) == \
        train_wordpiece([path], len(pieces))  # fmt: skip


@pytest.mark.parametrize("min_frequency", [0, 1, 10**12])
def test_min_frequency_at_its_limits(tmp_path, min_frequency):
    assert_learns_as_tokenizers(corpus(tmp_path, TEXT + "rare words once"), 150, min_frequency=min_frequency)


@pytest.mark.parametrize("limit_alphabet", [0, 1, 3])
def test_limit_alphabet_at_its_limits(tmp_path, limit_alphabet):
    """An alphabet of no or few characters: the rest are dropped from the words (tokenizers' rule).
    (Those that remain have distinct counts: no tie decides which.)"""
    path = corpus(tmp_path, "aaaa bbb cc d " * 5 + "ab ba abc")
    assert_learns_as_tokenizers(path, 60, limit_alphabet=limit_alphabet, min_frequency=1)
    assert train_wordpiece([path], 60, limit_alphabet=limit_alphabet, min_frequency=1)[5 : 5 + limit_alphabet] == \
        sorted("abcd"[:limit_alphabet])  # fmt: skip


def test_duplicate_special_tokens_count_once(tmp_path):
    path = corpus(tmp_path, TEXT)
    specials = ["[PAD]", "[UNK]", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    pieces = assert_learns_as_tokenizers(path, 100, special_tokens=specials)
    assert pieces[:5] == SPECIALS
    result = vocab(tmp_path, "--input", str(path), "--vocab-size", "100", "--special-tokens", *specials)
    written = (result.output / "vocab.txt").read_text().splitlines()
    assert result.returncode == 0 and written == train_wordpiece([path], 100, special_tokens=specials)


def test_special_tokens_without_cls(tmp_path):
    result = vocab(tmp_path, "--input", str(corpus(tmp_path, TEXT)), "--special-tokens", "[PAD]", "[UNK]", "[SEP]")
    assert_refused(result, "--special-tokens must include [CLS]", code=2)


@pytest.mark.parametrize("token", ["two words", "", "tab\there", "new\nline"])
def test_special_token_with_whitespace_or_empty(tmp_path, token):
    result = vocab(tmp_path, "--input", str(corpus(tmp_path, TEXT)), "--special-tokens", *SPECIALS, token)
    assert_refused(result, "--special-tokens: each must be a non-empty string without whitespace", code=2)


# ----------------------------------------------------------------------------- the output


def test_output_directory_that_does_not_exist(tmp_path):
    missing = tmp_path / "not" / "there"
    result = run_minibert("vocab", "--input", str(corpus(tmp_path, TEXT)), "--output", str(missing))
    assert result.returncode == 1 and "does not exist" in result.stderr and str(missing) in result.stderr
    assert not (tmp_path / "not").exists()


def test_output_that_is_a_file(tmp_path):
    result = run_minibert("vocab", "--input", str(corpus(tmp_path, TEXT)), "--output", str(corpus(tmp_path, "x", "f")))
    assert result.returncode == 1 and "is a file, not a directory" in result.stderr


def assert_one_line(result, words: str) -> None:
    assert result.returncode == 1 and result.stdout == "", (result.returncode, result.stderr)
    assert result.stderr.splitlines() == [result.stderr.strip()] and words in result.stderr, result.stderr


@pytest.mark.parametrize("name", ["vocab.txt", "tokenizer_config.json"])
def test_an_input_that_the_output_would_overwrite_is_refused_before_learning(tmp_path, monkeypatch, name):
    # A second `minibert vocab --input gd/*.txt --output gd` picked up the first run's vocab.txt as text,
    # learned another vocabulary from it and replaced it; a corpus named vocab.txt was destroyed.
    from minibert.tokenizer import wordpiece_trainer

    def learned(*arguments, **keywords):
        raise AssertionError("the learning ran")

    monkeypatch.setattr(wordpiece_trainer, "train_wordpiece", learned)
    output = tmp_path / "out"
    output.mkdir()
    text = corpus(output, TEXT, name)
    for given in (text, output / "." / name):
        result = run_minibert("vocab", "--input", str(corpus(tmp_path, TEXT)), str(given), "--output", str(output))
        assert_one_line(result, f"--output {output} would overwrite the input file {given}")
        assert text.read_text() == TEXT and sorted(os.listdir(output)) == [name]


def test_an_output_file_that_is_a_fifo_is_refused_and_kept(tmp_path):
    output = tmp_path / "out"
    output.mkdir()
    os.mkfifo(output / "tokenizer_config.json")
    result = run_minibert("vocab", "--input", str(corpus(tmp_path, TEXT)), "--output", str(output))
    assert_one_line(result, f"cannot write {output / 'tokenizer_config.json'}: it is a FIFO")
    assert os.listdir(output) == ["tokenizer_config.json"]
    assert stat.S_ISFIFO(os.lstat(output / "tokenizer_config.json").st_mode)


def test_output_under_a_file_says_the_file_is_not_a_folder(tmp_path):
    path = corpus(tmp_path, TEXT)
    result = run_minibert("vocab", "--input", str(path), "--output", str(path / "out"))
    assert_one_line(result, f"output directory {path / 'out'} does not exist ({path} is a file, not a directory)")


def test_interrupted_run_writes_nothing(tmp_path, monkeypatch):
    from minibert.tokenizer import wordpiece_trainer

    def interrupted(*arguments):
        raise KeyboardInterrupt

    monkeypatch.setattr(wordpiece_trainer, "merge_pairs", interrupted)
    result = vocab(tmp_path, "--input", str(corpus(tmp_path, TEXT)))
    assert result.returncode == 130 and "no output file was written" in result.stderr
    assert sorted(os.listdir(result.output)) == ["vocab.txt"] and (result.output / "vocab.txt").read_text() == "old\n"


def test_progress_only_on_a_terminal(tmp_path):
    import contextlib
    import io

    from minibert.apps import cli

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    path = corpus(tmp_path, TEXT)
    quiet = vocab(tmp_path, "--input", str(path), "--vocab-size", "60")
    assert quiet.returncode == 0 and "\r" not in quiet.stderr, quiet.stderr  # the summary alone
    assert re.fullmatch(r"minibert: \d+ pieces: .*vocab\.txt, .*tokenizer_config\.json\n", quiet.stderr), quiet.stderr
    terminal = Terminal()
    with contextlib.redirect_stderr(terminal), contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["vocab", "--input", str(path), "--vocab-size", "60", "--output", str(tmp_path / "out")]) == 0
    shown = terminal.getvalue()
    assert shown.startswith("\rminibert vocab: counting words: 0 of 0 MB") and shown.endswith("\n"), shown


# ----------------------------------------------------------------------------- one enormous line


def peak_memory_counting(path: Path) -> tuple[int, dict]:
    """Count the words of ``path`` in a fresh process: how far its peak resident memory (VmHWM, bytes;
    not ru_maxrss, which a child inherits from the parent that forked it) rose while counting, and
    the ten most common words."""
    script = (
        "import json, re, sys; from minibert.tokenizer import BasicTokenizer; "
        "from minibert.tokenizer.word_counts import count_words; "
        "peak = lambda: int(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)); "
        "before = peak(); counts = count_words([sys.argv[1]], BasicTokenizer()); "
        "print(json.dumps([peak() - before, counts.most_common(10)]))"
    )
    source = str(Path(__import__("minibert").__file__).parents[1])
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, check=True, text=True,
                          env={**os.environ, "PYTHONPATH": source})  # fmt: skip
    grown_kib, common = json.loads(done.stdout)
    return grown_kib * 1024, dict(common)


def one_line_file(path: Path, megabytes: int) -> Counter:
    """A file of ``megabytes`` MB in lines of 6.3 MB (a longer run without a line break is not text:
    formats/plain_text.py), and its word counts."""
    unit = "the quick brown fox jumps over the lazy dog, again and again; "
    repeats = megabytes * 1_000_000 // len(unit)
    with open(path, "w", encoding="utf-8") as handle:
        for number in range(repeats // 10_000):
            handle.write(unit * 10_000 + ("\n" if number % 10 == 9 else ""))
    expected = Counter(BasicTokenizer().tokenize(unit))
    return Counter({word: count * (repeats // 10_000 * 10_000) for word, count in expected.items()})


@pytest.mark.parametrize("megabytes", [24, pytest.param(200, marks=pytest.mark.slow)])
def test_megabytes_in_lines_of_6_in_bounded_memory(tmp_path, megabytes):
    path = tmp_path / "one-line.txt"
    expected = one_line_file(path, megabytes)
    grown, common = peak_memory_counting(path)
    print(f"\n{path.stat().st_size / 1e6:.0f} MB in lines of 6 MB: peak memory grew by {grown / 1e6:.0f} MB")
    assert common == dict(expected.most_common(10))
    assert grown < 32e6  # a block of 1 MiB split into pieces (Python strings: ~20x its bytes), not the line
