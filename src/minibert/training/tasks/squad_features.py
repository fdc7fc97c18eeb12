"""Question examples → windows of the model's inputs, as Google's ``run_squad.convert_examples_to_features``.

The pieces are the model's own tokenizer's (head.py ``load_tokenizer``: the one the run saves and
``minibert answer`` serves with). The question keeps its first ``max_query_length`` (64) pieces. The
context's words are cut into WordPiece pieces, each word on its own as Google's code cuts them; a
context longer than what is left (``max_seq_length − len(question) − 3``) is read through
overlapping windows, each starting ``doc_stride`` (128) pieces after the last:

    [CLS] question pieces [SEP] context pieces of this window [SEP] [PAD] ...
    segment 0 ...................... segment 1 .................... 0 ...

A piece seen by several windows counts in the one where it has the most context on its shorter
side (``_check_is_max_context``: min(left, right) + 0.01 · window length); ``token_is_max_context``
says so per position, and predictions (squad_predictions.py) only take answers starting there.

Training positions: the answer's words become pieces, narrowed by ``_improve_answer_span`` to the
pieces that spell the answer exactly ("(1895-1943)." → "1895"); in a window that does not hold the
whole answer, and for an impossible (v2.0) question, start and end point at [CLS] (position 0).

Where Google's code hangs, minibert refuses: a question whose kept pieces leave the context no
room (``max_seq_length − min(pieces, max_query_length) − 3 < 1``) makes Google's window loop
stand still forever, so it is a DataError naming the question before any window is made. A
context of no pieces (empty, or zero-width characters only) gets no window, as in Google's code
(squad_predictions.py answers it "" under v2.0, Google's placeholder "empty" under v1.1).

>>> spans = [DocSpan(0, 5), DocSpan(3, 5)]
>>> [check_is_max_context(spans, 1, position) for position in (3, 4, 5)]
[False, True, True]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ...errors import DataError
from ...tokenizer import BertTokenizer
from .squad_examples import SquadExample

FIRST_UNIQUE_ID = 1000000000  # Google's numbering of the features


class DocSpan(NamedTuple):
    start: int  # first context piece of the window
    length: int  # pieces in the window


@dataclass
class SquadFeature:
    """One window of one question (Google's ``InputFeatures``)."""

    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list[str]
    token_to_orig_map: dict[int, int]  # position in tokens → context word index
    token_is_max_context: dict[int, bool]  # position in tokens → is this window the piece's best?
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]
    start_position: int | None = None  # training only
    end_position: int | None = None
    is_impossible: bool = False


def word_pieces(tokenizer: BertTokenizer, text: str) -> list[str]:
    """``text``'s WordPiece pieces as strings (Google's ``FullTokenizer.tokenize`` gives them for its tokenizer)."""
    return tokenizer.convert_ids_to_tokens(tokenizer.piece_ids(text))


def improve_answer_span(doc_pieces: list[str], start: int, end: int, tokenizer: BertTokenizer,
                        answer_text: str) -> tuple[int, int]:  # fmt: skip
    """The narrowest pieces within [start, end] whose text is the answer's pieces, else [start, end]."""
    answer = " ".join(word_pieces(tokenizer, answer_text))
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(doc_pieces[new_start:new_end + 1]) == answer:
                return new_start, new_end
    return start, end


def check_is_max_context(spans: list[DocSpan], span_index: int, position: int) -> bool:
    """Is window ``span_index`` the one where the piece at ``position`` has the most context?"""
    best_score, best_index = None, None
    for index, span in enumerate(spans):
        end = span.start + span.length - 1
        if span.start <= position <= end:
            score = min(position - span.start, end - position) + 0.01 * span.length
            if best_score is None or score > best_score:
                best_score, best_index = score, index
    return span_index == best_index


def doc_spans(piece_count: int, max_pieces: int, doc_stride: int) -> list[DocSpan]:
    """The windows over ``piece_count`` context pieces: at most ``max_pieces`` each, ``doc_stride`` apart.
    Both must be positive: a window of 0 pieces, or a stride of 0, never moves on (Google's loop hangs)."""
    if max_pieces < 1 or doc_stride < 1:
        raise ValueError(f"a window needs at least 1 piece and a stride of at least 1, got max_pieces={max_pieces} "
                         f"and doc_stride={doc_stride}")  # fmt: skip
    spans, start = [], 0
    while start < piece_count:
        length = min(piece_count - start, max_pieces)
        spans.append(DocSpan(start, length))
        if start + length == piece_count:
            break
        start += min(length, doc_stride)
    return spans


