"""Stage 1 of embedding, tokens: each text's piece ids with the prompt in front, and how many
leading tokens the pooling leaves out.

A prompt (e5's "query: ", a model's default prompt) is text put before each text, as
sentence-transformers puts it. Most recipes pool it with the text; a recipe with ``include_prompt:
false`` leaves it out: then the pooling skips [CLS] and the prompt's pieces (``skip``), and a
``max_length`` that the prompt fills would leave a cut text nothing to pool, which is refused before
any text is tokenized.

>>> from minibert.embedding.recipe import SentenceRecipe
>>> class Pieces:                      # a tokenizer of one piece per character
...     piece_ids = staticmethod(lambda text: [ord(c) for c in text])
>>> tokenize, skip = tokenizing(SentenceRecipe(include_prompt=False), Pieces(), "q:", max_length=8,
...                             long_text="truncate", follows_recipe=True)
>>> tokenize("ab"), skip
([113, 58, 97, 98], 3)
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import PromptFillsMaxLengthError


def tokenizing(recipe, tokenizer, prefix: str, *, max_length: int, long_text: str,
               follows_recipe: bool) -> tuple[Callable[[str], list[int]], int]:  # fmt: skip
    """A text's piece ids (``prefix``, the chosen prompt, in front), and the pooling's ``skip``
    (0 unless the followed ``recipe`` leaves the prompt out); the prompt's room in ``max_length``
    is checked first."""
    skip = 0
    if prefix and follows_recipe and not recipe.include_prompt:
        skip = 1 + len(tokenizer.piece_ids(prefix))
        if long_text == "truncate" and skip >= max_length - 1:  # before any text is tokenized
            # A cut text would keep only the skipped tokens (the prompt, or with a left cut the
            # first pieces kept), which the recipe leaves out: nothing to pool.
            # (sentence-transformers pools [SEP] alone there, with a prompt length it caches; not followed.)
            raise PromptFillsMaxLengthError(
                f"the prompt {prefix!r:.60} is {skip} tokens with [CLS], and max_length={max_length} holds "
                f"{max_length - 1} before [SEP]: no token of the text is left to pool (this model's pooling "
                "leaves the prompt out); pass a larger max_length, a shorter prompt or long_text='window'",
                prefix, skip, max_length,
            )
    piece_ids = tokenizer.piece_ids
    return (lambda text: piece_ids(prefix + text)) if prefix else piece_ids, skip
