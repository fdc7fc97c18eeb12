"""A checkpoint's files: which they are, and their tensors under the file's own names.

A checkpoint is a ``config.json`` (the shape: config.py) and one weights file, found in a directory
or hub repository (hub.py) in this order of preference (transformers'):

* ``model.safetensors`` (safetensors.py): a JSON header, then raw bytes, read by hand;
* ``model.safetensors.index.json``: the same, in shards (``save_pretrained(max_shard_size=...)``);
  the index's ``weight_map`` names each tensor's shard, and every shard is read;
* ``pytorch_model.bin`` (or its shards, ``pytorch_model.bin.index.json``): torch's pickle, read
  with ``weights_only=True`` (no code from the file runs);
* in a directory unpacked from Google's zip, ``bert_config.json`` and a TensorFlow checkpoint
  named by its ``.index`` file (tf_checkpoint.py).

``read_state_dict`` gives ``{name: tensor}`` with the file's names; names.py renames them.
"""

from __future__ import annotations

import glob
import json
import os
import pickle
import pickletools
import re
import warnings
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import torch

from ..errors import CheckpointError
from .file_pages import MappedPages, torch_mapped_pages
from .files_read import note
from .google_folder import HUB_WEIGHTS, google_layout
from .hub import has_file, resolve_file
from .safetensors import _corrupt, _read_safetensors_header, map_safetensors, read_safetensors, safetensors_shapes

# What TensorFlow pre-training checkpoints add: the Adam optimizer's two slots per variable, the step.
TF_IGNORED = re.compile(r"(/adam_[mv]|^global_step)$")
# The hub layout's weights files, in the order of preference: one file, else its shards' index.
WEIGHT_FILES = HUB_WEIGHTS
SHARDS_INDEX = ".index.json"  # how an index of shards is named: FILE.index.json


def find_checkpoint(name_or_path, revision: str | None = None) -> tuple[Path, Path]:
    """(config file, weights file) of a directory or hub repo: model.safetensors preferred over
    pytorch_model.bin; in a directory unpacked from Google's zip, ``bert_config.json`` and the
    TensorFlow checkpoint's ``.index`` file."""
    google = google_layout(name_or_path)
    if google is not None:
        return _noted(*google)
    config_file = resolve_file(name_or_path, "config.json", revision=revision)
    for filename in WEIGHT_FILES:
        weights_file = resolve_file(name_or_path, filename, revision=revision, required=False)
        if weights_file is not None:
            for shard in shard_names(weights_file) if is_sharded(weights_file) else ():
                resolve_file(name_or_path, shard, revision=revision)  # each beside the index (fetched from the hub)
            return config_file, weights_file
    raise _no_weights_read(name_or_path, revision)


def _noted(config_file: Path, index: Path) -> tuple[Path, Path]:
    """A Google checkpoint's files, told to an open recording (files_read.py: what a resumable run
    records as its model): its config, its index and the index's data shards (the tensors' bytes)."""
    for part in sorted(index.parent.glob(f"{glob.escape(index.stem)}.data-*")):
        note(part.name, part)
    return note(config_file.name, config_file), note(index.name, index)


# Weights formats of transformers that minibert does not read: file → what it is, transformers' keyword, and
# what converting needs. transformers 5 ignores from_tf/from_flax (modeling_utils: "Not used anymore"); with
# torch 2.13, TensorFlow 2.21 and tf-keras 2.21 (beside TensorFlow's Keras 3), 4.46.3, 4.49.0 and 4.50.3 convert,
# 4.51.3 to 4.57.6 fail (a shape mismatch, then weights left on the meta device); Flax 0.12.8: 4.50.3 converts.
UNREAD_WEIGHTS = {"tf_model.h5": ("Keras (TensorFlow 2) weights", "from_tf=True", "tensorflow tf-keras"),
                  "flax_model.msgpack": ("Flax weights", "from_flax=True", "flax")}  # fmt: skip
CONVERTING_TRANSFORMERS = "transformers<4.51"


