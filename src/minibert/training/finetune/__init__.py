"""Fine-tuning (the paper's section 4): a pre-trained BERT, one new layer on top, every weight
trained a little on labelled examples — Google's ``run_classifier.py``, written out.

Read top-down:

    examples.py   labelled files → examples: the GLUE processors' layouts, generic CSV/TSV/JSONL
    features.py   examples → input ids, mask, segment ids (Google's convert_single_example)
    head.py       the checkpoint under a classifier for the task's labels (new, or continued)
    tagging.py    CoNLL files, the first-piece rule, seqeval's entity precision/recall/F1
    order.py      the order of the examples: a seeded shuffle per epoch, written to the run
    metrics.py    each task's dev figure: accuracy, F1, Matthews, Pearson and Spearman
    options.py    FinetuneOptions: the command's flags as one checked value
    loop.py       finetune(): the loop (the step and the optimizer are pre-training's: ../step.py)
    sweep.py      seeds × learning rates, each a run, and the table of their dev figures
    ray_trials.py the sweep's trials as Ray Tune trials (--ray; the ray extra, imported there alone)
    squad_examples.py     SQuAD JSON → questions on whitespace words (Google's read_squad_examples)
    squad_features.py     questions → windows of pieces (Google's convert_examples_to_features)
    squad_predictions.py  start/end logits → answers, n-best, null odds (Google's write_predictions)
    squad_metrics.py      exact match and F1 (the official SQuAD evaluation)
    squad_task.py         --task answer: the windows as arrays, BertForQuestionAnswering, dev evaluation

``import minibert`` does not import this room; ``minibert finetune`` does.
"""

__all__ = ["FinetuneOptions", "finetune", "write_training_features"]


def __getattr__(name: str):
    if name == "FinetuneOptions":
        from .options import FinetuneOptions

        return FinetuneOptions
    if name in ("finetune", "write_training_features"):
        from . import loop

        return getattr(loop, name)
    raise AttributeError(f"module 'minibert.training.finetune' has no attribute {name!r}")
