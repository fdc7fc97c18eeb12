"""One tokenizer call's arguments, parsed and checked once: ``CallRequest``.

``tokenizer(text, text_pair, truncation=..., padding=..., ...)`` takes twenty arguments, as
transformers' tokenizers do. They are read here, once, into one frozen value: one text or a batch
(each text a str, or a list of words with ``is_split_into_words``), the truncation strategy and the
padding mode in their canonical spellings, ``max_length`` resolved to the model's where truncation
or padding needs one (a tokenizer with no ``model_max_length``, transformers' 1e30, then neither
cuts nor pads, as in transformers), and every contradiction refused with a message that names the arguments.
call_api.py then builds the rows from the value alone.

>>> truncation_strategy(True), padding_mode("max_length"), padding_mode(False)
('longest_first', 'max_length', None)
"""

from __future__ import annotations

from dataclasses import dataclass

from .arguments import check_count, check_flags, has_length_limit
from .encoding import TRUNCATION_STRATEGIES, check_side
from .framing import added_by_framing


class Side:
    """A tokenizer's ``padding_side`` or ``truncation_side`` ("right" or "left"), checked when it is
    assigned (``tokenizer.truncation_side = "left"``, as the docs show): a misspelt side would
    otherwise be read as the other one at every call (transformers raises a ValueError at the call),
    and ``save_pretrained`` would write a tokenizer_config.json that no reader takes."""

    def __set_name__(self, owner, name: str) -> None:
        self.name, self.attribute = name, f"_{name}"

    def __get__(self, tokenizer, owner=None):
        return self if tokenizer is None else tokenizer.__dict__.get(self.attribute, "right")

    def __set__(self, tokenizer, value: str) -> None:
        tokenizer.__dict__[self.attribute] = check_side(value, self.name)


