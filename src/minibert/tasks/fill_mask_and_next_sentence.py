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
warning saying so, as the ``minibert fill-mask`` and ``next-sentence`` commands do. Not when the hub
answered and refused (a bad ``HF_TOKEN``: ``ModelNotFoundError.refused``), nor when ``revision=`` or
``token=`` was given: they ask for the hub's files, which the toy is not; the error is raised then.
"""

from __future__ import annotations

import warnings

import torch

from ..errors import ModelNotFoundError, TaskArgumentError
from ..heads import BertForMaskedLM, BertForNextSentencePrediction, BertForPreTraining
from ..inputs import AS_ASKED
from ..loading.hub import BUNDLED_WITH_HEADS, DEFAULT_MODEL, bundled_path
from ..pretrained import evaluating
from .loading import load_for_task, lost_part, warn_if_cut

# What the tasks (a warning) and the commands (a line on stderr) say when they use the bundled toy.
BUNDLED_FALLBACK_NOTE = (
    f"{DEFAULT_MODEL} is not reachable (no hub access, not cached); using the bundled {BUNDLED_WITH_HEADS}, "
    "a toy BERT trained on Debian's fortunes (a few common words in context, not bert-base: docs/fortunes-mini.md)"
)


def load_with_fallback(model, cls: type, head: str, *, gemm: str | None = None, device=None,
                       revision: str | None = None, token: str | bool | None = None):  # fmt: skip
    """``load_for_task(model, cls, head)``; ``model=None`` is the default model, or the bundled toy
    (with a warning) when the default cannot be reached: never when the hub refused it (a token
    refused, ``refused``) or ``revision``/``token`` chose hub files (see the module's docstring).
    The toy is a ``BertForPreTraining`` and is loaded as one (both heads): no tensor of it is left unused."""
    download = {"revision": revision, "token": token}
    if model is None:
        try:
            return load_for_task(DEFAULT_MODEL, cls, head, gemm=gemm, device=device, **download)
        except ModelNotFoundError as error:
            if error.refused or revision is not None or token is not None:
                raise
            warnings.warn(BUNDLED_FALLBACK_NOTE, stacklevel=3)
            model = BUNDLED_WITH_HEADS
    if isinstance(model, str) and bundled_path(model) is not None:
        cls = BertForPreTraining
    return load_for_task(model, cls, head, gemm=gemm, device=device, **download)


def fill_mask(text: str | list[str], *, model=None, top_k: int = 5, targets: str | list[str] | None = None,
              device=None, revision: str | None = None, token: str | bool | None = None) -> list:  # fmt: skip
    """The ``top_k`` most likely pieces for the [MASK] in ``text``, most likely first, as
    transformers' ``pipeline("fill-mask")`` gives them: ``[{"score": 0.107, "token": 4827,
    "token_str": "fashion", "sequence": "i love fashion."}, ...]`` (``token`` is the id; scores are
    softmax probabilities over the vocabulary; ``sequence`` is the text with the piece in place).
    With several [MASK]s: one such list per mask (each ``sequence`` filling that mask alone, with
    [CLS] and [SEP] kept, as the pipeline does). A list of texts gives one result per text.
    ``targets`` (a word or a list) limits the answers to those pieces, with their probabilities over
    the whole vocabulary, at most one per target; a target not in the vocabulary is tokenized and its
    first piece used, with a warning (as the pipeline does). The text is read whole, as the pipeline
    reads it, up to the model's positions; a longer one is cut as its tokenizer cuts (its end, or its
    start where ``truncation_side`` is "left"), with a warning, and a [MASK] the cut loses is a
    ValueError. ``model=None``: google-bert/bert-base-uncased, else the bundled toy (see above).
    ``revision`` and ``token`` load a model given by name (or the default) as ``from_pretrained`` does."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    texts = [text] if isinstance(text, str) else text
    if not isinstance(texts, (list, tuple)) or not all(isinstance(one, str) for one in texts):
        raise TypeError(f"fill_mask takes a text (str) or a list of texts, got {type(text).__name__}")
    wanted = [targets] if isinstance(targets, str) else targets
    if targets is not None and (not isinstance(wanted, (list, tuple)) or not all(isinstance(one, str)
                                                                                 for one in wanted)):  # fmt: skip
        raise TypeError(f"targets must be a str or a list of str, got {type(targets).__name__}")
    bert, tokenizer = load_with_fallback(model, BertForMaskedLM, "mlm_head", device=device, revision=revision,
                                         token=token)  # fmt: skip
    if tokenizer.mask_token_id is None:
        raise ValueError(f"cannot fill a mask: {tokenizer.role_missing('mask_token')}")
    target_ids = None if targets is None else _target_ids(tokenizer, wanted)
    answers = [_fill_one(bert, tokenizer, one, top_k, target_ids) for one in texts]
    return answers[0] if isinstance(text, str) else answers


