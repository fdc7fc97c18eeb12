"""BERT's tokenizer, written out: text → basic tokens → WordPiece pieces → ids.

BERT never sees characters. Its input is a sequence of ids from a fixed vocabulary of ~30,000
*word pieces* (``vocab.txt``: one piece per line, the line number is the id). Turning text into ids
happens in two stages, exactly as in google-research/bert's ``tokenization.py``:

1. **Basic tokenization** (``BasicTokenizer``) cuts the text into words and punctuation marks:
   clean it (drop NUL, U+FFFD and control characters; every kind of whitespace becomes a space),
   put spaces around Chinese/Japanese/Korean *ideographs* (each is its own word), for uncased
   vocabularies strip accents (Unicode NFD, then drop the combining marks) and lowercase, then
   split on whitespace and make every punctuation character a token of its own::

       "Héllo, WORLD!"  →  ["hello", ",", "world", "!"]

2. **WordPiece** (``WordPieceTokenizer``) splits each word into the longest pieces found in the
   vocabulary, left to right; a piece that continues a word is spelled with a ``##`` prefix::

       "unwanted"  →  ["un", "##want", "##ed"]          (google-research/bert's toy vocabulary)
       "unwantedX" →  ["[UNK]"]   (no segmentation exists, so the whole word is unknown)

``BertTokenizer`` then frames the pieces the way BERT was pre-trained: ``[CLS] A [SEP]`` for one
text and ``[CLS] A [SEP] B [SEP]`` for a pair, with ``token_type_ids`` 0 for A and 1 for B, and pads
batches with ``[PAD]`` (``attention_mask`` 0 there). ``encode_and_show_work`` returns every step.

Where the reference implementations disagree, minibert follows Hugging Face ``tokenizers`` (what
``AutoTokenizer`` gives): unassigned code points are kept (not dropped as "control"), accents are
stripped before lowercasing, and Σ lowercases to σ everywhere (no final-ς rule). Lone surrogates,
which ``tokenizers`` cannot even receive, are dropped like control characters. See the README.
"""

from __future__ import annotations

import json
import logging
import operator
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from .encoding import (
    PAD_VALUES,
    SIDES,
    TRUNCATION_STRATEGIES,
    BatchEncoding,
    Pieces,
    check_side,
    pad_rows,
    padded_length,
    to_tensors,
    truncation_plan,
)
from .errors import CheckpointError, ModelNotFoundError
from .hub import resolve_file
from .io import write_atomically

logger = logging.getLogger("minibert")

# Code point ranges of the "CJK Unified Ideographs" blocks, as in Hugging Face tokenizers.
# (Hangul, Hiragana and Katakana are not ideographs: they go through WordPiece like any word.)
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),  # tokenizers' bound; Google's tokenization.py says 0x2B820 (see README)
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# Characters of these Unicode categories are removed while cleaning: controls (Cc), formatting
# characters such as zero-width joiners (Cf), private use (Co) and lone surrogates (Cs).
_REMOVED_CATEGORIES = {"Cc", "Cf", "Co", "Cs"}

MAX_CHARS_PER_WORD = 100  # a longer word becomes a single [UNK]


def is_cjk_ideograph(code_point: int) -> bool:
    """True for a CJK ideograph, e.g. 0x4E2D ("中"); False for Hangul, Hiragana, Katakana."""
    return any(low <= code_point <= high for low, high in _CJK_RANGES)


def is_punctuation(char: str) -> bool:
    """BERT's punctuation: every non-alphanumeric printable ASCII character (``$``, ``+``, ``^`` are
    symbols to Unicode but punctuation to BERT) and every Unicode character of a category P*.

    >>> [c for c in "a,b$c¿d" if is_punctuation(c)]
    [',', '$', '¿']
    """
    code_point = ord(char)
    if 33 <= code_point <= 47 or 58 <= code_point <= 64 or 91 <= code_point <= 96 or 123 <= code_point <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_removed_in_cleaning(char: str) -> bool:
    """NUL, U+FFFD and control/format/private-use characters, but not tab, newline, carriage return."""
    if char in "\t\n\r":
        return False
    return char in "\x00\ufffd" or unicodedata.category(char) in _REMOVED_CATEGORIES


class _TranslationTable(dict):
    """A ``str.translate`` table that computes each code point's replacement on first sight.

    ``str.translate`` runs in C; only characters never seen before call back into Python. That is
    what makes the pure-Python tokenizer as fast as the Rust one on real text.
    """

    def __init__(self, rule):
        super().__init__()
        self._rule = rule

    def __missing__(self, code_point: int):
        replacement = self._rule(chr(code_point)) if code_point < 0x110000 else None
        self[code_point] = replacement
        return replacement


def _clean_rule(char: str, *, space_ideographs: bool):
    if is_removed_in_cleaning(char):
        return None
    if char.isspace():
        return " "
    if space_ideographs and is_cjk_ideograph(ord(char)):
        return f" {char} "
    return char


