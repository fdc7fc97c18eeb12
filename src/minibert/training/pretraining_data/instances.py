"""Documents → pre-training instances ``[CLS] A [SEP] B [SEP]``, as Google's script cuts them.

For each pass over the corpus (``dupe_factor`` passes) and each document, sentences are gathered
into a chunk until it reaches the *target length* (``max_seq_length - 3`` pieces; 10% of the time,
``short_seq_prob``, a random length from 2 up, so the model also sees short inputs). The chunk is
cut at a random sentence boundary into A and B. Half of the time (always when the chunk is one
sentence) B is replaced by sentences from a random other document — the next-sentence label is
then 1 — and the chunk's unused sentences are *put back* for the next instance. The pair is then
truncated to fit, one piece at a time from the longer side's front or back, and masked
(masking.py).

Everything random comes from one ``random.Random(seed)``, consumed in Google's order, so the same
text, vocabulary, options and seed give Google's instances, in Google's order:

1. one shuffle of the documents;
2. per document: ``random()`` for the short target (and ``randint(2, max)`` when taken); per
   chunk: ``randint`` for A's end if the chunk has two sentences or more; ``random() < 0.5`` for a
   random next, *not drawn* when the chunk is one sentence (Python's ``or`` short-circuits); for a
   random next up to 10 ``randint`` for another document (the same one may come out 10 times and
   is then used), one ``randint`` for its first sentence; one ``random()`` per truncated piece;
   then the masks;
3. one shuffle of all the instances.

>>> import random
>>> documents = [[[10, 11], [12]], [[13, 14, 15]], [[16], [17, 18], [19]]]
>>> options = InstanceOptions(max_seq_length=8, dupe_factor=1)
>>> instances = create_instances(documents, (2, 3), 4, [False] * 30, options, random.Random(0))
>>> [(len(instance.input_ids), instance.is_random_next) for instance in instances]
[(7, False), (6, False), (7, True)]
"""

from __future__ import annotations

import random
from array import array
from dataclasses import dataclass

from ...tokenizer.framing import frame, segment_ids
from .masking import mask_pieces
from .options import InstanceOptions


@dataclass
class TrainingInstance:
    """One sequence pair with its masked-LM and next-sentence labels (unpadded: records.py pads).
    Kept small, as all instances are held in memory: the ids in an ``array`` (4 bytes a piece),
    the segment ids as where B starts."""

    input_ids: array  # [CLS] A [SEP] B [SEP], masks applied (typecode "i")
    a_length: int  # pieces of A: segment 0 is [CLS] A [SEP], segment 1 is B [SEP]
    masked_lm_positions: list[int]  # ascending
    masked_lm_ids: list[int]  # the original piece at each masked position
    is_random_next: bool  # B comes from another document (next_sentence_labels = 1)

    @property
    def segment_ids(self) -> list[int]:
        length_b = len(self.input_ids) - self.a_length - 3  # all but [CLS], A's [SEP] and B's [SEP]
        return segment_ids(self.a_length, length_b)


def create_instances(
    documents: list[list[list[int]]],
    frame_ids: tuple[int, int],
    mask_id: int,
    is_continuation: list[bool],
    options: InstanceOptions,
    rng: random.Random,
) -> list[TrainingInstance]:
    """All instances of the corpus, shuffled, as Google's ``create_training_instances``.

    ``documents``: sentences of piece ids (documents.py), shuffled here in a copy; ``frame_ids``:
    the ids of [CLS] and [SEP]; ``is_continuation[id]``: whether the piece is a ``##`` piece
    (``len(is_continuation)`` is the vocabulary size random pieces are drawn from)."""
    documents = list(documents)
    rng.shuffle(documents)
    instances: list[TrainingInstance] = []
    for _ in range(options.dupe_factor):
        for index in range(len(documents)):
            instances.extend(instances_from_document(documents, index, frame_ids, mask_id, is_continuation,
                                                     options, rng))  # fmt: skip
    rng.shuffle(instances)
    return instances


def instances_from_document(
    documents: list[list[list[int]]],
    index: int,
    frame_ids: tuple[int, int],
    mask_id: int,
    is_continuation: list[bool],
    options: InstanceOptions,
    rng: random.Random,
) -> list[TrainingInstance]:
    """The instances of one pass over ``documents[index]`` (Google's ``create_instances_from_document``)."""
    document = documents[index]
    max_tokens = options.max_tokens_per_pair
    target_length = max_tokens
    if rng.random() < options.short_seq_prob:
        target_length = rng.randint(2, max_tokens)

    instances = []
    chunk: list[list[int]] = []
    chunk_length = 0
    sentence = 0
    while sentence < len(document):
        chunk.append(document[sentence])
        chunk_length += len(document[sentence])
        if sentence == len(document) - 1 or chunk_length >= target_length:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1  # sentences of A
            tokens_a = [piece for part in chunk[:a_end] for piece in part]
            is_random_next = len(chunk) == 1 or rng.random() < 0.5
            if is_random_next:
                tokens_b = _random_next(documents, index, target_length - len(tokens_a), rng)
                sentence -= len(chunk) - a_end  # the unused sentences are put back
            else:
                tokens_b = [piece for part in chunk[a_end:] for piece in part]
            tokens_a, tokens_b = truncate_pair(tokens_a, tokens_b, max_tokens, rng)
            cls_id, sep_id = frame_ids
            ids = frame(cls_id, sep_id, tokens_a, tokens_b)
            masked, positions, labels = mask_pieces(ids, is_continuation, mask_id, options.masked_lm_prob,
                                                    options.max_predictions_per_seq, options.whole_word_mask,
                                                    rng, frame_ids)  # fmt: skip
            instances.append(TrainingInstance(array("i", masked), len(tokens_a), positions, labels, is_random_next))
            chunk, chunk_length = [], 0
        sentence += 1
    return instances


def _random_next(documents: list[list[list[int]]], index: int, target_length: int, rng: random.Random) -> list[int]:
    """B for a random next: sentences of another document from a random one on, until
    ``target_length`` pieces (at least one sentence). Ten tries to draw a document other than
    ``index``; after ten misses the last draw is used, even if it is ``index``."""
    for _ in range(10):
        other = rng.randint(0, len(documents) - 1)
        if other != index:
            break
    document = documents[other]
    tokens_b: list[int] = []
    for sentence in document[rng.randint(0, len(document) - 1) :]:
        tokens_b.extend(sentence)
        if len(tokens_b) >= target_length:
            break
    return tokens_b


def truncate_pair(tokens_a: list[int], tokens_b: list[int], max_tokens: int, rng: random.Random):
    """Cut A and B to ``max_tokens`` pieces together, one piece at a time from the longer one (B
    when equal), from its front or its back at random: one ``random()`` per piece removed.

    >>> truncate_pair([1, 2, 3, 4], [5, 6], 4, random.Random(0))   # A loses its 4 then its 3
    ([1, 2], [5, 6])
    """
    a_start, a_end, b_start, b_end = 0, len(tokens_a), 0, len(tokens_b)
    while (a_end - a_start) + (b_end - b_start) > max_tokens:
        from_front = rng.random() < 0.5
        if a_end - a_start > b_end - b_start:
            a_start, a_end = (a_start + 1, a_end) if from_front else (a_start, a_end - 1)
        else:
            b_start, b_end = (b_start + 1, b_end) if from_front else (b_start, b_end - 1)
    return tokens_a[a_start:a_end], tokens_b[b_start:b_end]
