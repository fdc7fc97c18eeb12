"""The strict loader: a checkpoint's tensors renamed onto a model, and every problem listed at once.

Loading is strict, as nanoGPT's ``from_pretrained`` asserts every key and shape: each tensor of the
checkpoint is renamed by the table (names.py) and must meet a tensor of the model with the same
shape. What does not fit is not reported one tensor at a time; ``rename_and_check`` raises one
``CheckpointError`` that lists, by kind, every tensor config.json has no place for, every missing
one (under the checkpoint's own names, which users can look for), every mis-shaped one and every
unexpected one::

    bert-tiny/model.safetensors does not fit the model described by bert-tiny/config.json:
      tensors with the wrong shape (1): bert.embeddings.word_embeddings.weight (30522, 128) (expected (30000, 128))
      (a shape that disagrees usually means config.json belongs to another model)

Heads are the exception that is explained rather than listed: a class whose head the checkpoint
lacks is told which heads the file has and which class loads it, or (``new_heads=True``, or labels
given to a classifier: ``num_labels=2``) gets the missing tensors fresh, as Google initialises them,
to fine-tune. Tensors of heads the class does not
have are left out, named in one log line.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import torch

from ..errors import CheckpointError, MissingHeadsError
from .architectures import saved_class
from .names import (
    GOOGLE_HEADS,
    HEAD_PREFIXES,
    HEADS,
    IGNORED_TENSORS,
    POOLER,
    POOLER_NAME,
    TASK_HEADS,
    checkpoint_to_minibert,
    minibert_to_checkpoint,
    minibert_to_tf,
)

logger = logging.getLogger("minibert")
# The dtypes a weight is read from. A float8 weight is a quantized model's, meant to be multiplied by a
# scale stored beside it (config.json's quantization_config), which minibert does not apply: refused by
# name with the integer and boolean dtypes, never cast as it is.
WEIGHT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
WEIGHT_DTYPE_NAMES = ", ".join(str(dtype).removeprefix("torch.") for dtype in WEIGHT_DTYPES)  # for messages


def rename_and_check(model, state: dict, weights_file: Path, config_file: Path, warn: bool = True,
                     new_heads: bool = False, config_given: bool = False) -> dict:  # fmt: skip
    """Rename ``state`` to ``model``'s names; raise one error listing every missing, unexpected and
    mis-shaped tensor. Tensors of heads the model does not have are left out (named in one log line,
    as transformers warns, unless the model is the bare encoder: every checkpoint with heads has them).
    ``config_given``: the model was built from ``from_pretrained(config=...)``, in place of
    ``config_file``, and the error names that config."""
    prefix = "bert." if hasattr(model, "bert") else ""  # a model with heads holds the encoder as .bert
    expected = model.state_dict()
    renamed, unexpected, unused_heads, stored_as, twice = _renamed(state, expected, prefix)
    if "mlm_head.bias" in expected:
        _refuse_an_untied_decoder(state, weights_file)
    if "mlm_head.bias" in expected and "mlm_head.bias" not in renamed:  # exports that keep only the decoder's bias
        for name in ("cls.predictions.decoder.bias", "bert.cls.predictions.decoder.bias"):
            if name in state:
                renamed["mlm_head.bias"], stored_as["mlm_head.bias"] = state[name], name
    missing = sorted(set(expected) - set(renamed))
    undescribed = sorted(set(renamed) - set(expected))  # BERT tensors the config has no place for (a 7th layer...)
    misshaped_names = [name for name in sorted(set(expected) & set(renamed))
                       if renamed[name].shape != expected[name].shape]  # fmt: skip
    misshaped = [  # (under the checkpoint's own names, which users can look for, as the other lists)
        f"{stored_as[name]} {tuple(renamed[name].shape)} (expected {tuple(expected[name].shape)})"
        for name in misshaped_names
    ]
    wrong_dtype = [  # an integer, boolean or float8 tensor where the model has a weight: refused, not converted
        f"{stored_as[name]} of dtype {str(renamed[name].dtype).removeprefix('torch.')}"
        for name in sorted(set(expected) & set(renamed))
        if expected[name].is_floating_point() and renamed[name].dtype not in WEIGHT_DTYPES
    ]
    if missing and all(name.startswith((*HEAD_PREFIXES, prefix + POOLER)) for name in missing) and not misshaped \
            and not wrong_dtype and not twice and not _partly_held(missing, renamed, prefix):  # fmt: skip
        if not new_heads:
            only_the_pooler = all(name.startswith(prefix + POOLER) for name in missing)
            found = _missing_heads(model, missing, renamed, unused_heads, weights_file, _classifier_rows(state))
            raise MissingHeadsError(found, _heads_advice(only_the_pooler and not prefix), only_the_pooler)
        if warn:
            logger.warning("%s: %s starts %d tensors from fresh weights (fine-tune them before use): %s",
                           weights_file, type(model).__name__, len(missing), _first(missing, 6))  # fmt: skip
        for name in missing:
            renamed[name] = _fresh(name, tuple(expected[name].shape), model.config.initializer_range)
        missing = []
    if missing or misshaped or wrong_dtype or undescribed or twice:
        problems = {"undescribed": undescribed, "missing": missing, "misshaped": misshaped, "wrong_dtype": wrong_dtype,
                    "unexpected": unexpected, "twice": twice}  # fmt: skip
        note = _shape_note(model, misshaped_names, config_given) if misshaped else ""
        described_by = f"the config given (config=, in place of {config_file})" if config_given else config_file
        raise CheckpointError(_does_not_fit(weights_file, described_by, prefix, note, **problems))
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


def _partly_held(missing: list[str], renamed: dict, prefix: str) -> list[str]:
    """The heads (and the pooler) the checkpoint holds some tensors of but not all: not a head it lacks
    ("no tensors for the pooler"), so their missing tensors are listed by name."""
    return [head for head in (*HEAD_PREFIXES, prefix + POOLER) if any(name.startswith(head) for name in missing)
            and any(name.startswith(head) for name in renamed)]  # fmt: skip


# The masked-LM decoder as checkpoints may store it, beside what BERT ties it to.
_DECODER_TIES = (("cls.predictions.decoder.weight", "embeddings.word_embeddings.weight"),
                 ("cls.predictions.decoder.bias", "cls.predictions.bias"))  # fmt: skip


def _refuse_an_untied_decoder(state: dict, weights_file: Path) -> None:
    """BERT's masked-LM decoder is the word embedding matrix (and its bias cls.predictions.bias):
    minibert computes it so, and ignores a stored copy. A stored decoder that differs from what it
    is tied to is another model (transformers then unties the two and uses the copy): refused."""
    names = {name.removeprefix("bert."): tensor for name, tensor in state.items()}
    for decoder, tied_to in _DECODER_TIES:
        stored, tied = names.get(decoder), names.get(tied_to)
        if stored is None or tied is None or stored.is_meta or tied.is_meta or stored.shape != tied.shape:
            continue  # nothing to compare (a shape that differs is reported with the others)
        if not torch.equal(stored, tied):
            difference = (stored.float() - tied.float()).abs().max().item()
            raise CheckpointError(
                f"{weights_file}: {decoder} differs from {tied_to} (max |Δ| {difference:.3g}): this checkpoint's "
                "masked-LM decoder is untied from BERT's, which minibert does not compute (its decoder is "
                f"{tied_to}, as in BERT; transformers would use the stored {decoder})"
            )


def rename_in_place(model, state: dict, prefix: str = "") -> None:
    """``model.load_state_dict(state)`` given transformers' or Google's names (a transformers model's
    ``state_dict()``, a hub ``pytorch_model.bin`` through ``torch.load``): the tensors under ``prefix`` renamed
    in ``state`` (torch's own copy of the caller's dict) by the rename table, as ``from_pretrained`` renames
    them; TensorFlow kernels transposed; the buffers and the tied decoder minibert does not hold left out
    (a decoder untied from the word embeddings refused, as there). minibert's own names, and names the table
    does not know, stay as they are: torch then reports what does not fit, as for any module."""
    own = {name for name, _ in model.named_parameters()} | {name for name, _ in model.named_buffers()}
    encoder = "bert." if hasattr(model, "bert") else ""  # a model with heads holds the encoder as .bert
    theirs = {key[len(prefix):]: key for key in state if key.startswith(prefix) and key[len(prefix):] not in own}
    # minibert's own names with the encoder's "bert." added or taken away (a head model's dict given to
    # BertModel, or the reverse): not transformers', though a few (bert.embeddings.word_embeddings.weight)
    # read as both; renaming those alone would load them and not the layers
    if not theirs or any(checkpoint_to_minibert(name) is None and (name.removeprefix("bert.") in own
                                                                   or "bert." + name in own) for name in theirs):
        return
    _refuse_an_untied_decoder({key[len(prefix):]: value for key, value in state.items() if key.startswith(prefix)},
                              "the state dict given")  # fmt: skip
    for name, key in theirs.items():
        ours = checkpoint_to_minibert(name)
        if ours is None:
            if IGNORED_TENSORS.match(name.removeprefix("bert.")):
                del state[key]
            continue
        target = prefix + _placed(ours, encoder)
        if target[len(prefix):] in own and target not in state:
            state[target] = _as_linear(name, state.pop(key))


def _renamed(state: dict, expected: dict, prefix: str) -> tuple[dict, list[str], list[str], dict[str, str], list[str]]:
    """(``state`` under minibert's names, TensorFlow kernels transposed; the names the rename table
    does not know and minibert does not ignore; the tensors of heads this model does not have; each
    renamed tensor's name in the checkpoint; the weights stored twice with different values).

    Two stored names can give one weight (``LayerNorm.gamma`` beside ``LayerNorm.weight``, ``bert.X``
    beside ``X``, in one file or two shards): equal copies are one weight; different ones are refused
    (``_stored_twice``), as transformers would keep one of them without a word."""
    renamed, unexpected, unused_heads, stored_as, twice = {}, [], [], {}, []
    for name, tensor in state.items():
        ours = checkpoint_to_minibert(name)
        if ours is None:
            if not IGNORED_TENSORS.match(name.removeprefix("bert.")):
                unexpected.append(name)
            continue
        target = _placed(ours, prefix)
        if target not in expected and ours.startswith((*HEAD_PREFIXES, POOLER)):
            unused_heads.append(name)  # a head (or the pooler) this class does not have
            continue
        tensor = _as_linear(name, tensor)
        if target in renamed:
            clash = _stored_twice(stored_as[target], renamed[target], name, tensor, target)
            if clash:
                twice.append(clash)
            continue
        renamed[target], stored_as[target] = tensor, name
    return renamed, unexpected, unused_heads, stored_as, twice


def _stored_twice(first_name: str, first: torch.Tensor, name: str, tensor: torch.Tensor, target: str) -> str | None:
    """Why two stored tensors cannot both be minibert's ``target`` (None: they are one weight, or
    a header's shapes alone cannot tell, which reading the data then does)."""
    if first.shape != tensor.shape:
        return f"{first_name} {tuple(first.shape)} and {name} {tuple(tensor.shape)} both give {target}"
    if first.is_meta or tensor.is_meta:
        return None
    if torch.equal(first, tensor) if first.dtype == tensor.dtype else torch.equal(first.double(), tensor.double()):
        return None
    difference = (first.double() - tensor.double()).abs().max().item()
    return f"{first_name} and {name} both give {target}, with different values (max |Δ| {difference:.3g})"


def _placed(ours: str, encoder: str) -> str:
    """Where minibert's name ``ours`` sits in a model whose encoder is under ``encoder`` ("bert." in a
    model with heads, "" in the bare encoder): the heads sit beside the encoder, not in it."""
    return ours if ours.startswith(HEAD_PREFIXES) else encoder + ours


def _as_linear(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """A TensorFlow kernel, stored (in, out), as Linear's weight (out, in); any other tensor as it is.
    The transpose is a view: the loader lays it out afresh, or packs it (from_pretrained.py)."""
    return tensor.t() if name.endswith("/kernel") and tensor.dim() == 2 else tensor


def _heads_advice(encoder_without_pooler: bool) -> str:
    """What to do about missing heads: start them fresh; for the bare encoder saved without its pooler,
    load it without one."""
    if encoder_without_pooler:
        return ("(pass add_pooling_layer=False to load it without one, as transformers' "
                "BertModel(config, add_pooling_layer=False) saved it, or new_heads=True to start it "
                "from fresh weights)")  # fmt: skip
    return "(or pass new_heads=True to start them from fresh weights, to fine-tune)"


def _does_not_fit(weights_file, config_file, prefix: str, note: str, *, undescribed, missing, misshaped, wrong_dtype,
                  unexpected, twice) -> str:  # fmt: skip
    """The one message that lists every tensor that does not fit, by kind; ``note``: what a wrong shape means."""
    lines = [f"{weights_file} does not fit the model described by {config_file}:"]
    if twice:
        lines.append(f"  weights stored twice, under two names ({len(twice)}): {'; '.join(twice[:4])}"
                     f"{f'; … and {len(twice) - 4} more' if len(twice) > 4 else ''} (the file does not "
                     "say which copy is the model's; transformers would keep one of them without a word)")  # fmt: skip
    if undescribed:
        lines.append(f"  tensors config.json has no place for ({len(undescribed)}): "
                     f"{_first(_checkpoint_names(undescribed, prefix, Path(weights_file)))}")  # fmt: skip
    if missing:
        names = _checkpoint_names(missing, prefix, Path(weights_file))
        lines.append(f"  missing tensors ({len(missing)}): {_first(names)}")
    if misshaped:
        lines.append(f"  tensors with the wrong shape ({len(misshaped)}): {_first(misshaped)}")
    if wrong_dtype:
        lines.append(f"  tensors of a dtype minibert does not compute from ({len(wrong_dtype)}): {_first(wrong_dtype)} "
                     f"(it reads a weight from {WEIGHT_DTYPE_NAMES})")
    if unexpected:
        lines.append(f"  unexpected tensors ({len(unexpected)}): {_first(sorted(unexpected))}")
    if note:
        lines.append(f"  ({note})")
    return "\n".join(lines)


def _shape_note(model, misshaped: list[str], config_given: bool = False) -> str:
    """What tensors of the wrong shape (minibert's names) mean: the heads alone, of a checkpoint whose
    config.json names another class, are that class's (a 2-label classifier is not BertForMultipleChoice's
    one score); otherwise config.json usually belongs to another model, or the config given (``config=``)
    describes another checkpoint's heads."""
    if config_given:
        return ("the config given describes other tensors than this checkpoint's: read it from this checkpoint, "
                "AutoConfig.from_pretrained(path), with the fields that keep its shapes changed")  # fmt: skip
    saved_as = _saved_as(model)
    classes = {name for names in _CLASS_FOR_HEADS.values() for name in names}
    if all(name.startswith(HEAD_PREFIXES) for name in misshaped) and saved_as in classes - {type(model).__name__}:
        return f"config.json says this is a {saved_as}: load it with that class"
    return "a shape that disagrees usually means config.json belongs to another model"


def _fresh(name: str, shape: tuple[int, ...], std: float) -> torch.Tensor:
    """A new head tensor as Google's code initialises one (modeling.py's ``create_initializer``,
    run_classifier.py's ``output_weights``): LayerNorm scales 1, biases 0, weights from a normal
    of standard deviation ``std`` (0.02) truncated at two deviations."""
    if name.endswith("layer_norm.weight"):
        return torch.ones(shape)
    if name.endswith("bias"):
        return torch.zeros(shape)
    return google_normal_(torch.empty(shape), std)


def google_normal_(tensor: torch.Tensor, std: float) -> torch.Tensor:
    """``tensor`` filled as Google's ``tf.truncated_normal_initializer(stddev=std)``: a normal of
    deviation ``std``, values beyond two deviations drawn again."""
    return torch.nn.init.trunc_normal_(tensor, std=std, a=-2 * std, b=2 * std)


# Which classes load a checkpoint, by the heads it has.
_CLASS_FOR_HEADS = {
    frozenset(): ("BertModel",),
    frozenset({"mlm_head.", "nsp_head."}): ("BertForPreTraining",),
    frozenset({"mlm_head."}): ("BertForMaskedLM",),
    frozenset({"nsp_head."}): ("BertForNextSentencePrediction",),
    frozenset({"classifier."}): ("BertForSequenceClassification", "BertForTokenClassification",
                                 "BertForMultipleChoice"),
    frozenset({"qa_outputs."}): ("BertForQuestionAnswering",),
}  # fmt: skip


# The classes whose head reads the pooler output: never the advice for a checkpoint without a pooler.
_READ_THE_POOLER = {"BertForPreTraining", "BertForNextSentencePrediction", "BertForSequenceClassification",
                    "BertForMultipleChoice"}  # fmt: skip


def _saved_as(model) -> str | None:
    """The class config.json's ``architectures`` names (transformers writes the class it saved), or None."""
    return saved_class(model.config.extra.get("architectures"))


def _classifier_rows(state: dict) -> int | None:
    """The number of outputs of the checkpoint's classifier (its weight's rows), None without one."""
    return next((tensor.shape[0] for name, tensor in state.items()
                 if checkpoint_to_minibert(name) == "classifier.weight" and tensor.dim() == 2), None)  # fmt: skip


def _missing_heads(model, missing: list[str], renamed: dict, unused_heads: list[str], weights_file: Path,
                   classifier_rows: int | None) -> str:  # fmt: skip
    """What is true when only head tensors are missing: which heads the class needs, which the
    checkpoint has, and the classes that load it: BertForMultipleChoice only for a classifier of one
    output (a score per choice); config.json's ``architectures`` first."""

    def heads_of(names) -> set[str]:
        return {head for name in names for head in HEAD_PREFIXES if name.startswith(head)}

    present = heads_of(renamed) | heads_of(checkpoint_to_minibert(name) for name in unused_heads)
    names = GOOGLE_HEADS if weights_file.suffix == ".index" else HEADS  # as the checkpoint names them
    needed = [names[head] for head in HEAD_PREFIXES if head in heads_of(missing)]
    if any(name.removeprefix("bert.").startswith(POOLER) for name in missing):
        needed.insert(0, POOLER_NAME if names is HEADS else "the pooler (bert/pooler/*)")
    has = " and ".join(names[head] for head in HEAD_PREFIXES if head in present)
    has = has or "no heads: it holds the encoder only"
    fits = _CLASS_FOR_HEADS.get(frozenset(present), ())
    if present == {"classifier."} and weights_file.suffix == ".index":
        fits = ("BertForSequenceClassification",)  # run_classifier.py classifies sequences
    no_pooler = not any(name.removeprefix("bert.").startswith(POOLER) for name in renamed) and not any(
        (checkpoint_to_minibert(name) or "").startswith(POOLER) for name in unused_heads)  # the checkpoint has none
    candidates = [name for name in fits
                  if name != type(model).__name__ and not (no_pooler and name in _READ_THE_POOLER)
                  and not (name == "BertForMultipleChoice" and classifier_rows not in (1, None))]  # fmt: skip
    saved_as = _saved_as(model)
    candidates.sort(key=lambda name: name != saved_as)  # (stable: the others keep their order)
    listed = ", ".join(candidates[:-1]) + " or " + candidates[-1] if len(candidates) > 1 else "".join(candidates)
    advice = f"; load it with {listed}" if candidates else ""
    return (f"{weights_file} has no tensors for {' or '.join(needed)}, which {type(model).__name__} needs; "
            f"it has {has}{advice}")  # fmt: skip


def _first(names: list[str], count: int = 12) -> str:
    """A list for an error message: the first ``count`` names, then how many more (a short message)."""
    return ", ".join(names[:count]) + (f", … and {len(names) - count} more" if len(names) > count else "")


def _checkpoint_names(names: list[str], prefix: str, weights_file: Path) -> list[str]:
    """Name missing tensors as they would appear in the checkpoint, which is what users can look for:
    Google's TensorFlow names in a ``.index`` (as ``tf.train.list_variables`` lists them), else the hub's."""
    rename = minibert_to_tf if weights_file.suffix == ".index" else minibert_to_checkpoint
    return [rename(name.removeprefix(prefix)) for name in names]
