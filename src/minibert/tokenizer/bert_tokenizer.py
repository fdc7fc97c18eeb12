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
from .added_tokens import AddedToken, Matcher
from .algorithm import BasicTokenizer, WordPieceTokenizer
from .arguments import check_flags, one_text, token_id
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
        added_tokens: Iterable[tuple[int, AddedToken]] = (),
        added_tokens_file: str | os.PathLike | None = None,
        **special_tokens: str,
    ):
        """``vocab_file``: vocab.txt; or pass ``vocab`` ({piece: id}, e.g. from tokenizer.json) and
        the file it came from as ``vocab_file`` (named in error messages).

        ``added_tokens``: (id, ``AddedToken``) beyond the vocabulary or marking its pieces (what
        ``add_tokens`` made, as tokenizer_config.json's ``added_tokens_decoder`` keeps it), read
        from ``added_tokens_file`` (named in error messages).

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
        self._next_free_id = max(len(self.vocab), max(self.ids_to_tokens, default=-1) + 1)  # _register keeps it
        self._base_vocab = dict(self.vocab)  # what WordPiece was trained with; vocab.txt when saved
        self.model_max_length = model_max_length
        self.padding_side = check_side(padding_side, "padding_side")
        self.truncation_side = check_side(truncation_side, "truncation_side")
        self.do_basic_tokenize = do_basic_tokenize
        self.strip_accents = strip_accents  # as given (None: follow do_lower_case)
        self.basic = BasicTokenizer(do_lower_case, strip_accents, tokenize_chinese_chars)
        self._added: dict[str, AddedToken] = {}  # content → token (added_tokens.py), in the order added
        self._spellings: dict[int, str] = {}  # id → the piece as shown, where it is not vocab.txt's line
        source = added_tokens_file or vocab_file
        self._restore_added(sorted(added_tokens, key=lambda entry: entry[0]), source)  # before the roles: they
        # may be among them
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
        # WordPiece sees the vocabulary it was trained with: added tokens are cut out before it runs.
        self.wordpiece = WordPieceTokenizer(self._base_vocab, self.unk_token_id)
        self._base_vocab_size = len(self._base_vocab)
        additional = list(additional_special_tokens)
        absent = [token for token in additional if token not in self.vocab]
        if absent:
            raise CheckpointError(f"additional special tokens {absent} are not in the vocabulary {self.vocab_file}")
        self.additional_special_tokens = additional
        self._check_restored(source)
        self._make_matchers()
        self._warned_too_long = False

    def _special_tokens(self) -> list[str]:
        roles = [getattr(self, name) for name in SPECIAL_TOKEN_NAMES]
        return list(dict.fromkeys(t for t in [*roles, *self.additional_special_tokens] if t in self.vocab))

    def _make_matchers(self) -> None:
        """What is cut out of a text before the basic tokenizer: the special tokens and the added
        tokens matched as typed (``_as_typed``), then the added tokens matched after normalization
        (``_after_normalization``; see added_tokens.py)."""
        specials = self._special_tokens()
        as_typed = {token: self.vocab[token] for token in specials}
        normalized: dict[str, int] = {}
        for content, token in self._added.items():
            if token.normalized:
                normalized[self._normalized(content)] = self.vocab[content]
            else:
                as_typed[content] = self.vocab[content]
        self._as_typed = Matcher(as_typed)
        self._after_normalization = Matcher(normalized)
        self.all_special_ids = sorted({self.vocab[token] for token in specials})
        # decode(skip_special_tokens=True) also skips the tokens added as special (add_tokens(...,
        # special_tokens=True)), which all_special_ids does not list (as in transformers 5)
        self._skipped_when_decoding = frozenset(self.all_special_ids) | {
            self.vocab[content] for content, token in self._added.items() if token.special}  # fmt: skip

    def _normalized(self, text: str) -> str:
        return self.basic.normalize(self.basic.clean(text))

    def _may_hold_special(self, text: str) -> bool:
        return self._as_typed.may_occur_in(text)

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
                    self._register(AddedToken(token, normalized=False, special=True), self._next_id())
                    added += 1
                elif token in self._added and not self._added[token].special:  # an ordinary added token
                    self._register(AddedToken(token, normalized=False, special=True), self.vocab[token])
            if name == "additional_special_tokens":
                self.additional_special_tokens = list(dict.fromkeys([*self.additional_special_tokens, *tokens]))
            else:
                setattr(self, name, tokens[0])
                setattr(self, name.replace("_token", "_token_id"), self.vocab[tokens[0]])
        self._make_matchers()
        return added

    def add_tokens(self, new_tokens, special_tokens: bool = False) -> int:
        """Add tokens the vocabulary lacks, as transformers does (added_tokens.py): each is cut out
        of every text before word pieces are made, wherever it occurs; an ordinary token is matched
        after normalization (``"NewWord"`` matches ``"newwords"``: ``newword`` + ``s``), a special
        one (``special_tokens=True``) as typed. ``new_tokens``: a str, or a list of str or
        ``AddedToken`` (minibert's or ``tokenizers``'). A token gets the next id, or keeps the
        vocabulary's if it has the piece. Returns how many tokens were added or changed (as
        transformers counts): grow the model's embeddings with
        ``model.resize_token_embeddings(len(tokenizer))``.

        >>> tok.add_tokens(["NewWord"])                 # doctest: +SKIP
        1
        >>> tok.tokenize("NEWWORDS")                    # doctest: +SKIP
        ['newword', 's']
        """
        values = [new_tokens] if isinstance(new_tokens, str) or hasattr(new_tokens, "content") else list(new_tokens)
        tokens = [AddedToken.of(value, special_tokens) for value in values]
        if not self.do_basic_tokenize and any(token.normalized for token in tokens):
            raise NotImplementedError("add_tokens with do_basic_tokenize=False is not implemented (transformers' "
                                      "fast tokenizer, which minibert follows here, always normalizes)")  # fmt: skip
        specials = set(self._special_tokens())
        spellings = {self._spellings[self.vocab[content]]: content for content, token in self._added.items()
                     if token.normalized}  # fmt: skip
        accepted: list[AddedToken] = []
        pending: dict[str, AddedToken] = {}  # content → the token accepted last for it in this call
        for token in tokens:
            if not token.content or pending.get(token.content, self._added.get(token.content)) == token:
                continue  # as transformers: empty, or already added alike; not counted
            if token.special and token.content in specials:
                continue
            self._check_addable(token, specials, spellings)
            accepted.append(token)
            pending[token.content] = token
        for token in accepted:  # every token checked first: a refused call adds nothing
            index = self.vocab.get(token.content)
            self._register(token, self._next_id() if index is None else index)
        self._make_matchers()
        return len(accepted)  # (a special one is matched as typed, but is not an additional special token)

    def _check_addable(self, token: AddedToken, specials: set[str], spellings: dict[str, str]) -> None:
        """Refuse what transformers does not do reproducibly (see added_tokens.py). ``spellings``:
        the normalized spelling → content of each added token matched after normalization so far;
        the token's own is recorded in it (one lookup per token, however many were added)."""
        if token.content in specials and not token.special:
            raise ValueError(f"add_tokens: {token.content!r} is a special token; transformers would turn it into an "
                             "ordinary token matched after normalization, which minibert does not do")  # fmt: skip
        normalized = self._normalized(token.content)
        if not token.normalized:
            if spellings.get(normalized) == token.content:  # it was matched after normalization until now
                del spellings[normalized]
            return
        if not normalized:
            raise ValueError(f"add_tokens: {token.content!r} is empty once normalized (cleaning removes control and "
                             "format characters), so it would match between every two characters")  # fmt: skip
        other = spellings.setdefault(normalized, token.content)
        if other != token.content:
            raise ValueError(f"add_tokens: {token.content!r} and the added token {other!r} are both "
                             f"{normalized!r} once normalized: which id such text gets is not defined "
                             "(transformers picks one at random per process)")  # fmt: skip

    def _next_id(self) -> int:
        return self._next_free_id

    def _register(self, token: AddedToken, index: int) -> None:
        """Record an added token under ``index`` (a new id, or the vocabulary's for its piece)."""
        self._added[token.content] = token
        self.vocab[token.content] = index
        self.ids_to_tokens.setdefault(index, token.content)
        self._next_free_id = max(self._next_free_id, len(self.vocab), index + 1)
        if token.normalized:  # shown as matched: normalized ("NewWord" → "newword", "中" → " 中 ")
            self._spellings[index] = self._normalized(token.content)
        else:
            self._spellings.pop(index, None)

    def _restore_added(self, entries: list[tuple[int, AddedToken]], source: str | os.PathLike) -> None:
        """Added tokens read from a file (tokenizer_config.json's ``added_tokens_decoder``,
        tokenizer.json's ``added_tokens``), in the order of their ids, each under the id the file
        gives: a piece of the vocabulary keeps its id, a new one takes the next."""
        for index, token in entries:
            known = self.vocab.get(token.content)
            if known is None and index != self._next_id():
                raise CheckpointError(f"{source}: added token {token.content!r} has id {index}; the next free id "
                                      f"is {self._next_id()} (added ids continue the vocabulary)")  # fmt: skip
            if known is not None and known != index:
                raise CheckpointError(f"{source}: added token {token.content!r} has id {index}, but the vocabulary "
                                      f"gives it {known}")  # fmt: skip
            self._register(token, index)

    def _check_restored(self, source: str | os.PathLike) -> None:
        """The ordinary added tokens read from a file, checked once the special tokens are known."""
        specials, spellings = set(self._special_tokens()), {}
        for token in self._added.values():
            if not token.special:
                try:
                    self._check_addable(token, specials, spellings)
                except ValueError as error:
                    raise CheckpointError(f"{source}: {error}") from None

    @property
    def added_tokens_decoder(self) -> dict[int, AddedToken]:
        """{id: AddedToken}: the special tokens and every added token, as transformers lists them."""
        tokens = {self.vocab[t]: AddedToken(t, normalized=False, special=True) for t in self._special_tokens()}
        tokens.update({self.vocab[content]: token for content, token in self._added.items()})
        return dict(sorted(tokens.items()))

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
        if "added_tokens" in settings:
            settings["added_tokens_file"] = vocab_file if "added_tokens" in from_json else config_file
        return cls(vocab_file, vocab=vocab, **settings)

    def save_pretrained(self, save_directory: str | os.PathLike) -> tuple[str, ...]:
        """Write ``vocab.txt``, ``tokenizer_config.json`` and ``special_tokens_map.json`` to a
        directory (created if needed; each file written atomically), loadable by
        ``BertTokenizer.from_pretrained`` and by transformers' ``AutoTokenizer``."""
        directory = Path(save_directory)
        if directory.exists() and not directory.is_dir():
            raise NotADirectoryError(f"save_pretrained: {directory} exists and is not a directory")
        directory.mkdir(parents=True, exist_ok=True)
        # vocab.txt is the vocabulary WordPiece knows; added tokens go to added_tokens_decoder.
        if self._vocab_is_file:  # the file itself: a piece listed twice keeps its lines
            vocab_bytes = self.vocab_file.read_bytes()
        else:
            pieces = {index: piece for piece, index in self._base_vocab.items()}
            ids = sorted(pieces)
            if ids != list(range(len(ids))):
                gap = next(i for i, index in enumerate(ids) if i != index)
                raise ValueError(f"cannot write vocab.txt: {self.vocab_file}'s vocabulary has no piece with id {gap}")
            vocab_bytes = "".join(pieces[index] + "\n" for index in ids).encode("utf-8")
        specials = {name: getattr(self, name) for name in SPECIAL_TOKEN_NAMES}
        if self.additional_special_tokens:
            specials["additional_special_tokens"] = list(self.additional_special_tokens)
        added = {str(index): token.as_json() for index, token in self.added_tokens_decoder.items()}
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
            **({"added_tokens_decoder": added} if self._added else {}),
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

    def _segments(self, text: str) -> Iterator[tuple[int | None, str, int]]:
        """(the id of a token matched as typed or None, part, where it starts): special tokens such
        as ``[MASK]`` typed in the text are kept whole, the rest goes on to the basic tokenizer."""
        position = 0
        for start, end, index in self._as_typed.finditer(text):
            if start > position:
                yield None, text[position:start], position
            yield index, text[start:end], start
            position = end
        if position < len(text):
            yield None, text[position:], position

    def _basic_words(self, text: str) -> list[str]:
        return self.basic.tokenize(text) if self.do_basic_tokenize else text.split()

    def _units(self, text: str, track: bool) -> list[tuple[int | None, str, list[int] | None]]:
        """The text's words, each as (the id of the added token it is, or None; the word; with
        ``track``, the index in ``text`` of each of its characters). Added tokens are cut out
        first (added_tokens.py); the rest are the basic tokenizer's words."""
        units: list[tuple[int | None, str, list[int] | None]] = []
        for index, part, start in self._segments(text):
            if index is not None:
                units.append((index, part, list(range(start, start + len(part))) if track else None))
            elif self._after_normalization and self._after_normalization.occurs_in(self._normalized(part)):
                units.extend(self._cut_normalized(part, start))
            elif not track:
                units.extend((None, word, None) for word in self._basic_words(part))
            elif self.do_basic_tokenize:
                units.extend((None, word, origins) for word, origins in self.basic.words_with_origins(part, start))
            else:
                units.extend((None, match.group(), list(range(start + match.start(), start + match.end())))
                             for match in re.finditer(r"\S+", part))  # fmt: skip
        return units

    def _cut_normalized(self, part: str, start: int) -> list[tuple[int | None, str, list[int]]]:
        """Added tokens matched in the normalized text, the rest split into words there."""
        characters = self.basic.normalized_with_origins(part, start)
        normalized = "".join(character for character, _ in characters)
        units: list[tuple[int | None, str, list[int]]] = []
        position = 0
        for begin, end, index in self._after_normalization.finditer(normalized):
            units.extend((None, word, origins) for word, origins in self.basic.split_words(characters[position:begin]))
            units.append((index, normalized[begin:end], [origin for _, origin in characters[begin:end]]))
            position = end
        units.extend((None, word, origins) for word, origins in self.basic.split_words(characters[position:]))
        return units

    def _plain(self, text: str) -> bool:
        """No added or special token can occur in ``text``: the fast path."""
        return not self._after_normalization and not self._may_hold_special(text)

    def piece_ids(self, text: str) -> list[int]:
        """Ids of ``text``'s word pieces, without [CLS]/[SEP]."""
        pieces = self.wordpiece.pieces
        ids: list[int] = []
        if self._plain(text):
            for word in self._basic_words(text):
                ids.extend(pieces(word))
            return ids
        for index, word, _ in self._units(text, track=False):
            if index is None:
                ids.extend(pieces(word))
            else:
                ids.append(index)
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
        for word_index, (added, word, origins) in enumerate(self._units(text, track=True)):
            word_ids = [added] if added is not None else self.wordpiece.pieces(word)
            if added is not None or word_ids == [self.unk_token_id]:  # the whole word (or [UNK] itself)
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
        units = [(word, [index] if index is not None else self.wordpiece.pieces(word))
                 for index, word, _ in self._units(text, track=False)]  # fmt: skip
        return [word for word, _ in units], [ids for _, ids in units]

    def tokenize(self, text: str) -> list[str]:
        """The word pieces of ``text`` as strings (no [CLS]/[SEP])."""
        text = one_text(text, "tokenize", "[tokenizer.tokenize(text) for text in texts], or tokenizer(texts) for ids")
        return self.convert_ids_to_tokens(self.piece_ids(text))

    def encode_and_show_work(self, text: str) -> dict:
        """Every intermediate step of tokenizing ``text``, for learning and debugging.

        >>> steps = tok.encode_and_show_work("Héllo, unaffable!")     # doctest: +SKIP
        >>> steps["basic_tokens"], steps["word_pieces"]                # doctest: +SKIP
        (['hello', ',', 'una', ...
        """
        text = one_text(text, "encode_and_show_work", "one call per text")
        cleaned = self.basic.clean(text)
        normalized = self.basic.normalize(cleaned)
        words, piece_ids = self.words_and_pieces(text)
        word_pieces = [self.convert_ids_to_tokens(ids) for ids in piece_ids]
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
        token = self._spellings.get(index) or self.ids_to_tokens.get(index)
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
        special = self._skipped_when_decoding if skip_special_tokens else ()
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
