"""The network to fine-tune: the checkpoint's encoder under a classifier for the task's labels.

``run_classifier.create_model`` puts one layer on BERT's pooled [CLS] vector: dropout 0.1, then
``output_weights`` (K, H) and ``output_bias`` (K), new for the task — the weights drawn from a
truncated normal of standard deviation 0.02 (values beyond two deviations drawn again), the bias
zero. minibert's ``BertForSequenceClassification`` is that network (its head is transformers'
``classifier.weight``/``classifier.bias``).

A checkpoint that already has a classifier for these labels (a run fine-tuned before, a model
shared fine-tuned) continues from it: its labels must be the task's (the same set; the head's order
is kept), else the task does not fit the head and the run is refused before anything is written.
A classifier whose config names no labels — Google's ``run_classifier.py`` checkpoints
(``output_weights``, ``output_bias``; bert_config.json has no labels), or transformers' placeholder
names ``LABEL_0`` … ``LABEL_{n-1}`` (what it writes for a head made without names, and what its
run_glue/run_ner read as no names) — continues with the task's labels in their stated order
(``--labels``, the GLUE task's, or sorted), when their number fits.
A head of another kind is refused too: a token classifier (config.json's ``architectures``) reads
every piece's vector, a sentence classifier the pooled [CLS] one, and a sentence classifier whose
``problem_type`` names another loss (softmax, sigmoid per label, a score) was trained for it.
"""

from __future__ import annotations

import contextlib
import logging

import torch

from ...config import BertConfig
from ...errors import CheckpointError, DataError
from ...heads import BertForSequenceClassification, Labels
from ...loading.architectures import classifier_kinds
from ...loading.checkpoint_files import declared_shapes, find_checkpoint, read_state_dict
from ...loading.head_labels import shown_labels
from ...loading.names import CLASSIFIER_WEIGHTS
from ...loading.strict import google_normal_
from ...tokenizer import BertTokenizer
from ...tokenizer.named_class import check_tokenizer_class

GOOGLE_CLASSIFIER_DROPOUT = 0.1  # run_classifier.create_model: tf.nn.dropout(output_layer, keep_prob=0.9)
GOOGLE_HEAD_STD = 0.02  # output_weights: tf.truncated_normal_initializer(stddev=0.02)


def checkpoint_head(model: str) -> tuple[list[str] | None, int, dict] | None:
    """(the labels config.json names — None when it names none: Google's run_classifier.py
    checkpoints, whose config is bert_config.json, and transformers' placeholders ``LABEL_0`` … —,
    the outputs of its classifier tensor, the config's other fields: ``BertConfig.extra``, for
    ``head_kind``) when the checkpoint has a classifier, else None."""
    config_file, _ = find_checkpoint(model)
    shapes = checkpoint_tensors(model)
    for name in CLASSIFIER_WEIGHTS:
        for key in (name, "bert." + name):
            if key in shapes:
                config = BertConfig.from_json_file(config_file)
                if "id2label" not in config.extra:
                    return None, int(shapes[key].shape[0]), config.extra
                labels = Labels.of(config).id2label
                names = [labels[index] for index in sorted(labels)]
                return None if placeholders(names) else names, int(shapes[key].shape[0]), config.extra
    return None


def placeholders(names: list[str]) -> bool:
    """Are these transformers' names for a head made without any — ``LABEL_0`` … ``LABEL_{n-1}``, in
    order? run_glue and run_ner read them as no names (their config's label2id equals
    ``PretrainedConfig(num_labels=n).label2id``) and give the head the task's labels."""
    return names == [f"LABEL_{index}" for index in range(len(names))]


def checkpoint_tensors(model: str) -> dict:
    """The checkpoint's tensor names → their shapes (safetensors: read from its header alone) or
    the tensors themselves (.bin, Google's TF checkpoint: anything with a ``.shape``)."""
    _, weights_file = find_checkpoint(model)
    declared = declared_shapes(weights_file)
    return declared if declared is not None else read_state_dict(weights_file)


def check_sequence_length(model: str, length: int) -> None:
    """``--max-seq-length`` within the positions the model has (its config's max_position_embeddings)."""
    config_file, _ = find_checkpoint(model)
    positions = BertConfig.from_json_file(config_file).max_position_embeddings
    if length > positions:
        raise DataError(f"--max-seq-length {length} is more than --model {model} has positions for "
                        f"(max_position_embeddings {positions}): give {positions} or less")  # fmt: skip


# The kinds of head a task trains (transformers' problem_type; "token_classification": tagging's),
# as the refusal of a head of another kind names them.
HEAD_KINDS = {"single_label_classification": "a sentence classifier (one label per text, a softmax)",
              "multi_label_classification": "a multi-label sentence classifier (a sigmoid per label)",
              "regression": "a sentence regression head (one score)",
              "token_classification": "a token classifier (a label per word)"}  # fmt: skip


def head_kind(config: dict) -> str | None:
    """The kind of a checkpoint's classifier, a key of ``HEAD_KINDS``, from its config.json's fields
    (``BertConfig.extra``): a token classifier when ``architectures`` says so, else a sentence
    classifier of its ``problem_type`` (None: it names none, as Google's run_classifier.py
    checkpoints and many hub ones: any of the three sentence kinds fits)."""
    if "ForTokenClassification" in classifier_kinds(config.get("architectures")):
        return "token_classification"
    return config.get("problem_type")


