"""sentence-transformers' names for what the Embedder does, each answered with minibert's spelling.

``Embedder.from_pretrained(m).embed(texts)`` computes what ``SentenceTransformer(m).encode(texts)``
computes, under other names (docs/migrating.md has the table):

    sentence-transformers                          minibert
    SentenceTransformer(m)                         Embedder.from_pretrained(m)
    model.encode(texts)                            embedder.embed(texts)
    model.encode_query(texts)                      embedder.embed(texts, prompt_name="query")
    encode(texts, normalize_embeddings=True)       embed(texts, normalize=True)
    encode(texts, show_progress_bar=False)         embed(texts, progress=False)
    model.get_sentence_embedding_dimension()       embedder.dimension()
    model.max_seq_length                           embedder.max_length

A sentence-transformers spelling is an error that names minibert's, never taken with another
meaning (``normalize_embeddings=False`` is encode's default, where ``normalize=False`` would also
leave out the model's own Normalize module):

    >>> print(spelled_otherwise(["normalize_embeddings"]))   # doctest: +ELLIPSIS
    ; normalize_embeddings is sentence-transformers' name: minibert's is normalize=True (...)
"""

from __future__ import annotations

import os

from ..errors import InputTypeError, TransformersNameError

# encode's keywords that embed spells otherwise, or has not: what to write instead.
ENCODE_KEYWORDS = {
    "normalize_embeddings": "minibert's is normalize=True (False is encode's default: leave it out; normalize=False "
    "would also leave out the model's own Normalize module)",
    "show_progress_bar": "minibert's is progress=True/False (None: a bar on a terminal for a long run)",
    "convert_to_numpy": "embed returns a numpy array always",
    "convert_to_tensor": "embed returns a numpy array: torch.from_numpy(vectors) makes it a tensor",
    "output_value": "token vectors are embedder.embed_tokens(text) (output_value='token_embeddings'), which puts no "
    "prompt before the text; with encode's prompt (the model's default, or prompt_name=...): "
    "embedder.embed_tokens(embedder.recipe.prompt_for(prompt, prompt_name) + text)",
    "precision": "embed returns float32 vectors; quantize them yourself",
    "device": "the Embedder computes on its model's device: Embedder.from_pretrained(m, device=...)",
}
# SentenceTransformer's attributes that the Embedder names otherwise.
ATTRIBUTES = {
    "encode": "embed(texts)",
    # sentence-transformers 5/6's calls: its prompts always hold "query" and "document" (recipe.py
    # DEFAULT_PROMPTS, "" unless the folder gives them), which these two choose
    "encode_query": 'embed(texts, prompt_name="query")',
    "encode_document": 'embed(texts, prompt_name="document")',
    "get_sentence_embedding_dimension": "dimension()",
    "get_embedding_dimension": "dimension()",
    "max_seq_length": "max_length",
    "get_max_seq_length": "max_length",
    "device": "model.device (Embedder.from_pretrained(m, device=...) places the model)",
    "similarity_pairwise": "similarity(a, b).diagonal() (each a[i] with b[i])",
    "truncate_embeddings": "embed(texts, truncate_dim=N) for one call, or embedder.truncate_dim = N until set back",
}


class AnswersSentenceTransformersNames:
    """What the Embedder says to sentence-transformers' spellings: ``Embedder(path)`` names
    ``Embedder.from_pretrained(path)``; ``embedder.encode``, ``embedder.max_seq_length`` ... (read or
    set: set, it would change nothing) name minibert's.
    (Four more, its settings, are properties of ``RecipeSettings``: recipe_settings.py.)"""

    def __new__(cls, model=None, *args, **kwargs):
        refuse_a_name(model)  # (copy and pickle give no argument)
        return super().__new__(cls)

    def __getattr__(self, name: str):
        raise their_attribute(name)  # (only for a name the object has not)

    def __setattr__(self, name: str, value) -> None:
        if name in ATTRIBUTES:
            raise their_attribute(name)
        super().__setattr__(name, value)


def spelled_otherwise(unknown) -> str:
    """What to add to "unknown embedding option(s) ...": each of sentence-transformers' names among
    ``unknown`` with minibert's spelling ("" when there is none)."""
    known = [f"{name} is sentence-transformers' name: {ENCODE_KEYWORDS[name]}" for name in unknown
             if name in ENCODE_KEYWORDS]  # fmt: skip
    return "".join(f"; {line}" for line in known)


def refuse_a_name(model) -> None:
    """``Embedder(path)``, as ``SentenceTransformer(path)`` is written: an InputTypeError naming
    ``Embedder.from_pretrained(path)`` (the constructor takes a loaded model and its tokenizer)."""
    if isinstance(model, (str, os.PathLike)):
        name = os.fspath(model)
        raise InputTypeError(f"Embedder(model, tokenizer) wraps a loaded BertModel and its tokenizer, got the path "
                             f"or name {name!r}; to load a checkpoint, as SentenceTransformer({name!r}) does: "
                             f"Embedder.from_pretrained({name!r})")  # fmt: skip


def their_attribute(name: str) -> AttributeError:
    """The error for ``embedder.<name>``: sentence-transformers' name with minibert's spelling, else Python's."""
    if name in ATTRIBUTES:
        return TransformersNameError(f"'Embedder' object has no attribute {name!r} (sentence-transformers' name): "
                                     f"minibert's is embedder.{ATTRIBUTES[name]}")  # fmt: skip
    return AttributeError(f"'Embedder' object has no attribute {name!r}")
