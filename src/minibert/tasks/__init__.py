"""BERT's tasks as one call each, with the results transformers' pipelines give on the same model
and input (and sentence-transformers' ``CrossEncoder`` for reranking):

    fill_mask("Paris is the [MASK] of France.")          the masked-LM head: likely pieces
    next_sentence("I was thirsty.", "I drank water.")    the next-sentence head: a probability
    classify("I loved it", model=DIR)                    a sequence classifier: labels and scores
    tag("Ada Lovelace lived in London", model=DIR)       a token classifier: entities with offsets
    answer("Who?", "context ...", model=DIR)             extractive QA over windows of a long context
    rerank("query", ["doc", ...], model=DIR)             a cross-encoder: documents by relevance

Each module is one task: how the model's scores become the answer a person reads. ``model=``
takes a hub id or a directory (loaded once with the head the task needs, and again once the
directory's files are rewritten), a loaded model with that
head (its tokenizer comes from where it was loaded), or a ``(model, tokenizer)`` pair.
"""

from .answer import answer
from .classify import classify
from .fill_mask_and_next_sentence import fill_mask, next_sentence
from .loading import load_for_task
from .rerank import CrossEncoder, rerank
from .tag import tag

__all__ = ["answer", "classify", "CrossEncoder", "fill_mask", "load_for_task", "next_sentence", "rerank", "tag"]
