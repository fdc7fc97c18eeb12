"""The float32 model an int8 one was loaded from, read again: what ``save_pretrained`` writes for an
int8 model and what ``model.use_book_modules()`` gives back (seam.py). int8 keeps no float32
projection in memory (that is its point), so the twin reads the checkpoint again.

Again from *exactly the files read at load*, not from the name the model was loaded by: a hub name
resolves through a revision, a ``cache_dir``, ``local_files_only`` and a token, and a relative folder
through the working directory, none of which the model keeps (a token is a secret), and each of
which may lead elsewhere later (``main`` moved on; another cache; ``os.chdir``). So loading records
``Int8Source``: the absolute paths of config.json and the weights file (a hub checkpoint's lie in
its revision's own folder of the cache it was read from) and the files' signature then. The twin is
read from ``Int8Source.location``: that folder as a plain local folder, or a TensorFlow checkpoint's
prefix (``DIR/bert_model.ckpt``: the very checkpoint read, whatever checkpoint the folder's
``checkpoint`` file names, as from_pretrained reads a prefix); refused where the files changed since
or that location would now give other ones. When the model saves itself into that folder, the record
follows the files it wrote (``follow_save``): they hold the twin, so the next twin reads the same weights."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from ..errors import QuantizationError
from ..loading.config_fields import BUILD_FIELDS, LABEL_FIELDS  # the config fields from_pretrained replaces


@dataclass(frozen=True)
class Int8Source:
    """The files an int8 model was loaded from, as resolved then: absolute paths, and what told
    them apart then (``file_signature`` of the weights, and config.json's size, times and inode)."""

    config_file: Path
    weights_file: Path
    signature: tuple | None

    @classmethod
    def of(cls, config_file, weights_file) -> Int8Source:
        """The record of these two files as they are now (paths made absolute, never resolved
        through links: a hub snapshot's files are links into the cache's blobs)."""
        config_file, weights_file = (Path(os.path.abspath(path)) for path in (config_file, weights_file))
        return cls(config_file, weights_file, _signature(config_file, weights_file))

    def unchanged(self) -> bool:
        return self.signature is not None and _signature(self.config_file, self.weights_file) == self.signature

    @property
    def location(self) -> Path:
        """What from_pretrained is given to read these files again: a TensorFlow checkpoint's prefix
        (its ``.index`` less the suffix: ``DIR/model.ckpt-3``), which reads that checkpoint even where
        the folder's ``checkpoint`` file names a newer one (a training run's folder); else the folder.

        >>> Int8Source(Path("/run/bert_config.json"), Path("/run/model.ckpt-3.index"), None).location.as_posix()
        '/run/model.ckpt-3'
        >>> Int8Source(Path("/m/config.json"), Path("/m/model.safetensors"), None).location.as_posix()
        '/m'
        """
        weights = self.weights_file
        return weights.with_suffix("") if weights.suffix == ".index" else weights.parent


def float32_twin(model: nn.Module) -> nn.Module:
    """The same model in float32, as ``save_pretrained`` writes it: its checkpoint read again (the
    float32 weights are not kept in memory, that is int8's point), with every tensor the int8 model
    holds copied over it (the embeddings and heads, in case they were changed after loading: a word
    embedding table resized after ``add_tokens`` too) and the model's config as it is now
    (``config.output_hidden_states = True``, a dropout changed, labels renamed).

    Another tensor of a shape the checkpoint's model does not have (a head swapped for one of
    another size) is a ``QuantizationError`` naming it: the twin would be another network."""
    source = _unchanged_source(model)
    pooler = {"add_pooling_layer": False} if getattr(model, "pooler", True) is None else {}  # BertModel's only
    twin = type(model).from_pretrained(source.location, gemm="mkl", new_heads=True, **pooler,
                                       **_label_config(model))  # fmt: skip
    rows = model.get_input_embeddings().num_embeddings
    if twin.get_input_embeddings().num_embeddings != rows:
        twin.resize_token_embeddings(rows)  # (its rows are the int8 model's, copied below)
    state, twin_state = model.state_dict(), twin.state_dict()
    for name, tensor in state.items():
        if name in twin_state and twin_state[name].shape != tensor.shape:
            raise QuantizationError(
                f"this int8 model's {name} is {tuple(tensor.shape)}, but the model its checkpoint "
                f"{source.weights_file} builds has {tuple(twin_state[name].shape)}, so its float32 weights cannot "
                "be read again around it; change the model in float32, save it, then load that with dtype='int8'"
            )
    twin.load_state_dict(state, strict=False)
    twin.config = copy.deepcopy(model.config)  # the config as changed since loading, not the checkpoint's
    return twin


def _unchanged_source(model: nn.Module) -> Int8Source:
    """The model's ``Int8Source``, checked: its files unchanged, and still the ones from_pretrained
    reads at its ``location`` (not, say, a model.safetensors written since beside a pytorch_model.bin,
    or a config.json beside a TensorFlow checkpoint's bert_config.json)."""
    from ..errors import MinibertError
    from ..loading.checkpoint_files import find_checkpoint

    source = getattr(model, "int8_source", None)
    if source is None:
        raise QuantizationError("this int8 model does not know the files it was loaded from (int8_source, recorded by "
                                "from_pretrained(..., dtype='int8')), so its float32 weights cannot be read again; "
                                "load it with from_pretrained")  # fmt: skip
    if not source.unchanged():
        raise QuantizationError(
            f"{source.weights_file} changed (or was removed) since this model was loaded in int8 from it, so its "
            "float32 weights cannot be read again (they would be another model's); load the model again"
        )
    location = source.location
    try:
        found = find_checkpoint(location)  # a local folder or checkpoint prefix: nothing fetched, no name resolved
        now = f"from_pretrained would now read {found[0].name} and {found[1].name} there"
    except MinibertError as error:
        found, now = None, f"reading it now fails: {error}"
    if found != (source.config_file, source.weights_file):
        raise QuantizationError(
            f"{location} no longer gives the files this model was loaded from in int8 ({source.config_file.name} and "
            f"{source.weights_file.name}: {now}), so its float32 weights cannot be read again; load the model again"
        )
    return source


def follow_save(model: nn.Module, directory) -> None:
    """After ``save_pretrained`` wrote the int8 model's twin into ``directory``: where that is the
    folder the model was loaded from, its record follows the files just written. They hold the
    twin (the checkpoint's projections, the model's other tensors as they are now), so a later twin
    reads the same float32 weights; the old record would call the model's own save another model's."""
    source = getattr(model, "int8_source", None)
    try:
        same = source is not None and os.path.samefile(directory, source.weights_file.parent)
    except OSError:  # (the folder it was loaded from is gone)
        same = False
    if same:  # the files from_pretrained now reads there: model.safetensors, or a sharded save's index
        from ..loading.checkpoint_files import find_checkpoint

        model.int8_source = Int8Source.of(*find_checkpoint(source.weights_file.parent))


def _signature(config_file: Path, weights_file: Path) -> tuple | None:
    weights = file_signature(weights_file)
    try:
        stat = os.stat(config_file)
    except OSError:
        return None
    return None if weights is None else (*weights, (stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns))


def file_signature(path) -> tuple | None:
    """What tells a checkpoint apart from the one read earlier at the same path: for each file its
    tensors are read from (the file; a sharded checkpoint's index and every shard; a TensorFlow
    index and its data), the size, modification time, inode and change time (which no ``touch``
    or copy of times can set back). None when one of them is gone."""
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
