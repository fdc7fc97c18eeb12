"""The flags of ``minibert finetune`` as one checked value; defaults are Google's (``run_classifier.py``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ...errors import DataError
from ..options import DEFAULT_SEED, LARGEST_SEED, option, refuse_out_of_limits
from .examples import GLUE, REGRESSION_TASKS, ExampleFormat

PROBLEMS = {"classify": "single_label_classification", "regress": "regression", "tag": "token_classification",
            "multilabel": "multi_label_classification", "answer": "question_answering"}


@dataclass(frozen=True)
class FinetuneOptions:
    """What to fine-tune on what, and how: each field's default, limits and help written once here;
    ``minibert finetune``'s flags are made from them (apps/flag_types.py ``add_flags``)."""

    model: str = field(metadata=option(
        "a hub folder or id, Google's TF checkpoint, a minibert pretrain run", required=True))  # fmt: skip
    train: str = field(metadata=option(
        "labelled examples: a GLUE file (--glue), .csv, .tsv, .jsonl, CoNLL (--task tag)", required=True))  # fmt: skip
    output: str = field(metadata=option("the run folder (a hub-layout checkpoint with the head)"))
    task: str = field(default="classify", metadata=option(
        "classify: one label per text or pair; regress: a score; multilabel: any number of labels per text; "
        "tag: a label per word (CoNLL files); answer: a span of the context (SQuAD JSON files)",
        choices=("classify", "regress", "multilabel", "tag", "answer")))  # fmt: skip
    dev: str | None = field(default=None, metadata=option(
        "examples evaluated with the task's metric at each epoch's end (and --eval-every)"))  # fmt: skip
    glue: str | None = field(default=None, metadata=option(
        "read --train/--dev as this GLUE task's files (mrpc, cola, mnli, xnli, xnli-dev, sst-2, sts-b, qqp, qnli, "
        "rte, wnli); else a generic CSV/TSV/JSONL file"))  # fmt: skip
    text_column: str = field(default="text", metadata=option("a generic file's text column"))
    pair_column: str | None = field(default=None, metadata=option("a generic file's second text (pairs), if any"))
    label_column: str = field(default="label", metadata=option("a generic file's label column"))
    labels: tuple[str, ...] | None = field(default=None, metadata=option(
        "the labels in id order, comma-separated (default: the GLUE task's, or the training file's, sorted)",
        type=lambda text: tuple(label.strip() for label in text.split(","))))  # fmt: skip
    label_separator: str = field(default="|", metadata=option(
        "multilabel: what joins a text's labels in its label field"))  # fmt: skip
    label_all_pieces: bool = field(default=False, metadata=option(
        "tag: every piece of a word carries its tag (default: the first piece)", action="store_true"))  # fmt: skip
    epochs: float = field(default=3.0, metadata=option(  # Google's num_train_epochs: steps = int(N / B × epochs)
        "passes over --train (may be 0.5)", low=0.0, high=1e6, above_low=True))  # fmt: skip
    batch_size: int = field(default=32, metadata=option("examples per update, over all processes", low=1))
    learning_rate: float = field(default=2e-5, metadata=option("the peak rate", low=0.0, above_low=True))
    warmup_proportion: float = field(default=0.1, metadata=option(
        "the share of the steps warming up linearly from 0", low=0.0, high=1.0))  # fmt: skip
    max_seq_length: int = field(default=128, metadata=option(
        "pieces per example, [CLS] and [SEP] included", low=3, high=100_000,
        why="[CLS] A [SEP] needs one piece of text and two special tokens"))  # fmt: skip
    weight_decay: float = field(default=0.01, metadata=option("never on LayerNorm or biases", low=0.0))
    max_grad_norm: float = field(default=1.0, metadata=option(
        "the global gradient norm is clipped to this", low=0.0, above_low=True))  # fmt: skip
    dropout: float | None = field(default=None, metadata=option(
        "replace every dropout probability (0: exact runs)", low=0.0, high=1.0, below_high=True))  # fmt: skip
    seed: int = field(default=DEFAULT_SEED, metadata=option(
        "the new head, the order of the examples, dropout", low=0, high=LARGEST_SEED))  # fmt: skip
    eval_every: int | None = field(default=None, metadata=option("also evaluate --dev every this many steps", low=1))
    save_every: int | None = field(default=None, metadata=option(
        "also checkpoint every this many steps (always: each epoch's end and the last)", low=1))  # fmt: skip
    version_2_with_negative: bool = field(default=False, metadata=option(
        "answer: SQuAD v2.0 files (questions may be is_impossible)", action="store_true"))  # fmt: skip
    doc_stride: int = field(default=128, metadata=option(
        "answer: pieces between the starts of a long context's windows", low=1))  # fmt: skip
    max_query_length: int = field(default=64, metadata=option("answer: the question's pieces kept", low=1))
    null_score_diff_threshold: float = field(default=0.0, metadata=option(
        "answer, v2.0: predict no answer when the null score minus the best answer's exceeds this"))  # fmt: skip
    resume: bool = field(default=False, metadata=option(
        "continue the run in --output from its checkpoint", action="store_true"))  # fmt: skip
    progress: bool | None = field(default=None, compare=False)  # a progress line on stderr (default: a terminal)

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
        if self.task == "answer" and (self.glue is not None or self.pair_column is not None or self.labels):
            raise DataError("--task answer reads SQuAD JSON files: no --glue, --pair-column or --labels")
        if self.task == "regress" and self.labels:
            raise DataError("--labels names classes; --task regress learns one score")
        refuse_out_of_limits(self, flags=True)
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
