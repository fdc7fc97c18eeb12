"""The fine-tuning loop, read top-down (the shape of ``training/loop.py``'s pre-training): read and
check the data, set up the network, then one step per global batch — forward, backward, the shared
update (step.py), log, evaluate, checkpoint.

    >>> options = FinetuneOptions(model="bert-base-uncased", train="train.tsv", dev="dev.tsv",  # doctest: +SKIP
    ...                           glue="mrpc", output="run")
    >>> finetune(options)                                                                        # doctest: +SKIP

``minibert finetune`` (apps/finetune_command.py) is this function with flags; under torchrun every
process runs it (training/distributed.py). The run folder:

    RUN/  config.json model.safetensors vocab.txt ...   the last checkpoint: BertForSequenceClassification
          best/                                          the checkpoint with the best dev metric so far
          metrics.jsonl                                  one line per step; dev_* figures where evaluated
          order.jsonl                                    the examples of every step (order.py)
          finetune.json                                  the labels, the steps, the head: new or continued
          training_state.pt                              what --resume needs (training/checkpoint.py)
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch

from ...errors import DataError
from ...formats.atomic_files import write_atomically
from ..checkpoint import RunDirectory
from ..distributed import World
from ..loop import owning_the_folder, resume, save, stop_if_not_finite, write_loss_picture
from ..report import WATCHED_FINETUNE, resume_command
from ..step import (
    AdamWeightDecay,
    Schedule,
    answer_sums,
    classification_sums,
    hub_named_parameters,
    token_classification_sums,
    update,
)
from .examples import check_labels, label_list, read_examples
from .features import Features, make_features, write_features
from .head import check_sequence_length, fit_labels, load_classifier, load_vocabulary
from .metrics import main_metric, task_metrics
from .options import FinetuneOptions
from .order import TrainingOrder
from .squad_task import evaluate_answers, load_answerer, prepare_answers
from .tagging import check_tags, read_conll, tag_features, tag_metrics

BEST_FOLDER = "best"
RUN_NOTE = "finetune.json"


@dataclass
class Prepared:
    """Everything read and checked before the run folder is touched."""

    labels: list[str] | None  # None: a regression
    head_continues: bool
    train: Features
    dev: Features | None
    steps: int
    warmup: int


def finetune(options: FinetuneOptions) -> Path:
    """Fine-tune; returns the run folder. Every process of a torchrun group calls this."""
    world = World.from_environment()
    run = RunDirectory(Path(options.output))
    steps = []  # the run's step count, once known (for the note a stop prints)
    with owning_the_folder(run, world, lambda: (steps[0], resume_command(options, world.size, "finetune"))):
        return _finetune(options, world, run, steps)


def prepare(options: FinetuneOptions, world_size: int) -> tuple[Prepared, object]:
    """Read the files, fix the labels, make the features: every error before anything is written."""
    options.check(world_size)
    check_sequence_length(options.model, options.max_seq_length)
    if options.task == "tag":
        train, dev, labels, continues, tokenizer = prepare_tagging(options)
    elif options.task == "answer":
        train, dev, labels, continues, tokenizer = prepare_answers(options)
    else:
        train, dev, labels, continues, tokenizer = prepare_classification(options)
    # Google's num_train_steps; run_squad.py counts questions (len(train_examples)), not their windows
    counted = len(train.examples) if options.task == "answer" else len(train)
    steps = int(counted / options.batch_size * options.epochs)
    if steps < 1:
        raise DataError(f"--train {options.train} has {len(train)} examples: {options.epochs:g} epoch(s) of "
                        f"--batch-size {options.batch_size} make no full step; lower --batch-size")  # fmt: skip
    return Prepared(labels, continues, train, dev, steps, int(steps * options.warmup_proportion)), tokenizer


def prepare_tagging(options: FinetuneOptions):
    """CoNLL files → sentences → pieces with the first piece of each word labelled (tagging.py)."""
    train_sentences = read_conll(options.train)
    dev_sentences = read_conll(options.dev) if options.dev else None
    labels = list(options.labels) if options.labels else sorted({tag for s in train_sentences for tag in s.tags})
    labels, continues = fit_labels(options.model, labels, options.problem, bool(options.labels))
    check_tags(train_sentences, labels, options.train, "--train")
    if dev_sentences:
        check_tags(dev_sentences, labels, options.dev, "--dev")
    tokenizer, vocabulary = load_vocabulary(options.model)
    length, every = options.max_seq_length, options.label_all_pieces
    train = tag_features(train_sentences, vocabulary, length, labels, options.train, every)
    dev = tag_features(dev_sentences, vocabulary, length, labels, options.dev) if dev_sentences else None
    return train, dev, labels, continues, tokenizer


def prepare_classification(options: FinetuneOptions):
    """Labelled texts or pairs → Google's features (examples.py, features.py)."""
    train_examples = read_examples(options.train, options.example_format("train"))
    dev_examples = read_examples(options.dev, options.example_format("dev")) if options.dev else None
    separator = options.label_separator if options.task == "multilabel" else None
    labels = None
    if options.task != "regress":
        labels = label_list(train_examples, options.example_format("train"), list(options.labels or []), separator)
    stated = bool(options.labels) or options.glue is not None
    labels, continues = fit_labels(options.model, labels, options.problem, stated)
    if labels is not None:
        check_labels(train_examples, labels, options.train, "--train", separator)
        if dev_examples:
            check_labels(dev_examples, labels, options.dev, "--dev", separator)
    tokenizer, vocabulary = load_vocabulary(options.model)
    length = options.max_seq_length
    train = make_features(train_examples, vocabulary, length, labels, options.train, separator)
    dev = make_features(dev_examples, vocabulary, length, labels, options.dev, separator) if dev_examples else None
    return train, dev, labels, continues, tokenizer


