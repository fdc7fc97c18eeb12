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

import dataclasses
import logging
import os
import re
import warnings
from pathlib import Path

import torch

from .config import BertConfig
from .errors import CheckpointError, InputTypeError
from .formats.atomic_files import atomic_output
from .formats.hub import resolve_file
from .formats.safetensors import safetensors_shapes
from .formats.weight_files import read_state_dict
from .head_labels import labels_for_the_head
from .speed import speed_up

logger = logging.getLogger("minibert")

# The rename table. Columns: the hub's name (PyTorch/safetensors checkpoints, after dropping the
# "bert." prefix and gamma/beta), Google's TensorFlow name (after dropping "bert/"), minibert's name.
# {n} = layer number. A row ending in "." is a prefix: the hub's and minibert's leaf (weight, bias)
# follows it; TensorFlow's leaves are named differently (see TF_LEAVES).
RENAMES: list[tuple[str, str, str]] = [
    ("embeddings.word_embeddings.", "embeddings/word_embeddings", "embeddings.word_embeddings."),
    ("embeddings.position_embeddings.", "embeddings/position_embeddings", "embeddings.position_embeddings."),
    ("embeddings.token_type_embeddings.", "embeddings/token_type_embeddings", "embeddings.token_type_embeddings."),
    ("embeddings.LayerNorm.", "embeddings/LayerNorm/", "embeddings.layer_norm."),
    ("encoder.layer.{n}.attention.self.query.", "encoder/layer_{n}/attention/self/query/",
     "layers.{n}.attention.query."),
    ("encoder.layer.{n}.attention.self.key.", "encoder/layer_{n}/attention/self/key/", "layers.{n}.attention.key."),
    ("encoder.layer.{n}.attention.self.value.", "encoder/layer_{n}/attention/self/value/",
     "layers.{n}.attention.value."),
    ("encoder.layer.{n}.attention.output.dense.", "encoder/layer_{n}/attention/output/dense/",
     "layers.{n}.attention.output."),
    ("encoder.layer.{n}.attention.output.LayerNorm.", "encoder/layer_{n}/attention/output/LayerNorm/",
     "layers.{n}.attention_norm."),
    ("encoder.layer.{n}.intermediate.dense.", "encoder/layer_{n}/intermediate/dense/",
     "layers.{n}.feed_forward.intermediate."),
    ("encoder.layer.{n}.output.dense.", "encoder/layer_{n}/output/dense/", "layers.{n}.feed_forward.output."),
    ("encoder.layer.{n}.output.LayerNorm.", "encoder/layer_{n}/output/LayerNorm/", "layers.{n}.output_norm."),
    ("pooler.dense.", "pooler/dense/", "pooler.dense."),
    # the heads (heads.py); BertModel ignores them. Google's run_classifier.py named its classifier
    # output_weights/output_bias at the top level, run_squad.py cls/squad/output_weights/bias.
    ("cls.predictions.transform.dense.", "cls/predictions/transform/dense/", "mlm_head.transform."),
    ("cls.predictions.transform.LayerNorm.", "cls/predictions/transform/LayerNorm/", "mlm_head.layer_norm."),
    ("cls.predictions.bias", "cls/predictions/output_bias", "mlm_head.bias"),
    ("cls.seq_relationship.", "cls/seq_relationship/output_", "nsp_head."),
    ("classifier.", "output_", "classifier."),
    ("qa_outputs.", "cls/squad/output_", "qa_outputs."),
]  # fmt: skip

# TensorFlow's leaf names → the hub's. A dense "kernel" is stored (in, out): PyTorch's Linear wants
# (out, in), so kernels are transposed; the NSP head's "output_weights" is already (2, H). An
# embedding table has no leaf ("").
TF_LEAVES = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias", "weights": "weight", "": "weight"}

