"""The reference for `minibert vocab`: tokenizers' own trainer and its own normalizer and
pre-tokenizer, run on the same files, and the measures the vocabulary tests compare with."""

from __future__ import annotations

import itertools
import os
from collections import Counter
from pathlib import Path

import pytest

from minibert.tokenizer import BasicTokenizer
from minibert.tokenizer.word_counts import count_words
from minibert.tokenizer.wordpiece_trainer import merge_pairs, spell_words

FORTUNES = Path("/usr/share/games/fortunes")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def fortunes(*names: str) -> list[str]:
    """Debian's English fortunes (package `fortunes`; .ci/run installs it), all files or those named.
    Missing: a skip here, a failure in CI (where a skip would pass unnoticed)."""
    if not (FORTUNES / "fortunes").is_file():
        message = "Debian's fortunes are not installed (apt-get install -y fortunes): no real text to compare on"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    if names:
        return [str(FORTUNES / name) for name in names]
    return sorted(str(path) for path in FORTUNES.iterdir() if "." not in path.name and path.is_file())


def reference_vocabulary(files, vocab_size, *, lowercase=True, min_frequency=2, limit_alphabet=1000,
                         special_tokens=SPECIALS) -> list[str]:  # fmt: skip
    """tokenizers' BertWordPieceTokenizer.train: its pieces by id."""
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(lowercase=lowercase)
    tokenizer.train([str(path) for path in files], vocab_size=vocab_size, min_frequency=min_frequency,
                    limit_alphabet=limit_alphabet, special_tokens=list(special_tokens),
                    show_progress=False)  # fmt: skip
    vocab = tokenizer.get_vocab()
    return sorted(vocab, key=vocab.get)


def reference_word_counts(files, *, lowercase=True) -> Counter:
    """The words tokenizers' trainer counts: its BertNormalizer and BertPreTokenizer on each line
    (with its ending), as Tokenizer.train_from_files feeds them."""
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer

    normalizer, pre_tokenizer = BertNormalizer(lowercase=lowercase), BertPreTokenizer()
    counts: Counter = Counter()
    for path in files:
        for line in Path(path).read_bytes().decode("utf-8").split("\n"):  # lines end at "\n" only, as in Rust
            counts.update(word for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(line)))
    return counts


def assert_same_merges_as_tokenizers(files, vocab_size, *, lowercase=True, min_frequency=2, limit_alphabet=1000,
                                     special_tokens=SPECIALS) -> list[str]:  # fmt: skip
    """Train tokenizers once; then let minibert merge, starting from the pieces tokenizers began its
    merges with (special tokens, alphabet, ## forms), numbered as it numbered them: minibert must
    make the same merges in the same order, every piece identical."""
    theirs = reference_vocabulary(files, vocab_size, lowercase=lowercase, min_frequency=min_frequency,
                                  limit_alphabet=limit_alphabet, special_tokens=special_tokens)  # fmt: skip
    is_initial = lambda piece: len(piece) == 1 or (len(piece) == 3 and piece.startswith("##"))
    merged = next(
        (index for index in range(len(set(special_tokens)), len(theirs)) if not is_initial(theirs[index])), len(theirs)
    )
    vocab = {piece: index for index, piece in enumerate(theirs[:merged])}
    words, counts = spell_words(count_words(files, BasicTokenizer(do_lower_case=lowercase)), vocab)
    merge_pairs(words, counts, vocab, vocab_size, min_frequency)
    ours = list(vocab)
    first = next((index for index, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    print(f"\nsize {vocab_size}, lowercase {lowercase}, min_frequency {min_frequency}, limit_alphabet "
          f"{limit_alphabet}: {merged} initial pieces, {len(theirs) - merged} merges; minibert {len(ours)} pieces, "
          f"identical up to {first}")  # fmt: skip
    assert ours == theirs, f"first difference at id {first}: minibert {ours[first:first + 5]}, tokenizers " \
                           f"{theirs[first:first + 5]}"  # fmt: skip
    return ours


def spread(vocabularies: list[list[str]]) -> int:
    """tokenizers' run-to-run spread: the most pieces by which two of its runs differ (symmetric
    difference of the sets)."""
    return max((len(set(a) ^ set(b)) for a, b in itertools.combinations(vocabularies, 2)), default=0)


def rank_correlation(ours: list[str], theirs: list[str]) -> float:
    """Spearman's rank correlation of the two orders over the pieces both have (no ties: each
    piece has one position)."""
    position = {piece: index for index, piece in enumerate(theirs)}
    shared = [piece for piece in ours if piece in position]
    their_order = sorted(shared, key=position.get)
    their_rank = {piece: rank for rank, piece in enumerate(their_order)}
    n = len(shared)
    if n < 2:
        return 1.0
    squared = sum((rank - their_rank[piece]) ** 2 for rank, piece in enumerate(shared))
    return 1 - 6 * squared / (n * (n * n - 1))
