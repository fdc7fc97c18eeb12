"""What BERT's pre-training heads can do out of the box: fill in a [MASK], and judge whether one
sentence follows another.

    >>> fill_mask("Paris is the [MASK] of France.", model="google-bert/bert-base-uncased")  # doctest: +SKIP
    [{'token': 'capital', 'token_id': 3007, 'score': 0.997}, ...]
    >>> next_sentence("I was thirsty.", "I drank water.")                                   # doctest: +SKIP
    0.9999...

A hub id or directory is loaded as ``BertForMaskedLM`` for ``fill_mask`` and
``BertForNextSentencePrediction`` for ``next_sentence``; ``BertForPreTraining`` has both heads.
"""

from __future__ import annotations

import torch

from ..formats.hub import DEFAULT_MODEL
from ..heads import BertForMaskedLM, BertForNextSentencePrediction
from .loading import load_for_task


def fill_mask(text: str, *, model=DEFAULT_MODEL, top_k: int = 5) -> list[dict] | list[list[dict]]:
    """The ``top_k`` most likely pieces for the [MASK] in ``text``, most likely first:
    ``[{"token": "fashion", "token_id": 4827, "score": 0.107}, ...]`` (scores are softmax
    probabilities over the vocabulary). With several [MASK]s: one such list per mask."""
    bert, tokenizer = load_for_task(model, BertForMaskedLM, "mlm_head")
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
    bert, tokenizer = load_for_task(model, BertForNextSentencePrediction, "nsp_head")
    batch = tokenizer(first, second, truncation=True, return_tensors="pt")
    with torch.inference_mode():
        out = bert(**batch)
        logits = getattr(out, "seq_relationship_logits", None)
        logits = (out.logits if logits is None else logits)[0].float()  # index 0 = "is next"
    return float(logits.softmax(-1)[0])