# Tensors that checkpoints carry but minibert does not need: buffers it recomputes, and the
# masked-LM decoder, whose weight is the word embedding matrix and whose bias is cls.predictions.bias.
IGNORED_TENSORS = re.compile(
    r"^(embeddings\.position_ids|embeddings\.token_type_ids|cls\.predictions\.decoder\.(weight|bias))$"
)
# Each head's minibert prefix, and how a message names it (with the hub's names).
HEADS = {
    "mlm_head.": "the masked-LM head (cls.predictions.*)",
    "nsp_head.": "the next-sentence head (cls.seq_relationship.*)",
    "classifier.": "a classifier (classifier.*)",
    "qa_outputs.": "a question-answering head (qa_outputs.*)",
}
HEAD_PREFIXES = tuple(HEADS)
# The same heads as Google's TensorFlow checkpoints name them (run_pretraining.py, run_classifier.py, run_squad.py).
GOOGLE_HEADS = {
    "mlm_head.": "the masked-LM head (cls/predictions/*)",
    "nsp_head.": "the next-sentence head (cls/seq_relationship/*)",
    "classifier.": "run_classifier.py's classifier (output_weights, output_bias)",
    "qa_outputs.": "run_squad.py's question-answering head (cls/squad/output_*)",
}
TASK_HEADS = ("classifier.", "qa_outputs.")  # the fine-tuned ones: BertModel says it leaves them out
# The pooler is the encoder's, but classes without a use for it (BertForMaskedLM, token
# classification, QA) are built without it, as in transformers: it is loaded and reported like a head.
POOLER, POOLER_NAME = "pooler.", "the pooler (bert.pooler.*)"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def _compile(pattern: str) -> re.Pattern:
    return re.compile("^" + re.escape(pattern).replace(r"\{n\}", r"(?P<n>\d+)"))


_FORWARD = [(_compile(hub), ours) for hub, _, ours in RENAMES]
_BACKWARD = [(_compile(ours), hub) for hub, _, ours in RENAMES]
_FROM_TF = [(_compile(tf), ours) for _, tf, ours in RENAMES]


def _first_rename(table, name: str) -> tuple[str, str] | None:
    """(renamed head, the rest of the name) by the first row of ``table`` that matches."""
    for pattern, replacement in table:
        match = pattern.match(name)
        if match:
            head = replacement.replace("{n}", match.group("n")) if "n" in match.groupdict() else replacement
            return head, name[match.end() :]
    return None


def checkpoint_to_minibert(name: str) -> str | None:
    """A checkpoint's tensor name → minibert's (None for a name the table does not know):
    ``bert.encoder.layer.3.attention.output.LayerNorm.gamma`` → ``layers.3.attention_norm.weight``, and
    Google's TensorFlow ``bert/encoder/layer_3/attention/output/LayerNorm/gamma`` → the same."""
    if "/" in name or name in ("output_weights", "output_bias"):  # Google's TF names (run_classifier's top level)
        renamed = _first_rename(_FROM_TF, name.removeprefix("bert/"))
        if renamed is None:
            return None
        head, leaf = renamed
        if not head.endswith("."):
            return head if leaf == "" else None
        leaf = leaf.removeprefix("/")
        return head + TF_LEAVES[leaf] if leaf in TF_LEAVES else None
    name = name.removeprefix("bert.")
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
    name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
    renamed = _first_rename(_FORWARD, name)
    return None if renamed is None else renamed[0] + renamed[1]


def minibert_to_checkpoint(name: str) -> str:
    """The inverse, to the hub's names: ``layers.3.attention_norm.weight`` →
    ``encoder.layer.3.attention.output.LayerNorm.weight``."""
    renamed = _first_rename(_BACKWARD, name)
    if renamed is None:
        raise KeyError(f"no checkpoint name for {name}")
    return renamed[0] + renamed[1]


def find_checkpoint(name_or_path, revision: str | None = None) -> tuple[Path, Path]:
    """(config file, weights file) of a directory or hub repo: model.safetensors preferred over
    pytorch_model.bin; in a directory unpacked from Google's zip, ``bert_config.json`` and the
    TensorFlow checkpoint's ``.index`` file."""
    google = _google_layout(name_or_path)
    if google is not None:
        return google
    config_file = resolve_file(name_or_path, "config.json", revision=revision)
    for filename in WEIGHT_FILES:
        weights_file = resolve_file(name_or_path, filename, revision=revision, required=False)
        if weights_file is not None:
            return config_file, weights_file
    raise CheckpointError(
        f"{os.fspath(name_or_path)} has config.json but no weights: expected one of {', '.join(WEIGHT_FILES)}"
    )


def _google_layout(name_or_path) -> tuple[Path, Path] | None:
    """A local directory as Google's zips unpack (bert_config.json, bert_model.ckpt.index,
    bert_model.ckpt.data-00000-of-00001, vocab.txt): (bert_config.json, the .index file)."""
    directory = Path(os.fspath(name_or_path))
    if not directory.is_dir() or any((directory / name).is_file() for name in WEIGHT_FILES):
        return None
    from .formats.tf_checkpoint import checkpoint_prefix

    prefix = checkpoint_prefix(directory)
    if prefix is None:
        return None
    for config_name in ("config.json", "bert_config.json"):
        if (directory / config_name).is_file():
            return directory / config_name, Path(os.fspath(prefix) + ".index")
    raise CheckpointError(
        f"{directory} holds the TensorFlow checkpoint {prefix.name} but no bert_config.json (or config.json) "
        "describing its shape"
    )


