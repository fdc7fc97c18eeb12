"""Text classification: a ``BertForSequenceClassification`` (sentiment, NLI, intent) turns each
text, or pair of texts, into one score per label.

    >>> classify("I loved this film", model=DIR)                     # doctest: +SKIP
    [{'label': 'POSITIVE', 'score': 0.9998}]
    >>> classify("I loved this film", model=DIR, top_k=None)         # doctest: +SKIP
    [{'label': 'POSITIVE', 'score': 0.9998}, {'label': 'NEGATIVE', 'score': 0.0002}]
    >>> classify({"text": "A man sleeps", "text_pair": "A person rests"}, model=NLI_DIR)  # doctest: +SKIP
    [{'label': 'entailment', 'score': 0.97}]

(``DIR`` and ``NLI_DIR``: a fine-tuned checkpoint's directory or hub id, so these lines are not
run as doctests; tests/test_tasks.py runs the same calls against transformers' pipeline. With
``top_k=None``, every label, best first.)

The scores are what transformers' ``text-classification`` pipeline gives: a softmax over the labels
when the model has several, a sigmoid when it has one or is multi-label (``problem_type``), the
raw logits for regression — or the ``function_to_apply`` asked for. The result's shape follows the
pipeline's: without ``top_k``, one ``{label, score}`` (the best) per text, in a list; with
``top_k=k`` (or ``None``: all), a list of the best ``k`` per text (for one text, just that list).
"""

from __future__ import annotations

import numpy as np

from ..heads import BertForSequenceClassification
from ..loading.hub import DEFAULT_MODEL
from ..task_choices import FUNCTIONS
from .loading import check_lengths, load_for_task, run_rows

_BEST_ONLY = object()  # top_k not given: the pipeline's one-best-label answer


def softmax(values: np.ndarray) -> np.ndarray:
    shifted = np.exp(values - np.max(values, axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def sigmoid(values: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-values))


def default_function(model: BertForSequenceClassification) -> str:
    """The pipeline's choice: raw scores for regression, a sigmoid for multi-label or one label,
    else a softmax."""
    problem = model.labels.problem_type
    if problem == "regression":
        return "none"
    if problem == "multi_label_classification" or model.num_labels == 1:
        return "sigmoid"
    return "softmax"


def scores_of(logits: np.ndarray, function: str) -> np.ndarray:
    if function not in FUNCTIONS:
        raise ValueError(f"function_to_apply must be one of {FUNCTIONS}, got {function!r}")
    return {"softmax": softmax, "sigmoid": sigmoid, "none": lambda values: values}[function](logits)


def _texts_and_pairs(inputs) -> tuple[bool, list[str], list[str] | None]:
    """One input or a list: each a text or ``{"text": ..., "text_pair": ...}``."""
    single = isinstance(inputs, (str, dict))
    items = [inputs] if single else inputs
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"inputs must be a text, a {{'text', 'text_pair'}} dict or a list of them, "
                        f"got {type(inputs).__name__}")  # fmt: skip
    texts, pairs = [], []
    for number, item in enumerate(items):
        if isinstance(item, dict):
            if set(item) - {"text", "text_pair"} or not isinstance(item.get("text"), str) or not isinstance(
                    item.get("text_pair", ""), str):  # fmt: skip
                raise ValueError(
                    f"input {number}: a pair is {{'text': str, 'text_pair': str}}, got keys {sorted(item)}"
                )
            texts.append(item["text"])
            pairs.append(item.get("text_pair"))
        elif isinstance(item, str):
            texts.append(item)
            pairs.append(None)
        else:
            raise TypeError(f"input {number} is a {type(item).__name__}; a text or a {{'text', 'text_pair'}} dict")
    if any(pair is not None for pair in pairs) and any(pair is None for pair in pairs):
        raise ValueError("give every input a text_pair or none of them")
    return single, texts, None if all(pair is None for pair in pairs) else pairs


def classify(inputs, *, model=DEFAULT_MODEL, top_k=_BEST_ONLY, function_to_apply: str | None = None,
             truncation: bool = False, batch_size: int = 32, dtype: str | None = None, device=None,
             revision: str | None = None, token: str | bool | None = None) -> list:  # fmt: skip
    """Labels and scores for each text (or ``{"text", "text_pair"}``), as the ``text-classification``
    pipeline returns them (see the module's docstring). A text longer than the model's positions is
    an error unless ``truncation=True`` (then its end, or its start where the tokenizer's
    ``truncation_side`` is "left", is cut at the tokenizer's ``model_max_length``, as the pipeline
    cuts, or at the model's positions if they are fewer: a tokenizer without a length,
    transformers' "no limit", is cut there, where sentence-transformers caps it). ``dtype`` ("int8",
    ...) loads a model given by name as ``from_pretrained`` does, and ``device`` ("cuda", "auto", ...),
    ``revision`` (a branch, tag or commit) and ``token`` (a private or gated repository's) too."""
    single, texts, pairs = _texts_and_pairs(inputs)
    if top_k is not _BEST_ONLY and top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool)
                                                          or top_k < 1):  # fmt: skip
        raise ValueError(f"top_k must be a positive int or None (every label), got {top_k!r}")
    if function_to_apply is not None:  # refuse an unknown function before the model loads
        scores_of(np.zeros(1, dtype=np.float32), str(function_to_apply).lower())
    bert, tokenizer = load_for_task(model, BertForSequenceClassification, dtype=dtype, device=device,
                                    revision=revision, token=token)  # fmt: skip
    function = default_function(bert) if function_to_apply is None else str(function_to_apply).lower()
    positions = bert.config.max_position_embeddings
    cut_at = min(tokenizer.model_max_length, positions)  # truncation=True cuts where the pipeline's tokenizer cuts
    # One batch call; a row with an empty text_pair again alone, as the pipeline tokenizes each input:
    # a single call drops an empty pair ([CLS] a [SEP]), where a batch keeps its [SEP].
    cut = {"truncation": truncation or None, "max_length": cut_at if truncation else None, "verbose": False}
    encoded = tokenizer(texts, pairs, **cut)
    rows = {key: list(encoded[key]) for key in ("input_ids", "token_type_ids")}
    for row, pair in enumerate(pairs or []):
        if pair == "":
            alone = tokenizer(texts[row], pair, **cut)
            rows["input_ids"][row], rows["token_type_ids"][row] = alone["input_ids"], alone["token_type_ids"]
    check_lengths(rows["input_ids"], positions, "pass truncation=True to cut it")  # what the model cannot compute
    id2label = bert.labels.id2label
    answers = []
    for result in run_rows(bert, tokenizer, rows, batch_size):
        scores = scores_of(result["logits"], function)
        if top_k is _BEST_ONLY:
            best = int(scores.argmax())
            answers.append({"label": id2label[best], "score": float(scores[best])})
            continue
        ranked = sorted(({"label": id2label[i], "score": float(s)} for i, s in enumerate(scores)),
                        key=lambda entry: entry["score"], reverse=True)  # fmt: skip
        answers.append(ranked if top_k is None else ranked[:top_k])
    if single:  # (the pipeline puts one text's best label in a list, but not one pair's)
        return answers if top_k is _BEST_ONLY and isinstance(inputs, str) else answers[0]
    return answers