def _no_weights_read(name_or_path, revision: str | None) -> CheckpointError:
    """The error for a folder or repository with none of WEIGHT_FILES: it has no weights at all, or
    only weights in a format minibert does not read (then how to convert them), or, where the hub
    cannot be asked (offline), none that minibert reads, the other formats unknown."""
    name = os.fspath(name_or_path)
    held = {filename: has_file(name_or_path, filename, revision=revision) for filename in UNREAD_WEIGHTS}
    unread = [filename for filename, there in held.items() if there]
    if unread:
        return _convert_first(name, unread)
    unknown = [filename for filename, there in held.items() if there is None]
    expected = f"expected one of {', '.join(WEIGHT_FILES)}"
    if unknown:
        return CheckpointError(f"{name} has config.json but none of the weights files minibert reads ({expected}); "
                               f"whether it holds weights in another format ({', '.join(unknown)}) is unknown: the "
                               "hub could not be asked, and the local cache has no record of them")  # fmt: skip
    return CheckpointError(f"{name} has config.json but no weights: {expected}")


def _convert_first(name: str, unread: list[str]) -> CheckpointError:
    """How to convert weights minibert does not read: with transformers 4, which still reads them."""
    kinds = ", ".join(f"{filename} ({UNREAD_WEIGHTS[filename][0]})" for filename in unread)
    _, keyword, packages = UNREAD_WEIGHTS[unread[0]]
    return CheckpointError(
        f"{name} holds its weights only as {kinds}, which minibert does not read (it reads "
        f"{', '.join(WEIGHT_FILES)}, and Google's TensorFlow checkpoints, bert_model.ckpt.index/.data). Convert "
        f"them once with transformers 4 (transformers 5 ignores {keyword}), in a separate environment: pip install "
        f"'{CONVERTING_TRANSFORMERS}' torch {packages}; then transformers.BertModel.from_pretrained({name!r}, "
        f"{keyword}).save_pretrained('DIR') (the class of its head in place of BertModel, for a model with one), "
        "and load DIR"
    )


def is_sharded(path: Path) -> bool:
    """Whether ``path`` is an index of shards (model.safetensors.index.json, pytorch_model.bin.index.json)."""
    return path.name.endswith(SHARDS_INDEX)


def shard_names(index_file: Path) -> list[str]:
    """The shard files an index names, in order (``model-00001-of-00002.safetensors``, ...), as
    paths from the index's folder (a shard in a subfolder keeps it: ``part/model-00001-....safetensors``)."""
    return [shard.relative_to(index_file.parent).as_posix() for shard in _index(index_file)[1]]


def _index(index_file: Path) -> tuple[dict, list[Path]]:
    """(its ``weight_map``, the shards' paths), an index read and checked once: the weight map
    names each tensor's shard, e.g. ``{"embeddings.word_embeddings.weight":
    "model-00001-of-00002.safetensors", ...}``; a shard is a file of the index's own kind, beside it
    or in a folder below it (transformers reads ``part/model-00001-....safetensors`` so), never
    outside (an absolute path, or one through "..")."""
    try:
        index = json.loads(index_file.read_bytes())
    except (OSError, ValueError) as error:
        raise CheckpointError(f"cannot read the shards' index {index_file}: {error}") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{index_file}: weight_map must be an object naming each tensor's shard file")
    kind = index_file.name.removesuffix(SHARDS_INDEX).rsplit(".", 1)[-1]  # "safetensors" or "bin"
    names = sorted(set(weight_map.values()), key=str)
    for name in names:
        parts = PurePosixPath(name).parts if isinstance(name, str) else ()
        outside = not parts or PurePosixPath(name).is_absolute() or any(part in (".", "..") for part in parts)
        if outside or "\\" in name or name != "/".join(parts) or not name.endswith("." + kind):
            raise CheckpointError(f"{index_file}: weight_map names {name!r}, which is not a .{kind} file in its "
                                  "folder (beside it, or in a folder below it)")  # fmt: skip
    return weight_map, [index_file.parent / name for name in names]


def files_read(weights_file: Path) -> list[Path]:
    """Every file a checkpoint's tensors are read from: the weights file itself; an index and its
    shards; a TensorFlow ``.index`` and its ``.data-*`` shards."""
    if is_sharded(weights_file):
        return [weights_file, *_index(weights_file)[1]]
    if weights_file.suffix == ".index":
        return [weights_file, *sorted(weights_file.parent.glob(weights_file.stem + ".data-*"))]
    return [weights_file]


def _merged(index_file: Path, read) -> dict:
    """One dictionary of every shard's tensors, each shard read by ``read(shard)``; a tensor in two
    shards, or the index's tensors not all there, is an error naming them."""
    weight_map, shards = _index(index_file)
    merged: dict = {}
    for shard in shards:
        state = read(shard)
        twice = sorted(set(merged) & set(state))
        if twice:
            raise CheckpointError(f"{shard} holds tensors another shard of {index_file.name} holds too: {twice[:5]}")
        merged.update(state)
    absent = sorted(set(weight_map) - set(merged))
    if absent:
        raise CheckpointError(f"{index_file} lists tensors that no shard holds ({len(absent)}): {absent[:5]}")
    return merged


