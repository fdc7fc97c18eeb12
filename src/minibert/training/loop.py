"""The pre-training loop, read top-down (the shape of nanoGPT's train.py): set up, then one step per
global batch — forward, backward, sum over processes, clip, update, log, checkpoint.

    >>> options = PretrainOptions(data=["instances.tfrecord"], config="bert_config.json",   # doctest: +SKIP
    ...                           vocab="vocab.txt", output="run", steps=300, batch_size=32)
    >>> pretrain(options)                                                                   # doctest: +SKIP

``minibert pretrain`` (apps/pretrain_command.py) is this function with flags; under torchrun every
process runs it (distributed.py).
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import torch

from ..config import BertConfig
from ..errors import DataError, TrainingDivergedError
from ..heads import BertForPreTraining
from ..tokenizer import BertTokenizer
from .arithmetic import arithmetic_of, follow_the_run
from .checkpoint import RunDirectory, TrainingState, check_state
from .data import Instances, read_instances
from .distributed import World
from .options import PretrainOptions
from .precision import check_bf16
from .report import WATCHED, Progress, check_finite, resume_command, stopped_note
from .run_lock import run_folder_lock
from .step import MLM_EPSILON, AdamWeightDecay, Schedule, hub_named_parameters, pretraining_sums, update


def pretrain(options: PretrainOptions) -> Path:
    """Train; returns the run directory. Every process of a torchrun group calls this."""
    world = World.from_environment()
    run = RunDirectory(Path(options.output))
    with owning_the_folder(run, world, lambda: (options.steps, resume_command(options, world.size))):
        options.check(world.size)
        return _pretrain(options, world, run)


@contextlib.contextmanager
def owning_the_folder(run: RunDirectory, world: World, stop_note):
    """A run's life in its folder, for pretrain and finetune: rank 0 holds the folder's lock (one run
    per folder; the other processes write nothing); on Ctrl-C or SIGTERM the step in flight is
    abandoned and the exception says what is on disk (``stop_note()``: the run's step count and its
    ``--resume`` command); the processes' group is closed at the end."""
    try:
        with run_folder_lock(run.path) if world.is_main else contextlib.nullcontext():
            yield
    except BaseException as stop:
        if world.is_main and not isinstance(stop, Exception) and run.saved_step is not None:
            steps, command = stop_note()
            stop.on_disk = stopped_note(run.path, run.saved_step, steps, command)
        raise
    finally:
        world.close()


def _pretrain(options: PretrainOptions, world: World, run: RunDirectory) -> Path:
    if not options.resume:
        run.check_new()
    torch.manual_seed(options.seed)  # the same random weights (--config) in every process
    model, tokenizer = build_model(options)
    instances = read_instances(options.data, model.config)  # every record checked before any step
    check_batch_fits(options, len(instances), world)
    world.same_weights(model)
    named = hub_named_parameters(model)
    parameters = [parameter for _, parameter in named]
    optimizer = AdamWeightDecay(named, weight_decay=options.weight_decay)
    schedule = Schedule(options.learning_rate, options.warmup_steps, options.steps)
    settings = options.settings(world.size)
    config = model.config.to_dict()

    if options.resume:
        done = resume(run, model, optimizer, settings, world, config=config, fingerprint=instances.fingerprint,
                      instances=len(instances), hub_names=[name for name, _ in named])  # fmt: skip
    else:
        done = 0
        torch.manual_seed(options.seed + world.rank)  # dropout: each process its own stream
        if world.is_main:
            run.path.mkdir(parents=True, exist_ok=True)
        save(run, model, optimizer, instances, settings, config, done, world, hub_files=False)
    if world.is_main:  # the hub files of the state (a kill may have left none, or newer ones)
        tokenizer.save_pretrained(run.path)
        model.save_pretrained(run.path)
        if options.bf16:  # a warning where bf16 is slower than float32 here (measured once, cached)
            micro_batch = options.batch_size // world.size // options.accumulate
            check_bf16(model.config.hidden_size, model.config.intermediate_size,
                       micro_batch * instances.sequence_length)  # fmt: skip
    world.wait()

    model.train()
    progress = _train(options, world, run, model, optimizer, schedule, instances, parameters, (settings, config), done)
    if world.is_main:
        progress.summary(run.path, progress.elapsed, write_loss_picture(run.path))
    return run.path


