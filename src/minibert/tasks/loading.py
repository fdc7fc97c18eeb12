"""From ``model=`` to a model with the head a task needs, and its tokenizer.

A hub id or a directory is loaded once per (name, revision, head class) and kept (None and "main" are
one revision; a folder has none), so calling a task in a loop loads its model once; ``revision=`` and
``token=`` choose what is downloaded, as in transformers' ``pipeline(task, model=..., revision=...,
token=...)``: a model loaded at one commit is not another's, and the token (a secret) is sent, never
kept in the key or put in a message. A directory is kept with its files' identity (``folder_files``):
once one of them is rewritten (``save_pretrained`` into the same folder after more training), the next
call reads the folder again, so a result always comes from what the folder holds. A loaded model must
have the head; ``(model, tokenizer)`` is taken as it is once its head is checked. """

from __future__ import annotations

import contextlib
import functools
import os
import stat
import sys
import threading
import warnings

import numpy as np
import torch

from ..embedding.batches import length_sorted_batches
from ..errors import PicklableError, TaskArgumentError
from ..heads import BertWithHeads
from ..inputs import AS_ASKED
from ..loading.architectures import architectures_in, check_head_kind
from ..loading.devices import check_model_is_on, placement
from ..loading.google_folder import model_folder
from ..loading.hub import hub_options
from ..loading.hub_commit import one_load
from ..loading.transformers_keywords import hub_keywords
from ..pretrained import evaluating
from ..tokenizer.bert_tokenizer import BertTokenizer
from ..tokenizer.named_class import check_tokenizer_class

loading_lock = threading.Lock()  # two threads asking for the same model load it once
TASKS = "a task (classify, tag, answer, fill_mask, next_sentence)"  # what the meta device cannot run


@functools.lru_cache(maxsize=4)
def _load_cached(name_or_path: str, cls: type, gemm: str | None = None, dtype: str | None = None,
                 device: str | None = None, files: tuple = (),
                 revision: str | None = None) -> tuple[BertWithHeads, BertTokenizer]:  # fmt: skip
    """The model and tokenizer of ``name_or_path`` at ``revision``; ``files`` (``folder_files``) is only
    part of the key. The token is no argument (it would be part of the key): the caller's ``hub_options``."""
    with one_load():  # the model and its tokenizer: one commit of a hub repository (loading/hub_commit.py)
        check_head_kind(cls, *architectures_in(name_or_path, revision))  # before the weights: a wrong head says nothing
        model = cls.from_pretrained(name_or_path, revision=revision, gemm=gemm, dtype=dtype, device=device)
        tokenizer = _tokenizer(name_or_path, revision)
    model.config.check_vocabulary(tokenizer.vocab, name_or_path)
    return model, tokenizer


@functools.lru_cache(maxsize=8)
def _tokenizer_cached(name_or_path: str, files: tuple = (), revision: str | None = None) -> BertTokenizer:
    return _tokenizer(name_or_path, revision)


def _tokenizer(name_or_path: str, revision: str | None) -> BertTokenizer:
    """The folder's tokenizer, as transformers' pipelines load it (AutoTokenizer): a folder naming
    another tokenizer class than BERT's is refused (tokenizer/named_class.py)."""
    check_tokenizer_class(name_or_path, revision)
    return BertTokenizer.from_pretrained(name_or_path, revision=revision)


def tokenizer_of(source: str, commit: str | None = None) -> BertTokenizer:
    """The tokenizer in ``source`` (the folder or hub id a model was loaded from), kept as a model is;
    at ``commit``, the hub commit the model was read at (``config._commit_hash``), so that a model
    loaded at a pinned revision, or before main moved, gets its own commit's tokenizer."""
    return _tokenizer_cached(source, folder_files(source), commit)


# What a load may read in a folder: configs, vocabularies and tokenizer files (.json, .txt), weights
# (.safetensors, .bin and their shards' .index.json), TensorFlow's checkpoint (*.index, *.data-*, "checkpoint").
# A run's growing log (metrics.jsonl) or training_state.pt is none of them: writing it loads nothing again.
READ_BY_A_LOAD = (".json", ".txt", ".safetensors", ".bin", ".index")


