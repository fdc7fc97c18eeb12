"""SentenceTransformer's settings, as the Embedder's attributes that read and set its recipe.

sentence-transformers code changes a model's settings by assigning them, and the Embedder takes the
same assignments with the same effect:

    embedder.similarity_fn_name = "dot"          # what similarity() computes
    embedder.truncate_dim = 8                    # how many values embed() keeps
    embedder.prompts = {"query": "query: "}      # the prompts prompt_name= chooses from
    embedder.default_prompt_name = "query"       # the prompt put before texts given none
    embedder.max_length = 128                    # max_seq_length: the longest input, in tokens

Each is checked when set: a value the recipe cannot follow is an error there and then, not an
attribute that nothing reads. The first four are ``embedder.recipe.<name>`` (recipe.py); ``max_length``
(sentence-transformers' ``max_seq_length``) is the Embedder's own default length.
"""

from __future__ import annotations

from ..errors import InputTypeError, TaskArgumentError
from .options import check_truncate_dim, checked_length
from .recipe import SIMILARITY_FUNCTIONS


class RecipeSettings:
    """The recipe's settings that SentenceTransformer has as attributes (``self.recipe``: a SentenceRecipe)."""

    @property
    def similarity_fn_name(self) -> str:
        """How ``similarity`` scores: "cosine", "dot", "euclidean" or "manhattan"."""
        return self.recipe.similarity_fn_name

    @similarity_fn_name.setter
    def similarity_fn_name(self, value) -> None:
        value = getattr(value, "value", value)  # sentence-transformers' SimilarityFunction.DOT → "dot"
        if value is None:  # sentence-transformers: unset, read back as cosine
            value = "cosine"
        if not isinstance(value, str) or value not in SIMILARITY_FUNCTIONS:
            raise TaskArgumentError("similarity_fn_name", value, f"one of {SIMILARITY_FUNCTIONS}")
        self.recipe.similarity_fn_name = value

    @property
    def truncate_dim(self) -> int | None:
        """How many values of each vector ``embed`` keeps when its recipe is followed (None: all)."""
        return self.recipe.truncate_dim

    @truncate_dim.setter
    def truncate_dim(self, value) -> None:
        self.recipe.truncate_dim = check_truncate_dim(value, "truncate_dim")

    @property
    def prompts(self) -> dict[str, str]:
        """The model's prompts by name (``embed(prompt_name=...)``); a dict that may be changed in place."""
        return self.recipe.prompts

    @prompts.setter
    def prompts(self, value) -> None:
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise InputTypeError(f"prompts must be a dict of names to str, got {value!r:.60}")
        self.recipe.prompts = dict(value)  # as given: sentence-transformers adds no "query" or "document" here

    @property
    def default_prompt_name(self) -> str | None:
        """The prompt ``embed`` puts before each text when given neither ``prompt`` nor ``prompt_name``."""
        return self.recipe.default_prompt_name

    @default_prompt_name.setter
    def default_prompt_name(self, value) -> None:
        # sentence-transformers takes any name and then puts no prompt (prompts.get); said now instead
        if value is not None and (not isinstance(value, str) or value not in self.recipe.prompts):
            known = ", ".join(repr(name) for name in self.recipe.prompts) or "none"
            raise TaskArgumentError("default_prompt_name", value, f"None or one of this model's prompts ({known})")
        self.recipe.default_prompt_name = value

    @property
    def max_length(self) -> int:
        """The longest input in tokens when ``embed`` is given no ``max_length``: the recipe's
        ``max_seq_length``, else the tokenizer's, at most the model's positions. Set, it is checked
        then (an int from 3 to the positions), not at the next ``embed``."""
        return self._length

    @max_length.setter
    def max_length(self, value) -> None:
        self._length = checked_length(value, self.model.config.max_position_embeddings)
