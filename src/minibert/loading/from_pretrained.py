"""``from_pretrained``'s work, top-down: a checkpoint found, checked and loaded into a fresh model.

``load_pretrained(cls, name_or_path)`` is what ``BertModel.from_pretrained`` (pretrained.py) calls:

1. find the checkpoint's config and weights file (checkpoint_files.py, through hub.py);
2. read ``config.json`` into a BertConfig (or take the one given, ``config=``), with the caller's
   fields (``num_labels=``, ``hidden_dropout_prob=`` ...: config_keywords.py);
3. build ``cls`` on the meta device (shapes, no memory, no random initialisation);
4. fit a classifier to the checkpoint's head when config names no labels (head_labels.py);
5. check a safetensors header against the model before a byte of data is read, then read the
   tensors and rename and check them all (strict.py): one error lists every problem;
6. cast to the dtype asked for, assign the tensors, and add speed (speed/seam.py) as the one last step.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import warnings
from pathlib import Path

import torch

from ..config import BertConfig
from ..errors import CheckpointError, InputTypeError, QuantizationError
from ..speed.int8_check import LoadedFrom
from ..speed.seam import refuse_gemm_for_int8, speed_up
from .architectures import saved_class
from .checkpoint_files import declared_shapes, find_checkpoint, map_state_dict, stored_dtypes
from .config_fields import BUILD_FIELDS, CALL_DEFAULTS, LABEL_FIELDS
from .config_keywords import (
    check_label_keywords,
    in_place_of,
    replace_label_fields,
    take_build_fields,
    take_given_config,
)
from .devices import placement
from .file_pages import FileUnchanged
from .head_labels import LABEL_COUNT_FIELDS, labels_for_the_head
from .hub import hub_options
from .hub_commit import one_load, snapshot_commit
from .strict import WEIGHT_DTYPES, rename_and_check
from .transformers_keywords import TRANSFORMERS_KEYWORDS, check_weights_format, model_keywords

# dtype names from_pretrained takes besides torch's own ("float64", "half", ...: check_dtype);
# "int8" loads float32 weights, then quantizes them (speed/seam.py → speed/int8.py)
DTYPE_NAMES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.float32}


def check_dtype(dtype):
    """``dtype`` as asked, checked before any file is fetched (a typo is not worth a 1.3 GB download):
    None, "auto", "fastest", a name of DTYPE_NAMES, or a dtype the model computes in (``WEIGHT_DTYPES``:
    float32, float64, float16, bfloat16), as a torch.dtype or by torch's name for it ("float64",
    "half", "double", "float", as transformers takes them: the torch.dtype is returned). torch.int8 is
    "int8" (int8 layers, not int8 "floats"); any other dtype is refused, saying which are taken
    (float8's: torch has no matrix product for them, the load would fail at the first forward).

    >>> check_dtype(torch.int8), check_dtype("bf16"), check_dtype("half")
    ('int8', 'bf16', torch.float16)
    """
    if dtype in (torch.int8, torch.qint8):
        return "int8"
    if dtype is None or isinstance(dtype, str) and (dtype in ("auto", "fastest") or dtype in DTYPE_NAMES):
        return dtype
    taken = ", ".join(str(one).removeprefix("torch.") for one in WEIGHT_DTYPES)
    if isinstance(dtype, str):
        named = getattr(torch, dtype, None) if dtype.isidentifier() else None
        if named in WEIGHT_DTYPES:  # torch's name for it, as transformers reads it (getattr(torch, dtype))
            return named
        raise ValueError(f"dtype must be one of {sorted(DTYPE_NAMES)}, 'auto', 'fastest', a torch.dtype or torch's "
                         f"name for one of {taken} ('float64', 'half', ...), got {dtype!r}")  # fmt: skip
    if isinstance(dtype, torch.dtype) and not dtype.is_floating_point:
        raise ValueError(f"dtype {dtype} cannot hold a model's weights: give a floating-point dtype, or "
                         "dtype='int8' (torch.int8) for the encoder's linear layers in int8")  # fmt: skip
    if isinstance(dtype, torch.dtype) and dtype not in WEIGHT_DTYPES:
        raise ValueError(f"dtype {dtype}: torch has no matrix product in it (the model would fail at its first "
                         f"forward); give one of {taken}")  # fmt: skip
    if isinstance(dtype, torch.dtype):
        return dtype
    raise ValueError(f"dtype must be one of {sorted(DTYPE_NAMES)}, 'auto', 'fastest' or a torch.dtype, got {dtype!r}")


def _parse_dtype(dtype, config: BertConfig, config_file: Path, weights_file: Path, device=None,
                 gemm: str | None = None) -> torch.dtype | None:  # fmt: skip
    """The torch.dtype a checked ``dtype`` (``check_dtype``) stands for: "auto" the checkpoint's own
    (``saved_dtype``), "fastest" chosen for this model's size, ``device`` and GEMM library (``gemm``,
    else ``$MINIBERT_GEMM``: bf16.py), a name of DTYPE_NAMES its dtype."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        return saved_dtype(config, config_file, weights_file)
    if dtype == "fastest" and device is not None and device.type == "cuda":  # tensor cores: bf16 where the GPU has it
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    if dtype == "fastest":  # approximate numbers where bf16 is measured faster here; exact float32 elsewhere
        from ..speed.bf16 import bf16_is_faster

        faster = bf16_is_faster(config.hidden_size, config.intermediate_size, gemm=gemm)
        return torch.bfloat16 if faster else torch.float32
    return DTYPE_NAMES[dtype]


