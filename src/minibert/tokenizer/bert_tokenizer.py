"""``BertTokenizer``: the vocabulary, the two stages of algorithm.py, and the way back from ids.

    >>> from minibert import BertTokenizer

It holds ``vocab.txt`` ({piece: id}) and the special tokens, keeps special tokens typed in a text
(``[MASK]``) whole, runs each remaining part through ``BasicTokenizer`` and ``WordPieceTokenizer``
(algorithm.py), and turns ids back into pieces and text. transformers' call API (batches, pairs,
truncation, padding, offsets) comes from ``TransformersCallAPI`` (call_api.py); the files it
reads and writes from files.py and tokenizer_json.py. ``encode_and_show_work`` returns every step.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import CheckpointError, ModelNotFoundError
from ..formats.atomic_files import write_atomically
from ..formats.hub import resolve_file
from .algorithm import BasicTokenizer, WordPieceTokenizer
from .arguments import check_flags, token_id
from .call_api import TransformersCallAPI
from .encoding import Pieces, check_side
from .files import _DEFAULT_SPECIAL_TOKENS, SPECIAL_TOKEN_NAMES, google_lower_case, load_vocab, read_tokenizer_config

logger = logging.getLogger("minibert")


class BertTokenizer(TransformersCallAPI):
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
        additional_special_tokens: Iterable[str] = (),
        **special_tokens: str,
    ):
        """``vocab_file``: vocab.txt; or pass ``vocab`` ({piece: id}, e.g. from tokenizer.json) and
        the file it came from as ``vocab_file`` (named in error messages).

        ``do_basic_tokenize=False`` skips stage 1 (no cleaning, lowercasing or punctuation
        splitting): words are what whitespace separates, as in transformers' slow BertTokenizer."""
        unknown = set(special_tokens) - set(SPECIAL_TOKEN_NAMES)
        if unknown:
            raise TypeError(f"BertTokenizer got unexpected arguments: {sorted(unknown)}")
        check_flags(do_lower_case=do_lower_case, tokenize_chinese_chars=tokenize_chinese_chars,
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
        self._base_vocab_size = len(self.vocab)
        additional = list(additional_special_tokens)
        absent = [token for token in additional if token not in self.vocab]
        if absent:
            raise CheckpointError(f"additional special tokens {absent} are not in the vocabulary {self.vocab_file}")
        self.additional_special_tokens = additional
        self._set_specials()
        self._warned_too_long = False

    def _set_specials(self) -> None:
        """The pieces typed in a text that are kept whole (the special tokens), longest first."""
        roles = [getattr(self, name) for name in SPECIAL_TOKEN_NAMES]
        specials = sorted({t for t in [*roles, *self.additional_special_tokens] if t in self.vocab}, key=len,
                          reverse=True)  # fmt: skip
        self._special_split = re.compile("(" + "|".join(re.escape(token) for token in specials) + ")")
        self._special_starts = "".join(sorted({token[0] for token in specials}))  # "[" for BERT's own
        self.all_special_ids = sorted({self.vocab[token] for token in specials})

    def _may_hold_special(self, text: str) -> bool:
        return any(character in text for character in self._special_starts)

    def add_special_tokens(self, special_tokens_dict: dict) -> int:
        """Add special tokens, as transformers does: ``{"additional_special_tokens": ["<e1>", ...]}``
        and/or a role (``"mask_token": "[MASK]"``, ...). A new piece gets the next id; in a text it
        is kept whole, matched exactly (not lowercased). Returns how many pieces were new: grow
        the model's embeddings by as many (``model.resize_token_embeddings(len(tokenizer))``)."""
        unknown = set(special_tokens_dict) - {"additional_special_tokens", *SPECIAL_TOKEN_NAMES}
        if unknown:
            raise ValueError(f"add_special_tokens: unknown keys {sorted(unknown)}")
        added = 0
        for name, value in special_tokens_dict.items():
            tokens = list(value) if name == "additional_special_tokens" else [value]
            if not all(isinstance(token, str) and token for token in tokens):
                raise TypeError(f"add_special_tokens: {name} must be non-empty strings, got {value!r}")
            for token in tokens:
                if token not in self.vocab:
                    self.vocab[token] = len(self.vocab)
                    self.ids_to_tokens[self.vocab[token]] = token
                    added += 1
            if name == "additional_special_tokens":
                self.additional_special_tokens = list(dict.fromkeys([*self.additional_special_tokens, *tokens]))
            else:
                setattr(self, name, tokens[0])
                setattr(self, name.replace("_token", "_token_id"), self.vocab[tokens[0]])
        if added:
            self._vocab_is_file = False  # saved from self.vocab from now on, the new pieces included
        self._set_specials()
        return added

    def add_tokens(self, new_tokens: str | Iterable[str], special_tokens: bool = False) -> int:
        """``special_tokens=True``: as ``add_special_tokens({"additional_special_tokens": ...})``.
        Ordinary added tokens are refused: transformers matches them in the *normalized* text,
        splitting words around them (``"newwords"`` holds ``"newword"``), which minibert does not
        reproduce exactly."""
        tokens = [new_tokens] if isinstance(new_tokens, str) else list(new_tokens)
        if not special_tokens:
            raise NotImplementedError("add_tokens of non-special tokens is not implemented (transformers matches them "
                                      "in the normalized text, splitting words around them); pass "
                                      "special_tokens=True for tokens kept whole and matched exactly")  # fmt: skip
        return self.add_special_tokens({"additional_special_tokens": tokens})

    model_input_names = ["input_ids", "token_type_ids", "attention_mask"]  # what BertModel takes

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """{"unk_token": "[UNK]", "sep_token": "[SEP]", ...}: the special tokens by role."""
        return dict(zip(SPECIAL_TOKEN_NAMES, (self.unk_token, self.sep_token, self.pad_token, self.cls_token,
                                              self.mask_token)))  # fmt: skip

    @property
    def all_special_tokens(self) -> list[str]:
        """The special tokens the vocabulary has, in the roles' order (as transformers lists them)."""
        return list(dict.fromkeys(token for token in self.special_tokens_map.values() if token in self.vocab))

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
            settings = read_tokenizer_config(Path(config_file))
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
        if self.additional_special_tokens:
            specials["additional_special_tokens"] = list(self.additional_special_tokens)
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
        """The vocabulary's size without the pieces added since loading (as transformers counts);
        ``len(tokenizer)`` counts them."""
        return self._base_vocab_size

    def __len__(self) -> int:
        return len(self.vocab)

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def _segments(self, text: str) -> Iterator[tuple[bool, str, int]]:
        """(is a special token, part, where it starts): special tokens such as ``[MASK]`` typed in
        the text are kept whole, the rest goes through the basic tokenizer."""
        if not self._may_hold_special(text):  # fast path: no special token can occur
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
        if not self._may_hold_special(text):  # fast path: no special token can occur
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
            return self._token(token_id(ids))
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return [self._token(token_id(index)) for index in ids]

    def _token(self, index: int) -> str:
        token = self.ids_to_tokens.get(index)
        if token is None:
            raise ValueError(f"token id {index} is outside the vocabulary [0, {self.vocab_size})")
        return token

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Ids back to text (``convert_tokens_to_string`` of their pieces), without the special
        tokens if asked.

        >>> tok.decode([101, 1045, 2293, 3000, 102], skip_special_tokens=True)   # doctest: +SKIP
        'i love paris'
        """
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        special = set(self.all_special_ids) if skip_special_tokens else ()
        return self.convert_tokens_to_string(
            [self._token(index) for index in map(token_id, ids) if index not in special]
        )

    def convert_tokens_to_string(self, tokens: Iterable[str]) -> str:
        """Pieces back to text, as transformers' WordPiece decoder does it: a ``##`` piece is glued
        to the piece before it (the first piece keeps its ``##``), other pieces follow a space, and
        a space before ``.``, ``?``, ``!``, ``,`` and a few English contractions is removed.

        >>> tok.convert_tokens_to_string(["love", "##ly", "paris", "!"])   # doctest: +SKIP
        'lovely paris!'
        """
        parts = []
        for number, token in enumerate(tokens):
            if number == 0:
                parts.append(token)
                continue
            part = token[2:] if token.startswith("##") else " " + token
            for spaced, glued in _CLEANUPS:
                part = part.replace(spaced, glued)
            parts.append(part)
        return "".join(parts)


# The WordPiece decoder's clean-up, applied to each piece with the space before it (tokenizers'
# decoders/wordpiece.rs).
_CLEANUPS = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)
