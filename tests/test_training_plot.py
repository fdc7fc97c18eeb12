"""`minibert plot` streams its input (issue 45, item 7): a million metric lines took 939 MB because
every line was kept as a dict. Now metrics.jsonl is read a line at a time and each curve is kept as
at most POINTS bucketed means, so memory does not grow with the run (measured here with tracemalloc;
the peak RSS of `minibert plot` on a million lines is in the report of this change)."""

from __future__ import annotations

import json
import math
import tracemalloc

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
