"""The texts both verifications run (``minibert verify``, against transformers; ``--dtype int8``,
against float32), as one batch the model can take, and for int8 as the Embedder reads them (its
length and case): a room of its own because verify.py imports transformers when it runs, and the
int8 check runs without it."""

from __future__ import annotations

import torch

from ..errors import CheckpointError


def texts_batch(tokenizer, texts: list[str], config, max_length: int | None = None) -> dict[str, torch.Tensor]:
    """``texts`` tokenized for the model of ``config``: padded, and cut at ``max_length`` tokens (the
    Embedder's length for the model: ``as_the_embedder_reads``), by default at the tokenizer's
    ``model_max_length``, and at the model's positions in any case. A model of fewer than two
    positions has no room for a text's [CLS] and [SEP]: a CheckpointError naming the config's
    ``max_position_embeddings`` (the tokenizer's own error named neither the model nor the field)."""
    positions = config.max_position_embeddings
    if positions < 2:
        raise CheckpointError(f"{config.name_or_path or 'the model'}: its config gives max_position_embeddings = "
                              f"{positions}, and a text needs two positions at least ([CLS] and [SEP]): no text can "
                              "be compared on it")  # fmt: skip
    longest = min(max_length or tokenizer.model_max_length, positions)  # (a tokenizer may set no limit)
    return dict(tokenizer(texts, padding=True, truncation=True, max_length=longest, return_tensors="pt"))


def as_the_embedder_reads(name_or_path, tokenizer, config) -> tuple:
    """(the tokenizer, the length in tokens) with which the Embedder reads the texts of this model
    (embedding/embedder.py): a sentence-transformers model's recipe cuts them at its
    ``max_seq_length`` (256 for all-MiniLM-L6-v2, whose tokenizer says 512) and may lowercase them
    first (``do_lower_case``); any other model, at the tokenizer's ``model_max_length`` (length None:
    ``texts_batch``'s default). A recipe minibert does not implement is one the Embedder refuses to
    run: its texts are read as the tasks read them, the tokenizer's way."""
    from ..embedding.recipe import read_recipe

    try:
        recipe = read_recipe(name_or_path, hidden_size=config.hidden_size)
    except CheckpointError:
        recipe = None
    if recipe is None:
        return tokenizer, None
    return (tokenizer.lowercasing_first() if recipe.do_lower_case else tokenizer), recipe.max_seq_length