def saved_dtype(config: BertConfig, config_file: Path, weights_file: Path) -> torch.dtype:
    """transformers' ``dtype="auto"`` (``torch_dtype="auto"``): the dtype config.json names (its
    ``dtype`` field, or transformers 4's ``torch_dtype``), else that of the first floating-point
    tensor in the weights file (one of WEIGHT_DTYPES: not a float8 tensor the model does not use):
    the model computes in the type it was saved in."""
    for field in ("dtype", "torch_dtype"):
        named = config.extra.get(field)
        if named is not None:
            dtype = getattr(torch, named, None) if isinstance(named, str) else None
            if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
                raise CheckpointError(f"{config_file}: {field} {named!r} is not a floating-point torch "
                                      "dtype, so dtype='auto' cannot follow it; give one (dtype=torch.float32, say)")
            return dtype
    return next((dtype for dtype in stored_dtypes(weights_file) if dtype in WEIGHT_DTYPES), torch.float32)


class _WithoutInitialisation(torch.overrides.TorchFunctionMode):
    """Within it, the random initialisation of weights does nothing.

    A model built to receive a checkpoint's tensors is built on the meta device (shapes, no memory)
    and its weights are then replaced. Its initialisation (nn.Linear's kaiming_uniform_, the
    model's normal_ and zero_) would compute nothing there, yet cost ~2 s on a cold start: on meta
    tensors torch runs those ops' reference implementations, which import its compiler. This mode
    (a torch function mode: it affects this thread only) returns each such call's tensor untouched.
    """

    SKIPPED = frozenset(
        [getattr(torch.nn.init, name) for name in ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
                                                   "zeros_", "eye_", "xavier_uniform_", "xavier_normal_",
                                                   "kaiming_uniform_", "kaiming_normal_", "orthogonal_")]
        + [torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.zero_, torch.Tensor.fill_]
    )  # fmt: skip

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.SKIPPED:
            tensor = args[0] if args else kwargs.get("tensor", kwargs.get("self"))
            if isinstance(tensor, torch.Tensor) and tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


def load_pretrained(cls, name_or_path, *, revision=None, dtype=None, device=None, new_heads=False, label_config=None,
                    gemm=None):  # fmt: skip
    """Build ``cls`` (BertModel or a class with heads) from a checkpoint; see ``PretrainedBert.from_pretrained``.

    Loading inside ``torch.inference_mode()`` (as servers often do) still makes ordinary tensors:
    the model can later be fine-tuned, and the GEMM backend (packed_linear.py) can tell when a weight changes
    (an inference tensor keeps no version counter)."""
    with torch.inference_mode(False), one_load():  # every hub file of the load from one commit (hub_commit.py)
        return _load(cls, name_or_path, revision, dtype, device, new_heads, label_config, gemm)


