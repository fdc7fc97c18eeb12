"""BERT's tokenizer settings from ``tokenizer.json``, read wherever a repository has one (beside
``vocab.txt`` too: transformers 5 and ``tokenizers`` read it first).

transformers 5 and sentence-transformers 6 save a tokenizer as ``tokenizer.json`` alone: the
serialized pipeline of the Rust ``tokenizers`` library. For BERT it holds everything vocab.txt
and tokenizer_config.json used to::

    "normalizer":     {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true}
    "pre_tokenizer":  {"type": "BertPreTokenizer"}          # split on whitespace and punctuation
    "model":          {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                       "max_input_chars_per_word": 100, "vocab": {"[PAD]": 0, ...}}
    "post_processor": {"type": "TemplateProcessing", "single": [CLS] $A [SEP], "pair": ... }
    "decoder":        {"type": "WordPiece", "prefix": "##", "cleanup": true}   # ids back to text
    "added_tokens":   [{"id": 0, "content": "[PAD]", "special": true, ...}, ...]   # and add_tokens' ones

``read_tokenizer_json`` turns that into minibert's vocabulary and BertTokenizer settings, and
refuses, naming the file and the field, any pipeline minibert's tokenizer does not compute
exactly: another model (BPE, Unigram), another normalizer or pre-tokenizer, another word-piece
prefix or word-length limit, a post-processor that frames sequences differently, a decoder other
than WordPiece's (or none), or added tokens matched in ways minibert does not (``single_word``,
``lstrip``, ``rstrip``: added_tokens.py). The decoder's prefix and clean-up are followed.
(``truncation`` and ``padding`` are call-time settings; only their directions are read, which
transformers 5 takes as the sides a call cuts and pads on where tokenizer_config.json names none.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import CheckpointError
from ..formats.json_files import parse_json
from .algorithm import MAX_CHARS_PER_WORD  # WordPiece's limit; a file with another one is refused
from .decoding import Decoder
from .files import read_added_tokens


def read_json_object(path: str | os.PathLike) -> dict:
    """A tokenizer file's JSON object (tokenizer.json, added_tokens.json, special_tokens_map.json),
    or CheckpointError naming the file: unreadable (as files.py says of a vocabulary), not JSON, or
    not an object at the top."""
    try:
        values = parse_json(Path(path).read_bytes())
    except OSError as error:
        raise CheckpointError(f"cannot read tokenizer file {path}: {error.strerror}") from None
    except ValueError as error:
        raise CheckpointError(f"malformed tokenizer file {path}: {error}") from None
    if not isinstance(values, dict):
        raise CheckpointError(f"malformed tokenizer file {path}: the top level is not a JSON object")
    return values


def read_tokenizer_json(path: str | os.PathLike) -> tuple[dict[str, int], dict]:
    """(vocabulary {piece: id}, BertTokenizer keyword settings) from a BERT tokenizer.json."""
    path = Path(path)
    values = read_json_object(path)

    def refuse(field: str, value, meaning: str):
        raise CheckpointError(f"{path}: {field} = {json.dumps(value)[:200]}: {meaning}; minibert's BERT tokenizer "
                              "does not compute it, so it refuses the file")  # fmt: skip

    model = values.get("model")
    if not isinstance(model, dict) or model.get("type") != "WordPiece":
        refuse("model.type", (model or {}).get("type") if isinstance(model, dict) else model, "not a WordPiece model")
    if model.get("continuing_subword_prefix", "##") != "##":
        refuse("model.continuing_subword_prefix", model["continuing_subword_prefix"], "another word-piece prefix")
    if model.get("max_input_chars_per_word", MAX_CHARS_PER_WORD) != MAX_CHARS_PER_WORD:
        refuse("model.max_input_chars_per_word", model["max_input_chars_per_word"], "another word-length limit")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise CheckpointError(f"{path}: model.vocab is missing or empty")
    if not all(isinstance(piece, str) and isinstance(index, int) and index >= 0 for piece, index in vocab.items()):
        raise CheckpointError(f"{path}: model.vocab must map pieces to non-negative integer ids")
    settings = {"unk_token": model.get("unk_token", "[UNK]")}
    settings.update(_normalizer_settings(values.get("normalizer"), refuse))
    if values.get("pre_tokenizer") != {"type": "BertPreTokenizer"}:
        refuse("pre_tokenizer", values.get("pre_tokenizer"), "not BERT's whitespace-and-punctuation split")
    settings.update(_framing(values.get("post_processor"), vocab, refuse))
    settings["decoder"] = _decoder(values.get("decoder"), refuse)
    settings["sides"] = _sides(values, refuse)
    # Every entry, the roles' ([PAD]: in the vocabulary, special) included: a piece of the vocabulary
    # added as special (add_tokens(["cafe"], special_tokens=True)) is listed just like them.
    settings["added_tokens"] = read_added_tokens(values.get("added_tokens") or [], f"{path}: added_tokens",
                                                 listed=True, vocab=vocab)  # fmt: skip
    return vocab, settings


def _normalizer_settings(normalizer, refuse) -> dict:
    """BertNormalizer alone, or a Lowercase in front of one (how sentence-transformers adds
    do_lower_case: lowercase first, accents kept unless the BertNormalizer strips them).
    ``do_lower_case`` is the BertNormalizer's own flag; ``lowercase_first`` says a Lowercase is in
    front (directory.py counts it as lowercasing, and compares that with tokenizer_config.json).
    ``strip_accents`` stays as the file says it: null follows the lowercase flag, in ``tokenizers``
    as in BertTokenizer, so a reader that turns lowercasing off (``do_lower_case=False``, explore's
    ``--cased``) keeps the accents, as transformers does; resolved here to True, it stripped them."""
    steps = normalizer.get("normalizers") if isinstance(normalizer, dict) and normalizer.get("type") == "Sequence" \
        else [normalizer]  # fmt: skip
    lowercase_first = False
    if isinstance(steps, list) and len(steps) == 2 and steps[0] == {"type": "Lowercase"}:
        lowercase_first, steps = True, steps[1:]
    bert = steps[0] if isinstance(steps, list) and len(steps) == 1 else None
    if not isinstance(bert, dict) or bert.get("type") != "BertNormalizer":
        refuse("normalizer", normalizer, "not BERT's normalizer")
    if bert.get("clean_text", True) is not True:
        refuse("normalizer.clean_text", bert["clean_text"], "control characters kept")
    lowercase = bert.get("lowercase", True)
    strip_accents = bert.get("strip_accents")
    if not isinstance(lowercase, bool) or strip_accents not in (None, True, False):
        refuse("normalizer", bert, "unexpected lowercase / strip_accents values")
    handle_chinese = bert.get("handle_chinese_chars", True)
    if not isinstance(handle_chinese, bool):
        refuse("normalizer.handle_chinese_chars", handle_chinese, "not true or false")
    return {"do_lower_case": lowercase, "strip_accents": strip_accents, "tokenize_chinese_chars": handle_chinese,
            "lowercase_first": lowercase_first}  # fmt: skip


def _decoder(decoder, refuse) -> Decoder:
    """How ``decode`` joins pieces: WordPiece's decoder with its prefix and clean-up flag, or none
    (null, or no field: the tokenizers library then joins the pieces with spaces); another is refused."""
    if decoder is None:
        return Decoder(prefix=None, cleanup=False)
    if not isinstance(decoder, dict) or decoder.get("type") != "WordPiece":
        refuse("decoder", decoder, "not WordPiece's decoder")
    prefix, cleanup = decoder.get("prefix", "##"), decoder.get("cleanup", True)
    if not isinstance(prefix, str) or not isinstance(cleanup, bool):
        refuse("decoder", decoder, "a prefix that is not a string, or a clean-up that is not true or false")
    return Decoder(prefix, cleanup)


def _sides(values: dict, refuse) -> dict:
    """{"truncation_side", "padding_side": "left" or "right"} from the ``truncation`` and ``padding``
    sections' ``direction``: transformers 5 takes them where tokenizer_config.json says none
    (directory.py), so a folder saved with its tokenizer.json cutting on the left cuts there. (Their
    lengths and strategy are call-time settings it takes no further; a section left out, or one
    without a direction, is the right side.)"""
    sides = {}
    for section, setting in (("truncation", "truncation_side"), ("padding", "padding_side")):
        part = values.get(section)
        if part is None:
            continue
        direction = part.get("direction", "Right") if isinstance(part, dict) else part
        if direction not in ("Left", "Right"):
            refuse(f"{section}.direction", direction, "not Left or Right")
        sides[setting] = direction.lower()
    return sides


def _framing(processor, vocab: dict, refuse) -> dict:
    """The [CLS] A [SEP] (B [SEP]) framing, and which pieces play [CLS] and [SEP]."""
    if not isinstance(processor, dict):
        refuse("post_processor", processor, "no BERT framing ([CLS] A [SEP])")
    if processor.get("type") == "BertProcessing":
        pairs = [processor.get(name) for name in ("sep", "cls")]
        if not all(isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and _is_count(pair[1])
                   for pair in pairs):  # fmt: skip
            refuse("post_processor", processor, 'BertProcessing whose "sep" and "cls" are not [token, id]')
        sep, cls = pairs[0][0], pairs[1][0]
    elif processor.get("type") == "TemplateProcessing":
        single, pair = processor.get("single"), processor.get("pair")
        try:
            cls, sep = single[0]["SpecialToken"]["id"], single[2]["SpecialToken"]["id"]
            expected_single = [("S", cls, 0), ("A", 0), ("S", sep, 0)]
            expected_pair = [*expected_single, ("B", 1), ("S", sep, 1)]
            if [_piece(item) for item in single] != expected_single or [_piece(item) for item in pair] != expected_pair:
                raise ValueError
        except (TypeError, KeyError, IndexError, ValueError, AttributeError):
            refuse("post_processor", processor, "not BERT's framing [CLS] A [SEP] B [SEP] (type ids 0, 0, 1)")
        if not isinstance(cls, str) or not isinstance(sep, str):
            refuse("post_processor", processor, "framing tokens that are not strings")
    else:
        refuse("post_processor.type", processor.get("type"), "not BERT's framing")
    if cls not in vocab or sep not in vocab:
        refuse("post_processor", processor, "framing tokens that are not in the vocabulary")
    return {"cls_token": cls, "sep_token": sep}


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _piece(item: dict) -> tuple:
    if "SpecialToken" in item:
        return ("S", item["SpecialToken"]["id"], item["SpecialToken"].get("type_id", 0))
    return (item["Sequence"]["id"], item["Sequence"].get("type_id", 0))