def _parse_dtype(dtype, config: BertConfig) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":  # approximate numbers where bf16 is measured faster here; exact float32 elsewhere
        from .bf16_speed import bf16_is_faster

        return torch.bfloat16 if bf16_is_faster(config.hidden_size, config.intermediate_size) else torch.float32
    # "int8" loads float32 weights, then quantizes them (speed.py → int8.py)
    names = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16, "int8": torch.float32}  # fmt: skip
    if dtype not in names:
        raise ValueError(f"dtype must be one of {sorted(names)}, 'auto' or a torch.dtype, got {dtype!r}")
    return names[dtype]


# ----------------------------------------------------------------------------- loading


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


LABEL_FIELDS = ("num_labels", "id2label", "label2id", "problem_type", "classifier_dropout")


def load_pretrained(cls, name_or_path, *, revision=None, dtype=None, device=None, new_heads=False, label_config=None,
                    gemm=None):  # fmt: skip
    """Build ``cls`` (BertModel or a class with heads) from a checkpoint; see ``PretrainedBert.from_pretrained``.

    Loading inside ``torch.inference_mode()`` (as servers often do) still makes ordinary tensors:
    the model can later be fine-tuned, and the GEMM backend (packed_linear.py) can tell when a weight changes
    (an inference tensor keeps no version counter)."""
    with torch.inference_mode(False):
        return _load(cls, name_or_path, revision, dtype, device, new_heads, label_config, gemm)


def _load(cls, name_or_path, revision, dtype, device, new_heads, label_config, gemm):
    config_file, weights_file = find_checkpoint(name_or_path, revision)
    config = BertConfig.from_json_file(config_file)
    dtype = "int8" if dtype in (torch.int8, torch.qint8) else dtype  # the same: int8 layers, not int8 "floats"
    if isinstance(dtype, torch.dtype) and not dtype.is_floating_point:
        raise ValueError(f"dtype {dtype} cannot hold a model's weights: give a floating-point dtype, or "
                         "dtype='int8' (torch.int8) for the encoder's linear layers in int8")  # fmt: skip
    int8 = isinstance(dtype, str) and dtype == "int8"  # asked for by name only (never by "auto"): int8.py
    dtype = _parse_dtype(dtype, config) or torch.float32
    unknown = sorted(set(label_config or {}) - set(LABEL_FIELDS))
    call_options = [name for name in unknown if name in ("output_hidden_states", "output_attentions")]
    if call_options:  # transformers takes them here too (into the config); minibert only in the call
        raise InputTypeError(f"from_pretrained() takes no {call_options[0]}: in minibert it is an argument of the "
                             f"call, model(**batch, {call_options[0]}=True)")  # fmt: skip
    if unknown:
        raise TypeError(f"from_pretrained() got unexpected keyword arguments {unknown}; the config fields it "
                        f"replaces are {', '.join(LABEL_FIELDS)}")  # fmt: skip
    own_fields = dict(config.extra)
    if label_config:
        if "num_labels" in label_config and "id2label" not in label_config:
            config.extra.pop("id2label", None)  # LABEL_0 ... LABEL_{n-1}, as transformers names them
            config.extra.pop("label2id", None)
        config.extra.update(label_config)
    model = _build_on_meta(cls, config, config_file)
    num_labels = labels_for_the_head(model, own_fields, label_config or {}, weights_file)  # Google's run_classifier
    if num_labels is not None:
        config.extra["num_labels"] = num_labels
        model = _build_on_meta(cls, config, config_file)
    if weights_file.suffix == ".safetensors":  # its header against the model first: nothing read that does not fit
        _rename_and_check(model, safetensors_shapes(weights_file), weights_file, config_file, warn=False,
                          new_heads=new_heads)  # fmt: skip
    state = read_state_dict(weights_file)
    state = _rename_and_check(model, state, weights_file, config_file, new_heads=new_heads)
    for name, tensor in state.items():
        if tensor.is_floating_point() and tensor.dtype != dtype:
            tensor = tensor.to(dtype)
        # A tensor saved as a view (e.g. a transposed weight) is laid out afresh: a matmul over
        # strided memory rounds differently, and the numbers must not depend on how a file was saved.
        state[name] = tensor.contiguous()
    model.load_state_dict(state, strict=True, assign=True)
    model.eval()
    model.name_or_path = os.fspath(name_or_path)  # where it came from (tasks/loading.py loads the tokenizer there)
    if device is not None:
        model.to(device)
    del state  # int8 frees the float32 projections as it swaps them: nothing else may hold them
    speed_up(model, gemm, int8_from=weights_file if int8 else None)  # the one place where speed is added (speed.py)
    return model