def _train(options, world, run, model, optimizer, schedule, instances, parameters, saved_with, done):
    """Steps done + 1 … options.steps: forward, backward, sum over processes, clip, check, update,
    log, checkpoint. Returns the Progress (its first and last records)."""
    progress = Progress(options.steps, done, options.progress)
    started = time.perf_counter()
    for step in range(done + 1, options.steps + 1):
        step_started = time.perf_counter()
        rate = schedule.rate(step - 1)  # Google's global step before the update
        batch = instances.global_batch(step - 1, options.batch_size)
        # the whole batch's denominators, the same in every process and micro-batch (step.py)
        mlm_denominator = float(batch["masked_lm_weights"].astype(np.float64).sum()) + MLM_EPSILON
        sums = torch.zeros(4, dtype=torch.float64)  # mlm loss, nsp loss, mlm correct, nsp correct
        for piece in my_pieces(batch, world, options.accumulate):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=options.bf16):
                result = pretraining_sums(model, piece, mlm_denominator, options.batch_size)
            result.loss.backward()
            sums += torch.tensor([result.mlm_loss, result.nsp_loss, result.mlm_correct, result.nsp_correct],
                                 dtype=torch.float64)  # fmt: skip
        world.sum(sums)
        mlm_loss, nsp_loss, mlm_correct, nsp_correct = sums.tolist()
        record = {"step": step, "loss": mlm_loss + nsp_loss, "mlm_loss": mlm_loss, "nsp_loss": nsp_loss,
                  "mlm_accuracy": mlm_correct / max(mlm_denominator - MLM_EPSILON, 1e-12),
                  "nsp_accuracy": nsp_correct / options.batch_size, "learning_rate": rate}  # fmt: skip

        update(parameters, optimizer, rate, world, options.max_grad_norm,
               before_step=partial(stop_if_not_finite, record, options, run, world))  # fmt: skip

        seconds = time.perf_counter() - step_started
        record.update(tokens_per_second=options.batch_size * instances.sequence_length / seconds, seconds=seconds)
        if world.is_main:
            run.append_metrics(record)
            progress.show(record, time.perf_counter() - started)
        if step % options.save_every == 0 or step == options.steps:
            save(run, model, optimizer, instances, *saved_with, step, world)
    progress.elapsed = time.perf_counter() - started
    return progress


def stop_if_not_finite(record: dict, options, run: RunDirectory, world: World, gradient_norm: float, *,
                       command: str = "pretrain", watched: dict[str, str] = WATCHED) -> None:  # fmt: skip
    """Before the update: a NaN or infinite loss or gradient norm stops every process (they all see
    the same sums and norm), the last checkpoint left as it is; the step's line is written first.
    (``finetune`` uses it too: ``command`` and the record's ``watched`` figures.)"""
    record["gradient_norm"] = gradient_norm
    try:
        lower = float(f"{options.learning_rate / 10:.3g}")  # the suggestion: a tenth of the rate
        check_finite(record, options.learning_rate, run.path, run.saved_step if world.is_main else None,
                     resume_command(options, world.size, command, learning_rate=lower), watched)  # fmt: skip
    except TrainingDivergedError:
        if world.is_main:
            run.append_metrics(record)
        raise


def resume(run: RunDirectory, network, optimizer, settings: dict, world: World, **checks) -> int:
    """Continue RUN: its training state checked against this command (``read_resumed_state``; the
    network is checked too), put back into ``network`` and ``optimizer``; a killed save's leftovers
    removed and metrics.jsonl cut to the state's step. Returns that step, the checkpoint on disk
    from here on (a stop says so). ``finetune`` resumes with this too."""
    state = read_resumed_state(run, settings, world, model=network, **checks)
    restore(network, optimizer, state, world)
    follow_the_run(network, state.arithmetic, say=world.is_main)
    run.saved_step = state.step
    if world.is_main:
        run.remove_leftovers()
        run.keep_metrics_up_to(state.step)
    return state.step