class BasicTokenizer:
    """Stage 1: cleaning, accent stripping, lowercasing, splitting on whitespace and punctuation.

    >>> BasicTokenizer().tokenize("Héllo, WORLD!  中文")
    ['hello', ',', 'world', '!', '中', '文']
    """

    def __init__(
        self,
        do_lower_case: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
    ):
        self.do_lower_case = do_lower_case
        # strip_accents=None follows do_lower_case: uncased vocabularies have no accents.
        self.strip_accents = do_lower_case if strip_accents is None else strip_accents
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self._clean_table = _TranslationTable(lambda char: _clean_rule(char, space_ideographs=tokenize_chinese_chars))
        self._mark_table = _TranslationTable(lambda char: None if unicodedata.category(char) == "Mn" else char)
        self._punctuation_table = _TranslationTable(lambda char: f" {char} " if is_punctuation(char) else char)

    def clean(self, text: str) -> str:
        """Drop control characters, turn whitespace into spaces, space out CJK ideographs."""
        return text.translate(self._clean_table)

    def normalize(self, text: str) -> str:
        """Strip accents (NFD, then drop combining marks) and lowercase, as the vocabulary expects.

        >>> BasicTokenizer().normalize("Crème BRÛLÉE")
        'creme brulee'
        """
        if self.strip_accents and not text.isascii():
            text = unicodedata.normalize("NFD", text).translate(self._mark_table)
        if self.do_lower_case:
            # Lowercase each character on its own, as the Rust tokenizer does: no final-sigma rule.
            text = text.replace("Σ", "σ").lower()
        return text

    def split(self, text: str) -> list[str]:
        """Split normalized text on whitespace and make each punctuation mark its own token."""
        return text.translate(self._punctuation_table).split()

    def tokenize(self, text: str) -> list[str]:
        return self.split(self.normalize(self.clean(text)))

    def words_with_origins(self, text: str, base: int = 0) -> list[tuple[str, list[int]]]:
        """``tokenize``, keeping track of where each character came from: for each word, the word
        and, for each of its characters, the index in ``text`` (plus ``base``) of the character
        that produced it. A piece's span in the original text follows (offsets for NER and QA).

        The same steps as ``tokenize``, taken one character at a time (slower: only used when
        offsets or word ids are asked for).

        >>> BasicTokenizer().words_with_origins("Né, x")
        [('ne', [0, 1]), (',', [2]), ('x', [4])]
        """
        words: list[tuple[str, list[int]]] = []
        chars: list[str] = []
        origins: list[int] = []

        def end_word():
            if chars:
                words.append(("".join(chars), origins.copy()))
                chars.clear()
                origins.clear()

        for index, char in enumerate(text, start=base):
            for cleaned in char.translate(self._clean_table):  # '', ' ', the char, or ' 中 '
                if cleaned == " ":
                    end_word()
                    continue
                for normalized in self.normalize(cleaned):
                    if normalized.isspace():
                        end_word()
                    elif is_punctuation(normalized):
                        end_word()
                        words.append((normalized, [index]))
                    else:
                        chars.append(normalized)
                        origins.append(index)
        end_word()
        return words


class WordPieceTokenizer:
    """Stage 2: greedy longest-match-first segmentation of one word into vocabulary pieces.

    Start at the first character, take the longest prefix that is in the vocabulary, then continue
    from where it ended with ``##``-prefixed pieces. If at some point no piece matches, the whole
    word is ``[UNK]`` (BERT does not fall back to characters).

    >>> vocab = {t: i for i, t in enumerate(["[UNK]", "un", "##want", "##ed", "runn", "##ing"])}
    >>> WordPieceTokenizer(vocab, unk_id=0).pieces("unwanted")
    [1, 2, 3]
    """

    def __init__(self, vocab: dict[str, int], unk_id: int, max_chars_per_word: int = MAX_CHARS_PER_WORD):
        self.vocab = vocab
        self.unk_id = unk_id
        self.max_chars_per_word = max_chars_per_word
        self._cache: dict[str, list[int]] = {}

    def pieces(self, word: str) -> list[int]:
        """The ids of ``word``'s pieces (cached: real text repeats its words)."""
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        ids = self._segment(word)
        if len(self._cache) > 200_000:  # bound the memory of a long-running process
            self._cache.clear()
        self._cache[word] = ids
        return ids

    def _segment(self, word: str) -> list[int]:
        if len(word) > self.max_chars_per_word:
            return [self.unk_id]
        vocab = self.vocab
        ids = []
        start = 0
        while start < len(word):
            end = len(word)
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                piece_id = vocab.get(piece)
                if piece_id is not None:
                    break
                end -= 1
            else:  # no piece of the vocabulary starts here
                return [self.unk_id]
            ids.append(piece_id)
            start = end
        return ids


SPECIAL_TOKEN_NAMES = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_DEFAULT_SPECIAL_TOKENS = {
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}


def google_lower_case(name: str, vocab: dict[str, int]) -> tuple[bool, str]:
    """Whether to lowercase for a checkpoint that has no tokenizer config (Google's zips), and why.

    Google's README: lowercase for the "uncased" models, not for the "cased" ones — which their
    names say (``uncased_L-12_H-768_A-12``, ``cased_L-24_H-1024_A-16``, ``multi_cased_...``).
    A name that says neither is judged by the vocabulary: a cased one holds capitalised words.

    >>> google_lower_case("cased_L-12_H-768_A-12", {})
    (False, "the name 'cased_L-12_H-768_A-12' says cased")
    >>> google_lower_case("my-bert", {"the": 0, "The": 1, "Paris": 2, "paris": 3})
    (False, 'its vocabulary has capitalised words (2 of 4, e.g. The)')
    """
    words = re.findall(r"[a-z]+", Path(name).name.lower())
    if "uncased" in words:
        return True, f"the name {Path(name).name!r} says uncased"
    if "cased" in words:
        return False, f"the name {Path(name).name!r} says cased"
    capitalised = [token for token in vocab if len(token) > 1 and token[0].isupper() and token[1:].islower()]
    if len(capitalised) * 100 > len(vocab):  # cased English vocabularies: ~15%; uncased: 0
        return (
            False,
            f"its vocabulary has capitalised words ({len(capitalised)} of {len(vocab)}, e.g. {capitalised[0]})",
        )
    return True, f"its vocabulary has no capitalised words ({len(capitalised)} of {len(vocab)})"


