"""What BERT's pre-training heads can do out of the box: fill in a [MASK], and judge whether one
sentence follows another.

    >>> fill_mask("Paris is the [MASK] of France.", model="google-bert/bert-base-uncased")  # doctest: +SKIP
    [{'token': 'capital', 'token_id': 3007, 'score': 0.997}, ...]
    >>> next_sentence("I was thirsty.", "I drank water.")                                   # doctest: +SKIP
    0.9999...

``model=`` takes a hub id, a local directory (loaded as ``BertForMaskedLM`` for ``fill_mask``,
``BertForNextSentencePrediction`` for ``next_sentence``), a loaded model with the head
(``BertForPreTraining`` has both; its tokenizer is loaded from where the model came from), or a
``(model, tokenizer)`` pair. Models loaded from a name are kept, so calling these functions in a
loop loads each model once.
"""

from __future__ import annotations

import functools
import os
import threading

import torch

from .formats.hub import DEFAULT_MODEL
from .heads import BertForMaskedLM, BertForNextSentencePrediction, BertWithHeads
from .tokenizer.bert_tokenizer import BertTokenizer

_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _load_cached(name_or_path: str, cls: type = BertForMaskedLM) -> tuple[BertWithHeads, BertTokenizer]:
    model, tokenizer = cls.from_pretrained(name_or_path), BertTokenizer.from_pretrained(name_or_path)
    model.config.check_vocabulary(tokenizer.vocab, name_or_path)
    return model, tokenizer


@functools.lru_cache(maxsize=8)
def _tokenizer_cached(name_or_path: str) -> BertTokenizer:
    return BertTokenizer.from_pretrained(name_or_path)


def load_for_task(model, head: str) -> tuple[BertWithHeads, BertTokenizer]:
    """Resolve ``model=`` to a model with ``head`` ("mlm_head" or "nsp_head") and its tokenizer: a
    hub id or directory (loaded once, with the class that has just that head), a loaded model that
    has the head (BertForPreTraining has both), or (model, tokenizer)."""
    if isinstance(model, tuple) and len(model) == 2:
        return model
    if isinstance(model, BertWithHeads) and hasattr(model, head):
        source = getattr(model, "name_or_path", None)
        if source is None:
            raise ValueError("pass model=(model, tokenizer): this model was not loaded with from_pretrained")
        return model, _tokenizer_cached(str(source))
    if isinstance(model, (str, os.PathLike)):
        with _lock:  # two threads asking for the same model load it once
            return _load_cached(os.fspath(model), TASK_CLASSES[head])
    raise TypeError(f"model must be a hub id, a directory, a model with {head} or (model, tokenizer), "
                    f"got {type(model).__name__}")  # fmt: skip


TASK_CLASSES = {"mlm_head": BertForMaskedLM, "nsp_head": BertForNextSentencePrediction}


def fill_mask(text: str, *, model=DEFAULT_MODEL, top_k: int = 5) -> list[dict] | list[list[dict]]:
    """The ``top_k`` most likely pieces for the [MASK] in ``text``, most likely first:
    ``[{"token": "fashion", "token_id": 4827, "score": 0.107}, ...]`` (scores are softmax
    probabilities over the vocabulary). With several [MASK]s: one such list per mask."""
    bert, tokenizer = load_for_task(model, "mlm_head")
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    if tokenizer.mask_token_id is None:
        vocabulary = tokenizer.vocab_file.name
        raise ValueError(f"cannot fill a mask: the vocabulary {vocabulary} has no {tokenizer.mask_token} piece")
    batch = tokenizer(text, truncation=True, return_tensors="pt")
    positions = (batch["input_ids"][0] == tokenizer.mask_token_id).nonzero().flatten().tolist()
    if not positions:
        raise ValueError(f"the text has no {tokenizer.mask_token} token to fill: {text!r}")
    with torch.inference_mode():
        out = bert(**batch)
        logits = (out.prediction_logits if hasattr(out, "prediction_logits") else out.logits)[0].float()  # (T, V)
    answers = []
    for position in positions:
        probabilities = logits[position].softmax(-1)
        scores, ids = probabilities.topk(min(top_k, probabilities.numel()))
        answers.append(
            [
                {"token": tokenizer.convert_ids_to_tokens(int(i)), "token_id": int(i), "score": float(s)}
                for s, i in zip(scores, ids)
            ]
        )
    return answers[0] if len(answers) == 1 else answers


def next_sentence(first: str, second: str, *, model=DEFAULT_MODEL) -> float:
    """Probability, by BERT's next-sentence head, that ``second`` follows ``first`` in a text."""
    bert, tokenizer = load_for_task(model, "nsp_head")
    batch = tokenizer(first, second, truncation=True, return_tensors="pt")
    with torch.inference_mode():
        out = bert(**batch)
        logits = getattr(out, "seq_relationship_logits", None)
        logits = (out.logits if logits is None else logits)[0].float()  # index 0 = "is next"
    return float(logits.softmax(-1)[0])
