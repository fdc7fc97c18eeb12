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
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

from .errors import CheckpointError, ModelNotFoundError
from .hub import resolve_file

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


class BatchEncoding(dict):
    """What the tokenizer returns: a dict (``input_ids``, ``token_type_ids``, ``attention_mask``)
    whose keys can also be read as attributes, like transformers' ``BatchEncoding``."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


SPECIAL_TOKEN_NAMES = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_DEFAULT_SPECIAL_TOKENS = {
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}
_TRUNCATION_STRATEGIES = {"longest_first", "only_first", "only_second"}


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
        model_max_length: int = 512,
        vocab: dict[str, int] | None = None,
        **special_tokens: str,
    ):
        """``vocab_file``: vocab.txt; or pass ``vocab`` ({piece: id}, e.g. from tokenizer.json) and
        the file it came from as ``vocab_file`` (named in error messages)."""
        unknown = set(special_tokens) - set(SPECIAL_TOKEN_NAMES)
        if unknown:
            raise TypeError(f"BertTokenizer got unexpected arguments: {sorted(unknown)}")
        self.vocab_file = Path(vocab_file)
        self.vocab = dict(vocab) if vocab is not None else load_vocab(vocab_file)
        self.ids_to_tokens = {index: token for token, index in self.vocab.items()}
        self.model_max_length = model_max_length
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

    # ------------------------------------------------------------------ loading

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
            try:
                config = json.loads(Path(config_file).read_text(encoding="utf-8"))
                if not isinstance(config, dict):
                    raise ValueError("the top level is not a JSON object")
            except (ValueError, UnicodeDecodeError) as error:
                raise CheckpointError(f"malformed tokenizer config {config_file}: {error}") from None
            for key in ("do_lower_case", "tokenize_chinese_chars"):
                if isinstance(config.get(key), bool):
                    settings[key] = config[key]
            if config.get("strip_accents") in (True, False, None):  # None: follow do_lower_case
                settings["strip_accents"] = config.get("strip_accents")
            max_length = config.get("model_max_length")
            if isinstance(max_length, int) and 0 < max_length < 1_000_000:
                settings["model_max_length"] = max_length
            for name in SPECIAL_TOKEN_NAMES:
                value = config.get(name)
                if isinstance(value, dict):  # serialized AddedToken
                    value = value.get("content")
                if isinstance(value, str):
                    settings[name] = value
        elif vocab is None and os.path.isdir(name_or_path):  # e.g. unpacked from Google's zip: no tokenizer config
            lower, reason = google_lower_case(os.path.abspath(name_or_path), load_vocab(vocab_file))
            settings["do_lower_case"] = lower
            logger.info("%s has no tokenizer_config.json: %s, as %s", name_or_path,
                        "lowercasing" if lower else "not lowercasing", reason)  # fmt: skip
        settings.update(from_json)  # tokenizer.json's pipeline is what `tokenizers` runs: it wins
        return cls(vocab_file, vocab=vocab, **settings)

    # ------------------------------------------------------------------ text → pieces

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __len__(self) -> int:
        return len(self.vocab)

    def _words(self, text: str) -> list[str]:
        """Basic tokens of ``text``; special tokens such as ``[MASK]`` are kept whole."""
        if "[" not in text:  # fast path: no special token can occur
            return self.basic.tokenize(text)
        words = []
        for index, part in enumerate(self._special_split.split(text)):
            if index % 2:
                words.append(part)
            elif part:
                words.extend(self.basic.tokenize(part))
        return words

    def piece_ids(self, text: str) -> list[int]:
        """Ids of ``text``'s word pieces, without [CLS]/[SEP]."""
        pieces = self.wordpiece.pieces
        ids: list[int] = []
        for word in self._words(text):
            ids.extend(pieces(word))
        return ids

    def word_ids(self, text: str) -> tuple[list[str], list[list[int]]]:
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
            return self._token(ids)
        return [self._token(int(index)) for index in ids]

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
            index = int(index)
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

    def encode(self, text: str, text_pair: str | None = None, **kwargs) -> list[int]:
        """The framed ids of one text (or pair), e.g. ``[101, 1045, 2293, 3000, 102]``."""
        return self(text, text_pair, **kwargs)["input_ids"]

    def __call__(
        self,
        text: str | Sequence[str],
        text_pair: str | Sequence[str] | None = None,
        *,
        add_special_tokens: bool = True,
        padding: bool | str = False,
        truncation: bool | str = False,
        max_length: int | None = None,
        stride: int = 0,
        return_overflowing_tokens: bool = False,
        return_tensors: str | None = None,
    ) -> BatchEncoding:
        """Tokenize one text, a pair, or a batch, and frame, truncate, window and pad the result.

        * ``text`` / ``text_pair``: a str each, or lists of str of the same length (a batch).
        * ``truncation``: ``True``/``"longest_first"`` (cut the longer of the pair first),
          ``"only_first"``, ``"only_second"``, or ``False``; up to ``max_length`` tokens including
          [CLS]/[SEP] (default ``model_max_length``, 512).
        * ``return_overflowing_tokens=True`` with ``stride=k``: instead of dropping what does not
          fit, return every window of the long text, consecutive windows sharing ``k`` tokens;
          ``overflow_to_sample_mapping`` says which input each window came from.
        * ``padding``: ``True``/``"longest"`` pads to the longest row, ``"max_length"`` to
          ``max_length``; pads are ``[PAD]`` with ``attention_mask`` 0.
        * ``return_tensors``: ``None`` (lists), ``"pt"`` (torch tensors) or ``"np"`` (numpy).
        """
        batched = not isinstance(text, str)
        texts = self._as_list(text, "text")
        pairs = None
        if text_pair is not None:
            if batched == isinstance(text_pair, str):
                raise TypeError("text and text_pair must both be a str, or both be lists of str")
            pairs = self._as_list(text_pair, "text_pair")
            if len(pairs) != len(texts):
                raise ValueError(f"text has {len(texts)} items but text_pair has {len(pairs)}")
        strategy = self._truncation_strategy(truncation)
        padding_mode = self._padding_mode(padding)
        if strategy or padding_mode == "max_length":
            max_length = self.model_max_length if max_length is None else max_length
        if return_overflowing_tokens and strategy is None:
            raise ValueError("return_overflowing_tokens=True needs truncation (and max_length)")

        rows: list[tuple[list[int], list[int] | None]] = []
        sample_of_row: list[int] = []
        for sample, text_a in enumerate(texts):
            ids_a = self.piece_ids(text_a)
            ids_b = self.piece_ids(pairs[sample]) if pairs is not None else None
            windows = [(ids_a, ids_b)]
            if strategy is not None:
                added = (3 if ids_b is not None else 2) if add_special_tokens else 0
                windows = _truncate(ids_a, ids_b, max_length - added, strategy, stride, return_overflowing_tokens)
            rows.extend(windows)
            sample_of_row.extend([sample] * len(windows))

        input_ids, token_type_ids = [], []
        for ids_a, ids_b in rows:
            if add_special_tokens:
                ids = self.build_inputs_with_special_tokens(ids_a, ids_b)
                types = [0] * (len(ids_a) + 2) + ([1] * (len(ids_b) + 1) if ids_b is not None else [])
            else:
                ids = ids_a + (ids_b or [])
                types = [0] * len(ids_a) + [1] * len(ids_b or [])
            input_ids.append(ids)
            token_type_ids.append(types)
        attention_mask = [[1] * len(ids) for ids in input_ids]

        if padding_mode is not None and input_ids:
            target = max(map(len, input_ids)) if padding_mode == "longest" else max_length
            for ids, types, mask in zip(input_ids, token_type_ids, attention_mask):
                missing = target - len(ids)
                if missing > 0:
                    if self.pad_token_id is None:
                        raise ValueError(
                            f"cannot pad: the vocabulary {self.vocab_file.name} has no {self.pad_token} piece "
                            "(pass padding=False, or a pad_token that is in it)"
                        )
                    ids.extend([self.pad_token_id] * missing)
                    types.extend([0] * missing)
                    mask.extend([0] * missing)

        encoding = BatchEncoding(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        if return_overflowing_tokens:
            encoding["overflow_to_sample_mapping"] = sample_of_row
        if not batched and not return_overflowing_tokens and return_tensors is None:
            return BatchEncoding({key: value[0] for key, value in encoding.items()})
        if return_tensors is not None:
            encoding = _to_tensors(encoding, return_tensors)
        return encoding

    @staticmethod
    def _as_list(value, name: str) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
            return list(value)
        raise TypeError(f"{name} must be a str or a list of str, got {type(value).__name__}")

    @staticmethod
    def _truncation_strategy(truncation) -> str | None:
        """None (no truncation) or one of the strategies. As in transformers, ``max_length`` alone
        does not truncate: it is the length for ``truncation`` and ``padding="max_length"``."""
        if truncation is False or truncation is None or truncation == "do_not_truncate":
            return None
        strategy = "longest_first" if truncation is True else truncation
        if strategy not in _TRUNCATION_STRATEGIES:
            raise ValueError(
                f"truncation must be True, False or one of {sorted(_TRUNCATION_STRATEGIES)}, got {truncation!r}"
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


def window_starts(length: int, size: int, stride: int) -> list[int]:
    """Where each window of ``size`` ids starts, consecutive windows sharing ``stride`` ids, the
    last one ending at ``length``.

    >>> window_starts(7, size=4, stride=1)
    [0, 3]
    """
    starts = [0]
    while starts[-1] + size < length:
        starts.append(starts[-1] + size - stride)
    return starts


def windows(ids: list[int], size: int, stride: int) -> list[list[int]]:
    """Consecutive windows of ``size`` ids sharing ``stride`` ids (see ``window_starts``).

    >>> windows(list(range(7)), size=4, stride=1)
    [[0, 1, 2, 3], [3, 4, 5, 6]]
    """
    return [ids[start : start + size] for start in window_starts(len(ids), size, stride)]


def _truncate(ids_a, ids_b, budget, strategy, stride, keep_overflow):
    """Cut a text (or pair) to ``budget`` pieces; return the kept rows (several if ``keep_overflow``)."""
    if budget <= 0:
        raise ValueError(f"max_length is too small to hold even the special tokens (room for {budget} pieces)")
    total = len(ids_a) + (len(ids_b) if ids_b is not None else 0)
    if keep_overflow and stride >= budget:
        raise ValueError(
            f"stride={stride} must be smaller than the room for text in each window ({budget} pieces = "
            f"max_length minus the special tokens)"
        )
    if ids_b is None:
        return (
            [(window, None) for window in windows(ids_a, budget, stride)] if keep_overflow else [(ids_a[:budget], None)]
        )
    if total <= budget:
        return [(ids_a, ids_b)]
    if strategy == "longest_first":
        if keep_overflow:
            raise ValueError(
                "return_overflowing_tokens with a pair of texts needs truncation='only_first' or "
                "'only_second' (which text to cut into windows)"
            )
        # Same split as Hugging Face tokenizers: the shorter text keeps what it can, and if both are
        # too long each gets half.
        short, long_ = sorted((len(ids_a), len(ids_b)))
        keep_short, keep_long = short, (short if short > budget else max(short, budget - short))
        if keep_short + keep_long > budget:
            keep_short = budget // 2
            keep_long = keep_short + budget % 2
        if len(ids_a) > len(ids_b):
            keep_short, keep_long = keep_long, keep_short
        return [(ids_a[:keep_short], ids_b[:keep_long])]
    cut_first = strategy == "only_first"
    fixed = len(ids_b) if cut_first else len(ids_a)
    room = budget - fixed
    if room <= 0:
        which = "first" if cut_first else "second"
        raise ValueError(
            f"cannot truncate only the {which} text: the other one alone has {fixed} pieces, "
            f"more than the {budget} that fit in max_length"
        )
    cut = ids_a if cut_first else ids_b
    parts = windows(cut, room, stride) if keep_overflow else [cut[:room]]
    return [(part, ids_b) if cut_first else (ids_a, part) for part in parts]


def _to_tensors(encoding: BatchEncoding, kind: str) -> BatchEncoding:
    lengths = {len(row) for row in encoding["input_ids"]}
    if len(lengths) > 1:
        raise ValueError("rows have different lengths; pass padding=True to return tensors")
    if kind == "pt":
        import torch

        convert = lambda rows: torch.tensor(rows, dtype=torch.long)  # noqa: E731
    elif kind == "np":
        import numpy as np

        convert = lambda rows: np.array(rows, dtype=np.int64)  # noqa: E731
    else:
        raise ValueError(f"return_tensors must be None, 'pt' or 'np', got {kind!r}")
    return BatchEncoding({key: convert(value) for key, value in encoding.items()})
