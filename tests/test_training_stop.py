"""Stopping tells the truth (issue 45, item 3): Ctrl-C or SIGTERM during `minibert pretrain` used to
print "no output file was written" while the folder held a resumable checkpoint. Now the step in
flight is abandoned and the one line says what is on disk (the checkpoint's step, read back here
from training_state.pt) and the exact command that continues the run — which is then run."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time

import pytest

from helpers import child_environment, run_minibert, signals_as_from_a_terminal
from minibert.training.run.checkpoint import TrainingState
from random_instances import random_instances, write_instances

TINY = "tests/data/tiny_hub"
STEPS = 60  # the signal lands mid-run (here after step 2 of 60); the resumed run finishes them


@pytest.mark.parametrize("signum, code, said", [(signal.SIGINT, 130, "interrupted"),
                                                (signal.SIGTERM, 143, "stopped by SIGTERM")])  # fmt: skip
def test_a_stopped_pretrain_names_its_last_checkpoint_and_the_command_that_resumes_it(tmp_path, signum, code, said):
    data = write_instances(tmp_path / "data.tfrecord", random_instances(12, vocab_size=111, seq_len=16, seed=3))
    run = tmp_path / "run"
    command = [sys.executable, "-m", "minibert", "pretrain", "--data", str(data), "--init", TINY, "--output", str(run),
               "--steps", str(STEPS), "--batch-size", "4", "--save-every", "2"]  # fmt: skip
    environment = child_environment()
    process = subprocess.Popen(
        command, env=environment, stderr=subprocess.PIPE, text=True, preexec_fn=signals_as_from_a_terminal
    )
    metrics = run / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:  # a few steps and checkpoints in
        if metrics.exists() and metrics.read_text().count("\n") >= 3:
            break
        time.sleep(0.02)
    process.send_signal(signum)
    _, errors = process.communicate(timeout=300)
    assert process.returncode == code, errors
    last = errors.strip().splitlines()[-1]
    saved = TrainingState.from_file(run / "training_state.pt").step
    print(f"the signal landed after step {saved}'s checkpoint, of {STEPS}")
    assert 2 <= saved < STEPS
    assert last.startswith(f"minibert: {said}; {run} holds the checkpoint of step {saved} of {STEPS} "
                           "(training_state.pt); continue with: minibert pretrain "), last  # fmt: skip
    assert "no output file" not in errors
    resume = shlex.split(last.split("continue with: ", 1)[1])
    assert resume[-1] == "--resume"
    resumed = run_minibert(*resume[1:], "--steps", str(saved + 1))  # (a later --steps: only its limit differs)
    assert resumed.returncode == 1 and f"steps = {STEPS}, this command gives" in resumed.stderr  # the same run...
    resumed = run_minibert(*resume[1:])  # ... continued by the command as printed
    assert resumed.returncode == 0, resumed.stderr
    assert TrainingState.from_file(run / "training_state.pt").step == STEPS


def test_a_stop_while_the_state_is_written_is_handled_after_it():
    """A Ctrl-C landing between the state's rename and saved_step's update named the step before
    (the line said step 2; training_state.pt held step 4): the two now change together, and the
    signal is raised right after, to the handler that was there. (In a process of its own: signal
    handlers are the main thread's, and a pytest-xdist worker may run tests in another.)"""
    script = (
        "import os, signal, time\n"
        "from minibert.training.run.checkpoint import _stops_held\n"
        "reached = []\n"
        "try:\n"
        "    with _stops_held():\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(0.05)  # (a handler runs at the next bytecode: it would have raised here)\n"
        "        reached.append('end')\n"
        "except KeyboardInterrupt:\n"
        "    print('raised after', reached, signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=child_environment(), capture_output=True, text=True,
                          timeout=120, preexec_fn=signals_as_from_a_terminal)  # (a background job ignores SIGINT)
    assert done.stdout.strip() == "raised after ['end'] True", done.stdout + done.stderr
