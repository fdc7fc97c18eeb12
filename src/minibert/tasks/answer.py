"""Extractive question answering: a ``BertForQuestionAnswering`` scores every token of
``[CLS] question [SEP] context [SEP]`` as the answer's start and as its end; the answer is the
best span of context tokens, mapped back to the context's characters.

    >>> answer("Where do I live?", "My name is Wolfgang and I live in Berlin", model=SQUAD_DIR)  # doctest: +SKIP
    {'score': 0.9538, 'start': 34, 'end': 40, 'answer': 'Berlin'}

What transformers' ``question-answering`` pipeline computed (transformers 4.x; version 5 removed
it), step by step:

1. A context too long for one sequence of ``max_seq_len`` tokens (default the tokenizer's
   ``model_max_length``, at most 384 and the model's positions) is read in windows that share
   ``doc_stride`` tokens (default half the length, at most 128); the question is in every window.
2. In each window, only context tokens (and [CLS], which stands for "no answer") may be part of
   an answer: the others' scores are set to -10000. Softmax over the start scores, and over the
   end scores, give probabilities; a span's score is P(start) · P(end), for spans with
   start ≤ end < start + ``max_answer_len`` tokens.
3. The best spans are mapped to characters: with ``align_to_words`` (default), from the first
   piece's word start to the last piece's word end, so an answer never cuts a word.
4. The same answer text found in several windows adds its scores. With
   ``handle_impossible_answer``, "no answer" (``{'answer': '', 'start': 0, 'end': 0}``) competes
   with the score P([CLS] starts) · P([CLS] ends), the smallest over the windows.

``top_k`` answers come back best first: one dict when there is one, else a list.
"""

from __future__ import annotations

import numpy as np

from ..errors import PicklableError, TaskArgumentError
from ..heads import BertForQuestionAnswering
from ..loading.hub import DEFAULT_MODEL
from .loading import load_for_task, run_rows

_NO_ANSWER_SCORE = 1_000_000  # "no answer" starts above any probability, then takes the smallest


class QuestionTooLongError(PicklableError, ValueError):
    """A question that leaves its context no room in a window, or (``doc_stride`` not None) room not
    more than the windows' overlap while the context needs several windows: ``number`` (its place
    among the questions, from 0), its ``pieces``, ``max_seq_len``, ``room`` for the context and
    ``stride_given``, as data, so that a command can name the line and its own flags."""

    def __init__(self, number: int, pieces: int, max_seq_len: int, doc_stride: int | None = None,
                 stride_given: bool = False, positions: int | None = None):  # fmt: skip
        self.number, self.pieces, self.max_seq_len = number, pieces, max_seq_len
        self.room, self.doc_stride, self.stride_given = max(max_seq_len - 3 - pieces, 0), doc_stride, stride_given
        self.positions = positions  # the model's: a larger max_seq_len is no advice at that limit
        said = f"question {number} is {pieces} pieces: with [CLS] and two [SEP] it leaves "
        if doc_stride is None:
            super().__init__(said + f"no room for the context in max_seq_len={max_seq_len}; "
                             + self.advice("a larger max_seq_len"))
        else:
            default = "" if stride_given else " (the default: half of max_seq_len, at most 128)"
            super().__init__(said + f"{self.room} pieces for the context in max_seq_len={max_seq_len}, not more than "
                             f"doc_stride={doc_stride}{default}, the overlap of its windows; "
                             + self.advice("a larger max_seq_len or a smaller doc_stride", "a smaller doc_stride"))

    def advice(self, larger: str, other: str = "", passed: str = "pass") -> str:
        """What to do: ``passed`` ``larger`` ("pass a larger max_seq_len"); where max_seq_len is the
        model's positions already (a larger one is refused), ``other`` (a smaller doc_stride), if any,
        or a shorter question."""
        if self.positions is None or self.max_seq_len < self.positions:
            return f"{passed} {larger}"
        shorter = f"shorten the question (this model reads at most {self.positions} tokens)"
        return f"{passed} {other} or {shorter}" if other else shorter


