"""The vocabulary and tokenizer of the pre-training data, as Google's ``FullTokenizer`` uses them.

Google's script tokenizes each line with ``FullTokenizer`` and writes piece ids; the masks need
``[MASK]``, the frame ``[CLS]`` and ``[SEP]``, and a masked piece is replaced 10% of the time by a
random entry of the *whole* vocabulary (``[PAD]``, ``[unused7]`` and the special tokens included).
Here a piece is its id from the start: a sentence is a list of ids, and ``random_piece`` is simply
a random id, because in a vocabulary without repeated lines the line number is the id.

The tokenizer is Google's, character for character (tokenizer/google.py: ``google_tokenizer``):
private-use characters are text, U+2B820–U+2B91F are ideographs, a word-final Σ lowercases to ς,
a word of more than 200 characters is one ``[UNK]`` (transformers: 100), and ``[MASK]`` typed in
the text is text like any other (Google splits it into ``[``, ``mask``, ``]``; minibert's
``BertTokenizer`` would keep it whole). ``preserve_unused_tokens`` is Google's flag of that name:
a word that is exactly a vocabulary entry ``[unused<digits>]`` stays one piece.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "vocab.txt"
>>> _ = path.write_text("[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\n[MASK]\\nthe\\ncat\\n##s\\n")
>>> vocabulary = PretrainingVocabulary.load(path)
>>> vocabulary.piece_ids("The CATS [MASK]")      # 'the', 'cat', '##s', then '[', 'mask', ']' → [UNK]
[5, 6, 7, 1, 1, 1]
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import CheckpointError, DataError
from ...tokenizer.google import google_tokenizer
from ...tokenizer.vocab_file import load_vocab, repeated_line

NEEDED_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass
class PretrainingVocabulary:
    """vocab.txt's pieces (line number = id) and the ids the instances need."""

    path: Path
    tokens: list[str]
    do_lower_case: bool = True
    preserve_unused_tokens: bool = False  # Google's flag: [unused0] typed in the text stays one piece
    unk_id: int = field(init=False)
    cls_id: int = field(init=False)
    sep_id: int = field(init=False)
    mask_id: int = field(init=False)
    is_continuation: list[bool] = field(init=False, repr=False)  # id → does the piece start with ##?

    def __post_init__(self):
        ids = {token: index for index, token in enumerate(self.tokens)}
        self.unk_id, self.cls_id, self.sep_id, self.mask_id = (ids[token] for token in NEEDED_TOKENS)
        self.is_continuation = [token.startswith("##") for token in self.tokens]
        self._tokenizer = google_tokenizer(ids, self.do_lower_case, self.preserve_unused_tokens)

    @classmethod
    def load(cls, path: str | os.PathLike, do_lower_case: bool = True,
             preserve_unused_tokens: bool = False) -> PretrainingVocabulary:  # fmt: skip
        """Read and check vocab.txt: it must exist, be UTF-8, hold [UNK] [CLS] [SEP] [MASK], and
        list each piece once (with a repeated line, ids depend on which of Google's versions reads
        it: google-research/bert keeps the last line's id, bert-tensorflow 1.0.4 the first and
        renumbers the rest), without spaces around it (Google strips them)."""
        path = Path(path)
        if not path.is_file():
            raise DataError(f"vocabulary file {path} does not exist" if not path.exists() else
                            f"vocabulary file {path} is not a file")  # fmt: skip
        try:
            pieces = load_vocab(path)
        except CheckpointError as error:  # unreadable, not UTF-8, empty: a data file here, as the rest
            raise DataError(str(error)) from None
        tokens = [""] * (max(pieces.values()) + 1)
        for token, index in pieces.items():
            tokens[index] = token
        if len(pieces) != len(tokens):
            raise DataError(f"vocabulary file {path}: {repeated_line(path)}; each piece must be listed once")
        for number, token in enumerate(tokens, start=1):
            if token != token.strip():
                raise DataError(f"vocabulary file {path}: line {number} ({token!r}) has spaces around the piece")
        missing = [token for token in NEEDED_TOKENS if token not in pieces]
        if missing:
            raise DataError(f"vocabulary file {path} lacks {', '.join(missing)}: pre-training instances need "
                            f"{', '.join(NEEDED_TOKENS)}")  # fmt: skip
        return cls(path, tokens, do_lower_case, preserve_unused_tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def piece_ids(self, text: str) -> list[int]:
        """The ids of ``text``'s word pieces, as Google's ``FullTokenizer.tokenize`` + ids give them."""
        return self._tokenizer.piece_ids(text)
