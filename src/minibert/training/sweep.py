"""Restarts and learning rates, as the paper chose them: for small datasets it fine-tuned several
times — random restarts (other seeds: another head, another order, other dropout) at each of a few
learning rates — and kept the best on dev. Users' MRPC scores swing by points with the seed alone,
so a table of every trial says more than one run.

    minibert finetune ... --dev dev.tsv --output sweep --seeds 5 --learning-rates 2e-5,3e-5,5e-5

runs every combination, one after another, each as its own run folder ``sweep/lr2e-05-seed12345``
(seeds ``--seed``, ``--seed`` + 1, ...), and writes ``sweep/sweep.json`` and ``sweep/sweep.md``:
each trial's best dev figure (the task's main metric), per learning rate the mean, the standard
deviation (over the seeds, n − 1) and the best, each over the trials with a figure (n: a diverged
trial has none), and the best trial. A figure that is undefined is never made a number: the standard
deviation of one figure is null in sweep.json, "n/a (1 trial)" in the table (statistics.stdev raises,
numpy's ddof=1 gives NaN). ``--resume`` continues the trials a kill interrupted and keeps the finished
ones.

The sweep folder is locked as a run folder is (training/run/lock.py: a second sweep into it is
refused), Ctrl-C or SIGTERM says how many trials are done and the command that continues the
sweep, and a trial whose loss or gradient norm stops being finite (a rate too high) is a result,
not the end of the sweep: the table says "diverged" for it and the other trials go on.

``--ray [ADDRESS]`` runs the same trials as Ray Tune trials, several at once, on a local Ray or a
cluster (ray_trials.py); the folders, the table and the figures are these.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import statistics
import sys
from pathlib import Path

from ..errors import ClusterError, DataError, FlagConflictError, TrainingDivergedError
from ..formats.atomic_files import write_atomically
from .options import FinetuneOptions
from .run.lock import run_folder_lock
from .run.loop import finetune
from .run.report import best_on_disk, resume_command
from .tasks import task_named


def sweep(options: FinetuneOptions, seeds: int, rates: list[float], ray_address: str | None = None) -> Path:
    """Every (rate, seed) trial fine-tuned; the table written beside them. Returns the sweep folder.
    ``ray_address``: None, one trial after another here; else each a Ray Tune trial (ray_trials.py),
    on a local Ray ("") or the cluster at that address."""
    if options.dev is None:
        raise DataError("--seeds and --learning-rates compare trials on dev: give --dev")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise DataError(f"--seeds must be a whole number of at least 1, got {seeds!r}")
    if not rates:
        raise DataError("--learning-rates names no rate: give one or more, joined by commas")
    if "learning_rate" in options.given() and list(rates) != [options.learning_rate]:  # (--seed is the first seed)
        raise FlagConflictError(f"--learning-rate {options.learning_rate:g} and --learning-rates "
                                f"{','.join(f'{rate:g}' for rate in rates)}: a sweep trains at --learning-rates' rates "
                                "alone: give one of the two")  # fmt: skip
    plan = [(rate, seed) for rate in rates for seed in range(options.seed, options.seed + seeds)]
    check_the_plan(options, plan)
    root = Path(options.output)
    if (root / "sweep.json").exists() and not options.resume:
        raise DataError(f"--output {root} already holds a sweep: pass --resume to continue it, or choose another "
                        "folder")  # fmt: skip
    metric = task_named(options.task).main_metric(options)
    trials = []
    try:
        with run_folder_lock(root):
            if ray_address is None:
                for rate, seed in plan:
                    trials.append(run_trial(options, root / trial_name(rate, seed), rate, seed, metric))
            else:
                from .ray_trials import run_on_ray  # Ray: imported for --ray alone

                runs = [(root / trial_name(rate, seed), rate, seed) for rate, seed in plan]
                run_on_ray(options, runs, metric, ray_address, trials, run_trial)
    except BaseException as stop:  # Ctrl-C, SIGTERM, a trial's lost Ray worker: what is done, and how to continue
        lost = getattr(stop, "trial_lost", False)  # (ray_trials.py: not the trial's fault, run again it goes on)
        if not isinstance(stop, Exception) or lost:
            ray = [] if ray_address is None else ["--ray", *([ray_address] if ray_address else [])]
            again = shlex.join(["--seeds", str(seeds), "--learning-rates", ",".join(map(repr, rates)), *ray])
            on_disk = (f"{root} holds {len(trials)} finished trial(s) of {seeds * len(rates)}; continue the sweep "
                       f"with: {resume_command(options, 1, 'finetune')} {again}")  # fmt: skip
            if lost:
                raise ClusterError(f"{stop}; {on_disk}") from None
            stop.on_disk = on_disk
        raise
    summary = [summarize(rate, [t[f"dev_{metric}"] for t in trials if t["learning_rate"] == rate]) for rate in rates]
    scored = [trial for trial in trials if trial[f"dev_{metric}"] is not None]
    best = max(scored, key=lambda trial: trial[f"dev_{metric}"]) if scored else None  # (a tie: the first trial)
    record = {"metric": metric, "trials": trials, "learning_rates": summary, "best": best}
    write_atomically(root / "sweep.json", (json.dumps(record, indent=2) + "\n").encode("utf-8"))
    write_atomically(root / "sweep.md", table(metric, trials, summary).encode("utf-8"))
    return root


def sweep_json(root: Path) -> str:
    """What ``--json`` prints for a sweep: sweep.json's record (the metric, every trial, the summary
    per learning rate, the best trial) and the sweep's folder, as one line of JSON."""
    return json.dumps({"output": str(root), **json.loads((Path(root) / "sweep.json").read_text(encoding="utf-8"))})