def answer(question, context, *, model=DEFAULT_MODEL, top_k: int = 1, doc_stride: int | None = None,
           max_answer_len: int = 15, max_seq_len: int | None = None, handle_impossible_answer: bool = False,
           align_to_words: bool = True, batch_size: int = 32, dtype: str | None = None, device=None,
           revision: str | None = None, token: str | bool | None = None):  # fmt: skip
    """The answer(s) to ``question`` found in ``context`` (see the module's docstring). Lists of
    questions and contexts (of one length) give one result per pair. ``dtype`` ("int8", ...),
    ``device``, ``revision`` and ``token`` load a model given by name as ``from_pretrained`` does.

    The arguments are checked before the model loads, but for the limits the model sets:
    ``max_seq_len`` up to its ``max_position_embeddings`` (an explicit one is honoured, as the
    pipeline does; the default is the tokenizer's ``model_max_length``, at most 384), ``doc_stride``
    at most ``max_seq_len`` (a ``TaskArgumentError``), and a question must leave its context room in
    a window, more than ``doc_stride`` when the context needs several (a ``QuestionTooLongError``)."""
    single = isinstance(question, str) and isinstance(context, str)
    questions, contexts = ([question], [context]) if single else (question, context)
    if not isinstance(questions, (list, tuple)) or not isinstance(contexts, (list, tuple)) or len(questions) != len(
            contexts) or not all(isinstance(text, str) for text in [*questions, *contexts]):  # fmt: skip
        raise TypeError("question and context must be two texts, or two lists of texts of one length")
    for name, value in (("top_k", top_k), ("max_answer_len", max_answer_len)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    for number, pair in enumerate(zip(questions, contexts)):
        for name, text in zip(("question", "context"), pair):
            if not text.strip():
                raise ValueError(f"{name} {number} is empty: a question and its context must hold text")
    if max_seq_len is not None and (not isinstance(max_seq_len, int) or isinstance(max_seq_len, bool)
                                    or max_seq_len < 4):  # fmt: skip
        raise ValueError(f"max_seq_len must be an int of at least 4 ([CLS], a question, [SEP], [SEP]), "
                         f"got {max_seq_len!r}")  # fmt: skip
    if doc_stride is not None and (not isinstance(doc_stride, int) or isinstance(doc_stride, bool) or doc_stride < 0):
        raise ValueError(f"doc_stride must be a non-negative int, got {doc_stride!r}")
    bert, tokenizer = load_for_task(model, BertForQuestionAnswering, dtype=dtype, device=device, revision=revision,
                                    token=token)  # fmt: skip
    if bert.num_labels != 2:
        raise ValueError(f"a question-answering head scores a start and an end: this one has {bert.num_labels} outputs")
    positions = bert.config.max_position_embeddings  # what the model can compute, whatever its tokenizer says
    if max_seq_len is None:  # the pipeline's default, never past the model's positions
        max_seq_len = min(tokenizer.model_max_length, 384, positions)
    elif max_seq_len > positions:
        raise TaskArgumentError("max_seq_len", max_seq_len, f"an int from 4 to {positions} (the model's "
                                "max_position_embeddings)")  # fmt: skip
    stride_given = doc_stride is not None
    doc_stride = min(max_seq_len // 2, 128) if doc_stride is None else doc_stride
    if doc_stride > max_seq_len:  # the pipeline's own check
        raise TaskArgumentError("doc_stride", doc_stride, f"at most the window's {max_seq_len} tokens")
    for number, text in enumerate(questions):  # before the forward pass, naming the question (not stride=...)
        pieces = len(tokenizer.piece_ids(text))
        room = max_seq_len - 3 - pieces  # [CLS] question [SEP] context [SEP]
        if room < 1:
            raise QuestionTooLongError(number, pieces, max_seq_len, positions=positions)
        if room <= doc_stride and len(tokenizer.piece_ids(contexts[number])) > room:  # windows that never advance
            raise QuestionTooLongError(number, pieces, max_seq_len, doc_stride, stride_given, positions)
    # A context that fits one window is read whatever doc_stride says, as the pipeline reads it; those that need
    # several have room > doc_stride (above), so the tokenizer's own bound (max_seq_len - 3) only meets unused strides.
    doc_stride = min(doc_stride, max_seq_len - 4)
    rows = tokenizer(list(questions), list(contexts), truncation="only_second", max_length=max_seq_len,
                     stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True)  # fmt: skip
    results = run_rows(bert, tokenizer, rows, batch_size, fields=("start_logits", "end_logits"))
    candidates_per_pair: list[dict[str, dict]] = [{} for _ in questions]  # lower-cased text → the first found
    no_answer = [_NO_ANSWER_SCORE] * len(questions)
    wanted = top_k * 2 + 10 if align_to_words else top_k  # some spans merge once aligned to words
    for row, pair in enumerate(rows["overflow_to_sample_mapping"]):
        context_mask = np.array([sequence == 1 for sequence in rows.sequence_ids(row)])
        context_mask[0] = True  # [CLS]: "no answer"
        start, end, null_score = _probabilities(results[row]["start_logits"], results[row]["end_logits"], context_mask)
        no_answer[pair] = min(no_answer[pair], null_score)
        for first, last, score in _best_spans(start, end, wanted, max_answer_len, context_mask):
            begin, stop = _characters(rows, row, int(first), int(last), align_to_words)
            text = contexts[pair][begin:stop]
            key = text.lower()  # one look-up per span (a dict keeps the first found's place and adds to its score)
            if key in candidates_per_pair[pair]:
                candidates_per_pair[pair][key]["score"] += float(score)
            else:
                candidates_per_pair[pair][key] = {"score": float(score), "start": begin, "end": stop, "answer": text}
    answers = []
    for merged, null_score in zip(candidates_per_pair, no_answer):
        candidates = list(merged.values())  # in the order first found, as the pipeline's list
        if handle_impossible_answer:
            candidates.append({"score": float(null_score), "start": 0, "end": 0, "answer": ""})
        best = sorted(candidates, key=lambda found: found["score"], reverse=True)[:top_k]
        answers.append(best[0] if len(best) == 1 else best)
    return answers[0] if single else answers


def _probabilities(start_logits: np.ndarray, end_logits: np.ndarray, allowed: np.ndarray):
    """Softmax of the start and end scores over the allowed tokens; the "no answer" score
    P([CLS] starts) · P([CLS] ends); then [CLS] itself ruled out of spans."""
    start = np.where(allowed, start_logits, -10000.0)
    end = np.where(allowed, end_logits, -10000.0)
    start = np.exp(start - start.max())
    start = start / start.sum()
    end = np.exp(end - end.max())
    end = end / end.sum()
    null_score = (start[0] * end[0]).item()
    start[0] = end[0] = 0.0
    return start, end, null_score


def _best_spans(start: np.ndarray, end: np.ndarray, count: int, max_answer_len: int, allowed: np.ndarray):
    """The ``count`` best (first token, last token, P(start)·P(end)) with first ≤ last <
    first + max_answer_len, best first, keeping those inside the allowed tokens."""
    spans = np.tril(np.triu(np.outer(start, end)), max_answer_len - 1)  # (T, T): [first, last]
    flat = spans.flatten()
    if count == 1:
        order = [np.argmax(flat)]
    elif len(flat) < count:
        order = np.argsort(-flat)
    else:
        best = np.argpartition(-flat, count)[:count]
        order = best[np.argsort(-flat[best])]
    firsts, lasts = np.unravel_index(order, spans.shape)
    allowed_tokens = allowed.nonzero()
    keep = np.isin(firsts, allowed_tokens) & np.isin(lasts, allowed_tokens)
    return zip(firsts[keep], lasts[keep], spans[firsts[keep], lasts[keep]])


def _characters(rows, row: int, first: int, last: int, align_to_words: bool) -> tuple[int, int]:
    """The context characters of tokens first..last: whole words with ``align_to_words``."""
    if align_to_words:
        first_word, last_word = rows.token_to_word(row, first), rows.token_to_word(row, last)
        if first_word is not None and last_word is not None:
            return (rows.word_to_chars(row, first_word, sequence_index=1)[0],
                    rows.word_to_chars(row, last_word, sequence_index=1)[1])  # fmt: skip
    return rows["offset_mapping"][row][first][0], rows["offset_mapping"][row][last][1]
