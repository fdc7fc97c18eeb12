"""One run per folder (issue 45, item 1): `minibert pretrain` holds an exclusive lock on its
--output folder (training/run/lock.py). A second command into the same folder is refused at once,
naming the folder and the process that holds it; the first run is left intact; a SIGKILLed holder
leaves no stale lock (the operating system releases a flock when its process dies)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import assert_refused_by_the_lock, child_environment, run_minibert
from minibert.errors import RunFolderBusyError
from minibert.training.run.lock import LOCK_FILE, run_folder_lock
from random_instances import random_instances, write_instances

TINY = "tests/data/tiny_hub"


def pretrain_args(data: Path, output: Path, *extra: str) -> list[str]:
    return ["pretrain", "--data", str(data), "--init", TINY, "--output", str(output), "--steps", "4",
            "--batch-size", "4", "--save-every", "2", *extra]  # fmt: skip


def environment() -> dict:
    return child_environment()


def wait_for_holder(lock: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if lock.exists() and lock.read_text().strip() == str(process.pid):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {process.pid} never took {lock} (exit {process.poll()})")


@pytest.fixture
def data(tmp_path) -> Path:
    return write_instances(tmp_path / "data.tfrecord", random_instances(12, vocab_size=111, seq_len=16, seed=3))


def test_a_second_pretrain_into_a_held_folder_is_refused_naming_the_folder_and_the_holder(tmp_path, data):
    run = tmp_path / "run"
    with run_folder_lock(run):
        result = run_minibert(*pretrain_args(data, run, "--seed", "999"))
        assert_refused_by_the_lock(result, run)


def test_two_pretrain_runs_into_one_folder_leave_one_intact_run_and_one_refusal(tmp_path, data):
    run = tmp_path / "same"
    first = subprocess.Popen([sys.executable, "-m", "minibert", *pretrain_args(data, run)], env=environment(),
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for_holder(run / LOCK_FILE, first)
        second = run_minibert(*pretrain_args(data, run, "--seed", "999"))
    finally:
        _, first_errors = first.communicate(timeout=600)
    assert first.returncode == 0, first_errors
    assert second.returncode == 1 and f"process {first.pid}" in second.stderr, second.stderr
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]  # each step once: one run wrote them
    resumed = run_minibert(*pretrain_args(data, run, "--resume"))  # the run is whole (and ended)
    assert resumed.returncode == 0, resumed.stderr


def test_a_sigkilled_holder_leaves_no_stale_lock(tmp_path, data):
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from minibert.training.run.lock import "
                               "run_folder_lock\nwith run_folder_lock(sys.argv[1]): time.sleep(600)", str(run)],
                              env=environment())  # fmt: skip
    wait_for_holder(run / LOCK_FILE, holder)
    with pytest.raises(RunFolderBusyError, match=f"process {holder.pid}"):
        with run_folder_lock(run):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    result = run_minibert(*pretrain_args(data, run))
    assert result.returncode == 0, result.stderr
    assert (run / "training_state.pt").exists()


def test_the_lock_is_released_at_the_end_and_a_folder_it_made_is_removed_when_nothing_was_written(tmp_path):
    folder = tmp_path / "new" / "run"
    with pytest.raises(ValueError):
        with run_folder_lock(folder):
            assert (folder / LOCK_FILE).read_text() == f"{os.getpid()}\n"
            raise ValueError("the command failed before writing")
    assert not folder.exists()
    with run_folder_lock(folder):
        (folder / "metrics.jsonl").write_text("")
    with run_folder_lock(folder):  # released: taken again at once
        pass
    assert sorted(entry.name for entry in folder.iterdir()) == ["metrics.jsonl"]  # no lock file left behind


def test_a_refused_command_leaves_no_lock_file_in_a_folder_it_did_not_make(tmp_path):
    """A folder that holds something else (a model, say): the command refused inside the lock
    leaves the folder as it found it, no .minibert.lock in it."""
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError), run_folder_lock(tmp_path):
        raise ValueError("refused: not a run folder")
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["config.json"]


def test_a_waiter_takes_the_lock_after_the_holder_removed_its_file(tmp_path):
    """The holder removes its file while it still holds it; a command that opened that file in the
    meantime finds it gone once locked and takes a new one (never two holders at once)."""
    with run_folder_lock(tmp_path):
        opened = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
    try:
        with run_folder_lock(tmp_path):
            assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
            assert not os.path.samestat(os.fstat(opened), os.stat(tmp_path / LOCK_FILE))
    finally:
        os.close(opened)


def test_a_file_where_the_folder_should_be_is_named(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(Exception, match="--output .*file exists and is not a directory"):
        with run_folder_lock(tmp_path / "file"):
            pass


# ------------------------------------------------------------------ the lock attacked


def test_a_symbolic_link_in_place_of_the_lock_file_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).symlink_to(target)
    with pytest.raises(Exception, match=f"cannot open its lock file {run / LOCK_FILE}"):
        with run_folder_lock(run):
            pass
    assert target.read_text() == "keep me"


def test_a_directory_in_place_of_the_lock_file_is_named(tmp_path):
    (tmp_path / LOCK_FILE).mkdir()
    with pytest.raises(Exception, match=f"cannot open its lock file {tmp_path / LOCK_FILE}: Is a directory"):
        with run_folder_lock(tmp_path):
            pass


@pytest.mark.parametrize("content", ["", "not a pid", "\x00\xff" * 1000, "12 34"])
def test_a_holder_whose_lock_file_does_not_hold_a_pid_is_called_unknown(tmp_path, content):
    with run_folder_lock(tmp_path):
        (tmp_path / LOCK_FILE).write_text(content, errors="replace")
        with pytest.raises(RunFolderBusyError, match=r"in use by another run \(process unknown holds"):
            with run_folder_lock(tmp_path):
                pass


def test_the_same_process_asking_twice_is_refused_too(tmp_path):
    with run_folder_lock(tmp_path, flag="--output-dir"):
        with pytest.raises(RunFolderBusyError, match=f"^--output-dir {tmp_path} is in use .*process {os.getpid()}"):
            with run_folder_lock(tmp_path, flag="--output-dir"):
                pass


def test_the_pid_left_by_an_ended_run_does_not_hold_the_folder(tmp_path):
    (tmp_path / LOCK_FILE).write_text("999999999\n")  # a run that ended (or was killed) long ago
    with run_folder_lock(tmp_path):
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"


def test_a_folder_that_existed_is_kept_when_the_command_fails(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with run_folder_lock(tmp_path):
            raise KeyboardInterrupt
    assert tmp_path.is_dir()


def test_a_folder_the_failed_command_wrote_into_is_kept(tmp_path):
    folder = tmp_path / "run"
    with pytest.raises(RuntimeError):
        with run_folder_lock(folder):
            (folder / "training_state.pt").write_bytes(b"x")
            raise RuntimeError
    assert (folder / "training_state.pt").exists()


def test_a_folder_holding_a_run_is_still_refused_without_resume_under_the_lock(tmp_path, data):
    run = tmp_path / "run"
    run.mkdir()
    (run / "training_state.pt").write_bytes(b"")  # a run is its training state (a model folder is not one)
    result = run_minibert(*pretrain_args(data, run))
    assert result.returncode == 1 and "already holds a run" in result.stderr, result.stderr


def test_a_finetune_resume_into_a_held_run_is_refused_and_the_run_left_as_it_was(tmp_path):
    from test_training_finetune_run import flags, write_examples

    train, run = write_examples(tmp_path / "train.csv", 8), tmp_path / "run"
    assert run_minibert(*flags(train, run, "--epochs", "1")).returncode == 0
    before = {path.name: path.read_bytes() for path in run.iterdir() if path.is_file() and path.name != LOCK_FILE}
    with run_folder_lock(run):  # the run's lock was released when it ended: another may take it
        refused = run_minibert(*flags(train, run, "--epochs", "1", "--resume"))
    assert refused.returncode == 1 and f"process {os.getpid()} holds" in refused.stderr, refused.stderr
    after = {path.name: path.read_bytes() for path in run.iterdir() if path.is_file() and path.name != LOCK_FILE}
    assert after == before


def test_finetune_write_features_needs_no_run_folder_lock(tmp_path):
    """--write-features writes one file, no run: a held folder of the same name does not stop it."""
    from test_training_finetune_run import flags, write_examples

    train, features = write_examples(tmp_path / "train.csv", 6), tmp_path / "train.tfrecord"
    argv = flags(train, tmp_path / "run")
    argv[argv.index("--output") : argv.index("--output") + 2] = ["--write-features", str(features)]
    del argv[argv.index("--batch-size") : argv.index("--learning-rate") + 2]  # (a run's flags: refused)
    with run_folder_lock(tmp_path):
        assert run_minibert(*argv).returncode == 0 and features.stat().st_size > 0


def _tree(folder: Path) -> dict:
    """Every path under ``folder`` (links not followed) and its size: what a refused run must leave as it was."""
    return {str(path.relative_to(folder)): path.lstat().st_size for path in sorted(folder.rglob("*"))}


def _train_file(tmp_path: Path) -> Path:
    train = tmp_path / "train.csv"
    train.write_text("text,label\na b,x\nb a,y\nc d,x\nd c,y\n", encoding="utf-8")
    return train


@pytest.mark.parametrize("command", ["finetune", "pretrain"])
@pytest.mark.parametrize("what", ["a link to a folder with files", "a link to an empty folder", "a link to a link",
                                  "a dangling link", "a folder of someone's files", "a folder with a hidden file",
                                  "a folder holding an empty folder", "a model folder (config.json)"])  # fmt: skip
def test_a_run_writes_only_a_new_or_empty_folder_of_its_own(tmp_path, command, what):
    """Issue 53, item 1: --output that is not a new or empty folder of its own is refused before anything
    is written (no run, no lock file, neither in it nor where a link points), naming what is there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    output = tmp_path / "out"
    if what == "a link to a folder with files":
        (elsewhere / "precious.txt").write_text("mine")
        output.symlink_to(elsewhere)
    elif what == "a link to an empty folder":
        output.symlink_to(elsewhere)
    elif what == "a link to a link":
        (tmp_path / "hop").symlink_to(elsewhere)
        output.symlink_to(tmp_path / "hop")
    elif what == "a dangling link":
        output.symlink_to(tmp_path / "nowhere")
    else:
        output.mkdir()
        name = {"a folder of someone's files": "notes.txt", "a folder with a hidden file": ".env",
                "a folder holding an empty folder": "sub", "a model folder (config.json)": "config.json"}[what]
        if name == "sub":
            (output / name).mkdir()
        else:
            (output / name).write_text("{}")
    before = _tree(tmp_path)
    if command == "finetune":
        result = run_minibert("finetune", "--model", TINY, "--train", str(_train_file(tmp_path)), "--output",
                              str(output), "--device", "cpu")  # fmt: skip
        before = {**before, "train.csv": (tmp_path / "train.csv").stat().st_size}
    else:
        data = write_instances(tmp_path / "data.tfrecord", random_instances(4, vocab_size=111, seq_len=16, seed=1))
        result = run_minibert(*pretrain_args(data, output), "--device", "cpu")
        before = {**before, "data.tfrecord": data.stat().st_size}
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    expected = {"link": "is a symbolic link", "model": "holds a model (config.json), not a run"}
    said = next((text for key, text in expected.items() if key in what), "is not empty")
    assert f"--output {output} {said}" in result.stderr, result.stderr
    assert _tree(tmp_path) == before, "a refused run changed the files"


