"""`minibert plot` streams its input (issue 45, item 7): a million metric lines took 939 MB because
every line was kept as a dict. Now metrics.jsonl is read a line at a time and each curve is kept as
at most POINTS bucketed means, so memory does not grow with the run (measured here with tracemalloc;
the peak RSS of `minibert plot` on a million lines is in the report of this change)."""

from __future__ import annotations

import json
import math
import os
import stat
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from helpers import run_minibert
from minibert.training.run.plot import POINTS, BucketedMeans, iter_metrics


def write_metrics(folder, steps: int, bad=None) -> None:
    with open(folder / "metrics.jsonl", "w") as handle:
        for step in range(1, steps + 1):
            loss = bad if bad is not None and step == steps // 2 else 10.0 / step
            handle.write(json.dumps({"step": step, "loss": loss, "mlm_loss": loss, "nsp_loss": 0.5,
                                     "learning_rate": 1e-4, "gradient_norm": 1.0}) + "\n")  # fmt: skip


def test_bucketed_means_keep_at_most_the_limit_and_each_point_is_its_stretchs_mean():
    values = np.random.default_rng(0).normal(size=100_003)
    means = BucketedMeans(limit=1000)
    for step, value in enumerate(values, 1):
        means.add((step, value))
    points = means.points()
    assert len(points) <= 1000 and means.width == 128
    assert sum(means.counts) == len(values)
    start = 0
    for (step, mean), count in zip(points, means.counts):  # compared with numpy's mean of the same rows
        assert step == pytest.approx(start + (count + 1) / 2)
        assert mean == pytest.approx(values[start : start + count].mean(), abs=1e-12)
        start += count


def test_below_the_limit_every_step_is_its_own_point():
    means = BucketedMeans()
    for step in range(1, POINTS + 1):
        means.add((step, float(step)))
    assert means.width == 1 and means.points()[-1] == (POINTS, POINTS)


def peak_bytes(folder) -> int:
    tracemalloc.start()
    means = BucketedMeans()
    for record in iter_metrics(folder):
        means.add((record["step"], record["loss"], record["mlm_loss"], record["nsp_loss"]))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_reading_a_run_for_its_plot_takes_the_same_memory_for_5_000_and_50_000_steps(tmp_path):
    (tmp_path / "short").mkdir()
    (tmp_path / "long").mkdir()
    write_metrics(tmp_path / "short", 4_000)
    write_metrics(tmp_path / "long", 20_000)
    short, long = peak_bytes(tmp_path / "short"), peak_bytes(tmp_path / "long")
    print(f"peak Python memory: {short / 1e6:.2f} MB for 4,000 lines, {long / 1e6:.2f} MB for 20,000")
    # all 20,000 lines kept as dicts would be ~12 MB; the bucketed means are ~POINTS × 4 floats
    assert long < 2_000_000 and long < 1.5 * short, (short, long)


@pytest.mark.parametrize("bad", [math.nan, math.inf, None])
def test_plot_draws_a_run_with_a_non_finite_step(tmp_path, bad):
    pytest.importorskip("matplotlib")
    write_metrics(tmp_path, 50, bad)
    result = run_minibert("plot", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _finetune_metrics(run, dev_steps: dict[int, float], steps: int = 20, name: str = "dev_accuracy") -> None:
    run.mkdir()
    lines = []
    for step in range(1, steps + 1):
        record = {"step": step, "epoch": step / 10, "loss": 0.7 - step / 100, "learning_rate": 1e-4}
        if step in dev_steps:
            record[name] = dev_steps[step]
        lines.append(json.dumps(record))
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("dev_steps", "name", "limits"), [
    ({20: 0.85}, "dev_accuracy", (0.0, 1.02)),  # one evaluation: a single point, with its marker
    ({10: 0.5, 20: 1.0}, "dev_accuracy", (0.0, 1.02)),
    ({10: -0.2, 20: 0.4}, "dev_matthews", (-1.0, 1.02)),  # a correlation can be below 0
    ({10: 41.0, 20: 63.5}, "dev_f1", (0.0, 102.0)),  # SQuAD's figures are percentages
])  # fmt: skip
def test_a_finetune_plot_reads_at_a_glance(tmp_path, dev_steps, name, limits):
    """The dev series in their own colour with a marker at every evaluation, on an axis of the
    figure's whole range, and one legend outside the plotted area (it hides no point)."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minibert.training.run.plot import draw_run

    _finetune_metrics(tmp_path / "run", dev_steps, name=name)
    figure = draw_run(tmp_path / "run")
    try:
        loss_axis, dev_axis = figure.axes
        (loss_line,), (dev_line,) = loss_axis.get_lines(), dev_axis.get_lines()
        assert loss_line.get_label() == "total loss" and dev_line.get_label() == name.removeprefix("dev_") + " (dev)"
        assert matplotlib.colors.to_hex(loss_line.get_color()) != matplotlib.colors.to_hex(dev_line.get_color())
        assert dev_line.get_marker() == "o" and list(dev_line.get_xdata()) == sorted(dev_steps)
        assert dev_axis.get_ylim() == pytest.approx(limits)
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        legend = loss_axis.get_legend()
        assert [text.get_text() for text in legend.get_texts()] == ["total loss", dev_line.get_label()]
        legend_box, plot_box = legend.get_window_extent(renderer), loss_axis.get_window_extent(renderer)
        assert legend_box.x0 > plot_box.x1, "the legend lies outside the plotted area"
    finally:
        plt.close(figure)
    assert run_minibert("plot", str(tmp_path / "run")).returncode == 0
    assert (tmp_path / "run" / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_pretrain_runs_plot_is_titled_pretrain(tmp_path):
    """A real run's lines, not ones written here: every task's carry an "epoch", which the plot took
    for the mark of fine-tuning, so a pre-training run was titled "minibert finetune" with a fine-tuning
    run's legend. Only pre-training writes the masked-LM and next-sentence losses."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minibert.training.run.plot import draw_run
    from random_instances import random_instances, write_instances

    data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=2))
    result = run_minibert("pretrain", "--data", str(data), "--init", "tests/data/tiny_hub", "--output",
                          str(tmp_path / "run"), "--steps", "3", "--batch-size", "4")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert all("epoch" in json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())
    figure = draw_run(tmp_path / "run")
    try:
        [axis] = figure.axes
        assert axis.get_title() == "minibert pretrain: run"
        assert [line.get_label() for line in axis.get_lines()] == ["total", "masked LM", "next sentence"]
    finally:
        plt.close(figure)


