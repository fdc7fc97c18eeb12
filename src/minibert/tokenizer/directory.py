"""A tokenizer's directory: which files ``BertTokenizer.from_pretrained`` reads (vocab.txt, or
tokenizer.json; tokenizer_config.json; the casing without either: transformers' default, Google's
rule for Google's releases; the added tokens, from whichever files transformers 5 reads them:
added_token_files.py) and the files ``save_pretrained`` writes, as transformers writes them."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import replace
from pathlib import Path

from ..errors import CheckpointError, ModelNotFoundError
from ..formats.atomic_files import output_folder
from ..formats.file_sets import write_files_together
from ..loading.config_files import config_values
from ..loading.google_folder import google_release, model_folder
from ..loading.hub import resolve_file
from .added_token_files import merge_legacy_files
from .decoding import WORDPIECE, Decoder
from .files import (
    SPECIAL_TOKEN_NAMES,
    STALE_FILES,
    casing_contradiction,
    check_framing_roles,
    google_lower_case,
    read_tokenizer_config,
)
from .tokenizer_json import read_tokenizer_json
from .vocab_file import load_vocab
from .vocab_file import vocab_bytes as vocab_file_bytes

logger = logging.getLogger("minibert")


def read_tokenizer_files(name_or_path, revision: str | None = None) -> tuple[Path, dict, bool, dict]:
    """(vocab file, its {piece: id}, whether that file is vocab.txt (else tokenizer.json),
    BertTokenizer's keyword arguments) of a directory or hub repository: ``vocab.txt`` (or, without
    it, ``tokenizer.json``'s vocabulary), ``tokenizer.json``'s settings wherever it is there (transformers
    5 reads it before vocab.txt), and ``tokenizer_config.json``; without either of those, the casing of
    ``_casing_without_config``; the added tokens from whichever files transformers 5 reads them
    (added_token_files.py). Each file is read once."""

    def find(name):
        return resolve_file(name_or_path, name, revision=revision, required=False)

    vocab_file, json_file = find("vocab.txt"), find("tokenizer.json")
    config_file = find("tokenizer_config.json")
    settings = read_tokenizer_config(Path(config_file)) if config_file is not None else {}
    # BertTokenizerLegacy (transformers' slow tokenizer) keeps a vocab.txt line's trailing whitespace
    legacy = settings.pop("tokenizer_class", None) == "BertTokenizerLegacy"
    from_json, json_added = {}, []
    if json_file is not None:  # its vocabulary, settings and added tokens, with or without a vocab.txt beside it
        json_vocab, from_json = read_tokenizer_json(json_file)
        json_added = from_json.pop("added_tokens", [])
    if vocab_file is not None:
        vocab = load_vocab(vocab_file, kept_by=config_file if legacy else None)
        if json_file is not None:  # transformers 5 takes the vocabulary (and added tokens) from tokenizer.json
            _check_same_vocabulary(vocab, vocab_file, json_vocab, json_file)
    elif json_file is None:
        raise ModelNotFoundError(f"{name_or_path} has neither vocab.txt nor tokenizer.json")
    else:
        vocab_file, vocab = json_file, json_vocab
    vocab_is_file = vocab_file != json_file
    if config_file is None and json_file is None:  # vocab.txt alone: no file says the casing
        settings.update(_casing_without_config(name_or_path, vocab_file, vocab))
    if "added_tokens" in settings:  # the config's added_tokens_decoder: transformers reads no other file for them
        settings["added_tokens_file"] = config_file
    else:
        settings = merge_legacy_files(settings, find, json_added, json_file)
    check_framing_roles(settings)
    if from_json:
        if from_json.pop("lowercase_first"):  # a Lowercase step in front lowercases, as the BertNormalizer's flag does
            # its strip_accents stays the BertNormalizer's own: null is resolved against that flag first
            from_json["strip_accents"] = _accents_stripped(from_json)
            if config_file is not None:
                _check_config_lowercases(from_json, json_file, settings, config_file)
            from_json["do_lower_case"] = True
        rebuilt_by = None  # the file transformers 5 builds BertTokenizer from, ignoring tokenizer.json's settings
        if config_file is not None:
            _check_same_settings(from_json, json_file, settings, config_file)
            # transformers builds its tokenizer from the config: the same settings (just checked), but a
            # strip_accents null there follows a do_lower_case given later (from_pretrained's, --cased)
            from_json["strip_accents"] = settings.get("strip_accents")
            rebuilt_by = config_file
        elif (model_config := find("config.json")) is not None and _rebuilt_from_defaults(model_config):
            _check_same_defaults(from_json, json_file, model_config)  # (transformers' defaults, not the file's)
            rebuilt_by = model_config
        from_json["decoder"] = _decoder_of_both(from_json["decoder"], json_file, rebuilt_by)
        settings = {**from_json.pop("sides"), **settings}  # the config's sides first, as transformers 5 takes them
        settings.update(from_json)
    return Path(vocab_file), vocab, vocab_is_file, settings


def _decoder_of_both(decoder: Decoder, json_file, rebuilt_by) -> Decoder:
    """tokenizer.json's decoder where both readers follow it (the tokenizers library, and transformers'
    TokenizersBackend); where transformers 5 builds BertTokenizer from ``rebuilt_by`` instead, it
    decodes with WordPiece's own ("##", clean-up on), so a file that says otherwise decodes two ways:
    the folder loads (its ids are the same in both) and ``decode`` refuses, saying so."""
    if rebuilt_by is None or decoder == WORDPIECE:
        return decoder
    said = "null" if decoder.prefix is None else json.dumps({"type": "WordPiece", "prefix": decoder.prefix,
                                                              "cleanup": decoder.cleanup})  # fmt: skip
    return replace(decoder, refused=(
        f"cannot decode: {json_file} has decoder = {said}, but transformers 5 builds BertTokenizer from {rebuilt_by} "
        "with WordPiece's decoder (prefix ##, clean-up on) and ignores it, so transformers and the tokenizers library "
        "decode these ids to different texts, and minibert refuses rather than pick one (the ids are the same in "
        'both). To decode as transformers does, set the decoder to {"type": "WordPiece", "prefix": "##", '
        '"cleanup": true}'))


def _casing_without_config(name_or_path, vocab_file, vocab: dict) -> dict:
    """``do_lower_case`` for a vocab.txt with neither tokenizer_config.json nor tokenizer.json beside it.

    Google's releases (``google_release``: bert_config.json, a TensorFlow checkpoint, or the zip's name
    ``cased_L-12_H-768_A-12``) ship no tokenizer settings, and transformers loads no model from them:
    Google's README is the reference there, ``google_lower_case`` (the name, else the vocabulary), logged.
    Every other folder, and every hub repository, gets what transformers 5 gives it: BertTokenizer's
    default, lowercase (no setting here), so a hub id, its snapshot folder and a copy of it tokenize
    alike. Where the vocabulary is cased (``casing_contradiction``: lowercased text never reaches its
    capitalised words), a warning names the file that would say otherwise; the folder still loads, as
    in transformers."""
    folder = model_folder(name_or_path)  # (a TensorFlow checkpoint prefix's folder)
    if google_release(folder):
        lower, reason = google_lower_case(os.path.abspath(folder), vocab)
        logger.info("%s has no tokenizer_config.json: %s, as %s", name_or_path,
                    "lowercasing" if lower else "not lowercasing", reason)  # fmt: skip
        return {"do_lower_case": lower}
    why = casing_contradiction(vocab, True)
    if why:
        logger.warning("%s has no tokenizer_config.json, so it is lowercased, as transformers lowercases it "
                       "(BertTokenizer's default), but %s. If the model was trained on cased text, save "
                       '{"do_lower_case": false} as tokenizer_config.json beside %s', name_or_path, why,
                       vocab_file)  # fmt: skip
    return {}


# What transformers 5's BertTokenizer builds from tokenizer_config.json (its defaults where the file
# says nothing), ignoring tokenizer.json's normalizer, post-processor and model.unk_token.
_CONFIG_DEFAULTS = {"do_lower_case": True, "strip_accents": None, "tokenize_chinese_chars": True,
                    "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]"}  # fmt: skip


def _differences(from_json: dict, settings: dict):
    """(name, tokenizer.json's value, transformers' value) for each of ``_CONFIG_DEFAULTS`` where
    tokenizer.json's settings differ from those transformers 5's BertTokenizer builds from
    ``settings`` (a tokenizer_config.json's; its defaults where they say nothing)."""
    config = {name: settings.get(name, default) for name, default in _CONFIG_DEFAULTS.items()}
    config["strip_accents"] = _accents_stripped(config)  # (None follows do_lower_case, in both libraries)
    from_json = {**from_json, "strip_accents": _accents_stripped(from_json)}
    return [(name, from_json[name], value) for name, value in config.items() if from_json[name] != value]


def _check_same_settings(from_json: dict, json_file, settings: dict, config_file) -> None:
    """A folder with tokenizer.json (vocab.txt or not) and tokenizer_config.json: transformers 5 rebuilds
    the normalizer, the [CLS] A [SEP] framing and WordPiece's [UNK] from the config's settings, while
    ``tokenizers`` (what the file says) runs tokenizer.json's; where the two disagree, the libraries
    give other ids, and minibert refuses the folder (transformers' own save after
    ``add_special_tokens({"sep_token": ...})`` is one). A Lowercase step in front of tokenizer.json's
    BertNormalizer counts as its lowercasing (``_check_config_lowercases``)."""
    for name, in_json, value in _differences(from_json, settings)[:1]:
        raise CheckpointError(f"{json_file} and {config_file} disagree on {name} ({in_json!r} in "
                              f"tokenizer.json, {value!r} in the config): transformers builds its tokenizer from "
                              "the config's settings, the tokenizers library from tokenizer.json's, so the two "
                              "give other ids; minibert refuses the folder (make the files agree)")  # fmt: skip


# config.json's model_type for which transformers 5's AutoTokenizer picks BertTokenizer (its
# TOKENIZER_MAPPING_NAMES) when no tokenizer_config.json names a class; a config.json's own
# tokenizer_class comes first.
_BERT_TOKENIZER_MODEL_TYPES = (
    "align", "bark", "bert", "blip", "bros", "chinese_clip", "convbert", "distilbert", "electra", "ernie", "flava",
    "git", "grounding-dino", "layoutlm", "megatron-bert", "mm-grounding-dino", "nezha", "nomic_bert", "qdqbert",
    "realm", "retribert", "squeezebert", "tvp", "vilt", "visual_bert",
)  # fmt: skip


def _rebuilt_from_defaults(model_config) -> bool:
    """Whether transformers 5 (``AutoTokenizer``, and so sentence-transformers) loads a folder with
    tokenizer.json and this config.json but no tokenizer_config.json as ``BertTokenizer``, which builds
    the normalizer, the framing and [UNK] from its defaults and ignores tokenizer.json's: config.json's
    ``tokenizer_class`` says so, or (without one) its ``model_type`` maps to BertTokenizer. Otherwise
    (``TokenizersBackend``, ``PreTrainedTokenizerFast``, no model_type) it runs tokenizer.json, as
    ``tokenizers`` and minibert do. A config.json that is not a JSON object decides nothing here (the
    model's loader reports it)."""
    values = config_values(model_config)
    if values is None:
        return False
    if values.get("tokenizer_class") is not None:
        return values["tokenizer_class"] in ("BertTokenizer", "BertTokenizerFast")
    return values.get("model_type") in _BERT_TOKENIZER_MODEL_TYPES


def _check_same_defaults(from_json: dict, json_file, model_config) -> None:
    """A folder with tokenizer.json and a BERT's config.json, no tokenizer_config.json: transformers
    5 (``AutoTokenizer``, sentence-transformers) rebuilds the tokenizer from BertTokenizer's defaults
    (``_CONFIG_DEFAULTS``), the tokenizers library runs tokenizer.json. Where tokenizer.json's settings
    are those defaults, all give the same ids (transformers' and sentence-transformers' usual save, with
    a tokenizer_config.json, loads the same way); where they differ, minibert refuses the folder rather
    than pick one, saying what differs and the file that makes the folder unambiguous."""
    differences = _differences(from_json, {})
    if not differences:
        return
    listed = ", ".join(f"{name} {in_json!r} in tokenizer.json, {value!r} in transformers' BertTokenizer"
                       for name, in_json, value in differences)  # fmt: skip
    settings = {name: in_json for name, in_json, _ in differences}
    if "strip_accents" in settings or "do_lower_case" in settings:
        settings["strip_accents"] = _accents_stripped(from_json)
        settings["do_lower_case"] = from_json["do_lower_case"]
    config = json.dumps({"tokenizer_class": "BertTokenizer", **settings})
    raise CheckpointError(
        f"{json_file} and {model_config} (which makes transformers pick BertTokenizer; there is no "
        "tokenizer_config.json) give two tokenizers: "
        "transformers 5's AutoTokenizer, and so sentence-transformers, builds BertTokenizer from its defaults and "
        "ignores tokenizer.json's settings, while the tokenizers library runs tokenizer.json; they differ on "
        f"{listed}, so the libraries give other ids and minibert refuses the folder rather than pick one. To read "
        f"it as tokenizer.json says (as the tokenizers library does), save a tokenizer_config.json with {config} "
        "beside it; to read it as transformers does now, set tokenizer.json's settings to BertTokenizer's defaults"
    )


def _accents_stripped(settings: dict) -> bool:
    """Whether these settings strip accents: ``strip_accents``, or where it is None (null),
    ``do_lower_case`` (transformers' BertTokenizer and ``tokenizers``' BertNormalizer alike)."""
    strip = settings.get("strip_accents")
    return settings.get("do_lower_case", True) if strip is None else strip


def _check_config_lowercases(from_json: dict, json_file, settings: dict, config_file) -> None:
    """tokenizer.json lowercases first (a Lowercase step in front of its BertNormalizer: how
    sentence-transformers 6 saves its ``do_lower_case``, dropping it from sentence_bert_config.json)
    where tokenizer_config.json says ``do_lower_case: false`` (as that save leaves it). The references
    disagree there: transformers 5 rebuilds the normalizer from the config and drops the Lowercase, so
    AutoTokenizer and sentence-transformers 6.2 do not lowercase; ``tokenizers`` runs the file and does.
    Refused, with the edit that gives each reading."""
    if settings.get("do_lower_case", _CONFIG_DEFAULTS["do_lower_case"]):
        return  # both lowercase (accents: compared by _check_same_settings)
    strip = json.dumps(from_json["strip_accents"])
    raise CheckpointError(
        f"{json_file} lowercases first (a Lowercase step in front of its BertNormalizer, as sentence-transformers 6 "
        f"saves do_lower_case) and {config_file} says do_lower_case false: transformers 5 builds the normalizer "
        "from the config and drops the Lowercase, so AutoTokenizer and sentence-transformers 6.2 do not lowercase, "
        "while the tokenizers library runs tokenizer.json's and does; minibert refuses the folder rather than pick "
        'one. To read it cased, as transformers and sentence-transformers 6.2 do: remove {"type": "Lowercase"} '
        "from tokenizer.json's normalizer; to lowercase it, as tokenizers does (and as the model was trained if "
        'sentence-transformers saved it from a do_lower_case model): set "do_lower_case": true and '
        f'"strip_accents": {strip} in tokenizer_config.json'
    )


def _check_same_vocabulary(vocab: dict, vocab_file, json_vocab: dict, json_file) -> None:
    """vocab.txt and tokenizer.json's ``model.vocab`` must agree: transformers 5 reads the second,
    minibert the first."""
    if vocab != json_vocab:
        differing = [piece for piece in vocab if json_vocab.get(piece) != vocab[piece]]
        piece = (differing or [piece for piece in json_vocab if piece not in vocab])[0]
        raise CheckpointError(f"{json_file}'s model.vocab differs from {vocab_file} (e.g. {piece!r}: id "
                              f"{json_vocab.get(piece)} there, {vocab.get(piece)} in vocab.txt); transformers 5 takes "
                              "the vocabulary from tokenizer.json, so minibert refuses the folder rather than give "
                              "other ids")  # fmt: skip


_BERT_ROLES = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")  # always written (null if none)


def tokenizer_files(tokenizer) -> dict[str, bytes]:
    """The bytes of ``vocab.txt``, ``tokenizer_config.json`` and ``special_tokens_map.json`` for a
    BertTokenizer, as transformers writes them (``save_pretrained`` writes them atomically)."""
    # vocab.txt is the vocabulary WordPiece knows; added tokens go to added_tokens_decoder.
    if tokenizer._vocab_is_file:  # the file itself (a piece listed twice keeps its lines), whitespace trimmed
        vocab_bytes = vocab_file_bytes(tokenizer.vocab_file)
    else:
        pieces = {index: piece for piece, index in tokenizer._base_vocab.items()}
        ids = sorted(pieces)
        if ids != list(range(len(ids))):
            gap = next(i for i, index in enumerate(ids) if i != index)
            raise ValueError(f"cannot write vocab.txt: {tokenizer.vocab_file}'s vocabulary has no piece with id {gap}")
        vocab_bytes = "".join(pieces[index] + "\n" for index in ids).encode("utf-8")
    # A role with no id (a vocabulary without [PAD] or [MASK]) is written as null, as transformers writes
    # it: a name there would make transformers add that token past the end of vocab.txt.
    # bos/eos, None unless set, are left out when None, as transformers leaves them out.
    roles = [name for name in SPECIAL_TOKEN_NAMES if name in _BERT_ROLES or getattr(tokenizer, name) is not None]
    specials = {name: getattr(tokenizer, name) if getattr(tokenizer, f"{name}_id") is not None else None
                for name in roles}  # fmt: skip
    if tokenizer.additional_special_tokens:
        specials["additional_special_tokens"] = list(tokenizer.additional_special_tokens)
    added = {str(index): token.as_json() for index, token in tokenizer.added_tokens_decoder.items()}
    config = {
        "tokenizer_class": tokenizer_class(tokenizer),
        "do_lower_case": tokenizer.basic.do_lower_case,
        "strip_accents": tokenizer.strip_accents,
        "tokenize_chinese_chars": tokenizer.basic.tokenize_chinese_chars,
        "do_basic_tokenize": tokenizer.do_basic_tokenize,
        "model_max_length": tokenizer.model_max_length,
        "padding_side": tokenizer.padding_side,
        "truncation_side": tokenizer.truncation_side,
        "clean_up_tokenization_spaces": tokenizer.clean_up_tokenization_spaces,
        **specials,
        "added_tokens_decoder": added,  # always (the roles at least): then no reader takes an older file's
    }
    named = {name: token for name, token in specials.items() if token is not None}  # (the map names tokens)
    files = {
        "vocab.txt": vocab_bytes,
        "tokenizer_config.json": (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
        "special_tokens_map.json": (json.dumps(named, indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
    }
    return files


def tokenizer_class(tokenizer) -> str:
    """tokenizer_config.json's ``tokenizer_class``: the transformers class that gives this
    tokenizer's ids. transformers 5's ``BertTokenizer`` (fast and slow alike) always runs the basic
    tokenizer and ignores ``do_basic_tokenize`` without a word, so a tokenizer without it is saved
    as ``BertTokenizerLegacy``, transformers 5's class that honours it. (transformers 4 has no such
    class and refuses the folder, loudly, where its fast BertTokenizer would also ignore the flag.)"""
    return "BertTokenizer" if tokenizer.do_basic_tokenize else "BertTokenizerLegacy"


def check_save_keywords(keywords: dict) -> None:
    """transformers' tokenizer ``save_pretrained`` keywords that minibert honours: ``legacy_format``
    None or True (vocab.txt and tokenizer_config.json, transformers' "legacy" files, are what minibert
    writes) and ``push_to_hub=False``. False and True, another keyword: refused, saying why."""
    unknown = sorted(set(keywords) - {"legacy_format", "push_to_hub"})
    if unknown:
        raise TypeError(f"save_pretrained() got unexpected keyword arguments {unknown}; besides save_directory, "
                        "it takes transformers' legacy_format (None or True) and push_to_hub=False")  # fmt: skip
    if keywords.get("legacy_format", None) not in (None, True):
        raise ValueError(f"save_pretrained: legacy_format={keywords['legacy_format']!r} asks for tokenizer.json "
                         "alone; minibert writes vocab.txt and tokenizer_config.json, which minibert and "
                         "transformers load: leave legacy_format out")  # fmt: skip
    if keywords.get("push_to_hub", False) is not False:
        raise ValueError("save_pretrained: minibert does not upload (push_to_hub=True); save, then upload the "
                         "folder: huggingface_hub.upload_folder(repo_id='you/name', folder_path=FOLDER)")  # fmt: skip


def write_tokenizer_files(tokenizer, save_directory) -> tuple[str, ...]:
    """``BertTokenizer.save_pretrained``: the directory (created if needed), the files together or
    not at all (formats/file_sets.py). A ``tokenizer.json`` already there (transformers 5 saves
    one) is removed with them: transformers and ``tokenizers`` read it before vocab.txt, and
    minibert its added tokens, so left there it would tokenize as the tokenizer saved before; so is
    an ``added_tokens.json`` (files.py ``STALE_FILES``), which a reader takes where a config lacks
    ``added_tokens_decoder`` (minibert's always has it now, as transformers' slow tokenizer writes it).
    A path that is a file, or under one, or a folder that cannot be made is a FileWriteError saying
    which (``output_folder``), as the model's and the config's ``save_pretrained`` say it."""
    files = tokenizer_files(tokenizer)
    if replace(tokenizer._decoder, refused=None) != WORDPIECE:  # (a refused one too: the files saved decode)
        logger.warning("%s decodes as its tokenizer.json's decoder says (%s); the files saved to %s (vocab.txt, "
                       "tokenizer_config.json) decode with BERT's own, WordPiece's (prefix ##, clean-up on), in "
                       "minibert and transformers alike", tokenizer.name_or_path or "this tokenizer",
                       "null" if tokenizer._decoder.prefix is None else
                       f"prefix {tokenizer._decoder.prefix!r}, clean-up {tokenizer._decoder.cleanup}",
                       save_directory)  # fmt: skip
    directory = output_folder(save_directory, *files)  # a file there, or a folder that cannot be made: said
    write_files_together({directory / name: data for name, data in files.items()},
                         remove=[directory / name for name in STALE_FILES if name not in files])  # fmt: skip
    return tuple(str(directory / name) for name in files)