# What a trial holds on disk, in copies of the model's float32 weights: while it runs, the model, best/,
# and the training state's weights and two optimizer moments; once it is finished, the model and best/
# at most (the state keeps only its step and settings, and best/ shares the model's file when the last
# step was the best: checkpoint.py RunDirectory.finish), unless --keep-state.
COPIES_A_RUNNING_TRIAL_HOLDS = 5
COPIES_A_FINISHED_TRIAL_KEEPS = 2


def check_the_plan(options: FinetuneOptions, plan: list[tuple[float, int]]) -> None:
    """Every trial's settings checked before the first one runs (a rate of inf, a seed past the
    limit, two rates that are one trial folder), and the disk the trials will fill against the
    space free where they go."""
    names = [trial_name(rate, seed) for rate, seed in plan]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:  # (the same rate twice, or two that print alike: 1e-05 and 1.0000001e-05)
        same = [repr(rate) for (rate, _), name in zip(plan, names) if name == twice]
        raise DataError(f"--learning-rates gives {' and '.join(same)}: one trial folder ({twice}); give each rate "
                        "once")  # fmt: skip
    for rate, seed in plan:
        try:
            dataclasses.replace(options, learning_rate=rate, seed=seed, output=options.output).check(processes=1)
        except DataError as error:
            raise DataError(f"the sweep's trial (learning rate {rate!r}, seed {seed}): {error}") from None
    import shutil

    kept = COPIES_A_RUNNING_TRIAL_HOLDS if options.keep_state else COPIES_A_FINISHED_TRIAL_KEEPS
    copies = (len(plan) - 1) * kept + COPIES_A_RUNNING_TRIAL_HOLDS  # the finished trials, and the one running
    need = copies * _float32_bytes(options.model)
    place = Path(options.output).resolve()
    while not place.exists():
        place = place.parent
    free = shutil.disk_usage(place).free
    if need > free and not options.resume:
        raise DataError(f"a sweep of {len(plan)} trials needs about {need / 1e9:.1f} GB ({copies} copies of the "
                        f"model's weights: {kept} for each finished trial, {COPIES_A_RUNNING_TRIAL_HOLDS} for the one "
                        f"running, with its optimizer state); {place} has {free / 1e9:.1f} GB free: fewer --seeds "
                        "or --learning-rates, or another --output")  # fmt: skip


