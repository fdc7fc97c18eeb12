"""``BertTokenizer``: the vocabulary, the two stages of algorithm.py, and the way back from ids.

    >>> from minibert import BertTokenizer

It holds ``vocab.txt`` ({piece: id}) and the special tokens, keeps special tokens typed in a text
(``[MASK]``) whole, runs each remaining part through ``BasicTokenizer`` and ``WordPieceTokenizer``
(algorithm.py), and turns ids back into pieces. transformers' call API (batches, pairs, truncation,
padding, offsets) comes from ``TransformersCallAPI`` (call_api.py), ids back to text from ``Decoding``
(decoding.py); the files it reads and writes from files.py and tokenizer_json.py.
``encode_and_show_work`` returns every step.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from ..errors import InputTypeError
from ..loading.hub import hub_options
from ..loading.hub_commit import one_load
from ..loading.transformers_keywords import HUB_KEYWORDS, tokenizer_keywords
from .added_tokens import AddedToken, AddedTokens, Unit
from .algorithm import WordPieceTokenizer, piece_spans
from .arguments import VERY_LARGE_INTEGER, check_flags, one_text, token_id
from .call_api import TransformersCallAPI
from .decoding import Decoding
from .directory import check_save_keywords, read_tokenizer_files, write_tokenizer_files
from .encoding import Pieces
from .fast_basic import FastBasicTokenizer
from .files import _DEFAULT_SPECIAL_TOKENS, SPECIAL_TOKEN_NAMES, casing_contradiction
from .special_tokens import SpecialTokens, token_strings
from .vocab_file import load_vocab


class BertTokenizer(SpecialTokens, TransformersCallAPI, Decoding):
    """BERT's WordPiece tokenizer, callable like transformers' tokenizers.

    >>> tok = BertTokenizer.from_pretrained("google-bert/bert-base-uncased")   # doctest: +SKIP
    >>> tok("I love Paris")["input_ids"]                                       # doctest: +SKIP
    [101, 1045, 2293, 3000, 102]
    >>> tok.tokenize("She is a MachineLearning Engineer")                      # doctest: +SKIP
    ['she', 'is', 'a', 'machine', '##lea', '##rn', '##ing', 'engineer']

    ``model_max_length`` (where ``truncation=True`` cuts without a ``max_length``) defaults to
    transformers' "no limit", int(1e30), as does a folder that gives none: nothing is cut then.
    """

    def __init__(
        self,
        vocab_file: str | os.PathLike | None = None,
        do_lower_case: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        *,
        do_basic_tokenize: bool = True,
        model_max_length: int = VERY_LARGE_INTEGER,
        padding_side: str = "right",
        truncation_side: str = "right",
        clean_up_tokenization_spaces: bool = False,
        vocab: dict[str, int] | str | os.PathLike | None = None,
        additional_special_tokens: Iterable[str] = (),
        extra_special_tokens: Iterable[str] | None = None,
        added_tokens: Iterable[tuple[int, AddedToken]] = (),
        added_tokens_file: str | os.PathLike | None = None,
        **special_tokens: str,
    ):
        """``vocab_file``: vocab.txt (``vocab="vocab.txt"``, transformers 5's keyword, is read the same);
        or pass ``vocab`` ({piece: id}, e.g. from tokenizer.json) and the file it came from as
        ``vocab_file`` (named in error messages).

        ``added_tokens``: (id, ``AddedToken``) beyond the vocabulary or marking its pieces (what
        ``add_tokens`` made, as tokenizer_config.json's ``added_tokens_decoder`` keeps it), in the
        order they are added (a new one takes the next id, which must be the one given), read
        from ``added_tokens_file`` (named in error messages).

        ``extra_special_tokens`` (transformers 5's name; ``additional_special_tokens`` is
        transformers 4's, used when it is not given): special tokens beyond the roles, each cut out
        whole; one the vocabulary lacks is added with the next id, as transformers does.

        ``do_basic_tokenize=False`` skips stage 1 (no cleaning, lowercasing or punctuation
        splitting): words are what whitespace separates, as in transformers' slow BertTokenizer."""
        _check_arguments(special_tokens, do_lower_case, strip_accents, tokenize_chinese_chars, do_basic_tokenize,
                         model_max_length)  # fmt: skip
        vocab_file, vocab = _vocabulary_source(vocab_file, vocab)
        self.vocab_file = Path(vocab_file)
        self._vocab_is_file = vocab is None
        self.vocab = dict(vocab) if vocab is not None else load_vocab(vocab_file)
        self.ids_to_tokens = {index: token for token, index in self.vocab.items()}
        self._base_vocab = dict(self.vocab)  # what WordPiece was trained with; vocab.txt when saved
        self._base_vocab_size = len(self._base_vocab)
        self.model_max_length = model_max_length
        self.padding_side, self.truncation_side = padding_side, truncation_side  # (checked: call_request.Side)
        check_flags(clean_up_tokenization_spaces=clean_up_tokenization_spaces)
        self.clean_up_tokenization_spaces = clean_up_tokenization_spaces  # decode's default
        self.do_basic_tokenize = do_basic_tokenize
        self.strip_accents = strip_accents  # as given (None: follow do_lower_case)
        self.basic = FastBasicTokenizer(do_lower_case, strip_accents, tokenize_chinese_chars)
        self.added = AddedTokens(self.vocab, self.ids_to_tokens, self.basic, self.vocab_file)  # added_tokens.py
        source = added_tokens_file or vocab_file
        self.added.restore(added_tokens, source)  # before the roles: they may be among them
        extra = additional_special_tokens if extra_special_tokens is None else extra_special_tokens
        self._set_special_tokens({**_DEFAULT_SPECIAL_TOKENS, **special_tokens}, token_strings(extra))
        # WordPiece sees the vocabulary it was trained with: added tokens are cut out before it runs.
        self.wordpiece = WordPieceTokenizer(self._base_vocab, self.unk_token_id)
        self.added.check_restored(source)
        self._register_extra_special_tokens()
        self._warned_too_long = False

    model_input_names = ["input_ids", "token_type_ids", "attention_mask"]  # what BertModel takes
    name_or_path = ""  # what from_pretrained was given, as in transformers ("" for one made here)

    # ------------------------------------------------------------------ loading and saving

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, *, revision: str | None = None,
                        do_lower_case: bool | None = None, **keywords) -> BertTokenizer:  # fmt: skip
        """Load ``vocab.txt`` (or, without it, ``tokenizer.json``: see tokenizer_json.py) and
        ``tokenizer_config.json`` from a directory or a hub repository (files.py).

        ``do_lower_case`` (the tutorials pass it, as transformers takes it) replaces the checkpoint's
        own setting; a value that contradicts the vocabulary (lowercasing for a cased one, or not for
        an uncased one: files.py ``casing_contradiction``) is refused with a ValueError, unless it is
        the checkpoint's own setting already. The constructor's other settings (``strip_accents``,
        ``tokenize_chinese_chars``, ``do_basic_tokenize``, ``model_max_length``, the two sides,
        ``clean_up_tokenization_spaces``, the roles ``pad_token``, ... and ``extra_special_tokens`` /
        ``additional_special_tokens``) replace the files', as transformers passes them to its
        constructor, and are checked as the constructor checks them. transformers' download keywords
        (``cache_dir``, ``local_files_only``, ``token``, ``force_download``) are taken, and ``use_fast``
        / ``trust_remote_code`` change nothing (loading/transformers_keywords.py)."""
        hub = tokenizer_keywords(keywords)
        replaced = {name: keywords.pop(name) for name in _REPLACEABLE if name in keywords}
        if keywords:
            raise TypeError(f"BertTokenizer.from_pretrained() got unexpected keyword arguments {sorted(keywords)}; "
                            f"it takes revision, do_lower_case, {', '.join(_REPLACEABLE)}, and transformers' "
                            f"{', '.join(HUB_KEYWORDS)}, use_fast, trust_remote_code")  # fmt: skip
        with one_load(), hub_options(hub):
            vocab_file, vocab, vocab_is_file, settings = read_tokenizer_files(name_or_path, revision)
        settings.update(replaced)
        if do_lower_case is not None:
            settings["do_lower_case"] = _casing_asked(do_lower_case, settings, vocab, name_or_path)
        settings["null_roles"] = {role: file for role, file in settings.get("null_roles", {}).items()
                                  if role not in replaced}  # fmt: skip
        tokenizer = cls.from_files_read(vocab_file, vocab, settings)
        tokenizer._vocab_is_file = vocab_is_file  # vocab.txt's own bytes are saved (a piece listed twice kept)
        tokenizer.name_or_path = os.fspath(name_or_path)
        return tokenizer

    @classmethod
    def from_files_read(cls, vocab_file, vocab: dict[str, int], settings: dict) -> BertTokenizer:
        """The tokenizer of what directory.py's ``read_tokenizer_files`` read: ``settings`` are the
        constructor's, but for the folder's own facts, kept beside it: which file left a role null
        (named when one is needed) and tokenizer.json's decoder (decoding.py)."""
        settings = dict(settings)
        null_roles, decoder = settings.pop("null_roles", {}), settings.pop("decoder", None)
        tokenizer = cls(vocab_file, vocab=vocab, **settings)
        tokenizer._null_roles = null_roles
        if decoder is not None:
            tokenizer._decoder = decoder
        return tokenizer

    def save_pretrained(self, save_directory: str | os.PathLike, **keywords) -> tuple[str, ...]:
        """Write ``vocab.txt``, ``tokenizer_config.json`` and ``special_tokens_map.json`` to a
        directory (created if needed; each file written atomically), loadable by
        ``BertTokenizer.from_pretrained`` and by transformers' ``AutoTokenizer``. transformers'
        ``legacy_format`` (None or True) and ``push_to_hub=False`` are taken (directory.py)."""
        check_save_keywords(keywords)
        return write_tokenizer_files(self, save_directory)

    # ------------------------------------------------------------------ text → pieces

    @property
    def do_lower_case(self) -> bool:
        """Whether stage 1 lowercases the text (transformers' ``tokenizer.do_lower_case``); fixed once
        made: ``BertTokenizer.from_pretrained(path, do_lower_case=...)`` for the other."""
        return self.basic.do_lower_case

    @property
    def vocab_size(self) -> int:
        """The vocabulary's size without the pieces added since loading (as transformers counts);
        ``len(tokenizer)`` counts them."""
        return self._base_vocab_size

    def __len__(self) -> int:
        return len(self.vocab)

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def _words(self, part: str, start: int, track: bool) -> list[Unit]:
        """Stage 1 on a part of a text in which no added token occurs: its words, as units."""
        if not track:
            return [(None, word, None) for word in self._basic_words(part)]
        if self.do_basic_tokenize:
            return [(None, word, origins) for word, origins in self.basic.words_with_origins(part, start)]
        return [(None, match.group(), list(range(start + match.start(), start + match.end())))
                for match in re.finditer(r"\S+", part)]  # fmt: skip

    def _basic_words(self, text: str) -> list[str]:
        return self.basic.tokenize(text) if self.do_basic_tokenize else text.split()

    def _units(self, text: str, track: bool) -> list[Unit]:
        """The text's words, each as (the id of the added token it is, or None; the word; with
        ``track``, the index in ``text`` of each of its characters): added tokens cut out first."""
        return self.added.units(text, track, self._words)

    def piece_ids(self, text: str) -> list[int]:
        """Ids of ``text``'s word pieces, without [CLS]/[SEP]."""
        pieces = self.wordpiece.pieces
        ids: list[int] = []
        if self.added.none_in(text):
            known = self.wordpiece.cached_pieces()
            for word in self._basic_words(text):
                cached = known(word)
                ids.extend(cached if cached is not None else pieces(word))
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
            if added is not None or word_ids == [self.wordpiece.unk_id]:  # the whole word (or [UNK] itself)
                offsets.append((origins[0], origins[-1] + 1))
            else:
                offsets.extend(piece_spans([self.ids_to_tokens[piece] for piece in word_ids], origins))
            ids.extend(word_ids)
            words.extend([word_index] * len(word_ids))
        return Pieces(ids, offsets, words)

    def words_and_pieces(self, text: str) -> tuple[list[str], list[list[int]]]:
        """The basic tokens (words) of ``text`` and, for each, the ids of its word pieces."""
        units = [(word, [index] if index is not None else self.wordpiece.pieces(word))
                 for index, word, _ in self._units(text, track=False)]  # fmt: skip
        return [word for word, _ in units], [ids for _, ids in units]

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False) -> list[str]:
        """The word pieces of ``text`` as strings (no [CLS]/[SEP]); as in transformers, ``pair``
        adds a second text's, and ``add_special_tokens=True`` frames them: ``[CLS] ... [SEP]``.
        (transformers also takes the call's other arguments here, ``truncation`` among them, and
        ignores them; minibert takes none: ``tokenizer(text, ...).tokens()`` applies them.)"""
        text = one_text(text, "tokenize", "[tokenizer.tokenize(text) for text in texts], or tokenizer(texts) for ids")
        check_flags(add_special_tokens=add_special_tokens)
        if pair is None and not add_special_tokens:
            return self.convert_ids_to_tokens(self.piece_ids(text))
        return self(text, pair, add_special_tokens=add_special_tokens).tokens()

    def encode_and_show_work(self, text: str) -> dict:
        """Every intermediate step of tokenizing ``text``, for learning and debugging: the text
        ``cleaned`` and ``normalized`` (stage 1's first two steps, as this tokenizer runs them), the
        ``basic_tokens`` (words), each word's ``word_pieces`` (stage 2), then the ``tokens`` and
        ``input_ids`` with [CLS] and [SEP].

        >>> steps = tok.encode_and_show_work("Héllo, unaffable!")     # doctest: +SKIP
        >>> steps["normalized"], steps["basic_tokens"]                 # doctest: +SKIP
        ('hello, unaffable!', ['hello', ',', 'unaffable', '!'])
        >>> steps["word_pieces"]                                       # doctest: +SKIP
        [['hello'], [','], ['una', '##ffa', '##ble'], ['!']]

        Special and added tokens are kept as they are matched (``[MASK]`` as typed, an ordinary
        added token normalized), and with ``do_basic_tokenize=False`` there is no cleaning or
        normalizing: ``cleaned`` and ``normalized`` are the text as typed.
        """
        text = one_text(text, "encode_and_show_work", "one call per text")
        cleaned, normalized = self.added.cleaned_and_normalized(text, self.do_basic_tokenize)
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

    def convert_ids_to_tokens(self, ids: int | Iterable[int], skip_special_tokens: bool = False) -> str | list[str]:
        """The pieces of ``ids`` (one id gives one str); ``skip_special_tokens`` leaves out the ids
        of ``all_special_ids`` from a list, as transformers does."""
        check_flags(skip_special_tokens=skip_special_tokens)
        if isinstance(ids, int):
            return self._token(token_id(ids))
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        skipped = set(self.all_special_ids) if skip_special_tokens else set()
        return [self._token(index) for index in map(token_id, ids) if index not in skipped]

    def _token(self, index: int) -> str:
        token = self.added.spellings.get(index) or self.ids_to_tokens.get(index)
        if token is None:
            raise ValueError(f"token id {index} is {self._not_an_id(index)}")
        return token

    def _not_an_id(self, index: int) -> str:
        """Why no piece has this id: it is outside [0, len(tokenizer)) (the added tokens counted),
        or, in a vocabulary whose ids have gaps (a tokenizer.json may list them so), one of the gaps."""
        end = max(self.ids_to_tokens, default=-1) + 1  # len(self) unless the ids have gaps
        if 0 <= index < end:
            return f"not in the vocabulary (its {len(self)} pieces have ids in [0, {end}), with gaps)"
        return f"outside the vocabulary [0, {end})"


# The files' settings a from_pretrained keyword replaces: the constructor's, as transformers passes them on.
_REPLACEABLE = ("strip_accents", "tokenize_chinese_chars", "do_basic_tokenize", "model_max_length", "padding_side",
                "truncation_side", "clean_up_tokenization_spaces", *SPECIAL_TOKEN_NAMES, "extra_special_tokens",
                "additional_special_tokens")  # fmt: skip


def _vocabulary_source(vocab_file, vocab) -> tuple:
    """(vocab_file, vocab) as ``__init__`` reads them: ``vocab`` given as a path (transformers 5's
    keyword for the file) is the file; a {piece: id} dict without a file is named so in errors."""
    if vocab is not None and not isinstance(vocab, dict):
        if not isinstance(vocab, (str, os.PathLike)):
            raise InputTypeError(f"vocab must be the vocabulary file's path or a {{piece: id}} dict, got {vocab!r}")
        if vocab_file is not None:
            raise TypeError(f"BertTokenizer got the vocabulary file twice: vocab_file={os.fspath(vocab_file)!r} and "
                            f"vocab={os.fspath(vocab)!r}; pass one")  # fmt: skip
        return vocab, None
    if vocab_file is None:
        if vocab is None:
            raise TypeError("BertTokenizer needs a vocabulary: vocab_file='vocab.txt' (or vocab='vocab.txt', "
                            "transformers 5's keyword), or vocab={piece: id}")  # fmt: skip
        return "vocab (a dict)", vocab
    return vocab_file, vocab


def _check_arguments(special_tokens: dict, do_lower_case, strip_accents, tokenize_chinese_chars, do_basic_tokenize,
                     model_max_length) -> None:  # fmt: skip
    """BertTokenizer's arguments, each of the right kind, or a TypeError / ValueError naming it."""
    unknown = set(special_tokens) - set(SPECIAL_TOKEN_NAMES)
    if unknown:
        raise TypeError(f"BertTokenizer got unexpected arguments: {sorted(unknown)}")
    check_flags(do_lower_case=do_lower_case, tokenize_chinese_chars=tokenize_chinese_chars,
                do_basic_tokenize=do_basic_tokenize)  # fmt: skip
    if strip_accents not in (True, False, None):
        raise TypeError(f"strip_accents must be True, False or None, got {strip_accents!r}")
    if isinstance(model_max_length, bool) or not isinstance(model_max_length, int) or model_max_length < 1:
        raise ValueError(f"model_max_length must be a positive int, got {model_max_length!r}")


def _casing_asked(do_lower_case, settings: dict, vocab: dict, name_or_path) -> bool:
    """``from_pretrained(..., do_lower_case=...)``: a bool, and not one that contradicts the
    vocabulary (files.py ``casing_contradiction``) unless it is the checkpoint's own setting."""
    if not isinstance(do_lower_case, bool):
        raise InputTypeError(f"do_lower_case must be True or False, got {do_lower_case!r}")
    if do_lower_case != settings.get("do_lower_case", True):  # (True: BertTokenizer's default)
        why = casing_contradiction(vocab, do_lower_case)
        if why:
            raise ValueError(f"do_lower_case={do_lower_case} contradicts {name_or_path}: {why}; leave "
                             f"do_lower_case out to use the checkpoint's own casing")  # fmt: skip
    return do_lower_case
