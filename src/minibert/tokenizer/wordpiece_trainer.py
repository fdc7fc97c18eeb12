"""Learning a WordPiece vocabulary from text, as Hugging Face ``tokenizers`` learns it: the fast version.

Read wordpiece_plain.py first: ``learn_vocabulary_plainly`` is the same algorithm in the fewest
lines (it recounts every pair after every merge); this module learns the same pieces (a test
proves it on real text) fast enough for 30,000 pieces, with the bookkeeping described at the end.

Google never released the program that made BERT's ``vocab.txt``; people use ``tokenizers``'
``BertWordPieceTokenizer.train``, whose WordPiece trainer is byte-pair encoding (BPE) with a ``##``
prefix (tokenizers/src/models/wordpiece/trainer.rs wraps bpe/trainer.rs). This module is that
algorithm, in Python, step by step:

1. **Count the words** of the corpus, words as BERT's basic tokenizer makes them (word_counts.py)::

       {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}

2. **The special tokens** come first: ``[PAD] [UNK] [CLS] [SEP] [MASK]`` are ids 0–4.
3. **The alphabet**: every character of every word, counted with the words' counts. Only the
   ``limit_alphabet`` most frequent are kept (``min_frequency`` plays no part here); the rest are
   dropped from the words, as if they were not there. The kept ones follow, by code point.
4. **Spell each word in pieces**: its first character as itself, every other one as a
   *continuation piece* with the ``##`` prefix, which joins the vocabulary after the alphabet (only
   the ``##`` forms the corpus uses)::

       "hugs"  →  h ##u ##g ##s

5. **Merge, pair by pair.** Count every pair of neighbouring pieces over all words (a word counts
   as often as it occurs); the most frequent pair becomes a new piece, spelled as its two halves
   joined (the right half loses its ``##``: ``h`` + ``##u`` → ``hu``, ``##u`` + ``##g`` → ``##ug``),
   and is merged wherever it occurs. Repeat until the vocabulary has ``vocab_size`` pieces, or no
   pair occurs ``min_frequency`` times. After ``hu`` + ``##g`` → ``hug``, "hugs" is ``hug ##s``.

The order of vocab.txt is the order pieces were made: special tokens, alphabet, ``##`` forms,
merges. BERT's tokenizer later reads this vocabulary greedily, longest match first
(algorithm.py's ``WordPieceTokenizer``), not by replaying the merges.

**Ties.** ``tokenizers`` is not deterministic: its hash maps iterate in a random order per run,
which decides the ``##`` forms' ids and with them which of two pairs of equal count merges first,
and which characters of equal count the alphabet keeps at its limit. minibert gives the same
result on every run, with these rules: the alphabet keeps the most frequent characters and, of
equal counts, the smaller code points; the ``##`` forms are numbered by how many distinct words
they continue, most first, then by code point (``tokenizers`` numbers them as its random walk over
the distinct words meets them, which most likely meets these first); of pairs of equal count, the
one whose left piece has the smaller id merges first, then the one whose right piece has
(``tokenizers``' own rule, on its ids).

Counting pairs once and updating the counts after each merge (only the words that hold the pair
are touched, and a heap keeps the most frequent pair on top) is what makes 30,000 merges fast:
re-counting every pair after every merge, as minbpe does, would take hours. This part mirrors
``tokenizers``' bpe/trainer.rs, quirks included: each heap entry carries the words it was counted
in, an entry whose count is stale goes back on the heap with the current count, and a pair that
forms again after it was merged is merged again (a piece already in the vocabulary gets no new id).
"""

from __future__ import annotations

import heapq
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..errors import VocabularySizeError
from ..formats.atomic_files import why_not_a_folder
from ..formats.file_sets import write_files_together
from .added_tokens import AddedToken
from .fast_basic import FastBasicTokenizer
from .files import STALE_FILES
from .word_counts import Progress, count_words

DEFAULT_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
CONTINUATION = "##"
_RIGHT = 1 << 32  # a pair (left, right) of piece ids is the int left * _RIGHT + right: it orders like the tuple


