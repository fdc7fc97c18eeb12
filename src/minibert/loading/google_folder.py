"""A folder in Google's layout: which TensorFlow checkpoint it holds, and its bert_config.json.

Google's zips unpack to ``bert_config.json``, ``vocab.txt`` and one checkpoint (``bert_model.ckpt.index``
+ ``.data-00000-of-00001``); a run of Google's scripts leaves several (``model.ckpt-3``, ``model.ckpt-6``)
and TensorFlow's ``checkpoint`` state file naming the newest. A checkpoint is chosen as TensorFlow
chooses it:

* a prefix given (``DIR/model.ckpt-3``, the form of ``--init_checkpoint``, ``Saver.restore(session,
  path)`` and transformers' ``load_tf_weights_in_bert``) is that checkpoint, read with its folder's
  bert_config.json and vocab.txt;
* a folder reads the one its ``checkpoint`` file names (``tf.train.latest_checkpoint``); a state
  file naming a checkpoint that is no longer there is an error, as TensorFlow then finds none;
  without a state file the folder must hold one ``*.index``.

A name that is there but is not a regular file (a FIFO, a directory, a link to ``/dev/zero``) is an
error saying what it is, found with ``stat`` alone (local_files.not_a_file): never opened, never absent.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import CheckpointError
from .local_files import not_a_file

# The hub layout's weights files (checkpoint_files.WEIGHT_FILES): beside config.json, they are the model.
HUB_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
# TensorFlow 1's V1 checkpoint, one file per shard and no .index: model.ckpt, model.ckpt-1000-00000-of-00002.
V1_CHECKPOINT = re.compile(r"\.ckpt(-\d+)?(-\d{5}-of-\d{5})?$")
# The names of Google's zips end in the model's shape: uncased_L-12_H-768_A-12, multi_cased_L-12_H-768_A-12.
RELEASE_NAME = re.compile(r"(^|_)L-\d+_H-\d+_A-\d+$")


def regular(path: Path, what: str = "") -> bool:
    """Whether ``path`` is a regular file: False when it is absent; a CheckpointError saying what it is
    when it is there but is not one (a FIFO is never opened: only ``stat`` is asked)."""
    kind = not_a_file(path)
    if kind:
        raise CheckpointError(f"{what or path.name} in the directory {path.parent} is {kind}, not a regular file")
    return path.is_file()


def given_prefix(name) -> Path | None:
    """``name`` as a TensorFlow checkpoint's prefix (``DIR/model.ckpt-3``: ``DIR/model.ckpt-3.index``
    is there, a regular file or not), or None for any other name (a folder, a hub id).

    >>> given_prefix("/no/such/bert_model.ckpt") is None
    True
    """
    name = os.fspath(name)
    if not name or os.path.isdir(name):
        return None
    index = name + ".index"
    return Path(name) if os.path.isfile(index) or not_a_file(index) else None


def model_folder(name) -> str:
    """The folder whose files a load reads: a checkpoint prefix's folder, else ``name`` as it is."""
    prefix = given_prefix(name)
    return os.fspath(name) if prefix is None else os.fspath(prefix.parent)


def google_release(folder) -> bool:
    """Whether a local folder holds one of Google's releases, unpacked, or a run of Google's scripts:
    it has bert_config.json or a TensorFlow checkpoint (``*.index``), or bears a zip's name
    (``cased_L-12_H-768_A-12``). Those ship no tokenizer settings, and their casing follows Google's
    README (tokenizer/directory.py); a hub id, or any other folder, is none.

    >>> google_release("no/such/uncased_L-12_H-768_A-12")
    False
    """
    folder = Path(os.fspath(folder))
    if not folder.is_dir():
        return False
    named = RELEASE_NAME.search(Path(os.path.abspath(folder)).name) is not None
    return named or (folder / "bert_config.json").is_file() or any(folder.glob("*.index"))


def newest_named(state: Path) -> str | None:
    """The checkpoint TensorFlow's ``checkpoint`` state file names as the newest
    (``model_checkpoint_path: "model.ckpt-2000"``), or None when it names none."""
    for line in state.read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model_checkpoint_path":
            return value.strip().strip('"') or None
    return None


