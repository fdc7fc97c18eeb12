"""Saving: a model written back as a hub checkpoint, under the hub's names (the rename table backwards).

``save_pretrained(model, directory)`` writes ``config.json`` and ``model.safetensors``, each
atomically (formats/atomic_files.py: a reader never sees half a file). Both minibert and
transformers load the result. config.json's ``dtype`` names the dtype of the tensors written, as
transformers' save does (a bfloat16 checkpoint loaded in float32, trained and saved says
``"float32"``, not its source's ``"bfloat16"``: transformers' ``dtype="auto"``, its default, and
sentence-transformers load the weights in the dtype named there)::

    layers.3.attention_norm.weight  →  encoder.layer.3.attention.output.LayerNorm.weight   (BertModel)
                                    →  bert.encoder.layer.3.attention.output.LayerNorm.weight  (with heads)

transformers' ``save_pretrained`` keywords are taken where minibert honours their meaning
(``save_options``); another keyword, or a value minibert cannot honour, is refused, never dropped:

    keyword                     in minibert
    is_main_process=False       the folder made, nothing written (the other processes of a torchrun)
    state_dict                  these tensors written in place of the model's (minibert's names, a part or all)
    max_shard_size              shards of at most that size (``"5GB"``, or bytes) and model.safetensors.index.json,
                                cut by huggingface_hub's split, which transformers calls; default transformers
                                5's "50GB" (one file for any BERT). The tensors go in minibert's order, so a
                                shard may hold other tensors than transformers' same-numbered one: both load either
    safe_serialization=True     what is written anyway (False, transformers 4's pytorch_model.bin, is refused)
    push_to_hub=False           nothing to do (True is refused: minibert does not upload)
    save_function               not called, as transformers calls it only for pytorch_model.bin files

A save removes the weights files of the other layout that an earlier save left (model.safetensors
beside new shards, an index and shards beside a new model.safetensors): loaders prefer
model.safetensors, and would read the old weights.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

import torch

from ..formats.atomic_files import atomic_output, output_folder, write_atomically
from .names import HEAD_PREFIXES, minibert_to_checkpoint

WEIGHTS, INDEX = "model.safetensors", "model.safetensors.index.json"
SHARD = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")  # huggingface_hub's shard names, as transformers'
SAVE_KEYWORDS = ("is_main_process", "state_dict", "max_shard_size", "safe_serialization", "push_to_hub",
                 "save_function")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class SaveOptions:
    """What a ``save_pretrained`` call asks, of transformers' keywords (the module's table)."""

    is_main_process: bool = True
    state_dict: Mapping | None = None
    max_shard_size: int = 50_000_000_000  # bytes: transformers 5's default, "50GB" (a BERT is one file)
    # minibert's own (no keyword of transformers'): tensors written beside the model's, under their hub
    # names (convert keeps a checkpoint's trained pooler for a head class built without one)
    extra_tensors: Mapping | None = None


def save_options(keywords: dict) -> SaveOptions:
    """``SaveOptions`` from a call's keywords: a TypeError names a keyword minibert does not take
    and lists those it takes; a ValueError a value it cannot honour, and what to do instead."""
    unknown = sorted(set(keywords) - set(SAVE_KEYWORDS))
    if unknown:
        raise TypeError(f"save_pretrained() got unexpected keyword arguments {unknown}; besides save_directory, "
                        "it takes transformers' keywords is_main_process, state_dict, max_shard_size, "
                        "safe_serialization=True, push_to_hub=False and save_function "
                        "(docs/checkpoints.md)")  # fmt: skip
    for name, default in (("is_main_process", True), ("safe_serialization", True), ("push_to_hub", False)):
        if not isinstance(keywords.get(name, default), bool):
            raise TypeError(f"save_pretrained: {name} must be True or False, got {keywords[name]!r}")
    if keywords.get("safe_serialization") is False:
        raise ValueError("save_pretrained: safe_serialization=False asks for pytorch_model.bin, and minibert writes "
                         "model.safetensors only (as transformers 5 does, whatever safe_serialization says); "
                         "leave it out: minibert and transformers load model.safetensors")  # fmt: skip
    if keywords.get("push_to_hub"):
        raise ValueError("save_pretrained: minibert does not upload (push_to_hub=True); save, then upload the "
                         "folder: huggingface_hub.upload_folder(repo_id='you/name', folder_path=FOLDER)")  # fmt: skip
    function = keywords.get("save_function")
    if function is not None and not callable(function):
        raise TypeError(f"save_pretrained: save_function must be a function, got {function!r}")
    size = shard_bytes(keywords["max_shard_size"]) if "max_shard_size" in keywords else SaveOptions.max_shard_size
    state_dict = keywords.get("state_dict")
    if state_dict is not None and not isinstance(state_dict, Mapping):
        raise TypeError(f"save_pretrained: state_dict must be a dict of tensors, got {type(state_dict).__name__}")
    return SaveOptions(keywords.get("is_main_process", True), state_dict, size)


def shard_bytes(size) -> int:
    """``max_shard_size`` in bytes: an int as it is, a str read by huggingface_hub's own reader, the one
    its split (what transformers calls) reads it with: a number and a unit, decimal ("5GB" is 5 × 10⁹
    bytes, "0.5 MB" 500,000; KB, MB, GB or TB in any case). The split is then given these bytes, so
    what is checked here is what it cuts by. Refused (a ValueError naming the value): what the reader
    refuses or cannot make a whole number of ("big", "GB", "nanGB", "infGB"), and a size under one byte."""
    from huggingface_hub.serialization._base import parse_size_to_int  # (private; in 0.25 and 2.x alike)

    number = None
    if isinstance(size, int) and not isinstance(size, bool):
        number = size
    elif isinstance(size, str):
        with contextlib.suppress(ValueError, OverflowError):
            number = parse_size_to_int(size)
    if number is None or number < 1:
        raise ValueError(f"save_pretrained: max_shard_size={size!r} is not a size: give bytes (an int) or a "
                         "number and a unit, KB, MB, GB or TB ('5GB', as huggingface_hub reads it)")  # fmt: skip
    return number


def save_pretrained(model, directory: str | os.PathLike, options: SaveOptions = SaveOptions()) -> None:
    """Write config.json and model.safetensors (or its shards and their index) with the hub's tensor
    names, atomically.

    BertModel is saved like newer exports (no prefix); the classes with heads like Google's and
    transformers' checkpoints (``bert.`` prefix; ``cls.*``, ``classifier.*`` or ``qa_outputs.*`` heads;
    the tied decoder weight left out).
    Both minibert and transformers load the result.
    """
    directory = output_folder(directory, WEIGHTS, "config.json")
    if not options.is_main_process:
        return  # as transformers: the folder made on every process, the files written by the main one
    tensors = {**hub_tensors(model, options.state_dict), **(options.extra_tensors or {})}
    write_weights(tensors, directory, options.max_shard_size, model.num_parameters())
    extra = {name: value for name, value in model.config.extra.items() if name != "torch_dtype"}  # (dtype's old name)
    extra.update(architectures=[type(model).__name__], dtype=written_dtype(tensors.values()))
    config = dataclasses.replace(model.config, extra=extra)
    config.to_json_file(directory / "config.json")  # (a copy: saving does not change the model's config)


def hub_tensors(model, state_dict: Mapping | None = None) -> dict[str, torch.Tensor]:
    """The model's tensors (or ``state_dict``'s, keyed as ``model.state_dict()`` keys them) under
    the hub's names, on the CPU."""
    own = model.state_dict()
    if state_dict is not None:
        strange = [name for name in state_dict if name not in own]
        if strange:
            raise ValueError(f"save_pretrained: state_dict holds {strange[:3]}, not among this model's tensors; "
                             "give them as model.state_dict() names them (minibert's names)")  # fmt: skip
        own = state_dict
    with_heads = hasattr(model, "bert")  # a model with heads: the encoder under bert., the heads as cls.*, ...
    tensors = {}
    for name, tensor in own.items():
        if not isinstance(tensor, torch.Tensor) or tensor.is_quantized:
            raise ValueError(f"save_pretrained: {name} is {_what(tensor)}, which a .safetensors file cannot hold: "
                             "a model quantized by torch.ao (quantize_dynamic) is saved from its float32 weights, "
                             'before quantizing; a model loaded with dtype="int8" saves them itself')  # fmt: skip
        body = name.removeprefix("bert.") if with_heads else name
        hub_name = minibert_to_checkpoint(body)
        if with_heads and not name.startswith(HEAD_PREFIXES):
            hub_name = "bert." + hub_name
        tensors[hub_name] = tensor.detach().to("cpu").contiguous()
    return tensors


