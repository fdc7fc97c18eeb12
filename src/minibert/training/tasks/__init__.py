"""The tasks a BERT is trained on, one module each, as one record the loop reads (task.py).

    pretraining.py   masked LM + next sentence (the paper's 3.1; Google's run_pretraining.py)
    classify.py      one label per text or pair (GLUE; Google's run_classifier.py)
    regress.py       a score per text or pair (STS-B)
    multilabel.py    any number of labels per text
    tag.py           a label per word (CoNLL-2003; transformers' run_ner)
    answer.py        a span of the context (SQuAD; Google's run_squad.py)

What they read and share:

    task.py             the record: prepare, network, denominators, sums, figures, evaluate, start
    finetuning.py       what the fine-tuning tasks share (steps, order, head, finetune.json)
    order.py            which examples each global batch holds
    tfrecord_instances.py   pre-training's TFRecord instances, read and checked
    examples.py         labelled files → examples: the GLUE processors' layouts, generic CSV/TSV/JSONL
    features.py         examples → input ids, mask, segment ids (Google's convert_single_example)
    head.py             the checkpoint under a classifier for the task's labels (new, or continued)
    metrics.py          accuracy, F1, Matthews, Pearson and Spearman
    squad_examples.py     SQuAD JSON → questions on whitespace words (Google's read_squad_examples)
    squad_features.py     questions → windows of pieces (Google's convert_examples_to_features)
    squad_predictions.py  start/end logits → answers, n-best, null odds (Google's write_predictions)
    squad_metrics.py      exact match and F1 (the official SQuAD evaluation)

``task_named`` is the one place a task is chosen by its name. The table names modules, imported
when a run asks for one: the command's parser reads this package's examples.py (the GLUE names)
without torch.
"""

from __future__ import annotations

import importlib

# The fine-tuning tasks (finetune --task), each with the problem type transformers' heads name it by.
PROBLEMS = {"classify": "single_label_classification", "regress": "regression",
            "multilabel": "multi_label_classification", "tag": "token_classification",
            "answer": "question_answering"}  # fmt: skip
# Every task's name → the module here whose TASK trains it.
TASKS = {"pretraining": "pretraining", **{name: name for name in PROBLEMS}}
# A finetune run's note of its options and labels (RUN/finetune.json): written by finetuning.py, read
# by run/plot.py for the task.
RUN_NOTE = "finetune.json"

# What each task's loss is measured in, as the loss curve's axis names it (run/plot.py): the
# cross-entropies in nats; regress's mean squared error in the score's units, squared.
LOSS_UNITS = {"pretraining": "nats", "classify": "nats", "regress": "mean squared error", "multilabel": "nats",
              "tag": "nats", "answer": "nats"}  # fmt: skip


def task_named(name: str):
    """The record of the task ``name`` (a key of ``TASKS``)."""
    return importlib.import_module(f"{__name__}.{TASKS[name]}").TASK
