"""``minibert finetune ... --seeds N --learning-rates A,B --ray``: the sweep's trials as Ray Tune
trials on a real local Ray (ray.init(num_cpus=2)). Each trial is the sequential sweep's run_trial at
1 torch thread, so its run folder, its metrics (every loss, every dev figure) and the table equal,
bit for bit, those of the sequential sweep run at 1 thread (training/run/arithmetic.py: the thread count
decides how sums are rounded); a diverged trial is a "diverged" row in both; a resumed --ray sweep
continues the finished trials (no new step) as the sequential one does. A bad address and a missing
ray are one line each, exit 1, and ``import minibert`` (or the sequential sweep) never imports ray.
A sweep stopped (SIGTERM, Ctrl-C), a trial that fails, a trial whose worker dies: minibert's one line
(with the command that continues the sweep where it is not the trial's fault), none of Tune's, and no
trial's lock left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import torch
from test_training_finetune_run import TINY, write_examples

from helpers import child_environment, run_minibert, sigint_as_from_a_terminal
from minibert.training.run.checkpoint import TrainingState

ray = pytest.importorskip("ray")
pytest.importorskip("ray.tune")

RATES = "1e-3,1e30"  # 1e30: the loss is NaN at step 2, a "diverged" row in both sweeps


# ``minibert`` in a process that sees no Ray on this machine: ``auto`` looks for one among the running
# processes (a gcs_server) and in the last cluster's address file. Another test's Ray, in the other
# pytest worker or in this module, would be found; Ray's own two lookups are made to find none.
WITHOUT_OTHER_RAYS = """
import sys

import ray
import ray._private.services as services

for lookup in ("find_gcs_addresses", "find_bootstrap_address"):
    assert callable(getattr(services, lookup, None)), f"ray {ray.__version__} has no services.{lookup}"


def no_gcs_here():
    return frozenset()


no_gcs_here.cache_clear = lambda: None  # (as Ray's own, which Ray clears on shutting down)
services.find_gcs_addresses = no_gcs_here
services.find_bootstrap_address = lambda temp_dir: None
from minibert.apps.cli import main

sys.exit(main(sys.argv[1:]))
"""


def test_ray_auto_with_no_cluster_names_minibert_s_flag_not_ray_s(data, tmp_path):
    """Ray's refusal of ``auto`` advised its own CLI's ``--address`` flag, which minibert finetune does not
    have. (It was skipped where a Ray ran, as another pytest worker's may: now that Ray is hidden.)"""
    argv = sweep_flags(data, tmp_path / "sweep", "--ray", "auto")
    env = {name: value for name, value in child_environment().items() if name != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", WITHOUT_OTHER_RAYS, *argv], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip
    assert done.returncode == 1
    assert driver_lines(done.stderr) == [
        "minibert: error: --ray auto: cannot connect to a Ray cluster there: Could not find any running Ray instance: "
        "start one (`ray start --head`), or give its address: --ray HOST:6379"]  # fmt: skip
    assert not (tmp_path / "sweep").exists()


def driver_lines(stderr: str) -> list[str]:
    """The lines of stderr that this process wrote: not those Ray forwards from its workers
    (``(_trial pid=7) ...``, coloured), nor Ray's notice on connecting (``Token authentication is enabled``)."""
    forwarded, notice = re.compile(r"(\x1b\[\d+m)?\("), "Token authentication is enabled"
    return [line for line in stderr.splitlines() if not forwarded.match(line) and not line.startswith(notice)]


@pytest.fixture(scope="module")
def cluster():
    # MINIBERT_GEMM: the workers and this process must not each measure (and maybe pick) another backend
    path = child_environment()["PYTHONPATH"]  # this checkout's src/ first, in the workers too
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"MINIBERT_GEMM": "mkl", "PYTHONPATH": path}})  # fmt: skip
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    return write_examples(folder / "train.csv", 16), write_examples(folder / "dev.csv", 12, seed=1)


