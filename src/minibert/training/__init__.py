"""Making a BERT: the pre-training data (the paper's section 3.1), the training run, and the tasks
it trains — Google's ``create_pretraining_data.py``, ``run_pretraining.py``, ``run_classifier.py``
and ``run_squad.py``, written out. Three rooms, read in this order:

    pretraining_data/   text → Google's pre-training instances (TFRecords), as create_pretraining_data.py
                        cuts them: documents, segments A and B, masking, records
    tasks/              what a run trains, one module per task, each one record (tasks/task.py):
                        pre-training (masked LM + next sentence), classify, regress, multilabel, tag, answer
    run/                the run and its ONE loop (run/loop.py): the folder, seeds, resume, the guard,
                        progress, checkpoints; Google's optimizer (run/optimization.py); torchrun

and beside them:

    options.py          PretrainOptions and FinetuneOptions: the commands' flags, each written once
    sweep.py            fine-tuning's seeds × learning rates, each trial a run, and their table
    schedules.py        transformers' learning-rate schedules, for a training loop of your own (the tutorials')
    ray_trials.py       the sweep's trials as Ray Tune trials (--ray; the ray extra, imported there alone)

The learner's path: run/loop.py top-down (one step: tasks' ``sums``, then run/optimization.py's
``update``), then one task, tasks/pretraining.py or tasks/classify.py.

``import minibert`` does not import this package; the ``minibert pretraining-data``, ``pretrain``
and ``finetune`` commands do.
"""

__all__ = ["FinetuneOptions", "PretrainOptions", "finetune", "pretrain", "write_training_features"]


def __getattr__(name: str):
    if name in ("FinetuneOptions", "PretrainOptions"):  # no torch: the parser reads them
        from . import options

        return getattr(options, name)
    if name in __all__:  # the loop only when asked for: pretraining-data needs none of it
        from .run import loop

        return getattr(loop, name)
    raise AttributeError(f"module 'minibert.training' has no attribute {name!r}")