def _load(cls, name_or_path, revision, dtype, device, new_heads, label_config, gemm):
    label_config = dict(label_config or {})
    dtype, device, hub = model_keywords(label_config, dtype=dtype, device=device)  # transformers' spellings
    use_safetensors = label_config.pop("use_safetensors", None)  # (checked against the file found, below)
    add_pooling_layer = _add_pooling_layer(cls, label_config)
    dtype = check_dtype(dtype)
    call_defaults = _call_defaults(label_config)
    given, build_fields = take_given_config(label_config), take_build_fields(label_config, cls)
    _refuse_unknown_keywords(label_config)  # every argument is checked before a file is fetched
    check_label_keywords(label_config)  # (the caller's: named as keywords, not blamed on config.json)
    device = placement(device, dtype)  # a GPU that is not there, or int8 on one: said before anything is read
    if dtype == "int8":
        refuse_gemm_for_int8(gemm)  # (the float32 projections' library, which int8 replaces)
    with hub_options(hub):
        config_file, weights_file = find_checkpoint(name_or_path, revision)
        check_weights_format(use_safetensors, weights_file)
        if isinstance(given, str):  # config="folder or hub id", as transformers reads it (revision included)
            given = BertConfig.from_pretrained(given, revision=revision)
    config = BertConfig.from_json_file(config_file)
    own_fields = dict(config.extra)
    if given is not None:  # transformers' from_pretrained(path, config=config): in place of config.json
        config, given_labels = in_place_of(config, given, config_file)
        label_config = {**given_labels, **label_config}
    config = dataclasses.replace(config, extra=config.extra, **build_fields) if build_fields else config
    object.__setattr__(config, "_name_or_path", os.fspath(name_or_path))  # config.name_or_path, as transformers'
    # the hub commit read (None for a folder), as transformers' config._commit_hash: a task given this model
    # alone reads its tokenizer at that commit, not at wherever main has moved to (tasks/loading.py)
    object.__setattr__(config, "_commit_hash", snapshot_commit(config_file))
    int8 = dtype == "int8"  # asked for by name only (never by "fastest"): speed/int8.py
    dtype = _parse_dtype(dtype, config, config_file, weights_file, device, gemm) or torch.float32
    replace_label_fields(config, label_config)
    config.extra.update(call_defaults)
    model = _build_on_meta(cls, config, config_file, add_pooling_layer)
    # labels given to a classifier say a new head is wanted, if the checkpoint has none (transformers' rule)
    new_heads = new_heads or hasattr(model, "classifier") and any(field in label_config for field in LABEL_COUNT_FIELDS)
    num_labels = labels_for_the_head(model, own_fields, label_config, weights_file)  # Google's run_classifier
    if num_labels is not None:
        config.extra["num_labels"] = num_labels
        model = _build_on_meta(cls, config, config_file, add_pooling_layer)
    # a kernel stored transposed (TensorFlow's) stays a view of its file where oneDNN may pack it
    keep_views = dtype == torch.float32 and (device is None or device.type == "cpu")
    state, pages = _read_weights(model, weights_file, config_file, new_heads, int8, dtype, keep_views,
                                 config_given=given is not None)  # fmt: skip
    release = _releaser(pages)
    model.load_state_dict(state, strict=True, assign=True)
    model.eval()
    model.name_or_path = os.fspath(name_or_path)  # where it came from (tasks/loading.py loads the tokenizer there)
    model.weights_from_checkpoint = True  # (init_weights() leaves them, as transformers' does)
    if device is not None:
        model.to(device)
    del state  # int8 frees the float32 projections as it swaps them: nothing else may hold them
    int8_from = LoadedFrom(config_file, weights_file, os.fspath(name_or_path), revision, hub) if int8 else None
    speed_up(model, gemm, int8_from=int8_from, release=release)  # speed enters here only
    _hand_back(model, pages, weights_file)
    return model