def _target_ids(tokenizer, targets: list[str]) -> torch.Tensor:
    """The pieces ``targets`` name, as the pipeline finds them: a word of the vocabulary is its piece;
    another is tokenized and its first piece taken (with a warning), or left out if it has none (with
    a warning, unless no target has a piece: then one TaskArgumentError, which a command says of its flag)."""
    vocabulary = tokenizer.get_vocab()
    ids, notes = [], []
    for target in targets:
        piece = vocabulary.get(target)
        if piece is None:
            pieces = tokenizer(target, add_special_tokens=False, max_length=1, truncation=True)["input_ids"]
            if not pieces:
                notes.append(f"the target {target!r} is not in the vocabulary and has no piece: it is left out")
                continue
            piece = pieces[0]
            notes.append(f"the target {target!r} is not in the vocabulary: its first piece "
                         f"{tokenizer.convert_ids_to_tokens(piece)!r} is used")  # fmt: skip
        ids.append(piece)
    if not ids:
        raise TaskArgumentError("targets", targets, "words of which at least one has a piece of the vocabulary "
                                f"(none of these {len(targets)} has one)")  # fmt: skip
    for note in notes:
        warnings.warn(note, stacklevel=3)
    return torch.tensor(list(set(ids)))  # each piece once, in the pipeline's order (its list(set(...)))


def _fill_one(bert, tokenizer, text: str, top_k: int, target_ids: torch.Tensor | None) -> list:
    """``fill_mask`` of one text. A text longer than the model's positions is cut as its tokenizer
    cuts (its end; its start where ``truncation_side`` is "left"), and the [MASK]s are found in the
    row the model reads: a [MASK] the cut would lose is an error, never another piece's guesses."""
    limit = bert.config.max_position_embeddings  # the pipeline does not cut: only what the model cannot take is
    whole = tokenizer(text, verbose=False)["input_ids"]  # [CLS] text [SEP], not cut
    if tokenizer.mask_token_id not in whole:
        raise ValueError(f"the text has no {tokenizer.mask_token} token to fill: {text!r}")
    batch = tokenizer(text, truncation=True, max_length=limit, return_tensors="pt")
    ids = batch["input_ids"][0].tolist()
    positions = [position for position, piece in enumerate(ids) if piece == tokenizer.mask_token_id]
    if len(positions) < whole.count(tokenizer.mask_token_id):
        raise ValueError(_mask_cut_off(tokenizer, whole, limit))
    warn_if_cut("fill_mask", len(whole), limit, f"the text's {lost_part(tokenizer)} is lost; its "
                f"{tokenizer.mask_token}s are all kept")  # fmt: skip
    with evaluating(bert), torch.inference_mode():  # dropout off, the model's mode put back after
        out = bert(**batch, **AS_ASKED)
        logits = (out.prediction_logits if hasattr(out, "prediction_logits") else out.logits)[0].float()  # (T, V)
    answers = []
    for position in positions:
        probabilities = logits[position].softmax(-1)  # (V,): over the whole vocabulary, targets or not
        if target_ids is not None:
            probabilities = probabilities[target_ids]  # (targets,)
        scores, best = probabilities.topk(min(top_k, probabilities.numel()))
        if target_ids is not None:
            best = target_ids[best]
        answers.append([{"score": float(score), "token": int(piece), "token_str": _piece_text(tokenizer, int(piece)),
                         "sequence": _filled_sequence(tokenizer, ids, position, int(piece), len(positions) == 1)}
                        for score, piece in zip(scores, best)])  # fmt: skip
    return answers[0] if len(answers) == 1 else answers