def _what(value) -> str:
    return f"a quantized tensor ({value.dtype})" if isinstance(value, torch.Tensor) else f"a {type(value).__name__}"


def write_weights(tensors: dict, directory: Path, max_shard_size: int, parameters: int) -> None:
    """model.safetensors, or, past ``max_shard_size``, shards cut by huggingface_hub (the split
    transformers calls) and their index; then the other layout's files an earlier save left are removed. Shards
    replace a model.safetensors only after it is gone: a kill in between leaves no weights a loader
    would prefer to the new ones."""
    from huggingface_hub import split_torch_state_dict_into_shards
    from safetensors.torch import save

    split = split_torch_state_dict_into_shards(tensors, filename_pattern="model{suffix}.safetensors",
                                               max_shard_size=max_shard_size)  # fmt: skip
    if split.is_sharded:
        (directory / WEIGHTS).unlink(missing_ok=True)
    for filename, names in split.filename_to_tensors.items():
        with atomic_output(directory / filename) as handle:
            handle.write(save({name: tensors[name] for name in names}, metadata={"format": "pt"}))
    if split.is_sharded:
        index = {"metadata": {"total_parameters": parameters, **split.metadata}, "weight_map": split.tensor_to_filename}
        write_atomically(directory / INDEX, (json.dumps(index, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    stale = [path for path in directory.iterdir() if path.name not in split.filename_to_tensors
             and (SHARD.fullmatch(path.name) or path.name == INDEX and not split.is_sharded)]  # fmt: skip
    for path in stale:
        path.unlink(missing_ok=True)


def written_dtype(tensors) -> str:
    """config.json's ``dtype``: the floating-point tensors' dtype, ``"bfloat16"`` say. Of a model
    with several, the smallest that holds each exactly (``torch.promote_types``: bfloat16 and
    float16 make float32), so that a reader that loads every tensor in it changes none.

        >>> written_dtype([torch.zeros(2, dtype=torch.bfloat16), torch.zeros(2, dtype=torch.long)])
        'bfloat16'
        >>> written_dtype([torch.zeros(2, dtype=torch.bfloat16), torch.zeros(2, dtype=torch.float16)])
        'float32'
    """
    dtype = None
    for tensor in tensors:
        if tensor.is_floating_point():
            dtype = tensor.dtype if dtype is None else torch.promote_types(dtype, tensor.dtype)
    return str(dtype or torch.float32).removeprefix("torch.")