@pytest.mark.parametrize("command", ["finetune", "pretrain"])
@pytest.mark.parametrize("resume", [False, True])
def test_a_model_folder_is_named_a_model_with_or_without_resume(tmp_path, command, resume):
    """A checkpoint folder (config.json, model.safetensors, vocab.txt, no training state) as --output
    was called a folder that "already holds a run: pass --resume", and with --resume "nothing to
    resume ... (start without --resume)": each advice pointed at the other. It is a model, not a
    run, and both say so, with the one way out (another folder)."""
    import shutil

    output = tmp_path / "model"
    shutil.copytree(TINY, output)
    before = _tree(output)
    if command == "finetune":
        argv = ["finetune", "--model", TINY, "--train", str(_train_file(tmp_path)), "--output", str(output)]
    else:
        data = write_instances(tmp_path / "data.tfrecord", random_instances(4, vocab_size=111, seq_len=16, seed=1))
        argv = pretrain_args(data, output)
    result = run_minibert(*argv, "--device", "cpu", *(["--resume"] if resume else []))
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    said = (f"--output {output} holds a model (config.json, model.safetensors, tokenizer_config.json and 1 more), "
            "not a run (it has no training_state.pt)")  # fmt: skip
    assert said in result.stderr, result.stderr
    assert "pass --resume" not in result.stderr and "start without --resume" not in result.stderr
    assert result.stderr.rstrip().endswith("without --resume" if resume else "choose another (nothing was written)")
    assert _tree(output) == before


