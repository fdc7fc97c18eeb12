"""Pretrained weights: find the files, read the tensors, rename them onto minibert's modules,
check every name and shape, and load them — or explain exactly what does not fit.

Checkpoints on the hub name tensors after transformers' module tree, and come in several dialects:

* Google's own repositories (google-bert/bert-base-uncased): a ``bert.`` prefix, the legacy
  ``LayerNorm.gamma`` / ``LayerNorm.beta`` names, and the pre-training heads under ``cls.``;
  the masked-LM decoder weight is tied to the word embeddings and usually absent.
* newer exports (sentence-transformers models such as all-MiniLM-L6-v2): no prefix,
  ``weight`` / ``bias``, and an ``embeddings.position_ids`` buffer.

``RENAMES`` below is the one table from checkpoint names to minibert names; saving runs it backwards.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import torch

from .config import BertConfig
from .errors import CheckpointError
from .hub import resolve_file
from .io import atomic_output

# Checkpoint name (after dropping the "bert." prefix and gamma/beta) → minibert name. {n} = layer.
RENAMES: list[tuple[str, str]] = [
    ("embeddings.word_embeddings.", "embeddings.word_embeddings."),
    ("embeddings.position_embeddings.", "embeddings.position_embeddings."),
    ("embeddings.token_type_embeddings.", "embeddings.token_type_embeddings."),
    ("embeddings.LayerNorm.", "embeddings.layer_norm."),
    ("encoder.layer.{n}.attention.self.query.", "layers.{n}.attention.query."),
    ("encoder.layer.{n}.attention.self.key.", "layers.{n}.attention.key."),
    ("encoder.layer.{n}.attention.self.value.", "layers.{n}.attention.value."),
    ("encoder.layer.{n}.attention.output.dense.", "layers.{n}.attention.output."),
    ("encoder.layer.{n}.attention.output.LayerNorm.", "layers.{n}.attention_norm."),
    ("encoder.layer.{n}.intermediate.dense.", "layers.{n}.feed_forward.intermediate."),
    ("encoder.layer.{n}.output.dense.", "layers.{n}.feed_forward.output."),
    ("encoder.layer.{n}.output.LayerNorm.", "layers.{n}.output_norm."),
    ("pooler.dense.", "pooler.dense."),
    # pre-training heads (BertForPreTraining); BertModel ignores them
    ("cls.predictions.transform.dense.", "mlm_head.transform."),
    ("cls.predictions.transform.LayerNorm.", "mlm_head.layer_norm."),
    ("cls.predictions.bias", "mlm_head.bias"),
    ("cls.seq_relationship.", "nsp_head."),
]

# Tensors that checkpoints carry but minibert does not need: buffers it recomputes, and the
# masked-LM decoder, whose weight is the word embedding matrix and whose bias is cls.predictions.bias.
IGNORED = re.compile(
    r"^(embeddings\.position_ids|embeddings\.token_type_ids|cls\.predictions\.decoder\.(weight|bias))$"
)
HEAD_PREFIXES = ("mlm_head.", "nsp_head.")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def _compile(pattern: str) -> str:
    return "^" + re.escape(pattern).replace(r"\{n\}", r"(?P<n>\d+)")


_FORWARD = [(re.compile(_compile(source)), target) for source, target in RENAMES]
_BACKWARD = [(re.compile(_compile(target)), source) for source, target in RENAMES]


def _apply(table, name: str) -> str | None:
    for pattern, replacement in table:
        match = pattern.match(name)
        if match:
            head = replacement.replace("{n}", match.group("n")) if "n" in match.groupdict() else replacement
            return head + name[match.end() :]
    return None


def checkpoint_to_minibert(name: str) -> str | None:
    """``bert.encoder.layer.3.attention.output.LayerNorm.gamma`` → ``layers.3.attention_norm.weight``
    (None for a name the table does not know)."""
    if name.startswith("bert."):
        name = name[len("bert.") :]
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
    name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
    return _apply(_FORWARD, name)


def minibert_to_checkpoint(name: str) -> str:
    """The inverse: ``layers.3.attention_norm.weight`` → ``encoder.layer.3.attention.output.LayerNorm.weight``."""
    renamed = _apply(_BACKWARD, name)
    if renamed is None:
        raise KeyError(f"no checkpoint name for {name}")
    return renamed


# ----------------------------------------------------------------------------- reading


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """All tensors of a model.safetensors or pytorch_model.bin file (the .bin with weights_only=True:
    no code from the file is run). A broken file is a ``CheckpointError`` naming it."""
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        state = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
    except FileNotFoundError:
        raise CheckpointError(f"weights file not found: {path}") from None
    except Exception as error:  # noqa: BLE001 — any parse failure means a corrupt file
        raise CheckpointError(
            f"cannot read weights file {path} ({type(error).__name__}: {str(error).splitlines()[0][:200]}); "
            "it is truncated or corrupt — delete it and download it again"
        ) from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"weights file {path} does not hold a dictionary of tensors")
    return state


def tensor_names(path: str | os.PathLike) -> list[str]:
    """The tensor names in a weights file, without reading the tensors (safetensors: the header)."""
    path = Path(path)
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="pt") as handle:
                return list(handle.keys())
        except Exception as error:  # noqa: BLE001
            raise CheckpointError(f"cannot read weights file {path}: {error}") from None
    return list(read_state_dict(path))


def find_checkpoint(name_or_path, revision: str | None = None) -> tuple[Path, Path]:
    """(config.json, weights file) of a directory or hub repo; safetensors preferred over .bin."""
    config_file = resolve_file(name_or_path, "config.json", revision=revision)
    for filename in WEIGHT_FILES:
        weights_file = resolve_file(name_or_path, filename, revision=revision, required=False)
        if weights_file is not None:
            return config_file, weights_file
    raise CheckpointError(
        f"{os.fspath(name_or_path)} has config.json but no weights: expected one of {', '.join(WEIGHT_FILES)}"
    )


def _parse_dtype(dtype) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    names = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}  # fmt: skip
    if dtype not in names:
        raise ValueError(f"dtype must be one of {sorted(names)} or a torch.dtype, got {dtype!r}")
    return names[dtype]


# ----------------------------------------------------------------------------- loading


def load_pretrained(cls, name_or_path, *, revision=None, dtype=None, device=None):
    """Build ``cls`` (BertModel or BertForPreTraining) from a checkpoint; see ``BertModel.from_pretrained``."""
    dtype = _parse_dtype(dtype) or torch.float32
    config_file, weights_file = find_checkpoint(name_or_path, revision)
    config = BertConfig.from_json_file(config_file)
    with torch.device("meta"):  # no memory for the random init: the checkpoint's tensors are used as they are
        model = cls(config)
    state = read_state_dict(weights_file)
    state = _rename_and_check(model, state, weights_file, config_file)
    for name, tensor in state.items():
        if tensor.is_floating_point() and tensor.dtype != dtype:
            state[name] = tensor.to(dtype)
    model.load_state_dict(state, strict=True, assign=True)
    model.eval()
    model.name_or_path = os.fspath(name_or_path)  # where it came from (tasks.py loads the tokenizer there)
    if device is not None:
        model.to(device)
    return model


def _rename_and_check(model, state: dict, weights_file: Path, config_file: Path) -> dict:
    """Rename ``state`` to ``model``'s names; raise one error listing every missing, unexpected and
    mis-shaped tensor."""
    if any("/" in name for name in state):
        raise CheckpointError(
            f"{weights_file} looks like a TensorFlow checkpoint (names like 'bert/encoder/...'); "
            "minibert reads PyTorch/safetensors checkpoints"
        )
    wants_heads = hasattr(model, "mlm_head")
    prefix = "bert." if wants_heads else ""
    expected = model.state_dict()
    renamed, unexpected = {}, []
    for name, tensor in state.items():
        ours = checkpoint_to_minibert(name)
        if ours is None:
            if not IGNORED.match(name.removeprefix("bert.")):
                unexpected.append(name)
            continue
        if ours.startswith(HEAD_PREFIXES):
            if wants_heads:
                renamed[ours] = tensor
            continue  # BertModel: the pre-training heads are not used
        renamed[prefix + ours] = tensor
    if wants_heads and "mlm_head.bias" not in renamed:  # exports that only keep the decoder's bias
        for name in ("cls.predictions.decoder.bias", "bert.cls.predictions.decoder.bias"):
            if name in state:
                renamed["mlm_head.bias"] = state[name]
    missing = sorted(set(expected) - set(renamed))
    misshaped = [
        f"{name} {tuple(renamed[name].shape)} (expected {tuple(expected[name].shape)})"
        for name in sorted(set(expected) & set(renamed))
        if renamed[name].shape != expected[name].shape
    ]
    if wants_heads and missing and all(name.startswith(HEAD_PREFIXES) for name in missing) and not misshaped:
        raise CheckpointError(
            f"{weights_file} has no pre-training heads (no cls.* tensors): it holds a BertModel only. "
            "fill-mask and next-sentence need a checkpoint with them, such as google-bert/bert-base-uncased"
        )
    if missing or misshaped:
        lines = [f"{weights_file} does not fit the model described by {config_file}:"]
        if missing:
            lines.append(f"  missing tensors ({len(missing)}): {', '.join(_checkpoint_names(missing, prefix))}")
        if misshaped:
            lines.append(f"  tensors with the wrong shape ({len(misshaped)}): {', '.join(misshaped)}")
        if unexpected:
            lines.append(f"  unexpected tensors ({len(unexpected)}): {', '.join(sorted(unexpected)[:20])}")
        if misshaped:
            lines.append("  (a shape that disagrees usually means config.json belongs to another model)")
        raise CheckpointError("\n".join(lines))
    if unexpected:
        warnings.warn(
            f"{weights_file}: ignoring {len(unexpected)} tensors minibert does not use: "
            f"{', '.join(sorted(unexpected)[:10])}",
            stacklevel=3,
        )
    return {name: renamed[name] for name in expected}


def _checkpoint_names(names: list[str], prefix: str) -> list[str]:
    """Name missing tensors as they would appear in the checkpoint, which is what users can look for."""
    return [minibert_to_checkpoint(name.removeprefix(prefix)) for name in names]


# ----------------------------------------------------------------------------- saving


def save_pretrained(model, directory: str | os.PathLike) -> None:
    """Write config.json and model.safetensors with the hub's tensor names, atomically.

    BertModel is saved like newer exports (no prefix); BertForPreTraining like Google's
    checkpoints (``bert.`` prefix and ``cls.*`` heads, the tied decoder weight left out).
    Both minibert and transformers load the result.
    """
    from safetensors.torch import save

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with_heads = hasattr(model, "mlm_head")
    tensors = {}
    for name, tensor in model.state_dict().items():
        body = name.removeprefix("bert.") if with_heads else name
        hub_name = minibert_to_checkpoint(body)
        if with_heads and not hub_name.startswith("cls."):
            hub_name = "bert." + hub_name
        tensors[hub_name] = tensor.detach().to("cpu").contiguous()
    data = save(tensors, metadata={"format": "pt"})
    with atomic_output(directory / "model.safetensors") as handle:
        handle.write(data)
    config = model.config
    architecture = "BertForPreTraining" if with_heads else "BertModel"
    config.extra = {**config.extra, "architectures": [architecture]}
    config.to_json_file(directory / "config.json")
