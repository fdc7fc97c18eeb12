"""What BERT's pre-training heads can do out of the box: fill in a [MASK], and judge whether one
sentence follows another.

    >>> fill_mask("Paris is the [MASK] of France.", model="google-bert/bert-base-uncased")  # doctest: +SKIP
    [{'score': 0.997, 'token': 3007, 'token_str': 'capital', 'sequence': 'paris is the capital of france.'}, ...]
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
from ..heads import BertForMaskedLM, BertForNextSentencePrediction, BertForPreTraining
from ..loading.hub import BUNDLED_WITH_HEADS, DEFAULT_MODEL, bundled_path
from ..pretrained import evaluating
from .loading import load_for_task, warn_if_cut

# What the tasks (a warning) and the commands (a line on stderr) say when they use the bundled toy.
BUNDLED_FALLBACK_NOTE = (
    f"{DEFAULT_MODEL} is not reachable (no hub access, not cached); using the bundled {BUNDLED_WITH_HEADS}, "
    "a toy BERT trained on Debian's fortunes (a few common words in context, not bert-base: docs/fortunes-mini.md)"
)


def load_with_fallback(model, cls: type, head: str, *, gemm: str | None = None, device=None):
    """``load_for_task(model, cls, head)``; ``model=None`` is the default model, or the bundled toy
    (with a warning) when the default cannot be reached. The toy is a ``BertForPreTraining`` and is
    loaded as one (both heads): no tensor of it is left unused."""
    if model is None:
        try:
            return load_for_task(DEFAULT_MODEL, cls, head, gemm=gemm, device=device)
        except ModelNotFoundError:
            warnings.warn(BUNDLED_FALLBACK_NOTE, stacklevel=3)
            model = BUNDLED_WITH_HEADS
    if isinstance(model, str) and bundled_path(model) is not None:
        cls = BertForPreTraining
    return load_for_task(model, cls, head, gemm=gemm, device=device)


def fill_mask(text: str | list[str], *, model=None, top_k: int = 5, device=None) -> list:
    """The ``top_k`` most likely pieces for the [MASK] in ``text``, most likely first, as
    transformers' ``pipeline("fill-mask")`` gives them: ``[{"score": 0.107, "token": 4827,
    "token_str": "fashion", "sequence": "i love fashion."}, ...]`` (``token`` is the id; scores are
    softmax probabilities over the vocabulary; ``sequence`` is the text with the piece in place).
    With several [MASK]s: one such list per mask (each ``sequence`` filling that mask alone, with
    [CLS] and [SEP] kept, as the pipeline does). A list of texts gives one result per text.
    ``model=None``: google-bert/bert-base-uncased, else the bundled toy (see above)."""
    bert, tokenizer = load_with_fallback(model, BertForMaskedLM, "mlm_head", device=device)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    if tokenizer.mask_token_id is None:
        vocabulary = tokenizer.vocab_file.name
        raise ValueError(f"cannot fill a mask: the vocabulary {vocabulary} has no {tokenizer.mask_token} piece")
    if isinstance(text, (list, tuple)) and all(isinstance(one, str) for one in text):
        return [_fill_one(bert, tokenizer, one, top_k) for one in text]
    if not isinstance(text, str):
        raise TypeError(f"fill_mask takes a text (str) or a list of texts, got {type(text).__name__}")
    return _fill_one(bert, tokenizer, text, top_k)


def _fill_one(bert, tokenizer, text: str, top_k: int) -> list:
    """``fill_mask`` of one text."""
    limit = min(tokenizer.model_max_length, bert.config.max_position_embeddings)
    pieces = tokenizer(text, verbose=False)["input_ids"]  # [CLS] text [SEP], not cut
    positions = [position for position, piece in enumerate(pieces) if piece == tokenizer.mask_token_id]
    if not positions:
        raise ValueError(f"the text has no {tokenizer.mask_token} token to fill: {text!r}")
    if positions[-1] > limit - 2:  # cut to the model's positions, pieces 0 .. limit-2 stay, then [SEP]
        raise ValueError(
            f"the {tokenizer.mask_token} is piece {positions[-1]} of the text's {len(pieces)} (counting [CLS] as 0), "
            f"beyond the model's {limit} positions (max_position_embeddings): pieces 0 to {limit - 2} and a closing "
            f"[SEP] fit; shorten the text before the {tokenizer.mask_token}"
        )
    warn_if_cut("fill_mask", len(pieces), limit, f"the {tokenizer.mask_token}s are before the cut")
    batch = tokenizer(text, truncation=True, max_length=limit, return_tensors="pt")
    with evaluating(bert), torch.inference_mode():  # dropout off, the model's mode put back after
        out = bert(**batch)
        logits = (out.prediction_logits if hasattr(out, "prediction_logits") else out.logits)[0].float()  # (T, V)
    ids = batch["input_ids"][0].tolist()
    answers = []
    for position in positions:
        probabilities = logits[position].softmax(-1)
        scores, best = probabilities.topk(min(top_k, probabilities.numel()))
        answers.append([{"score": float(score), "token": int(piece), "token_str": tokenizer.decode([int(piece)]),
                         "sequence": tokenizer.decode(ids[:position] + [int(piece)] + ids[position + 1 :],
                                                      skip_special_tokens=len(positions) == 1)}
                        for score, piece in zip(scores, best)])  # fmt: skip
    return answers[0] if len(answers) == 1 else answers


def next_sentence(first: str, second: str, *, model=None, device=None) -> float:
    """Probability, by BERT's next-sentence head, that ``second`` follows ``first`` in a text.
    ``model=None``: google-bert/bert-base-uncased, else the bundled toy (see above)."""
    bert, tokenizer = load_with_fallback(model, BertForNextSentencePrediction, "nsp_head", device=device)
    limit = min(tokenizer.model_max_length, bert.config.max_position_embeddings)
    pieces = len(tokenizer(first, second, verbose=False)["input_ids"])
    warn_if_cut("next_sentence", pieces, limit, "the longer text loses its end first")
    batch = tokenizer(first, second, truncation=True, max_length=limit, return_tensors="pt")
    with evaluating(bert), torch.inference_mode():  # dropout off, the model's mode put back after
        out = bert(**batch)
        logits = getattr(out, "seq_relationship_logits", None)
        logits = (out.logits if logits is None else logits)[0].float()  # index 0 = "is next"
    return float(logits.softmax(-1)[0])