def fit_labels(model: str, labels: list[str] | None, problem: str, stated: bool) -> tuple[list[str] | None, bool]:
    """(the labels in the order the run uses, whether the checkpoint's head continues). ``labels``
    None: a regression (one output). ``problem``: the kind of head the task trains (``HEAD_KINDS``);
    a head of another kind is refused. ``stated``: the order was given (--labels, a GLUE task)."""
    head = checkpoint_head(model)
    if head is None:
        return labels, False
    head_labels, outputs, config = head
    kind = head_kind(config)
    if kind not in (problem, None) or (kind is None and problem == "token_classification"):
        described = HEAD_KINDS.get(kind) or "a sentence classifier (on the pooled [CLS] vector)"
        raise DataError(f"--model {model}'s classifier is {described}; the task trains "
                        f"{HEAD_KINDS[problem]}: choose a model without a classifier (its encoder is used) or "
                        "one trained for this task")  # fmt: skip
    wanted = 1 if labels is None else len(labels)
    if outputs != wanted:
        named = f" ({shown_labels(head_labels)})" if head_labels else ""
        raise DataError(f"--model {model} has a classifier with {outputs} outputs{named}; the "
                        f"task needs {wanted}: choose a model without a classifier (its encoder is used) or one "
                        "fitted to these labels")  # fmt: skip
    if labels is None or head_labels is None:  # a head without label names takes the task's, in their order
        return labels, True
    if set(head_labels) != set(labels) or (stated and head_labels != labels):
        raise DataError(f"--model {model}'s classifier predicts {shown_labels(head_labels)}; the task's labels are "
                        f"{shown_labels(labels)}: they must be the same labels, in the head's order")  # fmt: skip
    return head_labels, True


def refuse_a_single_label(labels: list[str] | None, options) -> None:
    """A classifier (of texts, of words) needs two labels at least: with one output the softmax is 1
    whatever the input, the loss is 0 from the first step and nothing is learned."""
    if labels is not None and len(labels) < 2:
        where = "--labels names" if options.labels else f"--train {options.train} holds"
        raise DataError(f"{where} one label only ({shown_labels(labels, quoted=True) or 'none'}): a classifier "
                        "needs at least two")  # fmt: skip


def load_tokenizer(model: str) -> BertTokenizer:
    """The model's own tokenizer (vocab.txt or tokenizer.json, tokenizer_config.json, its added
    tokens): the one the run saves, and so the one that serves the run folder (``minibert
    classify``/``tag``/``answer``/``serve``, ``minibert.classify``, transformers' pipelines). The
    features are cut with it, as transformers' run_glue and run_ner tokenize with the model's
    tokenizer: training sees the ids that serving will send. (Google's run_classifier.py cuts with
    its FullTokenizer at training and at prediction alike; the two agree on plain text with BERT's
    settings, and docs/tokenizer.md lists where they differ: a special token or an added token typed
    in the text, a folder's strip_accents, words of 101-200 characters, a few characters.)"""
    check_tokenizer_class(model)  # run_glue's AutoTokenizer builds the class a folder names: another one is refused
    try:
        tokenizer = BertTokenizer.from_pretrained(model)
    except (CheckpointError, OSError) as error:
        raise DataError(f"--model {model} has no usable vocabulary (vocab.txt): {error}") from None
    config_file, _ = find_checkpoint(model)
    try:  # (an added token whose embedding row was never made: an id the model has no vector for)
        BertConfig.from_json_file(config_file).check_vocabulary(tokenizer.vocab, f"--model {model}")
    except CheckpointError as error:
        raise DataError(str(error)) from None
    return tokenizer


def load_classifier(model: str, labels: list[str] | None, problem: str, continues: bool, seed: int,
                    cls: type = BertForSequenceClassification, resuming: bool = False,
                    gemm: str | None = None) -> torch.nn.Module:  # fmt: skip
    """The network ``cls`` (BertForTokenClassification for tagging) in float32, its labels and
    ``problem`` (transformers' problem_type) in its config; a new head initialised as Google's from
    ``seed`` (a pooler the checkpoint lacks draws from the loop's seeding before it). ``resuming``:
    the weights come from the run's checkpoint next, so the new head is not announced (the loop
    says what it resumed). ``gemm``: the linear layers' library (--gemm; None: $MINIBERT_GEMM, else
    measured)."""
    id2label = {0: "score"} if labels is None else dict(enumerate(labels))
    label_config = {"id2label": id2label, "label2id": {label: index for index, label in id2label.items()},
                    "classifier_dropout": GOOGLE_CLASSIFIER_DROPOUT}  # fmt: skip
    if cls is BertForSequenceClassification:  # (a token classifier's config has no problem_type)
        label_config["problem_type"] = problem
    with _without_the_new_head_warning() if resuming else contextlib.nullcontext():
        network = cls.from_pretrained(model, new_heads=True, gemm=gemm, **label_config).float()
    if not continues:
        draw_new_head(network.classifier, seed)
    return network


@contextlib.contextmanager
def _without_the_new_head_warning():
    """loading/strict.py's "starts N tensors from fresh weights" left out of the minibert log."""
    logger = logging.getLogger("minibert")

    def keep(record: logging.LogRecord) -> bool:
        return "from fresh weights" not in record.getMessage()

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def draw_new_head(layer: torch.nn.Linear, seed: int) -> None:
    """A new task layer as Google's (``output_weights``: truncated normal of standard deviation
    0.02, values beyond two deviations drawn again; ``output_bias``: zero), drawn from ``seed``."""
    torch.manual_seed(seed)
    with torch.no_grad():
        google_normal_(layer.weight, GOOGLE_HEAD_STD)
        layer.bias.zero_()
