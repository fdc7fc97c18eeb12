"""``minibert finetune`` guarded as ``pretrain`` is (issue 45): one run per folder (the run-folder
lock, rank 0), a NaN or infinite loss or gradient norm stops the run before the update with one
line and the last good checkpoint byte-identical and resumable with a lower rate, and Ctrl-C or
SIGTERM say what is on disk and the exact ``--resume`` command, which is then run. The sweep
(``--seeds``/``--learning-rates``) is locked, tells the truth when stopped, and records a diverged
trial as such. Before these guards: a second finetune wrote into a held folder, a NaN run saved NaN
weights over its checkpoint, and a stop said "no output file was written"."""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
from test_training_finetune_run import flags, write_examples

from helpers import assert_refused_by_the_lock, child_environment, run_minibert, signals_as_from_a_terminal
from minibert.training.run.checkpoint import TrainingState
from minibert.training.run.lock import LOCK_FILE, run_folder_lock

CHECKPOINT_FILES = ("training_state.pt", "model.safetensors", "config.json")


def test_a_huge_learning_rate_stops_before_the_update_and_leaves_the_checkpoint_byte_identical(tmp_path):
    train, run = write_examples(tmp_path / "train.csv", 16), tmp_path / "run"
    # a checkpoint at each epoch's end (4 steps): the last before the NaN of step 2 is step 0's (the
    # weights after step 1 at 1e30 are finite but ruined: a later checkpoint would be no good one)
    argv = flags(train, run, "--epochs", "2", "--warmup-proportion", "0")
    argv[argv.index("--learning-rate") + 1] = "1e30"
    diverged = run_minibert(*argv)
    assert diverged.returncode == 1, diverged.stderr
    line = diverged.stderr.strip().splitlines()[-1]
    assert line.startswith("minibert: error: step "), line
    step = 2
    assert line.startswith("minibert: error: step 2: not a finite number (loss nan"), line
    assert "(--learning-rate 1e+30); stopped before updating the weights" in line, line
    assert "keeps the checkpoint of step 0, unchanged" in line, line
    command = shlex.split(line.split("to continue with a lower rate: ", 1)[1])
    rate = command.index("--learning-rate") + 1
    # a tenth of the rate, and no more than finetune's default 2e-5 (a tenth of 1e30 would diverge again)
    assert command[:2] == ["minibert", "finetune"] and command[rate] == "2e-05", command
    assert command[-1] == "--resume" and str(run) in command
    saved = TrainingState.from_file(run / "training_state.pt")
    assert saved.step == 0 and all(bool(value.isfinite().all()) for value in saved.weights.values())
    before = {name: (run / name).read_bytes() for name in CHECKPOINT_FILES}
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, step + 1)) and not math.isfinite(records[-1]["loss"])
    # the stopped run refuses a second start, keeps every byte, and resumes with the command printed
    again = run_minibert(*argv)
    assert again.returncode == 1 and "already holds a run" in again.stderr
    for name in CHECKPOINT_FILES:
        assert (run / name).read_bytes() == before[name], name
    resumed = run_minibert(*command[1:])  # the advice as printed
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming at step 0 with --learning-rate 2e-05" in resumed.stderr
    note = json.loads((run / "finetune.json").read_text())  # (from step 1 on: one rate, the new one)
    assert note["options"]["learning_rate"] == 2e-5
    assert note["learning_rates"] == [{"from_step": 1, "learning_rate": 2e-5}]
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 9))


def test_a_checkpoint_is_kept_only_when_its_weights_give_finite_numbers(tmp_path):
    """--learning-rate 1e30 --save-every 1: step 1's update leaves weights near 1e30, finite one by
    one, so a check of the loss before the update passes; they once became "the checkpoint of step 1"
    that classify read as score NaN with exit 0. The weights are run before they are kept: refused,
    step 0's checkpoint stays, and the advice printed, followed as printed, finishes the run."""
    import numpy as np

    train, run = write_examples(tmp_path / "train.csv", 16), tmp_path / "run"
    argv = flags(train, run, "--epochs", "1", "--warmup-proportion", "0", "--save-every", "1")
    argv[argv.index("--learning-rate") + 1] = "1e30"
    diverged = run_minibert(*argv)
    assert diverged.returncode == 1, diverged.stderr
    line = diverged.stderr.strip().splitlines()[-1]
    assert line.startswith("minibert: error: step 1: the weights give NaN or infinite outputs; not saved: "), line
    assert f"{run} keeps the checkpoint of step 0; to continue with a lower rate: " in line, line
    assert TrainingState.from_file(run / "training_state.pt").step == 0
    command = shlex.split(line.split("to continue with a lower rate: ", 1)[1])
    resumed = run_minibert(*command[1:])
    assert resumed.returncode == 0, resumed.stderr
    scores = run_minibert("classify", "--model", str(run), "the water", "the bank")
    assert scores.returncode == 0, scores.stderr
    values = [label["score"] for row in scores.stdout.splitlines() for label in json.loads(row)["labels"]]
    assert values and np.isfinite(values).all(), scores.stdout


