"""The masked-LM predictions of one instance, drawn exactly as Google's script draws them.

BERT learns to predict pieces it cannot see. Of an instance's pieces (never ``[CLS]``/``[SEP]``),
``num_to_predict = min(max_predictions_per_seq, max(1, round(len(sequence) * masked_lm_prob)))``
are chosen (the length counts ``[CLS]`` and both ``[SEP]``; Python's ``round`` halves to even).
Each chosen piece becomes ``[MASK]`` 80% of the time, stays itself 10%, and is replaced by a random
vocabulary entry 10% (the whole vocabulary: ``[PAD]``, ``[unused]`` and special tokens included).
The label is always the original piece.

With whole-word masking a word's pieces are chosen together: a ``##`` piece joins the group before
it. ``[CLS]``/``[SEP]`` are skipped, not boundaries, so a ``##`` piece left at the start of B by
truncation joins A's last word, as in google-research/bert. A word that would overshoot
``num_to_predict`` is passed over (a later, shorter one may still fit).

The random draws, in order: one shuffle of the candidate groups, then per masked piece one
``random()`` (< 0.8: [MASK]), else a second (< 0.5: kept), else one ``randint`` for the random piece.

>>> import random
>>> ids = [2, 10, 11, 12, 3, 13, 14, 3]       # [CLS] a b c [SEP] d e [SEP]
>>> mask_pieces(ids, [False] * 20, 4, 0.25, 20, False, random.Random(1), (2, 3))  # round(8 × 0.25) = 2, both [MASK]
([2, 10, 11, 4, 3, 4, 14, 3], [3, 5], [12, 13])
"""

from __future__ import annotations

import random


def mask_pieces(
    ids: list[int],
    is_continuation: list[bool],
    mask_id: int,
    masked_lm_prob: float,
    max_predictions: int,
    whole_word_mask: bool,
    rng: random.Random,
    frame_ids: tuple[int, int],
) -> tuple[list[int], list[int], list[int]]:
    """(the ids with the masks applied, the masked positions ascending, their original ids).

    ``ids`` is ``[CLS] A [SEP] B [SEP]``, ``frame_ids`` the ids of [CLS] and [SEP] (skipped by value,
    as Google compares the strings; text never yields them: ``[`` is punctuation, split off).
    ``is_continuation[id]`` tells a ``##`` piece; the vocabulary has ``len(is_continuation)`` ids."""
    groups: list[list[int]] = []
    for position, piece in enumerate(ids):
        if piece in frame_ids:
            continue
        if whole_word_mask and groups and is_continuation[piece]:
            groups[-1].append(position)
        else:
            groups.append([position])
    rng.shuffle(groups)

    num_to_predict = min(max_predictions, max(1, int(round(len(ids) * masked_lm_prob))))
    output = list(ids)
    chosen: list[int] = []
    vocabulary_size = len(is_continuation)
    for group in groups:
        if len(chosen) >= num_to_predict:
            break
        if len(chosen) + len(group) > num_to_predict:
            continue  # a whole word that would overshoot (only with whole-word masking)
        for position in group:  # (positions are never chosen twice: the groups do not overlap)
            if rng.random() < 0.8:
                output[position] = mask_id
            elif rng.random() < 0.5:
                pass  # kept as it is
            else:
                output[position] = rng.randint(0, vocabulary_size - 1)
            chosen.append(position)
    chosen.sort()
    return output, chosen, [ids[position] for position in chosen]