def _refuse_unknown_keywords(label_config: dict) -> None:
    """What is left of from_pretrained's keywords once every kind it takes was taken: a TypeError listing them."""
    unknown = sorted(set(label_config) - set(LABEL_FIELDS))
    if unknown:
        raise TypeError(f"from_pretrained() got unexpected keyword arguments {unknown}; besides its own, it takes "
                        f"config=, the config fields {', '.join((*LABEL_FIELDS, *BUILD_FIELDS, *CALL_DEFAULTS))}, "
                        f"use_cache, and transformers' keywords {', '.join(TRANSFORMERS_KEYWORDS)} "
                        "(docs/migrating.md)")  # fmt: skip


def _hand_back(model, pages: list, weights_file: Path) -> None:
    """Every mapped page given back (the forward reads what it needs: file_pages.py); after a TensorFlow
    checkpoint, the CRC32C checks' and lay-outs' freed buffers handed back too (out of the RSS)."""
    for one in pages:
        _hand_back_and_watch(model, one)
    if weights_file.suffix == ".index":
        from ..speed.malloc import hand_back_freed_memory

        hand_back_freed_memory()


def _read_weights(model, weights_file: Path, config_file: Path, new_heads: bool, int8: bool, dtype: torch.dtype,
                  keep_views: bool, config_given: bool = False):  # fmt: skip
    """The checkpoint's tensors renamed to ``model``'s names, checked, in ``dtype`` and laid out
    contiguously, with the ``MappedPages`` of each mapped file (none for torch's legacy format, read
    into memory). Each tensor's pages are given back once it is checked or copied out.

    A tensor stored in another layout (a TensorFlow kernel, (in, out); a view saved in a .bin) is
    laid out afresh: a matmul over strided memory may round differently, and the numbers must not
    depend on how a file was saved. With ``keep_views`` such a tensor stays a view of the file for
    now: speed_up packs it (a layout of its own) or lays it out afresh (packed_linear.py)."""
    declared = declared_shapes(weights_file)  # a safetensors header (or its shards'): checked before a byte is read
    if declared is not None:
        rename_and_check(model, declared, weights_file, config_file, warn=False, new_heads=new_heads,
                         config_given=config_given)  # fmt: skip
    state, pages = map_state_dict(weights_file)
    release = _releaser(pages)
    read = list(state.values())
    state = rename_and_check(model, state, weights_file, config_file, new_heads=new_heads, config_given=config_given)
    kept = {tensor.data_ptr() for tensor in state.values()}
    for tensor in read:
        if tensor.data_ptr() not in kept:
            release(tensor)  # a head this class has not (TF's checksum read its pages), or a name ignored
    refuse_or_warn_non_finite(state, weights_file, int8, release)
    for name, tensor in state.items():
        source = tensor
        if tensor.is_floating_point() and tensor.dtype != dtype:
            tensor = tensor.to(dtype)
        state[name] = tensor if keep_views else tensor.contiguous()
        if tensor.dim() <= 1 and pages and tensor is source:  # a bias, a LayerNorm, read at every forward,
            state[name] = tensor.clone()  # from its own memory: a read of the file maps its neighbours' pages too
        if state[name] is not source:
            release(source)  # the file's bytes were copied out (cast, laid out afresh): not read again
    return state, pages


def _releaser(pages: list):
    """``release(tensor)``: give the tensor's pages back to whichever mapped file holds them."""

    def release(tensor: torch.Tensor) -> None:
        for one in pages:
            one.release(tensor)

    return release


def _hand_back_and_watch(model, pages) -> None:
    """Give back every page of the mapped file, and refuse a forward pass once the file has been
    written over in place (file_pages.FileUnchanged, on each BertModel inside)."""
    pages.release_all([*model.parameters(), *model.buffers()])
    encoders = [module for module in model.modules() if hasattr(module, "embeddings") and hasattr(module, "layers")]
    check = FileUnchanged(pages, [model, *encoders])
    for module in encoders:
        module.register_forward_pre_hook(check)


