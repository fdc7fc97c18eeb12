"""The loss curve of a run: metrics.jsonl → loss.png (matplotlib, the optional "plot" extra).

The metrics file is read line by line and never held whole: a run of a million steps is drawn from
at most ``POINTS`` points per curve, each the mean of a stretch of consecutive steps
(``BucketedMeans``), so memory stays the same whatever the length of the run.

A pre-training run's lines hold the three losses; a fine-tuning run's the loss alone (no masked-LM
or next-sentence loss: that is how a run is told, since every run's lines carry an "epoch"), and
the dev figures (``dev_accuracy``, ...) where it was evaluated, drawn on a second axis. The loss
axis names its unit from the run's task (finetune.json): nats for the cross-entropies, the mean
squared error for ``--task regress``.

A folder without metrics.jsonl is answered with what it is: missing, a run's best/ (whose run
holds the curve), a sweep's folder (whose trials do), or no run at all. A metrics.jsonl that is not a
regular file (a FIFO, which would wait for a writer forever; a link to ``/dev/zero``, one endless line)
is named by ``stat`` before it is opened, and a line longer than ``METRICS_LINE_BYTES`` is refused
where it is found: a step's line is a few hundred bytes.

What is drawn shows: a point with no finite neighbour (a one-step run, a finite step between diverged
ones) is a line of no length, so the points of a curve of few points, and lone points, get a marker;
a run without one finite loss is "nothing to plot", as a run without steps is. The image is a PNG, and
its name must say so (``png_name_problem``): matplotlib's other formats are not written.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

from ...errors import DataError
from ...formats.atomic_files import refuse_what_is_not_a_file, why_not_a_folder, write_atomically
from ...formats.json_files import parse_json
from ...formats.line_files import name_suffix
from ...loading.local_files import not_a_file
from ..tasks import LOSS_UNITS, RUN_NOTE

LOSSES = ("loss", "mlm_loss", "nsp_loss")
PRE_TRAINING_LOSSES = frozenset(LOSSES[1:])  # what only a pre-training run's lines hold
POINTS = 2000  # at most this many points per curve (a 7-inch figure at 100 dpi is 700 pixels wide)
BEST, SWEEP = "best", "sweep.json"  # a finetune run's best/, a sweep's table
METRICS_LINE_BYTES = 1 << 20  # the longest line read as a step's (a step's line is a few hundred bytes)
FEW_POINTS = 20  # a curve of at most this many finite points has a marker at each


def iter_metrics(run: str | Path) -> Iterator[dict]:
    """The lines of ``RUN/metrics.jsonl`` (one per step), read one at a time. A last line without
    its newline was being written when the run was killed: it is left out. Any other line that is
    not a step's JSON object (an integer "step", numbers for the losses: NaN and Infinity as
    written for a diverged step, null as older runs wrote them), or longer than ``METRICS_LINE_BYTES``,
    is a DataError naming the file and line; so is a metrics file that is not a regular file, found
    by ``stat`` before it is opened (a FIFO would wait for a writer, /dev/zero never end a line)."""
    path = Path(run) / "metrics.jsonl"
    kind = not_a_file(path)  # (loading/local_files.py: stat alone, as Google's folders are checked)
    if kind:
        raise DataError(f"{path} is {kind}, not a run's metrics file (a regular file)")
    try:
        handle = open(path, "rb")
    except (FileNotFoundError, NotADirectoryError):
        raise DataError(not_a_run(Path(run))) from None
    with handle:
        lines = iter(lambda: handle.readline(METRICS_LINE_BYTES + 1), b"")  # (never more than the limit at once)
        for number, raw in enumerate(lines, 1):
            if len(raw) > METRICS_LINE_BYTES and not raw.endswith(b"\n"):
                raise DataError(f"{path}, line {number}: longer than {METRICS_LINE_BYTES:,} bytes, which no step's "
                                "line is")  # fmt: skip
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as error:
                if not raw.endswith(b"\n"):  # the last line, cut short by a kill
                    continue
                problem = "not UTF-8" if isinstance(error, UnicodeDecodeError) else "not valid JSON"
                raise DataError(f"{path}, line {number}: {problem}") from None
            numbers = isinstance(record, dict) and all(
                record.get(key) is None or (isinstance(record[key], (int, float)) and not isinstance(record[key], bool))
                for key in LOSSES
            )
            if not numbers or not isinstance(record.get("step"), int) or isinstance(record["step"], bool):
                raise DataError(f'{path}, line {number}: a step\'s line holds an integer "step" and the numbers '
                                f"{', '.join(LOSSES)}")  # fmt: skip
            yield record


def not_a_run(run: Path) -> str:
    """What to say of ``run``, which holds no metrics.jsonl: that it does not exist; that it is a
    run's best/ (the curve is the run's: plot the folder above), or the best/ a run made without
    --dev does not have; that it is a sweep's folder (plot a trial); else that it is no run's folder."""
    reason = why_not_a_folder(run)
    above = run.parent
    is_best = run.name == BEST and (above / "metrics.jsonl").is_file()
    if reason and is_best:
        return (f"{run} {reason}: the run in {above} keeps no best/, because it was made without --dev (or has not "
                f"been evaluated yet); its curve is the run's: minibert plot {above}")  # fmt: skip
    if reason:
        return f"{run} {reason}"
    if is_best:
        return (f"{run} is the best checkpoint of the run in {above} (its weights, without the metrics); its curve "
                f"is the run's: minibert plot {above}")  # fmt: skip
    if (run / SWEEP).is_file():
        trials = sorted(path.name for path in run.iterdir() if (path / "metrics.jsonl").is_file())
        shown = ", ".join(trials[:3]) + (f", ... ({len(trials)} in all)" if len(trials) > 3 else "")
        if trials:
            return (f"{run} is a sweep's folder: each trial is a run with its curve, minibert plot "
                    f"{run / trials[0]} (its trials: {shown})")  # fmt: skip
        return f"{run} is a sweep's folder, whose trials have no metrics.jsonl yet"
    return (f"{run / 'metrics.jsonl'} does not exist: {run} is not the folder of a minibert pretrain or "
            "finetune run")  # fmt: skip


def loss_label(run: str | Path, pre_training: bool) -> str:
    """The loss axis's name, with the unit of the run's task (``LOSS_UNITS``): "loss (nats)" for the
    cross-entropies, "loss (mean squared error)" for regress; a fine-tuning run whose finetune.json
    does not say its task, plain "loss"."""
    task = "pretraining" if pre_training else None
    if task is None:
        try:
            task = parse_json((Path(run) / RUN_NOTE).read_bytes())["options"]["task"]
        except (OSError, ValueError, KeyError, TypeError):
            task = None
    unit = LOSS_UNITS.get(task) if isinstance(task, str) else None
    return f"loss ({unit})" if unit else "loss"


def read_metrics(run: str | Path) -> list[dict]:
    """Every line of ``RUN/metrics.jsonl`` as a list (``iter_metrics`` reads them one at a time)."""
    return list(iter_metrics(run))


class BucketedMeans:
    """Any number of rows of numbers kept as at most ``limit`` points: each point is the mean of
    ``width`` consecutive rows; when the points would exceed the limit, neighbours are merged in
    pairs and the width doubles. Below the limit every row is its own point (exact).

    >>> means = BucketedMeans(limit=4)
    >>> for step in range(1, 11): means.add((step, 10.0 * step))
    >>> means.width, means.points()
    (4, [(2.5, 25.0), (6.5, 65.0), (9.5, 95.0)])
    """

    def __init__(self, limit: int = POINTS):
        self.limit, self.width = limit, 1
        self.sums: list[list[float]] = []  # per point, the sum of each column
        self.counts: list[int] = []

    def add(self, row: tuple[float, ...]) -> None:
        if self.counts and self.counts[-1] < self.width:
            self.sums[-1] = [total + value for total, value in zip(self.sums[-1], row)]
            self.counts[-1] += 1
            return
        self.sums.append(list(row))
        self.counts.append(1)
        if len(self.counts) > self.limit:
            self.sums = [[a + b for a, b in zip(*self.sums[i : i + 2])] if i + 1 < len(self.sums) else self.sums[i]
                         for i in range(0, len(self.sums), 2)]  # fmt: skip
            self.counts = [sum(self.counts[i : i + 2]) for i in range(0, len(self.counts), 2)]
            self.width *= 2

    def points(self) -> list[tuple[float, ...]]:
        return [tuple(total / count for total in sums) for sums, count in zip(self.sums, self.counts)]


def png_name_problem(output: str | Path) -> str | None:
    """Why ``output`` cannot name the plot, or None: the image is a PNG, and a name ending in another
    suffix (.svg, .pdf, .jpg) or none would hold PNG bytes that its viewers reject as corrupt.

    >>> png_name_problem("loss.PNG") is None, png_name_problem("curve.svg")
    (True, 'curve.svg does not end in .png: the plot is written as a PNG image')
    """
    if name_suffix(output).lower() == ".png":
        return None
    return f"{Path(output).name or output} does not end in .png: the plot is written as a PNG image"


def plot_run(run: str | Path, output: str | Path | None = None) -> Path:
    """Draw the run (``draw_run``) and write it atomically to ``output`` (default ``RUN/loss.png``).
    Raises ImportError without matplotlib. An output that cannot be written (a FIFO, a folder, a
    missing folder) is refused before the drawing; a name that does not end in .png is a ValueError
    (``png_name_problem``; the command's usage error)."""
    if output is not None and png_name_problem(output):
        raise ValueError(f"output {png_name_problem(output)}")
    if output is not None:  # (the run's own folder is the drawing's to check)
        reason = why_not_a_folder(Path(output).parent)
        if reason:
            raise FileNotFoundError(f"cannot write {output}: the directory {Path(output).parent} {reason}")
    output = Path(output) if output is not None else Path(run) / "loss.png"
    refuse_what_is_not_a_file(output)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = draw_run(run)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")  # (tight: the legend outside is kept)
    plt.close(figure)
    write_atomically(output, buffer.getvalue())
    return output


LOSS_COLOURS = ("C0", "C1", "C2")  # total, masked LM, next sentence
DEV_COLOURS = ("C3", "C4", "C5", "C6", "C8", "C9")  # the dev figures: never a loss's colour


def draw_run(run: str | Path):
    """The figure: the total, masked-LM and next-sentence losses against the step (left axis), and
    a fine-tuning run's dev figures, each in its own colour with a marker at every evaluation, on
    a right axis from 0 (or -1, for a correlation below 0) to 1 (100 for SQuAD's percentages); one
    legend for both, outside the plotted area, so that it hides no point."""
    import matplotlib.pyplot as plt

    means, dev, pre_training = BucketedMeans(), {}, False
    for record in iter_metrics(run):  # a missing number (null) drawn as a gap, as NaN is
        means.add((record["step"], *(math.nan if record.get(key) is None else record[key] for key in LOSSES)))
        pre_training = pre_training or PRE_TRAINING_LOSSES <= record.keys()
        for key, value in record.items():  # a fine-tuning run's dev figures, where they were measured
            if key.startswith("dev_") and isinstance(value, (int, float)) and not isinstance(value, bool):
                dev.setdefault(key, BucketedMeans()).add((record["step"], value))
    if not means.counts:
        raise DataError(f"{Path(run) / 'metrics.jsonl'} holds no steps yet: nothing to plot")
    columns = list(zip(*means.points()))  # step, loss, mlm_loss, nsp_loss
    if not any(math.isfinite(value) for values in columns[1:] for value in values):
        raise DataError(f"{Path(run) / 'metrics.jsonl'} holds {sum(means.counts):,} step(s) and no finite loss (each "
                        "NaN, infinite or null): nothing to plot")  # fmt: skip
    fine_tuning = not pre_training or bool(dev)
    figure, axis = plt.subplots(figsize=(7, 4), dpi=100)
    for values, label, colour in zip(columns[1:], ("total", "masked LM", "next sentence"), LOSS_COLOURS):
        if any(math.isfinite(value) for value in values):  # fine-tuning has no masked-LM or NSP loss
            marks = marked_points(values)
            axis.plot(columns[0], values, label=f"{label} loss" if fine_tuning else label, linewidth=1, color=colour,
                      **({"marker": "o", "markersize": 3, "markevery": marks} if marks else {}))  # fmt: skip
    handles, labels = axis.get_legend_handles_labels()
    if dev:
        right = axis.twinx()
        values = [value for points in dev.values() for _, value in points.points()]
        for (key, points), colour in zip(sorted(dev.items()), DEV_COLOURS * len(dev)):
            right.plot(*zip(*points.points()), marker="o", markersize=5, linestyle="--", color=colour,
                       label=key.removeprefix("dev_") + " (dev)")  # fmt: skip
        top = 100.0 if max(values) > 1 else 1.0  # SQuAD's exact match and F1 are percentages
        right.set_ylim(-top if min(values) < 0 else 0.0, top * 1.02)  # (a point at the top stays whole)
        right.set_ylabel("dev figure")
        more_handles, more_labels = right.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    axis.set_xlabel("step" if means.width == 1 else f"step (each point the mean of {means.width} steps)")
    axis.set_ylabel(loss_label(run, not fine_tuning))
    name = Path(os.path.abspath(run)).name or os.path.abspath(run)  # ("." and ".." by the folder they are)
    axis.set_title(f"minibert {'finetune' if fine_tuning else 'pretrain'}: {name}")
    axis.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.13 if dev else 1.02, 1.0), borderaxespad=0)
    axis.grid(alpha=0.3)
    return figure


def marked_points(values: tuple[float, ...]) -> list[int]:
    """The points of a loss curve to mark: every finite one when there are at most ``FEW_POINTS``,
    else those with no finite neighbour. A line joins neighbouring points only, so a point alone
    (one step, or a finite step between NaN ones) would otherwise not be drawn at all.

    >>> nan = float("nan")
    >>> marked_points((1.0,)), marked_points((nan, 2.0, nan) + (1.0,) * 30)[:2]
    ([0], [1])
    """
    finite = [math.isfinite(value) for value in values]
    if sum(finite) <= FEW_POINTS:
        return [index for index, good in enumerate(finite) if good]
    return [index for index, good in enumerate(finite) if good and not (index > 0 and finite[index - 1])
            and not (index + 1 < len(finite) and finite[index + 1])]  # fmt: skip
