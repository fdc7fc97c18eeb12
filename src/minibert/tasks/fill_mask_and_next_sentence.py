"""What BERT's pre-training heads can do out of the box: fill in a [MASK], and judge whether one
sentence follows another.

    >>> fill_mask("Paris is the [MASK] of France.", model="google-bert/bert-base-uncased")  # doctest: +SKIP
    [{'token': 'capital', 'token_id': 3007, 'score': 0.997}, ...]
    >>> next_sentence("I was thirsty.", "I drank water.")                                   # doctest: +SKIP
    0.9999...

A hub id or directory is loaded as ``BertForMaskedLM`` for ``fill_mask`` and
``BertForNextSentencePrediction`` for ``next_sentence``; ``BertForPreTraining`` has both heads.
With no ``model``, the default (google-bert/bert-base-uncased) is used; when it cannot be reached
(no hub, not in the cache), the toy ``minibert/fortunes-mini`` shipped in the package is, with a
warning saying so, as the ``minibert fill-mask`` and ``next-sentence`` commands do.
"""

from __future__ import annotations

import warnings

import torch

from ..errors import ModelNotFoundError
from ..formats.hub import BUNDLED_WITH_HEADS, DEFAULT_MODEL, bundled_path
from ..heads import BertForMaskedLM, BertForNextSentencePrediction, BertForPreTraining
from .loading import load_for_task

# What the tasks (a warning) and the commands (a line on stderr) say when they use the bundled toy.
BUNDLED_FALLBACK_NOTE = (
    f"{DEFAULT_MODEL} is not reachable (no hub access, not cached); using the bundled {BUNDLED_WITH_HEADS}, "
    "a toy BERT trained on Debian's fortunes (a few common words in context, not bert-base: docs/fortunes-mini.md)"
)


def load_with_fallback(model, cls: type, head: str, *, gemm: str | None = None):
    """``load_for_task(model, cls, head)``; ``model=None`` is the default model, or the bundled toy
    (with a warning) when the default cannot be reached. The toy is a ``BertForPreTraining`` and is
    loaded as one (both heads): no tensor of it is left unused."""
    if model is None:
        try:
            return load_for_task(DEFAULT_MODEL, cls, head, gemm=gemm)
        except ModelNotFoundError:
            warnings.warn(BUNDLED_FALLBACK_NOTE, stacklevel=3)
            model = BUNDLED_WITH_HEADS
    if isinstance(model, str) and bundled_path(model) is not None:
        cls = BertForPreTraining
    return load_for_task(model, cls, head, gemm=gemm)


def fill_mask(text: str, *, model=None, top_k: int = 5) -> list[dict] | list[list[dict]]:
    """The ``top_k`` most likely pieces for the [MASK] in ``text``, most likely first:
    ``[{"token": "fashion", "token_id": 4827, "score": 0.107}, ...]`` (scores are softmax
    probabilities over the vocabulary). With several [MASK]s: one such list per mask.
    ``model=None``: google-bert/bert-base-uncased, else the bundled toy (see above)."""
    bert, tokenizer = load_with_fallback(model, BertForMaskedLM, "mlm_head")
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


def next_sentence(first: str, second: str, *, model=None) -> float:
    """Probability, by BERT's next-sentence head, that ``second`` follows ``first`` in a text.
    ``model=None``: google-bert/bert-base-uncased, else the bundled toy (see above)."""
    bert, tokenizer = load_with_fallback(model, BertForNextSentencePrediction, "nsp_head")
    batch = tokenizer(first, second, truncation=True, return_tensors="pt")
    with torch.inference_mode():
        out = bert(**batch)
        logits = getattr(out, "seq_relationship_logits", None)
        logits = (out.logits if logits is None else logits)[0].float()  # index 0 = "is next"
    return float(logits.softmax(-1)[0])