def load_vocab(vocab_file: str | os.PathLike) -> dict[str, int]:
    """Read ``vocab.txt`` (one piece per line; the line number is the id) into {piece: id}."""
    path = Path(vocab_file)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CheckpointError(f"vocabulary file not found: {path}") from None
    except UnicodeDecodeError as error:
        raise CheckpointError(
            f"vocabulary file {path} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    except OSError as error:
        raise CheckpointError(f"cannot read vocabulary file {path}: {error.strerror}") from None
    tokens = text.split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    vocab: dict[str, int] = {}
    for index, token in enumerate(tokens):
        # A piece listed twice keeps its LAST line's id, as in Google's load_vocab, transformers and
        # `tokenizers` (each fills a dict line by line).
        vocab[token.rstrip("\r")] = index
    if not vocab:
        raise CheckpointError(f"vocabulary file {path} is empty")
    return vocab


class BertTokenizer:
    """BERT's WordPiece tokenizer, callable like transformers' tokenizers.

    >>> tok = BertTokenizer.from_pretrained("google-bert/bert-base-uncased")   # doctest: +SKIP
    >>> tok("I love Paris")["input_ids"]                                       # doctest: +SKIP
    [101, 1045, 2293, 3000, 102]
    >>> tok.tokenize("She is a MachineLearning Engineer")                      # doctest: +SKIP
    ['she', 'is', 'a', 'machine', '##lea', '##rn', '##ing', 'engineer']
    """

    def __init__(
        self,
        vocab_file: str | os.PathLike,
        do_lower_case: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        *,
        do_basic_tokenize: bool = True,
        model_max_length: int = 512,
        padding_side: str = "right",
        truncation_side: str = "right",
        vocab: dict[str, int] | None = None,
        **special_tokens: str,
    ):
        """``vocab_file``: vocab.txt; or pass ``vocab`` ({piece: id}, e.g. from tokenizer.json) and
        the file it came from as ``vocab_file`` (named in error messages).

        ``do_basic_tokenize=False`` skips stage 1 (no cleaning, lowercasing or punctuation
        splitting): words are what whitespace separates, as in transformers' slow BertTokenizer."""
        unknown = set(special_tokens) - set(SPECIAL_TOKEN_NAMES)
        if unknown:
            raise TypeError(f"BertTokenizer got unexpected arguments: {sorted(unknown)}")
        _check_flags(do_lower_case=do_lower_case, tokenize_chinese_chars=tokenize_chinese_chars,
                     do_basic_tokenize=do_basic_tokenize)  # fmt: skip
        if strip_accents not in (True, False, None):
            raise TypeError(f"strip_accents must be True, False or None, got {strip_accents!r}")
        if isinstance(model_max_length, bool) or not isinstance(model_max_length, int) or model_max_length < 1:
            raise ValueError(f"model_max_length must be a positive int, got {model_max_length!r}")
        self.vocab_file = Path(vocab_file)
        self._vocab_is_file = vocab is None
        self.vocab = dict(vocab) if vocab is not None else load_vocab(vocab_file)
        self.ids_to_tokens = {index: token for token, index in self.vocab.items()}
        self.model_max_length = model_max_length
        self.padding_side = check_side(padding_side, "padding_side")
        self.truncation_side = check_side(truncation_side, "truncation_side")
        self.do_basic_tokenize = do_basic_tokenize
        self.strip_accents = strip_accents  # as given (None: follow do_lower_case)
        self.basic = BasicTokenizer(do_lower_case, strip_accents, tokenize_chinese_chars)
        tokens = {**_DEFAULT_SPECIAL_TOKENS, **special_tokens}
        # [UNK], [CLS] and [SEP] frame every input; [PAD] and [MASK] are only needed to pad and to
        # mask, so a vocabulary without them (Google's test vocabularies) loads, and padding or
        # fill_mask then raise, naming the missing piece.
        missing = [tokens[name] for name in ("unk_token", "sep_token", "cls_token") if tokens[name] not in self.vocab]
        if missing:
            raise CheckpointError(f"vocabulary file {self.vocab_file} lacks the special tokens {missing}")
        self.unk_token, self.sep_token, self.pad_token, self.cls_token, self.mask_token = (
            tokens[name] for name in SPECIAL_TOKEN_NAMES
        )
        self.unk_token_id = self.vocab[self.unk_token]
        self.sep_token_id = self.vocab[self.sep_token]
        self.pad_token_id = self.vocab.get(self.pad_token)  # None: this vocabulary cannot pad
        self.cls_token_id = self.vocab[self.cls_token]
        self.mask_token_id = self.vocab.get(self.mask_token)  # None: nothing can be masked
        self.wordpiece = WordPieceTokenizer(self.vocab, self.unk_token_id)
        specials = sorted({token for token in tokens.values() if token in self.vocab}, key=len, reverse=True)
        self._special_split = re.compile("(" + "|".join(re.escape(token) for token in specials) + ")")
        self.all_special_ids = sorted({self.vocab[token] for token in specials})
        self._warned_too_long = False

    # ------------------------------------------------------------------ loading and saving

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, *, revision: str | None = None) -> BertTokenizer:
        """Load ``vocab.txt`` (or, without it, ``tokenizer.json``: see tokenizer_json.py) and
        ``tokenizer_config.json`` from a directory or a hub repository."""
        vocab_file = resolve_file(name_or_path, "vocab.txt", revision=revision, required=False)
        vocab, from_json = None, {}
        if vocab_file is None:
            vocab_file = resolve_file(name_or_path, "tokenizer.json", revision=revision, required=False)
            if vocab_file is None:
                raise ModelNotFoundError(f"{name_or_path} has neither vocab.txt nor tokenizer.json")
            from .tokenizer_json import read_tokenizer_json

            vocab, from_json = read_tokenizer_json(vocab_file)
        config_file = resolve_file(name_or_path, "tokenizer_config.json", revision=revision, required=False)
        settings = {}
        if config_file is not None:
            settings = _read_tokenizer_config(Path(config_file))
        elif vocab is None and os.path.isdir(name_or_path):  # e.g. unpacked from Google's zip: no tokenizer config
            lower, reason = google_lower_case(os.path.abspath(name_or_path), load_vocab(vocab_file))
            settings["do_lower_case"] = lower
            logger.info("%s has no tokenizer_config.json: %s, as %s", name_or_path,
                        "lowercasing" if lower else "not lowercasing", reason)  # fmt: skip
        settings.update(from_json)  # tokenizer.json's pipeline is what `tokenizers` runs: it wins
        return cls(vocab_file, vocab=vocab, **settings)

    def save_pretrained(self, save_directory: str | os.PathLike) -> tuple[str, ...]:
        """Write ``vocab.txt``, ``tokenizer_config.json`` and ``special_tokens_map.json`` to a
        directory (created if needed; each file written atomically), loadable by
        ``BertTokenizer.from_pretrained`` and by transformers' ``AutoTokenizer``."""
        directory = Path(save_directory)
        if directory.exists() and not directory.is_dir():
            raise NotADirectoryError(f"save_pretrained: {directory} exists and is not a directory")
        directory.mkdir(parents=True, exist_ok=True)
        if self._vocab_is_file:  # the file itself: a piece listed twice keeps its lines
            vocab_bytes = self.vocab_file.read_bytes()
        else:
            ids = sorted(self.ids_to_tokens)
            if ids != list(range(len(ids))):
                gap = next(i for i, index in enumerate(ids) if i != index)
                raise ValueError(f"cannot write vocab.txt: {self.vocab_file}'s vocabulary has no piece with id {gap}")
            vocab_bytes = "".join(self.ids_to_tokens[index] + "\n" for index in ids).encode("utf-8")
        specials = {name: getattr(self, name) for name in SPECIAL_TOKEN_NAMES}
        config = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self.basic.do_lower_case,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.basic.tokenize_chinese_chars,
            "do_basic_tokenize": self.do_basic_tokenize,
            "model_max_length": self.model_max_length,
            "padding_side": self.padding_side,
            "truncation_side": self.truncation_side,
            **specials,
        }
        files = {
            "vocab.txt": vocab_bytes,
            "tokenizer_config.json": (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
            "special_tokens_map.json": (json.dumps(specials, indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
        }
        for name, data in files.items():
            write_atomically(directory / name, data)
        return tuple(str(directory / name) for name in files)

    # ------------------------------------------------------------------ text → pieces

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __len__(self) -> int:
        return len(self.vocab)

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def _segments(self, text: str) -> Iterator[tuple[bool, str, int]]:
        """(is a special token, part, where it starts): special tokens such as ``[MASK]`` typed in
        the text are kept whole, the rest goes through the basic tokenizer."""
        if "[" not in text:  # fast path: no special token can occur
            yield False, text, 0
            return
        position = 0
        for match in self._special_split.finditer(text):
            if match.start() > position:
                yield False, text[position : match.start()], position
            yield True, match.group(), match.start()
            position = match.end()
        if position < len(text):
            yield False, text[position:], position

    def _basic_words(self, text: str) -> list[str]:
        return self.basic.tokenize(text) if self.do_basic_tokenize else text.split()

    def _words(self, text: str) -> list[str]:
        """Basic tokens of ``text``; special tokens such as ``[MASK]`` are kept whole."""
        if "[" not in text:  # fast path: no special token can occur
            return self._basic_words(text)
        words = []
        for special, part, _ in self._segments(text):
            if special:
                words.append(part)
            else:
                words.extend(self._basic_words(part))
        return words

    def _words_with_origins(self, text: str) -> list[tuple[str, list[int]]]:
        """``_words``, each with the index in ``text`` of each of its characters."""
        words = []
        for special, part, start in self._segments(text):
            if special:
                words.append((part, list(range(start, start + len(part)))))
            elif self.do_basic_tokenize:
                words.extend(self.basic.words_with_origins(part, start))
            else:
                words.extend(
                    (match.group(), list(range(start + match.start(), start + match.end())))
                    for match in re.finditer(r"\S+", part)
                )
        return words

    def piece_ids(self, text: str) -> list[int]:
        """Ids of ``text``'s word pieces, without [CLS]/[SEP]."""
        pieces = self.wordpiece.pieces
        ids: list[int] = []
        for word in self._words(text):
            ids.extend(pieces(word))
        return ids

    def _pieces(self, text: str | list[str], track: bool) -> Pieces:
        """``text``'s pieces; with ``track``, also each piece's character span and word index.

        ``text`` may be a list of words already split (``is_split_into_words``): each word is then
        tokenized on its own, its pieces' word index is its place in the list and their spans are
        within the word, as in transformers."""
        if isinstance(text, list):
            parts = [self._pieces(word, track) for word in text]
            return Pieces(
                [i for part in parts for i in part.ids],
                [span for part in parts for span in part.offsets] if track else None,
                [index for index, part in enumerate(parts) for _ in part.ids] if track else None,
            )
        if not track:
            return Pieces(self.piece_ids(text))
        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        words: list[int] = []
        for word_index, (word, origins) in enumerate(self._words_with_origins(text)):
            word_ids = self.wordpiece.pieces(word)
            if word_ids == [self.unk_token_id]:  # the whole word (or [UNK] itself)
                offsets.append((origins[0], origins[-1] + 1))
            else:
                position = 0
                for piece_number, piece_id in enumerate(word_ids):
                    length = len(self.ids_to_tokens[piece_id]) - (2 if piece_number else 0)  # "##"
                    offsets.append((origins[position], origins[position + length - 1] + 1))
                    position += length
            ids.extend(word_ids)
            words.extend([word_index] * len(word_ids))
        return Pieces(ids, offsets, words)

    def words_and_pieces(self, text: str) -> tuple[list[str], list[list[int]]]:
        """The basic tokens (words) of ``text`` and, for each, the ids of its word pieces."""
        words = self._words(text)
        return words, [self.wordpiece.pieces(word) for word in words]

    def tokenize(self, text: str) -> list[str]:
        """The word pieces of ``text`` as strings (no [CLS]/[SEP])."""
        return self.convert_ids_to_tokens(self.piece_ids(text))

    def encode_and_show_work(self, text: str) -> dict:
        """Every intermediate step of tokenizing ``text``, for learning and debugging.

        >>> steps = tok.encode_and_show_work("Héllo, unaffable!")     # doctest: +SKIP
        >>> steps["basic_tokens"], steps["word_pieces"]                # doctest: +SKIP
        (['hello', ',', 'una', ...
        """
        cleaned = self.basic.clean(text)
        normalized = self.basic.normalize(cleaned)
        words = self._words(text)
        word_pieces = [self.convert_ids_to_tokens(self.wordpiece.pieces(word)) for word in words]
        ids = self.build_inputs_with_special_tokens(self.piece_ids(text))
        return {
            "text": text,
            "cleaned": cleaned,
            "normalized": normalized,
            "basic_tokens": words,
            "word_pieces": word_pieces,
            "tokens": self.convert_ids_to_tokens(ids),
            "input_ids": ids,
        }

    def convert_tokens_to_ids(self, tokens: str | Iterable[str]) -> int | list[int]:
        if isinstance(tokens, str):
            return self.vocab.get(tokens, self.unk_token_id)
        return [self.vocab.get(token, self.unk_token_id) for token in tokens]

    def convert_ids_to_tokens(self, ids: int | Iterable[int]) -> str | list[str]:
        if isinstance(ids, int):
            return self._token(_token_id(ids))
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return [self._token(_token_id(index)) for index in ids]

    def _token(self, index: int) -> str:
        token = self.ids_to_tokens.get(index)
        if token is None:
            raise ValueError(f"token id {index} is outside the vocabulary [0, {self.vocab_size})")
        return token

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Ids back to text: ``##`` pieces are glued to the previous piece, other pieces joined by a
        space, and a space before ``. , ! ?`` removed (as transformers' WordPiece decoder does).

        >>> tok.decode([101, 1045, 2293, 3000, 102], skip_special_tokens=True)   # doctest: +SKIP
        'i love paris'
        """
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        special = set(self.all_special_ids) if skip_special_tokens else ()
        parts = []
        for index in ids:
            index = _token_id(index)
            if index in special:
                continue
            token = self._token(index)
            if token.startswith("##"):
                parts.append(token[2:])
            elif not parts:
                parts.append(token)
            elif token in {".", ",", "!", "?"}:
                parts.append(token)
            else:
                parts.append(" " + token)
        return "".join(parts)

    # ------------------------------------------------------------------ framing

    def build_inputs_with_special_tokens(self, ids_a: list[int], ids_b: list[int] | None = None) -> list[int]:
        """``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``."""
        ids = [self.cls_token_id, *ids_a, self.sep_token_id]
        if ids_b is not None:
            ids += [*ids_b, self.sep_token_id]
        return ids

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        """How many tokens the framing adds: 2 ([CLS] A [SEP]) or 3 for a pair."""
        return 3 if pair else 2

    def get_special_tokens_mask(self, ids_a: list[int], ids_b: list[int] | None = None) -> list[int]:
        """1 where ``build_inputs_with_special_tokens`` puts [CLS]/[SEP], 0 on the text's pieces."""
        mask = [1] + [0] * len(ids_a) + [1]
        return mask + [0] * len(ids_b) + [1] if ids_b is not None else mask

    def encode(self, text: str, text_pair: str | None = None, **kwargs) -> list[int]:
        """The framed ids of one text (or pair), e.g. ``[101, 1045, 2293, 3000, 102]``."""
        return self(text, text_pair, **kwargs)["input_ids"]

    def __call__(
        self,
        text: str | Sequence[str] | Sequence[Sequence[str]],
        text_pair: str | Sequence[str] | Sequence[Sequence[str]] | None = None,
        *,
        is_split_into_words: bool = False,
        add_special_tokens: bool = True,
        padding: bool | str = False,
        truncation: bool | str = False,
        max_length: int | None = None,
        stride: int = 0,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_tensors: str | None = None,
        return_token_type_ids: bool | None = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
        verbose: bool = True,
        _track: bool = False,
    ) -> BatchEncoding:
        """Tokenize one text, a pair, or a batch, and frame, truncate, window and pad the result.

        * ``text`` / ``text_pair``: a str each, or lists of str of the same length (a batch).
          With ``is_split_into_words=True``, each input is a list of words (e.g. an NER dataset's
          tokens) and ``word_ids()`` maps pieces back to them.
        * ``truncation``: ``True``/``"longest_first"`` (cut the longer of the pair first),
          ``"only_first"``, ``"only_second"``, or ``False``; up to ``max_length`` tokens including
          [CLS]/[SEP] (default ``model_max_length``, 512). ``tokenizer.truncation_side = "left"``
          keeps the end of a text instead. Without truncation, a row longer than
          ``model_max_length`` is logged once (as transformers does): the model cannot take it.
        * ``return_overflowing_tokens=True`` with ``stride=k``: instead of dropping what does not
          fit, return every window of the long text, consecutive windows sharing ``k`` tokens;
          ``overflow_to_sample_mapping`` says which input each window came from.
        * ``padding``: ``True``/``"longest"`` pads to the longest row, ``"max_length"`` to
          ``max_length``, rounded up to a multiple of ``pad_to_multiple_of``; pads are ``[PAD]``
          with ``attention_mask`` 0, at the end (``padding_side="left"``: at the start).
        * ``return_offsets_mapping``: each token's (start, end) character span in its text
          ((0, 0) for [CLS], [SEP] and pads); ``return_special_tokens_mask``: 1 on [CLS], [SEP]
          and pads. ``.word_ids(i)`` / ``.sequence_ids(i)`` of the result work in any case.
        * ``return_tensors``: ``None`` (lists), ``"pt"`` (torch tensors) or ``"np"`` (numpy).
        """
        batched, texts = self._as_batch(text, "text", is_split_into_words)
        pairs = None
        if text_pair is not None:
            pair_batched, pairs = self._as_batch(text_pair, "text_pair", is_split_into_words)
            if batched != pair_batched:
                raise TypeError("text and text_pair must both be one input, or both be batches")
            if len(pairs) != len(texts):
                raise ValueError(f"text has {len(texts)} items but text_pair has {len(pairs)}")
        _check_flags(add_special_tokens=add_special_tokens, is_split_into_words=is_split_into_words,
                     return_overflowing_tokens=return_overflowing_tokens, verbose=verbose,
                     return_special_tokens_mask=return_special_tokens_mask,
                     return_offsets_mapping=return_offsets_mapping)  # fmt: skip
        _check_flags(optional=True, return_token_type_ids=return_token_type_ids,
                     return_attention_mask=return_attention_mask)  # fmt: skip
        strategy = self._truncation_strategy(truncation)
        padding_mode = self._padding_mode(padding)
        _check_count(max_length, "max_length", minimum=1, optional=True)
        _check_count(stride, "stride", minimum=0)
        _check_count(pad_to_multiple_of, "pad_to_multiple_of", minimum=1, optional=True)
        side = check_side(padding_side or self.padding_side, "padding_side")
        warn_too_long = strategy is None and max_length is None and verbose
        if strategy or padding_mode == "max_length":
            max_length = self.model_max_length if max_length is None else max_length
        if strategy and padding_mode and pad_to_multiple_of and max_length % pad_to_multiple_of:
            raise ValueError(
                f"truncation to max_length={max_length} and padding to a multiple of {pad_to_multiple_of} "
                "contradict each other: make max_length a multiple of pad_to_multiple_of"
            )
        if return_overflowing_tokens and strategy is None:
            raise ValueError("return_overflowing_tokens=True needs truncation (and max_length)")
        added = (3 if pairs is not None else 2) if add_special_tokens else 0
        if return_overflowing_tokens and stride >= max_length - added:  # (stricter than transformers,
            # which only complains once a text is long enough to need windows)
            raise ValueError(
                f"stride={stride} must be smaller than the room for text in each window "
                f"({max_length - added} pieces = max_length minus the special tokens)"
            )
        track = return_offsets_mapping or _track

        columns: dict[str, list[list]] = {"input_ids": [], "token_type_ids": []}
        if return_special_tokens_mask:
            columns["special_tokens_mask"] = []
        if track:
            columns.update(offset_mapping=[], _word_ids=[], _sequence_ids=[])
        sample_of_row: list[int] = []
        for sample, text_a in enumerate(texts):
            pieces_a = self._pieces(text_a, track)
            pieces_b = self._pieces(pairs[sample], track) if pairs is not None else None
            if strategy is None:  # the whole text (or pair) is one row
                if warn_too_long:
                    length = len(pieces_a) + (0 if pieces_b is None else len(pieces_b)) + added
                    if length > self.model_max_length:
                        self._warn_too_long(length)
                self._frame(columns, pieces_a, pieces_b, add_special_tokens)
                sample_of_row.append(sample)
                continue
            length_b = None if pieces_b is None else len(pieces_b)
            plan = truncation_plan(len(pieces_a), length_b, max_length - added, strategy, stride,
                                   self.truncation_side, return_overflowing_tokens)  # fmt: skip
            for span_a, span_b in plan:
                part_b = None if span_b is None else pieces_b.part(*span_b)
                self._frame(columns, pieces_a.part(*span_a), part_b, add_special_tokens)
                sample_of_row.append(sample)
        columns["attention_mask"] = [[1] * len(ids) for ids in columns["input_ids"]]

        if padding_mode is not None and columns["input_ids"]:
            longest = max(map(len, columns["input_ids"]))
            target = padded_length(longest, padding_mode, max_length, pad_to_multiple_of)
            pad_rows(columns, target, side, self.pad_token_id, self.vocab_file.name)

        values = {"input_ids": columns["input_ids"]}
        if return_token_type_ids is not False:
            values["token_type_ids"] = columns["token_type_ids"]
        if return_attention_mask is not False:
            values["attention_mask"] = columns["attention_mask"]
        for key, wanted in (("special_tokens_mask", return_special_tokens_mask),
                            ("offset_mapping", return_offsets_mapping)):  # fmt: skip
            if wanted:
                values[key] = columns[key]
        if return_overflowing_tokens:
            values["overflow_to_sample_mapping"] = sample_of_row
        if not batched and not return_overflowing_tokens and return_tensors is None:
            values = {key: value[0] for key, value in values.items()}
        elif return_tensors is not None:
            values = to_tensors(values, return_tensors)

        def alignment() -> BatchEncoding:  # the same call, tracking words and offsets (on first use)
            return self(
                text, text_pair, is_split_into_words=is_split_into_words, add_special_tokens=add_special_tokens,
                padding=padding, truncation=truncation, max_length=max_length, stride=stride,
                pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                return_overflowing_tokens=return_overflowing_tokens, verbose=False, _track=True,
            )  # fmt: skip

        encoding = BatchEncoding(values)
        encoding._alignment = alignment
        if track:
            rows = columns["offset_mapping"], columns["_word_ids"], columns["_sequence_ids"]
            encoding._rows = dict(zip(("_offsets", "_word_ids", "_sequence_ids"), rows))
        return encoding

    def _warn_too_long(self, length: int) -> None:
        """transformers' warning for a row the model cannot take, once per tokenizer."""
        if not self._warned_too_long:
            self._warned_too_long = True
            logger.warning(
                "Token indices sequence length is longer than the specified maximum sequence length for this "
                "model (%d > %d). Running this sequence through the model will result in indexing errors",
                length, self.model_max_length,
            )  # fmt: skip

    def _frame(self, columns: dict[str, list[list]], a: Pieces, b: Pieces | None, add_special_tokens: bool) -> None:
        """Append one row: ``[CLS] A [SEP] (B [SEP])`` and its token types (and tracked columns)."""
        special = 1 if add_special_tokens else 0
        if b is None:
            ids = [self.cls_token_id, *a.ids, self.sep_token_id] if special else a.ids
            types = [0] * len(ids)
        else:
            ids = self.build_inputs_with_special_tokens(a.ids, b.ids) if special else a.ids + b.ids
            types = [0] * (len(a) + 2 * special) + [1] * (len(b) + special)
        columns["input_ids"].append(ids)
        columns["token_type_ids"].append(types)
        if "special_tokens_mask" in columns:
            mask = self.get_special_tokens_mask(a.ids, None if b is None else b.ids) if add_special_tokens else None
            columns["special_tokens_mask"].append(mask or [0] * len(columns["input_ids"][-1]))
        if "offset_mapping" not in columns:
            return
        edge = [None] * special
        offsets, words, sequences = [(0, 0)] * special + a.offsets, edge + a.words, edge + [0] * len(a)
        for pieces, sequence in ((b, 1),) if b is not None else ():
            offsets += [(0, 0)] * special + pieces.offsets
            words += edge + pieces.words
            sequences += edge + [sequence] * len(pieces)
        if special:
            offsets, words, sequences = offsets + [(0, 0)], words + [None], sequences + [None]
        columns["offset_mapping"].append(offsets)
        columns["_word_ids"].append(words)
        columns["_sequence_ids"].append(sequences)

    def pad(
        self,
        encoded_inputs: Mapping | Sequence[Mapping],
        padding: bool | str = True,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_attention_mask: bool | None = None,
        return_tensors: str | None = None,
    ) -> BatchEncoding:
        """Pad already tokenized inputs (one, a batch as a dict of lists, or a list of dicts, as a
        data collator has them), as transformers' ``tokenizer.pad``: ``input_ids`` with [PAD],
        ``token_type_ids`` with 0, ``attention_mask`` with 0 (made if absent), ``special_tokens_mask``
        with 1; other keys are left as they are. Tensors in give tensors out.
        ``return_attention_mask=False`` returns no mask (transformers would return the old one
        unpadded, out of step with the ids).

        >>> tok.pad([{"input_ids": [101, 102]}, {"input_ids": [101, 7592, 102]}])["input_ids"]  # doctest: +SKIP
        [[101, 102, 0], [101, 7592, 102]]
        """
        if isinstance(encoded_inputs, Sequence) and encoded_inputs and isinstance(encoded_inputs[0], Mapping):
            keys = list(encoded_inputs[0])
            if any(set(example) != set(keys) for example in encoded_inputs):
                raise ValueError("pad: every example must have the same keys")
            encoded_inputs = {key: [example[key] for example in encoded_inputs] for key in keys}
        if not isinstance(encoded_inputs, Mapping) or "input_ids" not in encoded_inputs:
            raise ValueError("pad expects a dict (or a list of dicts) with input_ids")
        columns = {}
        for key, value in encoded_inputs.items():
            if hasattr(value, "tolist"):  # a torch tensor or numpy array
                return_tensors = return_tensors or ("pt" if type(value).__module__.startswith("torch") else "np")
                value = value.tolist()
            elif isinstance(value, list) and value and hasattr(value[0], "tolist"):
                return_tensors = return_tensors or ("pt" if type(value[0]).__module__.startswith("torch") else "np")
                value = [row.tolist() for row in value]
            columns[key] = value
        single = not columns["input_ids"] or not isinstance(columns["input_ids"][0], (list, tuple))
        if single:
            columns = {key: [value] for key, value in columns.items()}
        columns = {key: [list(row) for row in rows] if key in PAD_VALUES or key == "input_ids" else rows
                   for key, rows in columns.items()}  # fmt: skip
        if return_attention_mask is not False and "attention_mask" not in columns:
            columns["attention_mask"] = [[1] * len(ids) for ids in columns["input_ids"]]
        mode = self._padding_mode(padding)
        _check_count(max_length, "max_length", minimum=1, optional=True)
        _check_count(pad_to_multiple_of, "pad_to_multiple_of", minimum=1, optional=True)
        side = check_side(padding_side or self.padding_side, "padding_side")
        if mode is not None and columns["input_ids"]:
            max_length = self.model_max_length if mode == "max_length" and max_length is None else max_length
            longest = max(map(len, columns["input_ids"]))
            target = padded_length(longest, mode, max_length, pad_to_multiple_of)
            pad_rows(columns, target, side, self.pad_token_id, self.vocab_file.name)
        if return_attention_mask is False:  # (transformers keeps an unpadded one: ragged, out of step)
            columns.pop("attention_mask", None)
        if return_tensors is not None:
            columns = to_tensors(columns, return_tensors)
        return BatchEncoding({key: rows[0] for key, rows in columns.items()} if single else columns)

    @staticmethod
    def _as_batch(value, name: str, split_into_words: bool) -> tuple[bool, list]:
        """(is it a batch, its inputs): each input a str, or (``split_into_words``) a list of words."""

        def words(item) -> bool:
            return isinstance(item, (list, tuple)) and all(isinstance(word, str) for word in item)

        if not split_into_words:
            if isinstance(value, str):
                return False, [value]
            if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
                return True, list(value)
            raise TypeError(f"{name} must be a str or a list of str, got {type(value).__name__}")
        if words(value):
            return False, [list(value)]
        if isinstance(value, (list, tuple)) and all(words(item) for item in value):
            return True, [list(item) for item in value]
        raise TypeError(
            f"with is_split_into_words=True, {name} must be a list of words (str) or a list of such lists, "
            f"got {type(value).__name__}"
        )

    @staticmethod
    def _truncation_strategy(truncation) -> str | None:
        """None (no truncation) or one of the strategies. As in transformers, ``max_length`` alone
        does not truncate: it is the length for ``truncation`` and ``padding="max_length"``."""
        if truncation is False or truncation is None or truncation == "do_not_truncate":
            return None
        strategy = "longest_first" if truncation is True else truncation
        if strategy not in TRUNCATION_STRATEGIES:
            raise ValueError(
                f"truncation must be True, False or one of {list(TRUNCATION_STRATEGIES)}, got {truncation!r}"
            )
        return strategy

    @staticmethod
    def _padding_mode(padding) -> str | None:
        if padding is False or padding is None or padding == "do_not_pad":
            return None
        if padding is True or padding == "longest":
            return "longest"
        if padding == "max_length":
            return "max_length"
        raise ValueError(f"padding must be True, False, 'longest' or 'max_length', got {padding!r}")


def _check_flags(optional: bool = False, **flags) -> None:
    """Each flag True or False (or None where that means "the default"): a "no" is not falsy here."""
    for name, value in flags.items():
        if not (isinstance(value, bool) or (optional and value is None)):
            raise TypeError(f"{name} must be True or False{' or None' if optional else ''}, got {value!r}")


def _token_id(value) -> int:
    """A token id as an int: ints and integer scalars (numpy, 0-d tensors) pass; "7", 7.0, None do not."""
    if isinstance(value, bool):
        raise TypeError(f"a token id must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"a token id must be an int, got {value!r}") from None


def _check_count(value, name: str, *, minimum: int, optional: bool = False) -> None:
    """An int argument (not a bool) of at least ``minimum``, or None where that is allowed."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}{' or None' if optional else ''}, got {value!r}")


def _read_tokenizer_config(config_file: Path) -> dict:
    """The settings minibert takes from tokenizer_config.json (others are ignored)."""
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ValueError("the top level is not a JSON object")
    except (ValueError, UnicodeDecodeError) as error:
        raise CheckpointError(f"malformed tokenizer config {config_file}: {error}") from None
    settings = {}
    for key in ("do_lower_case", "tokenize_chinese_chars", "do_basic_tokenize"):
        if isinstance(config.get(key), bool):
            settings[key] = config[key]
    if config.get("strip_accents") in (True, False, None):  # None: follow do_lower_case
        settings["strip_accents"] = config.get("strip_accents")
    max_length = config.get("model_max_length")
    if isinstance(max_length, int) and 0 < max_length < 1_000_000:  # transformers writes 1e30 for "none"
        settings["model_max_length"] = max_length
    for key in ("padding_side", "truncation_side"):
        if key in config:
            if config[key] not in SIDES:
                raise CheckpointError(f"{config_file}: {key} must be 'right' or 'left', got {config[key]!r}")
            settings[key] = config[key]
    for name in SPECIAL_TOKEN_NAMES:
        value = config.get(name)
        if isinstance(value, dict):  # serialized AddedToken
            value = value.get("content")
        if isinstance(value, str):
            settings[name] = value
    return settings
