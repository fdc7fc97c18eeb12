"""``--resume`` of a run with no step left (review r21, resume item 2): a finished run, or one killed
after its last checkpoint but before it finished. A --learning-rate other than the run's changes
nothing there, and the resume says so instead of warning that "the steps after follow the new rate's
schedule" (there are none); nor does it warn that the resumed steps round differently on another
thread count. The state it leaves keeps the rate the steps were made with. A resume with steps left
still warns, and records the new rate its steps use."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from test_training_finetune_run import flags, write_examples

from helpers import run_minibert
from minibert.training.run.checkpoint import RunDirectory, TrainingState

STEPS_AFTER = "the steps after follow the new rate's schedule"


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def with_rate(argv: list[str], rate: str) -> list[str]:
    changed = list(argv)
    changed[changed.index("--learning-rate") + 1] = rate
    return changed


@pytest.fixture
def other_thread_count():
    before = torch.get_num_threads()
    yield 1 if before > 1 else 2
    torch.set_num_threads(before)


def test_a_finished_run_resumed_with_another_rate_says_the_rate_changes_nothing(tmp_path):
    train, run = write_examples(tmp_path / "train.csv", 8), tmp_path / "run"
    argv = flags(train, run, "--epochs", "1", "--dev", str(train))
    assert run_minibert(*argv).returncode == 0
    before = snapshot(run)
    resumed = run_minibert(*with_rate(argv, "2e-3"), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert STEPS_AFTER not in resumed.stderr, resumed.stderr
    assert (f"--learning-rate 0.002 changes nothing: {run} has no step left to train (the run was made with "
            "0.001)") in resumed.stderr, resumed.stderr  # fmt: skip
    assert {k: v for k, v in snapshot(run).items() if k != "loss.png"} == \
        {k: v for k, v in before.items() if k != "loss.png"}  # fmt: skip
    assert TrainingState.from_file(run / "training_state.pt").settings["learning_rate"] == 1e-3


def test_a_run_killed_after_its_last_checkpoint_is_finished_as_its_steps_were_made(
    tmp_path, monkeypatch, other_thread_count
):
    """Killed between the last checkpoint and the end of the run (an interrupt raised where the run
    finishes: the state on disk is the last step's, whole). The resume with another rate and another
    thread count trains nothing: it says that it finishes the run from its last checkpoint, that the
    rate changes nothing, nothing of rounding, and the finished state keeps the rate of its steps."""
    train, run = write_examples(tmp_path / "train.csv", 8), tmp_path / "run"
    argv = flags(train, run, "--epochs", "1", "--dev", str(train))
    with monkeypatch.context() as patch:
        patch.setattr(RunDirectory, "finish", lambda *args, **kwargs: (_ for _ in ()).throw(KeyboardInterrupt))
        assert run_minibert(*argv).returncode == 130
    state = TrainingState.from_file(run / "training_state.pt")
    assert state.step == 2 and not state.finished and state.settings["learning_rate"] == 1e-3
    weights, metrics = (run / "model.safetensors").read_bytes(), (run / "metrics.jsonl").read_text()
    torch.set_num_threads(other_thread_count)
    resumed = run_minibert(*with_rate(argv, "2e-3"), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert f"minibert: {run} holds the checkpoint of its last step (step 2 of 2): no step left to train; " \
           "finishing the run from it" in resumed.stderr, resumed.stderr  # fmt: skip
    assert "--learning-rate 0.002 changes nothing" in resumed.stderr, resumed.stderr
    for untrue in (STEPS_AFTER, "round differently", "bit-identical", "resuming "):
        assert untrue not in resumed.stderr, (untrue, resumed.stderr)
    finished = TrainingState.from_file(run / "training_state.pt")
    assert finished.finished and finished.step == 2 and finished.settings["learning_rate"] == 1e-3
    assert (run / "model.safetensors").read_bytes() == weights and (run / "metrics.jsonl").read_text() == metrics


def test_a_resume_with_steps_left_follows_the_new_rate_and_records_it(tmp_path, monkeypatch):
    train, run = write_examples(tmp_path / "train.csv", 8), tmp_path / "run"
    argv = flags(train, run, "--epochs", "1", "--save-every", "1")
    saved = RunDirectory.save

    def stopped_after_step_one(self, model, state, hub_files=True):
        saved(self, model, state, hub_files)
        if state.step == 1:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(RunDirectory, "save", stopped_after_step_one)
        assert run_minibert(*argv).returncode == 130
    resumed = run_minibert(*with_rate(argv, "2e-3"), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming at step 1 with --learning-rate 0.002 (the run was made with 0.001): {STEPS_AFTER}" in \
        resumed.stderr, resumed.stderr  # fmt: skip
    assert TrainingState.from_file(run / "training_state.pt").settings["learning_rate"] == 2e-3