def train_wordpiece(
    files: str | os.PathLike | Iterable[str | os.PathLike],
    vocab_size: int = 30_000,
    *,
    min_frequency: int = 2,
    limit_alphabet: int | None = 1000,
    lowercase: bool = True,
    special_tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS,
    progress: Progress | None = None,
) -> list[str]:
    """The WordPiece vocabulary of text files, as ``tokenizers``' ``BertWordPieceTokenizer.train``
    learns it (same defaults): the list of pieces, id = position. ``files``: a list of paths, or one
    path (a str or ``pathlib.Path``, as tokenizers takes it).

    ``lowercase=False`` for a cased vocabulary (no lowercasing, no accent stripping).
    ``progress``, if given, is called with a line of text now and then.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "corpus.txt"
    >>> _ = path.write_text("hug " * 10 + "pug " * 5 + "pun " * 12 + "bun " * 4 + "hugs " * 5, encoding="utf-8")
    >>> pieces = train_wordpiece([path], vocab_size=21)
    >>> pieces[:12]  # the special tokens, the alphabet
    ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'b', 'g', 'h', 'n', 'p', 's', 'u']
    >>> pieces[12:]  # the ## forms (##u continues 5 distinct words, ##g 3, ...), the merges
    ['##u', '##g', '##n', '##s', '##ug', '##un', 'hug', 'pun', 'pug']
    """
    _check_settings(vocab_size, min_frequency, limit_alphabet, special_tokens)  # before the long count
    basic = FastBasicTokenizer(do_lower_case=lowercase)
    word_counts = count_words(files, basic, progress)
    return learn_vocabulary(word_counts, vocab_size, min_frequency=min_frequency, limit_alphabet=limit_alphabet,
                            special_tokens=special_tokens, progress=progress)  # fmt: skip


def learn_vocabulary(
    word_counts: Mapping[str, int],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    limit_alphabet: int | None = 1000,
    special_tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS,
    progress: Progress | None = None,
) -> list[str]:
    """Steps 2–5 (see the module's docstring) on counted words: the pieces, id = position."""
    _check_settings(vocab_size, min_frequency, limit_alphabet, special_tokens)
    vocab = {token: index for index, token in enumerate(dict.fromkeys(special_tokens))}  # piece → id, in order
    for char in alphabet(word_counts, limit_alphabet):
        vocab.setdefault(char, len(vocab))
    continued: Counter[str] = Counter()  # character → how many distinct words it continues
    for word in word_counts:
        continued.update(set(word[1:]))
    for char in sorted(continued, key=lambda char: (-continued[char], char)):
        if char in vocab:  # in the alphabet (or a special token that is one character)
            vocab.setdefault(CONTINUATION + char, len(vocab))
    if len(vocab) > vocab_size:
        raise VocabularySizeError(
            f"vocab_size {vocab_size:,} is below the {len(vocab):,} pieces every vocabulary learned from this corpus "
            f"holds ({len(set(special_tokens))} special tokens, the alphabet and its {CONTINUATION} forms): ask for "
            "at least that many, or limit the alphabet to fewer characters"
        )
    words, counts = spell_words(word_counts, vocab)
    merge_pairs(words, counts, vocab, vocab_size, min_frequency, progress)
    return list(vocab)