def read_resumed_state(run: RunDirectory, settings: dict, world: World, **checks) -> TrainingState:
    """The run's training state, checked against this command (``checks``: checkpoint.check_state).
    The learning rate may change on resume (a run that diverged continues with a lower one), nothing
    else; a change is said once. ``finetune`` reads its state with this too."""
    state = TrainingState.from_file(run.state_path)
    same = {name: value for name, value in settings.items() if name != "learning_rate"}
    check_state(state, run.state_path, settings=same, **checks)
    rate = settings["learning_rate"]
    if state.settings.get("learning_rate") != rate and world.is_main:
        warnings.warn(f"resuming at step {state.step} with --learning-rate {rate:g} (the run was made with "
                      f"{state.settings.get('learning_rate')!r}): the steps after follow the new rate's schedule",
                      stacklevel=3)  # fmt: skip
    return state


def check_batch_fits(options: PretrainOptions, count: int, world: World) -> None:
    """A global batch larger than the data holds some instances several times over (batches wrap
    around the data's end): refused unless ``--allow-wrap``, and then said once."""
    if options.batch_size <= count:
        return
    said = (f"--batch-size {options.batch_size} is larger than the {count} instances of --data: every batch would "
            f"hold each instance up to {math.ceil(options.batch_size / count)} times")  # fmt: skip
    if not options.allow_wrap:
        raise DataError(f"{said}; make more instances or a smaller batch, or pass --allow-wrap to train so")
    if world.is_main:
        warnings.warn(f"{said} (--allow-wrap)", stacklevel=2)


def build_model(options: PretrainOptions):
    """BertForPreTraining and its tokenizer: from ``--init`` (heads it lacks start fresh), or random
    weights initialised as BERT's (normal 0.02, biases 0, LayerNorm 1 and 0) from ``--config``."""
    if options.init is not None:
        model = BertForPreTraining.from_pretrained(options.init, new_heads=True).float()
        tokenizer = BertTokenizer.from_pretrained(options.init)
    else:
        config = BertConfig.from_json_file(options.config)
        # the tokenizer cuts texts where the model's positions end (BertTokenizer's default is BERT's 512)
        tokenizer = BertTokenizer(options.vocab, do_lower_case=options.do_lower_case,
                                  model_max_length=config.max_position_embeddings)  # fmt: skip
        config.check_vocabulary(tokenizer.vocab, f"--vocab {options.vocab}")
        model = BertForPreTraining(config)
    if options.dropout is not None:  # the modules only: config.json keeps the model's own probabilities
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = options.dropout
    return model, tokenizer


def my_pieces(batch: dict[str, np.ndarray], world: World, accumulate: int):
    """This process's share of the global batch, cut into ``accumulate`` micro-batches, as tensors."""
    share = len(batch["next_sentence_labels"]) // world.size
    micro = share // accumulate
    for index in range(accumulate):
        start = world.rank * share + index * micro
        yield {name: torch.from_numpy(np.ascontiguousarray(array[start : start + micro]))
               for name, array in batch.items()}  # fmt: skip


def save(run: RunDirectory, model, optimizer, instances: Instances, settings, config, step, world,
         hub_files: bool = True) -> None:  # fmt: skip
    """A checkpoint (rank 0 writes; every process contributes its random-number state). The first
    one (step 0) is the training state alone, written before anything else: a run killed at any
    moment after it can be resumed, and a folder without it holds no run yet. Weights that are not
    all finite are never saved over a good checkpoint."""
    if not all(bool(torch.isfinite(parameter).all()) for parameter in model.parameters()):
        raise TrainingDivergedError(f"step {step}: the weights hold NaN or infinite values; not saved: {run.path} "
                                    f"keeps the checkpoint of step {run.saved_step}; resume with a lower "
                                    "--learning-rate")  # fmt: skip
    rng = world.random_states()
    if world.is_main:
        moments = optimizer.moments
        position = step * settings["batch_size"] % len(instances)
        state = TrainingState(step, position, settings, config, instances.fingerprint, model.state_dict(), moments,
                              rng, arithmetic_of(model))  # fmt: skip
        run.save(model, state, hub_files)
    world.wait()


def restore(model, optimizer, state: TrainingState, world: World) -> None:
    with torch.no_grad():
        model.load_state_dict(state.weights)
    optimizer.moments = {name: (m.clone(), v.clone()) for name, (m, v) in state.moments.items()}
    torch.set_rng_state(state.rng[world.rank])


def write_loss_picture(run: Path) -> Path | None:
    """loss.png beside metrics.jsonl, when matplotlib (the "plot" extra) is installed."""
    try:
        from .plot import plot_run

        return plot_run(run)
    except ImportError:
        return None