def _float32_bytes(model: str) -> int:
    """The model's weights in float32, from its checkpoint's header (0 when it cannot be told here)."""
    from ..errors import MinibertError
    from ..loading.checkpoint_files import find_checkpoint
    from ..loading.safetensors import safetensors_shapes

    try:
        _, weights = find_checkpoint(model)
        if weights.suffix == ".safetensors":
            return 4 * sum(tensor.numel() for tensor in safetensors_shapes(weights).values())
        return weights.stat().st_size
    except (MinibertError, OSError):
        return 0  # (the trial itself then says what is wrong with the model)


def trial_name(rate: float, seed: int) -> str:
    """A trial's run folder in the sweep folder: ``lr2e-05-seed12345``."""
    return f"lr{rate:g}-seed{seed}"


def run_trial(options: FinetuneOptions, run: Path, rate: float, seed: int, metric: str) -> dict:
    """One trial fine-tuned (or continued); its best dev figure, or None and why when it diverged."""
    resume = options.resume and (run / "training_state.pt").exists()
    trial = {"learning_rate": rate, "seed": seed, "run": run.name}
    try:
        finetune(dataclasses.replace(options, output=str(run), learning_rate=rate, seed=seed, resume=resume))
    except TrainingDivergedError as error:
        print(f"minibert: sweep: trial {run.name} diverged: {str(error).split('; ')[0]}", file=sys.stderr)
        return {**trial, f"dev_{metric}": None, "diverged": str(error)}
    best = best_on_disk(run)
    if best is None:  # the figure was undefined at every evaluation
        return {**trial, f"dev_{metric}": None, "undefined": True}
    return {**trial, f"dev_{metric}": best[f"dev_{metric}"]}


def summarize(rate: float, values: list[float | None]) -> dict:
    """Mean, sample standard deviation (n − 1) and best over the ``n`` trials with a figure, of the
    ``trials`` at this rate (None: each diverged, or its figure was undefined at every evaluation).
    One figure has no standard deviation: None, as statistics.stdev refuses it, never 0.0 (which
    reads as "the seeds agree").

    >>> summarize(1e-3, [0.8, None, None])
    {'learning_rate': 0.001, 'n': 1, 'trials': 3, 'mean': 0.8, 'std': None, 'best': 0.8}
    """
    figures = [value for value in values if value is not None]
    summary = {"learning_rate": rate, "n": len(figures), "trials": len(values)}
    if not figures:
        return {**summary, "mean": None, "std": None, "best": None}
    spread = statistics.stdev(figures) if len(figures) > 1 else None
    return {**summary, "mean": statistics.fmean(figures), "std": spread, "best": max(figures)}


def table(metric: str, trials: list[dict], summary: list[dict]) -> str:
    lines = [f"| learning rate | seed | dev {metric} |", "|---|---|---|"]
    lines += [f"| {t['learning_rate']:g} | {t['seed']} | {_figure(t[f'dev_{metric}'], [t])} |" for t in trials]
    lines += ["", f"| learning rate | n | mean | std | best (dev {metric}) |", "|---|---|---|---|---|"]
    for s in summary:
        of_rate = [t for t in trials if t["learning_rate"] == s["learning_rate"]]
        spread = "n/a (1 trial)" if s["n"] == 1 else _figure(s["std"], of_rate)
        lines.append(f"| {s['learning_rate']:g} | {_count(s, of_rate)} | {_figure(s['mean'], of_rate)} | {spread} | "
                     f"{_figure(s['best'], of_rate)} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def _count(summary: dict, trials: list[dict]) -> str:
    """The n column: the trials a rate's figures are over, and of how many, when some have none
    ("1 of 3 (2 diverged)")."""
    if summary["n"] == summary["trials"]:
        return str(summary["n"])
    diverged = sum("diverged" in trial for trial in trials)
    undefined = summary["trials"] - summary["n"] - diverged  # (a trial without a figure is one or the other)
    why = ", ".join(f"{count} {word}" for word, count in (("diverged", diverged), ("undefined", undefined)) if count)
    return f"{summary['n']} of {summary['trials']} ({why})"


def _figure(value: float | None, trials: list[dict]) -> str:
    """A figure of the table; None says why the trials it sums up have none."""
    if value is not None:
        return f"{value:.4f}"
    return " or ".join(sorted({"diverged" if "diverged" in trial else "undefined" for trial in trials}))
