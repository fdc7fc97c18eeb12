"""transformers 4's names for a tokenizer call, as the tutorials written for it use them.

``encode_plus(text, text_pair)`` and ``batch_encode_plus(texts_or_pairs)`` are the call of
call_api.py under older names (transformers 5 removed them; its 4.x, which most tutorials were
written for, has them), with transformers 4's older spelling of padding: ``pad_to_max_length=True``
is ``padding="max_length"`` (``"longest"`` when no ``max_length`` is given), with the FutureWarning
transformers 4 gave. McCormick & Ryan's fine-tuning tutorial calls

    tokenizer.encode_plus(sentence, add_special_tokens=True, max_length=64, pad_to_max_length=True,
                          return_attention_mask=True, return_tensors="pt")

which truncates to 64 as well: ``max_length`` given without ``truncation`` and without ``padding``
truncates, longest first (transformers' rule, applied before ``pad_to_max_length`` becomes
padding, as transformers 4 applies it).
"""

from __future__ import annotations

import warnings

from ..errors import InputTypeError


class Transformers4Calls:
    """``encode_plus`` and ``batch_encode_plus``, for a tokenizer with transformers' call."""

    def encode_plus(self, text, text_pair=None, **arguments):
        """One text (or one pair): ``tokenizer(text, text_pair, **arguments)``, transformers 4's
        arguments included. A list of texts is refused (``batch_encode_plus`` takes those)."""
        if isinstance(text, (list, tuple)) and not arguments.get("is_split_into_words"):
            raise InputTypeError("encode_plus() takes one text (or one pair); for a list of texts: "
                                 "batch_encode_plus(texts) or tokenizer(texts, ...)")  # fmt: skip
        return self(text, text_pair, **_older_arguments(arguments))

    def batch_encode_plus(self, batch_text_or_text_pairs, **arguments):
        """A list of texts, or of (text, pair) tuples: ``tokenizer(texts, pairs, **arguments)``."""
        if isinstance(batch_text_or_text_pairs, str) or not isinstance(batch_text_or_text_pairs, (list, tuple)):
            kind = type(batch_text_or_text_pairs).__name__
            raise InputTypeError(f"batch_encode_plus() takes a list of texts (or of (text, pair) tuples), got {kind}; "
                                 "for one text: encode_plus(text)")  # fmt: skip
        pairs = [item for item in batch_text_or_text_pairs if isinstance(item, tuple)]
        if pairs and len(pairs) != len(batch_text_or_text_pairs):
            raise InputTypeError("batch_encode_plus(): give all texts alone or all as (text, pair) tuples")
        if pairs and not arguments.get("is_split_into_words"):
            if any(len(pair) != 2 for pair in pairs):
                raise InputTypeError("batch_encode_plus(): each pair is a (text, pair) tuple of two texts")
            texts, seconds = [first for first, _ in pairs], [second for _, second in pairs]
            return self(texts, seconds, **_older_arguments(arguments))
        return self(list(batch_text_or_text_pairs), **_older_arguments(arguments))


def _older_arguments(arguments: dict) -> dict:
    """transformers 4's arguments in today's spelling (see the module's docstring)."""
    arguments = dict(arguments)
    pad_to_max_length = arguments.pop("pad_to_max_length", False)
    if not isinstance(pad_to_max_length, bool):
        raise InputTypeError(f"pad_to_max_length must be True or False, got {pad_to_max_length!r}")
    padding = arguments.get("padding", False)
    if arguments.get("max_length") is not None and padding is False and arguments.get("truncation") is None:
        arguments["truncation"] = "longest_first"  # before pad_to_max_length becomes padding, as in transformers 4
    if pad_to_max_length and padding is False:
        warnings.warn("pad_to_max_length=True is transformers 4's spelling of padding='max_length' (transformers 5 "
                      "removed it)", FutureWarning, stacklevel=3)  # fmt: skip
        arguments["padding"] = "max_length" if arguments.get("max_length") is not None else "longest"
    return arguments