def declared_shapes(path: Path) -> dict[str, torch.Tensor] | None:
    """A safetensors checkpoint's tensors as shapes without data ('meta' tensors), from its
    header(s) alone (one file, or every shard of an index); None for a file with no header to read."""
    if path.suffix == ".safetensors":
        return safetensors_shapes(path)
    if is_sharded(path) and path.name.endswith(".safetensors" + SHARDS_INDEX):
        return _merged(path, safetensors_shapes)
    return None


def _torch_load(path: Path):
    """torch.load with weights_only=True (tensors and plain containers only: no code from the file
    runs), memory-mapped; torch's legacy format (torch.save before 1.6, or
    `_use_new_zipfile_serialization=False`) cannot be mapped, so it is read whole."""
    with warnings.catch_warnings():  # "Detected pickle protocol 4 ...": torch's note to itself, not the user's
        warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
        try:
            return torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as error:
            if "mmap can only be used" not in str(error):
                raise
            return torch.load(str(path), map_location="cpu", weights_only=True)


def _refused_pickle(path: Path, torch_says: str) -> CheckpointError:
    """What is true when torch's weights-only unpickler refuses a .bin: its pickle asks for a Python
    global (a class or function: ``os.system``, a whole ``nn.Module``) or uses an instruction that the
    weights-only load does not run, and minibert runs no other unpickler; a pickle instruction that
    does not exist means the file is not a pickle at all (corrupt). torch's own text advises
    re-running with ``weights_only=False``: not quoted."""
    named = re.search(r"GLOBAL ([\w.]+)", torch_says)
    operand = re.search(r"Unsupported operand (\d+)", torch_says)
    if named:
        refused = (f"its pickle asks for the Python global {named.group(1)}, code a weights-only load (torch.load "
                   "with weights_only=True) does not run, and minibert runs no code from a weights file")
    elif operand and int(operand.group(1)) < 256 and chr(int(operand.group(1))) in pickletools.code2op:
        instruction = pickletools.code2op[chr(int(operand.group(1)))]
        refused = (f"its pickle uses the instruction {instruction.name} (pickle protocol {instruction.proto}), which "
                   "torch's weights-only load (weights_only=True, the only load minibert makes) does not read")
    elif operand:
        return _corrupt(path, f"it is not a pickle (the byte {int(operand.group(1)):#04x} is no pickle instruction)")
    else:
        return _corrupt(path, "torch's weights-only unpickler refused it")
    return CheckpointError(
        f"cannot read weights file {path}: {refused}. If you trust where the file came from, convert it once with "
        "a tool you trust: torch.load(path, weights_only=False), then safetensors.torch.save_file(tensors, "
        "'model.safetensors')"
    )


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """All tensors of a model.safetensors or pytorch_model.bin file (the .bin with weights_only=True:
    no code from the file is run), or of a TensorFlow checkpoint given by its ``.index`` file (all
    but the optimizer slots). A broken file is a ``CheckpointError`` naming it."""
    path = Path(path)
    if is_sharded(path):
        return _merged(path, read_state_dict)
    if path.suffix == ".safetensors":
        return read_safetensors(path)
    if path.suffix == ".index":  # Google's TensorFlow checkpoint: PREFIX.index + PREFIX.data-*, mapped
        return map_state_dict(path)[0]
    try:
        state = _torch_load(path)
    except FileNotFoundError:
        raise CheckpointError(f"weights file not found: {path}") from None
    except pickle.UnpicklingError as error:
        raise _refused_pickle(path, str(error)) from None
    except Exception as error:  # noqa: BLE001 — any other parse failure means a corrupt file
        said = (str(error).splitlines() or [""])[0][:200]  # an empty file's EOFError says nothing
        raise _corrupt(path, f"{type(error).__name__}: {said}" if said else type(error).__name__) from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"weights file {path} does not hold a dictionary of tensors")
    return state


