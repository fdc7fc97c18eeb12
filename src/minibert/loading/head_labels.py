"""A checkpoint's classifier and its labels: how many outputs the head has, and whose names they get.

A classifier fine-tuned by Google's ``run_classifier.py`` is saved as two top-level variables,
``output_weights`` (K, H) and ``output_bias`` (K), beside the encoder; its ``bert_config.json`` says
nothing about labels (the labels lived in the script's processor: MRPC's "0", "1"; MNLI's
"contradiction", "entailment", "neutral"). So the number of labels is the head's shape, and their
names are the user's::

    BertForSequenceClassification.from_pretrained("mnli_output/")                 # LABEL_0 ... LABEL_2
    BertForSequenceClassification.from_pretrained("mnli_output/", id2label={0: "contradiction",
                                                  1: "entailment", 2: "neutral"})  # the processor's order

Labels given that do not fit the head (two names for a head of three outputs) are refused, naming both.
A hub checkpoint whose config.json names its labels is left as it is (a disagreement there is a
tensor of the wrong shape, reported with the others by strict.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import CheckpointError
from .names import CLASSIFIER_WEIGHTS

logger = logging.getLogger("minibert")

LABEL_COUNT_FIELDS = ("num_labels", "_num_labels", "id2label")


def classifier_shape(weights_file: Path, read_pickle: bool = False) -> tuple[str, tuple[int, ...]] | None:
    """(name, shape) of the checkpoint's classifier weight, read from the file's index alone (a
    TensorFlow ``.index``, a safetensors header); None when it has none, or for a pickled
    ``pytorch_model.bin``, which has no index (its shape is then checked when it is read), unless
    ``read_pickle``: then the file is opened (memory-mapped) for its shapes."""
    from .checkpoint_files import tensor_shapes

    shapes = tensor_shapes(weights_file, read_pickle)
    return None if shapes is None else classifier_in(shapes)


def classifier_in(shapes: dict[str, tuple[int, ...]]) -> tuple[str, tuple[int, ...]] | None:
    """(name, shape) of the classifier weight among a checkpoint's tensor ``shapes`` ({name: shape},
    checkpoint_files.tensor_shapes): transformers' ``classifier.weight`` or Google's ``output_weights``
    (run_classifier.py), with or without the ``bert.`` prefix, two-dimensional (outputs × hidden:
    ``shape[0]`` is the number of labels); None when there is none."""
    for name in (key for weight in CLASSIFIER_WEIGHTS for key in (weight, "bert." + weight)):
        if name in shapes and len(shapes[name]) == 2:
            return name, tuple(shapes[name])
    return None


def labels_for_the_head(model, config_extra: dict, label_config: dict, weights_file: Path) -> int | None:
    """The number of labels to rebuild ``model`` with when its classifier has another number of
    outputs than the checkpoint's head and nothing named the labels (None: the model fits).

    ``config_extra``: config.json's own fields (before ``label_config``, the caller's id2label /
    num_labels, replaced any). Raises ``CheckpointError`` when the caller's labels disagree with the head."""
    classifier = getattr(model, "classifier", None)
    if classifier is None or classifier.out_features != getattr(model, "num_labels", None):
        return None  # no classifier with one output per label (BertForMultipleChoice's has one output)
    given = any(field in label_config for field in LABEL_COUNT_FIELDS)
    found = classifier_shape(weights_file, read_pickle=given)  # labels given: their count checked here
    if found is None or found[1][0] == model.num_labels:
        return None
    name, shape = found
    if given:
        given = ", ".join(model.labels.id2label[index] for index in sorted(model.labels.id2label))
        raise CheckpointError(f"{weights_file}: its classifier {name} {shape} has {shape[0]} outputs, one per label; "
                              f"the labels given are {model.num_labels} ({given}): give {shape[0]} labels, in the "
                              "order the head was trained with")  # fmt: skip
    if any(field in config_extra for field in LABEL_COUNT_FIELDS):
        return None  # config.json names its labels: a head of another shape is reported as misshaped
    logger.info("%s: the config names no labels; the classifier %s %s has %d outputs: labels LABEL_0 ... LABEL_%d "
                "(give id2label= to name them)", weights_file, name, shape, shape[0], shape[0] - 1)  # fmt: skip
    return shape[0]


def contradicting_labels(num_labels: int, id2label: dict) -> str:
    """The refusal of ``num_labels`` given beside an ``id2label`` of another length (a caller's two
    keywords: config_keywords.py, config_files.py). transformers 5 sizes the head by id2label then,
    but keeps the label2id that num_labels made (LABEL_0 ...): a config that contradicts itself."""
    return (f"num_labels={num_labels} and id2label, which names {len(id2label)} labels "
            f"({shown_labels(id2label.values())}), contradict each other: give id2label alone (it counts the labels "
            "too), or num_labels alone")  # fmt: skip


def parse_labels(text: str) -> list[str]:
    """Labels in id order as a flag gives them: comma-separated, each stripped; a label that holds a
    comma is quoted, as in a CSV row. ValueError for an empty label, one named twice, or a stray quote.

    >>> parse_labels('pos, neg,"a,b"')
    ['pos', 'neg', 'a,b']
    """
    import csv

    try:
        labels = [label.strip() for label in next(csv.reader([text], skipinitialspace=True, strict=True))]
    except (csv.Error, StopIteration):
        labels = []
    if not labels or not all(labels) or len(set(labels)) != len(labels):
        raise ValueError(f"must name each label once, comma-separated (quote a label that holds a comma), got {text!r}")
    return labels


def labels_text(labels) -> str:
    """The text ``parse_labels`` reads back as ``labels``: comma-separated, a label that holds a
    comma or a quote CSV-quoted (what a printed ``--labels`` must be to be run again).

    >>> labels_text(["pos", "neg", "a,b"])
    'pos,neg,"a,b"'
    >>> parse_labels(labels_text(["pos", 'a "b"', "c,d"]))
    ['pos', 'a "b"', 'c,d']
    """
    import csv
    import io

    text = io.StringIO()
    csv.writer(text, lineterminator="").writerow([str(label) for label in labels])
    return text.getvalue()


def shown_labels(labels, most: int = 12, quoted: bool = False) -> str:
    """Labels for a message, at most ``most`` of them and the count of the rest (100,000 labels once
    made a 789 KB line). Each is quoted when ``quoted``, or when one of them holds a comma or outer
    spaces or is empty, so that no label can be misread as two.

    >>> shown_labels(["pos", "neg"]), shown_labels(["pos", "a,b"])
    ('pos, neg', "'pos', 'a,b'")
    >>> shown_labels([str(n) for n in range(100_000)], most=3)
    '0, 1, 2, ... and 99,997 more (100,000 labels)'
    """
    labels = [str(label) for label in labels]
    if quoted or any("," in label or label != label.strip() or not label for label in labels):
        shown = [repr(label) for label in labels[:most]]
    else:
        shown = labels[:most]
    if len(labels) <= most:
        return ", ".join(shown)
    return f"{', '.join(shown)}, ... and {len(labels) - most:,} more ({len(labels):,} labels)"
