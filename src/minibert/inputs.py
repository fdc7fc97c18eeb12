"""The model's inputs, checked once before any compute (the one place that does).

``BertModel.forward`` accepts what transformers accepts: tensors, numpy arrays or nested lists, one
sequence (T,) or a batch (B, T), ids of any integer dtype. ``prepare_inputs`` turns them into the
four (B, T) int64 tensors the book computes with, on the model's device, or raises ``TypeError``
for non-integer ids and ``ValueError`` for shapes that disagree, ids outside [0, vocab_size), type
ids outside [0, type_vocab_size) and sequences longer than max_position_embeddings — each message
names the problem and the limit. Text, word pieces or the tokenizer's whole output passed as ids
raise ``InputTypeError`` (a ``TypeError``) naming the next step: ``model(**tokenizer(text,
return_tensors="pt"))``.

Every check that reads the tensors' values runs where the model runs eagerly. While torch records the
call as a graph (``recording_graph``: ``torch.jit.trace``, the legacy ``torch.onnx.export``,
``torch.export``, ``torch.compile``) they are left out: a recorded check would hold only for the
example it was recorded on (jit's tracer keeps its answer as a constant; torch.export refuses a value
it cannot know). The graph then computes what it is given, unchecked.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import warnings
from collections.abc import Mapping
from typing import NamedTuple

import torch

from .config import BertConfig
from .errors import InputTypeError

# What minibert's own callers (the Embedder, the tasks, training) ask of a model, whatever its config's
# call defaults say: a folder saved by transformers with output_attentions=True or return_dict=False
# would otherwise turn the fast path off, or give them tuples.
AS_ASKED = {"return_dict": True, "output_attentions": False, "output_hidden_states": False}


class ModelInputs(NamedTuple):
    input_ids: torch.Tensor  # (B, T) int64: word-piece ids
    token_type_ids: torch.Tensor  # (B, T) int64: 0 for sentence A, 1 for sentence B
    position_ids: torch.Tensor  # (B, T) int64: 0, 1, ..., T-1 in every row, unless given
    attention_mask: torch.Tensor | None  # (B, T): 1 = real token, 0 = padding; None = no padding given
    mask_as_given: torch.Tensor | None  # the same, where the caller gave it: a CPU's, read without waiting for a GPU


def recording_graph() -> bool:
    """Whether torch is recording this call as a graph instead of running it (``torch.jit.trace`` and
    the legacy ``torch.onnx.export``, which trace; ``torch.export`` and ``torch.compile``, which
    compile): then no choice may depend on the tensors' values, which the graph would not hold."""
    return torch.jit.is_tracing() or _dynamo_traces() or (_is_compiling() and _this_thread_compiles())


# (torch.compiler.is_compiling from torch 2.3; torch._dynamo's before)
_is_compiling = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling
# True only in code dynamo traces (torch.compile), False when run: never another thread's (torch 2.3+)
_dynamo_traces = getattr(torch.compiler, "is_dynamo_compiling", None) or (lambda: False)


def _this_thread_compiles() -> bool:
    """torch's is_compiling() is one flag for the whole process (torch 2.13): while one thread compiles
    or exports, an eager call in another would skip its checks. The tracing context is this thread's
    (torch._guards, private: where a torch lacks it, is_compiling() alone decides, as before)."""
    context = getattr(getattr(torch, "_guards", None), "TracingContext", None)
    return context is None or context.try_get() is not None


