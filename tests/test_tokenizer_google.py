"""tokenizer/google.py (``google_tokenizer``, what ``pretraining-data`` tokenizes with) against Google's
own tokenization.py (bert-tensorflow 1.0.4's FullTokenizer, run in the TensorFlow venv of
tf_reference.py), on text holding every Unicode general category.

The vocabulary holds every character of the text (alone and as a ``##`` piece), so the pieces show
what became of each character; Google's BasicTokenizer words are compared too. The default run
takes every 211th code point and the first and last five of each category (29 categories: all but
the lone surrogates, which UTF-8 cannot carry); the slow run takes every code point.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from spread import cores, split, spread
from unicode_text import SPECIAL_WORDS, categories, every_category_lines, vocabulary_of

from minibert.tokenizer.google import GoogleBasicTokenizer
from minibert.training.pretraining_data.full_tokenizer import PretrainingVocabulary
from tf_reference import run_reference


def _write_vocab(directory, lines) -> str:
    path = directory / "vocab.txt"
    path.write_text("\n".join(vocabulary_of(lines)) + "\n", encoding="utf-8")
    return str(path)


def _compare_with_google(lines, directory, preserve_unused=(False, True)) -> None:
    """Google's pieces (and words) of ``lines`` against minibert's, each casing with and without
    ``preserve_unused_tokens``: Google's side in one TensorFlow process per core, minibert's spread
    over the cores too when there are many lines (a process costs seconds to start)."""
    parts = cores() if len(lines) > 10_000 else 1
    vocab_file = _write_vocab(directory, lines)
    cases = [(lower, preserve) for lower in (True, False) for preserve in preserve_unused]
    jobs = [{"mode": "tokenize", "vocab_file": vocab_file, "do_lower_case": lower, "preserve_unused_tokens": preserve,
             "lines": lines, "name": f"{lower}-{preserve}"} for lower, preserve in cases]  # fmt: skip
    groups = split(jobs, parts)
    with ThreadPoolExecutor() as pool:  # each thread waits on its own TensorFlow process
        answers = [answer for results in pool.map(_run_google, groups) for answer in results]
    by_name = {job["name"]: answer for job, answer in zip([job for group in groups for job in group], answers)}
    checks = []  # each part loads the vocabulary (seconds at every code point): one part a case fills the cores
    for lower, preserve in cases:
        google = by_name[f"{lower}-{preserve}"]
        rows = list(zip(lines, google["words"], google["pieces"], strict=True))
        checks += [(vocab_file, lower, preserve, rows_part) for rows_part in split(rows, -(-parts // len(cases)))]
    spread(_check_against_google, checks)


def _run_google(jobs: list[dict]) -> list[dict]:
    return run_reference({"script": None, "jobs": jobs})


def _check_against_google(part) -> None:
    vocab_file, lower, preserve, rows = part
    vocabulary = PretrainingVocabulary.load(vocab_file, do_lower_case=lower, preserve_unused_tokens=preserve)
    basic = GoogleBasicTokenizer(lower)
    for line, want_words, want_pieces in rows:
        if not preserve:  # Google's BasicTokenizer words (its own preserve check needs the vocab)
            assert basic.tokenize(line) == want_words, f"lower={lower} {line!r}: words differ"
        got = [vocabulary.tokens[index] for index in vocabulary.piece_ids(line)]
        assert got == want_pieces, (f"lower={lower} preserve_unused_tokens={preserve} {line!r}:\n"
                                    f"  Google   {want_pieces}\n  minibert {got}")  # fmt: skip


def test_google_tokenizer_equals_googles_on_every_category(tmp_path):
    lines = every_category_lines(step=211)
    assert len(categories(lines)) == 29, sorted(categories(lines))
    _compare_with_google(lines, tmp_path)


@pytest.mark.slow
def test_google_tokenizer_equals_googles_on_every_code_point(tmp_path):
    """Without ``preserve_unused_tokens`` only: the flag changes nothing but a word that is
    ``[unused<digits>]`` and in the vocabulary (tokenization.py), which words of 1–4 random
    characters never are; the test above and the one below run it."""
    lines = every_category_lines(step=1)
    _compare_with_google(lines, tmp_path, preserve_unused=(False,))


def test_the_differences_are_real():
    """Each special word of the text is one where Google's rules are not the plain BasicTokenizer's
    (tokenizers'), or a control: the comparison above would catch a tokenizer that ignored them."""
    from minibert.tokenizer.algorithm import BasicTokenizer

    plain, google = BasicTokenizer(), GoogleBasicTokenizer()
    differing = [word for word in SPECIAL_WORDS if plain.tokenize(word) != google.tokenize(word)]
    assert {"\ue1e5", "ΟΔΟΣ", "\U0002b820\U0002b91f\U0002b920", "\U000f0001x"} <= set(differing), differing


def test_preserve_unused_tokens_keeps_unused_pieces_whole(tmp_path):
    """--preserve-unused-tokens (Google's flag): a word that is exactly a vocabulary entry [unusedN]
    is one piece; without the flag, or glued to other text, or not in the vocabulary, it is text."""
    import subprocess
    import sys

    from minibert.formats.tfrecord import read_examples

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[", "]",
                                "unused0", "the", "cat", "x"]) + "\n", encoding="utf-8")  # fmt: skip
    vocabulary = PretrainingVocabulary.load(vocab, preserve_unused_tokens=True)
    pieces = [vocabulary.tokens[index] for index in vocabulary.piece_ids("the [unused0] cat x[unused1] [unused7]")]
    assert pieces == ["the", "[unused0]", "cat", "x", "[", "[UNK]", "]", "[", "[UNK]", "]"]
    plain = PretrainingVocabulary.load(vocab)
    assert [plain.tokens[index] for index in plain.piece_ids("[unused0]")] == ["[", "unused0", "]"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat [unused0] the cat\nthe [unused1] cat\n\nthe cat\ncat the\n", encoding="utf-8")
    found = {}
    for flag in ([], ["--preserve-unused-tokens"]):
        output = tmp_path / f"out{len(flag)}.tfrecord"
        done = subprocess.run([sys.executable, "-m", "minibert", "pretraining-data", "--input", str(corpus), "--vocab",
                               str(vocab), "--output", str(output), "--masked-lm-prob", "0.01", *flag],
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
        found[bool(flag)] = {int(i) for example in read_examples(output) for i in example["input_ids"]}
    assert 1 in found[True] and 2 in found[True] and 1 not in found[False] and 9 in found[False]
