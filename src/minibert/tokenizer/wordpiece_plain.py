"""Learning a WordPiece vocabulary, plainly: read this before wordpiece_trainer.py.

The algorithm of ``tokenizers``' ``BertWordPieceTokenizer.train`` (byte-pair encoding with a ``##``
prefix; wordpiece_trainer.py's docstring tells it step by step) in the fewest lines, as minbpe
writes BPE: count every pair of neighbouring pieces, merge the most frequent, repeat. It recounts
every pair after every merge, so it takes minutes for a few thousand merges on a real corpus —
wordpiece_trainer.py (``learn_vocabulary``, what ``minibert vocab`` runs) updates the counts instead
and keeps the best pair on a heap. A test proves the two equal on real text.

>>> learn_vocabulary_plainly({"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}, vocab_size=21)[12:]
['##u', '##g', '##n', '##s', '##ug', '##un', 'hug', 'pun', 'pug']
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from .wordpiece_trainer import DEFAULT_SPECIAL_TOKENS


def learn_vocabulary_plainly(
    word_counts: Mapping[str, int],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    limit_alphabet: int | None = 1000,
    special_tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS,
) -> list[str]:
    """The pieces (id = position) learned from {word: count} (word_counts.py counts them)."""
    vocab = list(dict.fromkeys(special_tokens))
    # The alphabet: the limit_alphabet most frequent characters (of equal counts, the smaller code
    # points), in code point order.
    char_counts: Counter[str] = Counter()
    for word, count in word_counts.items():
        for char in word:
            char_counts[char] += count
    by_frequency = sorted(char_counts, key=lambda char: (-char_counts[char], char))
    vocab += [char for char in sorted(by_frequency[:limit_alphabet]) if char not in vocab]
    # The ## forms of the characters that continue words: those continuing more distinct words first.
    continued = Counter(char for word in word_counts for char in set(word[1:]))
    for char in sorted(continued, key=lambda char: (-continued[char], char)):
        if char in vocab and "##" + char not in vocab:
            vocab.append("##" + char)
    # Each word in pieces: "hugs" → ["h", "##u", "##g", "##s"] (characters not in the alphabet left out).
    known = set(vocab)
    words = []
    for word, count in word_counts.items():
        pieces = [word[0]] if word[0] in known else []
        words.append((pieces + ["##" + char for char in word[1:] if "##" + char in known], count))
    # Merge the most frequent pair (of equal counts: the smaller left id, then right id), again and again.
    while len(vocab) < vocab_size:
        pair_counts: Counter[tuple[str, str]] = Counter()
        for pieces, count in words:
            for pair in zip(pieces, pieces[1:]):
                pair_counts[pair] += count
        ids = {piece: index for index, piece in enumerate(vocab)}
        best = min(pair_counts, key=lambda pair: (-pair_counts[pair], ids[pair[0]], ids[pair[1]]), default=None)
        if best is None or pair_counts[best] < min_frequency:
            break
        new_piece = best[0] + best[1].removeprefix("##")  # "h" + "##u" → "hu"; "##u" + "##g" → "##ug"
        if new_piece not in ids:
            vocab.append(new_piece)
        words = [(merge(pieces, best, new_piece), count) for pieces, count in words]
    return vocab


def merge(pieces: list[str], pair: tuple[str, str], new_piece: str) -> list[str]:
    """Replace each occurrence of ``pair`` in ``pieces``, left to right, by ``new_piece``.

    >>> merge(["h", "##u", "##g", "##h", "##u"], ("h", "##u"), "hu")
    ['hu', '##g', '##h', '##u']
    """
    if pair[0] not in pieces:
        return pieces
    merged, index = [], 0
    while index < len(pieces):
        if index + 1 < len(pieces) and (pieces[index], pieces[index + 1]) == pair:
            merged.append(new_piece)
            index += 2
        else:
            merged.append(pieces[index])
            index += 1
    return merged