def write_training_features(options: FinetuneOptions, path: str) -> int:
    """``--write-features``: the training file's features in Google's TFRecord layout (run_classifier.py's;
    run_squad.py's FeatureWriter for ``--task answer``), no training; returns the count of records."""
    data, _ = prepare(options, 1)
    return write_features(data.train, path)


def _finetune(options: FinetuneOptions, world: World, run: RunDirectory, steps: list) -> Path:
    if not options.resume:
        run.check_new()
    data, tokenizer = prepare(options, world.size)
    steps.append(data.steps)
    if options.task == "answer":
        model = load_answerer(options.model, data.head_continues, options.seed, options.dropout)
    else:
        model = load_classifier(options.model, data.labels, options.problem, data.head_continues, options.dropout,
                                options.seed)  # fmt: skip
    world.same_weights(model)
    named = hub_named_parameters(model)
    parameters = [parameter for _, parameter in named]
    optimizer = AdamWeightDecay(named, weight_decay=options.weight_decay)
    schedule = Schedule(options.learning_rate, data.warmup, data.steps)
    order = TrainingOrder(len(data.train), options.batch_size, options.seed)
    settings, config = options.settings(world.size, data.steps), model.config.to_dict()
    metric = "f1" if options.task == "answer" else main_metric(options.glue, options.problem)
    best = -float("inf")
    if options.resume:
        done = resume(run, model, optimizer, settings, world, config=config, fingerprint=data.train.fingerprint,
                      instances=len(data.train), hub_names=[name for name, _ in named])  # fmt: skip
        if world.is_main:
            best = best_so_far(run, metric)
    else:
        done = 0
        torch.manual_seed(options.seed + 1 + world.rank)  # dropout: each process its own stream
        if world.is_main:
            run.path.mkdir(parents=True, exist_ok=True)
        save(run, model, optimizer, data.train, settings, config, done, world, hub_files=False)
        if world.is_main:
            order.write(run.path, data.steps)
            write_note(run.path, options, data, metric)
            say_head(options, data)
    if world.is_main:
        tokenizer.save_pretrained(run.path)
        model.save_pretrained(run.path)
    world.wait()
    model.train()
    session = Session(options, world, run, model, tokenizer, optimizer, parameters, schedule, order, data,
                      settings, config, metric, best)  # fmt: skip
    train_steps(session, done)
    if world.is_main:
        write_loss_picture(run.path)
    return run.path


@dataclass
class Session:
    """What the steps use, set up by ``_finetune``."""

    options: FinetuneOptions
    world: World
    run: RunDirectory
    model: torch.nn.Module
    tokenizer: object
    optimizer: AdamWeightDecay
    parameters: list
    schedule: Schedule
    order: TrainingOrder
    data: Prepared
    settings: dict
    config: dict
    metric: str  # the dev figure that picks the best checkpoint
    best: float  # its best value so far


def train_steps(session: Session, done: int) -> None:
    """Steps done + 1 … the last: each a global batch, the update, a metrics line; dev figures and
    checkpoints where due."""
    options, world, data, model, run = session.options, session.world, session.data, session.model, session.run
    show_progress = sys.stderr.isatty() if options.progress is None else options.progress
    share = options.batch_size // world.size
    for step in range(done + 1, data.steps + 1):
        started = time.perf_counter()
        rate = session.schedule.rate(step - 1)  # Google's global step before the update
        rows = session.order.rows(step - 1)[world.rank * share : (world.rank + 1) * share]
        batch = {name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in data.train.batch(rows).items()}
        if options.task == "tag":  # the mean over the global batch's labelled pieces
            labelled = int((data.train.label_ids[session.order.rows(step - 1)] != -100).sum())
            loss, loss_value, correct = token_classification_sums(model, batch, max(labelled, 1))
        elif options.task == "answer":
            loss, loss_value, correct = answer_sums(model, batch, options.batch_size)
        else:
            loss, loss_value, correct = classification_sums(model, batch, options.batch_size, options.problem)
        loss.backward()
        sums = world.sum(torch.tensor([loss_value, correct], dtype=torch.float64))
        record = {"step": step, "epoch": step * options.batch_size / len(data.train), "loss": sums[0].item(),
                  "learning_rate": rate}  # fmt: skip
        # a NaN or infinite loss or gradient norm stops the run before the update (training/loop.py)
        update(session.parameters, session.optimizer, rate, world, options.max_grad_norm,
               before_step=partial(stop_if_not_finite, record, options, run, world, command="finetune",
                                   watched=WATCHED_FINETUNE))  # fmt: skip
        seconds = time.perf_counter() - started
        record.update(seconds=seconds, examples_per_second=options.batch_size / seconds)
        if options.problem == "token_classification":
            record["accuracy"] = sums[1].item() / max(labelled, 1)
        elif options.problem != "regression":
            record["accuracy"] = sums[1].item() / options.batch_size
        end_of_epoch = session.order.ends_epoch(step) or step == data.steps
        if data.dev is not None and (end_of_epoch or _every(options.eval_every, step)) and world.is_main:
            figures = evaluate(model, data, options, run.path)
            record.update({f"dev_{name}": value for name, value in figures.items()})
            if figures[session.metric] > session.best:
                session.best = figures[session.metric]
                save_best(run.path, model, session.tokenizer, step, session.metric, session.best)
        if world.is_main:
            run.append_metrics(record)
            if show_progress:
                print(f"\rstep {step}/{data.steps}  loss {record['loss']:.4f}  rate {rate:.3g}   ", end="",
                      file=sys.stderr)  # fmt: skip
        if end_of_epoch or _every(options.save_every, step):
            save(run, model, session.optimizer, data.train, session.settings, session.config, step, world)
    if world.is_main and show_progress:
        print(file=sys.stderr)


