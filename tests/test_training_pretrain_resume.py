"""--resume continues a run bit for bit: real `minibert pretrain` processes are SIGKILLed at random
moments (between checkpoints, while a checkpoint is being written, just after one), resumed each
time, and the final weights equal those of a run that was never stopped (max |Δ| = 0, dropout on)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from helpers import child_environment
from random_instances import random_instances, write_instances

TINY = "tests/data/tiny_hub"  # its config keeps dropout 0.1: every step draws random numbers
STEPS = 16


def command(data: Path, output: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "minibert", "pretrain", "--data", str(data), "--init", TINY, "--output", str(output),
            "--steps", str(STEPS), "--batch-size", "4", "--warmup-steps", "3", "--learning-rate", "1e-3",
            "--save-every", "3", *extra]  # fmt: skip


def environment() -> dict:
    return child_environment()


def kill_when(process: subprocess.Popen, moment: str, run: Path, rng: random.Random) -> bool:
    """SIGKILL ``process`` at ``moment``; False if it finished first."""
    deadline = time.monotonic() + 300
    state = run / "training_state.pt"
    last = state.stat().st_mtime_ns if state.exists() else None
    if moment == "random":
        end = time.monotonic() + rng.uniform(0.5, 6.0)
    while time.monotonic() < deadline and process.poll() is None:
        if moment == "random" and time.monotonic() >= end:
            break
        if moment == "writing" and any(name.name.endswith(".partial") for name in os.scandir(run) if True):
            break
        if moment == "just-after" and state.exists() and state.stat().st_mtime_ns != last and last is not None:
            break
        if moment == "just-after" and last is None and state.exists():
            last = state.stat().st_mtime_ns
        time.sleep(0.0005)
    if process.poll() is not None:
        return False
    process.send_signal(signal.SIGKILL)
    process.wait()
    return True


def final_weights(run: Path) -> dict:
    return load_file(run / "model.safetensors")


@pytest.mark.slow
def test_killed_and_resumed_runs_end_bit_for_bit_where_an_unbroken_run_ends(tmp_path):
    data = write_instances(tmp_path / "data.tfrecord", random_instances(22, vocab_size=111, seq_len=16, seed=3))
    unbroken = tmp_path / "unbroken"
    subprocess.run(command(data, unbroken), env=environment(), check=True, capture_output=True)

    run = tmp_path / "broken"
    run.mkdir()
    rng = random.Random(2026)
    kills = 0
    for moment in ["random", "writing", "just-after", "random", "writing", "random", "just-after"]:
        resume = ["--resume"] if (run / "training_state.pt").exists() else []
        process = subprocess.Popen(command(data, run, *resume), env=environment(), stderr=subprocess.PIPE)
        if kill_when(process, moment, run, rng):
            kills += 1
        else:
            assert process.returncode == 0, process.stderr.read().decode()
            break
    else:
        finish = subprocess.run(command(data, run, "--resume"), env=environment(), capture_output=True, text=True)
        assert finish.returncode == 0, finish.stderr
    assert kills >= 3, f"only {kills} kills landed before the run ended"

    ours, expected = final_weights(run), final_weights(unbroken)
    worst = max((ours[name] - expected[name]).abs().max().item() for name in expected)
    print(f"\n{kills} kills, resumed each time: max |Δ| of the final weights vs the unbroken run = {worst}")
    assert worst == 0.0
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, STEPS + 1))
    assert not [name for name in os.listdir(run) if name.endswith(".partial")]


def test_a_run_killed_around_a_checkpoint_resumes_bit_for_bit(tmp_path):
    """The default suite's short version: one kill (once step 3 is logged: around its checkpoint), one resume."""
    from helpers import run_minibert

    data = write_instances(tmp_path / "data.tfrecord", random_instances(10, vocab_size=111, seq_len=16, seed=4))
    short = ["--steps", "6"]
    unbroken = tmp_path / "unbroken"
    assert run_minibert(*command(data, unbroken, *short)[3:]).returncode == 0
    run = tmp_path / "broken"
    run.mkdir()
    process = subprocess.Popen(command(data, run, *short), env=environment(), stderr=subprocess.PIPE)
    state = run / "training_state.pt"
    while process.poll() is None and not (state.exists() and b'"step": 3' in _steps(run)):
        time.sleep(0.001)
    process.send_signal(signal.SIGKILL)
    process.wait()
    resumed = run_minibert(*command(data, run, *short, "--resume")[3:])
    assert resumed.returncode == 0, resumed.stderr
    ours, expected = final_weights(run), final_weights(unbroken)
    worst = max((ours[name] - expected[name]).abs().max().item() for name in expected)
    print(f"\nkilled after step 3, resumed: max |Δ| vs the unbroken run = {worst}")
    assert worst == 0.0
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 7))


def _steps(run: Path) -> bytes:
    try:
        return (run / "metrics.jsonl").read_bytes()
    except FileNotFoundError:
        return b""
