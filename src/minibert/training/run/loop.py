"""The training loop, one for every task, read top-down (the shape of nanoGPT's train.py): set up,
then one step per global batch — forward, backward, sum over processes, clip, check, update, log,
evaluate, checkpoint.

    >>> pretrain(PretrainOptions(data=["instances.tfrecord"], config="bert_config.json",    # doctest: +SKIP
    ...                          vocab="vocab.txt", output="run", steps=300, batch_size=32))
    >>> finetune(FinetuneOptions(model="bert-base-uncased", train="train.tsv", dev="dev.tsv",  # doctest: +SKIP
    ...                          glue="mrpc", output="run"))

What differs from task to task — the data, the network, the loss, the figures, the dev evaluation —
is the task's record (tasks/task.py), chosen by its name from one table (tasks/__init__.py). A
run's life is written here once, for every task:

    the folder     one run per folder (lock.py); a new run refuses a folder that holds one
    seeds          new weights (a random model, a new head) and the data's order from --seed;
                   dropout from --seed + rank: each process its own stream
    resume         the training state checked and put back (resume.py, checkpoint.py): the steps
                   after it are bit for bit those of a run never stopped
    the device     --device (a GPU where there is one), --precision (autocast; fp16 with a loss scaler)
    the guard      a NaN or infinite loss or gradient norm stops the run before the update (report.py)
    progress       a line on stderr (report.py), and a summary at the end
    checkpoints    every --save-every steps, at each epoch's end (fine-tuning) and at the last step
    metrics        one line per step in metrics.jsonl, dev figures where evaluated (null where
                   undefined), best/ the best defined one

``minibert pretrain`` and ``minibert finetune`` (apps/) are these functions with flags; under
torchrun every process runs them (distributed.py).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import warnings
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch

from ...errors import ProcessGroupError, TrainingDivergedError
from ...formats.atomic_files import write_atomically
from ...loading.devices import resolve_device
from ..options import FinetuneOptions, PretrainOptions, refuse_no_output
from ..tasks import task_named
from ..tasks.features import write_features
from ..tasks.task import Task, TrainingData, piece_tensors
from .arithmetic import arithmetic_of, deterministic_algorithms
from .checkpoint import RunDirectory, TrainingState, vocabulary_fingerprint
from .distributed import World
from .guard import gives_finite_numbers, lower_rate_command, stop_if_not_finite
from .lock import run_folder_lock
from .optimization import AdamWeightDecay, Schedule, hub_named_parameters, update
from .paths import real_paths
from .precision import LossScaler, autocast, check_bf16, check_precision, precision_flag
from .report import (
    BEST_FOLDER,
    Progress,
    held_notices,
    report_best,
    report_dev,
    resume_command,
    say_where,
    stopped_note,  # fmt: skip
)
from .resume import resume


def pretrain(options: PretrainOptions) -> Path:
    """Pre-train (masked LM + next sentence); returns the run folder."""
    refuse_no_output(options)
    return train(task_named("pretraining"), options)


def finetune(options: FinetuneOptions) -> Path:
    """Fine-tune for ``options.task``; returns the run folder."""
    refuse_no_output(options)
    return train(task_named(options.task), options)


def write_training_features(options: FinetuneOptions, path: str) -> int:
    """``--write-features``: the training file's features in Google's TFRecord layout (run_classifier.py's;
    run_squad.py's FeatureWriter for ``--task answer``), no training; returns the count of records.
    The options that set up a run (--dev, --epochs, --batch-size, ...) are refused, not ignored:
    the file holds every training example, whatever the batches that would read it."""
    options.refuse_unread_flags(writing_features=True)
    return write_features(task_named(options.task).read_checked(options)[0], path)


@dataclass
class Run:
    """One run: what its steps use, set up once by ``set_up``."""

    task: Task
    options: PretrainOptions | FinetuneOptions
    world: World
    folder: RunDirectory
    data: TrainingData | None = None  # known once the data is read (a stop's note reads its steps)
    model: torch.nn.Module | None = None
    parameters: list[torch.nn.Parameter] = field(default_factory=list)  # in the optimizer's order
    optimizer: AdamWeightDecay | None = None
    schedule: Schedule | None = None
    saved_with: dict = field(default_factory=dict)  # what a checkpoint records of the run: settings, config, data
    best: float = -float("inf")  # the best value of the task's main dev figure so far
    best_step: int | None = None  # and its step
    scaler: LossScaler | None = None  # fp16's loss scale (--precision fp16)
    last_state: TrainingState | None = None  # the state last saved (rank 0), until the run finishes
    finished: bool = False  # resumed from a finished run: nothing to do


def train(task: Task, options) -> Path:
    """Train ``task``; returns the run folder. Every process of a torchrun group calls this."""
    device = resolve_device(options.device)  # a GPU that is not there, fp16 on a CPU: one line, nothing written
    check_precision(options.precision, device, resume=options.resume)
    with deterministic_algorithms(device, options.deterministic):  # --deterministic on a GPU (arithmetic.py)
        return _train(task, options, device)


def _train(task: Task, options, device: torch.device) -> Path:
    world = World.from_environment(device)
    run = Run(task, options, world, RunDirectory(Path(options.output)))
    if options.resume:  # before the lock, as the folder's place: a model folder is named, not "nothing to resume"
        run.folder.check_resumable()
    else:  # before the lock: a refused folder is left as it was, without even a lock file
        run.folder.check_place()
    with owning_the_folder(run):
        with held_notices():  # a set-up that fails says one line, its error (not the model's loading notices)
            done = set_up(run)
        progress = steps(run, done)
        if world.is_main:
            best = run.folder.path / BEST_FOLDER / "model.safetensors" if run.best_step == run.data.steps else None
            run.folder.finish(None if run.finished else run.last_state, options.keep_state, best)
            picture = write_loss_picture(run.folder.path)
            progress.summary(run.folder.path, progress.elapsed, picture, task.command, task.summary,
                             keeps_state=options.keep_state)  # fmt: skip
            report_best(run)
    return run.folder.path


@contextlib.contextmanager
def owning_the_folder(run: Run):
    """A run's life in its folder: rank 0 holds the folder's lock (one run per folder; the other
    processes write nothing); on Ctrl-C or SIGTERM the step in flight is abandoned and the exception
    says what is on disk (the run's step count and its ``--resume`` command), and so does the error
    of a torchrun group that lost a process; the processes' group is closed at the end. Under
    torchrun rank 0 alone says it: it alone knows the checkpoint it wrote."""
    world, folder = run.world, run.folder
    try:
        with run_folder_lock(folder.path) if world.is_main else contextlib.nullcontext():
            yield
    except BaseException as stop:
        note = None
        if world.is_main and folder.saved_step is not None:
            command = resume_command(run.options, world.size, run.task.command)
            note = stopped_note(folder.path, folder.saved_step, run.data.steps, command)
        if not isinstance(stop, Exception) and (note is not None or not world.is_main):  # Ctrl-C, SIGTERM
            stop.on_disk = note  # (None: another process says it; apps/cli.py prints nothing)
        elif isinstance(stop, ProcessGroupError) and note is not None:  # a process of the group stopped or is lost
            raise ProcessGroupError(f"{stop}; {note}") from stop.__cause__
        raise
    finally:
        world.close()


def set_up(run: Run) -> int:
    """Read the data, build the network and the optimizer, start the run or resume it. Returns the
    steps done."""
    task, options, world, folder = run.task, run.options, run.world, run.folder
    if not options.resume:
        folder.check_new()
    run.data = data = task.prepare(options, world)  # every file read and checked before the folder is touched
    torch.manual_seed(options.seed)  # new weights (a random model, a new head): from the seed, in every process
    run.model = model = set_dropout(task.network(options, data), options.dropout).to(world.device)
    world.same_weights(model)
    run.scaler = LossScaler() if options.precision == "fp16" else None
    named = hub_named_parameters(model)
    run.parameters = [parameter for _, parameter in named]
    run.optimizer = AdamWeightDecay(named, weight_decay=options.weight_decay)
    run.schedule = Schedule(options.learning_rate, data.warmup, data.steps)
    # (the data's fingerprints hashed once: the features never change in a run, and every checkpoint records them)
    settings = options.settings(world.size, data.steps)  # (the paths as typed, and where they lead from here)
    run.saved_with = {"settings": settings, "paths": real_paths(settings), "config": model.config.to_dict(),
                      "vocabulary": vocabulary_fingerprint(data.tokenizer), "data": data.train.fingerprint,
                      "dev": task.dev_fingerprint(data)}  # fmt: skip
    if options.resume:
        done = resume(run, hub_names=[name for name, _ in named])
    else:
        done = 0
        torch.manual_seed(options.seed + world.rank)  # dropout: each process its own stream
        if world.is_main:
            folder.path.mkdir(parents=True, exist_ok=True)
            folder.remove_leftovers()  # a run killed while it wrote its first state left no run, and a temporary
        save(run, done, hub_files=False)  # the training state first: from here on the run can be resumed
        if world.is_main:
            task.start(folder.path, options, data)
    if world.is_main and not run.finished:  # the hub files of the state (a kill may have left none, or newer ones)
        data.tokenizer.save_pretrained(folder.path)
        model.save_pretrained(folder.path)
    if world.is_main and done < data.steps:  # what is said of the steps to come (none: nothing to say)
        never_peaks = run.schedule.never_peaks()  # (pretrain's --warmup-steps; a proportion cannot)
        if never_peaks:
            warnings.warn(never_peaks, stacklevel=2)
        say_where(run)
        if options.precision == "bf16" and world.device.type == "cpu":  # a warning where bf16 is slower here
            micro_batch = options.batch_size // world.size // options.accumulate
            check_bf16(model.config.hidden_size, model.config.intermediate_size,
                       micro_batch * data.train.sequence_length, precision_flag(options))  # fmt: skip
    world.wait()
    model.train()
    return done


def steps(run: Run, done: int) -> Progress:
    """Steps done + 1 … the last: each a global batch, the update, a metrics line; dev figures and
    checkpoints where due. Returns the Progress (its first and last records)."""
    task, options, world, data = run.task, run.options, run.world, run.data
    progress = Progress(data.steps, done, options.progress)
    started = time.perf_counter()
    for step in range(done + 1, data.steps + 1):
        step_started = time.perf_counter()
        rate = run.schedule.rate(step - 1)  # Google's global step before the update
        rows = data.order.rows(step - 1)  # the global batch's examples (B,)
        denominators = task.denominators(data.train, rows)  # the global batch's: the same in every piece
        sums = forward_and_backward(run, rows, denominators)
        record = {"step": step, "epoch": step * options.batch_size / len(data.train),
                  **task.figures(sums, denominators), "learning_rate": rate}  # fmt: skip
        _, updated = update(run.parameters, run.optimizer, rate, world, options.max_grad_norm,
                            before_step=partial(stop_if_not_finite, run, record), scaler=run.scaler)  # fmt: skip
        if run.scaler is not None:
            record.update(loss_scale=run.scaler.scale, **({} if updated else {"skipped": "fp16 overflow"}))

        seconds = time.perf_counter() - step_started
        record.update(seconds=seconds, examples_per_second=options.batch_size / seconds,
                      tokens_per_second=task.tokens(data.train, rows) / seconds)  # fmt: skip
        end_of_epoch = data.order.ends_epoch(step) or step == data.steps
        if data.dev is not None and (end_of_epoch or due(options.eval_every, step)) and world.is_main:
            evaluate(run, step, record)
        if world.is_main:
            run.folder.append_metrics(record)
            progress.show(record, time.perf_counter() - started)
        if end_of_epoch or due(options.save_every, step):
            save(run, step)
    progress.elapsed = time.perf_counter() - started
    return progress


def forward_and_backward(run: Run, rows: np.ndarray, denominators: dict[str, float]) -> dict[str, float]:
    """This process's share of the global batch, in ``--accumulate`` pieces: forward, the task's
    loss, backward (the gradients of the pieces add up). Returns the task's figures summed over the
    pieces and over every process.

    On a GPU the CPU only queues the work, and it is not made to wait for it until every backward
    is queued: the model's inputs (ids, mask, segments) stay here, where the model checks them and
    reads the mask's layout (model.py; copied over without waiting), and the figures are summed
    where they were computed and read once, at the end."""
    options, world = run.options, run.world
    total = None
    for piece_rows in my_pieces(rows, world, options.accumulate):
        piece = piece_tensors(run.data.train.batch(piece_rows), world.device)  # (model inputs left on the CPU)
        with autocast(options.precision, world.device):
            sums = run.task.sums(run.model, piece, denominators)
        (sums.loss if run.scaler is None else run.scaler.scaled(sums.loss)).backward()
        figures = sums.stacked_figures()  # (figures,)
        total = figures if total is None else total + figures
    world.sum(total)
    return dict(zip(sums.figures, total.tolist()))  # (on a GPU: the step's one wait, all of it queued)


def my_pieces(rows: np.ndarray, world: World, accumulate: int):
    """This process's rows of the global batch (B,), cut into ``accumulate`` micro-batches."""
    share = len(rows) // world.size
    micro = share // accumulate
    for index in range(accumulate):
        start = world.rank * share + index * micro
        yield rows[start : start + micro]


def due(every: int | None, step: int) -> bool:
    return bool(every) and step % every == 0


def set_dropout(network: torch.nn.Module, dropout: float | None) -> torch.nn.Module:
    """Every dropout probability set to ``dropout`` (``--dropout``; None: kept) — the modules only:
    config.json keeps the model's own probabilities."""
    if dropout is not None:
        for module in network.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = dropout
    return network


def evaluate(run: Run, step: int, record: dict) -> None:
    """The dev figures into the step's record; ``best/`` replaced when the main one is the best so far."""
    measured = run.task.evaluate(run.model, run.data, run.options, run.folder.path)
    figures = {name: value if math.isfinite(value) else None  # None: undefined (a correlation of constant scores)
               for name, value in measured.items()}  # fmt: skip
    record.update({f"dev_{name}": value for name, value in figures.items()})
    metric = run.task.main_metric(run.options)
    best = figures[metric] is not None and figures[metric] > run.best  # an undefined figure is never the best
    if best:
        run.best, run.best_step = figures[metric], step
        save_best(run.folder.path, run.model, run.data.tokenizer, step, metric, run.best)
    report_dev(step, run.data.steps, figures, metric, best)


def save_best(folder: Path, model, tokenizer, step: int, metric: str, value: float) -> None:
    """RUN/best/: a hub-layout checkpoint of the best dev figure so far, and which step it was."""
    best = folder / BEST_FOLDER
    model.save_pretrained(best)
    tokenizer.save_pretrained(best)
    write_atomically(best / "best.json", json.dumps({"step": step, f"dev_{metric}": value}).encode("utf-8"))


def save(run: Run, step: int, hub_files: bool = True) -> None:
    """A checkpoint (rank 0 writes; every process contributes its random-number state). The first
    one (step 0) is the training state alone, written before anything else: a run killed at any
    moment after it can be resumed, and a folder without it holds no run yet. Weights that are not
    all finite are never saved over a good checkpoint."""
    model, folder = run.model, run.folder
    ruined = None
    if not all(bool(torch.isfinite(parameter).all()) for parameter in model.parameters()):
        ruined = "hold NaN or infinite values"
    elif step > 0 and not gives_finite_numbers(run):  # (step 0: the weights the run starts from)
        ruined = "give NaN or infinite outputs"
    if ruined:  # the update made them so: the last checkpoint stays the last good one
        raise TrainingDivergedError(f"step {step}: the weights {ruined}; not saved: {folder.path} keeps the "
                                    f"checkpoint of step {folder.saved_step}; to continue with a lower rate: "
                                    f"{lower_rate_command(run)}")  # fmt: skip
    rng, device_rng = run.world.random_states()
    if run.world.is_main:
        train, settings = run.data.train, run.saved_with["settings"]
        position = step * settings["batch_size"] % len(train)
        state = TrainingState(step, position, settings, run.saved_with["config"], run.saved_with["data"],
                              model.state_dict(), run.optimizer.moments, rng, arithmetic_of(model), device_rng,
                              None if run.scaler is None else run.scaler.state(),
                              dev_data=run.saved_with["dev"], vocabulary=run.saved_with["vocabulary"],
                              paths=run.saved_with["paths"])  # fmt: skip
        folder.save(model, state, hub_files)
        run.last_state = state
    run.world.wait()


def write_loss_picture(run: Path) -> Path | None:
    """loss.png beside metrics.jsonl, when matplotlib (the "plot" extra) is installed."""
    try:
        from .plot import plot_run

        return plot_run(run)
    except ImportError:
        return None
