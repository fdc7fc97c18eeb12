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


def rank_pid(launcher: int, rank: int) -> int:
    """The process id of torchrun's worker of ``rank`` (a child of the launcher, RANK in its environment)."""
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text()
            environment = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if f"\nPPid:\t{launcher}\n" in status and f"RANK={rank}".encode() in environment:
            return int(entry.name)
    raise AssertionError(f"no worker of rank {rank} under process {launcher}")


def test_a_stopped_torchrun_group_says_once_what_is_on_disk_even_when_a_process_dies(uneven, tmp_path):
    """Under torchrun a SIGTERM made two lines, rank 0's (the checkpoint, the command) and rank 1's
    false "no output file was written"; now rank 0 alone speaks. A worker SIGKILLed made the other
    print gloo's raw text ("[.../pair.cc:537] Read error ... GLHF!"); now its one line says what
    failed, the checkpoint on disk and the command that resumes, as for a signal. (The printed
    command is run as the second launch; --monitor-interval 5: torchrun's own SIGTERM to the
    survivor comes after it has met the dead peer.)"""
    import shlex
    import signal
    import time

    from minibert.training.run.checkpoint import TrainingState

    torchrun = shutil.which("torchrun") or pytest.skip("torchrun is not installed")
    environment = child_environment(OMP_NUM_THREADS="1")
    launch_flags = [torchrun, "--standalone", "--monitor-interval", "5"]
    run, steps = tmp_path / "run", 200
    argv = flags(uneven, run, "--steps", str(steps), "--save-every", "2")

    def launch(words: list[str], lines: int) -> subprocess.Popen:
        process = subprocess.Popen(words, env=environment, stderr=subprocess.PIPE, text=True)
        metrics = run / "metrics.jsonl"
        while process.poll() is None and not (metrics.exists() and metrics.read_text().count("\n") >= lines):
            time.sleep(0.01)
        return process

    def said(process: subprocess.Popen) -> list[str]:
        _, errors = process.communicate(timeout=300)
        ours = [line for line in errors.splitlines() if line.startswith("minibert: ")]
        return [line for line in ours if not line.startswith(("minibert: step ", "minibert: resuming "))]

    process = launch([*launch_flags, "--nproc_per_node", "2", "-m", "minibert", *argv], 3)
    process.send_signal(signal.SIGTERM)  # to the launcher, which sends it to each worker
    lines, saved = said(process), TrainingState.from_file(run / "training_state.pt").step
    assert len(lines) == 1, lines
    held = f"{run} holds the checkpoint of step {saved} of {steps} (training_state.pt); continue with: "
    assert lines[0].startswith(f"minibert: stopped by SIGTERM; {held}torchrun --nproc_per_node 2 -m minibert "), lines
    command = shlex.split(lines[0].split("continue with: ", 1)[1])

    process = launch([*launch_flags, *command[1:]], saved + 4)  # the printed command (torchrun: this one's)
    os.kill(rank_pid(process.pid, 1), signal.SIGKILL)
    lines, saved = said(process), TrainingState.from_file(run / "training_state.pt").step
    assert process.returncode != 0 and len(lines) == 1, lines
    assert lines[0].startswith("minibert: error: rank 0 of 2: "), lines
    assert "another process of the torchrun group stopped or cannot be reached (" in lines[0], lines
    assert lines[0].endswith(f"; {run} holds the checkpoint of step {saved} of {steps} (training_state.pt); continue "
                             f"with: {shlex.join(command)}"), lines  # fmt: skip
    assert "GLHF" not in lines[0] and "pair.cc" not in lines[0], lines
