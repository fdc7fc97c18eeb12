"""Restarts and learning rates, as the paper chose them: for small datasets it fine-tuned several
times — random restarts (other seeds: another head, another order, other dropout) at each of a few
learning rates — and kept the best on dev. Users' MRPC scores swing by points with the seed alone,
so a table of every trial says more than one run.

    minibert finetune ... --dev dev.tsv --output sweep --seeds 5 --learning-rates 2e-5,3e-5,5e-5

runs every combination, one after another, each as its own run folder ``sweep/lr2e-05-seed12345``
(seeds ``--seed``, ``--seed`` + 1, ...), and writes ``sweep/sweep.json`` and ``sweep/sweep.md``:
each trial's best dev figure (the task's main metric), and per learning rate the mean, the
standard deviation (over the seeds, n − 1) and the best. ``--resume`` continues the trials a kill
interrupted and keeps the finished ones.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

from ...errors import DataError
from ...formats.atomic_files import write_atomically
from .loop import BEST_FOLDER, finetune
from .metrics import main_metric
from .options import FinetuneOptions


def sweep(options: FinetuneOptions, seeds: int, rates: list[float]) -> Path:
    """Every (rate, seed) trial fine-tuned; the table written beside them. Returns the sweep folder."""
    if options.dev is None:
        raise DataError("--seeds and --learning-rates compare trials on dev: give --dev")
    if seeds < 1 or not rates or any(not rate > 0 for rate in rates):
        raise DataError("--seeds must be 1 or more and --learning-rates numbers above 0")
    root = Path(options.output)
    if (root / "sweep.json").exists() and not options.resume:
        raise DataError(f"--output {root} already holds a sweep: pass --resume to continue it, or choose another "
                        "folder")  # fmt: skip
    metric = main_metric(options.glue, options.problem)
    trials = []
    for rate in rates:
        for seed in range(options.seed, options.seed + seeds):
            run = root / f"lr{rate:g}-seed{seed}"
            resume = options.resume and (run / "training_state.pt").exists()
            finetune(dataclasses.replace(options, output=str(run), learning_rate=rate, seed=seed, resume=resume))
            best = json.loads((run / BEST_FOLDER / "best.json").read_text(encoding="utf-8"))[f"dev_{metric}"]
            trials.append({"learning_rate": rate, "seed": seed, "run": run.name, f"dev_{metric}": best})
    summary = [summarize(rate, [t[f"dev_{metric}"] for t in trials if t["learning_rate"] == rate]) for rate in rates]
    write_atomically(root / "sweep.json", (json.dumps({"metric": metric, "trials": trials, "learning_rates": summary},
                                                      indent=2) + "\n").encode("utf-8"))  # fmt: skip
    write_atomically(root / "sweep.md", table(metric, trials, summary).encode("utf-8"))
    return root


def summarize(rate: float, values: list[float]) -> dict:
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"learning_rate": rate, "mean": statistics.fmean(values), "std": spread, "best": max(values)}


def table(metric: str, trials: list[dict], summary: list[dict]) -> str:
    lines = [f"| learning rate | seed | dev {metric} |", "|---|---|---|"]
    lines += [f"| {t['learning_rate']:g} | {t['seed']} | {t[f'dev_{metric}']:.4f} |" for t in trials]
    lines += ["", f"| learning rate | mean | std | best (dev {metric}) |", "|---|---|---|---|"]
    lines += [f"| {s['learning_rate']:g} | {s['mean']:.4f} | {s['std']:.4f} | {s['best']:.4f} |" for s in summary]
    return "\n".join(lines) + "\n"