def _filled_sequence(tokenizer, ids: list[int], position: int, piece: int, one_mask: bool) -> str:
    """The text of row ``ids`` with ``piece`` at ``position``, as the fill-mask pipeline writes it:
    every [PAD] id left out first (a [PAD] of the text, or [PAD] as the guess), then decoded without
    special tokens when the text has one [MASK]; with several, the other [MASK]s, [CLS] and [SEP]
    stay. Leaving [PAD] out before decoding also joins its neighbours as the pipeline does
    ("a [PAD] ##romatic" is "aromatic", never "a [PAD]romatic")."""
    guess = [piece] if _piece_text(tokenizer, piece) != "" else []  # (the text's own ids are the tokenizer's)
    row = [i for i in ids[:position] + guess + ids[position + 1 :] if i != tokenizer.pad_token_id]
    return tokenizer.decode(row, skip_special_tokens=one_mask)


def _piece_text(tokenizer, piece: int) -> str:
    """A guess as text; "" for an id the tokenizer has no piece for, as the pipeline's fast tokenizer
    decodes it (and leaves it out of the sequence): a checkpoint may score more rows than its vocab.txt
    has lines (a vocabulary padded to a multiple of 8: 30,528 rows for 30,522 pieces), and those rows
    can be guessed. (An id below the tokenizer's length may have none too: a vocab.txt line given twice.)"""
    try:
        return tokenizer.decode([piece])
    except ValueError:  # (the id is outside the vocabulary)
        return ""


def _mask_cut_off(tokenizer, whole: list[int], limit: int) -> str:
    """What the error says of a [MASK] a cut to ``limit`` positions loses (``whole``: the uncut row):
    its piece, which pieces fit, and which side of it to shorten."""
    mask, count = tokenizer.mask_token, len(whole)
    if lost_part(tokenizer) == "end":  # [CLS], pieces 1 .. limit-2, [SEP]: the first [MASK] past them is lost
        lost = next(at for at, piece in enumerate(whole) if piece == tokenizer.mask_token_id and at > limit - 2)
        return (f"the {mask} is piece {lost} of the text's {count} (counting [CLS] as 0), beyond the model's {limit} "
                f"positions (max_position_embeddings): pieces 0 to {limit - 2} and a closing [SEP] fit; shorten the "
                f"text before the {mask}")  # fmt: skip
    first = count - limit + 1  # a cut start keeps [CLS], pieces count-limit+1 .. count-2, [SEP]
    lost = next(at for at, piece in enumerate(whole) if piece == tokenizer.mask_token_id)
    return (f"the {mask} is piece {lost} of the text's {count} (counting [CLS] as 0), and this tokenizer cuts a long "
            f"text's start (truncation_side \"left\"): [CLS], pieces {first} to {count - 2} and [SEP] fill the model's "
            f"{limit} positions (max_position_embeddings); shorten the text after the {mask}")  # fmt: skip


def next_sentence(first: str, second: str, *, model=None, device=None, revision: str | None = None,
                  token: str | bool | None = None) -> float:  # fmt: skip
    """Probability, by BERT's next-sentence head, that ``second`` follows ``first`` in a text.
    ``model=None``: google-bert/bert-base-uncased, else the bundled toy (see above); ``revision`` and
    ``token`` load a model given by name as ``from_pretrained`` does."""
    bert, tokenizer = load_with_fallback(model, BertForNextSentencePrediction, "nsp_head", device=device,
                                         revision=revision, token=token)  # fmt: skip
    limit = bert.config.max_position_embeddings  # as fill_mask: what the model can take, whatever its tokenizer says
    pieces = len(tokenizer(first, second, verbose=False)["input_ids"])
    warn_if_cut("next_sentence", pieces, limit, f"the longer text loses its {lost_part(tokenizer)} first")
    batch = tokenizer(first, second, truncation=True, max_length=limit, return_tensors="pt")
    with evaluating(bert), torch.inference_mode():  # dropout off, the model's mode put back after
        out = bert(**batch, **AS_ASKED)
        logits = getattr(out, "seq_relationship_logits", None)
        logits = (out.logits if logits is None else logits)[0].float()  # index 0 = "is next"
    return float(logits.softmax(-1)[0])
