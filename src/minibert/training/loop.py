"""The pre-training loop, read top-down (the shape of nanoGPT's train.py): set up, then one step per
global batch — forward, backward, sum over processes, clip, update, log, checkpoint.

    >>> options = PretrainOptions(data=["instances.tfrecord"], config="bert_config.json",   # doctest: +SKIP
    ...                           vocab="vocab.txt", output="run", steps=300, batch_size=32)
    >>> pretrain(options)                                                                   # doctest: +SKIP

``minibert pretrain`` (apps/pretrain_command.py) is this function with flags; under torchrun every
process runs it (distributed.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

from ..config import BertConfig
from ..heads import BertForPreTraining
from ..tokenizer import BertTokenizer
from .checkpoint import RunDirectory, TrainingState, check_state
from .data import Instances, read_instances
from .distributed import World
from .options import PretrainOptions
from .precision import check_bf16
from .step import MLM_EPSILON, AdamWeightDecay, Schedule, clip_by_global_norm, hub_named_parameters, pretraining_sums


def pretrain(options: PretrainOptions) -> Path:
    """Train; returns the run directory. Every process of a torchrun group calls this."""
    world = World.from_environment()
    try:
        return _pretrain(options, world)
    finally:
        world.close()


def _pretrain(options: PretrainOptions, world: World) -> Path:
    options.check(world.size)
    run = RunDirectory(Path(options.output))
    if not options.resume:
        run.check_new()
    torch.manual_seed(options.seed)  # the same random weights (--config) in every process
    model, tokenizer = build_model(options)
    instances = read_instances(options.data, model.config)  # every record checked before any step
    world.same_weights(model)
    named = hub_named_parameters(model)
    parameters = [parameter for _, parameter in named]
    optimizer = AdamWeightDecay(named, weight_decay=options.weight_decay)
    schedule = Schedule(options.learning_rate, options.warmup_steps, options.steps)
    settings = options.settings(world.size)
    config = model.config.to_dict()

    if options.resume:
        state = TrainingState.from_file(run.state_path)
        check_state(state, run.state_path, settings=settings, config=config, fingerprint=instances.fingerprint,
                    model=model, instances=len(instances), hub_names=[name for name, _ in named])  # fmt: skip
        restore(model, optimizer, state, world)
        done = state.step
        if world.is_main:
            run.remove_leftovers()
            run.keep_metrics_up_to(done)
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
    show_progress = sys.stderr.isatty() if options.progress is None else options.progress
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
        world.sum_gradients(parameters)
        world.sum(sums)
        gradient_norm = clip_by_global_norm(parameters, options.max_grad_norm)
        optimizer.step(rate)
        optimizer.zero_grad()

        seconds = time.perf_counter() - step_started
        tokens = options.batch_size * instances.sequence_length
        mlm_loss, nsp_loss, mlm_correct, nsp_correct = sums.tolist()
        record = {"step": step, "loss": mlm_loss + nsp_loss, "mlm_loss": mlm_loss, "nsp_loss": nsp_loss,
                  "mlm_accuracy": mlm_correct / max(mlm_denominator - MLM_EPSILON, 1e-12),
                  "nsp_accuracy": nsp_correct / options.batch_size, "learning_rate": rate,
                  "gradient_norm": gradient_norm, "tokens_per_second": tokens / seconds,
                  "seconds": seconds}  # fmt: skip
        if world.is_main:
            run.append_metrics(record)
            if show_progress:
                print_progress(record, step, options.steps, time.perf_counter() - started, step - done)
        if step % options.save_every == 0 or step == options.steps:
            save(run, model, optimizer, instances, settings, config, step, world)
    if world.is_main:
        if show_progress:
            print(file=sys.stderr)
        write_loss_picture(run.path)
    return run.path


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
    moment after it can be resumed, and a folder without it holds no run yet."""
    rng = world.random_states()
    if world.is_main:
        moments = optimizer.moments
        state = TrainingState(step, step * settings["batch_size"] % len(instances), settings, config,
                              instances.fingerprint, model.state_dict(), moments, rng)  # fmt: skip
        run.save(model, state, hub_files)
    world.wait()


def restore(model, optimizer, state: TrainingState, world: World) -> None:
    with torch.no_grad():
        model.load_state_dict(state.weights)
    optimizer.moments = {name: (m.clone(), v.clone()) for name, (m, v) in state.moments.items()}
    torch.set_rng_state(state.rng[world.rank])


def print_progress(record: dict, step: int, steps: int, elapsed: float, steps_here: int) -> None:
    left = elapsed / steps_here * (steps - step)
    print(f"\rstep {step}/{steps}  loss {record['loss']:.4f}  rate {record['learning_rate']:.3g}  "
          f"{record['tokens_per_second']:,.0f} tokens/s  {left / 60:.1f} min left   ", end="",
          file=sys.stderr)  # fmt: skip


def write_loss_picture(run: Path) -> Path | None:
    """loss.png beside metrics.jsonl, when matplotlib (the "plot" extra) is installed."""
    try:
        from .plot import plot_run

        return plot_run(run)
    except ImportError:
        return None
