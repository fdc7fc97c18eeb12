"""The texts both verifications run (``minibert verify``, against transformers; ``--dtype int8``,
against float32), as one batch the model can take: a room of its own because verify.py imports
transformers when it runs, and the int8 check runs without it."""

from __future__ import annotations

import torch

from ..errors import CheckpointError


def texts_batch(tokenizer, texts: list[str], config) -> dict[str, torch.Tensor]:
    """``texts`` tokenized for the model of ``config``: padded, and cut to its positions (and to the
    tokenizer's ``model_max_length``). A model of fewer than two positions has no room for a text's
    [CLS] and [SEP]: a CheckpointError naming the config's ``max_position_embeddings`` (the
    tokenizer's own error named neither the model nor the field)."""
    positions = config.max_position_embeddings
    if positions < 2:
        raise CheckpointError(f"{config.name_or_path or 'the model'}: its config gives max_position_embeddings = "
                              f"{positions}, and a text needs two positions at least ([CLS] and [SEP]): no text can "
                              "be compared on it")  # fmt: skip
    longest = min(tokenizer.model_max_length, positions)  # (a tokenizer may set no limit)
    return dict(tokenizer(texts, padding=True, truncation=True, max_length=longest, return_tensors="pt"))