@dataclass(frozen=True)
class CallRequest:
    """One tokenizer call's arguments, parsed and checked once."""

    texts: list  # each a str, or a list of words (is_split_into_words)
    pairs: list | None  # the second texts of pairs, or None
    batched: bool  # a list came in: a list goes out
    add_special_tokens: bool
    truncation: str | None  # None or one of TRUNCATION_STRATEGIES
    padding: str | None  # None, "longest" or "max_length"
    max_length: int | None  # resolved: model_max_length where truncation or padding needs one
    stride: int
    pad_to_multiple_of: int | None
    padding_side: str
    truncation_side: str  # the tokenizer's at the call: word_ids() computed later cut the same rows
    return_tensors: str | None
    return_token_type_ids: bool | None
    return_attention_mask: bool | None
    return_overflowing_tokens: bool
    return_special_tokens_mask: bool
    return_offsets_mapping: bool
    return_length: bool  # each row's length (padding included), as transformers counts it
    warn_too_long: bool  # log transformers' warning for a row the model cannot take

    @property
    def special_tokens(self) -> int:
        """How many tokens the framing adds to a row: [CLS] A [SEP] (B [SEP])."""
        return added_by_framing(self.pairs is not None) if self.add_special_tokens else 0

    @classmethod
    def parse(
        cls,
        tokenizer,
        text,
        text_pair=None,
        *,
        is_split_into_words: bool = False,
        add_special_tokens: bool = True,
        padding: bool | str = False,
        truncation: bool | str | None = None,
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
        return_length: bool = False,
        verbose: bool = True,
        split_special_tokens: bool = False,  # only False (call_api.py refuses True): special tokens stay whole
    ) -> CallRequest:
        batched, texts, pairs = _texts_and_pairs(text, text_pair, is_split_into_words)
        check_flags(add_special_tokens=add_special_tokens, is_split_into_words=is_split_into_words,
                    return_overflowing_tokens=return_overflowing_tokens, verbose=verbose,
                    return_special_tokens_mask=return_special_tokens_mask,
                    return_offsets_mapping=return_offsets_mapping, return_length=return_length)  # fmt: skip
        check_flags(optional=True, return_token_type_ids=return_token_type_ids,
                    return_attention_mask=return_attention_mask)  # fmt: skip
        if max_length is not None and (padding is False or padding is None) and truncation is None:
            truncation = "longest_first"  # transformers' rule: max_length alone truncates (None: no padding, as False)
        strategy = truncation_strategy(truncation)
        mode = padding_mode(padding)
        max_length = check_count(max_length, "max_length", minimum=1, optional=True)  # np.int64(5): 5
        stride = check_count(stride, "stride", minimum=0)
        pad_to_multiple_of = check_count(pad_to_multiple_of, "pad_to_multiple_of", minimum=1, optional=True)
        side = check_side(padding_side or tokenizer.padding_side, "padding_side")
        warn_too_long = strategy is None and max_length is None and verbose
        if max_length is None and not has_length_limit(tokenizer.model_max_length):
            strategy = None  # as transformers (model_max_length 1e30): no cut, one window per text; no padding
            mode = None if mode == "max_length" else mode
        elif strategy or mode == "max_length":
            max_length = tokenizer.model_max_length if max_length is None else max_length
        if strategy and mode and pad_to_multiple_of and max_length % pad_to_multiple_of:
            raise ValueError(
                f"truncation to max_length={max_length} and padding to a multiple of {pad_to_multiple_of} "
                "contradict each other: make max_length a multiple of pad_to_multiple_of"
            )
        cut_side = check_side(tokenizer.truncation_side, "truncation_side")
        request = cls(texts, pairs, batched, add_special_tokens, strategy, mode, max_length, stride,
                      pad_to_multiple_of, side, cut_side, return_tensors, return_token_type_ids, return_attention_mask,
                      return_overflowing_tokens, return_special_tokens_mask, return_offsets_mapping,
                      return_length, warn_too_long)  # fmt: skip
        if strategy:
            request.check_stride()
        if return_overflowing_tokens and strategy:
            request.check_room_for_windows()
        return request

    def check_stride(self) -> None:
        """Refuse, whatever the texts, a ``stride`` over ``max_length`` minus one text's special tokens,
        as transformers does whenever it truncates (``tokenizers``' truncation parameters: "tokenizer
        stride set to 7, which is greater than or equal to its effective max length of 6"); it
        subtracts [CLS] and [SEP] even for a pair, or without ``add_special_tokens``, and checks nothing
        below a ``max_length`` of 2. A stride equal to that room, or over a pair's, passes here; the
        cut that needs it refuses it (encoding.py's ``_parts``), where ``tokenizers`` panics."""
        room = self.max_length - added_by_framing(pair=False)
        if room >= 0 and self.stride > room:
            raise ValueError(
                f"stride={self.stride} is more than max_length={self.max_length} minus the "
                f"{added_by_framing(pair=False)} special tokens of a text ({room}): windows sharing stride "
                "pieces cannot fit (transformers refuses it too, with any text)"
            )

    def check_room_for_windows(self) -> None:
        """Overflow windows hold at least one piece each (transformers then returns the whole text as
        one more "window", longer than ``max_length``)."""
        room = self.max_length - self.special_tokens
        if room < 1:
            raise ValueError(
                f"max_length={self.max_length} leaves no room for text beside the {self.special_tokens} special "
                "tokens: the windows of return_overflowing_tokens need at least one piece each"
            )


# Parsed arguments, kept: {(the tokenizer's sides and model_max_length, one input or a pair, each
# argument's name, type and value): the request parsed from them}. Everything but the texts is a
# function of those, so a call repeated with other texts (the common case: a loop over a dataset)
# takes the checked arguments again instead of checking them again (4 of a short text's 12 µs).
_PARSED: dict[tuple, CallRequest] = {}
_PARSED_MOST = 256  # different argument sets kept at most (then forgotten, all at once)
_PLAIN = (bool, int, str, type(None))  # only such values key a request: a key must equal its value


def parse_call(tokenizer, text, text_pair, arguments: dict) -> CallRequest:
    """``CallRequest.parse(tokenizer, text, text_pair, **arguments)``, its arguments read once per
    set of them (``_PARSED``). Arguments of other types than bool, int, str and None (a numpy
    integer, a tensor) are parsed at every call: their equality is not their identity.

    >>> from minibert import BertTokenizer
    >>> tokenizer = BertTokenizer(vocab={"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4})
    >>> first, again = parse_call(tokenizer, "a", None, {}), parse_call(tokenizer, "a a", None, {})
    >>> again.texts, again.truncation == first.truncation, again is first
    (['a a'], True, False)
    """
    batched, texts, pairs = _texts_and_pairs(text, text_pair, arguments.get("is_split_into_words", False))
    values = (tokenizer.padding_side, tokenizer.truncation_side, tokenizer.model_max_length, *arguments.values())
    if not all(type(value) in _PLAIN for value in values):
        return CallRequest.parse(tokenizer, text, text_pair, **arguments)
    key = (*values[:3], pairs is None, *sorted((name, type(value), value) for name, value in arguments.items()))
    parsed = _PARSED.get(key)
    if parsed is None:
        request = CallRequest.parse(tokenizer, text, text_pair, **arguments)
        if len(_PARSED) >= _PARSED_MOST:
            _PARSED.clear()
        _PARSED[key] = _with_texts(request, False, [], None)  # kept without its texts: they are the caller's
        return request
    return _with_texts(parsed, batched, texts, pairs)


