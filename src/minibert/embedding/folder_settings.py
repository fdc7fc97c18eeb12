"""Settings a sentence-transformers folder gives both of its kinds of model, the bi-encoder
(``Embedder``, recipe.py) and the cross-encoder (``CrossEncoder``, tasks/rerank.py), read and checked
in one place. Each changes the numbers, so each is followed as sentence-transformers 6.2 follows it,
or refused with a CheckpointError naming the file and the field:

* ``prompts`` and ``default_prompt_name`` (config_sentence_transformers.json): a text put before the
  input (before a pair's first text), chosen as sentence-transformers chooses it (``choose_prompt``);
  a bi-encoder also has the empty prompts ``query`` and ``document`` where the file gives none
  (``read_prompts``' defaults);
* the length texts are cut to (sentence_bert_config.json): ``processing_kwargs``' ``max_length`` over
  ``max_seq_length``, each an int ≥ 3 (``read_sequence_length``);
* ``processing_kwargs`` (sentence_bert_config.json, sentence-transformers 6): the keywords its
  Transformer module calls the tokenizer with. minibert follows ``max_length`` and ``truncation``,
  under ``"text"`` or ``"common"`` (``"common"`` wins, as in sentence-transformers), and refuses any
  other key (padding, another modality, a chat template): read as absent, it would be ignored;
* a torch class path (a Dense layer's or a score's activation): sentence-transformers imports the
  path, so every name of one class is that class (``torch.nn.Tanh`` is
  ``torch.nn.modules.activation.Tanh``): ``torch_class_path`` gives the one it saves.

    >>> torch_class_path("torch.nn.Tanh")
    'torch.nn.modules.activation.Tanh'
    >>> read_processing_kwargs({"text": {"max_length": 8}, "common": {"truncation": True}}, "f.json", pair=False)
    TokenizerCall(max_length=8, truncation='longest_first')
"""

from __future__ import annotations

import json
import sys
import warnings
from dataclasses import dataclass

from ..errors import CheckpointError, TaskArgumentError


def choose_prompt(prompts: dict[str, str], default_prompt_name: str | None, prompt: str | None,
                  prompt_name: str | None) -> str:  # fmt: skip
    """The text to prepend, as sentence-transformers chooses it: ``prompt`` as given, else the one
    named ``prompt_name``, else the model's default prompt, else none (""). Both given: ``prompt``,
    with sentence-transformers' warning that ``prompt_name`` is ignored (as its ``encode`` does)."""
    if prompt is not None and prompt_name is not None:
        warnings.warn(f"both prompt and prompt_name={prompt_name!r} were given: prompt_name is ignored in favor of "
                      "prompt, as sentence-transformers does; pass one of them", stacklevel=4)  # fmt: skip
    if prompt is not None:
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
        return prompt
    if prompt_name is None:
        prompt_name = default_prompt_name
        if prompt_name is None:
            return ""
    if prompt_name not in prompts:
        known = ", ".join(repr(name) for name in prompts) or "none"
        raise TaskArgumentError("prompt_name", prompt_name, f"one of this model's prompts ({known})",
                                f"prompt_name {prompt_name!r} is not one of this model's prompts ({known})")
    return prompts[prompt_name]


def read_prompts(values: dict, path, defaults: dict[str, str] | None = None) -> tuple[dict[str, str], str | None]:
    """``prompts`` and ``default_prompt_name`` of config_sentence_transformers.json, checked.
    ``defaults``: the prompts the model has before the file's replace them, as sentence-transformers
    starts from its class's (a SentenceTransformer's ``{"query": "", "document": ""}``; a
    CrossEncoder's none); the default prompt may name one of them."""
    prompts = values.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
        raise CheckpointError(f"{path}: prompts must map names to strings")
    prompts = {**(defaults or {}), **prompts}
    default = values.get("default_prompt_name")
    if default is not None and (not isinstance(default, str) or default not in prompts):
        raise CheckpointError(f"{path}: default_prompt_name {default!r} is not one of its prompts {sorted(prompts)}")
    return prompts, default


@dataclass(frozen=True)
class TokenizerCall:
    """How a folder's ``processing_kwargs`` call the tokenizer: ``max_length`` (None: the model's own
    length) and the ``truncation`` strategy (which text of a pair is cut)."""

    max_length: int | None = None
    truncation: str = "longest_first"


_SINGLE_TEXT_TRUNCATIONS = {True: "longest_first", "longest_first": "longest_first", "only_first": "longest_first"}
_PAIR_TRUNCATIONS = {True: "longest_first", "longest_first": "longest_first", "only_first": "only_first",
                     "only_second": "only_second"}  # fmt: skip