def test_plot_help_names_both_kinds_of_run():
    result = run_minibert("plot", "--help")
    assert "pretrain or finetune run" in result.stdout


def test_an_output_that_cannot_be_written_is_refused_before_drawing(tmp_path, monkeypatch):
    """`plot --output` naming a FIFO, a folder or a file in a missing folder: one line naming it,
    before the run is read and drawn (a FIFO was found only at the write, after the drawing)."""
    pytest.importorskip("matplotlib")
    from minibert.training.run import plot

    def not_drawn(run):
        raise AssertionError("drawn before the output was checked")

    monkeypatch.setattr(plot, "draw_run", not_drawn)
    (tmp_path / "run").mkdir()
    write_metrics(tmp_path / "run", 10)
    os.mkfifo(tmp_path / "fifo.png")
    (tmp_path / "folder.png").mkdir()
    for output, message in [
        (tmp_path / "fifo.png", f"cannot write {tmp_path / 'fifo.png'}: it is a FIFO (named pipe)"),
        (tmp_path / "folder.png", f"cannot write {tmp_path / 'folder.png'}: it is a directory"),
        (tmp_path / "missing" / "loss.png", f"cannot write {tmp_path / 'missing' / 'loss.png'}: the directory "
                                            f"{tmp_path / 'missing'} does not exist"),
    ]:  # fmt: skip
        result = run_minibert("plot", str(tmp_path / "run"), "--output", str(output))
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1 and message in lines[0], result.stderr
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo.png").st_mode)


def _finetune_run(run, task: str) -> None:
    """A fine-tuning run's metrics and finetune.json (its options' task), as finetune writes them."""
    _finetune_metrics(run, {20: 0.5}, name="dev_spearman" if task == "regress" else "dev_accuracy")
    (run / "finetune.json").write_text(json.dumps({"options": {"task": task}, "steps": 20}))


@pytest.mark.parametrize(("task", "label"), [("regress", "loss (mean squared error)"), ("classify", "loss (nats)"),
                                             ("tag", "loss (nats)"), (None, "loss")])  # fmt: skip
def test_the_loss_axis_names_the_tasks_unit(tmp_path, task, label):
    """Issue r19 learner, item 5: --task regress trains on the mean squared error of a score, which the
    axis called "loss (nats)", the unit of the cross-entropies only. Without finetune.json: plain "loss"."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minibert.training.run.plot import draw_run

    if task is None:
        _finetune_metrics(tmp_path / "run", {20: 0.5})
    else:
        _finetune_run(tmp_path / "run", task)
    figure = draw_run(tmp_path / "run")
    try:
        assert figure.axes[0].get_ylabel() == label
    finally:
        plt.close(figure)


def test_every_task_has_its_loss_unit():
    from minibert.training.tasks import LOSS_UNITS, TASKS

    assert LOSS_UNITS.keys() == TASKS.keys()
    assert {task for task, unit in LOSS_UNITS.items() if unit != "nats"} == {"regress"}  # regress.py: F.mse_loss


def test_a_folder_that_is_not_a_run_is_said_for_what_it_is(tmp_path, monkeypatch):
    """Issue r19 learner, item 4: every folder without metrics.jsonl was "not a minibert pretrain run",
    a fine-tuning run's best/ and a missing path too. Now: missing; a run's best/ (plot the run);
    the best/ of a run made without --dev; a sweep's folder (plot a trial); no run at all."""
    monkeypatch.chdir(tmp_path)
    _finetune_run(Path("run"), "classify")
    Path("run/best").mkdir()
    (Path("run/best") / "best.json").write_text("{}")
    _finetune_run(Path("nodev"), "classify")
    Path("sweep").mkdir()
    (Path("sweep") / "sweep.json").write_text("{}")
    for trial in ("lr1e-05-seed1", "lr1e-05-seed2"):
        _finetune_run(Path("sweep") / trial, "classify")
    Path("empty").mkdir()
    Path("file.txt").write_text("x")
    cases = {
        "run/best": "run/best is the best checkpoint of the run in run (its weights, without the metrics); its "
                    "curve is the run's: minibert plot run",
        "nodev/best": "nodev/best does not exist: the run in nodev keeps no best/, because it was made without "
                      "--dev (or has not been evaluated yet); its curve is the run's: minibert plot nodev",
        "sweep": "sweep is a sweep's folder: each trial is a run with its curve, minibert plot sweep/lr1e-05-seed1 "
                 "(its trials: lr1e-05-seed1, lr1e-05-seed2)",
        "no-such-run": "no-such-run does not exist",
        "file.txt": "file.txt is a file, not a directory",
        "empty": "empty/metrics.jsonl does not exist: empty is not the folder of a minibert pretrain or finetune run",
    }  # fmt: skip
    for folder, message in cases.items():
        result = run_minibert("plot", folder)
        assert result.returncode == 1 and result.stderr.strip() == f"minibert: error: {message}", result.stderr
