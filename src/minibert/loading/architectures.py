"""What config.json's ``architectures`` says about a checkpoint's head, read before its weights.

A sentence classifier and a token classifier keep their heads under one name (``classifier.*``), so
either loads as the other with no error, and only ``architectures`` (the class transformers saved)
tells which one the checkpoint was trained as. The tasks (tasks/loading.py), ``minibert serve``'s
choice between an embedder and a classifier, and fine-tuning's refusal of a head of another kind
(training/tasks/head.py) all read it here.
"""

from __future__ import annotations

from ..errors import CheckpointError
from .config_files import config_file, config_values

# The classes whose head is saved under one name, ``classifier.*``: its tensors load into any of them,
# so only config.json's ``architectures`` tells which one the checkpoint was trained as (transformers
# loads either, reporting at most a pooler it does not use). Each kind: what its head reads, who reads it.
CLASSIFIER_KINDS = {
    "ForSequenceClassification": ("a sentence classifier", "its head reads the pooled [CLS] vector",
                                  "classify or rerank (minibert classify, minibert rerank)"),
    "ForTokenClassification": ("a token classifier", "its head reads every piece's vector", "tag (minibert tag)"),
    "ForMultipleChoice": ("a multiple-choice head", "it scores each choice against the others",
                          "BertForMultipleChoice; no task of minibert's reads it"),
}  # fmt: skip


def classifier_kinds(architectures) -> set[str]:
    """The classifier kinds (keys of ``CLASSIFIER_KINDS``) that config.json's ``architectures`` names,
    by the end of each class name, as transformers names its heads: ``["BertForTokenClassification"]``
    → ``{"ForTokenClassification"}``; an encoder, a pretraining head or anything but a list of names
    (no field, Google's bert_config.json, a hand-edited value) → the empty set. The one reading of
    ``architectures`` for a head's kind: ``check_head_kind`` here, serve's choice between an embedder
    and a classifier (apps/serve/service.py), and fine-tuning's refusal of a head of another kind
    (training/tasks/head.py)."""
    names = architectures if isinstance(architectures, list) else []
    return {kind for kind in CLASSIFIER_KINDS for name in names if isinstance(name, str) and name.endswith(kind)}


def architectures_in(name_or_path: str, revision: str | None = None) -> tuple[object, str]:
    """(config.json's ``architectures``, the file) of a folder or hub id; (None, "") without one, and
    None for a file that cannot be read: the model's own loading says what is wrong with it. Read on
    its own, before the weights (a small JSON file read twice), so that a head of the wrong kind is
    refused before anything large is loaded."""
    path = config_file(name_or_path, revision, required=False)
    if path is None:
        return None, ""
    values = config_values(path)
    return (None if values is None else values.get("architectures")), str(path)


def saved_class(architectures) -> str | None:
    """The class config.json's ``architectures`` names first, the class transformers saved
    (``["BertForTokenClassification"]`` → ``"BertForTokenClassification"``); None for anything but a
    list that starts with a name (no field, an empty list, a hand-edited value). The one reading of
    the saved class: the loader's advice on a head it cannot build (from_pretrained.py) or tensors it
    cannot use (strict.py), and ``minibert convert``'s choice of class."""
    first = architectures[0] if isinstance(architectures, list) and architectures else None
    return first if isinstance(first, str) else None


def check_head_kind(cls: type, architectures, where: str) -> None:
    """Refuse a checkpoint whose ``architectures`` (read from ``where``) names a classifier of another
    kind than ``cls``: a sentence classifier given to ``tag``, a token classifier to ``classify``.
    Its ``classifier`` tensors would load, and the head run on vectors it was never trained on,
    giving labels that mean nothing, without an error (``minibert finetune`` refuses it too). A config
    that names no classifier (an encoder, Google's bert_config.json, none at all) is taken as it is."""
    wanted, named = classifier_kinds([cls.__name__]), classifier_kinds(architectures)
    if not wanted or not named or wanted & named:
        return
    kind = sorted(named)[0]
    name = next(name for name in architectures if isinstance(name, str) and name.endswith(kind))
    what, reads, read_by = CLASSIFIER_KINDS[kind]
    needed = CLASSIFIER_KINDS[sorted(wanted)[0]][0]
    raise CheckpointError(f"{where}: architectures names {name}, {what} ({reads}), not {needed} "
                          f"({cls.__name__}): read it with {read_by}")  # fmt: skip
