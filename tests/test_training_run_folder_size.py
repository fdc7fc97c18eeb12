"""A finished run folder is no bigger than its use (issue 50): the training state drops its weights,
optimizer moments and random states when the run ends (``--keep-state`` keeps them), and ``best/``
shares the final weights' file when the best dev figure was the last step's. A run killed while it
finishes reads as finished, or finishes when resumed; never half-written."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from test_training_finetune_run import flags, write_examples

from helpers import run_minibert
from minibert.training.run import checkpoint
from minibert.training.run.checkpoint import TrainingState


def disk_bytes(folder: Path) -> int:
    """What the folder takes on disk, a file with several names (hard links) counted once."""
    seen, total = set(), 0
    for path in folder.rglob("*"):
        if path.is_file():
            stat = path.stat()
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_size
    return total


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def one_epoch_with_dev(tmp_path: Path, *extra: str, run: str = "run") -> tuple[list[str], Path]:
    """One epoch with --dev: one evaluation, at the last step, so best/ is the last step's weights."""
    train = tmp_path / "train.csv"
    if not train.exists():
        write_examples(train, 16)
    run = tmp_path / run
    argv = [*flags(train, run, "--epochs", "1", "--dev", str(train)), *extra]
    result = run_minibert(*argv)
    assert result.returncode == 0, result.stderr
    return argv, run


def test_a_finished_run_keeps_its_weights_once_and_a_small_state(tmp_path):
    argv, run = one_epoch_with_dev(tmp_path)
    model = run / "model.safetensors"
    state = TrainingState.from_file(run / "training_state.pt")
    assert state.finished and state.step == 4 and not state.weights and not state.moments
    assert (run / "training_state.pt").stat().st_size < 64 << 10
    assert os.path.samefile(run / "best" / "model.safetensors", model), "best/ is the last step: one file"
    limit = 1.3 * model.stat().st_size + (4 << 20)
    assert disk_bytes(run) <= limit, f"{disk_bytes(run):,} bytes on disk against {limit:,.0f}"
    before = snapshot(run)
    again = run_minibert(*argv, "--resume")
    assert again.returncode == 0 and "holds a finished run (step 4 of 4): nothing to resume" in again.stderr
    assert snapshot(run) == before, "reading a finished run as finished changes nothing"


def test_keep_state_keeps_the_whole_state(tmp_path):
    _, run = one_epoch_with_dev(tmp_path, "--keep-state")
    state = TrainingState.from_file(run / "training_state.pt")
    assert not state.finished and state.step == 4 and state.weights and state.moments


def test_the_same_run_ends_with_the_same_weights_whatever_it_keeps(tmp_path):
    """Dropping the state happens after the last save: the weights are those of a run that keeps it."""
    _, dropped = one_epoch_with_dev(tmp_path, run="dropped")
    _, kept = one_epoch_with_dev(tmp_path, "--keep-state", run="kept")
    assert (dropped / "model.safetensors").read_bytes() == (kept / "model.safetensors").read_bytes()


@pytest.mark.parametrize("moment", ["linking best/", "dropping the state"])
def test_a_run_killed_while_it_finishes_finishes_when_resumed(tmp_path, monkeypatch, moment):
    """A kill (here: an interrupt raised inside the atomic replace) while best/ is linked or the state
    dropped: the folder holds the run as it was before that step, and --resume finishes it."""
    real_replace = os.replace

    def killed_linking(source, target, *args, **kwargs):
        if "best-model" in str(source):
            raise KeyboardInterrupt
        return real_replace(source, target, *args, **kwargs)

    real_write = checkpoint.write_atomically

    def killed_dropping(path, data):
        if Path(path).name == "training_state.pt" and len(data) < 64 << 10:  # the finished state, not a save
            (Path(path).parent / ".training_state.pt.x1y2.partial").write_bytes(data[: len(data) // 2])
            raise KeyboardInterrupt  # killed mid-write: half a temporary, the whole state still in place
        return real_write(path, data)

    train, run = write_examples(tmp_path / "train.csv", 16), tmp_path / "run"
    argv = flags(train, run, "--epochs", "1", "--dev", str(train))
    with monkeypatch.context() as patch:
        if moment == "linking best/":
            patch.setattr(checkpoint.os, "replace", killed_linking)
        else:  # (write_atomically as RunDirectory.finish calls it: the last save is already written)
            patch.setattr(checkpoint, "write_atomically", killed_dropping)
        assert run_minibert(*argv).returncode == 130  # an interrupt: the CLI's exit status for it
    state = TrainingState.from_file(run / "training_state.pt")  # whole, not half-written
    assert state.step == 4 and not state.finished
    resumed = run_minibert(*argv, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert TrainingState.from_file(run / "training_state.pt").finished
    assert os.path.samefile(run / "best" / "model.safetensors", run / "model.safetensors")
    assert not [p.name for p in run.iterdir() if p.name.endswith(".partial")]


@pytest.mark.parametrize("keep", [[], ["--keep-state"]], ids=["finished", "--keep-state"])
def test_the_closing_summary_says_what_the_state_holds(tmp_path, keep):
    """The summary's model line says what training_state.pt holds now (it said "for --resume" of a
    state that no longer holds weights), and its first line gives the loss once."""
    train = write_examples(tmp_path / "train.csv", 16)
    result = run_minibert(*flags(train, tmp_path / "run", "--epochs", "1"), *keep)
    assert result.returncode == 0, result.stderr
    done = next(line for line in result.stderr.splitlines() if " done: " in line)
    assert done.count("loss") == 1 and "(" not in done.split("min, ")[1], done
    said = "all of it (--keep-state)" if keep else "the finished run's step and settings"
    assert f"vocab.txt; training_state.pt{':' if not keep else ','} {said})" in result.stderr, result.stderr
