"""What a training run (``minibert pretrain``, ``minibert finetune``) tells its user while it runs
and when it ends: a progress line, the guard against non-finite numbers, what is on disk when it
is stopped, and a closing summary.

    step 120/300  loss 7.9312  rate 8.6e-05  2,811 tokens/s  3.1 min left      (live, on a terminal)
    minibert: step 120/300  loss 7.9312 ...                                    (every N steps, to a file)
    minibert: pretrain done: 300 steps in 6.9 min, loss 9.51 → 6.73 (masked LM 6.05, next sentence 0.68)
    minibert:   model    run/  (model.safetensors, config.json, vocab.txt; training_state.pt for --resume)
    minibert:   metrics  run/metrics.jsonl
    minibert:   plot     run/loss.png
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import shlex
import sys
import warnings
from collections.abc import Callable
from dataclasses import MISSING, fields
from pathlib import Path

from ...errors import DataError, TrainingDivergedError
from ...loading.devices import describe
from ...loading.head_labels import labels_text
from .plot import METRICS_LINE_BYTES

LINES_WHEN_NOT_A_TERMINAL = 10  # progress lines over a whole run written to a file or a pipe (every ~10%)
SECONDS_BETWEEN_LINES = 30.0  # ... and at least one every 30 seconds

BEST_FOLDER = "best"  # RUN/best/: the checkpoint of the best dev figure


def resume_command(options, processes: int = 1, command: str = "pretrain", **changes) -> str:
    """The ``minibert COMMAND`` that continues this run: the flags given (those that differ from
    their defaults), then ``--resume`` and any ``changes`` (e.g. ``learning_rate=1e-5``)."""
    words = ["minibert"] if processes == 1 else ["torchrun", "--nproc_per_node", str(processes), "-m", "minibert"]
    words.append(command)
    values = {**{field.name: getattr(options, field.name) for field in fields(options)}, "resume": True, **changes}
    for field in fields(options):
        value = values[field.name]
        unset = (field.default, field.metadata.get("unset_means", field.default))  # (precision: None is fp32)
        default = field.default is not MISSING and value in unset and field.name not in changes
        if field.name == "progress" or default:  # (a change is written even when it is the default)
            continue
        if field.name == "do_lower_case":
            words.append("--cased")
            continue
        flag = "--" + field.name.replace("_", "-")
        if value is True:
            words.append(flag)
        elif isinstance(value, list):
            words += [flag, *map(str, value)]
        elif value is not None and value is not False:
            if isinstance(value, tuple):  # finetune's --labels, as it parses them: a,"b, c"
                text = labels_text(value)
            else:
                text = repr(value) if isinstance(value, float) else str(value)  # repr: the exact float
            # (a value that starts with "-", labels -1,1 say, would be read as a flag: glued to its flag)
            words += [f"{flag}={text}"] if text.startswith("-") else [flag, text]
    return shlex.join(words)  # (each word quoted for the shell)


def check_finite(record: dict, peak_rate: float, run: Path, saved_step: int | None, command: str,
                 watched: dict[str, str]) -> None:  # fmt: skip
    """Stop the run (TrainingDivergedError) at a step whose loss or gradient norm is NaN or infinite,
    before the update: the last checkpoint on disk stays the last good one. ``watched``: the
    record's figures to check and their names in the message (each task's: tasks/task.py)."""
    bad = [f"{label} {record[key]}" for key, label in watched.items() if not math.isfinite(record[key])]
    if bad:
        kept = f"{run} keeps the checkpoint of step {saved_step}, unchanged; " if saved_step is not None else ""
        raise TrainingDivergedError(
            f"step {record['step']}: not a finite number ({', '.join(bad)}) at learning rate "
            f"{record['learning_rate']:.3g} (--learning-rate {peak_rate:g}); stopped before updating the weights; "
            f"{kept}to continue with a lower rate: {command}"
        )


def stopped_note(run: Path, saved_step: int | None, steps: int, command: str) -> str:
    """What is on disk when a run is interrupted (Ctrl-C, SIGTERM), and how to continue it."""
    if saved_step is None:
        return "no checkpoint was written"
    return (f"{run} holds the checkpoint of step {saved_step} of {steps} (training_state.pt); "
            f"continue with: {command}")  # fmt: skip


class Progress:
    """The progress line on stderr. On a terminal: one line rewritten at every step. Otherwise (a
    file, a pipe, a job's log): a whole line every ``steps / 10`` steps or 30 seconds, whichever
    comes first, and at the first and last step."""

    def __init__(self, steps: int, done: int, enabled: bool | None):
        self.steps, self.done = steps, done
        self.live = sys.stderr.isatty() if enabled is None else enabled
        self.lines = enabled is None and not self.live
        self.every = max(1, steps // LINES_WHEN_NOT_A_TERMINAL)
        self.first: dict | None = None
        self.last: dict | None = None
        self.printed_at = -float("inf")  # the elapsed seconds of the last whole line

    def show(self, record: dict, elapsed: float) -> None:
        step = record["step"]
        self.first = self.first or record
        self.last = record
        left = elapsed / (step - self.done) * (self.steps - step)
        line = (f"step {step}/{self.steps}  loss {record['loss']:.4f}  rate {record['learning_rate']:.3g}  "
                f"{record['tokens_per_second']:,.0f} tokens/s  {left / 60:.1f} min left")  # fmt: skip
        if self.live:
            print(f"\r{line}   ", end="", file=sys.stderr, flush=True)
        elif self.lines and (step == self.done + 1 or step % self.every == 0 or step == self.steps
                             or elapsed - self.printed_at >= SECONDS_BETWEEN_LINES):  # fmt: skip
            print(f"minibert: {line}", file=sys.stderr, flush=True)
            self.printed_at = elapsed

    def end_line(self) -> None:
        if self.live and self.last is not None:
            print(file=sys.stderr)

    def summary(self, run: Path, elapsed: float, picture: Path | None, command: str,
                detail: Callable[[dict], str], keeps_state: bool = False) -> None:  # fmt: skip
        """Where the model, the metrics and the plot are, and the losses the run went from and to;
        ``detail(last record)``: what the task adds in parentheses (tasks/task.py ``summary``; none
        when empty); ``keeps_state``: the run kept its whole training state (--keep-state)."""
        self.end_line()
        first, last = self.first, self.last
        if last is None:
            print(f"minibert: {command}: no step left to train, {run} has done its {self.steps} steps", file=sys.stderr)
            return
        steps = last["step"] - self.done
        added = f" ({detail(last)})" if detail(last) else ""
        print(f"minibert: {command} done: {steps} steps (to step {last['step']}) in {elapsed / 60:.1f} min, loss "
              f"{first['loss']:.4g} → {last['loss']:.4g}{added}", file=sys.stderr)  # fmt: skip
        state = "training_state.pt, all of it (--keep-state)" if keeps_state else \
            "training_state.pt: the finished run's step and settings"  # fmt: skip
        print(f"minibert:   model    {run}/  (model.safetensors, config.json, vocab.txt; {state})",
              file=sys.stderr)  # fmt: skip
        print(f"minibert:   metrics  {run / 'metrics.jsonl'}", file=sys.stderr)
        plot = picture if picture is not None else f"none (needs matplotlib: pip install 'minibert[plot]'; then " \
            f"minibert plot {run})"  # fmt: skip
        print(f"minibert:   plot     {plot}", file=sys.stderr)


def result_json(run: Path) -> str:
    """``result_of(run)`` as the one JSON line ``--json`` prints."""
    return json.dumps(result_of(run))


def result_of(run: Path) -> dict:
    """What a finished run answers on stdout with ``--json``: its folder, its steps, its last
    metrics line, and (fine-tuning with --dev) the best dev figure, its step and best/'s path."""
    run = Path(run)
    line = last_line(run / "metrics.jsonl") if (run / "metrics.jsonl").exists() else None
    last = json.loads(line) if line is not None else None
    best = best_on_disk(run)
    best = {**best, "folder": str(run / BEST_FOLDER)} if best is not None else None
    return {"output": str(run), "steps": last["step"] if last else 0, "last": last, "best": best}


def last_line(path: Path, limit: int = METRICS_LINE_BYTES, block: int = 1 << 16) -> bytes | None:
    """The last complete line of a file of lines (one that ends in "\\n": a line cut short by a kill,
    and blank lines, are passed over), read backwards from the file's end a ``block`` at a time, so
    that a run of a million steps is not read whole for its last one. None: no complete line. More
    than twice ``limit`` bytes without one (a step's line is at most ``limit``) is a DataError.

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "metrics.jsonl"
    >>> _ = path.write_bytes(b'{"step": 1}\\n{"step": 2}\\n\\n{"st')
    >>> last_line(path, block=4)
    b'{"step": 2}'
    """
    with open(path, "rb") as handle:
        position, tail = handle.seek(0, os.SEEK_END), b""
        while position > 0:
            size = min(block, position)
            position -= size
            handle.seek(position)
            tail = handle.read(size) + tail
            whole = tail[: tail.rfind(b"\n") + 1].rstrip()  # the whole lines read so far, without blank ones
            start = whole.rfind(b"\n") + 1
            if whole and (start > 0 or position == 0):  # (a line's start is a newline, or the file's)
                return whole[start:]
            if len(tail) > 2 * limit:
                raise DataError(f"{path}: no complete line in its last {len(tail):,} bytes (a step's line is at "
                                f"most {limit:,})")  # fmt: skip
    return None


def best_on_disk(run: Path) -> dict | None:
    """RUN/best/best.json: the step and the dev figure of the checkpoint best/ holds, ``{"step": 3,
    "dev_accuracy": 0.8}`` (None: no best/ yet). The one record of the best: the closing summary,
    ``--json`` and a resumed run all read it."""
    path = Path(run) / BEST_FOLDER / "best.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def say_where(run) -> None:
    """One line when the run trains on a GPU: which, how, and whether a resume repeats it bit for bit."""
    device, options = run.world.device, run.options
    if device.type != "cuda":
        return
    exact = ("deterministic algorithms on: a resumed run repeats a never-stopped one" if options.deterministic else
             "torch's faster non-deterministic kernels: a resumed run is right but not bit-identical to a "
             "never-stopped one (--deterministic for that)")  # fmt: skip
    processes = f", {run.world.size} processes (NCCL)" if run.world.size > 1 else ""
    print(f"minibert: training on {describe(device)}{processes}, --precision {options.precision}; {exact}",
          file=sys.stderr)  # fmt: skip


@contextlib.contextmanager
def held_notices():
    """What a run says while it sets up (the model's loading notices, which head it trains, what it
    resumed, warnings), held until the set-up has succeeded, then said; a set-up that fails (a resume
    refused, a full disk at the first checkpoint) says one line, its error, and nothing else."""
    logger, records = logging.getLogger("minibert"), []
    handlers = list(logger.handlers)

    def hold(record: logging.LogRecord) -> bool:
        records.append(record)
        return False

    said = io.StringIO()
    for handler in handlers:
        handler.addFilter(hold)
    try:
        with contextlib.redirect_stderr(said), warnings.catch_warnings(record=True) as caught:
            yield
    finally:
        for handler in handlers:
            handler.removeFilter(hold)
    for record in records:  # (reached only when the set-up succeeded)
        for handler in handlers:
            if record.levelno >= handler.level:
                handler.handle(record)
    sys.stderr.write(said.getvalue())
    for warning in caught:  # (through the filters and whoever shows or records warnings, again)
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


def shown_figure(value: float | None) -> str:
    """A dev figure as the progress line shows it; None is a figure that is undefined (Pearson's or
    Spearman's correlation when the gold scores or the predictions are all equal: 0/0)."""
    return "undefined" if value is None else f"{value:.4g}"


def report_dev(step: int, steps: int, figures: dict[str, float | None], metric: str, best: bool) -> None:
    """One line on stderr per evaluation: every dev figure, the main one first."""
    names = [metric, *(name for name in figures if name != metric)]
    shown = "  ".join(f"dev {name} {shown_figure(figures[name])}" for name in names)
    print(f"minibert: step {step}/{steps}  {shown}{'  (best so far: best/)' if best else ''}", file=sys.stderr)


def report_best(run) -> None:
    """The closing summary's last line: the best dev figure, its step and its folder."""
    metric = run.task.main_metric(run.options)
    if metric is None:
        return
    best = best_on_disk(run.folder.path)  # (what best/ holds, as --json says it)
    if best is None:
        why = (f"dev {metric} was undefined at every evaluation (see metrics.jsonl)" if run.data.dev is not None
               else "no --dev")  # fmt: skip
        print(f"minibert:   best     none: {why}, so no {run.folder.path / BEST_FOLDER}/ (the model is "
              f"{run.folder.path}/)", file=sys.stderr)  # fmt: skip
        return
    print(f"minibert:   best     dev {metric} {best[f'dev_{metric}']:.4g} at step {best['step']}: "
          f"{run.folder.path / BEST_FOLDER}/", file=sys.stderr)  # fmt: skip