def evaluate(model, data: Prepared, options: FinetuneOptions, run: Path) -> dict[str, float]:
    """The dev figures of the task (metrics.py; tagging.py for tags; for answers, squad_task.py,
    which also writes the dev predictions to the run folder)."""
    if options.task == "answer":
        return evaluate_answers(model, data.dev, options, run)
    logits = predict(model, data.dev)
    if options.task == "tag":
        return tag_metrics(data.dev.label_ids, logits, data.labels)
    return task_metrics(data.dev.label_ids, logits, options.glue, options.problem)


def _every(every: int | None, step: int) -> bool:
    return bool(every) and step % every == 0


@torch.no_grad()
def predict(model, features: Features, batch_size: int = 64) -> np.ndarray:
    """The logits (N, K) — (N, T, K) for tags — of every example, in eval mode (no dropout); the
    model is left in training mode."""
    model.eval()
    logits = []
    for start in range(0, len(features), batch_size):
        batch = features.batch(np.arange(start, min(start + batch_size, len(features))))
        tensors = {name: torch.from_numpy(np.ascontiguousarray(batch[name]))
                   for name in ("input_ids", "input_mask", "segment_ids")}  # fmt: skip
        out = model(tensors["input_ids"], tensors["input_mask"], tensors["segment_ids"]).logits.float().numpy()
        if out.ndim == 3:  # tags (B, T', K): the batch was cut to its longest row; back to T columns
            out = np.pad(out, ((0, 0), (0, features.input_ids.shape[1] - out.shape[1]), (0, 0)))
        logits.append(out)
    model.train()
    return np.concatenate(logits)


def save_best(run: Path, model, tokenizer, step: int, metric: str, value: float) -> None:
    """RUN/best/: a hub-layout checkpoint of the best dev figure so far, and which step it was."""
    folder = run / BEST_FOLDER
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    write_atomically(folder / "best.json", json.dumps({"step": step, f"dev_{metric}": value}).encode("utf-8"))


def best_so_far(run: RunDirectory, metric: str) -> float:
    """The best dev figure among the metrics lines kept on resume."""
    best = -float("inf")
    if run.metrics_path.exists():
        for line in run.metrics_path.read_text(encoding="utf-8").splitlines():
            value = json.loads(line).get(f"dev_{metric}")
            if isinstance(value, (int, float)):
                best = max(best, value)
    return best


def write_note(run: Path, options: FinetuneOptions, data: Prepared, metric: str) -> None:
    note = {"options": asdict(options), "labels": data.labels, "steps": data.steps, "warmup_steps": data.warmup,
            "train_examples": len(data.train), "dev_examples": len(data.dev) if data.dev else 0,
            "main_metric": metric, "head": "continued" if data.head_continues else "new"}  # fmt: skip
    write_atomically(run / RUN_NOTE, (json.dumps(note, indent=2) + "\n").encode("utf-8"))


def say_head(options: FinetuneOptions, data: Prepared) -> None:
    """One line on stderr: which head the run trains."""
    labels = "a score (regression)" if data.labels is None else f"{len(data.labels)} labels: {', '.join(data.labels)}"
    if options.task == "answer":
        labels = f"answers: a start and an end score per piece; {len(data.train)} windows of " \
                 f"{len(data.train.examples)} questions, {data.train.skipped} skipped (answer not found in the words)"
    if data.head_continues:
        print(f"finetune: continuing --model's classifier ({labels})", file=sys.stderr)
    else:
        print(f"finetune: a new classifier ({labels}), initialised as Google's: truncated normal 0.02, bias 0; "
              f"{data.steps} steps, {data.warmup} of warmup", file=sys.stderr)  # fmt: skip