def prepare_inputs(model, input_ids, attention_mask=None, token_type_ids=None, position_ids=None) -> ModelInputs:
    """Validated inputs on ``model``'s device; token types default to 0 and positions count from 0."""
    config, device = model.config, model.device
    input_ids, attention_mask, token_type_ids = validate_inputs(config, input_ids, attention_mask, token_type_ids)
    if position_ids is not None:
        position_ids = _position_ids(config, position_ids, input_ids)
    if recording_graph():
        pass  # (the warnings read the values: eager calls only)
    elif attention_mask is None:
        warn_if_padded(model, input_ids)
    else:
        warn_if_segment_ids(model, input_ids, attention_mask)
    # checked where they were given (a CPU's tensors: no wait for a GPU); copied without waiting
    # (from pinned memory the copy overlaps the GPU's work; from other memory torch stages it)
    input_ids = input_ids.to(device, non_blocking=True)
    batch, tokens = input_ids.shape
    token_type_ids = (torch.zeros_like(input_ids) if token_type_ids is None
                      else token_type_ids.to(device, non_blocking=True))  # fmt: skip
    if position_ids is None:
        position_ids = torch.arange(tokens, device=input_ids.device).expand(batch, tokens)
    else:
        position_ids = position_ids.to(device, non_blocking=True)
    given = attention_mask
    attention_mask = None if attention_mask is None else attention_mask.to(device, non_blocking=True)
    return ModelInputs(input_ids, token_type_ids, position_ids, attention_mask, given)


def validate_inputs(config: BertConfig, input_ids, attention_mask=None, token_type_ids=None):
    """(input_ids, attention_mask, token_type_ids) as tensors of shape (B, T), checked."""
    input_ids = _as_int64(as_tensor(input_ids, "input_ids"), "input_ids")
    if input_ids.dim() == 1:
        input_ids = input_ids.unsqueeze(0)  # one sequence: add the batch dimension
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape (batch, tokens), got {tuple(input_ids.shape)}")
    batch, tokens = input_ids.shape
    if batch == 0 or tokens == 0:
        raise ValueError(f"input_ids has shape {tuple(input_ids.shape)}: it needs at least one sequence of one token")
    if tokens > config.max_position_embeddings:
        raise ValueError(
            f"sequence of {tokens} tokens is longer than max_position_embeddings={config.max_position_embeddings}; "
            f"truncate it (tokenizer truncation=True, max_length={config.max_position_embeddings}) or embed it in "
            "windows (Embedder long_text='window')"
        )
    _check_range(input_ids, "input_ids", config.vocab_size, f"the vocabulary [0, {config.vocab_size})")
    if token_type_ids is not None:
        token_type_ids = _as_int64(_like_input_ids(token_type_ids, "token_type_ids", input_ids), "token_type_ids")
        limit = config.type_vocab_size
        _check_range(token_type_ids, "token_type_ids", limit, f"[0, type_vocab_size={limit})")
    if attention_mask is not None:
        attention_mask = _like_input_ids(_per_token(attention_mask, input_ids), "attention_mask", input_ids)
        if not recording_graph() and not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token)")
    return input_ids, attention_mask, token_type_ids


def _per_token(attention_mask, input_ids: torch.Tensor):
    """transformers' extended mask, (B, 1, 1, T) added to the scores: 0 where a key is attended to and
    the dtype's minimum where not (``model.get_extended_attention_mask``'s), as the (B, T) mask of 1 and
    0 it stands for. Any other mask with more than two dimensions (a mask per query, (B, T, T) or
    (B, 1, T, T); other additive values, which weigh keys rather than hide them; a boolean one, which
    transformers' eager and sdpa attention read differently) is a ValueError saying what is taken."""
    mask = as_tensor(attention_mask, "attention_mask")
    if mask.dim() <= 2:
        return mask
    batch, tokens = input_ids.shape
    lowest = torch.finfo(mask.dtype).min if mask.dtype.is_floating_point else None
    extended = mask.shape == (batch, 1, 1, tokens) and lowest is not None
    if extended and (recording_graph() or bool(((mask == 0) | (mask == lowest)).all())):
        return (mask == 0).reshape(batch, tokens).long()  # (B, 1, 1, T) additive -> (B, T) of 1 and 0
    raise ValueError(
        f"attention_mask has shape {tuple(mask.shape)} ({mask.dtype}); minibert takes one value per token, the "
        f"tokenizer's (batch, tokens) = ({batch}, {tokens}) mask of 1 (real token) and 0 (padding), or transformers' "
        f"extended (batch, 1, 1, tokens) float mask of 0 and the dtype's minimum; a mask per query (3-D or 4-D) "
        "is not taken"
    )


