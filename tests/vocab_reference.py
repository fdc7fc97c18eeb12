"""The reference for `minibert vocab`: tokenizers' own trainer and its own normalizer and
pre-tokenizer, run on the same files, and the measures the vocabulary tests compare with."""

from __future__ import annotations

import itertools
import os
from collections import Counter
from pathlib import Path

import pytest

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
