"""Saving: a model written back as a hub checkpoint, under the hub's names (the rename table backwards).

``save_pretrained(model, directory)`` writes ``config.json`` and ``model.safetensors``, each
atomically (formats/atomic_files.py: a reader never sees half a file). Both minibert and
transformers load the result::

    layers.3.attention_norm.weight  →  encoder.layer.3.attention.output.LayerNorm.weight   (BertModel)
                                    →  bert.encoder.layer.3.attention.output.LayerNorm.weight  (with heads)
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ..formats.atomic_files import atomic_output
from .names import HEAD_PREFIXES, minibert_to_checkpoint


def save_pretrained(model, directory: str | os.PathLike) -> None:
    """Write config.json and model.safetensors with the hub's tensor names, atomically.

    BertModel is saved like newer exports (no prefix); the classes with heads like Google's and
    transformers' checkpoints (``bert.`` prefix; ``cls.*``, ``classifier.*`` or ``qa_outputs.*`` heads;
    the tied decoder weight left out).
    Both minibert and transformers load the result.
    """
    from safetensors.torch import save

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
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
    architecture = type(model).__name__
    config = dataclasses.replace(model.config, extra={**model.config.extra, "architectures": [architecture]})
    config.to_json_file(directory / "config.json")  # (a copy: saving does not change the model's config)