def test_a_second_finetune_into_a_held_folder_is_refused_naming_the_folder_and_the_holder(tmp_path):
    train, run = write_examples(tmp_path / "train.csv", 8), tmp_path / "run"
    with run_folder_lock(run):
        result = run_minibert(*flags(train, run, "--epochs", "1"))
        assert_refused_by_the_lock(result, run)


def start(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "minibert", *argv], env=child_environment(), stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, preexec_fn=signals_as_from_a_terminal)  # fmt: skip


def wait_for_lines(process: subprocess.Popen, metrics, count: int) -> None:
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        if metrics.exists() and metrics.read_text().count("\n") >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"the run never wrote {count} metrics lines (exit {process.poll()})")


def test_two_finetune_runs_into_one_folder_leave_one_intact_run_and_one_refusal(tmp_path):
    train, run = write_examples(tmp_path / "train.csv", 16), tmp_path / "same"
    argv = flags(train, run, "--epochs", "6")
    first = start(argv)
    try:
        wait_for_lines(first, run / "metrics.jsonl", 1)
        second = run_minibert(*argv[:-2], "--seed", "999", "--max-seq-length", "16")
    finally:
        _, first_errors = first.communicate(timeout=600)
    assert first.returncode == 0, first_errors
    assert second.returncode == 1 and f"process {first.pid} holds" in second.stderr, second.stderr
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 25))  # each step once: one run wrote them


@pytest.mark.parametrize("signum, code, said", [(signal.SIGINT, 130, "interrupted"),
                                                (signal.SIGTERM, 143, "stopped by SIGTERM")])  # fmt: skip
def test_a_stopped_finetune_names_its_last_checkpoint_and_the_command_that_resumes_it(tmp_path, signum, code, said):
    train, run = write_examples(tmp_path / "train.csv", 16), tmp_path / "run"
    process = start(flags(train, run, "--epochs", "15"))  # 60 steps, a checkpoint every 4 (each epoch's end)
    wait_for_lines(process, run / "metrics.jsonl", 5)
    process.send_signal(signum)
    _, errors = process.communicate(timeout=300)
    assert process.returncode == code, errors
    last = errors.strip().splitlines()[-1]
    saved = TrainingState.from_file(run / "training_state.pt").step
    assert 4 <= saved < 60
    assert last.startswith(f"minibert: {said}; {run} holds the checkpoint of step {saved} of 60 "
                           "(training_state.pt); continue with: minibert finetune "), last  # fmt: skip
    assert "no output file" not in errors
    resume = shlex.split(last.split("continue with: ", 1)[1])
    assert resume[-1] == "--resume"
    resumed = run_minibert(*resume[1:])
    assert resumed.returncode == 0, resumed.stderr
    assert TrainingState.from_file(run / "training_state.pt").step == 60


def sweep_flags(tmp_path, *extra: str) -> list[str]:
    train, dev = write_examples(tmp_path / "train.csv", 8), write_examples(tmp_path / "dev.csv", 6, seed=1)
    return flags(train, tmp_path / "sweep", "--dev", str(dev), "--epochs", "1", "--warmup-proportion", "0", *extra)


def test_a_sweep_records_a_diverged_trial_and_goes_on(tmp_path):
    result = run_minibert(*sweep_flags(tmp_path, "--learning-rates", "1e30,1e-3"))
    assert result.returncode == 0, result.stderr
    assert "minibert: sweep: trial lr1e+30-seed12345 diverged: step 2: not a finite number" in result.stderr
    table = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert [t["dev_accuracy"] is None for t in table["trials"]] == [True, False]
    assert table["learning_rates"][0]["best"] is None and table["learning_rates"][1]["best"] is not None
    assert "| 1e+30 | 12345 | diverged |" in result.stdout


def test_a_sweep_folder_is_locked(tmp_path):
    argv = sweep_flags(tmp_path, "--seeds", "2")
    with run_folder_lock(tmp_path / "sweep"):
        result = run_minibert(*argv)
        assert sorted(entry.name for entry in (tmp_path / "sweep").iterdir()) == [LOCK_FILE]  # nothing written
    assert result.returncode == 1 and f"process {os.getpid()} holds" in result.stderr, result.stderr
    assert list((tmp_path / "sweep").iterdir()) == []  # the holder's lock file went with it


def test_a_stopped_sweep_says_what_is_done_and_how_to_continue(tmp_path, monkeypatch):
    from minibert.training import sweep as sweep_module

    real, calls = sweep_module.finetune, []

    def interrupted_at_the_second_trial(options):
        calls.append(options.output)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(options)

    monkeypatch.setattr(sweep_module, "finetune", interrupted_at_the_second_trial)
    argv = sweep_flags(tmp_path, "--seeds", "2")
    result = run_minibert(*argv)
    assert result.returncode == 130
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"minibert: interrupted; {tmp_path / 'sweep'} holds 1 finished trial(s) of 2; continue "
                           "the sweep with: minibert finetune "), line  # fmt: skip
    command = shlex.split(line.split("continue the sweep with: ", 1)[1])
    assert command[-4:] == ["--seeds", "2", "--learning-rates", "0.001"] and "--resume" in command
    monkeypatch.setattr(sweep_module, "finetune", real)
    assert run_minibert(*command[1:]).returncode == 0
    assert len(json.loads((tmp_path / "sweep" / "sweep.json").read_text())["trials"]) == 2