def folder_files(name: str) -> tuple[tuple[str, int, int, int], ...]:
    """(name, mtime in ns, size, inode) of each regular file directly in the folder ``name`` (a TensorFlow
    checkpoint's prefix: its folder) that a load may read (``READ_BY_A_LOAD``), sorted; () for a hub id.
    Part of the key a task keeps a model under: a file rewritten in place changes its time (and mostly
    its size), a file replaced (an atomic save, a copy over it) its inode, a file added or removed the
    list, and any of them makes the next call load the folder again. One ``stat`` per file, no file
    opened: cheap enough for every call."""
    name = model_folder(name)
    if not os.path.isdir(name):
        return ()
    found = []
    with os.scandir(name) as entries:
        for entry in entries:
            if not (entry.name.endswith(READ_BY_A_LOAD) or ".data-" in entry.name or entry.name == "checkpoint"):
                continue
            try:
                info = entry.stat()  # follows links: the hub cache's snapshot links point at its blobs
            except OSError:  # a link to nothing: as absent as the loader finds it
                continue
            if stat.S_ISREG(info.st_mode):
                found.append((entry.name, info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(sorted(found))


def cache_key(model: str | os.PathLike, device, dtype, computes: str) -> tuple[str, str, tuple]:
    """(name, device, files) under which a task function keeps a model it loaded: a folder by its real
    path and ``device`` as it resolves (checked here, before anything is read: a device not there, meta,
    int8 on a GPU), so that ``"m"``, ``"./m/"`` and ``"/abs/m"``, or ``None`` and ``"cpu"``, are one model;
    ``files``, the folder's files as they are now (``folder_files``), so that a rewritten folder is another."""
    where = placement(device, dtype, computes=computes)
    name = os.fspath(model)
    name = os.path.realpath(name) if os.path.isdir(model_folder(name)) else name  # (a checkpoint's prefix too)
    return name, str(where or "cpu"), folder_files(name)


def load_for_task(model, cls: type[BertWithHeads], head: str | None = None, *,
                  gemm: str | None = None, dtype: str | None = None, device=None, revision: str | None = None,
                  token: str | bool | None = None) -> tuple[BertWithHeads, BertTokenizer]:  # fmt: skip
    """``model=`` as a (model, tokenizer) pair whose model is a ``cls`` or has the attribute
    ``head`` (``BertForPreTraining`` has both ``mlm_head`` and ``nsp_head``). A name is loaded
    with ``gemm``, the linear layers' matrix library (see speed/gemm.py; None: ``$MINIBERT_GEMM`` or auto),
    and ``dtype``, ``device``, ``revision`` and ``token`` as ``from_pretrained`` takes them ("int8",
    "cuda", a branch or commit, a private or gated repository's token, checked as it checks it); a
    loaded model keeps its own (a ``device`` that is not its device is refused: minibert never moves
    your model; ``revision``/``token``, which choose files to download, are a ``TaskArgumentError``)."""

    def check_head(candidate) -> None:
        if not (isinstance(candidate, cls) or (head is not None and hasattr(candidate, head))):
            raise TypeError(f"this task needs minibert's {cls.__name__}, got {_kind_of(candidate, cls)}")
        source = getattr(candidate, "name_or_path", None)
        check_head_kind(cls, candidate.config.extra.get("architectures"),
                        "the model's config" + (f" (from {source})" if source else ""))  # fmt: skip
        check_model_is_on(candidate, device, TASKS)
        refuse_dtype_choice(dtype, candidate)

    if isinstance(model, tuple) and len(model) == 2:
        refuse_download_choice(revision, token)
        check_head(model[0])
        if not isinstance(model[1], BertTokenizer):  # (the tasks read pieces and offsets through its own calls)
            raise TypeError(f"the pair's tokenizer must be minibert's BertTokenizer, got {_kind_of(model[1])}: "
                            "BertTokenizer.from_pretrained(path) gives the same ids")  # fmt: skip
        return model
    if isinstance(model, BertWithHeads):
        refuse_download_choice(revision, token)
        check_head(model)
        source = getattr(model, "name_or_path", None)
        if source is None:
            raise ValueError("pass model=(model, tokenizer): this model was not loaded with from_pretrained")
        return model, tokenizer_of(str(source), model.config._commit_hash)
    if isinstance(model, (str, os.PathLike)):
        hub = download_choice(revision, token)
        name, where, files = cache_key(model, device, dtype, TASKS)
        with loading_lock, hub_options(hub):  # the token is sent within, not part of the key
            return _load_cached(name, cls, gemm, dtype, where, files, same_revision(name, revision))
    raise TypeError(f"model must be a hub id, a directory, minibert's {cls.__name__} or (model, tokenizer), "
                    f"got {_kind_of(model, cls)}")  # fmt: skip


def _kind_of(value, cls: type | None = None) -> str:
    """What ``value`` is, said so that it never reads as what was asked for: a class of another library
    by its module (transformers' BertForSequenceClassification is not minibert's), with the way to
    minibert's own when it is transformers' model of the same name."""
    kind = type(value)
    if kind.__module__.split(".")[0] == "minibert":
        return f"a {kind.__name__}"
    said = f"a {kind.__module__}.{kind.__qualname__}"
    if cls is not None and kind.__name__ == cls.__name__:
        said += (f" (load it with minibert: {cls.__name__}.from_pretrained(path), or pass the path; "
                 "model.save_pretrained(path) first for a model trained in transformers)")
    return said


def refuse_dtype_choice(dtype, model) -> None:
    """A loaded model given with ``dtype=``: the dtype chooses how weights are loaded, and a loaded model
    keeps its own. Its own dtype (checked as ``from_pretrained`` checks it) is nothing to do; another
    is refused (a float32 model asked for int8 ran in float32, in silence, and an int8 one in int8)."""
    if dtype is None:
        return
    from ..loading.from_pretrained import DTYPE_NAMES, check_dtype
    from ..speed.int8 import is_int8

    asked, own = check_dtype(dtype), "int8" if is_int8(model) else model.dtype
    if asked == own or (asked not in ("int8", "auto", "fastest") and DTYPE_NAMES.get(asked, asked) == own):
        return
    shown = own if own == "int8" else str(own).removeprefix("torch.")
    raise TaskArgumentError("dtype", dtype, f"left out for a model already loaded (its own: {shown})",
                            f"dtype= is for a model given by name (it chooses how the weights are loaded), and this "
                            f"model is loaded already, in {shown}: pass its hub id or folder as model= with dtype=, "
                            f"or load it with from_pretrained(..., dtype={dtype!r})")  # fmt: skip


def same_revision(name: str, revision: str | None) -> str | None:
    """``revision`` as a cache key: None for a folder (a load from disk reads no revision, as
    transformers' does not) and for "main" (what the hub reads when none is given), so that
    ``revision=None`` and ``revision="main"`` are one model, loaded once."""
    if revision == "main" or os.path.isdir(model_folder(name)):
        return None
    return revision


def download_choice(revision, token):
    """HubOptions of ``token``, checked as ``from_pretrained`` checks it (transformers_keywords.py
    ``hub_keywords``: before any request, the token never quoted), ``revision`` a str or None."""
    if revision is not None and not isinstance(revision, str):
        raise TypeError(f"revision must be a str (a branch, tag or commit) or None, got {type(revision).__name__}")
    return hub_keywords({"token": token})


def refuse_download_choice(revision, token) -> None:
    """A loaded model (or ``(model, tokenizer)``) given with ``revision=`` or ``token=``: they choose
    the files a hub id is downloaded from, and a loaded model has its own; refused rather than
    ignored (the caller may believe a commit was pinned). The token's value is never put in the error."""
    for name, value in (("revision", revision), ("token", token)):
        if value is not None:
            shown = value if name == "revision" else "(not shown)"
            message = (f"{name}= is for a model given by name (it chooses what is downloaded), and this model is "
                       f"loaded already, from its own files: pass its hub id as model= with {name}=, or pass "
                       f"(model, tokenizer), both loaded with from_pretrained(..., {name}=...)")  # fmt: skip
            raise TaskArgumentError(name, shown, "left out for a model already loaded", message)


class TooLongError(PicklableError, ValueError):
    """An input longer than the model takes: ``number`` (its place among the inputs, from 0), its
    ``length`` in tokens and the model's ``limit``, as data, so that a command can name the line
    and its own flag (``--truncate``) instead of the Python parameter."""

    def __init__(self, number: int, length: int, limit: int, truncation_hint: str):
        super().__init__(f"input {number} is {length} tokens long, more than the {limit} this model takes; "
                         f"{truncation_hint}")  # fmt: skip
        self.number, self.length, self.limit = number, length, limit


def check_lengths(rows: list[list[int]], limit: int, truncation_hint: str) -> None:
    """Refuse, by number and length, the first row longer than the model takes (``limit``)."""
    for number, ids in enumerate(rows):
        if len(ids) > limit:
            raise TooLongError(number, len(ids), limit, truncation_hint)


def warn_if_cut(task: str, pieces: int, limit: int, what_stays: str) -> None:
    """One warning when a text of ``pieces`` pieces (with [CLS] and [SEP]) is cut to the model's
    ``limit`` positions: the task then reads less than it was given, which it must not do silently."""
    if pieces > limit:
        warnings.warn(f"{task}: the text is {pieces} pieces long (with [CLS] and [SEP]), more than the model's "
                      f"{limit} positions: {pieces - limit} pieces were cut; {what_stays}", stacklevel=3)  # fmt: skip


def lost_part(tokenizer) -> str:
    """Which part of a long text the tokenizer's cut loses: its "end", or its "start" where the
    tokenizer's ``truncation_side`` is "left" (tokenizer_config.json's), as transformers' pipelines
    cut it. What a task says of a cut names this, and positions are read from the row cut."""
    return "start" if tokenizer.truncation_side == "left" else "end"


def run_rows(model: BertWithHeads, tokenizer: BertTokenizer, rows: dict[str, list[list]], batch_size: int,
             fields: tuple[str, ...] = ("logits",),
             progress: bool | None = False) -> list[dict[str, np.ndarray]]:  # fmt: skip
    """The model on tokenized rows (``input_ids``, ``token_type_ids``), batched as the Embedder
    batches texts: longest first, ``batch_size`` × 64 padded tokens per forward pass, batches in
    parallel streams on a CPU (embedding/streams.py). Per row, each output field as float32 numpy,
    cut to the row's own length where the field has one value per token. ``progress``: a tqdm bar
    over the batches, on stderr (None: on a terminal, for more than 8 batches, as the Embedder decides).

    Rows are padded on the right whatever the tokenizer's ``padding_side``: BERT numbers the positions
    from the first token, so padding before a text would move every piece to another position, and
    the per-token fields are cut from the start of the row. A text's result is then the same in any
    batch, as the pipelines give it (they read each input alone, unpadded)."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    lengths = [len(ids) for ids in rows["input_ids"]]

    def forward(chosen: list[int]) -> tuple[list[int], dict[str, np.ndarray]]:
        batch = tokenizer.pad({key: [rows[key][row] for row in chosen] for key in ("input_ids", "token_type_ids")},
                              return_tensors="pt", padding_side="right")  # fmt: skip
        with torch.inference_mode():
            inputs = {key: value.to(model.device) for key, value in batch.items()}
            out = model(**inputs, skip_padding=True, **AS_ASKED)  # each row is cut to its own length below
        return chosen, {field: getattr(out, field).float().cpu().numpy() for field in fields}

    results: list[dict[str, np.ndarray]] = [{} for _ in lengths]
    streams = 1 if model.device.type != "cpu" else None
    batches, outputs = length_sorted_batches(lengths, forward, batch_size, model.config, streams)
    with evaluating(model), contextlib.closing(outputs):  # dropout off, the model's mode put back after
        shown = outputs
        if progress is None:  # the Embedder's rule (embedding/hidden_states.py): a long run, on a terminal
            progress = sys.stderr.isatty() and len(batches) > 8
        if progress:
            from tqdm.auto import tqdm

            shown = tqdm(outputs, total=len(batches), desc="Batches", file=sys.stderr)
        for chosen, values in shown:
            for field, value in values.items():  # (b, K), (b, T, K) or (b, T)
                per_token = value.ndim == 3 or field in ("start_logits", "end_logits")
                for position, row in enumerate(chosen):
                    results[row][field] = value[position, : lengths[row]] if per_token else value[position]
    return results
