"""``--resume``: a run continued from its training state (checkpoint.py), as if it had never stopped.

    read       training_state.pt, its SHA-256 and structure checked
    check      against this command: its settings (the learning rate may change, said once), the
               model's config, the fingerprints of the training data, the dev set and the tokenizer,
               the network's tensors
    restore    the weights, the optimizer's moments, each process's random streams, fp16's loss scale
    tidy       a killed save's temporaries removed, metrics.jsonl cut to the state's step, and the best
               dev figure so far read back from best/best.json (best/ goes on from there)

A state that does not belong to the command is refused before anything is written, naming what
differs: a resumed run never mixes two runs' data, settings or dev figures.
"""

from __future__ import annotations

import sys
import warnings

import torch

from .arithmetic import follow_the_run
from .checkpoint import RunDirectory, TrainingState, check_state
from .precision import LossScaler
from .report import best_on_disk


def resume(run, hub_names: list[str]) -> int:
    """Continue the run (loop.py's Run) in the folder: its training state checked against this command (settings,
    config, data, network), put back into the model and the optimizer; a killed save's leftovers
    removed and metrics.jsonl cut to the state's step. Returns that step, the checkpoint on disk
    from here on (a stop says so)."""
    world, folder, model = run.world, run.folder, run.model
    state = read_resumed_state(run, model=model, fingerprint=run.saved_with["data"], dev=run.saved_with["dev"],
                               vocabulary=run.saved_with["vocabulary"],
                               instances=len(run.data.train), hub_names=hub_names)  # fmt: skip
    run.last_state = state if world.is_main else None  # (a run killed while it finished: finished again)
    run.finished = state.finished  # its weights are model.safetensors, as the run ended: nothing to restore
    left = state.step < run.data.steps  # (none: finished, or killed after its last checkpoint, before it finished)
    if not run.finished:
        restore(run, state, steps_left=left)
    folder.saved_step = state.step
    if world.is_main:
        folder.remove_leftovers()  # (a kill while a checkpoint was written, or while the run finished)
        if not run.finished:
            folder.keep_metrics_up_to(state.step)
        run.task.describe_run(folder.path, run.options, run.data, resumed_at=state.step)  # a kill before start()
        metric = run.task.main_metric(run.options)
        if metric is not None:
            run.best, run.best_step = best_so_far(folder, metric)
        said = (f"{folder.path} holds a finished run (step {state.step} of {run.data.steps}): nothing to resume"
                if run.finished else f"resuming {folder.path} from its checkpoint of step {state.step} of "
                f"{run.data.steps} (weights, optimizer, data order and random state as they were)" if left else
                f"{folder.path} holds the checkpoint of its last step (step {state.step} of {run.data.steps}): no "
                "step left to train; finishing the run from it")  # fmt: skip
        print(f"minibert: {said}", file=sys.stderr)
    return state.step


def restore(run, state: TrainingState, steps_left: bool = True) -> None:
    """The state put back: the weights, the optimizer's moments, this process's random streams and
    fp16's loss scale; the arithmetic it was computed with followed (or a difference said, where
    ``steps_left``: with none, nothing is computed that could round differently)."""
    world, model = run.world, run.model
    with torch.no_grad():
        model.load_state_dict(state.weights)
    device = world.device
    run.optimizer.moments = {name: (m.to(device, copy=True), v.to(device, copy=True))
                             for name, (m, v) in state.moments.items()}  # fmt: skip
    torch.set_rng_state(state.rng[world.rank])
    if device.type == "cuda" and len(state.device_rng) == world.size:  # the GPU's dropout stream, as it was
        torch.cuda.set_rng_state(state.device_rng[world.rank], device)
    if run.scaler is not None and state.loss_scale:
        run.scaler = LossScaler(state.loss_scale["scale"], state.loss_scale["good_steps"])
    follow_the_run(model, state.arithmetic, say=world.is_main and steps_left, gemm=run.options.gemm)


def read_resumed_state(run, **checks) -> TrainingState:
    """The run's training state, checked against this command (``checks``: checkpoint.check_state).
    The learning rate may change on resume (a run that diverged continues with a lower one), nothing
    else; a change is said once: the steps after follow it, or, with no step left (a finished run,
    or one killed after its last checkpoint), it changes nothing (the state keeps the run's rate:
    loop.py finishes the state it read)."""
    folder, settings = run.folder, run.saved_with["settings"]
    state = TrainingState.from_file(folder.state_path)
    if "precision" not in state.settings:  # a run made before --precision: its --bf16 said it
        state.settings["precision"] = "bf16" if state.settings.pop("bf16", False) else "fp32"
    if "eval_every" in settings and "eval_every" not in state.settings:  # a run made before it was recorded
        state.settings["eval_every"] = settings["eval_every"]
    same = {name: value for name, value in settings.items() if name != "learning_rate"}
    check_state(state, folder.state_path, settings=same, config=run.saved_with["config"], **checks)
    rate, then = settings["learning_rate"], state.settings.get("learning_rate")
    if then != rate and run.world.is_main:
        said = (f"resuming at step {state.step} with --learning-rate {rate:g} (the run was made with {then!r}): the "
                "steps after follow the new rate's schedule" if state.step < settings["steps"] else
                f"--learning-rate {rate:g} changes nothing: {folder.path} has no step left to train (the run was "
                f"made with {then!r})")  # fmt: skip
        warnings.warn(said, stacklevel=4)
    return state


def best_so_far(folder: RunDirectory, metric: str) -> tuple[float, int | None]:
    """The best dev figure so far and its step: best/'s, as best/best.json records them (none yet:
    -inf, None). Not the best of the metrics lines kept: best/ is not cut back to the checkpoint, and
    an evaluation after it that made best/ stays best/ (the resumed steps repeat it, --eval-every
    being the run's; a later evaluation replaces it only when better), so the run's summary and
    ``--json`` name what best/ holds."""
    best = best_on_disk(folder.path)
    if best is None or best.get(f"dev_{metric}") is None:
        return -float("inf"), None
    return best[f"dev_{metric}"], best["step"]
