"""Saving: a model written back as a hub checkpoint, under the hub's names (the rename table backwards).

``save_pretrained(model, directory)`` writes ``config.json`` and ``model.safetensors``, each
atomically (formats/atomic_files.py: a reader never sees half a file). Both minibert and
transformers load the result. config.json's ``dtype`` names the dtype of the tensors written, as
transformers' save does (a bfloat16 checkpoint loaded in float32, trained and saved says
``"float32"``, not its source's ``"bfloat16"``: transformers' ``dtype="auto"``, its default, and
sentence-transformers load the weights in the dtype named there)::

    layers.3.attention_norm.weight  →  encoder.layer.3.attention.output.LayerNorm.weight   (BertModel)
                                    →  bert.encoder.layer.3.attention.output.LayerNorm.weight  (with heads)
"""

from __future__ import annotations

import dataclasses
import os

import torch

from ..formats.atomic_files import atomic_output, output_folder
from .names import HEAD_PREFIXES, minibert_to_checkpoint


def save_pretrained(model, directory: str | os.PathLike) -> None:
    """Write config.json and model.safetensors with the hub's tensor names, atomically.

    BertModel is saved like newer exports (no prefix); the classes with heads like Google's and
    transformers' checkpoints (``bert.`` prefix; ``cls.*``, ``classifier.*`` or ``qa_outputs.*`` heads;
    the tied decoder weight left out).
    Both minibert and transformers load the result.
    """
    from safetensors.torch import save

    directory = output_folder(directory, "model.safetensors", "config.json")
    with_heads = hasattr(model, "bert")  # a model with heads: the encoder under bert., the heads as cls.*, ...
    tensors = {}
    for name, tensor in model.state_dict().items():
        body = name.removeprefix("bert.") if with_heads else name
        hub_name = minibert_to_checkpoint(body)
        if with_heads and not name.startswith(HEAD_PREFIXES):
            hub_name = "bert." + hub_name
        tensors[hub_name] = tensor.detach().to("cpu").contiguous()
    data = save(tensors, metadata={"format": "pt"})
    with atomic_output(directory / "model.safetensors") as handle:
        handle.write(data)
    extra = {name: value for name, value in model.config.extra.items() if name != "torch_dtype"}  # (dtype's old name)
    extra.update(architectures=[type(model).__name__], dtype=written_dtype(tensors.values()))
    config = dataclasses.replace(model.config, extra=extra)
    config.to_json_file(directory / "config.json")  # (a copy: saving does not change the model's config)


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