def _with_texts(request: CallRequest, batched: bool, texts: list, pairs: list | None) -> CallRequest:
    """``request``'s parsed arguments with other texts (a new frozen value; its fields copied as they are)."""
    copy = object.__new__(CallRequest)
    copy.__dict__.update(request.__dict__, texts=texts, pairs=pairs, batched=batched)
    return copy


def _texts_and_pairs(text, text_pair, is_split_into_words: bool) -> tuple[bool, list, list | None]:
    """(a batch came in, the texts, the second texts of pairs or None): one input or a batch, alike,
    but for an empty ``text_pair`` ("" or no words): as transformers, one input drops it (``("a", "")``
    is ``[CLS] a [SEP]``) while a batch keeps it (``(["a"], [""])`` is ``[CLS] a [SEP] [SEP]``)."""
    if text_pair is None and not is_split_into_words and _pairs_in_a_batch(text):  # [(a, b), ...], as transformers
        return True, [a for a, _ in text], [b for _, b in text]
    batched, texts = _as_batch(text, "text", is_split_into_words)
    if text_pair is None or (not batched and isinstance(text_pair, (str, list, tuple)) and not text_pair):
        return batched, texts, None  # one input with an empty second text is no pair (transformers), a batch's is
    pair_batched, pairs = _as_batch(text_pair, "text_pair", is_split_into_words)
    if batched != pair_batched:
        raise TypeError("text and text_pair must both be one input, or both be batches")
    if len(pairs) != len(texts):
        raise ValueError(f"text has {len(texts)} items but text_pair has {len(pairs)}")
    return batched, texts, pairs


def _as_batch(value, name: str, split_into_words: bool) -> tuple[bool, list]:
    """(is it a batch, its inputs): each input a str, or (``split_into_words``) a list of words."""

    def words(item) -> bool:
        return isinstance(item, (list, tuple)) and all(isinstance(word, str) for word in item)

    if not split_into_words:
        if isinstance(value, str):
            return False, [value]
        if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
            return True, list(value)
        if isinstance(value, (list, tuple)):
            index, item = next((i, item) for i, item in enumerate(value) if not isinstance(item, str))
            raise TypeError(f"{name} must be a str or a list of str (or of (text, text_pair) pairs): "
                            f"item {index} is a {type(item).__name__}")  # fmt: skip
        raise TypeError(f"{name} must be a str or a list of str, got {type(value).__name__}")
    if words(value):
        return False, [list(value)]
    if isinstance(value, (list, tuple)) and all(words(item) for item in value):
        return True, [list(item) for item in value]
    raise TypeError(
        f"with is_split_into_words=True, {name} must be a list of words (str) or a list of such lists, "
        f"got {type(value).__name__}"
    )


def _pairs_in_a_batch(value) -> bool:
    """Whether ``value`` is a batch of pairs, ``[("text", "text pair"), ...]`` (transformers' other
    spelling of ``text=[...], text_pair=[...]``)."""
    return (isinstance(value, (list, tuple)) and len(value) > 0 and all(
        isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(part, str) for part in item)
        for item in value))  # fmt: skip


def truncation_strategy(truncation) -> str | None:
    """None (no truncation) or one of the strategies. (As in transformers, ``max_length`` given
    without ``truncation`` and without ``padding`` truncates, longest first: ``CallRequest.parse``.)"""
    if truncation is False or truncation is None or truncation == "do_not_truncate":
        return None
    strategy = "longest_first" if truncation is True else truncation
    if strategy not in TRUNCATION_STRATEGIES:
        raise ValueError(f"truncation must be True, False or one of {list(TRUNCATION_STRATEGIES)}, got {truncation!r}")
    return strategy


def padding_mode(padding) -> str | None:
    if padding is False or padding is None or padding == "do_not_pad":
        return None
    if padding is True or padding == "longest":
        return "longest"
    if padding == "max_length":
        return "max_length"
    raise ValueError(f"padding must be True, False, 'longest' or 'max_length', got {padding!r}")