def checkpoint_prefix(directory: str | os.PathLike) -> Path | None:
    """The checkpoint a directory holds, as the path prefix its ``.index`` and ``.data-*`` files
    share (``.../bert_model.ckpt``); None if there is none. The ``checkpoint`` state file, when there,
    decides (``tf.train.latest_checkpoint``), whatever the number of indexes: one naming a checkpoint
    no longer there is a CheckpointError, never another checkpoint read without a word."""
    directory = Path(directory)
    indexes = sorted(directory.glob("*.index"))
    names = ", ".join(index.name for index in indexes)
    state = directory / "checkpoint"
    named = newest_named(state) if regular(state, "TensorFlow's 'checkpoint' file") else None
    if named is not None and indexes:
        prefix = directory / Path(named).name
        if not regular(prefix.with_name(prefix.name + ".index")):
            raise CheckpointError(
                f"{directory} holds the TensorFlow checkpoints {names}, and its 'checkpoint' file names "
                f"{prefix.name}, which is not there (deleted?), so TensorFlow finds no checkpoint there: pass the "
                f"one you want as its prefix ({directory / indexes[-1].stem}), or name it in 'checkpoint' "
                "(model_checkpoint_path)"
            )
        return prefix
    if len(indexes) <= 1:
        return indexes[0].with_suffix("") if indexes else None
    raise CheckpointError(
        f"{directory} holds several TensorFlow checkpoints ({names}) and no 'checkpoint' file naming one: "
        f"pass the one you want as its prefix ({directory / indexes[-1].stem}), or keep one of them in the directory"
    )


def google_layout(name_or_path) -> tuple[Path, Path] | None:
    """(bert_config.json, the checkpoint's ``.index``) of a checkpoint prefix, or of a local directory
    as Google's zips unpack (bert_config.json, bert_model.ckpt.index, .data-00000-of-00001, vocab.txt);
    None for the hub's layout. Without config.json, a folder with bert_config.json and a checkpoint
    index is Google's even with a pytorch_model.bin beside it (transformers' documented conversion
    writes its dump into the Google folder); with config.json, the hub's weights file wins."""
    prefix = given_prefix(name_or_path)
    directory = prefix.parent if prefix is not None else Path(os.fspath(name_or_path))
    if prefix is None:
        if not directory.is_dir():
            return None
        has_config = regular(directory / "config.json")
        if has_config and any(regular(directory / name) for name in HUB_WEIGHTS):
            return None
        prefix = checkpoint_prefix(directory)
        if prefix is None:
            missing = _no_index(directory)
            if missing:
                raise CheckpointError(missing)
            return None
    for config_name in ("config.json", "bert_config.json"):
        if regular(directory / config_name):
            return directory / config_name, Path(os.fspath(prefix) + ".index")
    raise CheckpointError(
        f"{directory} holds the TensorFlow checkpoint {prefix.name} but no bert_config.json (or config.json) "
        "describing its shape"
    )


def _no_index(directory: Path) -> str | None:
    """What is wrong with a directory that has Google's files but no checkpoint index (*.index), in
    words; None when it has none of them (bert_config.json without config.json, TensorFlow's
    'checkpoint' state file, a .data-* shard, a V1 checkpoint), and is then read as the hub's layout.
    The index was lost, the state file names a checkpoint that is not there, or the checkpoint is
    TensorFlow's V1 format; each is said, rather than that config.json is missing."""
    state = directory / "checkpoint"
    has_state = regular(state, "TensorFlow's 'checkpoint' file")
    named = Path(newest_named(state) or "").name if has_state else ""
    shards = sorted(directory.glob("*.data-*"))
    v1 = [path for path in sorted(directory.glob("*.ckpt*")) if V1_CHECKPOINT.search(path.name) and path.is_file()]
    bert_config = regular(directory / "bert_config.json")
    if not (bert_config and not regular(directory / "config.json") or has_state or shards or v1):
        return None
    holds = "bert_config.json" if bert_config else "TensorFlow's files"
    message = f"{directory} holds {holds} but no TensorFlow checkpoint index (*.index)"
    if v1:
        return (f"{message}: {v1[0].name} is TensorFlow's V1 checkpoint format, which minibert does not read "
                "(re-save it in the V2 format, tf.compat.v1.train.Saver's default)")  # fmt: skip
    if named:
        return f"{message}: its 'checkpoint' file names {named}, which is not there"
    if shards:
        index = shards[0].name.split(".data-")[0] + ".index"
        return f"{message}: {index}, which says where each tensor of {shards[0].name} is, is missing"
    return message