def refuse_or_warn_non_finite(state: dict[str, torch.Tensor], weights_file: Path, int8: bool, release=None) -> None:
    """A weight that holds NaN or an infinity makes every output that reads it NaN or infinite. In
    float, that is what the checkpoint computes: it loads, with a warning naming the tensors. In
    int8 it would be hidden (a quantization scale from an infinite range, a NaN rounded to a
    number): refused, naming them. ``release`` gives each tensor's file pages back once it is
    checked (file_pages.py), so the check never holds the whole file."""
    bad = []
    for name, tensor in state.items():
        if tensor.is_floating_point() and not _all_finite(tensor):
            bad.append((_as_in_the_file(name), int((~torch.isfinite(tensor)).sum()), tensor.numel()))
        if release is not None:
            release(tensor)
    if not bad:
        return
    said = "; ".join(f"{name} holds {count:,} of {numel:,}" for name, count, numel in bad[:5])
    said += f" (and {len(bad) - 5} more tensors)" if len(bad) > 5 else ""
    if int8:
        raise QuantizationError(f"{weights_file}: refused for dtype='int8': NaN or infinite weights ({said}); int8 "
                                "cannot carry them, and float32 would give NaN where they are read")  # fmt: skip
    warnings.warn(f"{weights_file}: NaN or infinite weights ({said}): every output that reads them is NaN or "
                  "infinite", stacklevel=5)  # fmt: skip


def _all_finite(tensor: torch.Tensor) -> bool:
    """Whether every value is finite. A NaN or an infinity makes the sum NaN or infinite, so a finite
    sum settles it at a tenth of the elementwise check's time (a sum that overflows is checked
    elementwise: exact either way)."""
    return bool(torch.isfinite(tensor.sum())) or bool(torch.isfinite(tensor).all())


def _as_in_the_file(name: str) -> str:
    """A tensor's name as checkpoints spell it (encoder.layer.0.intermediate.dense.weight), for messages."""
    from .names import HEAD_PREFIXES, minibert_to_checkpoint

    try:
        return minibert_to_checkpoint(name if name.startswith(HEAD_PREFIXES) else name.removeprefix("bert.")) or name
    except (KeyError, ValueError):
        return name


def _call_defaults(options: dict) -> dict[str, bool]:
    """``output_hidden_states`` / ``output_attentions`` / ``return_dict`` given to ``from_pretrained``
    (taken out of ``options``): as transformers, they replace config.json's, the defaults of each call
    (``PretrainedBert.__call__`` reads them from the config), and are saved with it."""
    defaults = {}
    for name in (*CALL_DEFAULTS, "use_cache"):  # (use_cache: kept and saved; an encoder has no cache to keep)
        if name in options:
            value = options.pop(name)
            if not isinstance(value, bool):
                raise InputTypeError(f"from_pretrained(): {name} must be True or False, got {value!r}")
            defaults[name] = value
    return defaults


def _add_pooling_layer(cls, keywords: dict) -> bool | None:
    """transformers' ``BertModel.from_pretrained(..., add_pooling_layer=False)``: the encoder without
    its pooler (no ``pooler_output``; a checkpoint's pooler tensors are left out). Only BertModel
    takes it: each class with heads builds the pooler exactly when its head reads it."""
    if "add_pooling_layer" not in keywords:
        return None
    value = keywords.pop("add_pooling_layer")
    if not isinstance(value, bool):
        raise TypeError(f"add_pooling_layer must be True or False, got {value!r}")
    if "add_pooling_layer" not in inspect.signature(cls.__init__).parameters:  # BertModel's (heads.py's take none)
        raise TypeError(f"{cls.__name__}.from_pretrained() takes no add_pooling_layer: only BertModel does (a class "
                        "with heads builds the pooler exactly when its head reads it)")  # fmt: skip
    return value


def _build_on_meta(cls, config: BertConfig, config_file: Path, add_pooling_layer: bool | None = None):
    with torch.device("meta"), _WithoutInitialisation():  # no memory, no random init: the checkpoint's tensors are used
        try:
            return cls(config) if add_pooling_layer is None else cls(config, add_pooling_layer=add_pooling_layer)
        except CheckpointError as error:  # a config field this class refuses
            raise CheckpointError(f"{config_file}: {error}") from None
        except ValueError as error:  # a head config.json sizes for another class (a 3-label classifier as QA)
            saved_as = saved_class(config.extra.get("architectures"))
            if saved_as is None or saved_as == cls.__name__:
                raise
            raise CheckpointError(f"{config_file} was saved from {saved_as} (its architectures), a head {cls.__name__} "
                                  f"cannot load: {error}; load it with {saved_as}") from None  # fmt: skip
