"""The options of training, each a field with its default, limits and help written once:
``PretrainOptions`` (``minibert pretrain``) and ``FinetuneOptions`` (``minibert finetune``), and the
helpers every options class uses (``InstanceOptions``, ``minibert pretraining-data``'s, lives with
the data it cuts: pretraining_data/options.py). The commands' flags are made from these fields
(apps/flag_types.py ``add_flags``), and values made in Python are checked by the same limits
(limits.py). This module imports neither torch nor the loop: the parser reads it.

>>> FinetuneOptions(model="m", train="t.csv", output="run", task="regress").problem
'regression'
"""

from __future__ import annotations

import os
from dataclasses import MISSING, asdict, dataclass, field
from typing import ClassVar

from ..errors import DataError, FlagConflictError
from ..limits import (
    file_name,
    model_name,
    option,
    output_name,
    plain_numbers,
    refuse_other_choices,
    refuse_out_of_limits,
)
from ..loading.devices import device_flag, device_name
from ..loading.head_labels import parse_labels
from .pretraining_data.options import DEFAULT_SEED, LARGEST_SEED, path_list
from .tasks import PROBLEMS
from .tasks.examples import GLUE, REGRESSION_TASKS, ExampleFormat

PRECISIONS = ("fp32", "bf16", "fp16")
PRECISION_HELP = ("the forward pass's arithmetic: fp32 (default), bf16 or fp16 autocast (the weights and the optimizer "
                  "stay float32; fp16 on a GPU, with a loss scaler)")  # fmt: skip
DEVICE_HELP = ("where the run trains: auto (default: CUDA where torch sees a GPU, else the CPU), cpu, cuda, cuda:N; "
               "under torchrun each process takes its own GPU (LOCAL_RANK)")  # fmt: skip
DETERMINISTIC_HELP = ("on a GPU, torch's deterministic algorithms (slower): a resumed run repeats a never-stopped one "
                      "bit for bit (on a CPU it does anyway)")  # fmt: skip
# Where and how a run is computed, not what it is: a run may resume elsewhere (the difference is said: arithmetic.py).
WHERE_IT_RUNS = ("device", "deterministic", "gemm")
AFTER_THE_RUN = ("keep_state",)  # what a finished run keeps: not a setting a resume must share
KEEP_STATE_HELP = ("keep the whole training state (optimizer moments and random state, about 3x the model) when "
                   "the run ends; by default a finished run keeps only its step and settings")  # fmt: skip


def refuse_unknown_words(options) -> None:
    """A value made in Python checked as the command line's parser checks the flag, when the
    options are made (before a model is read or a folder written): each field with ``choices``
    (``precision``, ``task``), and the device, kept as its name (devices.py's ``device_name``: a
    number or a ``torch.device`` as every Python entry point takes one). DataError naming the flag
    and the rule the name breaks, in the parser's words."""
    refuse_other_choices(options, flags=True)
    try:
        object.__setattr__(options, "device", device_name(options.device))
    except ValueError as error:
        raise DataError(f"--device: {error}") from None


def as_paths(options, names: tuple[str, ...]) -> None:
    """The file and folder fields ``names`` of ``options`` as text, when the options are made: a
    pathlib.Path given in Python as its str (the run's note is JSON and its state a plain pickle:
    a Path failed there, after the first files were written); None kept (a field left out). Another
    type, or an empty name (an unset variable: "" as --dev would be no evaluation), is a DataError
    naming the flag, before anything is read or written. An output of "" is a run's refusal
    (``refuse_no_output``): --write-features makes options without one."""
    for name in names:
        value = getattr(options, name)
        if value is None:
            continue
        if not isinstance(value, (str, os.PathLike)) or isinstance(value, bytes):
            raise DataError(f"{flag_of(name)} must be a path (a str or a pathlib.Path), got {type(value).__name__}")
        value = os.fspath(value)
        if not isinstance(value, str) or not value.strip() and not (name == "output" and value == ""):
            what = {"output": "folder to write", "model": "hub id or folder", "init": "hub id or folder"}.get(
                name, "file")  # fmt: skip
            raise DataError(f"{flag_of(name)} is empty: name the {what} (a variable left unset?)")
        object.__setattr__(options, name, value)


def refuse_no_output(options) -> None:
    """A run needs its folder: "" would be the current folder, its files scattered into it."""
    if not options.output.strip():
        raise DataError("--output is empty: name the folder to write (a variable left unset?)")


