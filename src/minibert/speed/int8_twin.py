"""The float32 model an int8 one was loaded from, read again: what ``save_pretrained`` writes for an
int8 model and what ``model.use_book_modules()`` gives back (seam.py). int8 keeps no float32
projection in memory (that is its point), so the twin reads the checkpoint again, refusing where
the file changed since (``file_signature``) or the model no longer fits it."""

from __future__ import annotations

import copy
from pathlib import Path

from torch import nn

from ..errors import QuantizationError
from ..loading.config_fields import BUILD_FIELDS, LABEL_FIELDS  # the config fields from_pretrained replaces


def float32_twin(model: nn.Module) -> nn.Module:
    """The same model in float32, as ``save_pretrained`` writes it: its checkpoint read again (the
    float32 weights are not kept in memory, that is int8's point), with every tensor the int8 model
    holds copied over it (the embeddings and heads, in case they were changed after loading: a word
    embedding table resized after ``add_tokens`` too) and the model's config as it is now
    (``config.output_hidden_states = True``, a dropout changed, labels renamed).

    Another tensor of a shape the checkpoint's model does not have (a head swapped for one of
    another size) is a ``QuantizationError`` naming it: the twin would be another network."""
    source = getattr(model, "name_or_path", None)
    if source is None:
        raise QuantizationError("this int8 model does not know its checkpoint (name_or_path), so its float32 "
                                "weights cannot be read again; load it with from_pretrained")  # fmt: skip
    loaded_from = getattr(model, "int8_weights_file", None)  # (path, signature) recorded by int8_check.load_int8
    if loaded_from is not None and file_signature(loaded_from[0]) != loaded_from[1]:
        raise QuantizationError(
            f"{loaded_from[0]} changed (or was removed) since this model was loaded in int8 from it, so its float32 "
            "weights cannot be read again (they would be another model's); load the model again"
        )
    twin = type(model).from_pretrained(source, gemm="mkl", new_heads=True, **_label_config(model))
    rows = model.get_input_embeddings().num_embeddings
    if twin.get_input_embeddings().num_embeddings != rows:
        twin.resize_token_embeddings(rows)  # (its rows are the int8 model's, copied below)
    state, twin_state = model.state_dict(), twin.state_dict()
    for name, tensor in state.items():
        if name in twin_state and twin_state[name].shape != tensor.shape:
            raise QuantizationError(
                f"this int8 model's {name} is {tuple(tensor.shape)}, but the model its checkpoint {source} builds "
                f"has {tuple(twin_state[name].shape)}, so its float32 weights cannot be read again around it; "
                "change the model in float32, save it, then load that with dtype='int8'"
            )
    twin.load_state_dict(state, strict=False)
    twin.config = copy.deepcopy(model.config)  # the config as changed since loading, not the checkpoint's
    return twin


def file_signature(path) -> tuple | None:
    """What tells a checkpoint apart from the one read earlier at the same path: for each file its
    tensors are read from (the file; a sharded checkpoint's index and every shard; a TensorFlow
    index and its data), the size, modification time, inode and change time (which no ``touch``
    or copy of times can set back). None when one of them is gone."""
    import os

    from ..loading.checkpoint_files import files_read

    signatures = []
    for one in files_read(Path(path)):
        try:
            stat = os.stat(one)
        except OSError:
            return None
        signatures.append((stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns))
    return tuple(signatures)


def _label_config(model: nn.Module) -> dict:
    """The fields the model was built with (its labels; a dropout or layer_norm_eps given to from_pretrained)."""
    extra = getattr(model.config, "extra", {})
    return {**{name: extra[name] for name in LABEL_FIELDS if name in extra},
            **{name: getattr(model.config, name) for name in BUILD_FIELDS}}  # fmt: skip