def _build_on_meta(cls, config: BertConfig, config_file: Path):
    with torch.device("meta"), _WithoutInitialisation():  # no memory, no random init: the checkpoint's tensors are used
        try:
            return cls(config)
        except CheckpointError as error:  # a config field this class refuses
            raise CheckpointError(f"{config_file}: {error}") from None


def _rename_and_check(model, state: dict, weights_file: Path, config_file: Path, warn: bool = True,
                      new_heads: bool = False) -> dict:  # fmt: skip
    """Rename ``state`` to ``model``'s names; raise one error listing every missing, unexpected and
    mis-shaped tensor. Tensors of heads the model does not have are left out (named in one log line,
    as transformers warns, unless the model is the bare encoder: every checkpoint with heads has them)."""
    prefix = "bert." if hasattr(model, "bert") else ""  # a model with heads holds the encoder as .bert
    expected = model.state_dict()
    renamed, unexpected, unused_heads = _renamed(state, expected, prefix)
    if "mlm_head.bias" in expected and "mlm_head.bias" not in renamed:  # exports that keep only the decoder's bias
        for name in ("cls.predictions.decoder.bias", "bert.cls.predictions.decoder.bias"):
            if name in state:
                renamed["mlm_head.bias"] = state[name]
    missing = sorted(set(expected) - set(renamed))
    undescribed = sorted(set(renamed) - set(expected))  # BERT tensors the config has no place for (a 7th layer...)
    misshaped = [
        f"{name} {tuple(renamed[name].shape)} (expected {tuple(expected[name].shape)})"
        for name in sorted(set(expected) & set(renamed))
        if renamed[name].shape != expected[name].shape
    ]
    misshaped += [  # an integer or boolean tensor where the model has a weight: not a number to convert
        f"{name} of dtype {str(renamed[name].dtype).removeprefix('torch.')} (expected floating point)"
        for name in sorted(set(expected) & set(renamed))
        if expected[name].is_floating_point() and not renamed[name].is_floating_point()
    ]
    if missing and all(name.startswith((*HEAD_PREFIXES, prefix + POOLER)) for name in missing) and not misshaped:
        if not new_heads:
            advice = " (or pass new_heads=True to start them from fresh weights, to fine-tune)"
            raise CheckpointError(_missing_heads(model, missing, renamed, unused_heads, weights_file) + advice)
        if warn:
            logger.warning("%s: %s starts %d tensors from fresh weights (fine-tune them before use): %s",
                           weights_file, type(model).__name__, len(missing), _first(missing, 6))  # fmt: skip
        for name in missing:
            renamed[name] = _fresh(name, tuple(expected[name].shape), model.config.initializer_range)
        missing = []
    if missing or misshaped or undescribed:
        problems = {"undescribed": undescribed, "missing": missing, "misshaped": misshaped, "unexpected": unexpected}
        raise CheckpointError(_does_not_fit(weights_file, config_file, prefix, **problems))
    task_heads = [name for name in unused_heads if checkpoint_to_minibert(name).startswith(TASK_HEADS)]
    if warn and (prefix and unused_heads or task_heads):  # the bare encoder names only fine-tuned heads it ignores
        logger.info("%s: %s has no place for %d tensors of the checkpoint's other heads (ignored): %s", weights_file,
                    type(model).__name__, len(unused_heads), _first(sorted(unused_heads), 6))  # fmt: skip
    if unexpected and warn:
        warnings.warn(
            f"{weights_file}: ignoring {len(unexpected)} tensors minibert does not use: "
            f"{', '.join(sorted(unexpected)[:10])}",
            stacklevel=3,
        )
    return {name: renamed[name] for name in expected}