def labels_given(labels) -> tuple[str, ...] | None:
    """``labels`` made in Python as the command line's --labels reads them: a str is split at its
    commas (as the flag), a list or tuple must hold the names as str (a set has no order, and an int
    label is not the text the files hold: ``[0, 1]`` was "an empty label" and ``"0,1"`` three labels)."""
    if labels is None or isinstance(labels, tuple) and all(isinstance(label, str) for label in labels):
        return labels
    if isinstance(labels, str):
        try:
            return tuple(parse_labels(labels))
        except ValueError as error:
            raise DataError(f"--labels: {error}") from None
    if isinstance(labels, list) and all(isinstance(label, str) for label in labels):
        return tuple(labels)
    shown = type(labels).__name__ if not isinstance(labels, (list, tuple)) else f"{labels!r:.80}"
    raise DataError(f"--labels must be the label names as text, in id order (a list of str, or one str joined by "
                    f"commas: 'neg,pos'), got {shown}")  # fmt: skip


def _labels_flag(text: str) -> tuple[str, ...]:
    """--labels: comma-separated, a label holding a comma quoted (head_labels.parse_labels)."""
    import argparse

    try:
        return tuple(parse_labels(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


@dataclass(frozen=True)
class PretrainOptions:
    """The flags of ``minibert pretrain``; defaults are Google's (run_pretraining.py, optimization.py)."""

    data: list[str] = field(metadata=option(  # TFRecord files (create_pretraining_data.py / minibert pretraining-data)
        "TFRecord files of instances (minibert pretraining-data; Google's script)", nargs="+", action="extend",
        required=True, metavar="FILE"))  # fmt: skip
    output: str = field(metadata=option(
        "the run directory (a hub-layout checkpoint at every save)", required=True, type=output_name))  # fmt: skip
    steps: int = field(metadata=option(  # (a --warmup-steps beyond it is allowed, as Google's, and warned of)
        "updates to make (after --warmup-steps, the rate decays to 0 there)", low=1, required=True))  # fmt: skip
    batch_size: int = field(metadata=option(  # the GLOBAL batch
        "instances per update, over all processes and micro-batches", low=1, required=True))  # fmt: skip
    init: str | None = field(default=None, metadata=option(
        "start from this checkpoint: a hub folder or id, Google's TF checkpoint, a run", type=model_name))  # fmt: skip
    config: str | None = field(default=None, metadata=option(
        "start from random weights of this config.json (with --vocab)"))  # fmt: skip
    vocab: str | None = field(default=None, metadata=option(  # (an --init with a tokenizer brings its own)
        "with --config, or an --init without a tokenizer: the vocab.txt of the instances' ids"))  # fmt: skip
    do_lower_case: bool = field(default=True, metadata=option(  # (with --vocab) the tokenizer config written
        "with --vocab: the tokenizer keeps case", flag="--cased", action="store_false"))  # fmt: skip
    learning_rate: float = field(default=1e-4, metadata=option("the peak rate", low=0.0, above_low=True))
    warmup_steps: int = field(default=0, metadata=option("linear warmup from 0", low=0))
    weight_decay: float = field(default=0.01, metadata=option("never on LayerNorm or biases", low=0.0))
    max_grad_norm: float = field(default=1.0, metadata=option(
        "the global gradient norm is clipped to this", low=0.0, above_low=True))  # fmt: skip
    dropout: float | None = field(default=None, metadata=option(
        "replace the config's dropout probabilities (0: exact runs)", low=0.0, high=1.0, below_high=True))  # fmt: skip
    seed: int = field(default=DEFAULT_SEED, metadata=option("random weights and dropout", low=0, high=LARGEST_SEED))
    save_every: int = field(default=1000, metadata=option(
        "steps between checkpoints, and one at the end", low=1))  # fmt: skip
    accumulate: int = field(default=1, metadata=option(
        "micro-batches per update in each process: gradient accumulation", low=1))  # fmt: skip
    resume: bool = field(default=False, metadata=option(
        "continue the run in --output from its last checkpoint", action="store_true"))  # fmt: skip
    precision: str = field(default=None, metadata=option(  # None: fp32, or bf16 where --bf16 says so
        PRECISION_HELP, choices=PRECISIONS, unset_means="fp32"))  # fmt: skip
    bf16: bool = field(default=False, metadata=option(  # (set, it becomes precision="bf16" and is False again)
        "the same as --precision bf16", action="store_true"))  # fmt: skip
    device: str = field(default="auto", metadata=option(DEVICE_HELP, type=device_flag))
    deterministic: bool = field(default=False, metadata=option(DETERMINISTIC_HELP, action="store_true"))
    keep_state: bool = field(default=False, metadata=option(KEEP_STATE_HELP, action="store_true"))
    gemm: str | None = None  # the linear layers' matrix library (--gemm; None: $MINIBERT_GEMM, else measured)
    allow_wrap: bool = field(default=False, metadata=option(
        "allow a --batch-size larger than the data (each batch repeats instances)", action="store_true"))  # fmt: skip
    progress: bool | None = field(default=None, compare=False)  # a progress line on stderr (default: a terminal)
    eval_every: ClassVar[None] = None  # (fine-tuning's: pre-training has no dev set)
    bf16_given: ClassVar[bool] = False  # per run, True where --bf16 said bf16: the flag its warnings name

    def __post_init__(self):
        if self.bf16:  # the older flag: one name for one setting from here on (settings, resume command)
            if self.precision not in (None, "bf16"):  # (minibert pretrain: a usage error, exit 2)
                raise FlagConflictError(f"--bf16 and --precision {self.precision} contradict each other: give one")
            object.__setattr__(self, "precision", "bf16")
            object.__setattr__(self, "bf16", False)
            object.__setattr__(self, "bf16_given", True)
        elif self.precision is None:
            object.__setattr__(self, "precision", "fp32")
        object.__setattr__(self, "data", path_list(self.data, "data", one="a TFRecord file's path"))
        as_paths(self, ("output", "init", "config", "vocab"))
        refuse_unknown_words(self)

    def check(self, processes: int) -> None:
        refuse_out_of_limits(self, flags=True)
        self.refuse_flag_conflicts(processes)

    def refuse_flag_conflicts(self, processes: int) -> None:
        """The flags that cannot go together, whatever the files hold: a FlagConflictError (a DataError;
        ``minibert pretrain`` exits 2 on it, a usage error). ``processes``: torchrun's WORLD_SIZE."""
        if (self.init is None) == (self.config is None):
            raise FlagConflictError("give exactly one of --init (a checkpoint) and --config (random weights)")
        if self.config is not None and self.vocab is None:
            raise FlagConflictError("--config needs --vocab (the vocab.txt the instances' ids come from)")
        pieces = processes * self.accumulate
        if self.batch_size % pieces:
            raise FlagConflictError(f"--batch-size {self.batch_size} does not split into {processes} process(es) × "
                                    f"--accumulate {self.accumulate}: make it a multiple of {pieces}")  # fmt: skip

    def settings(self, processes: int, steps: int) -> dict:
        """What a resumed run must share with the run it continues (``steps``: --steps, a field here)."""
        kept = asdict(self)
        for name in ("data", "output", "resume", "progress", "config", "vocab", "do_lower_case", "save_every",
                     "allow_wrap", "bf16", *WHERE_IT_RUNS, *AFTER_THE_RUN):  # fmt: skip
            kept.pop(name)
        return {**kept, "processes": processes}


READS_GLUE = ("classify", "regress")  # the tasks whose files may be GLUE's (--glue)
GENERIC = ("classify", "regress", "multilabel")  # the tasks that read generic CSV/TSV/JSONL files
# The flags only some tasks read, and those tasks. Any other task refuses such a flag when it is
# given (a value other than its default) rather than ignore it, as commands that run no model
# refuse --gemm (docs/cli.md); so do GLUE files (read by column number) the column flags.
TASKS_READING = {
    "glue": READS_GLUE, "text_column": GENERIC, "pair_column": GENERIC, "label_column": GENERIC,
    "labels": ("classify", "multilabel", "tag"), "label_separator": ("multilabel",), "label_all_pieces": ("tag",),
    **dict.fromkeys(("version_2_with_negative", "doc_stride", "max_query_length", "null_score_diff_threshold"),
                    ("answer",)),
}  # fmt: skip
# Flags a task reads only with another flag: --null-score-diff-threshold picks SQuAD v2.0's "no answer",
# which a v1.1 run never predicts (squad_predictions.py reads it under --version-2-with-negative only).
# The flag → (the flag it needs, why, as the refusal says it).
READ_ONLY_WITH = {"null_score_diff_threshold": ("version_2_with_negative", "it decides when a SQuAD v2.0 question "
                                                "gets no answer, and a v1.1 run always answers")}  # fmt: skip
COLUMN_FLAGS = ("text_column", "pair_column", "label_column")
# What each task reads, as a refused flag's message says it.
TASK_READS = {
    "classify": "reads GLUE files (--glue) or generic CSV/TSV/JSONL files, one label per text or pair",
    "regress": "reads GLUE files (--glue) or generic CSV/TSV/JSONL files, and learns one score (no labels)",
    "multilabel": "reads generic CSV/TSV/JSONL files whose label field joins labels by --label-separator",
    "tag": "reads CoNLL files (a word and its tag per line)",
    "answer": "reads SQuAD JSON files",
}
# What --write-features reads: the files, the task's reading of them, the features' size. The rest
# (the dev set, the schedule, the batches, the device) sets up a run, which --write-features does not make.
READ_BY_WRITE_FEATURES = ("model", "train", "output", "task", "progress", "glue", *COLUMN_FLAGS, "labels",
                          "label_separator", "label_all_pieces", "max_seq_length", "version_2_with_negative",
                          "doc_stride", "max_query_length")  # fmt: skip


def flag_of(name: str) -> str:
    """A field's flag: ``label_all_pieces`` → ``--label-all-pieces``."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class FinetuneOptions:
    """What to fine-tune on what, and how: each field's default, limits and help written once here;
    ``minibert finetune``'s flags are made from them (apps/flag_types.py ``add_flags``)."""

    model: str = field(metadata=option("a hub folder or id, Google's TF checkpoint, a minibert pretrain run",
                                       required=True, type=model_name))  # fmt: skip
    train: str = field(metadata=option(
        "labelled examples: a GLUE file (--glue), .csv, .tsv, .jsonl, CoNLL (--task tag)", required=True,
        type=file_name))  # fmt: skip
    output: str = field(metadata=option("the run folder (a hub-layout checkpoint with the head)", type=output_name))
    task: str = field(default="classify", metadata=option(
        "classify: one label per text or pair; regress: a score; multilabel: any number of labels per text; "
        "tag: a label per word (CoNLL files); answer: a span of the context (SQuAD JSON files)",
        choices=tuple(PROBLEMS)))  # fmt: skip
    dev: str | None = field(default=None, metadata=option(
        "examples evaluated with the task's metric at each epoch's end (and --eval-every)",
        type=file_name))  # fmt: skip
    glue: str | None = field(default=None, metadata=option(
        "read --train/--dev as this GLUE task's files (mrpc, cola, mnli, xnli, xnli-dev, sst-2, sts-b, qqp, qnli, "
        "rte, wnli); else a generic CSV/TSV/JSONL file"))  # fmt: skip
    text_column: str = field(default="text", metadata=option("a generic file's text column"))
    pair_column: str | None = field(default=None, metadata=option("a generic file's second text (pairs), if any"))
    label_column: str = field(default="label", metadata=option("a generic file's label column"))
    labels: tuple[str, ...] | None = field(default=None, metadata=option(
        "the labels in id order, comma-separated (default: the GLUE task's, or the training file's, sorted; numbers "
        "by value)",
        type=_labels_flag))  # fmt: skip
    label_separator: str = field(default="|", metadata=option(
        "multilabel: what joins a text's labels in its label field"))  # fmt: skip
    label_all_pieces: bool = field(default=False, metadata=option(
        "tag: every piece of a word carries its tag, a later piece of a B-X word I-X (run_ner's label_all_tokens; "
        "default: the first piece only)", action="store_true"))  # fmt: skip
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
    precision: str = field(default="fp32", metadata=option(PRECISION_HELP, choices=PRECISIONS))
    device: str = field(default="auto", metadata=option(DEVICE_HELP, type=device_flag))
    deterministic: bool = field(default=False, metadata=option(DETERMINISTIC_HELP, action="store_true"))
    keep_state: bool = field(default=False, metadata=option(KEEP_STATE_HELP, action="store_true"))
    gemm: str | None = None  # the linear layers' matrix library (--gemm; None: $MINIBERT_GEMM, else measured)
    progress: bool | None = field(default=None, compare=False)  # a progress line on stderr (default: a terminal)
    # (pre-training's: Google's run_classifier.py accumulates no micro-batches)
    accumulate: ClassVar[int] = 1

    def __post_init__(self):
        as_paths(self, ("model", "train", "output", "dev"))
        object.__setattr__(self, "labels", labels_given(self.labels))
        refuse_unknown_words(self)

    @property
    def problem(self) -> str:
        return PROBLEMS[self.task]

    def example_format(self, set_type: str) -> ExampleFormat:
        return ExampleFormat(self.glue, self.text_column, self.pair_column, self.label_column, set_type)

    def check(self, processes: int) -> None:
        plain_numbers(self)  # NumPy's numbers as Python's first: given() compares each field with its default
        if self.glue is not None and self.glue not in GLUE:
            raise DataError(f"--glue {self.glue!r}: one of {', '.join(GLUE)}")
        glue_task = "regress" if self.glue in REGRESSION_TASKS else "classify"  # the task a GLUE file is for
        if self.glue is not None and self.task in READS_GLUE and self.task != glue_task:
            raise FlagConflictError(f"--glue {self.glue} is a {glue_task} task: give --task {glue_task}")
        self.refuse_unread_flags()
        columns = [(flag_of(name), getattr(self, name)) for name in COLUMN_FLAGS]
        named = [(flag, column) for flag, column in columns if column is not None]
        for number, (flag, column) in enumerate(named):  # (the label read as the text: a model of its own answer)
            other = next((earlier for earlier, seen in named[:number] if seen == column), None)
            if other is not None and self.glue is None:
                raise FlagConflictError(f"{other} and {flag} both name the column {column!r}: each role reads "
                                        "a column of its own")  # fmt: skip
        if self.task == "multilabel" and not self.label_separator:
            raise DataError("--label-separator is empty: --task multilabel needs what joins a text's labels")
        refuse_out_of_limits(self, flags=True)
        if self.batch_size % processes:
            raise FlagConflictError(f"--batch-size {self.batch_size} does not split into {processes} processes: make "
                                    f"it a multiple of {processes}")  # fmt: skip

    def given(self) -> list[str]:
        """The fields set to a value other than their default: the flags given."""
        return [name for name, setting in self.__dataclass_fields__.items()  # (labels=(): none given)
                if setting.default is not MISSING and getattr(self, name) not in (setting.default, ())]  # fmt: skip

    def refuse_unread_flags(self, writing_features: bool = False) -> None:
        """A flag given that the task (or ``--write-features``) does not read is a FlagConflictError (a
        DataError) naming it and what reads it, not a setting silently dropped (``minibert finetune``
        says it as a usage error, exit 2, as pretrain's conflicts)."""
        for name in self.given():
            tasks = TASKS_READING.get(name, (self.task,))
            if self.task not in tasks:
                raise FlagConflictError(f"--task {self.task} does not read {flag_of(name)}, which is for --task "
                                        f"{', '.join(tasks)}: it {TASK_READS[self.task]}")  # fmt: skip
            needed, why = READ_ONLY_WITH.get(name, (None, ""))
            if needed is not None and not getattr(self, needed):
                raise FlagConflictError(f"{flag_of(name)} is read with {flag_of(needed)} only: {why}")
            if self.glue is not None and name in COLUMN_FLAGS:
                raise FlagConflictError(f"--glue {self.glue} does not read {flag_of(name)}: GLUE files are read by "
                                        f"column number, as the task's processor reads them ({flag_of(name)} names "
                                        "a generic CSV/TSV/JSONL file's column)")  # fmt: skip
            if writing_features and name not in READ_BY_WRITE_FEATURES:
                raise FlagConflictError(f"--write-features does not read {flag_of(name)}: it writes --train's "
                                        f"features and stops ({flag_of(name)} sets up a run: "
                                        "give --output)")  # fmt: skip

    def settings(self, processes: int, steps: int) -> dict:
        """What a resumed run must share with the run it continues (--eval-every too: best/ is the best
        of the evaluations at those steps, and a resume must make the same ones)."""
        kept = asdict(self)
        for name in ("output", "resume", "progress", "save_every", *WHERE_IT_RUNS, *AFTER_THE_RUN):
            kept.pop(name)
        for name, (needed, _) in READ_ONLY_WITH.items():  # not a setting of a run that never reads it
            if not getattr(self, needed):
                kept.pop(name)
        kept["labels"] = list(self.labels) if self.labels else None
        return {**kept, "processes": processes, "steps": steps}