def sweep_flags(data, output, *extra: str) -> list[str]:
    train, dev = data
    return ["finetune", "--model", str(TINY), "--train", str(train), "--dev", str(dev), "--output", str(output),
            "--batch-size", "4", "--max-seq-length", "16", "--epochs", "1", "--warmup-proportion", "0",
            "--eval-every", "1", "--seeds", "2", "--learning-rates", RATES, *extra]  # fmt: skip


def records(run) -> list[dict]:
    """A run's metrics lines without the timings."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    timings = ("seconds", "examples_per_second", "tokens_per_second")
    return [{k: v for k, v in json.loads(line).items() if k not in timings} for line in lines]


@pytest.fixture(scope="module")
def sequential(data, tmp_path_factory):
    """The sequential sweep at 1 torch thread (as each Ray trial runs)."""
    output, before = tmp_path_factory.mktemp("sequential") / "sweep", torch.get_num_threads()
    torch.set_num_threads(1)
    mp = pytest.MonkeyPatch()
    mp.setenv("MINIBERT_GEMM", "mkl")
    try:
        result = run_minibert(*sweep_flags(data, output))
    finally:
        torch.set_num_threads(before)
        mp.undo()
    assert result.returncode == 0, result.stderr
    return output


@pytest.fixture(scope="module")
def ray_sweep(cluster, data, tmp_path_factory):
    """The same sweep, its trials as Ray Tune trials on the module's local Ray: (folder, the command's result)."""
    output = tmp_path_factory.mktemp("ray") / "sweep"
    mp = pytest.MonkeyPatch()
    mp.setenv("MINIBERT_GEMM", "mkl")
    started = time.perf_counter()
    try:
        result = run_minibert(*sweep_flags(data, output, "--ray"))
    finally:
        mp.undo()
    print(f"\nthe --ray sweep: {time.perf_counter() - started:.1f} s")
    assert result.returncode == 0, result.stderr
    return output, result


def table_of(folder) -> dict:
    """sweep.json, with the sweep's folder (named in a diverged trial's message) written SWEEP."""
    return json.loads((folder / "sweep.json").read_text().replace(str(folder), "SWEEP"))


TRIALS = ["lr0.001-seed12345", "lr0.001-seed12346", "lr1e+30-seed12345", "lr1e+30-seed12346"]


def test_ray_trials_equal_the_sequential_sweep_trial_by_trial(ray_sweep, sequential):
    output, result = ray_sweep
    assert "minibert: sweep: on the Ray this process is connected to (2 CPUs), 1 CPU and torch thread per trial" \
        in result.stderr  # fmt: skip
    assert result.stdout == (output / "sweep.md").read_text()  # the table, and nothing of Tune's, on stdout
    assert (output / "sweep.md").read_text() == (sequential / "sweep.md").read_text()
    ours = table_of(output)
    assert ours == table_of(sequential)  # every trial's dev figure, "diverged" and its message included
    assert [trial["run"] for trial in ours["trials"]] == TRIALS
    assert [trial["dev_accuracy"] is None for trial in ours["trials"]] == [False, False, True, True]
    for name in TRIALS:  # every step's loss and dev figures, bit for bit
        assert records(output / name) == records(sequential / name), name
        state = TrainingState.from_file(output / name / "training_state.pt")
        assert state.arithmetic["threads"] == 1, (name, state.arithmetic)
    assert records(output / TRIALS[0]) != records(output / TRIALS[1])  # the seeds differ: the check can fail
    assert sorted(entry.name for entry in output.iterdir()) == sorted(entry.name for entry in sequential.iterdir())


@pytest.fixture(scope="module")
def command_sweep(data, tmp_path_factory):
    """The same sweep run as a user runs it, ``python -m minibert finetune ... --ray`` in its own
    process, which starts a local Ray of its own: (folder, the finished process)."""
    output = tmp_path_factory.mktemp("command") / "sweep"
    env = child_environment(MINIBERT_GEMM="mkl")
    done = subprocess.run([sys.executable, "-m", "minibert", *sweep_flags(data, output, "--ray")],
                          capture_output=True, text=True, env=env, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return output, done


@pytest.mark.slow
def test_a_resumed_ray_sweep_continues_the_finished_trials_without_a_step(command_sweep, cluster, data, monkeypatch):
    """A finished --ray sweep resumed with --ray (on this module's Ray): every trial is found
    finished, no step is taken, the table is the same. The sweep resumed is the command's, which
    the slow run makes for the test below anyway: resuming ray_sweep's would train that one too,
    for nothing more."""
    output, _ = command_sweep
    monkeypatch.setenv("MINIBERT_GEMM", "mkl")
    steps, table = {name: len(records(output / name)) for name in TRIALS}, table_of(output)
    again = run_minibert(*sweep_flags(data, output, "--ray", "--resume"))
    assert again.returncode == 0, again.stderr
    assert "minibert: sweep: on the Ray this process is connected to (2 CPUs)" in again.stderr
    assert {name: len(records(output / name)) for name in TRIALS} == steps
    assert table_of(output) == table


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_address_where_no_ray_answers_is_one_line_naming_it(data, tmp_path):
    address = f"127.0.0.1:{free_port()}"
    result = run_minibert(*sweep_flags(data, tmp_path / "sweep", "--ray", address))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"minibert: error: --ray {address}: no Ray cluster answers there (Connection refused)"]  # fmt: skip
    assert not (tmp_path / "sweep").exists()  # refused before anything was written


def test_ray_address_in_the_environment_is_the_cluster_to_connect_to(data, tmp_path, monkeypatch):
    """``ray job submit`` sets RAY_ADDRESS for its command. ``ray.init`` reads it when no address is
    given, and then refused the local start's num_cpus ("When connecting to an existing cluster,
    num_cpus and num_gpus must not be provided"), naming neither the variable nor the address:
    ``--ray`` now connects to the cluster it names, probed as ``--ray ADDRESS`` is."""
    address = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("RAY_ADDRESS", address)
    result = run_minibert(*sweep_flags(data, tmp_path / "sweep", "--ray"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"minibert: error: RAY_ADDRESS={address} (--ray without an address uses it): no Ray cluster answers there "
        "(Connection refused)"]  # fmt: skip
    assert not (tmp_path / "sweep").exists()


@pytest.mark.slow
def test_ray_address_in_the_environment_runs_the_sweep_there(cluster, data, tmp_path):
    """The module's Ray, named by RAY_ADDRESS to ``python -m minibert finetune ... --ray`` in its own
    process (as ``ray job submit`` runs it): the sweep runs there, connected without num_cpus. One
    trial: the connection is what is tested (the trials are tested above)."""
    address = ray.get_runtime_context().gcs_address
    argv = sweep_flags(data, tmp_path / "sweep", "--ray")
    argv[argv.index("--seeds") + 1], argv[argv.index("--learning-rates") + 1] = "1", "1e-3"
    env = child_environment(MINIBERT_GEMM="mkl", RAY_ADDRESS=address)
    done = subprocess.run([sys.executable, "-m", "minibert", *argv], capture_output=True, text=True, env=env,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"minibert: sweep: on the Ray cluster at {address} ($RAY_ADDRESS) (2 CPUs)" in done.stderr
    assert [trial["run"] for trial in table_of(tmp_path / "sweep")["trials"]] == ["lr0.001-seed12345"]


def test_a_bad_file_is_its_one_line_before_ray_starts(data, tmp_path):
    argv = sweep_flags(data, tmp_path / "sweep", "--ray")
    argv[argv.index("--train") + 1] = str(tmp_path / "missing.csv")
    result = run_minibert(*argv)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"minibert: error: {tmp_path / 'missing.csv'} does not exist"]


def test_without_ray_installed_the_error_gives_the_pip_command(data, tmp_path, monkeypatch):
    for name in ("ray", "ray.tune"):
        monkeypatch.setitem(sys.modules, name, None)  # `import ray` now raises ImportError
    result = run_minibert(*sweep_flags(data, tmp_path / "sweep", "--ray"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "minibert: error: --ray needs the ray extra (ray is not installed): pip install 'minibert[ray]'"]  # fmt: skip


def test_ray_without_a_sweep_is_a_usage_error(data, tmp_path):
    argv = sweep_flags(data, tmp_path / "run", "--ray")
    for flag in ("--seeds", "--learning-rates"):
        del argv[argv.index(flag) : argv.index(flag) + 2]
    result = run_minibert(*argv)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "minibert: error: --ray runs a sweep's trials: give --seeds and/or --learning-rates"]  # fmt: skip


def test_neither_minibert_nor_the_sequential_sweep_imports_ray():
    code = ("import sys, minibert, minibert.apps.cli, minibert.training.sweep, "
            "minibert.training.run.loop; print(sorted(m for m in sys.modules if m.startswith('ray')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_environment(),
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.slow
def test_the_command_starts_a_local_ray_and_prints_the_sequential_table(command_sweep, sequential):
    """`minibert finetune ... --ray` in its own process: a local Ray with this machine's CPUs."""
    _, done = command_sweep
    assert "minibert: sweep: on a local Ray started for the sweep (" in done.stderr
    assert done.stdout == (sequential / "sweep.md").read_text()


def long_sweep(data, output, *extra: str) -> list[str]:
    """Two trials of 160 steps (an evaluation at each): long enough to be stopped in the middle."""
    argv = sweep_flags(data, output, *extra)
    argv[argv.index("--epochs") + 1], argv[argv.index("--seeds") + 1] = "40", "1"
    argv[argv.index("--learning-rates") + 1] = "1e-3,2e-3"
    return argv


def when_training(output, act) -> threading.Thread:
    """A thread that calls ``act(pids)`` once the first trial has taken a step: ``pids``, the trials'
    processes, as their run folders' lock files name them (read now: a killed trial's file names it after)."""
    first, pids = output / "lr0.001-seed12345", []

    def wait_then_act():
        for _ in range(1200):
            if (first / "metrics.jsonl").exists() and (first / "metrics.jsonl").read_text().count("\n") >= 2:
                break
            time.sleep(0.1)
        for lock in output.glob("*/.minibert.lock"):
            text = lock.read_text().strip()
            pids.extend([int(text)] if text.isdigit() else [])
        act(pids)

    thread = threading.Thread(target=wait_then_act, daemon=True)
    thread.pids = pids
    thread.start()
    return thread


def gone(pids: list[int], seconds: float = 15.0) -> bool:
    """Whether every process of ``pids`` has ended, within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return True
        time.sleep(0.2)
    return False


def continuing(output) -> str:
    """The start of what a stopped two-trial sweep with none finished says about how to continue it."""
    return f"{output} holds 0 finished trial(s) of 2; continue the sweep with: minibert finetune "


def test_a_trial_s_error_is_minibert_s_one_line_and_none_of_tune_s(cluster, data, tmp_path):
    """Tune logged a failed trial with its own traceback (about 60 lines: "Trial task failed", the
    worker's frames, "Trials did not complete") before minibert's line. A trial folder that holds
    another file, as the sequential sweep refuses it, is now the one line alone; the other trial,
    stopped by Tune's fail-fast, leaves no lock file."""
    output = tmp_path / "sweep"
    (output / "lr0.001-seed12345").mkdir(parents=True)
    (output / "lr0.001-seed12345" / "notes.txt").write_text("hi\n")
    result = run_minibert(*long_sweep(data, output, "--ray"))
    assert result.returncode == 1
    assert driver_lines(result.stderr) == [
        "minibert: sweep: on the Ray this process is connected to (2 CPUs), 1 CPU and torch thread per trial",
        f"minibert: error: --output {output / 'lr0.001-seed12345'} is not empty (notes.txt) and holds no run: a run "
        "needs a new or empty folder of its own; choose another (nothing was written)"]  # fmt: skip
    assert list(output.rglob(".minibert.lock")) == []


@pytest.mark.slow
def test_a_trial_whose_worker_dies_is_a_cluster_error_with_the_command_that_continues(cluster, data, tmp_path):
    """A trial's worker killed (as the kernel's OOM killer kills it) was "minibert: internal error:
    ActorDiedError" in seven lines of Ray's, with no word of what the sweep folder holds. It is now
    ClusterError's one line: the trial, the likely cause, and the command that continues the sweep."""
    output = tmp_path / "sweep"
    killer = when_training(output, lambda pids: os.kill(pids[0], signal.SIGKILL))
    result = run_minibert(*long_sweep(data, output, "--ray"))
    killer.join(timeout=60)
    assert result.returncode == 1
    lines = driver_lines(result.stderr)
    assert len(lines) == 2 and lines[1].startswith("minibert: error: --ray: trial lr0.00"), lines
    assert ": its Ray worker process died (ActorDiedError; killed or crashed: most often the kernel's OOM killer, " \
        "for want of memory, or its node was lost); " + continuing(output) in lines[1]  # fmt: skip
    assert lines[1].endswith(" --resume --seeds 1 --learning-rates 0.001,0.002 --ray"), lines[1]
    assert gone(killer.pids) and list(output.rglob(".minibert.lock")) == []


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_sweep_on_a_ray_it_did_not_start_stops_tune_and_says_one_line(cluster, data, tmp_path, signum):
    """On a Ray this process was connected to (a notebook's), Ctrl-C let Tune print its advice
    ("Resume experiment with: Tuner.restore(path=...)", a folder minibert deletes) and SIGTERM
    reached the command's handler inside Ray's C code (or left Tune's trials running). Either now
    stops Tune, whose trials end (their workers gone, their locks removed), then says minibert's line."""
    output = tmp_path / "sweep"
    with sigint_as_from_a_terminal():  # (a suite run as a background job starts with SIGINT ignored)
        killer = when_training(output, lambda pids: os.kill(os.getpid(), signum))
        result = run_minibert(*long_sweep(data, output, "--ray"))
        killer.join(timeout=60)
    how = "interrupted" if signum == signal.SIGINT else "stopped by SIGTERM"
    assert result.returncode == 128 + signum, result.stderr[-3000:]
    lines = driver_lines(result.stderr)
    assert len(lines) == 2 and lines[1].startswith(f"minibert: {how}; " + continuing(output)), lines
    assert lines[1].endswith(" --resume --seeds 1 --learning-rates 0.001,0.002 --ray"), lines[1]
    assert gone(killer.pids) and list(output.rglob(".minibert.lock")) == []


@pytest.mark.slow
def test_sigterm_stops_a_ray_sweep_as_the_sequential_sweep(cluster, data, tmp_path):
    """``ray.init`` put its own SIGTERM handler (``sys.exit``) and its core worker's crash dump
    ("*** SIGTERM received ***", then an alarm) in place of the command's: a --ray sweep stopped by
    SIGTERM exited 1 or 142, said nothing of the sweep, and left its trials' lock files. Its own
    process, connected to the module's Ray by address: exit 143, the sequential sweep's line."""
    address = ray.get_runtime_context().gcs_address
    output = tmp_path / "sweep"
    process = subprocess.Popen([sys.executable, "-m", "minibert", *long_sweep(data, output, "--ray", address)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=child_environment(MINIBERT_GEMM="mkl"))  # fmt: skip
    killer = when_training(output, lambda pids: process.send_signal(signal.SIGTERM))
    _, stderr = process.communicate(timeout=600)
    killer.join(timeout=60)
    assert process.returncode == 143, stderr[-3000:]
    assert "SIGTERM received" not in stderr
    lines = driver_lines(stderr)
    assert lines[-1].startswith("minibert: stopped by SIGTERM; " + continuing(output)), lines
    assert lines[-1].endswith(f" --resume --seeds 1 --learning-rates 0.001,0.002 --ray {address}"), lines[-1]
    assert gone(killer.pids) and list(output.rglob(".minibert.lock")) == []
