"""A config read from a checkpoint with the caller's fields, and saved: transformers'
``BertConfig.from_pretrained`` / ``AutoConfig.from_pretrained`` and ``config.save_pretrained``.

transformers' example scripts read the config first, with the task's fields, then load the model
with it (loading/config_keywords.py takes ``config=``)::

    config = AutoConfig.from_pretrained(name, num_labels=3, finetuning_task="mnli", cache_dir=...)
    model = AutoModelForSequenceClassification.from_pretrained(name, config=config)

``BertConfig.from_pretrained`` takes every field minibert reads (``CONFIG_FIELDS``: the dataclass's
numbers, the labels, each call's defaults, and ``use_cache`` and ``finetuning_task``, kept and
saved), each checked as the config checks it (its ``check_domains``, its setters); a field minibert
does not read is a ``TypeError`` listing what is taken (transformers drops it unused). The download
keywords are transformers' (``cache_dir``, ``local_files_only``, ``token``; ``trust_remote_code``
changes nothing).

(This module does not import config.py, which calls it: the class is passed in.)
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ..formats.atomic_files import naming_the_file, output_folder
from ..formats.json_files import parse_json
from .config_fields import BUILD_FIELDS, CALL_DEFAULTS, CONFIG_FIELDS, SHAPE_FIELDS
from .google_folder import model_folder
from .head_labels import contradicting_labels
from .hub import hub_options, resolve_file
from .transformers_keywords import HUB_KEYWORDS, config_keywords


def config_file(name_or_path, revision: str | None, required: bool = True):
    """config.json of a directory or hub repository (bert_config.json in Google's unpacked zips)."""
    folder = model_folder(name_or_path)  # (a TensorFlow checkpoint's prefix: its folder's)
    google = os.path.join(folder, "bert_config.json")
    if os.path.isfile(google) and not os.path.isfile(os.path.join(folder, "config.json")):
        return google
    return resolve_file(name_or_path, "config.json", revision=revision, required=required)


def config_values(path) -> dict | None:
    """The JSON object of a config file, or None where it cannot be read, is not JSON or is not an
    object: the quiet reading made before a model's own loading (which says what is wrong with the
    file) to decide something early, the class a checkpoint was saved as, its model_type."""
    try:
        values = parse_json(Path(path).read_bytes())
    except (OSError, ValueError):
        return None
    return values if isinstance(values, dict) else None


def read_config(cls: type, name_or_path, revision: str | None, keywords: dict):
    """transformers' ``BertConfig.from_pretrained(name_or_path, **keywords)``: config.json with the
    fields given (``CONFIG_FIELDS``), read through transformers' download keywords."""
    hub = config_keywords(keywords)
    unknown = sorted(set(keywords) - set(CONFIG_FIELDS))
    if unknown:
        raise TypeError(f"{cls.__name__}.from_pretrained() got unexpected keyword arguments {unknown}; besides "
                        f"revision, it takes the config fields {', '.join(CONFIG_FIELDS)}, and transformers' "
                        f"{', '.join(HUB_KEYWORDS)}, trust_remote_code (docs/migrating.md)")  # fmt: skip
    with hub_options(hub):
        path = config_file(name_or_path, revision)
    config = with_fields(cls.from_json_file(path), keywords)
    object.__setattr__(config, "_name_or_path", os.fspath(name_or_path))  # config.name_or_path, as transformers'
    return config


def with_fields(config, fields: dict):
    """A copy of ``config`` with ``fields`` (names of ``CONFIG_FIELDS``) set: the dataclass's numbers
    checked as a config is (``check_domains``), the others by the config's setters."""
    numbers = {name: fields[name] for name in (*SHAPE_FIELDS, *BUILD_FIELDS) if name in fields}
    config = dataclasses.replace(config, extra=dict(config.extra), **numbers)  # (__post_init__ checks them)
    for name in ("num_labels", "id2label", "label2id", "problem_type", *CALL_DEFAULTS, "use_cache"):
        if name in fields:  # (id2label after num_labels, which would rename the labels LABEL_0 ...)
            setattr(config, name, fields[name])
    if fields.get("num_labels") is not None and fields.get("id2label") is not None:
        if config.num_labels != fields["num_labels"]:  # (id2label's count, now that it is set and checked)
            raise ValueError(f"from_pretrained(): {contradicting_labels(fields['num_labels'], config.id2label)}")
    if "classifier_dropout" in fields:
        config.extra["classifier_dropout"] = _probability_or_none("classifier_dropout", fields["classifier_dropout"])
    if "finetuning_task" in fields:
        task = fields["finetuning_task"]
        if task is not None and not isinstance(task, str):
            raise ValueError(f"finetuning_task must be a str or None, got {task!r:.60}")
        config.extra["finetuning_task"] = task
    return config


def _probability_or_none(name: str, value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1):
        raise ValueError(f"{name} must be None or a number from 0 to 1, got {value!r:.60}")
    return value


def save_config(config, save_directory: str | os.PathLike) -> Path:
    """transformers' ``config.save_pretrained(save_directory)``: config.json written atomically into the
    folder (created if needed), as a model's ``save_pretrained`` writes it. Returns the file's path."""
    path = output_folder(save_directory, "config.json") / "config.json"
    with naming_the_file(path):
        config.to_json_file(path)
    return path
