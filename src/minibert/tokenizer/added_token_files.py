"""Where a folder keeps its added tokens, and which file wins, as transformers 5 reads a BERT folder.

transformers has kept the tokens added to a tokenizer (``<e1>``, ``COVID-19``) in several files
over the years, and a folder on the hub may hold any mixture of them:

* ``tokenizer_config.json``'s ``added_tokens_decoder`` — {id: token} (transformers ≥ 4.34);
* ``added_tokens.json`` — {token: id} (before 4.34), with ``special_tokens_map.json`` naming the
  roles and the ``additional_special_tokens``;
* ``tokenizer.json``'s ``added_tokens`` — the Rust library's file; transformers 5 saves a tokenizer
  as it and tokenizer_config.json alone, even into a folder that holds a vocab.txt already.

transformers 5 (``PreTrainedTokenizerBase._from_pretrained``) reads them so, and so does minibert:

1. A config with ``added_tokens_decoder``: those tokens alone. special_tokens_map.json,
   added_tokens.json and tokenizer.json's ``added_tokens`` are not read at all.
2. Otherwise, in this order: special_tokens_map.json's roles replace the config's (null: no such
   role, as a null in the config says where the map does not name the role), its
   ``extra_special_tokens`` join the config's, and its ``additional_special_tokens`` count only
   where the config names no extra special tokens; then added_tokens.json, each token special
   (matched as typed) if it is a role or an extra special token known by then (not the map's
   ``additional_special_tokens``: such a token is matched after normalization, yet named
   special), else matched after normalization; then tokenizer.json's ``added_tokens``, each
   replacing the entry of its id. All of them are then added in the order of their ids.

    {"<e1>": 30523, "newword": 30522}  →  [(30522, newword), (30523, <e1>)]
"""

from __future__ import annotations

from ..errors import CheckpointError
from .added_tokens import AddedToken
from .files import SPECIAL_TOKEN_NAMES, role_token, special_token_list
from .tokenizer_json import read_json_object


def merge_legacy_files(settings: dict, find, json_added: list | None, json_file) -> dict:
    """``settings`` (tokenizer_config.json's, which has no ``added_tokens_decoder``) with
    special_tokens_map.json, added_tokens.json and ``json_added`` (tokenizer.json's added tokens,
    read from ``json_file``) merged in as step 2 above says. ``find(name)``: the path of a file of
    the folder, or None."""
    settings = dict(settings)
    known_extra = list(settings.get("additional_special_tokens", []))
    map_file = find("special_tokens_map.json")
    if map_file is not None:
        values = read_json_object(map_file)
        nulls = dict(settings.get("null_roles", {}))  # role → the file that sets it null
        for name in SPECIAL_TOKEN_NAMES:
            if name in values:
                settings[name] = role_token(values[name], f"{map_file}: {name}")
                nulls.pop(name, None)
                if settings[name] is None:
                    nulls[name] = str(map_file)
        settings["null_roles"] = nulls
        if "extra_special_tokens" in values:
            extra = special_token_list(values["extra_special_tokens"], f"{map_file}: extra_special_tokens")
            known_extra += [token for token in extra if token not in known_extra]
            settings["additional_special_tokens"] = known_extra
        elif "additional_special_tokens" in values and "additional_special_tokens" not in settings:
            where = f"{map_file}: additional_special_tokens"
            settings["additional_special_tokens"] = special_token_list(values["additional_special_tokens"], where)
    entries: dict[int, AddedToken] = {}
    sources = []
    added_file = find("added_tokens.json")
    if added_file is not None:
        special = {settings[name] for name in SPECIAL_TOKEN_NAMES if settings.get(name)} | set(known_extra)
        entries.update(_read_added_tokens_json(added_file, special))
        sources.append(str(added_file))
    if json_added:
        entries.update(dict(json_added))
        sources.append(str(json_file))
    if entries:
        settings["added_tokens"] = sorted(entries.items(), key=lambda entry: entry[0])
        settings["added_tokens_file"] = " and ".join(sources)
    return settings


def _read_added_tokens_json(path, special: set[str]) -> dict[int, AddedToken]:
    """added_tokens.json, {token: id}, as {id: AddedToken}: special (matched as typed) if named in
    ``special``, else matched after normalization, as transformers reads it."""
    values = read_json_object(path)
    tokens = {}
    for content, index in values.items():
        if isinstance(index, bool) or not isinstance(index, int) or index < 0 or not content:
            raise CheckpointError(f"{path}: {content[:40]!r}: {str(index)[:40]} is not a token id")
        tokens[index] = AddedToken(content, normalized=content not in special, special=content in special)
    return tokens
