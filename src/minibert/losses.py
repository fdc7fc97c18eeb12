"""The heads' losses, and the labels they are computed from checked first.

A head given ``labels`` (heads.py) computes transformers' loss for them: cross-entropy over class ids,
-100 where nothing counts (``IGNORE_INDEX``: padding, a word's later pieces, unmasked positions);
mean squared error for a regression; binary cross-entropy per label for multi-label. What torch's
loss functions would meet with an error in their own words (int32 ids, a wrong count, an id past
the classes) is checked here first and named: ``class_ids``. A sequence classifier's
``problem_type``, when config.json does not name it, is read from the labels as transformers reads
it (``classification_loss``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .errors import InputTypeError
from .inputs import as_tensor, recording_graph

IGNORE_INDEX = -100  # a label at this value (padding, sub-word pieces) adds nothing to a loss, as in transformers


def class_ids(labels, name: str, shape: tuple[int, ...], classes: int | None, meaning: str) -> torch.Tensor:
    """A head's labels (``labels``, ``next_sentence_label``, ``start_positions``, ...) as int64 ids, checked
    where they were given (a CPU's: no wait for a GPU). Integers of any dtype (int32, uint8, numpy's, a
    list) are the same ids in int64, returned in ``shape``, the head's scores' (any shape of as many is
    taken, as transformers flattens them: (B, 1) for (B,)); each in [0, classes) or -100 (no loss); ``classes``
    None: any integer (question answering's positions, clamped by the head). Anything else is refused
    before torch's loss meets it, naming ``name`` and ``meaning`` (what the head takes, in words):
    floats or booleans an ``InputTypeError``, a wrong count or value a ``ValueError``. The values are
    read where the model runs eagerly (see ``recording_graph``).

    >>> class_ids(torch.tensor([2, 0], dtype=torch.int32), "labels", (2,), 3, "one class id per text")
    tensor([2, 0])
    """
    tensor = as_tensor(labels, name)
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
        raise InputTypeError(f"{name} must be integer ids, got dtype {tensor.dtype}: {meaning}")
    if tensor.numel() != math.prod(shape):
        raise ValueError(f"{name} has shape {tuple(tensor.shape)}; for these inputs the head takes {shape}: {meaning}")
    tensor = (tensor if tensor.dtype == torch.int64 else tensor.to(torch.int64)).reshape(shape)
    if classes is not None and not recording_graph():
        outside = ((tensor < 0) & (tensor != IGNORE_INDEX)) | (tensor >= classes)  # one pass, one check
        if bool(outside.any()):
            raise ValueError(f"{name} contains {int(tensor[outside][0])}; the head takes {meaning}")
    return tensor


def skips_padding(skip_padding: bool, attention_mask, labels) -> bool:
    """A head's ``skip_padding``, unless a label at a [PAD] position counts in the loss: a skipped [PAD]
    row is zeros, and its scores would enter the loss; then the [PAD] rows are computed, as transformers
    computes them (the same loss, at the cost of the skipped work)."""
    if not skip_padding or labels is None or attention_mask is None:
        return skip_padding
    return not labels_at_padding(attention_mask, labels)


def labels_at_padding(attention_mask, labels) -> bool:
    """Whether a label at a [PAD] position (mask 0; in transformers' extended (B, 1, 1, T) mask, not 0)
    counts in the loss (is not -100). ``skip_padding`` leaves zeros at [PAD] rows: a head whose loss
    reads such a label computes them instead. Inputs that do not fit (which the head then refuses,
    naming them) count as True: every row computed. Never while torch records a graph (True)."""
    if recording_graph():
        return True
    mask, labels = as_tensor(attention_mask, "attention_mask"), as_tensor(labels, "labels")
    if mask.numel() != labels.numel():
        return True
    padding = mask != 0 if mask.dim() == 4 else mask == 0
    return bool((padding.reshape(-1) & (labels.reshape(-1).to(padding.device) != IGNORE_INDEX)).any())


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the vocabulary at the positions whose label is not -100 (the masked ones)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX)


def classification_loss(config, logits: torch.Tensor, labels, device) -> torch.Tensor:
    """A sequence classifier's loss, the one ``config.problem_type`` names, read at each call (as
    transformers reads it); when it is None, the labels decide, as in transformers, and the config
    keeps what they decided (once the loss is computed: a call whose labels are refused decides
    nothing). ``logits`` (B, K); ``labels`` (B,) ids, (B, K) 0/1 per label, or (B,) scores."""
    num_labels = logits.shape[-1]
    problem = config.problem_type or _problem_of(labels, num_labels)
    if problem == "single_label_classification":
        if num_labels == 1:  # (transformers refuses such a config; cross-entropy over one class is 0, always)
            raise ValueError("problem_type single_label_classification needs two labels or more: with one output "
                             "its cross-entropy is 0 whatever the input, and nothing would be learned (for one "
                             "score per text, problem_type regression)")  # fmt: skip
        labels = class_ids(labels, "labels", tuple(logits.shape[:1]), num_labels, "one class id per text (B,), "
                           f"in [0, num_labels={num_labels}), or -100 (no loss); for several labels per "
                           "text, floats (B, num_labels) of 0 and 1").to(device)  # fmt: skip
        loss = F.cross_entropy(logits, labels)
    else:
        regression = problem == "regression"
        shape = logits.shape[:1] if regression and num_labels == 1 else logits.shape  # (B,) or (B, K)
        target = _targets(labels, shape, logits.dtype, problem, device)
        if regression:
            loss = F.mse_loss(logits.squeeze(), target.squeeze()) if num_labels == 1 else F.mse_loss(logits, target)
        else:
            loss = F.binary_cross_entropy_with_logits(logits, target)
    if config.problem_type is None:
        config.problem_type = problem
    return loss


def _problem_of(labels, num_labels: int) -> str:
    """transformers' guess from the labels' dtype: one output is regression; integer labels are class
    ids, of any integer dtype (transformers reads int64 and int32 so, then fails on int32, and reads
    int16 or uint8 as multi-label, then fails); floats (and booleans) are multi-label."""
    if num_labels == 1:
        return "regression"
    dtype = labels.dtype if isinstance(labels, torch.Tensor) else torch.as_tensor(labels).dtype
    integers = not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)
    return "single_label_classification" if integers else "multi_label_classification"


def _targets(labels, shape: torch.Size, dtype: torch.dtype, problem: str, device) -> torch.Tensor:
    """Regression's or multi-label's targets, of ``shape`` ((B,) for one output; else exactly the
    scores', which transformers' losses would broadcast or refuse in torch's words), on ``device``;
    integer or boolean ones (0 and 1 per label) in the scores' ``dtype``, the same numbers."""
    tensor = torch.as_tensor(labels)
    if tensor.dtype.is_complex:
        raise InputTypeError(f"labels must be real numbers, got dtype {tensor.dtype}")
    if tensor.numel() != math.prod(shape) or (len(shape) == 2 and tensor.shape != shape):
        meaning = "a score per text" if problem == "regression" else "0 or 1 per text and label"
        raise ValueError(f"labels has shape {tuple(tensor.shape)}; for these inputs {problem} takes "
                         f"{tuple(shape)}: {meaning}")  # fmt: skip
    tensor = tensor.to(device)
    return tensor if tensor.dtype.is_floating_point else tensor.to(dtype)
