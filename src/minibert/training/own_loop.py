"""transformers' helpers for a training loop of your own: ``set_seed`` and ``DataCollatorWithPadding``.

The HF course's Trainer-free loop (chapter 3, "A full training"), transformers' "Train in native
PyTorch" page and its run_glue_no_trainer.py import these beside the model and the schedule
(``get_scheduler``: schedules.py). Each does what transformers' does, and tests compare them
(tests/test_training_own_loop.py):

    >>> from minibert import AutoTokenizer, DataCollatorWithPadding, set_seed
    >>> set_seed(42)                          # random, numpy, torch (and every GPU) seeded
    >>> tokenizer = AutoTokenizer.from_pretrained("minibert/fortunes-mini")
    >>> collate = DataCollatorWithPadding(tokenizer)
    >>> batch = collate([{**tokenizer("a long sentence"), "label": 1}, {**tokenizer("short"), "label": 0}])
    >>> batch["input_ids"].shape, batch["labels"].tolist()
    (torch.Size([2, 5]), [1, 0])

A ``torch.utils.data.DataLoader(dataset, collate_fn=collate, batch_size=8)`` then pads each batch
to its own longest row. transformers' other collators (``DataCollatorForLanguageModeling``,
``DataCollatorForTokenClassification``) are not here; transformers' own take minibert's tokenizer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["DataCollatorWithPadding", "set_seed"]

# Accelerators whose generators transformers' set_seed seeds besides CUDA's, where torch has them.
OTHER_DEVICES = ("mlu", "musa", "npu", "hpu", "xpu")


def set_seed(seed: int, deterministic: bool = False) -> None:
    """Seed Python's ``random``, numpy's global generator and torch's (CPU, every CUDA device, and
    the other accelerators present), as transformers' ``set_seed``; ``deterministic=True`` also
    turns on ``torch.use_deterministic_algorithms`` (slower, the same numbers every run)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)  # (safe without CUDA)
    if deterministic:
        torch.use_deterministic_algorithms(True)
    for name in OTHER_DEVICES:
        device = getattr(torch, name, None)
        if device is not None and device.is_available():
            device.manual_seed_all(seed)


@dataclass
class DataCollatorWithPadding:
    """Pads a list of the tokenizer's outputs (a batch of a dataset's rows) with ``tokenizer.pad``,
    as transformers' collator of that name: to the batch's longest row (``padding=True``), to
    ``max_length`` (``padding="max_length"``), or not at all (``False``), each length rounded up to
    ``pad_to_multiple_of``; tensors of ``return_tensors`` ("pt" or "np"). A ``label`` or
    ``label_ids`` column comes back as ``labels``, the name the heads' ``forward`` takes; other
    columns come back as they are (strings cannot become tensors: remove them from the dataset)."""

    tokenizer: object
    padding: bool | str = True
    max_length: int | None = None
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"

    def __call__(self, features: list[dict]) -> dict:
        batch = self.tokenizer.pad(features, padding=self.padding, max_length=self.max_length,
                                   pad_to_multiple_of=self.pad_to_multiple_of,
                                   return_tensors=self.return_tensors)  # fmt: skip
        for name in ("label", "label_ids"):
            if name in batch:
                batch["labels"] = batch.pop(name)
        return batch
