"""The vocabulary and tokenizer of the pre-training data, as Google's ``FullTokenizer`` uses them.

Google's script tokenizes each line with ``FullTokenizer`` and writes piece ids; the masks need
``[MASK]``, the frame ``[CLS]`` and ``[SEP]``, and a masked piece is replaced 10% of the time by a
random entry of the *whole* vocabulary (``[PAD]``, ``[unused7]`` and the special tokens included).
Here a piece is its id from the start: a sentence is a list of ids, and ``random_piece`` is simply
a random id, because in a vocabulary without repeated lines the line number is the id.

minibert's own tokenizer (``BasicTokenizer`` + ``WordPieceTokenizer``) does the work, set up as
Google's: a word of more than 200 characters is one ``[UNK]`` (Google's limit; transformers uses
100), and ``[MASK]`` typed in the text is text like any other (Google splits it into ``[``,
``mask``, ``]``; minibert's ``BertTokenizer`` would keep it whole). Where minibert's tokenizer
follows Hugging Face ``tokenizers`` rather than Google (docs/tokenizer.md), the text is made to
give Google's pieces or refused:

- Σ: Google lowercases whole words with ``str.lower`` (a final Σ becomes ς), minibert each
  character (σ): a lowercased line with a Σ is lowercased Google's way first.
- Private-use characters (category Co) and U+2B820–U+2B91F (a CJK range ``tokenizers`` mistyped):
  Google keeps the first and spaces out the second, minibert does neither; a line with one is
  refused (``DataError``), as its pieces would not be Google's.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "vocab.txt"
>>> _ = path.write_text("[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\n[MASK]\\nthe\\ncat\\n##s\\n")
>>> vocabulary = PretrainingVocabulary.load(path)
>>> vocabulary.piece_ids("The CATS [MASK]")      # 'the', 'cat', '##s', then '[', 'mask', ']' → [UNK]
[5, 6, 7, 1, 1, 1]
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DataError
from ..tokenizer.algorithm import BasicTokenizer, WordPieceTokenizer
from ..tokenizer.files import load_vocab

GOOGLE_MAX_CHARS_PER_WORD = 200  # google-research/bert's WordpieceTokenizer default
NEEDED_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Characters minibert's tokenizer treats unlike Google's: private use (Co) and the CJK range that
# tokenizers' table starts at 0x2B920 where Google's starts at 0x2B820.
UNLIKE_GOOGLE = re.compile("[\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd\U0002b820-\U0002b91f]")


@dataclass
class PretrainingVocabulary:
    """vocab.txt's pieces (line number = id) and the ids the instances need."""

    path: Path
    tokens: list[str]
    do_lower_case: bool = True
    unk_id: int = field(init=False)
    cls_id: int = field(init=False)
    sep_id: int = field(init=False)
    mask_id: int = field(init=False)
    is_continuation: list[bool] = field(init=False, repr=False)  # id → does the piece start with ##?

    def __post_init__(self):
        ids = {token: index for index, token in enumerate(self.tokens)}
        self.unk_id, self.cls_id, self.sep_id, self.mask_id = (ids[token] for token in NEEDED_TOKENS)
        self.is_continuation = [token.startswith("##") for token in self.tokens]
        self._basic = BasicTokenizer(do_lower_case=self.do_lower_case)
        self._wordpiece = WordPieceTokenizer(ids, self.unk_id, GOOGLE_MAX_CHARS_PER_WORD)

    @classmethod
    def load(cls, path: str | os.PathLike, do_lower_case: bool = True) -> PretrainingVocabulary:
        """Read and check vocab.txt: it must exist, be UTF-8, hold [UNK] [CLS] [SEP] [MASK], and
        list each piece once (with a repeated line, ids depend on which of Google's versions reads
        it: google-research/bert keeps the last line's id, bert-tensorflow 1.0.4 the first and
        renumbers the rest), without spaces around it (Google strips them)."""
        path = Path(path)
        if not path.is_file():
            raise DataError(f"vocabulary file {path} does not exist" if not path.exists() else
                            f"vocabulary file {path} is not a file")  # fmt: skip
        pieces = load_vocab(path)  # raises CheckpointError for unreadable, non-UTF-8 or empty files
        tokens = [""] * (max(pieces.values()) + 1)
        for token, index in pieces.items():
            tokens[index] = token
        if len(pieces) != len(tokens):
            seen: dict[str, int] = {}
            for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
                token = line.rstrip("\r")
                if token in seen:
                    raise DataError(f"vocabulary file {path}: line {number} repeats line {seen[token]} "
                                    f"({token!r}); each piece must be listed once")  # fmt: skip
                seen[token] = number
        for number, token in enumerate(tokens, start=1):
            if token != token.strip():
                raise DataError(f"vocabulary file {path}: line {number} ({token!r}) has spaces around the piece")
        missing = [token for token in NEEDED_TOKENS if token not in pieces]
        if missing:
            raise DataError(f"vocabulary file {path} lacks {', '.join(missing)}: pre-training instances need "
                            f"{', '.join(NEEDED_TOKENS)}")  # fmt: skip
        return cls(path, tokens, do_lower_case)

    def __len__(self) -> int:
        return len(self.tokens)

    def piece_ids(self, text: str) -> list[int]:
        """The ids of ``text``'s word pieces, as Google's ``FullTokenizer.tokenize`` + ids give them."""
        unlike = UNLIKE_GOOGLE.search(text)
        if unlike:
            raise DataError(f"U+{ord(unlike.group()):04X} (a private-use or U+2B820-U+2B91F character) is tokenized "
                            "differently by Google's FullTokenizer and minibert: remove it from the text")  # fmt: skip
        if self.do_lower_case and "Σ" in text:  # Google lowercases words whole: Python's final ς
            text = " ".join(word.lower() for word in self._basic.clean(text).split())
        pieces = self._wordpiece.pieces
        return [piece for word in self._basic.tokenize(text) for piece in pieces(word)]