def _check_settings(vocab_size, min_frequency, limit_alphabet, special_tokens) -> None:
    for name, value, low in (("vocab_size", vocab_size, 1), ("min_frequency", min_frequency, 0),
                             ("limit_alphabet", 0 if limit_alphabet is None else limit_alphabet, 0)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int of at least {low}, got {value!r}")
    if isinstance(special_tokens, str):
        raise TypeError("special_tokens must be a list of strings, not one string")
    for token in special_tokens:
        if not isinstance(token, str) or not token or token != "".join(token.split()):
            raise ValueError(f"a special token must be a non-empty string without whitespace, got {token!r}")
    if len(set(special_tokens)) > vocab_size:
        raise VocabularySizeError(f"vocab_size {vocab_size:,} is below the {len(set(special_tokens))} special tokens")


def alphabet(word_counts: Mapping[str, int], limit: int | None) -> list[str]:
    """The characters of the words, each counted as often as its words occur; the ``limit`` most
    frequent kept (of equal counts, the smaller code points), by code point.

    >>> alphabet({"aab": 1, "bc": 3}, limit=2)
    ['b', 'c']
    """
    char_counts: dict[str, int] = {}
    for word, count in word_counts.items():
        for char in word:
            char_counts[char] = char_counts.get(char, 0) + count
    kept = sorted(char_counts, key=lambda char: (-char_counts[char], char))
    if limit is not None:
        kept = kept[:limit]
    return sorted(kept)


def spell_words(word_counts: Mapping[str, int], vocab: dict[str, int]) -> tuple[list[list[int]], list[int]]:
    """Each word as piece ids (first character plain, the others ``##``; characters outside the
    alphabet left out), with its count. Words of fewer than two pieces are left out: they hold no pair.

    >>> vocab = {"h": 0, "u": 1, "g": 2, "##u": 3, "##g": 4}   # no "x", no "##h"
    >>> spell_words({"hug": 7, "uh": 1, "xg": 2, "x": 5}, vocab)
    ([[0, 3, 4]], [7])
    """
    first = {piece: index for piece, index in vocab.items() if len(piece) == 1}
    later = {char: vocab[CONTINUATION + char] for char in first if CONTINUATION + char in vocab}
    words, counts = [], []
    for word, count in word_counts.items():
        spelled = [first[word[0]]] if word[0] in first else []
        spelled += [later[char] for char in word[1:] if char in later]
        if len(spelled) > 1:
            words.append(spelled)
            counts.append(count)
    return words, counts


def merge_pairs(
    words: list[list[int]],
    counts: list[int],
    vocab: dict[str, int],
    vocab_size: int,
    min_frequency: int,
    progress: Progress | None = None,
) -> None:
    """Step 5: merge the most frequent pair of pieces into a new piece, again and again, until
    ``vocab`` has ``vocab_size`` pieces or no pair occurs ``min_frequency`` times. ``words`` (piece
    ids) are merged in place; ``vocab`` grows.

    The heap holds (-count, pair, sequence number, the words the pair was counted in), so the most
    frequent pair is on top and, of equal counts, the smaller pair (left id, then right id)."""
    pieces = list(vocab)  # id → piece
    pair_counts, where = count_pairs(words, counts)
    heap = [(-pair_counts[pair], pair, order, positions) for order, (pair, positions) in enumerate(where.items())]
    heapq.heapify(heap)
    order = len(heap)
    while len(vocab) < vocab_size and heap:
        negative_count, pair, _, positions = heapq.heappop(heap)
        count = pair_counts[pair]
        if count != -negative_count:  # counted before later merges changed it: back on the heap
            heapq.heappush(heap, (-count, pair, order, positions))
            order += 1
            continue
        if count < 1 or count < min_frequency:
            break
        left, right = divmod(pair, _RIGHT)
        new_piece = pieces[left] + pieces[right].removeprefix(CONTINUATION)
        new_id = vocab.setdefault(new_piece, len(vocab))
        if new_id == len(pieces):
            pieces.append(new_piece)
        formed: dict[int, list[int]] = {}  # pairs the merge made → the words they are in
        for index in positions:
            removed, added = merge_in_word(words[index], left, right, new_id)
            word_count = counts[index]
            for old_pair in removed:  # (a pair the same word gained a moment ago may be among them)
                pair_counts[old_pair] = pair_counts.get(old_pair, 0) - word_count
            for new_pair in added:
                pair_counts[new_pair] = pair_counts.get(new_pair, 0) + word_count
                _add_position(formed, new_pair, index)
        for new_pair, new_positions in formed.items():
            if pair_counts[new_pair] > 0:
                heapq.heappush(heap, (-pair_counts[new_pair], new_pair, order, new_positions))
                order += 1
        if progress is not None and len(vocab) % 1000 == 0:
            progress(f"merging: {len(vocab):,} of {vocab_size:,} pieces")


def count_pairs(words: list[list[int]], counts: list[int]) -> tuple[dict[int, int], dict[int, list[int]]]:
    """How often each pair of neighbouring pieces occurs, and in which words (indices, ascending)."""
    pair_counts: dict[int, int] = {}
    where: dict[int, list[int]] = {}
    for index, (word, count) in enumerate(zip(words, counts)):
        for left, right in zip(word, word[1:]):
            pair = left * _RIGHT + right
            pair_counts[pair] = pair_counts.get(pair, 0) + count
            _add_position(where, pair, index)
    return pair_counts, where


def _add_position(where: dict[int, list[int]], pair: int, index: int) -> None:
    """Note that word ``index`` holds ``pair``: once (tokenizers keeps a set; the words are visited
    one after the other, so a list that checks its last entry is the same set, in less memory)."""
    positions = where.get(pair)
    if positions is None:
        where[pair] = [index]
    elif positions[-1] != index:
        positions.append(index)


def merge_in_word(word: list[int], left: int, right: int, new_id: int) -> tuple[list[int], list[int]]:
    """Replace each (left, right) in ``word`` by ``new_id``, left to right; return the pairs that
    the word lost and those it gained, one entry per occurrence (tokenizers' ``Word::merge``).

    >>> word = [1, 2, 3, 1, 2]
    >>> removed, added = merge_in_word(word, 1, 2, 9)
    >>> word, [divmod(pair, _RIGHT) for pair in removed], [divmod(pair, _RIGHT) for pair in added]
    ([9, 3, 9], [(2, 3), (3, 1)], [(9, 3), (3, 9)])

    The merged word is built by copying the stretches between occurrences (linear time even for a
    word of a million pieces, where replacing each occurrence in place would be quadratic).
    """
    removed, added = [], []
    merged: list[int] = []  # the word up to ``copied``, with its occurrences merged
    copied = 0
    index = -1
    while True:
        try:
            index = word.index(left, index + 1, len(word) - 1)  # a left piece with a piece after it
        except ValueError:
            break
        if word[index + 1] != right:
            continue
        merged += word[copied:index]
        if merged:  # the piece before (itself merged a moment ago, perhaps)
            before = merged[-1]
            removed.append(before * _RIGHT + left)
            added.append(before * _RIGHT + new_id)
        merged.append(new_id)
        copied = index + 2
        if copied < len(word):
            after = word[copied]
            removed.append(right * _RIGHT + after)
            added.append(new_id * _RIGHT + after)
        index = copied - 1  # an occurrence cannot overlap this one
    if copied:
        word[:] = merged + word[copied:]
    return removed, added


VOCABULARY_FILES = ("vocab.txt", "tokenizer_config.json")  # what save_vocabulary writes into its directory


def check_vocabulary_folder(directory: str | os.PathLike) -> None:
    """FileNotFoundError unless ``directory`` is a folder to save a vocabulary in, saying why (the
    advice to create it only where it does not exist)."""
    reason = why_not_a_folder(directory)
    if reason:
        advice = ": create it first" if reason.startswith("does not exist") else ""
        raise FileNotFoundError(f"output directory {directory} {reason}{advice}")


def save_vocabulary(
    directory: str | os.PathLike,
    pieces: Sequence[str],
    *,
    lowercase: bool = True,
    special_tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS,
) -> tuple[str, str]:
    """Write ``vocab.txt`` (one piece per line) and ``tokenizer_config.json`` into an existing
    directory, together or not at all (formats/file_sets.py; a ``tokenizer.json``,
    ``special_tokens_map.json`` or ``added_tokens.json`` there from another save is removed with them:
    files.py ``STALE_FILES``), so that minibert's ``BertTokenizer.from_pretrained`` and transformers'
    ``AutoTokenizer`` load it with the casing and the special tokens it was learned with: give
    ``special_tokens`` as ``train_wordpiece`` was given them. The config lists every special token
    in ``added_tokens_decoder``, as transformers' slow tokenizer saves them (a config with one makes
    every reader ignore such older files), and those beyond the five roles (``<e1>``, ``[unused0]``)
    as ``additional_special_tokens`` too: each is one token, never split into pieces, and
    ``decode(..., skip_special_tokens=True)`` leaves it out, as in the tokenizer ``tokenizers``'
    ``BertWordPieceTokenizer.train`` leaves behind (its trainer adds every special token so).

    The config names the special tokens' roles ([UNK], [SEP], [PAD], [CLS], [MASK]) and
    ``model_max_length`` 512 (BERT's positions). A role whose token the pieces lack (``[PAD]`` and
    ``[MASK]`` when the special tokens leave them out) is written as ``null``: transformers would
    otherwise fall back to its default ``[PAD]``/``[MASK]`` and add them past the end of vocab.txt,
    ids a model of this vocabulary cannot embed, where minibert (and ``tokenizers``) read them as
    ``[UNK]``."""
    if isinstance(special_tokens, str):
        raise TypeError("special_tokens must be a list of strings, not one string")
    directory = Path(directory)
    check_vocabulary_folder(directory)
    roles = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
             "mask_token": "[MASK]"}  # fmt: skip
    config = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": lowercase,
        "strip_accents": None,  # follows do_lower_case, as in tokenizers' BertWordPieceTokenizer
        "tokenize_chinese_chars": True,
        "model_max_length": 512,
        **{role: token if token in pieces else None for role, token in roles.items()},
    }
    special = set(special_tokens) | set(roles.values())
    ids = {piece: index for index, piece in enumerate(pieces) if piece in special}
    extra = [piece for piece in ids if piece not in roles.values()]  # in the order of their ids
    if extra:
        config["additional_special_tokens"] = extra
    config["added_tokens_decoder"] = {str(index): AddedToken(piece, normalized=False, special=True).as_json()
                                      for piece, index in sorted(ids.items(), key=lambda item: item[1])}  # fmt: skip
    vocab_file, config_file = (directory / name for name in VOCABULARY_FILES)
    files = {  # a new vocab.txt beside an old config would tokenize with the old casing
        vocab_file: "".join(piece + "\n" for piece in pieces).encode("utf-8"),
        config_file: (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
    }
    write_files_together(files, remove=[directory / name for name in STALE_FILES])
    return str(vocab_file), str(config_file)