def _renamed(state: dict, expected: dict, prefix: str) -> tuple[dict, list[str], list[str]]:
    """(``state`` under minibert's names, TensorFlow kernels transposed; the names the rename table
    does not know and minibert does not ignore; the tensors of heads this model does not have)."""
    renamed, unexpected, unused_heads = {}, [], []
    for name, tensor in state.items():
        ours = checkpoint_to_minibert(name)
        if ours is None:
            if not IGNORED_TENSORS.match(name.removeprefix("bert.")):
                unexpected.append(name)
            continue
        target = ours if ours.startswith(HEAD_PREFIXES) else prefix + ours  # heads sit beside .bert
        if target not in expected and ours.startswith((*HEAD_PREFIXES, POOLER)):
            unused_heads.append(name)  # a head (or the pooler) this class does not have
            continue
        if name.endswith("/kernel") and tensor.dim() == 2:  # TensorFlow's (in, out) → Linear's (out, in)
            from .formats.tf_checkpoint import transpose_in_place

            tensor = transpose_in_place(tensor)
        renamed[target] = tensor
    return renamed, unexpected, unused_heads


def _does_not_fit(weights_file, config_file, prefix: str, *, undescribed, missing, misshaped, unexpected) -> str:
    """The one message that lists every tensor that does not fit, by kind."""
    lines = [f"{weights_file} does not fit the model described by {config_file}:"]
    if undescribed:
        lines.append(f"  tensors config.json has no place for ({len(undescribed)}): "
                     f"{_first(_checkpoint_names(undescribed, prefix))}")  # fmt: skip
    if missing:
        lines.append(f"  missing tensors ({len(missing)}): {_first(_checkpoint_names(missing, prefix))}")
    if misshaped:
        lines.append(f"  tensors with the wrong shape ({len(misshaped)}): {_first(misshaped)}")
    if unexpected:
        lines.append(f"  unexpected tensors ({len(unexpected)}): {_first(sorted(unexpected))}")
    if misshaped:
        lines.append("  (a shape that disagrees usually means config.json belongs to another model)")
    return "\n".join(lines)


def _fresh(name: str, shape: tuple[int, ...], std: float) -> torch.Tensor:
    """A new head tensor as BERT initialises it: LayerNorm scales 1, biases 0, weights normal(0, std)."""
    if name.endswith("layer_norm.weight"):
        return torch.ones(shape)
    if name.endswith("bias"):
        return torch.zeros(shape)
    return torch.randn(shape) * std


# Which class to load a checkpoint with, by the heads it has.
_CLASS_FOR_HEADS = {
    frozenset(): "BertModel",
    frozenset({"mlm_head.", "nsp_head."}): "BertForPreTraining",
    frozenset({"mlm_head."}): "BertForMaskedLM",
    frozenset({"nsp_head."}): "BertForNextSentencePrediction",
    frozenset({"classifier."}): "BertForSequenceClassification, BertForTokenClassification or BertForMultipleChoice",
    frozenset({"qa_outputs."}): "BertForQuestionAnswering",
}


def _missing_heads(model, missing: list[str], renamed: dict, unused_heads: list[str], weights_file: Path) -> str:
    """What is true when only head tensors are missing: which heads the class needs, which the
    checkpoint has, and the class that loads it."""

    def heads_of(names) -> set[str]:
        return {head for name in names for head in HEAD_PREFIXES if name.startswith(head)}

    present = heads_of(renamed) | heads_of(checkpoint_to_minibert(name) for name in unused_heads)
    names = GOOGLE_HEADS if weights_file.suffix == ".index" else HEADS  # as the checkpoint names them
    needed = [names[head] for head in HEAD_PREFIXES if head in heads_of(missing)]
    if any(name.removeprefix("bert.").startswith(POOLER) for name in missing):
        needed.insert(0, POOLER_NAME if names is HEADS else "the pooler (bert/pooler/*)")
    has = " and ".join(names[head] for head in HEAD_PREFIXES if head in present)
    has = has or "no heads: it holds the encoder only"
    fits = _CLASS_FOR_HEADS.get(frozenset(present))
    if present == {"classifier."} and weights_file.suffix == ".index":
        fits = "BertForSequenceClassification"  # run_classifier.py classifies sequences
    advice = f"; load it with {fits}" if fits else ""
    return (f"{weights_file} has no tensors for {' or '.join(needed)}, which {type(model).__name__} needs; "
            f"it has {has}{advice}")  # fmt: skip


def _first(names: list[str], count: int = 12) -> str:
    """A list for an error message: the first ``count`` names, then how many more (a short message)."""
    return ", ".join(names[:count]) + (f", … and {len(names) - count} more" if len(names) > count else "")


def _checkpoint_names(names: list[str], prefix: str) -> list[str]:
    """Name missing tensors as they would appear in the checkpoint, which is what users can look for."""
    return [minibert_to_checkpoint(name.removeprefix(prefix)) for name in names]


# ----------------------------------------------------------------------------- saving


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
