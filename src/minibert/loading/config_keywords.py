"""A model's ``from_pretrained`` with config fields, or a config given whole (transformers' keywords).

Fine-tuning code passes a field straight to the model, ``from_pretrained(name, hidden_dropout_prob=0.3)``,
and transformers' run_glue.py gives the config it read (loading/config_files.py) in place of config.json,
``from_pretrained(name, config=config)``. minibert takes both as transformers does where the checkpoint
allows it:

* the fields that change no tensor's shape (``BUILD_FIELDS``: the dropouts, ``layer_norm_eps``,
  ``hidden_act``, ``initializer_range``, ``pad_token_id``) build the model: its Dropout and LayerNorm
  modules are made with them. A shape field (``hidden_size``, ...) is refused: the weights fix it;
* ``config=``: the config in place of config.json, when it has the checkpoint's shapes
  (``SHAPE_FIELDS``; a config that changes one is a ``CheckpointError`` naming the fields); its labels
  count as labels given (``num_labels=``), and keywords given beside it replace its fields. As in
  transformers, it may also be a folder or hub id to read the config from (``config=config_name``,
  run_glue's spelling);
* the label fields (``num_labels``, ``id2label``, ``label2id``, ``problem_type``,
  ``classifier_dropout``) are checked before they meet config.json's (``check_label_keywords``): a
  wrong one is the caller's, named as a keyword, never blamed on the file.
"""

from __future__ import annotations

import dataclasses
import os

from ..config import BertConfig, labels_by_id
from ..errors import CheckpointError
from .config_fields import BUILD_FIELDS, INTEGER_RANGES, PROBLEM_TYPES, SHAPE_FIELDS
from .head_labels import LABEL_COUNT_FIELDS, contradicting_labels


def take_build_fields(keywords: dict, cls: type) -> dict:
    """The ``BUILD_FIELDS`` given to a model's ``from_pretrained``, taken out of ``keywords`` and checked
    before any file is fetched; a shape field is refused, naming why."""
    shapes = sorted(set(keywords) & set(SHAPE_FIELDS))
    if shapes:
        raise TypeError(f"{cls.__name__}.from_pretrained() cannot take {', '.join(shapes)}: the checkpoint's weights "
                        "fix the shapes (to build a model of another shape with fresh weights: "
                        f"{cls.__name__}(BertConfig(...)))")  # fmt: skip
    fields = {name: keywords.pop(name) for name in BUILD_FIELDS if name in keywords}
    probe = {**fields, "vocab_size": INTEGER_RANGES["vocab_size"][1]}  # pad_token_id is checked against the
    BertConfig(**probe)  # checkpoint's vocabulary when it is read; each value's type and range now
    return fields


def take_given_config(keywords: dict) -> BertConfig | str | None:
    """``config=`` given to a model's ``from_pretrained``, taken out of ``keywords``: a minibert
    BertConfig, or (as transformers takes it) a folder or hub id whose config.json is to be read in
    place of the checkpoint's, returned as a str for the load to read with its download options."""
    given = keywords.pop("config", None)
    if isinstance(given, (str, os.PathLike)):
        return os.fspath(given)
    if given is not None and not isinstance(given, BertConfig):
        raise TypeError(f"config must be minibert's BertConfig (BertConfig.from_pretrained(name), or AutoConfig's), "
                        f"or a folder or hub id to read it from, got {type(given).__module__}.{type(given).__name__}")
    return given


def check_label_keywords(label_config: dict) -> None:
    """The caller's label fields (``from_pretrained(path, num_labels=3, id2label={...})``), checked
    before they are merged into config.json's: a wrong one is a ValueError naming the keyword
    (config.json, whose own fields may well be right, is not named). ``num_labels`` beside an
    ``id2label`` of another length is refused: transformers 5 then sizes the head by id2label but keeps
    num_labels' label2id (LABEL_0 ...), a config that contradicts itself, so the call says which to give."""
    where = "from_pretrained() keyword {}"
    counted = {}
    for name in ("num_labels", "id2label"):
        if label_config.get(name) is not None:
            try:
                counted[name] = labels_by_id({name: label_config[name]}, field=where)[0]
            except CheckpointError as error:
                raise ValueError(str(error)) from None
    if len(counted) == 2 and len(counted["num_labels"]) != len(counted["id2label"]):
        raise ValueError(f"from_pretrained(): {contradicting_labels(label_config['num_labels'], counted['id2label'])}")
    label2id = label_config.get("label2id")
    if label2id is not None and not (isinstance(label2id, dict) and all(
            isinstance(key, str) and isinstance(index, int) and not isinstance(index, bool)
            for key, index in label2id.items())):  # fmt: skip
        raise ValueError(f"{where.format('label2id')} must be a dict of label names to ids, got {label2id!r:.60}")
    problem = label_config.get("problem_type")
    if problem is not None and problem not in PROBLEM_TYPES:
        raise ValueError(f"{where.format('problem_type')} must be None or one of {', '.join(PROBLEM_TYPES)}, got "
                         f"{problem!r:.60}")  # fmt: skip
    dropout = label_config.get("classifier_dropout")
    number = isinstance(dropout, (int, float)) and not isinstance(dropout, bool)
    if dropout is not None and not (number and 0 <= dropout <= 1):
        raise ValueError(f"{where.format('classifier_dropout')} must be a number from 0 to 1, got {dropout!r:.60}")


def in_place_of(read: BertConfig, given: BertConfig, config_file) -> tuple[BertConfig, dict]:
    """(a copy of ``given``, its label fields) to load the checkpoint with, in place of ``read``
    (its config.json): refused, naming the fields, when it changes the shape of a tensor."""
    changed = [f"{name} {getattr(given, name)} (config.json: {getattr(read, name)})"
               for name in SHAPE_FIELDS if getattr(given, name) != getattr(read, name)]  # fmt: skip
    if changed:
        raise CheckpointError(f"{config_file}: the config given changes the shape of the checkpoint's tensors: "
                              f"{', '.join(changed)}; give a config read from this checkpoint "
                              "(AutoConfig.from_pretrained(name), fields that keep the shapes changed)")  # fmt: skip
    labels = {name: given.extra[name] for name in (*LABEL_COUNT_FIELDS, "label2id") if name in given.extra}
    return dataclasses.replace(given, extra=dict(given.extra)), labels


def replace_label_fields(config: BertConfig, label_config: dict) -> None:
    """The caller's label fields (``from_pretrained(path, num_labels=3)``) in place of config.json's,
    as transformers replaces them: ``num_labels`` alone, where it changes the count, names the
    labels LABEL_0 ... LABEL_{n-1} (the count config.json names keeps its names, as transformers'
    setter keeps them: a fine-tuned checkpoint loaded with its own ``num_labels``); ``id2label``
    alone is the count, and its inverse the label2id."""
    if not label_config:
        return
    if "num_labels" in label_config and "id2label" not in label_config \
            and label_config["num_labels"] != config.num_labels:  # fmt: skip
        config.extra.pop("id2label", None)  # LABEL_0 ... LABEL_{n-1}, as transformers names them
        config.extra.pop("label2id", None)
    if "id2label" in label_config and not {"num_labels", "_num_labels"} & set(label_config):
        config.extra.pop("num_labels", None)  # the labels given are the count (transformers' num_labels is
        config.extra.pop("_num_labels", None)  # len(id2label)): a head of another size is refused, not renamed
    if "id2label" in label_config and "label2id" not in label_config:
        config.extra.pop("label2id", None)  # config.json's, for its own labels: the inverse of those given
    config.extra.update(label_config)