def choices_as_rows(input_ids, *others) -> tuple[int, list]:
    """BertForMultipleChoice's inputs, (B, C, T) each, as the encoder's rows (B·C, T): checked as the
    caller passed them first, so that a mistake is named in their shape (text, the tokenizer's whole
    output, ragged lists, a tensor of another shape). ``others`` (attention_mask, token_type_ids,
    position_ids) may be None; position_ids may also be (T,) for every row, as the encoder takes it.
    Returns C and the rows."""
    input_ids = _as_int64(as_tensor(input_ids, "input_ids"), "input_ids")
    if input_ids.dim() != 3 or 0 in input_ids.shape:
        shape = tuple(input_ids.shape)
        raise ValueError(f"input_ids must have shape (batch, choices, tokens), each at least 1, got {shape}")
    tokens = input_ids.shape[-1]
    rows = [input_ids.reshape(-1, tokens)]  # (B, C, T) -> (B·C, T)
    for name, value in zip(("attention_mask", "token_type_ids", "position_ids"), others):
        tensor = None if value is None else as_tensor(value, name)
        if tensor is None or name == "position_ids" and tensor.shape in ((tokens,), (1, tokens)):  # (T,): every row's
            rows.append(value)
            continue
        if tensor.shape != input_ids.shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)} but input_ids has {tuple(input_ids.shape)}")
        rows.append(tensor.reshape(rows[0].shape))
    return input_ids.shape[1], rows


def _position_ids(config: BertConfig, position_ids, input_ids: torch.Tensor) -> torch.Tensor:
    """transformers' ``position_ids``: (B, T), or (T,) / (1, T) for every row, each in [0, max_position_embeddings)."""
    positions = _as_int64(as_tensor(position_ids, "position_ids"), "position_ids")
    if positions.dim() == 1:
        positions = positions.unsqueeze(0)
    batch, tokens = input_ids.shape
    if positions.dim() != 2 or positions.shape[1] != tokens or positions.shape[0] not in (1, batch):
        shape = tuple(input_ids.shape)
        raise ValueError(f"position_ids has shape {tuple(positions.shape)}; for input_ids of shape {shape} it "
                         f"takes ({batch}, {tokens}), or (1, {tokens}) for every row")  # fmt: skip
    limit = config.max_position_embeddings
    _check_range(positions, "position_ids", limit, f"[0, max_position_embeddings={limit})")
    return positions.expand(batch, tokens)


def warn_if_padded(model, input_ids: torch.Tensor) -> None:
    """Once per model, as transformers does: ids that start or end with the pad id look padded,
    and without an attention_mask padding is attended to like text (different numbers)."""
    pad = model.config.pad_token_id
    if getattr(model, "_warned_padding", False) or pad is None or input_ids.numel() == 0:
        return
    if bool((input_ids[:, [-1, 0]] == pad).any()):
        model._warned_padding = True
        warnings.warn(
            f"input_ids contain the pad id {pad} at the start or end of a sequence and no attention_mask was "
            "given, so padding is attended to like text: pass the tokenizer's attention_mask",
            stacklevel=_users_frame(),
        )