def map_state_dict(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], list[MappedPages]]:
    """``read_state_dict``'s tensors, as views of the file wherever it is mapped (copy-on-write), and
    the ``MappedPages`` of each mapped file: a safetensors file and each TensorFlow shard mapped here,
    a .bin as ``torch.load(mmap=True)`` maps it. None where nothing is mapped (torch's legacy format,
    read into memory). from_pretrained gives each tensor's pages back once it is copied or packed."""
    path = Path(path)
    if is_sharded(path):  # each shard mapped as one file is
        pages = []

        def mapped(shard: Path) -> dict:
            state, shard_pages = map_state_dict(shard)
            pages.extend(shard_pages)
            return state

        return _merged(path, mapped), pages
    if path.suffix == ".safetensors":
        state, pages = map_safetensors(path)
        return state, [pages] if pages is not None else []
    if path.suffix == ".index":
        from .tf_checkpoint import map_tf_checkpoint

        return map_tf_checkpoint(path.with_suffix(""), wanted=lambda name: not TF_IGNORED.search(name))
    state = read_state_dict(path)
    pages = torch_mapped_pages(path, state.values())
    return state, [pages] if pages is not None else []


def stored_dtypes(path: str | os.PathLike) -> Iterator[torch.dtype]:
    """The dtype of each tensor in a weights file, in the file's order, read as needed (a safetensors
    header or a TensorFlow index alone; a .bin as torch.load maps it), for ``dtype="auto"``."""
    path = Path(path)
    declared = declared_shapes(path)
    if declared is not None:
        yield from (tensor.dtype for tensor in declared.values())
    elif is_sharded(path):
        for shard in _index(path)[1]:
            yield from stored_dtypes(shard)
    elif path.suffix == ".index":
        from .tf_checkpoint import read_index

        entries, _ = read_index(path.with_suffix(""))
        yield from (entry.dtype for name, entry in entries.items()
                    if entry.dtype is not None and not TF_IGNORED.search(name))  # fmt: skip
    else:
        yield from (tensor.dtype for tensor in read_state_dict(path).values())


def tensor_names(path: str | os.PathLike) -> list[str]:
    """The tensor names in a weights file (for safetensors, from the header alone)."""
    path = Path(path)
    if is_sharded(path):
        return [name for shard in _index(path)[1] for name in tensor_names(shard)]
    if path.suffix == ".index":
        from .tf_checkpoint import read_index

        entries, _ = read_index(path.with_suffix(""))
        return list(entries)  # (a tensor of a dtype minibert does not read too: refused by name when loaded)
    if path.suffix == ".safetensors":
        try:
            with path.open("rb") as handle:
                header, _ = _read_safetensors_header(handle, path)
        except OSError as error:
            raise CheckpointError(f"cannot read weights file {path}: {error}") from None
        return [name for name in header if name != "__metadata__"]
    return list(read_state_dict(path))


def tensor_shapes(path: str | os.PathLike, read_pickle: bool = True) -> dict[str, tuple[int, ...]] | None:
    """Every tensor's name and shape in a weights file, from one read of the file's own table where it
    has one: a TensorFlow ``.index``, a safetensors header (or each shard's). torch's pickle
    (``pytorch_model.bin`` or its shards) has no table apart from its tensors: with ``read_pickle`` it
    is opened as ``read_state_dict`` opens it (memory-mapped, with its checks), else None. One read
    answers every question a caller asks of the tensors (the class they call for, from their names;
    the classifier's rows, from its shape; whether there is a pooler): verify_int8.py."""
    path = Path(path)
    if path.suffix == ".index":
        from .tf_checkpoint import read_index

        entries, _ = read_index(path.with_suffix(""))
        return {name: tuple(entry.shape) for name, entry in entries.items()}
    tensors = declared_shapes(path)  # (None for a pickle)
    if tensors is None and read_pickle:
        tensors = read_state_dict(path)
    return None if tensors is None else {name: tuple(tensor.shape) for name, tensor in tensors.items()}


def checkpoint_parts(names: list[str]) -> set[str]:
    """Which of "pooler", "masked-LM" and "next-sentence" a checkpoint's tensor ``names`` hold
    (transformers' names or Google's, with or without the ``bert.`` prefix). A token classifier or
    QA model has no pooler, a masked-LM save has no pooler and no next-sentence head: each is
    compared as what it holds, as transformers loads it."""
    dotted = ["." + name.replace("/", ".") for name in names]
    wanted = {"pooler": ".pooler.", "masked-LM": ".cls.predictions.", "next-sentence": ".cls.seq_relationship."}
    return {part for part, marker in wanted.items() if any(marker in name for name in dotted)}
