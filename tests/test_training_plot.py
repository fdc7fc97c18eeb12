"""`minibert plot` streams its input (issue 45, item 7): a million metric lines took 939 MB because
every line was kept as a dict. Now metrics.jsonl is read a line at a time and each curve is kept as
at most POINTS bucketed means, so memory does not grow with the run (measured here with tracemalloc;
the peak RSS of `minibert plot` on a million lines is in the report of this change)."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from helpers import child_environment, run_minibert
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


def _plot_in_a_child(run, limit_bytes: int = 2 << 30) -> subprocess.CompletedProcess:
    """`minibert plot RUN` in its own process, under a memory limit and a timeout: a plot that waits
    on a FIFO or reads /dev/zero without end fails the test instead of hanging or filling the machine."""
    import resource

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-m", "minibert", "plot", str(run)], env=child_environment(),
                          capture_output=True, text=True, timeout=60, preexec_fn=limited)  # fmt: skip


def test_a_metrics_file_that_is_not_a_regular_file_is_named_before_it_is_opened(tmp_path):
    """Issue r21 reports, item 4: a FIFO metrics.jsonl hung `minibert plot` (open waits for a writer),
    a link to /dev/zero ran out of memory (one endless line). Now stat names them, as loading/
    google_folder.py names Google's files; a regular file's line past the limit is refused."""
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "metrics.jsonl")
    (tmp_path / "zero").mkdir()
    os.symlink("/dev/zero", tmp_path / "zero" / "metrics.jsonl")
    for run, kind in [("fifo", "a FIFO (named pipe)"), ("zero", "a link to /dev/zero, a character device")]:
        result = _plot_in_a_child(tmp_path / run)
        assert result.returncode == 1 and result.stderr.strip().splitlines() == [
            f"minibert: error: {tmp_path / run / 'metrics.jsonl'} is {kind}, not a run's metrics file (a regular "
            "file)"], result.stderr  # fmt: skip
    from minibert.training.run.plot import METRICS_LINE_BYTES

    (tmp_path / "long").mkdir()
    step = json.dumps({"step": 1, "loss": 1.0}) + "\n"
    (tmp_path / "long" / "metrics.jsonl").write_text(step + " " * (METRICS_LINE_BYTES + 1) + "\n" + step)
    result = run_minibert("plot", str(tmp_path / "long"))
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        f"minibert: error: {tmp_path / 'long' / 'metrics.jsonl'}, line 2: longer than {METRICS_LINE_BYTES:,} bytes, "
        "which no step's line is"], result.stderr  # fmt: skip


def _pixels_of(figure, colour: str, box) -> int:
    """How many of the drawn figure's pixels inside ``box`` (display coordinates) are ``colour``."""
    import matplotlib

    figure.canvas.draw()
    image = np.asarray(figure.canvas.buffer_rgba())[..., :3].astype(int)
    height = image.shape[0]
    rows, columns = slice(int(height - box.y1), int(height - box.y0)), slice(int(box.x0), int(box.x1))
    wanted = np.array(matplotlib.colors.to_rgb(colour)) * 255
    return int((np.abs(image[rows, columns] - wanted).max(axis=-1) < 40).sum())


@pytest.mark.parametrize(("losses", "lone"), [
    ([0.7], 1),  # a one-step run (the bundled recipes' samples make one step)
    ([0.7] * 20 + [math.nan] * 9 + [0.5] + [math.nan] * 9 + [0.4] * 21, 30),  # a finite step between diverged ones
])  # fmt: skip
def test_a_lone_finite_loss_is_drawn(tmp_path, losses, lone):
    """Issue r21 reports, item 3: the loss was a line without markers, so a point with no finite
    neighbour was not drawn at all (empty axes, a legend entry, exit 0). Its pixels are counted here."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import Bbox

    from minibert.training.run.plot import draw_run

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text("".join(
        json.dumps({"step": step, "epoch": step / 10, "loss": loss}) + "\n" for step, loss in enumerate(losses, 1)))
    figure = draw_run(tmp_path / "run")
    try:
        [axis] = figure.axes
        figure.canvas.draw()  # (the limits, and so where a step lands, are settled by the drawing)
        x, y = axis.transData.transform((lone, losses[lone - 1]))
        assert _pixels_of(figure, "C0", Bbox.from_extents(x - 4, y - 4, x + 4, y + 4)) > 0, "the lone step is not drawn"
    finally:
        plt.close(figure)


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "null"])
def test_a_run_without_a_finite_loss_is_nothing_to_plot(tmp_path, bad):
    """Issue r21 reports, item 3: a run whose every loss is NaN drew empty axes with an empty legend
    and exited 0; it is now one line, exit 1, as a run without steps is."""
    pytest.importorskip("matplotlib")
    (tmp_path / "metrics.jsonl").write_text("".join(f'{{"step": {step}, "loss": {bad}}}\n' for step in (1, 2)))
    result = run_minibert("plot", str(tmp_path))
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        f"minibert: error: {tmp_path / 'metrics.jsonl'} holds 2 step(s) and no finite loss (each NaN, infinite or "
        "null): nothing to plot"], result.stderr  # fmt: skip
    assert not (tmp_path / "loss.png").exists()


def test_plot_writes_png_under_a_png_name_only(tmp_path):
    """Issue r21 reports, item 5: --output curve.svg (or .pdf, .jpg) held PNG bytes, which viewers and
    LaTeX reject. Another suffix is a usage error, before anything is read or written."""
    pytest.importorskip("matplotlib")
    from minibert.training.run.plot import plot_run

    (tmp_path / "run").mkdir()
    write_metrics(tmp_path / "run", 10)
    for name in ("curve.svg", "curve.pdf", "curve.jpg", "curve"):
        result = run_minibert("plot", str(tmp_path / "run"), "--output", str(tmp_path / name))
        assert result.returncode == 2 and result.stderr.strip().splitlines()[0].startswith(
            f"minibert: error: --output {name} does not end in .png: the plot is written as a PNG image"), result.stderr
        assert not (tmp_path / name).exists()
        with pytest.raises(ValueError, match="does not end in .png"):
            plot_run(tmp_path / "run", tmp_path / name)
    assert run_minibert("plot", str(tmp_path / "run"), "--output", str(tmp_path / "curve.PNG")).returncode == 0
    assert (tmp_path / "curve.PNG").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_plotted_from_inside_is_titled_by_its_folder(tmp_path, monkeypatch):
    """Issue r21 reports, item 6: `minibert plot .` titled the figure "minibert finetune: " (the name
    of "." is empty); "." and ".." are named by the folder they are."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minibert.training.run.plot import draw_run

    _finetune_metrics(tmp_path / "run", {20: 0.5})
    (tmp_path / "run" / "inside").mkdir()
    for where, name in [(tmp_path / "run", "."), (tmp_path / "run" / "inside", "..")]:
        monkeypatch.chdir(where)
        figure = draw_run(name)
        try:
            assert figure.axes[0].get_title() == "minibert finetune: run"
        finally:
            plt.close(figure)
