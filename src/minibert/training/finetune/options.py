"""The flags of ``minibert finetune`` as one checked value; defaults are Google's (``run_classifier.py``)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ...errors import DataError
from .examples import GLUE, REGRESSION_TASKS, ExampleFormat

MAX_SEED = 2**63 - 1  # torch.manual_seed and numpy's generators take it (the sweep adds the trial's index)
PROBLEMS = {"classify": "single_label_classification", "regress": "regression", "tag": "token_classification",
            "multilabel": "multi_label_classification"}


@dataclass(frozen=True)
class FinetuneOptions:
    """What to fine-tune on what, and how."""

    model: str  # a hub folder or id, Google's TF checkpoint, a minibert pretrain run
    train: str  # the labelled training file
    output: str  # the run folder (a hub-layout checkpoint with the head)
    task: str = "classify"  # classify (a label per text or pair), regress (a score), multilabel, tag (per word)
    dev: str | None = None  # evaluated with the task's metric at each epoch's end (and --eval-every)
    glue: str | None = None  # a GLUE task's file layout (examples.py), else a generic CSV/TSV/JSONL file
    text_column: str = "text"
    pair_column: str | None = None
    label_column: str = "label"
    labels: tuple[str, ...] | None = None  # the labels in id order (default: the GLUE task's, or sorted)
    label_separator: str = "|"  # multilabel: a text's labels in one field, "sports|politics"
    label_all_pieces: bool = False  # tag: every piece of a word carries its tag (default: the first only)
    epochs: float = 3.0  # Google's num_train_epochs (steps = int(examples / batch × epochs))
    batch_size: int = 32
    learning_rate: float = 2e-5
    warmup_proportion: float = 0.1  # the share of the steps that warm up linearly from 0
    max_seq_length: int = 128
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    dropout: float | None = None  # replaces every dropout probability (0: exact comparisons)
    seed: int = 12345  # the head, the order of the examples, dropout
    eval_every: int | None = None  # also evaluate every this many steps
    save_every: int | None = None  # also checkpoint every this many steps (always: each epoch's end, the last)
    resume: bool = False
    progress: bool | None = field(default=None, compare=False)

    @property
    def problem(self) -> str:
        return PROBLEMS[self.task]

    def example_format(self, set_type: str) -> ExampleFormat:
        return ExampleFormat(self.glue, self.text_column, self.pair_column, self.label_column, set_type)

    def check(self, processes: int) -> None:
        if self.task not in PROBLEMS:
            raise DataError(f"--task {self.task!r}: this version fine-tunes {', '.join(PROBLEMS)}")
        if self.glue is not None and self.glue not in GLUE:
            raise DataError(f"--glue {self.glue!r}: one of {', '.join(GLUE)}")
        if (self.glue in REGRESSION_TASKS) != (self.task == "regress") and self.glue is not None:
            wanted = "regress" if self.glue in REGRESSION_TASKS else "classify"
            raise DataError(f"--glue {self.glue} is a {wanted} task: give --task {wanted}")
        if self.task == "multilabel" and (self.glue is not None or not self.label_separator):
            raise DataError("--task multilabel reads generic files whose label field lists labels joined by "
                            "--label-separator (not --glue)")  # fmt: skip
        if self.task == "tag" and (self.glue is not None or self.pair_column is not None):
            raise DataError("--task tag reads CoNLL files (a word and its tag per line): no --glue, no --pair-column")
        if self.task == "regress" and self.labels:
            raise DataError("--labels names classes; --task regress learns one score")
        for name in ("batch_size", "max_seq_length", "eval_every", "save_every"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise DataError(f"--{name.replace('_', '-')} must be a positive whole number, got {value!r}")
        if self.max_seq_length < 3 or self.max_seq_length > 100_000:
            raise DataError(f"--max-seq-length {self.max_seq_length}: at least 3 ([CLS] A [SEP] B [SEP] needs 5)")
        if not math.isfinite(self.epochs) or self.epochs <= 0:
            raise DataError(f"--epochs must be a number above 0, got {self.epochs!r}")
        if not math.isfinite(self.learning_rate) or self.learning_rate <= 0:
            raise DataError(f"--learning-rate must be a finite number above 0, got {self.learning_rate!r}")
        if not 0.0 <= self.warmup_proportion <= 1.0:  # (NaN too)
            raise DataError(f"--warmup-proportion must be from 0 to 1, got {self.warmup_proportion!r}")
        if not math.isfinite(self.max_grad_norm) or self.max_grad_norm <= 0:
            raise DataError(f"--max-grad-norm must be a finite number above 0, got {self.max_grad_norm!r}")
        if not math.isfinite(self.weight_decay) or self.weight_decay < 0:
            raise DataError(f"--weight-decay must be a finite number, 0 or more, got {self.weight_decay!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise DataError(f"--seed must be a whole number from 0 to {MAX_SEED:,} (2**63 - 1), got {self.seed!r}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise DataError(f"--dropout must be from 0 up to (not including) 1, got {self.dropout!r}")
        if self.batch_size % processes:
            raise DataError(f"--batch-size {self.batch_size} does not split into {processes} processes: make it a "
                            f"multiple of {processes}")  # fmt: skip

    def settings(self, processes: int, steps: int) -> dict:
        """What a resumed run must share with the run it continues."""
        kept = asdict(self)
        for name in ("output", "resume", "progress", "eval_every", "save_every"):
            kept.pop(name)
        kept["labels"] = list(self.labels) if self.labels else None
        return {**kept, "processes": processes, "steps": steps}
