"""Ids back to text: ``decode``, ``batch_decode`` and ``convert_tokens_to_string``, as transformers'
fast BERT tokenizer does it (its WordPiece decoder).

    >>> tok.decode([101, 1045, 2293, 3000, 102])                        # doctest: +SKIP
    '[CLS] i love paris [SEP]'
    >>> tok.batch_decode([[101, 7592, 102], [101, 2088, 102]], skip_special_tokens=True)  # doctest: +SKIP
    ['hello', 'world']

A mixin of ``BertTokenizer``, which provides ``_token`` (id → piece), ``added`` (the special tokens skipped
by ``skip_special_tokens``) and ``clean_up_tokenization_spaces`` (decode's default).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import CheckpointError
from .algorithm import clean_up_tokenization, join_pieces
from .arguments import check_flags, token_id


@dataclass(frozen=True)
class Decoder:
    """How pieces are joined back into text: tokenizer.json's ``decoder`` (tokenizer_json.py).
    WordPiece's: a piece starting with ``prefix`` glued to the one before, with its clean-up of
    the spaces before punctuation where ``cleanup``; ``prefix`` None: ``"decoder": null``, the
    pieces joined by spaces. ``refused``: why this folder's text cannot be decoded (its two readers
    decode differently: directory.py), said when ``decode`` is called; its ids are still right."""

    prefix: str | None = "##"
    cleanup: bool = True
    refused: str | None = None


WORDPIECE = Decoder()  # BERT's, as transformers' BertTokenizer builds it whatever tokenizer.json says


class Decoding:
    """``decode``, ``batch_decode`` and ``convert_tokens_to_string``: ids back to text."""

    _decoder: Decoder = WORDPIECE  # tokenizer.json's, where from_pretrained read one

    def decode(self, ids: Sequence[int] | int, skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None, spaces_between_special_tokens: bool = True,
               ) -> str | list[str]:  # fmt: skip
        """Ids (a list, a 1-D tensor or array, or one id) back to text (``convert_tokens_to_string``
        of their pieces), without the special tokens if asked. ``clean_up_tokenization_spaces=True``
        then applies transformers' ``clean_up_tokenization`` to the text ("it ' s" → "it's", "said 'hi"
        → "said'hi": English contractions, at a cost to quotes); None follows the tokenizer's
        ``clean_up_tokenization_spaces`` (tokenizer_config.json's, False where it is absent, as in transformers 5).
        Rows of ids (a list of lists, a 2-D tensor or array) give a list of texts, as ``batch_decode``
        (transformers 5 does the same). ``spaces_between_special_tokens`` is taken and changes nothing,
        as in transformers 5's fast tokenizer (pieces are always joined by BERT's decoder).

        >>> tok.decode([101, 1045, 2293, 3000, 102], skip_special_tokens=True)   # doctest: +SKIP
        'i love paris'
        """
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if isinstance(ids, (list, tuple)) and ids and isinstance(ids[0], (list, tuple)):
            return self.batch_decode(ids, skip_special_tokens, clean_up_tokenization_spaces)
        return self._decode_row(ids, skip_special_tokens, clean_up_tokenization_spaces)

    def batch_decode(self, sequences, skip_special_tokens: bool = False,
                     clean_up_tokenization_spaces: bool | None = None) -> list[str]:  # fmt: skip
        """``decode`` of each row of ``sequences`` (a list of id lists, or a 2-D tensor or array):
        a generation's or a batch's ids back to texts, as transformers' ``batch_decode``. A flat list
        of ids (or a 1-D tensor) is one row, as transformers 5 reads it: ``[decode(sequences)]``."""
        if hasattr(sequences, "tolist"):
            sequences = sequences.tolist()
        sequences = [row.tolist() if hasattr(row, "tolist") else row for row in sequences]  # rows as tensors, arrays
        if sequences and not isinstance(sequences[0], (list, tuple)):
            sequences = [sequences]  # one row of ids (transformers 5; 4 decoded each id as a row)
        return [self._decode_row(ids, skip_special_tokens, clean_up_tokenization_spaces) for ids in sequences]

    def _decode_row(self, ids, skip_special_tokens: bool, clean_up_tokenization_spaces: bool | None) -> str:
        """``decode`` of one row of ids (or one id): see ``decode``."""
        check_flags(skip_special_tokens=skip_special_tokens)
        check_flags(optional=True, clean_up_tokenization_spaces=clean_up_tokenization_spaces)
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if not isinstance(ids, (list, tuple)):
            ids = [token_id(ids)]  # one id
        special = self.added.skipped_when_decoding if skip_special_tokens else ()
        tokens = [self._token(index) for index in map(token_id, ids) if index not in special]
        text = self.convert_tokens_to_string(tokens)
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        return clean_up_tokenization(text) if clean_up_tokenization_spaces else text

    def convert_tokens_to_string(self, tokens: Iterable[str]) -> str:
        """Pieces back to text, as transformers' WordPiece decoder does it: a ``##`` piece is glued
        to the piece before it (the first piece keeps its ``##``), other pieces follow a space, and
        a space before ``.``, ``?``, ``!``, ``,`` and a few English contractions is removed.

        >>> tok.convert_tokens_to_string(["love", "##ly", "paris", "!"])   # doctest: +SKIP
        'lovely paris!'
        """
        if self._decoder.refused:
            raise CheckpointError(self._decoder.refused)
        return join_pieces(tokens, self._decoder.prefix, self._decoder.cleanup)
