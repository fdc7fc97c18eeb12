"""Added tokens: whole pieces cut out of a text before BERT's two stages (``add_tokens``).

A vocabulary is fixed at pre-training, but a fine-tuning domain has words it lacks ("COVID-19",
a product name, entity markers such as ``<e1>``). transformers' answer, which minibert follows::

    >>> tok.add_tokens(["COVID-19"])                      # doctest: +SKIP
    1
    >>> tok.tokenize("covid-19 cases")                    # doctest: +SKIP
    ['covid-19', 'cases']
    >>> model.resize_token_embeddings(len(tok))           # doctest: +SKIP

Each added token gets the id after the vocabulary's (or keeps its id, if the vocabulary already
has the piece), and is then cut out of every text *before* the basic tokenizer and WordPiece run,
wherever it occurs — even inside a word: with ``"newword"`` added, ``"newwords"`` becomes
``newword`` + ``s``, and that ``s`` is a word of its own (not ``##s``). Two kinds, as in Hugging
Face ``tokenizers``:

* **matched as typed** (``normalized=False``): the special tokens (``[CLS]``, ``[MASK]``, what
  ``add_special_tokens`` adds), looked for in the raw text first;
* **matched after normalization** (``normalized=True``, what ``add_tokens`` gives an ordinary
  token): the token and the rest of the text are both cleaned, accent-stripped and lowercased as
  the vocabulary expects (``BasicTokenizer.normalize``), so ``"NewWord"`` also matches
  ``"NEWWORD"``, and the piece is spelled ``newword`` (``convert_ids_to_tokens``).

Where several added tokens could match, the leftmost wins, then the longest (``"abc"`` before
``"ab"``), as in ``tokenizers``' Aho-Corasick matcher. What that library does and minibert refuses
rather than guess: tokens that only match whole words or swallow the spaces around them
(``single_word``, ``lstrip``, ``rstrip``), a token that normalizes to nothing, two tokens that
normalize to the same text (``tokenizers`` then picks one at random per process), and turning a
special token into an ordinary one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class AddedToken:
    """A token to add, with the options of ``tokenizers.AddedToken`` (which is accepted too).

    ``normalized=None`` means: matched after normalization unless the token is special."""

    content: str
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool | None = None
    special: bool = False

    @classmethod
    def of(cls, value, special: bool) -> AddedToken:
        """A str, a minibert ``AddedToken`` or a ``tokenizers.AddedToken`` (read by its attributes),
        as an ``AddedToken`` with every option decided; refused if minibert cannot match it exactly."""
        if isinstance(value, str):
            token = cls(value, special=special)
        elif isinstance(getattr(value, "content", None), str):
            options = {name: getattr(value, name, False) for name in ("single_word", "lstrip", "rstrip")}
            token = cls(value.content, normalized=getattr(value, "normalized", None),
                        special=getattr(value, "special", False) or special, **options)  # fmt: skip
        else:
            raise TypeError(f"added tokens must be str or AddedToken, got {value!r}")
        for name in ("single_word", "lstrip", "rstrip"):
            if getattr(token, name):
                raise NotImplementedError(f"added token {token.content!r}: {name}=True is not implemented "
                                          "(minibert matches them anywhere, spaces not included)")  # fmt: skip
        normalized = (not token.special) if token.normalized is None else bool(token.normalized)
        if token.special and normalized:
            raise NotImplementedError(f"added token {token.content!r}: a special token matched after normalization "
                                      "is not implemented (special tokens are matched as typed)")  # fmt: skip
        return cls(token.content, normalized=normalized, special=bool(token.special))

    def as_json(self) -> dict:
        """As transformers writes it in tokenizer_config.json's ``added_tokens_decoder``."""
        return {"content": self.content, "lstrip": False, "normalized": bool(self.normalized), "rstrip": False,
                "single_word": False, "special": self.special}  # fmt: skip


class Matcher:
    """Leftmost-longest matching of fixed strings, each standing for a token id.

    A regular expression of the strings, longest first: Python's ``re`` tries alternatives in
    order, so at the leftmost position where any string occurs, the longest one wins — the match
    rule of ``tokenizers``' Aho-Corasick automaton (``MatchKind::LeftmostLongest``)."""

    def __init__(self, ids: dict[str, int]):
        self.ids = ids
        strings = sorted(ids, key=len, reverse=True)
        self.pattern = re.compile("|".join(re.escape(string) for string in strings)) if strings else None
        self.first_characters = {string[0] for string in strings}

    def __bool__(self) -> bool:
        return self.pattern is not None

    def occurs_in(self, text: str) -> bool:
        """Does any of the strings occur in ``text``?"""
        return self.pattern is not None and self.pattern.search(text) is not None

    def may_occur_in(self, text: str) -> bool:
        """A quick test before the search: does any string's first character occur?"""
        return any(character in text for character in self.first_characters)

    def finditer(self, text: str):
        """(start, end, id) of each match, left to right, not overlapping."""
        if self.pattern is None:
            return
        for match in self.pattern.finditer(text):
            yield match.start(), match.end(), self.ids[match.group()]