@pytest.mark.parametrize("leftovers", [[], [".training_state.pt.x4qt1fjk.partial"],
                                       [LOCK_FILE, ".training_state.pt.abc.partial"]])  # fmt: skip
def test_an_empty_folder_or_a_killed_first_write_is_a_new_runs(tmp_path, leftovers):
    """A run killed while it wrote its first training state leaves a temporary (and, SIGKILLed, its
    lock file) and no run: started again, the run takes the folder and removes the temporary."""
    output = tmp_path / "out"
    output.mkdir()
    for name in leftovers:
        (output / name).write_bytes(b"half a state")
    train = _train_file(tmp_path)
    result = run_minibert("finetune", "--model", TINY, "--train", str(train), "--output", str(output), "--device",
                          "cpu", "--epochs", "1", "--batch-size", "2", "--max-seq-length", "16")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (output / "model.safetensors").exists() and not (output / LOCK_FILE).exists()
    assert not [path.name for path in output.iterdir() if path.name.endswith(".partial")]


def test_a_resumed_run_writes_the_description_files_a_kill_left_out(tmp_path):
    """Issue 53, item 6: the training state is written before finetune.json and order.jsonl; a run killed
    between them gets them when resumed, the same bytes a run never stopped writes."""
    output = tmp_path / "out"
    train = _train_file(tmp_path)
    arguments = ["finetune", "--model", TINY, "--train", str(train), "--output", str(output), "--device", "cpu",
                 "--epochs", "1", "--batch-size", "2", "--max-seq-length", "16"]  # fmt: skip
    assert run_minibert(*arguments).returncode == 0
    written = {name: (output / name).read_bytes() for name in ("finetune.json", "order.jsonl")}
    for name in written:
        (output / name).unlink()
    resumed = run_minibert(*arguments, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert {name: (output / name).read_bytes() for name in written} == written