def read_processing_kwargs(values, path, *, pair: bool) -> TokenizerCall:
    """The ``processing_kwargs`` of sentence_bert_config.json (``values``: its value, or None) as one
    TokenizerCall; ``pair``: the model reads text pairs (a cross-encoder). For one text, ``only_first``
    cuts what ``longest_first`` cuts."""
    if values is None:
        return TokenizerCall()
    if not isinstance(values, dict):
        raise CheckpointError(f"{path}: processing_kwargs must be an object, got {values!r:.60}")
    found: dict = {}
    for key, settings in values.items():
        if settings in ({}, None):
            continue
        if key not in ("text", "common") or not isinstance(settings, dict):
            raise CheckpointError(f"{path}: processing_kwargs.{key} is not implemented (minibert follows "
                                  "processing_kwargs.text and .common: max_length and truncation)")  # fmt: skip
        for name in settings:
            if name not in ("max_length", "truncation"):
                raise CheckpointError(f"{path}: processing_kwargs.{key}.{name} is not implemented (minibert follows "
                                      "max_length and truncation)")  # fmt: skip
    for key in ("text", "common"):  # sentence-transformers calls the tokenizer with {**text, **common}
        for name, value in (values.get(key) or {}).items():
            found[name] = value, f"processing_kwargs.{key}.{name}"
    call = {}
    if "max_length" in found:
        length, where = found["max_length"]
        if not isinstance(length, int) or isinstance(length, bool) or length < 3:
            raise CheckpointError(f"{path}: {where} must be an int ≥ 3, got {length!r:.40}")
        call["max_length"] = length
    if "truncation" in found:
        strategy, where = found["truncation"]
        allowed = _PAIR_TRUNCATIONS if pair else _SINGLE_TEXT_TRUNCATIONS
        if not isinstance(strategy, (str, bool)) or strategy not in allowed:
            names = ", ".join(repr(name) for name in allowed)
            raise CheckpointError(f"{path}: {where} {strategy!r:.40} is not implemented (minibert follows {names})")
        call["truncation"] = allowed[strategy]
    return TokenizerCall(**call)


def read_sequence_length(values: dict, path, *, pair: bool) -> tuple[int | None, str, TokenizerCall]:
    """The length a sentence_bert_config.json (``values``: its object) cuts texts to, or None: its
    ``processing_kwargs`` ``max_length`` (sentence-transformers 6 calls the tokenizer with it) over its
    ``max_seq_length``; the field it came from, for errors; and the whole processing_kwargs call."""
    length, field = values.get("max_seq_length"), "max_seq_length"
    if length is not None and (not isinstance(length, int) or isinstance(length, bool) or length < 3):
        raise CheckpointError(f"{path}: max_seq_length must be an int ≥ 3, got {length!r:.40}")
    call = read_processing_kwargs(values.get("processing_kwargs"), path, pair=pair)
    if call.max_length is not None:
        length, field = call.max_length, "processing_kwargs max_length"
    return length, field, call


def read_task_lengths(values: dict, path) -> dict[str, int]:
    """{"query": n, "document": m}: sentence_bert_config.json's ``query_length`` / ``document_length``
    (sentence-transformers 6.3), the tokens ``encode_query`` / ``encode_document`` cut a text to in
    place of the model's own length (the Embedder's ``prompt_name="query"`` / ``"document"``, when
    no max_length is given); null or absent: none. ``query_expansion`` (ColBERT's queries padded
    with [MASK] to a width, for a multi-vector model) is refused: minibert does not compute it."""
    if values.get("query_expansion") is not None:
        raise CheckpointError(f"{path}: query_expansion {json.dumps(values['query_expansion'])[:80]}: ColBERT-style "
                              "query expansion (for multi-vector models) is not implemented")  # fmt: skip
    lengths = {}
    for task in ("query", "document"):
        length = values.get(f"{task}_length")
        if length is not None and (not isinstance(length, int) or isinstance(length, bool) or length < 3):
            raise CheckpointError(f"{path}: {task}_length must be an int ≥ 3 or null, got {length!r:.40}")
        if length is not None:
            lengths[task] = length
    return lengths


def torch_class_path(name) -> str | None:
    """The class path sentence-transformers saves for the torch class that ``name`` names (it imports
    the path: ``torch.nn.Tanh`` and ``torch.nn.modules.activation.Tanh`` are one class), or None when
    ``name`` names none. Only modules torch has already imported are looked in: nothing is imported."""
    if not isinstance(name, str) or not name.startswith("torch."):
        return None
    module_name, _, class_name = name.rpartition(".")
    found = getattr(sys.modules.get(module_name), class_name, None)
    if not isinstance(found, type):
        return None
    return f"{found.__module__}.{found.__qualname__}"
