"""``BatchEncoding``: what a tokenizer call returns, and the maps between its tokens, words and characters.

A dict of the model's inputs (``input_ids``, ``token_type_ids``, ``attention_mask``, and what was asked for)
whose keys are also attributes, as transformers' ``BatchEncoding``. Beside the columns it answers, for any row
``i`` (a negative ``i`` counts from the end, as Python's and transformers' indices do):

    >>> encoding = tokenizer(["a b", "c d e"])                       # doctest: +SKIP
    >>> encoding.tokens(-1), encoding.word_ids(-1)                    # doctest: +SKIP
    (['[CLS]', 'c', 'd', 'e', '[SEP]'], [None, 0, 1, 2, None])

transformers' fast tokenizers also hand out the Rust ``tokenizers.Encoding`` of each row (``encoding[0]``,
``encoding.encodings``); minibert has no Rust objects, so those two raise an error that names the methods
answering the same questions (``tokens(i)``, ``word_ids(i)``, ``sequence_ids(i)``, the ``offset_mapping`` column).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

from ..errors import InputTypeError, TransformersNameError
from .encoding import to_tensors

logger = logging.getLogger("minibert")

# What transformers' Rust Encoding of a row holds, and where minibert's BatchEncoding answers the same question.
_ENCODING_ANSWERS = (
    "tokens(i), word_ids(i), sequence_ids(i), and the columns: encoding['input_ids'][i], ['token_type_ids'][i], "
    "['attention_mask'][i], ['offset_mapping'][i] (return_offsets_mapping=True), ['special_tokens_mask'][i] "
    "(return_special_tokens_mask=True)"
)


class BatchEncoding(dict):
    """What the tokenizer returns: a dict (``input_ids``, ``token_type_ids``, ``attention_mask``,
    and what was asked for) whose keys can also be read as attributes, like transformers'.

    ``word_ids(i)`` / ``sequence_ids(i)`` say, for each token of row ``i``, which word of its text
    it came from and whether it belongs to the first (0) or second (1) text; ``None`` for [CLS],
    [SEP] and padding. Rows are computed on first use (the fast path does not track words).
    """

    _alignment: Callable[[], dict[str, list]] | None = None  # recomputes the call's rows, tracking words
    _rows: dict[str, list] | None = None  # offsets, word ids and sequence ids of each row
    _token_of: Callable[[int], str] | None = None  # id → piece, the tokenizer's
    _ids: tuple[tuple[int, ...], ...] | None = None  # each row's ids as tokenized (the columns may be changed in place)
    _sequences: int | None = None  # 1 for texts, 2 for pairs

    @property
    def n_sequences(self) -> int | None:
        """1 when the inputs were texts, 2 when they were pairs (None for what ``pad`` returns)."""
        return self._sequences

    @property
    def is_fast(self) -> bool:
        """True, as on transformers' fast tokenizers' results: the alignment methods (``word_ids``,
        ``char_to_token``, ...) are there. (False for what ``pad`` returns, which has ids alone.)"""
        return self._alignment is not None

    def tokens(self, batch_index: int = 0) -> list[str]:
        """The pieces of row ``batch_index``, [CLS], [SEP] and [PAD] included, as transformers'
        ``encoding.tokens()``: those the call made, whatever has since been written into ``input_ids``
        (a masking collator's [MASK], in place)."""
        if self._token_of is None or self._ids is None:
            raise ValueError("tokens() needs what the tokenizer returns (pad() gives ids only)")
        return [self._token_of(index) for index in self._ids[_row(batch_index, len(self._ids))]]

    def __getitem__(self, key):
        if isinstance(key, str):
            return super().__getitem__(key)
        if isinstance(key, slice):  # as transformers: each column's rows in the slice
            return {name: column[key] for name, column in self.items()}
        raise InputTypeError(
            f"BatchEncoding[{key!r}]: transformers gives the Rust tokenizers.Encoding of a row there; minibert "
            f"has none: a column is encoding['input_ids'], and a row's other facts are {_ENCODING_ANSWERS}"
        )

    def convert_to_tensors(self, tensor_type: str | None = None, prepend_batch_axis: bool = False) -> BatchEncoding:
        """Turn the columns into ``"pt"`` or ``"np"`` tensors in place, as transformers' method (and
        ``return_tensors=`` of the call) do; rows of different lengths are refused for ``"pt"`` and
        become an array of rows for ``"np"``. ``prepend_batch_axis`` treats the columns as one row."""
        if tensor_type is None:
            return self
        columns = {key: [value] if prepend_batch_axis else value for key, value in self.items()}
        columns = {key: value.tolist() if hasattr(value, "tolist") else value for key, value in columns.items()}
        single = not any(isinstance(row, (list, tuple)) for row in columns.get("input_ids", []))
        tensors = to_tensors({key: [value] if single else value for key, value in columns.items()}, tensor_type)
        self.update({key: value[0] for key, value in tensors.items()} if single else tensors)
        return self

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name == "encodings":  # transformers' list of Rust tokenizers.Encoding rows
            raise TransformersNameError(
                "'BatchEncoding' object has no attribute 'encodings': transformers' Rust tokenizers.Encoding rows "
                f"do not exist in minibert; ask the encoding itself: {_ENCODING_ANSWERS}"
            )
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"'BatchEncoding' object has no attribute or key {name!r}; its keys are "
                                 f"{', '.join(self)}") from None  # fmt: skip

    @property
    def data(self) -> dict:
        """The encoding's dict itself (transformers' BatchEncoding keeps its keys in ``.data``)."""
        return self

    def to(self, device, *, non_blocking: bool = False) -> BatchEncoding:
        """Move every tensor to ``device`` (a model's ``.device``, "cuda", 0, ...), in place, and return
        the encoding: ``model(**tokenizer(texts, return_tensors="pt").to(model.device))``.

        Only a device moves them, as in transformers: ``.to(torch.float16)`` (or ``.to(model.dtype)``)
        would turn token id 2829 into 2828, so a dtype leaves every tensor as it is and logs a warning
        (transformers' words). The model's half precision applies to its weights, never to the ids. A
        device is read as minibert's entry points read it (``resolve_device``): where transformers moves
        the tensors, the same place; a missing GPU is a ``DeviceError``, -1 the CPU, "auto" CUDA or the CPU."""
        import torch

        from ..loading.devices import resolve_device

        if not isinstance(device, (str, int, torch.device)):
            logger.warning(f"Attempting to cast a BatchEncoding to type {device}. This is not supported.")
            return self
        device = resolve_device(device)
        for key, value in self.items():
            if isinstance(value, torch.Tensor):  # lists and arrays stay
                self[key] = value.to(device=device, non_blocking=non_blocking)
        return self

    def _aligned(self, key: str, batch_index: int) -> list:
        if self._rows is None:
            if self._alignment is None:
                raise ValueError("word_ids() and the other alignment methods need what the tokenizer returns")
            self._rows = self._alignment()
        rows = self._rows[key]
        return rows[_row(batch_index, len(rows))]

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        """For each token of row ``batch_index``: the index of its word in its own text (words are
        BERT's basic tokens: each punctuation mark and each CJK ideograph is a word), or None."""
        return list(self._aligned("_word_ids", batch_index))

    def sequence_ids(self, batch_index: int = 0) -> list[int | None]:
        """For each token of row ``batch_index``: 0 (first text), 1 (second text) or None."""
        return list(self._aligned("_sequence_ids", batch_index))

    # The mappings between characters, words and tokens that transformers' BatchEncoding has
    # (extractive QA finds an answer's tokens with char_to_token). As there, each takes
    # (index) for row 0 or (batch_index, index).

    def token_to_word(self, batch_or_token_index: int, token_index: int | None = None) -> int | None:
        return self._of_token("_word_ids", batch_or_token_index, token_index)

    def token_to_sequence(self, batch_or_token_index: int, token_index: int | None = None) -> int | None:
        return self._of_token("_sequence_ids", batch_or_token_index, token_index)

    def token_to_chars(self, batch_or_token_index: int, token_index: int | None = None) -> CharSpan | None:
        if self._of_token("_sequence_ids", batch_or_token_index, token_index) is None:
            return None  # [CLS], [SEP], padding, or past the end
        return CharSpan(*self._of_token("_offsets", batch_or_token_index, token_index))

    def _of_token(self, key: str, batch_or_token_index: int, token_index: int | None):
        """A token's entry in a row; None for a token index past the end (as transformers' Rust
        encodings answer); a batch index outside the batch is an IndexError."""
        batch, token = _batch_and(batch_or_token_index, token_index)
        row = self._aligned(key, batch)
        if token < 0:
            raise IndexError(f"token index {token} is negative")
        return row[token] if token < len(row) else None

    def word_to_tokens(
        self, batch_or_word_index: int, word_index: int | None = None, sequence_index: int = 0
    ) -> TokenSpan | None:
        batch, word = _batch_and(batch_or_word_index, word_index)
        tokens = self._tokens_of_word(batch, word, sequence_index)
        return TokenSpan(tokens[0], tokens[-1] + 1) if tokens else None

    def word_to_chars(
        self, batch_or_word_index: int, word_index: int | None = None, sequence_index: int = 0
    ) -> CharSpan | None:
        batch, word = _batch_and(batch_or_word_index, word_index)
        tokens = self._tokens_of_word(batch, word, sequence_index)
        if not tokens:
            return None
        offsets = self._aligned("_offsets", batch)
        return CharSpan(offsets[tokens[0]][0], offsets[tokens[-1]][1])

    def char_to_token(
        self, batch_or_char_index: int, char_index: int | None = None, sequence_index: int = 0
    ) -> int | None:
        batch, char = _batch_and(batch_or_char_index, char_index)
        sequences = self._aligned("_sequence_ids", batch)
        for token, (start, end) in enumerate(self._aligned("_offsets", batch)):
            if sequences[token] == sequence_index and start <= char < end:
                return token
        return None

    def char_to_word(
        self, batch_or_char_index: int, char_index: int | None = None, sequence_index: int = 0
    ) -> int | None:
        batch, char = _batch_and(batch_or_char_index, char_index)
        token = self.char_to_token(batch, char, sequence_index)
        return None if token is None else self._aligned("_word_ids", batch)[token]

    def _tokens_of_word(self, batch: int, word: int, sequence_index: int) -> list[int]:
        words, sequences = self._aligned("_word_ids", batch), self._aligned("_sequence_ids", batch)
        return [t for t, (w, s) in enumerate(zip(words, sequences)) if w == word and s == sequence_index]


class TokenSpan(NamedTuple):
    start: int
    end: int


class CharSpan(NamedTuple):
    start: int
    end: int


def _batch_and(batch_or_index: int, index: int | None) -> tuple[int, int]:
    return (0, batch_or_index) if index is None else (batch_or_index, index)


def _row(batch_index: int, rows: int) -> int:
    """A row index read as Python reads one: -1 is the last row; outside the batch, an IndexError."""
    if not -rows <= batch_index < rows:
        raise IndexError(f"batch_index {batch_index} is outside this batch of {rows} rows")
    return batch_index % rows
