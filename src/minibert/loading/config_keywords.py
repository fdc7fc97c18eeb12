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
  count as labels given (``num_labels=``), and keywords given beside it replace its fields.
"""

from __future__ import annotations

import dataclasses

from ..config import BertConfig
from ..errors import CheckpointError
from .config_fields import BUILD_FIELDS, INTEGER_RANGES, SHAPE_FIELDS
from .head_labels import LABEL_COUNT_FIELDS


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


def take_given_config(keywords: dict) -> BertConfig | None:
    """``config=`` given to a model's ``from_pretrained``, taken out of ``keywords``: a minibert BertConfig."""
    given = keywords.pop("config", None)
    if given is not None and not isinstance(given, BertConfig):
        raise TypeError(f"config must be minibert's BertConfig (BertConfig.from_pretrained(name), or "
                        f"AutoConfig's), got {type(given).__module__}.{type(given).__name__}")  # fmt: skip
    return given


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
    as transformers replaces them: ``num_labels`` alone names the labels LABEL_0 ... LABEL_{n-1};
    ``id2label`` alone is the count, and its inverse the label2id."""
    if not label_config:
        return
    if "num_labels" in label_config and "id2label" not in label_config:
        config.extra.pop("id2label", None)  # LABEL_0 ... LABEL_{n-1}, as transformers names them
        config.extra.pop("label2id", None)
    if "id2label" in label_config and not {"num_labels", "_num_labels"} & set(label_config):
        config.extra.pop("num_labels", None)  # the labels given are the count (transformers' num_labels is
        config.extra.pop("_num_labels", None)  # len(id2label)): a head of another size is refused, not renamed
    if "id2label" in label_config and "label2id" not in label_config:
        config.extra.pop("label2id", None)  # config.json's, for its own labels: the inverse of those given
    config.extra.update(label_config)
