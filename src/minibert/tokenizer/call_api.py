"""transformers' call API over the tokenizer: ``tokenizer(text, text_pair, truncation=..., ...)``.

The algorithm (algorithm.py) turns one text into pieces; this layer does what transformers users
ask of a tokenizer call: batches and pairs, framing with [CLS]/[SEP] and segment ids, truncation
strategies and overflow windows with a stride, padding, ``pad`` for a data collator, tensors, and
the maps back to words and characters (offsets, ``word_ids``). The arguments are parsed and
checked once into a ``CallRequest`` (call_request.py); ``TransformersCallAPI._rows`` then builds
the rows.

A tokenizer that mixes this in provides ``_pieces(text, track)`` (a text's piece ids, and with
``track`` their character spans and word numbers), the special token ids and ``model_max_length``.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

from ..errors import InputTypeError
from .arguments import check_count, has_length_limit
from .batch_encoding import BatchEncoding
from .call_request import CallRequest, Side, padding_mode, parse_call
from .encoding import (
    Pieces,
    check_side,
    pad_rows,
    padded_length,
    to_tensors,
    truncation_plan,
)
from .framing import added_by_framing, frame, segment_ids, special_tokens_mask
from .pad_columns import columns_to_pad, padded_tensors
from .transformers4_calls import Transformers4Calls

logger = logging.getLogger("minibert")
ALIGNMENT_COLUMNS = ("offset_mapping", "_word_ids", "_sequence_ids")


# transformers' call arguments minibert leaves out, and why (the rest are a plain TypeError naming the call).
_NOT_TAKEN = {
    "split_special_tokens": "minibert always reads a [CLS], [SEP], [MASK] ... written in a text as that special "
    "token (transformers' default, split_special_tokens=False)",
}


# The call's keyword arguments: CallRequest.parse's, read once (not at every call).
_TAKEN = frozenset(inspect.signature(CallRequest.parse).parameters) - {"cls", "tokenizer", "text", "text_pair"}


# What transformers' __call__ and encode take by position after their texts (PreTrainedTokenizerBase's order).
_CALL_POSITIONAL = ("add_special_tokens", "padding", "truncation", "max_length", "stride", "is_split_into_words",
                    "pad_to_multiple_of", "padding_side", "return_tensors", "return_token_type_ids",
                    "return_attention_mask", "return_overflowing_tokens", "return_special_tokens_mask",
                    "return_offsets_mapping", "return_length", "verbose")  # fmt: skip
_ENCODE_POSITIONAL = ("add_special_tokens", "padding", "truncation", "max_length", "stride", "padding_side",
                      "return_tensors")  # fmt: skip


def _by_name(method: str, names: tuple[str, ...], positional: tuple, arguments: dict) -> dict:
    """``arguments`` with the ``positional`` values given their ``names``, in transformers' order:
    ``tok.encode("a b", None, False)`` is ``add_special_tokens=False`` there."""
    if len(positional) > len(names):
        raise TypeError(f"{method}() takes at most {len(names)} arguments by position after its texts "
                        f"({', '.join(names)}); got {len(positional)}")  # fmt: skip
    for name, value in zip(names, positional):
        if name in arguments:
            raise TypeError(f"{method}() got multiple values for argument {name!r}")
        arguments[name] = value
    return arguments


def _check_argument_names(arguments: dict) -> None:
    """A TypeError naming the tokenizer call (not the parser behind it) for an argument it does not take."""
    if "pad_to_max_length" in arguments:  # the older tutorials' spelling (transformers removed it)
        raise InputTypeError("pad_to_max_length is the older transformers' argument; write padding='max_length' "
                             "(with max_length=..., and truncation=True to cut longer texts)")  # fmt: skip
    for name in arguments:
        if name == "split_special_tokens" and not arguments[name]:
            continue  # the default, which minibert does
        if name in _NOT_TAKEN:
            raise TypeError(f"tokenizer() does not take {name}=: {_NOT_TAKEN[name]}")
        if name not in _TAKEN:
            raise TypeError(f"tokenizer() got an unexpected keyword argument {name!r}")


class TransformersCallAPI(Transformers4Calls):
    """``__call__``, ``encode``, ``pad`` and the framing methods, as transformers' tokenizers have them
    (and transformers 4's ``encode_plus`` / ``batch_encode_plus``: transformers4_calls.py)."""

    # transformers' scripts and pipelines ask is_fast before they use what only its Rust-backed
    # tokenizers had: offset_mapping, word_ids(), char_to_token (the run_ner and run_qa examples refuse a
    # tokenizer without them; token-classification pipelines need offsets to aggregate). minibert
    # is pure Python, but it has all of them, with the fast tokenizer's results: True.
    is_fast = True
    # And its token-classification pipeline tells a word's later pieces from new words (aggregation
    # "first", "average", "max") only where ``tokenizer._tokenizer.model.continuing_subword_prefix`` is
    # set, the Rust tokenizer's WordPiece: elsewhere it warns and guesses from spaces ("New-York" one
    # word). That prefix is all it reads there, and all this stand-in has.
    _tokenizer = SimpleNamespace(model=SimpleNamespace(continuing_subword_prefix="##"))

    padding_side = Side()  # "right" or "left", checked when assigned (call_request.py)
    truncation_side = Side()

    # ------------------------------------------------------------------ framing

    def build_inputs_with_special_tokens(self, ids_a: list[int], ids_b: list[int] | None = None) -> list[int]:
        """``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` (framing.py), with the [CLS] and [SEP] the
        tokenizer was made with (a role assigned since frames once saved and loaded, as in transformers)."""
        return frame(*self._framing_ids, ids_a, ids_b)

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        """How many tokens the framing adds: 2 ([CLS] A [SEP]) or 3 for a pair."""
        return added_by_framing(pair)

    def __repr__(self) -> str:
        """As transformers prints a tokenizer, without its list of added tokens:
        ``BertTokenizer(name_or_path='bert-base-uncased', vocab_size=30522, model_max_length=512, ...)``."""
        return (
            f"{type(self).__name__}(name_or_path='{self.name_or_path}', vocab_size={self.vocab_size}, "
            f"model_max_length={self.model_max_length}, padding_side='{self.padding_side}', "
            f"truncation_side='{self.truncation_side}', special_tokens={self.special_tokens_map})"
        )

    @property
    def max_len_single_sentence(self) -> int:
        """The most pieces one text may have in a row of ``model_max_length``: that minus [CLS] and
        [SEP] (510 for 512), as transformers computes it (older code picks ``block_size`` from it)."""
        return self.model_max_length - self.num_special_tokens_to_add(pair=False)

    @property
    def max_len_sentences_pair(self) -> int:
        """The most pieces a pair's two texts may have together: ``model_max_length`` minus 3 (509)."""
        return self.model_max_length - self.num_special_tokens_to_add(pair=True)

    def get_special_tokens_mask(self, token_ids_0: list[int], token_ids_1: list[int] | None = None,
                                already_has_special_tokens: bool = False) -> list[int]:  # fmt: skip
        """1 where ``build_inputs_with_special_tokens`` puts [CLS]/[SEP], 0 on the text's pieces.

        ``already_has_special_tokens=True`` (what transformers' ``DataCollatorForLanguageModeling``
        passes, with framed ids): 1 on each id of ``all_special_ids``, as transformers marks them."""
        if already_has_special_tokens:
            if token_ids_1 is not None:
                raise ValueError("get_special_tokens_mask: with already_has_special_tokens=True the ids are one "
                                 "framed sequence; token_ids_1 must be None")  # fmt: skip
            special = set(self.all_special_ids)
            return [1 if int(index) in special else 0 for index in token_ids_0]
        return special_tokens_mask(len(token_ids_0), None if token_ids_1 is None else len(token_ids_1))

    def encode(self, text: str, text_pair: str | None = None, *positional, **kwargs) -> list[int]:
        """The framed ids of one text (or pair), e.g. ``[101, 1045, 2293, 3000, 102]``. The call's
        arguments follow, by name or in transformers' order (``add_special_tokens``, ``padding``, ...)."""
        return self(text, text_pair, **_by_name("encode", _ENCODE_POSITIONAL, positional, kwargs))["input_ids"]

    # ------------------------------------------------------------------ the call

    def __call__(self, text=None, text_pair=None, text_target=None, text_pair_target=None, *positional, **arguments):
        """Tokenize one text, a pair, or a batch, and frame, truncate, window and pad the result
        (the arguments below by name, or by position after the four texts in transformers' order).

        * ``text`` / ``text_pair``: a str each, or lists of str of the same length (a batch). As in
          transformers, one text with an empty ``text_pair`` (``""``) is encoded as one text
          (``[CLS] a [SEP]``); in a batch, an empty second text keeps its [SEP].
          With ``is_split_into_words=True``, each input is a list of words (e.g. an NER dataset's
          tokens) and ``word_ids()`` maps pieces back to them.
        * ``truncation``: ``True``/``"longest_first"`` (cut the longer of the pair first),
          ``"only_first"``, ``"only_second"``, or ``False``; up to ``max_length`` tokens with [CLS]/[SEP]
          (default ``model_max_length``; none if it is transformers' "no limit", 1e30); ``max_length``
          given with neither ``truncation`` nor ``padding`` (None: no padding) truncates too, as in transformers.
          ``tokenizer.truncation_side = "left"`` keeps the end of a text instead. Without truncation, a row longer than
          ``model_max_length`` is logged once (as transformers does): the model cannot take it.
        * ``return_overflowing_tokens=True`` with ``stride=k``: instead of dropping what does not
          fit, return every window of the long text, consecutive windows sharing ``k`` tokens;
          ``overflow_to_sample_mapping`` says which input each window came from. (Without
          truncation, each input is one whole row, as in transformers.)
        * ``padding``: ``True``/``"longest"`` pads to the longest row, ``"max_length"`` to
          ``max_length``, rounded up to a multiple of ``pad_to_multiple_of``; pads are ``[PAD]``
          with ``attention_mask`` 0, at the end (``padding_side="left"``: at the start).
        * ``return_offsets_mapping``: each token's (start, end) character span in its text
          ((0, 0) for [CLS], [SEP] and pads); ``return_special_tokens_mask``: 1 on [CLS], [SEP]
          and pads. ``.word_ids(i)`` & co. of the result work in any case (without offsets: until tokens are added).
        * ``return_tensors``: ``None`` (lists), ``"pt"`` (torch tensors) or ``"np"`` (numpy);
          ``return_token_type_ids`` / ``return_attention_mask``: False leaves them out.
        * ``add_special_tokens=False``: no [CLS]/[SEP]; ``verbose=False``: no too-long warning;
          ``return_length``: each row's length, padding included (a list, even for one text).
        * ``text`` may also be a batch of pairs, ``[(text, text_pair), ...]``; ``text_target`` /
          ``text_pair_target``: seq2seq targets, whose ``input_ids`` are ``labels`` (as in transformers).
        """
        arguments = _by_name("tokenizer", _CALL_POSITIONAL, positional, arguments)
        if text_target is not None or text_pair_target is not None:
            return self._with_target(text, text_pair, text_target, text_pair_target, arguments)
        _check_argument_names(arguments)
        request = parse_call(self, text, text_pair, arguments)
        columns, sample_of_row = self._rows(request, track=request.return_offsets_mapping)
        asked = {"input_ids": True, "token_type_ids": request.return_token_type_ids is not False,
                 "attention_mask": request.return_attention_mask is not False,
                 "special_tokens_mask": request.return_special_tokens_mask,
                 "offset_mapping": request.return_offsets_mapping}  # fmt: skip
        values = {name: columns[name] for name, wanted in asked.items() if wanted}
        if request.return_length:  # each row's length, padding included: a list even for one text (as transformers)
            values["length"] = [len(ids) for ids in columns["input_ids"]]
        if request.return_overflowing_tokens:
            values["overflow_to_sample_mapping"] = sample_of_row
        if not request.batched and not request.return_overflowing_tokens and request.return_tensors is None:
            values = {key: value if key == "length" else value[0] for key, value in values.items()}
        elif request.return_tensors is not None:
            values = to_tensors(values, request.return_tensors)
        encoding = BatchEncoding(values)
        encoding._token_of, encoding._sequences = self._token, 1 if request.pairs is None else 2
        encoding._ids = _id_rows(columns)  # the rows as made: tokens() reads them, alignment checks them
        if request.return_offsets_mapping:
            encoding._rows = _alignment_of(columns)
        else:  # word_ids() & co. compute them on first use, from the same request, checked against these ids
            encoding._alignment = functools.partial(self._alignment_rows, request, hash(encoding._ids))
        return encoding

    def _with_target(self, text, text_pair, text_target, text_pair_target, arguments: dict) -> BatchEncoding:
        """The call with a target, as transformers makes it: each side tokenized with the same
        arguments; the target's ``input_ids`` become ``labels`` (the target alone: its encoding)."""
        if text_target is None:
            raise ValueError("text_pair_target was given without text_target (the target's first text)")
        target = self(text_target, text_pair_target, **arguments)
        if text is None:
            return target
        encoding = self(text, text_pair, **arguments)
        encoding["labels"] = target["input_ids"]
        return encoding

    def _alignment_rows(self, request: CallRequest, fingerprint: int) -> dict[str, list]:
        """Offsets, word ids and sequence ids of each row of ``request``'s result, computed again
        (the request holds the call's sides and lengths). Rows that are not the call's own (tokens
        added or a special token reassigned since) would align other pieces: a ValueError, never that."""
        columns, _ = self._rows(request, track=True, warn=False)
        if _fingerprint(columns) != fingerprint:
            raise ValueError("word_ids() and the other alignment methods of this encoding: the tokenizer changed "
                             "since the call (tokens added, a special token reassigned) and no longer gives its "
                             "input_ids; call them before changing the tokenizer, or pass return_offsets_mapping=True, "
                             "which aligns with the call")  # fmt: skip
        return _alignment_of(columns)

    def _rows(self, request: CallRequest, track: bool, warn: bool = True) -> tuple[dict[str, list[list]], list[int]]:
        """Every row of the result (framed, truncated or windowed, padded), as columns of lists,
        and which input each row came from. ``track``: also the alignment columns."""
        columns: dict[str, list[list]] = {"input_ids": [], "token_type_ids": []}
        if request.return_special_tokens_mask:
            columns["special_tokens_mask"] = []
        if track:
            columns.update({name: [] for name in ALIGNMENT_COLUMNS})
        sample_of_row: list[int] = []
        added = request.special_tokens
        for sample, text_a in enumerate(request.texts):
            pieces_a = self._pieces(text_a, track)
            pieces_b = self._pieces(request.pairs[sample], track) if request.pairs is not None else None
            length_b = None if pieces_b is None else len(pieces_b)
            if request.truncation is None:  # the whole text (or pair) is one row
                length = len(pieces_a) + (length_b or 0) + added
                if warn and request.warn_too_long and length > self.model_max_length:
                    self._warn_too_long(length)
                self._frame(columns, pieces_a, pieces_b, request.add_special_tokens)
                sample_of_row.append(sample)
                continue
            plan = truncation_plan(len(pieces_a), length_b, request.max_length - added, request.truncation,
                                   request.stride, request.truncation_side,
                                   request.return_overflowing_tokens)  # fmt: skip
            for span_a, span_b in plan:
                part_b = None if span_b is None else pieces_b.part(*span_b)
                self._frame(columns, pieces_a.part(*span_a), part_b, request.add_special_tokens)
                sample_of_row.append(sample)
        columns["attention_mask"] = [[1] * len(ids) for ids in columns["input_ids"]]
        if request.padding is not None and columns["input_ids"]:
            longest = max(map(len, columns["input_ids"]))
            target = padded_length(longest, request.padding, request.max_length, request.pad_to_multiple_of)
            pad_rows(columns, target, request.padding_side, self.pad_token_id, self._no_pad())
        return columns, sample_of_row

    def _no_pad(self) -> str:
        return "" if self.pad_token_id is not None else self.role_missing("pad_token")

    def _warn_too_long(self, length: int) -> None:
        """A warning for a row the model cannot take, once per tokenizer (where transformers warns too),
        saying what minibert's model will do with it and how to avoid that."""
        if not self._warned_too_long:
            self._warned_too_long = True
            logger.warning(
                "Token indices sequence length is longer than the specified maximum sequence length for this "
                "model (%d > %d): minibert's BertModel refuses a row longer than its max_position_embeddings with a "
                "ValueError (it never cuts one silently). Pass truncation=True to keep the %s %d tokens, and "
                "return_overflowing_tokens=True with a stride to get every window; Embedder.embed windows long texts "
                "by itself",
                length, self.model_max_length, "last" if self.truncation_side == "left" else "first",
                self.model_max_length,
            )  # fmt: skip

    def _frame(self, columns: dict[str, list[list]], a: Pieces, b: Pieces | None, add_special_tokens: bool) -> None:
        """Append one row: ``[CLS] A [SEP] (B [SEP])`` and its token types (and tracked columns)."""
        special = 1 if add_special_tokens else 0
        b_ids, b_length = (None, None) if b is None else (b.ids, len(b))
        if special:
            ids, types = self.build_inputs_with_special_tokens(a.ids, b_ids), segment_ids(len(a), b_length)
        else:  # the pieces alone, B's typed 1
            ids, types = a.ids + (b_ids or []), [0] * len(a) + [1] * (b_length or 0)
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

    # ------------------------------------------------------------------ padding what is tokenized

    def pad(
        self,
        encoded_inputs: Mapping | Sequence[Mapping],
        padding: bool | str = True,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_attention_mask: bool | None = None,
        return_tensors: str | None = None,
        verbose: bool = True,
    ) -> BatchEncoding:
        """Pad already tokenized inputs (one, a batch as a dict of lists, or a list of dicts, as a
        data collator has them), as transformers' ``tokenizer.pad``: ``input_ids`` with [PAD],
        ``token_type_ids`` with 0, ``attention_mask`` with 0 (made if absent), ``special_tokens_mask``
        with 1; other keys are left as they are. Tensors in give tensors out.
        ``return_attention_mask=False`` returns no mask (transformers would return the old one
        unpadded, out of step with the ids). ``verbose`` is taken, as transformers takes it (pad logs nothing).

        >>> tok.pad([{"input_ids": [101, 102]}, {"input_ids": [101, 7592, 102]}])["input_ids"]  # doctest: +SKIP
        [[101, 102, 0], [101, 7592, 102]]
        """
        columns, single, return_tensors = columns_to_pad(encoded_inputs, return_tensors)
        if return_attention_mask is not False and "attention_mask" not in columns:
            columns["attention_mask"] = [[1] * len(ids) for ids in columns["input_ids"]]
        mode = padding_mode(padding)
        max_length = check_count(max_length, "max_length", minimum=1, optional=True)
        pad_to_multiple_of = check_count(pad_to_multiple_of, "pad_to_multiple_of", minimum=1, optional=True)
        side = check_side(padding_side or self.padding_side, "padding_side")
        if mode == "max_length" and max_length is None and not has_length_limit(self.model_max_length):
            mode = None  # as transformers: no length to pad to (no model_max_length: its 1e30)
        if mode is not None and columns["input_ids"]:
            max_length = self.model_max_length if mode == "max_length" and max_length is None else max_length
            longest = max(map(len, columns["input_ids"]))
            target = padded_length(longest, mode, max_length, pad_to_multiple_of)
            pad_rows(columns, target, side, self.pad_token_id, self._no_pad())
        if return_attention_mask is False:  # (transformers keeps an unpadded one: ragged, out of step)
            columns.pop("attention_mask", None)
        if return_tensors is not None:
            columns = padded_tensors(columns, return_tensors)
        return BatchEncoding({key: rows[0] for key, rows in columns.items()} if single else columns)


def _id_rows(columns: dict[str, list]) -> tuple[tuple[int, ...], ...]:
    """The rows' ids, frozen: what ``tokens()`` reads and what alignment computed later checks."""
    return tuple(map(tuple, columns["input_ids"]))


def _fingerprint(columns: dict[str, list]) -> int:
    """The rows' ids as one number: what alignment computed later checks it gives again."""
    return hash(_id_rows(columns))


def _alignment_of(columns: dict[str, list]) -> dict[str, list]:
    """The tracked columns under the names BatchEncoding keeps them."""
    return dict(zip(("_offsets", "_word_ids", "_sequence_ids"), (columns[name] for name in ALIGNMENT_COLUMNS)))


def _call_signature() -> inspect.Signature:
    """``__call__``'s parameters are ``CallRequest.parse``'s: shown by help() and IDEs."""
    parameters = list(inspect.signature(CallRequest.parse).parameters.values())
    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    targets = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
               for name in ("text_target", "text_pair_target")]  # fmt: skip
    keywords = [parameter for parameter in parameters[1:] if parameter.kind == inspect.Parameter.KEYWORD_ONLY]
    positional = [parameter for parameter in parameters[1:] if parameter.kind != inspect.Parameter.KEYWORD_ONLY]
    return inspect.Signature([self, *positional, *targets, *keywords], return_annotation="BatchEncoding")


TransformersCallAPI.__call__.__signature__ = _call_signature()