def convert_examples_to_features(examples: list[SquadExample], tokenizer: BertTokenizer,
                                 max_seq_length: int = 384, doc_stride: int = 128, max_query_length: int = 64,
                                 is_training: bool = False, source: str | Path = "the file"
                                 ) -> list[SquadFeature]:  # fmt: skip
    """Every window of every example, numbered from Google's first unique id; a DataError naming
    ``source`` (the file) and the question when a question leaves its context no room."""
    features: list[SquadFeature] = []
    queries = [tokenizer.piece_ids(example.question_text) for example in examples]
    for example, query in zip(examples, queries):  # all checked before any window is made
        if max_seq_length - min(len(query), max_query_length) - 3 < 1:
            _no_room(example, len(query), max_seq_length, max_query_length, source)
    for example_index, (example, query) in enumerate(zip(examples, queries)):
        query = query[:max_query_length]
        piece_to_word, word_to_piece, piece_ids = [], [], []
        for word_index, word in enumerate(example.doc_tokens):
            word_to_piece.append(len(piece_ids))
            for piece in tokenizer.piece_ids(word):
                piece_to_word.append(word_index)
                piece_ids.append(piece)
        pieces = tokenizer.convert_ids_to_tokens(piece_ids)
        answer = None
        if is_training and not example.is_impossible:
            start = word_to_piece[example.start_position]
            last_word = example.end_position == len(example.doc_tokens) - 1
            end = len(pieces) - 1 if last_word else word_to_piece[example.end_position + 1] - 1
            answer = improve_answer_span(pieces, start, end, tokenizer, example.orig_answer_text)
        spans = doc_spans(len(pieces), max_seq_length - len(query) - 3, doc_stride)  # 3: [CLS] [SEP] [SEP]
        for span_index, span in enumerate(spans):
            input_ids = [tokenizer.cls_token_id, *query, tokenizer.sep_token_id]
            to_word, is_max = {}, {}
            for piece_index in range(span.start, span.start + span.length):
                to_word[len(input_ids)] = piece_to_word[piece_index]
                is_max[len(input_ids)] = check_is_max_context(spans, span_index, piece_index)
                input_ids.append(piece_ids[piece_index])
            input_ids.append(tokenizer.sep_token_id)
            tokens = tokenizer.convert_ids_to_tokens(input_ids)
            segment_ids = [0] * (len(query) + 2) + [1] * (span.length + 1)
            padding = max_seq_length - len(tokens)
            feature = SquadFeature(len(features) + FIRST_UNIQUE_ID, example_index, span_index, tokens, to_word, is_max,
                                   input_ids + [0] * padding, [1] * len(tokens) + [0] * padding,
                                   segment_ids + [0] * padding, is_impossible=example.is_impossible)  # fmt: skip
            if is_training:
                feature.start_position, feature.end_position = _positions(answer, span, len(query) + 2)
            features.append(feature)
    return features


def _positions(answer: tuple[int, int] | None, span: DocSpan, doc_offset: int) -> tuple[int, int]:
    """The answer's positions in the window; (0, 0) — [CLS] — when impossible or not all inside."""
    if answer is None or not (answer[0] >= span.start and answer[1] <= span.start + span.length - 1):
        return 0, 0
    return answer[0] - span.start + doc_offset, answer[1] - span.start + doc_offset


def _no_room(example: SquadExample, pieces: int, max_seq_length: int, max_query_length: int, source) -> None:
    """The DataError for a question whose kept pieces fill the window: what must hold, and the fixes."""
    kept = min(pieces, max_query_length)
    shorter = f" or a --max-query-length of at most {max_seq_length - 4}" if max_seq_length > 4 else ""
    raise DataError(f"{source}: question {example.qas_id!r} is {pieces} pieces, {kept} kept (--max-query-length "
                    f"{max_query_length}): with [CLS] and two [SEP] it leaves no room for the context in "
                    f"--max-seq-length {max_seq_length}; pass a --max-seq-length of at least {kept + 4}{shorter}")
