"""Split batches give the whole batch's step: two processes under torchrun equal one process with
the same global batch, and --accumulate K equals one big batch. The instances hold 1 to 4 masked
positions each, so the halves of a batch have different Σ weights: a per-piece MLM denominator
(the bug REFERENCE.md describes) would fail these tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file

from helpers import child_environment, run_minibert
from random_instances import random_instances, write_instances

TINY = "tests/data/tiny_hub"
BATCH, STEPS = 8, 4


def flags(data: Path, output: Path, *extra: str) -> list[str]:
    return ["pretrain", "--data", str(data), "--init", TINY, "--output", str(output), "--steps", str(STEPS),
            "--batch-size", str(BATCH), "--warmup-steps", "1", "--learning-rate", "1e-3", "--dropout", "0",
            *extra]  # fmt: skip


@pytest.fixture(scope="module")
def uneven(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("parallel")
    instances = random_instances(BATCH * STEPS, vocab_size=111, seq_len=16, predictions=4, seed=11)
    weights = np.array([instance["masked_lm_weights"].sum() for instance in instances]).reshape(STEPS, 2, -1).sum(-1)
    assert (weights[:, 0] != weights[:, 1]).all(), "each batch's halves must differ in masked positions"
    return write_instances(folder / "data.tfrecord", instances)


@pytest.fixture(scope="module")
def one_process(uneven, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("one") / "run"
    result = run_minibert(*flags(uneven, run))
    assert result.returncode == 0, result.stderr
    return run


def relative_difference(run: Path, reference: Path) -> tuple[float, str]:
    ours, expected = load_file(run / "model.safetensors"), load_file(reference / "model.safetensors")
    return max(((ours[name] - expected[name]).abs().max().item() / expected[name].abs().max().item(), name)
               for name in expected)  # fmt: skip


def test_two_processes_under_torchrun_equal_one_process(uneven, one_process, tmp_path):
    torchrun = shutil.which("torchrun") or pytest.skip("torchrun is not installed")
    run = tmp_path / "run"
    environment = child_environment(OMP_NUM_THREADS="1")
    result = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", "-m", "minibert", *flags(uneven, run)],
                            env=environment, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    worst, name = relative_difference(run, one_process)
    print(f"\ntorchrun 2 processes vs 1 process: worst max|Δ|/max|w| {worst:.2e} ({name})")
    assert worst <= 1e-5  # the bound: sums over the batch in another order, through 4 Adam steps
    assert (run / "metrics.jsonl").read_text().count("\n") == STEPS  # rank 0 alone writes metrics


def test_accumulated_micro_batches_equal_one_big_batch(uneven, one_process, tmp_path):
    run = tmp_path / "run"
    result = run_minibert(*flags(uneven, run, "--accumulate", "4"))
    assert result.returncode == 0, result.stderr
    worst, name = relative_difference(run, one_process)
    print(f"\n--accumulate 4 vs one batch: worst max|Δ|/max|w| {worst:.2e} ({name})")
    assert worst <= 1e-5


@pytest.mark.slow
def test_a_torchrun_group_killed_after_a_checkpoint_resumes_bit_for_bit(uneven, tmp_path):
    """Under torchrun too (dropout on: each process's random-number state is in the checkpoint)."""
    import signal
    import time

    torchrun = shutil.which("torchrun") or pytest.skip("torchrun is not installed")
    environment = child_environment(OMP_NUM_THREADS="1")

    def launch(run: Path, *extra: str) -> subprocess.Popen:
        argv = [
            torchrun,
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "minibert",
            *flags(uneven, run, "--save-every", "2", *extra),
        ]
        argv[argv.index("--dropout") + 1] = "0.1"
        return subprocess.Popen(argv, env=environment, stderr=subprocess.PIPE, start_new_session=True)

    unbroken = tmp_path / "unbroken"
    assert launch(unbroken).wait(timeout=600) == 0
    run = tmp_path / "broken"
    process = launch(run)
    metrics = run / "metrics.jsonl"
    while process.poll() is None and not (metrics.exists() and '"step": 3' in metrics.read_text()):
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)  # the launcher and both workers
    process.wait()
    resumed = launch(run, "--resume")
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read().decode()[-2000:]
    ours, expected = load_file(run / "model.safetensors"), load_file(unbroken / "model.safetensors")
    worst = max((ours[name] - expected[name]).abs().max().item() for name in expected)
    print(f"\ntorchrun group killed after step 3, resumed: max |Δ| vs unbroken = {worst}")
    assert worst == 0.0
    assert [line.count('"step"') for line in metrics.read_text().splitlines()] == [1] * STEPS
