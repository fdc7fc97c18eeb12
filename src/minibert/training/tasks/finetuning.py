"""What every fine-tuning task shares (the paper's section 4, Google's ``run_classifier.py``): a
pre-trained BERT, one new layer on top, every weight trained a little on labelled examples.

    read       the task's files → features, labels, whether the checkpoint's head continues (each task's own)
    steps      Google's num_train_steps = int(N / B × epochs); warmup = int(steps × warmup_proportion)
    order      a seeded shuffle per epoch (order.py), written to the run as order.jsonl
    network    the checkpoint under a classifier (head.py): new (truncated normal 0.02, bias 0) or continued
    evaluate   the dev set's logits → the task's figures; the main one picks ``best/``
    start      finetune.json (the labels, the steps, the head) and one line on stderr saying which head

A task module (classify.py, regress.py, multilabel.py, tag.py, answer.py) subclasses ``Finetuning``
with its reading, its loss and its figures.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from ...errors import DataError
from ...formats.atomic_files import write_atomically
from ...formats.json_files import parse_json
from ...heads import BertForSequenceClassification
from ...inputs import AS_ASKED
from ...loading.head_labels import shown_labels
from ...pretrained import evaluating
from . import PROBLEMS, RUN_NOTE
from .head import check_sequence_length, load_classifier
from .order import ORDER_FILE, TrainingOrder
from .task import Task, TrainingData


class Finetuning(Task):
    """A fine-tuning task: a subclass gives ``read`` (its files → features), ``sums`` (its loss)
    and ``metrics`` (its dev figures)."""

    @property
    def problem(self) -> str:
        """transformers' problem_type of the task's head (``PROBLEMS``)."""
        return PROBLEMS[self.name]

    def read(self, options) -> tuple:
        """(train features, dev features or None, labels or None, head continues?, tokenizer)."""
        raise NotImplementedError

    def read_checked(self, options, processes: int = 1) -> tuple:
        """``read`` after the options' and --max-seq-length's checks (``--write-features`` stops here)."""
        options.check(processes)
        check_sequence_length(options.model, options.max_seq_length)
        return self.read(options)

    def prepare(self, options, world) -> TrainingData:
        """Read the files, fix the labels, make the features: every error before anything is written."""
        train, dev, labels, continues, tokenizer = self.read_checked(options, world.size)
        counted = self.examples_counted(train)  # (SQuAD: questions, not their windows)
        steps = int(counted / options.batch_size * options.epochs)
        if steps < 1:
            raise DataError(f"--train {options.train} has {counted} examples: {options.epochs:g} epoch(s) of "
                            f"--batch-size {options.batch_size} make no full step; lower --batch-size")  # fmt: skip
        order = TrainingOrder(len(train), options.batch_size, options.seed)
        return TrainingData(train, order, steps, int(steps * options.warmup_proportion), tokenizer, dev, labels,
                            continues)  # fmt: skip

    network_class = BertForSequenceClassification  # the network the task trains: its head on BertModel

    def network(self, options, data: TrainingData) -> torch.nn.Module:
        return load_classifier(options.model, data.labels, self.problem, data.head_continues, options.seed,
                               self.network_class, resuming=options.resume, gemm=options.gemm)  # fmt: skip

    def evaluate(self, model, data: TrainingData, options, run: Path) -> dict[str, float]:
        return self.metrics(data.dev.label_ids, predict(model, data.dev), data, options)

    def metrics(self, gold: np.ndarray, logits: np.ndarray, data: TrainingData, options) -> dict[str, float]:
        raise NotImplementedError

    def main_metric(self, options) -> str:
        return "accuracy"

    def start(self, run: Path, options, data: TrainingData) -> None:
        self.describe_run(run, options, data)
        print(f"finetune: {self.describe_head(data)}", file=sys.stderr)
        if data.dev is None:
            print(f"finetune: no --dev: the run is not evaluated and keeps no {run}/best/ (its model is {run}/ "
                  "itself, as of the last step)", file=sys.stderr)  # fmt: skip

    def describe_run(self, run: Path, options, data: TrainingData, resumed_at: int | None = None) -> None:
        """The files the run folder describes its run with, those not there yet: order.jsonl (the
        examples of each step) and finetune.json (the options, labels, steps). A run killed before
        it wrote them gets them when resumed; one resumed with another --learning-rate notes it."""
        if not (run / ORDER_FILE).exists():
            data.order.write(run, data.steps)
        if not (run / RUN_NOTE).exists():
            write_note(run, replace(options, resume=False), data, self.main_metric(options))
        elif resumed_at is not None and resumed_at < data.steps:
            note_learning_rate(run, options.learning_rate, resumed_at + 1)

    def describe_head(self, data: TrainingData) -> str:
        """Which head the run trains, for the line ``start`` prints."""
        outputs = self.describe_outputs(data)
        if data.head_continues:
            return f"continuing --model's classifier ({outputs})"
        return (f"a new classifier ({outputs}), initialised as Google's: truncated normal 0.02, bias 0; {data.steps} "
                f"steps, {data.warmup} of warmup")  # fmt: skip

    def describe_outputs(self, data: TrainingData) -> str:
        if data.labels is None:
            return "a score (regression)"
        return f"{len(data.labels)} labels: {shown_labels(data.labels)}"


@torch.no_grad()
def predict(model, features, batch_size: int = 64) -> np.ndarray:
    """The logits (N, K) — (N, T, K) for tags — of every example, in eval mode (no dropout; the
    model's mode put back after)."""
    logits = []
    with evaluating(model):
        for start in range(0, len(features), batch_size):
            batch = features.batch(np.arange(start, min(start + batch_size, len(features))))
            # left on the CPU: the model reads the mask here, not on a GPU, and copies them over (model.py)
            tensors = {name: torch.from_numpy(np.ascontiguousarray(batch[name]))
                       for name in ("input_ids", "input_mask", "segment_ids")}  # fmt: skip
            out = model(tensors["input_ids"], tensors["input_mask"], tensors["segment_ids"], **AS_ASKED).logits
            out = out.float().cpu().numpy()
            if out.ndim == 3:  # tags (B, T', K): the batch was cut to its longest row; back to T columns
                out = np.pad(out, ((0, 0), (0, features.input_ids.shape[1] - out.shape[1]), (0, 0)))
            logits.append(out)
    return np.concatenate(logits)


def write_note(run: Path, options, data: TrainingData, metric: str) -> None:
    """finetune.json: the options, the labels, the steps, the head (new or continued)."""
    note = {"options": asdict(options), "labels": data.labels, "steps": data.steps, "warmup_steps": data.warmup,
            "train_examples": len(data.train), "dev_examples": len(data.dev) if data.dev else 0,
            "main_metric": metric, "head": "continued" if data.head_continues else "new",
            "learning_rates": [{"from_step": 1, "learning_rate": options.learning_rate}]}  # fmt: skip
    write_atomically(run / RUN_NOTE, (json.dumps(note, indent=2) + "\n").encode("utf-8"))


def note_learning_rate(run: Path, rate: float, from_step: int) -> None:
    """A resume with another ``--learning-rate`` (the one setting it may change): finetune.json's
    options name the rate the run follows now, and ``learning_rates`` the step each rate began at
    (a second resume from the same checkpoint replaces the first one's rate)."""
    path = run / RUN_NOTE
    try:
        note = parse_json(path.read_bytes())
        rates = note.setdefault("learning_rates", [{"from_step": 1, "learning_rate": note["options"]["learning_rate"]}])
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise DataError(f"{path} is not the run's note finetune wrote ({error}): the --learning-rate of the "
                        "resume cannot be noted in it; move it away to have it written again") from None  # fmt: skip
    while rates and rates[-1]["from_step"] >= from_step:  # (resumed from this checkpoint before)
        rates.pop()
    if rates and rates[-1]["learning_rate"] == rate and note["options"]["learning_rate"] == rate:
        return
    if not rates or rates[-1]["learning_rate"] != rate:
        rates.append({"from_step": from_step, "learning_rate": rate})
    note["options"]["learning_rate"] = rate
    write_atomically(path, (json.dumps(note, indent=2) + "\n").encode("utf-8"))