def warn_if_segment_ids(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
    """Once per model: an attention mask that masks out a real token at position 0 ([CLS]) is
    almost surely segment ids passed second, in pytorch-pretrained-bert's positional order
    (input_ids, token_type_ids, attention_mask), as Chris McCormick's word-embeddings notebook does:
    sentence A is then hidden from every token, silently. Left padding is not this mistake (the
    masked position 0 holds the pad id); a real mask, padded or all ones, never masks position 0."""
    if getattr(model, "_warned_segment_ids", False):
        return
    pad = model.config.pad_token_id
    hidden_first = (attention_mask[:, 0] == 0) & (input_ids[:, 0] != (-1 if pad is None else pad))  # (B,)
    if not bool(hidden_first.any()):
        return
    model._warned_segment_ids = True
    row = int(hidden_first.nonzero()[0, 0])
    values = attention_mask[row].tolist()
    runs = [(value, len(list(group))) for value, group in itertools.groupby(values)]  # [(0, 10), (1, 12)]
    pair = [value for value, _ in runs] == [0, 1]
    looks = "a pair's segment ids (0 for sentence A, then 1 for sentence B)" if pair else "segment ids"
    shown = ", then ".join(f"{value} × {count}" for value, count in runs[:4]) + (", ..." if len(runs) > 4 else "")
    warnings.warn(
        f"attention_mask hides position 0 in row {row}, a real token (id {int(input_ids[row, 0])}, [CLS] in BERT's "
        f"framing): its values ({shown}) look like {looks} passed where the "
        "attention mask goes. The positional order is model(input_ids, attention_mask, token_type_ids), as in "
        "transformers; pytorch-pretrained-bert's was (input_ids, token_type_ids, attention_mask). Pass them by name: "
        "model(input_ids, token_type_ids=segments), or model(**tokenizer(text_a, text_b, return_tensors='pt'))",
        stacklevel=_users_frame(),
    )


def _users_frame() -> int:
    """The ``stacklevel`` of the first caller outside minibert and torch: a warning shows the user's line."""
    inside = (os.path.dirname(__file__), os.path.dirname(torch.__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(inside):
        frame, level = frame.f_back, level + 1
    return level


# transformers' call arguments minibert does not take, and why (``refuse_old_arguments``).
NOT_TAKEN = {
    "inputs_embeds": "minibert's model looks the word vectors up from input_ids itself (model.get_input_embeddings()); "
    "vectors given in their place are not taken",
    "head_mask": "masking attention heads is not implemented (transformers 5 ignores head_mask as well)",
}
# pytorch-pretrained-bert's names of the heads' labels (transformers 4 still took next_sentence_label on
# BertForNextSentencePrediction; transformers 5 drops both without a word, and computes no loss).
OLD_LABEL_NAMES = ("masked_lm_labels", "next_sentence_label")
OLD_ARGUMENTS = ("output_all_encoded_layers", *NOT_TAKEN, *OLD_LABEL_NAMES)  # what refuse_old_arguments answers


def refuse_old_arguments(model, kwargs: dict) -> None:
    """pytorch-pretrained-bert's call arguments, answered with today's: ``output_all_encoded_layers``;
    transformers' ``inputs_embeds`` and ``head_mask`` (``NOT_TAKEN``): None (what transformers' own
    callers pass when they mean "not given") is dropped, any other value is an InputTypeError naming what
    the call takes; pytorch-pretrained-bert's label names (``OLD_LABEL_NAMES``) where the call does not
    take them (BertForPreTraining's ``next_sentence_label`` is today's name too) are an InputTypeError naming
    ``labels=``."""
    parameters = _call_parameters(type(model))
    for name in OLD_LABEL_NAMES:
        if name in kwargs and name not in parameters:
            raise InputTypeError(_old_label_name(type(model).__name__, name))
    for name in NOT_TAKEN:
        if name in kwargs and kwargs[name] is None:
            del kwargs[name]
        elif name in kwargs:
            raise InputTypeError(f"{type(model).__name__} does not take {name}: {NOT_TAKEN[name]}. The call takes "
                                 f"{', '.join(parameters)} (and return_dict); see docs/migrating.md")  # fmt: skip
    if "output_all_encoded_layers" in kwargs:
        raise InputTypeError(
            "output_all_encoded_layers is pytorch-pretrained-bert's argument; minibert (as transformers) returns "
            "the last layer as outputs.last_hidden_state, and every layer with output_hidden_states=True: "
            "outputs = model(input_ids, token_type_ids=segments, output_hidden_states=True); "
            "encoded_layers = outputs.hidden_states[1:] (hidden_states[0] is the embeddings)"
        )


@functools.cache
def _call_parameters(model_class) -> tuple[str, ...]:
    """What ``model_class.forward`` takes by name (self and **kwargs left out), once per class."""
    import inspect

    return tuple(p for p in inspect.signature(model_class.forward).parameters if p not in ("self", "kwargs"))


# Where each old label name went: (name, the class called) → what to write instead.
_LABELS_NOW = {
    ("masked_lm_labels", "BertForMaskedLM"): "pass labels=: model(ids, labels=masked_lm_labels)",
    ("masked_lm_labels", "BertForPreTraining"): "pass labels= (next_sentence_label= keeps its name)",
    ("next_sentence_label", "BertForNextSentencePrediction"): "pass labels=: model(ids, labels=next_sentence_label)",
}


def _old_label_name(model: str, name: str) -> str:
    """What to write instead of pytorch-pretrained-bert's ``masked_lm_labels=`` / ``next_sentence_label=``."""
    head = "masked-LM" if name == "masked_lm_labels" else "next-sentence"
    instead = _LABELS_NOW.get((name, model), f"{model} has no {head} head to take them (BertForPreTraining has both)")
    return (f"{name} is pytorch-pretrained-bert's name of the {head} labels (transformers 5 ignores it and computes "
            f"no loss); as in transformers, {instead}")  # fmt: skip


def _as_int64(ids: torch.Tensor, name: str) -> torch.Tensor:
    """Ids of any integer dtype (int8 ... uint64) as int64, what an embedding lookup takes."""
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers, got dtype {ids.dtype}")
    return ids if ids.dtype == torch.int64 else ids.to(torch.int64)


def _check_range(ids: torch.Tensor, name: str, limit: int, allowed: str) -> None:
    """All ids in [0, limit): else a ValueError naming the offending value and the range (eager calls only)."""
    if recording_graph():
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= limit:
        raise ValueError(f"{name} contains {low if low < 0 else high}, outside {allowed}")


def as_tensor(value, name: str) -> torch.Tensor:
    """``value`` (a tensor, or a nested list of ints) as a tensor; text, rows of different lengths
    or anything else torch cannot read is refused with an error naming ``name``."""
    if isinstance(value, torch.Tensor):
        return value
    _refuse_text(value, name)
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as error:
        rows = value if isinstance(value, (list, tuple)) else []
        lengths = sorted({len(row) for row in rows if isinstance(row, (list, tuple))})
        if len(lengths) > 1:  # rows of different lengths (a TypeError, as before): the tokenizer pads them
            raise InputTypeError(f"{name} must be a tensor or a (nested) list of ints with rows of one length, got "
                                 f"rows of lengths {', '.join(map(str, lengths))}; pad them: "
                                 "tokenizer(texts, padding=True, return_tensors='pt')") from None  # fmt: skip
        raise TypeError(f"{name} must be a tensor or a (nested) list of ints: {error}") from None


def _like_input_ids(value, name: str, input_ids: torch.Tensor) -> torch.Tensor:
    """``value`` as a tensor of the same (B, T) shape as input_ids, or a ValueError naming both."""
    tensor = as_tensor(value, name)
    if tensor.dim() == 1:
        tensor = tensor.unsqueeze(0)
    if tensor.shape != input_ids.shape:
        raise ValueError(f"{name} has shape {tuple(tensor.shape)} but input_ids has {tuple(input_ids.shape)}")
    return tensor


def _refuse_text(value, name: str) -> None:
    """The first mistakes with a model: text, word pieces or the tokenizer's whole output where ids
    are expected. An InputTypeError says what was passed and what to write instead."""
    if isinstance(value, str) and name != "input_ids":
        raise InputTypeError(f"{name} must be a tensor or a (nested) list of ints, got the text {_short(value)}")
    if isinstance(value, str):
        raise InputTypeError(
            f"{name} is the text {_short(value)}, but the model takes token ids; "
            "tokenize first: batch = tokenizer(text, return_tensors='pt'), then model(**batch)"
        )
    if isinstance(value, Mapping):
        raise InputTypeError(
            f"{name} is a {type(value).__name__} with keys {list(value)} (the tokenizer's whole output); "
            "unpack it: model(**batch)"
        )
    if isinstance(value, (list, tuple)) and isinstance(_first_item(value), str):
        raise InputTypeError(
            f"{name} is a list of strings ({_short(value)}), but the model takes token ids; for texts: "
            "batch = tokenizer(texts, padding=True, return_tensors='pt'), then model(**batch); for word pieces "
            "(tokenizer.tokenize's output): tokenizer.convert_tokens_to_ids(tokens)"
        )


def _first_item(value):
    """The first innermost item of a nested list: ``[["i", "love"]]`` → ``"i"``; ``[]`` → None."""
    while isinstance(value, (list, tuple)):
        if not value:
            return None
        value = value[0]
    return value


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
