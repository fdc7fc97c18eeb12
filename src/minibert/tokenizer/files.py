"""The tokenizer's files: ``vocab.txt``, ``tokenizer_config.json``, and the casing of Google's
checkpoints, which ship neither a tokenizer config nor a casing flag (tokenizer.json: see
tokenizer_json.py)."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import CheckpointError
from ..formats.json_files import parse_json, short_json
from .added_tokens import AddedToken
from .arguments import LARGE_INTEGER, VERY_LARGE_INTEGER
from .encoding import SIDES

# transformers' SPECIAL_TOKENS_ATTRIBUTES, in its order. BERT frames with [CLS] and [SEP] and has no
# bos/eos roles of its own: they are None until set (bert2bert sets bos = [CLS], eos = [SEP]).
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_DEFAULT_SPECIAL_TOKENS = {
    "bos_token": None,
    "eos_token": None,
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}

# Files a reader takes before, or merges into, what minibert's savers write: transformers and
# `tokenizers` read tokenizer.json before vocab.txt; without added_tokens_decoder in the config (an
# older save's, or another program's), transformers reads the roles of special_tokens_map.json and the
# tokens of added_tokens.json. A saver removes each of them it does not write, with the files it writes,
# so that a folder holds the tokenizer saved, not a mix with the one saved there before.
STALE_FILES = ("tokenizer.json", "added_tokens.json", "special_tokens_map.json")


def capitalised_words(vocab) -> list[str]:
    """The pieces that are capitalised words ("Paris", not "PARIS" or "##s"): what tells a cased
    vocabulary from an uncased one (more than 1% of a cased English one; none of an uncased one)."""
    return [token for token in vocab if len(token) > 1 and token[0].isupper() and token[1:].islower()]


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
    capitalised = capitalised_words(vocab)
    if len(capitalised) * 100 > len(vocab):  # cased English vocabularies: ~15%; uncased: 0
        return (
            False,
            f"its vocabulary has capitalised words ({len(capitalised)} of {len(vocab)}, e.g. {capitalised[0]})",
        )
    return True, f"its vocabulary has no capitalised words ({len(capitalised)} of {len(vocab)})"


def casing_contradiction(vocab: dict[str, int], lower: bool) -> str | None:
    """Why ``do_lower_case=lower`` contradicts the vocabulary, or None: lowercasing for a cased
    vocabulary (its capitalised words are never reached), or not lowercasing for an uncased one (no
    capitalised word at all, among many lowercase ones: every capitalised word of a text falls apart).
    A vocabulary without words (amino acids, SMILES) or with few has no casing to contradict.

    >>> casing_contradiction({"the": 0, "The": 1, "Paris": 2, "paris": 3}, True)
    'its vocabulary is cased (2 of 4 pieces are capitalised words, e.g. The): lowercased text never reaches them'
    >>> casing_contradiction({"the": 0, "paris": 1, "##s": 2}, True) is None
    True
    """
    capitalised = capitalised_words(vocab)
    if lower and len(capitalised) * 100 > len(vocab):
        return (f"its vocabulary is cased ({len(capitalised)} of {len(vocab)} pieces are capitalised words, "
                f"e.g. {capitalised[0]}): lowercased text never reaches them")  # fmt: skip
    lowercase = sum(1 for token in vocab if len(token) > 1 and token.isalpha() and token.islower())
    if not lower and not capitalised and lowercase * 100 > len(vocab):
        return (f"its vocabulary is uncased ({lowercase} lowercase words of {len(vocab)} pieces, not one "
                "capitalised): a capitalised word of a text that is not lowercased falls apart into pieces or [UNK]")
    return None


def _model_max_length(value, config_file: Path) -> int:
    """tokenizer_config.json's ``model_max_length``: a positive int, kept as it is (transformers'
    "no limit", int(1e30), included); a float above 1e20 (a file that says ``1e30``) means no limit
    to transformers too and is read as int(1e30). Anything else is refused: no length to cut at."""
    if isinstance(value, float) and value > LARGE_INTEGER:
        return VERY_LARGE_INTEGER
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise CheckpointError(f"{config_file}: model_max_length must be a positive int (or 1e30, transformers' \"no "
                          f"limit\"), got {value!r}")  # fmt: skip


def _check_never_split(config: dict, config_file: Path) -> None:
    """``never_split`` under ``tokenizer_class: BertTokenizerLegacy``: transformers' slow tokenizer
    keeps those words whole (``"don't"`` one word, [UNK] if the vocabulary lacks it), which minibert's
    basic tokenizer does not; refused. (transformers 5's BertTokenizer ignores never_split, as minibert
    does, so there it is read as nothing.)"""
    never_split = config.get("never_split")
    if config["tokenizer_class"] == "BertTokenizerLegacy" and never_split:
        raise CheckpointError(f"{config_file}: never_split = {short_json(never_split)} with tokenizer_class "
                              "BertTokenizerLegacy: transformers keeps those words whole, minibert's basic tokenizer "
                              "splits them, so the two give other ids; minibert refuses the folder (remove "
                              "never_split to read it as minibert and transformers' BertTokenizer do)")  # fmt: skip


def read_tokenizer_config(config_file: Path) -> dict:
    """The settings minibert takes from tokenizer_config.json (others are ignored)."""
    try:
        config = parse_json(config_file.read_bytes())
        if not isinstance(config, dict):
            raise ValueError("the top level is not a JSON object")
    except ValueError as error:
        raise CheckpointError(f"malformed tokenizer config {config_file}: {error}") from None
    settings = {}
    for key in ("do_lower_case", "tokenize_chinese_chars", "do_basic_tokenize", "clean_up_tokenization_spaces",
                "strip_accents"):  # fmt: skip
        value = config.get(key)
        if value is not None and not isinstance(value, bool):  # "false" is no flag (transformers refuses it too)
            raise CheckpointError(f"{config_file}: {key} must be true or false, got {short_json(value)}")
        if value is not None or key == "strip_accents":  # strip_accents None: follow do_lower_case
            settings[key] = value
    if isinstance(config.get("tokenizer_class"), str):  # (read_tokenizer_files takes it out)
        settings["tokenizer_class"] = config["tokenizer_class"]
        _check_never_split(config, config_file)
    if config.get("model_max_length") is not None:  # (absent or null: transformers' "no limit", the default)
        settings["model_max_length"] = _model_max_length(config["model_max_length"], config_file)
    for key in ("padding_side", "truncation_side"):
        if key in config:
            if config[key] not in SIDES:
                raise CheckpointError(f"{config_file}: {key} must be 'right' or 'left', got {config[key]!r}")
            settings[key] = config[key]
    # transformers 5 writes them as extra_special_tokens (a list, or {name: token}); 4 as additional_...;
    # given both, transformers 5 takes extra_special_tokens unless it is empty.
    if "extra_special_tokens" in config or "additional_special_tokens" in config:
        extra = config.get("extra_special_tokens") or config.get("additional_special_tokens") or []
        settings["additional_special_tokens"] = special_token_list(extra, f"{config_file}: extra_special_tokens")
    if "added_tokens_decoder" in config:
        where = f"{config_file}: added_tokens_decoder"
        settings["added_tokens"] = read_added_tokens(config["added_tokens_decoder"], where)
    listed = {token.content for _, token in settings.get("added_tokens", [])}
    for name in SPECIAL_TOKEN_NAMES:
        if name in config:
            settings[name] = role_token(config[name], f"{config_file}: {name}", listed=listed)
            if settings[name] is None:
                settings.setdefault("null_roles", {})[name] = str(config_file)
    return settings


def role_token(value, where: str, listed=()) -> str | None:
    """A role's token as a file gives it (tokenizer_config.json, special_tokens_map.json): a str;
    null, which transformers reads as no such role (None: a tokenizer without [PAD] cannot pad); or
    a serialized AddedToken (``{"content": "[MASK]", "lstrip": false, ...}``), whose options
    transformers honours: one matched in a way minibert does not (``single_word``, ``lstrip``,
    ``rstrip``, or a special token matched after normalization) is a CheckpointError naming the file
    and field, as the same token in ``added_tokens_decoder`` is, unless its content is ``listed``
    there (transformers then takes that entry's options instead)."""
    if value is None:
        return None
    content = value.get("content") if isinstance(value, dict) else value
    if not isinstance(content, str) or not content:
        raise CheckpointError(f"{where} must be a token (a string), got {short_json(value)}")
    if isinstance(value, dict) and content not in listed:
        flags = {name: value[name] for name in _ADDED_TOKEN_FLAGS if name in value and name != "special"}
        if not all(isinstance(flag, bool) for flag in flags.values()):
            raise CheckpointError(f"{where}: non-boolean flags {flags}")
        try:
            AddedToken.of(AddedToken(content, **flags), special=True)
        except NotImplementedError as error:
            raise CheckpointError(f"{where}: {error}") from None
    return content


def check_framing_roles(settings: dict) -> None:
    """[UNK], [CLS] and [SEP] a folder's files set to null (``settings["null_roles"]``: which file
    did) are refused: BERT frames every input with [CLS] and [SEP] and spells a word its vocabulary
    lacks as [UNK], and transformers, given null, frames with stand-in ids (2 and 3) whatever the
    vocabulary holds there."""
    for name in ("unk_token", "cls_token", "sep_token"):
        if name in settings and settings[name] is None:
            raise CheckpointError(f"{settings['null_roles'][name]}: {name} is null; BERT needs it to frame (or spell) "
                                  "every input, and transformers then uses stand-in ids that are not this "
                                  f"vocabulary's: name the token (\"{_DEFAULT_SPECIAL_TOKENS[name]}\")")  # fmt: skip


def special_token_list(tokens, where: str) -> list[str]:
    """A file's list of special tokens (str, or serialized AddedToken dicts, checked as a role's
    are: ``role_token``; transformers 5 may write {name: token}) as a list of str, or a
    CheckpointError naming the file."""
    if isinstance(tokens, dict):
        tokens = list(tokens.values())
    if not isinstance(tokens, list) or not all(isinstance(token, (str, dict)) for token in tokens):
        raise CheckpointError(f"{where} must be a list of strings")
    return [role_token(token, where) for token in tokens]


_ADDED_TOKEN_FLAGS = ("single_word", "lstrip", "rstrip", "normalized", "special")


def read_added_tokens(entries, where: str, *, listed: bool = False, vocab=()) -> list[tuple[int, AddedToken]]:
    """(id, AddedToken) from ``{"30522": {"content": ..., "normalized": ..., ...}}``
    (tokenizer_config.json's ``added_tokens_decoder``: sorted by id, as transformers adds them) or,
    ``listed``, from ``[{"id": 30522, "content": ..., ...}]`` (tokenizer.json's ``added_tokens``),
    every field's type checked.

    A list whose new tokens (those not in ``vocab``) are out of id order is refused: ``tokenizers``
    gives each new token the next id in *list* order (the ``id`` fields are not read), while
    transformers' BertTokenizer (a folder with a tokenizer_config.json) adds them in *id* order, so
    the two give such a file different ids."""
    if listed and isinstance(entries, list):
        items = [(entry.get("id") if isinstance(entry, dict) else None, entry) for entry in entries]
    elif not listed and isinstance(entries, dict):
        items = list(entries.items())
    else:
        shape = "a list" if listed else "a JSON object {id: added token}"
        raise CheckpointError(f"{where} must be {shape}, got {type(entries).__name__}")
    tokens = []
    for key, entry in items:
        index = int(key) if not listed and isinstance(key, str) and key.isdigit() and len(key) < 10 else key
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise CheckpointError(f"{where}: {str(key)[:40]!r} is not a token id")
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            raise CheckpointError(f"{where}: the entry of id {index} is not an added token with a content string")
        flags = {name: entry[name] for name in _ADDED_TOKEN_FLAGS if name in entry}
        if not all(isinstance(value, bool) for value in flags.values()):
            raise CheckpointError(f"{where}: the entry of id {index} has non-boolean flags {flags}")
        try:
            tokens.append((index, AddedToken.of(AddedToken(entry["content"], **flags), special=False)))
        except NotImplementedError as error:
            raise CheckpointError(f"{where}: {error}") from None
    if not listed:
        return sorted(tokens, key=lambda entry: entry[0])
    new = [(index, token) for index, token in tokens if token.content not in vocab]
    for (index, token), (next_index, next_token) in zip(new, new[1:]):
        if next_index <= index:
            raise CheckpointError(
                f"{where}: not in id order ({token.content!r}, id {index}, is listed before {next_token.content!r}, "
                f"id {next_index}): `tokenizers` numbers added tokens in list order, transformers' BertTokenizer in "
                "id order, so the two libraries give this file different ids; minibert refuses it"
            )  # fmt: skip
    return tokens
