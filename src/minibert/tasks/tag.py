"""Token classification (named entities, parts of speech): a ``BertForTokenClassification``
labels every word piece, and the pieces are put back together into words and entities.

    >>> tag("Ada Lovelace was born in London", model=NER_DIR, aggregation_strategy="simple")  # doctest: +SKIP
    [{'entity_group': 'PER', 'score': 0.998, 'word': 'ada lovelace', 'start': 0, 'end': 12}, ...]

The results are transformers' ``token-classification`` pipeline's, key for key:

* ``none``: one entry per piece (special tokens left out): ``entity`` (its best label),
  ``score``, ``index`` (its position), ``word`` (the piece), ``start``/``end`` (its characters in
  the text, from the tokenizer's offset mapping).
* ``simple``: neighbouring pieces whose labels name the same entity (``B-PER`` then ``I-PER``)
  are grouped: ``entity_group`` (the label without B-/I-), ``score`` (the mean), ``word`` (the
  pieces joined back into text), ``start``/``end``.
* ``first`` / ``average`` / ``max``: first, the pieces of each *word* (a piece that continues a
  word is one whose text is shorter than the piece, the ``##``) get one label: the first piece's,
  the best of the averaged scores, or the most confident piece's; then words are grouped as in
  ``simple``.

Labels in ``ignore_labels`` (default ``["O"]``, outside any entity) are left out. Without
``stride`` a text is cut at the model's length (its end, or its start where the tokenizer's
``truncation_side`` is "left"; at the tokenizer's ``model_max_length``, as the pipeline cuts, and
never past the model's positions: a tokenizer without a length, transformers' "no limit",
is read up to them, as sentence-transformers caps it); with ``stride=k`` it is read in overlapping
windows that share ``k`` pieces, and of two entities that overlap the longer (then the more
confident) is kept, as the pipeline does.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import PicklableError, TaskArgumentError
from ..heads import BertForTokenClassification
from ..loading.hub import DEFAULT_MODEL
from ..task_choices import AGGREGATIONS
from .classify import softmax
from .loading import load_for_task, lost_part, run_rows


def tag(inputs, *, model=DEFAULT_MODEL, aggregation_strategy: str = "none", ignore_labels=("O",),
        stride: int | None = None, batch_size: int = 32, dtype: str | None = None, device=None,
        revision: str | None = None, token: str | bool | None = None) -> list:  # fmt: skip
    """The entities of a text (a list of dicts), or of each text in a list (a list of such lists);
    see the module's docstring for what each ``aggregation_strategy`` returns (``ignore_labels=None``
    is the default ``["O"]``, as in the pipeline). ``dtype`` ("int8", ...), ``device``, ``revision``
    and ``token`` load a model given by name as ``from_pretrained`` does. The arguments are checked before the model
    loads, but for ``stride``'s limit, which the window (the model's length) sets."""
    strategy = str(aggregation_strategy).lower()
    if strategy not in AGGREGATIONS:
        raise ValueError(f"aggregation_strategy must be one of {AGGREGATIONS}, got {aggregation_strategy!r}")
    ignore_labels = ("O",) if ignore_labels is None else ignore_labels
    single = isinstance(inputs, str)
    texts = [inputs] if single else inputs
    if not isinstance(texts, (list, tuple)) or not all(isinstance(text, str) for text in texts):
        raise TypeError("inputs must be a text or a list of texts")
    if stride is not None:
        if strategy == "none":
            raise ValueError('stride reads a text in windows, whose pieces only an aggregation_strategy other than '
                             '"none" can join: choose one')  # fmt: skip
        if not isinstance(stride, int) or isinstance(stride, bool) or stride < 0:
            raise ValueError(f"stride must be a non-negative int, got {stride!r}")
    bert, tokenizer = load_for_task(model, BertForTokenClassification, dtype=dtype, device=device, revision=revision,
                                    token=token)  # fmt: skip
    limit = min(tokenizer.model_max_length, bert.config.max_position_embeddings)  # the pipeline cuts at the former
    if stride is not None and stride >= limit - 2:
        raise TaskArgumentError("stride", stride, f"an int from 0 to {limit - 3} (the window is {limit} tokens)")
    rows = tokenizer(list(texts), truncation=True, max_length=limit, return_offsets_mapping=True,
                     return_special_tokens_mask=True, return_overflowing_tokens=stride is not None,
                     stride=stride or 0)  # fmt: skip
    windows_of = rows["overflow_to_sample_mapping"] if stride is not None else list(range(len(texts)))
    if stride is None:  # a row cut at the limit: one warning for each text cut, each by its number
        cut = [(number, len(tokenizer.piece_ids(texts[number])) + 2) for number, ids in enumerate(rows["input_ids"])
               if len(ids) == limit]  # fmt: skip
        cut = [(number, pieces) for number, pieces in cut if pieces > limit]
        for number, pieces in cut:
            warnings.warn(TextCutWarning(number, pieces, limit, lost_part(tokenizer)), stacklevel=2)
    results = run_rows(bert, tokenizer, rows, batch_size)
    id2label = bert.labels.id2label
    entities: list[list[dict]] = [[] for _ in texts]
    windows: list[int] = [0] * len(texts)
    for row, text_number in enumerate(windows_of):
        text = texts[text_number]
        pieces = _pieces(tokenizer, text, rows, row, softmax(results[row]["logits"]))
        found = [entity for entity in _aggregate(pieces, strategy, id2label, tokenizer)
                 if entity.get("entity", entity.get("entity_group")) not in ignore_labels]  # fmt: skip
        entities[text_number].extend(found)
        windows[text_number] += 1
    entities = [_merge_overlapping(found) if count > 1 else found for found, count in zip(entities, windows)]
    return entities[0] if single else entities


class TextCutWarning(PicklableError, UserWarning):
    """A text longer than the model takes, tagged up to the cut: ``number`` (its place among the
    texts, from 0), its ``pieces`` (with [CLS] and [SEP]) and the model's ``limit``, as data, so that
    a command can name the line and its own flags (``--stride``) instead of the Python parameters;
    ``lost``: the part the tokenizer cut, "end" or "start" (``truncation_side`` "left")."""

    def __init__(self, number: int, pieces: int, limit: int, lost: str = "end"):
        super().__init__(f"tag, text {number}: the text is {pieces} pieces long (with [CLS] and [SEP]), more than the "
                         f"{limit} this model takes: {pieces - limit} pieces were cut; its {lost} is not tagged; "
                         "stride= (with an aggregation_strategy) reads a long text in windows")  # fmt: skip
        self.number, self.pieces, self.limit, self.lost = number, pieces, limit, lost


def _pieces(tokenizer, text: str, rows, row: int, scores: np.ndarray) -> list[dict]:
    """Each piece of one row but the special tokens: its token, scores, characters and whether it
    continues a word."""
    pieces = []
    ids, offsets, special = rows["input_ids"][row], rows["offset_mapping"][row], rows["special_tokens_mask"][row]
    for index, (piece_id, (start, end), is_special) in enumerate(zip(ids, offsets, special)):
        if is_special:
            continue
        token, source = tokenizer.convert_ids_to_tokens(piece_id), text[start:end]
        continues_word = len(token) != len(source)  # "##ing" is longer than "ing": a continuation
        if piece_id == tokenizer.unk_token_id:
            token, continues_word = source, False
        pieces.append({"word": token, "scores": scores[index], "start": start, "end": end, "index": index,
                       "is_subword": continues_word})  # fmt: skip
    return pieces


def _aggregate(pieces: list[dict], strategy: str, id2label: dict[int, str], tokenizer) -> list[dict]:
    if strategy in ("none", "simple"):
        entities = []
        for piece in pieces:
            best = int(piece["scores"].argmax())
            entities.append({"entity": id2label[best], "score": float(piece["scores"][best]), "index": piece["index"],
                             "word": piece["word"], "start": piece["start"], "end": piece["end"]})  # fmt: skip
        return entities if strategy == "none" else _group(entities, tokenizer)
    words, current = [], []
    for piece in pieces:
        if current and not piece["is_subword"]:
            words.append(_one_word(current, strategy, id2label, tokenizer))
            current = []
        current.append(piece)
    if current:
        words.append(_one_word(current, strategy, id2label, tokenizer))
    return _group(words, tokenizer)


def _one_word(pieces: list[dict], strategy: str, id2label: dict[int, str], tokenizer) -> dict:
    """One label for a word's pieces: the first piece's, the most confident piece's, or the best
    of the mean scores."""
    if strategy == "first":
        scores = pieces[0]["scores"]
    elif strategy == "max":
        scores = max(pieces, key=lambda piece: piece["scores"].max())["scores"]
    else:  # average
        scores = np.nanmean(np.stack([piece["scores"] for piece in pieces]), axis=0)
    best = int(scores.argmax())
    return {"entity": id2label[best], "score": float(scores[best]),
            "word": tokenizer.convert_tokens_to_string([piece["word"] for piece in pieces]),
            "start": pieces[0]["start"], "end": pieces[-1]["end"]}  # fmt: skip


def _bio(label: str) -> tuple[str, str]:
    """``B-PER`` → (B, PER); ``I-PER`` or a label without a prefix → (I, label): it continues."""
    if label.startswith(("B-", "I-")):
        return label[0], label[2:]
    return "I", label


def _group(entities: list[dict], tokenizer) -> list[dict]:
    """Neighbours with the same entity, where the next does not begin a new one (B-), become one."""
    groups, current = [], []
    for entity in entities:
        if current:
            begins, name = _bio(entity["entity"])
            if name != _bio(current[-1]["entity"])[1] or begins == "B":
                groups.append(_one_group(current, tokenizer))
                current = []
        current.append(entity)
    if current:
        groups.append(_one_group(current, tokenizer))
    return groups


def _one_group(entities: list[dict], tokenizer) -> dict:
    return {"entity_group": entities[0]["entity"].split("-", 1)[-1],
            "score": float(np.nanmean([entity["score"] for entity in entities])),
            "word": tokenizer.convert_tokens_to_string([entity["word"] for entity in entities]),
            "start": entities[0]["start"], "end": entities[-1]["end"]}  # fmt: skip


def _merge_overlapping(entities: list[dict]) -> list[dict]:
    """Entities from overlapping windows: of two that overlap, keep the longer, then the more
    confident."""
    if not entities:
        return entities
    entities = sorted(entities, key=lambda entity: entity["start"])
    kept, previous = [], entities[0]
    for entity in entities:
        if previous["start"] <= entity["start"] < previous["end"]:
            length, previous_length = entity["end"] - entity["start"], previous["end"] - previous["start"]
            if length > previous_length or (length == previous_length and entity["score"] > previous["score"]):
                previous = entity
        else:
            kept.append(previous)
            previous = entity
    kept.append(previous)
    return kept
