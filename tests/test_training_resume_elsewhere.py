"""``--resume`` from another working directory (review r21, resume item 1): a run records each path
setting (--model, --train, --dev, pretrain's --init) as typed and as the real path it named when it
started, and a resume compares the file its path names, from wherever it runs, with that real path.

The run's own files named from a sub-folder (``../train.csv``), by their absolute paths or through
symbolic links were refused as "made with train = 'train.csv'", because the typed string was resolved
against the new directory; a really different file is still refused, the same typed string naming
another file in another folder included. A state written before the real paths were kept still
resumes from its own directory as it did."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from pathlib import Path

import torch
from test_training_finetune_run import TINY, write_examples

from helpers import run_minibert
from minibert.training.run.checkpoint import TrainingState
from random_instances import random_instances, write_instances


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def finetune(model: str, train: str, dev: str, output: str, *extra: str) -> list[str]:
    return ["finetune", "--model", model, "--train", train, "--dev", dev, "--output", output, "--batch-size", "4",
            "--learning-rate", "1e-3", "--max-seq-length", "16", "--epochs", "1", *extra]  # fmt: skip


def resumed_as_itself(argv: list[str], run: Path) -> None:
    """The resume is accepted: a finished run, read as finished, nothing rewritten."""
    before = snapshot(run)
    result = run_minibert(*argv, "--resume")
    assert result.returncode == 0, (argv, result.stderr)
    assert "holds a finished run" in result.stderr, result.stderr
    assert snapshot(run) == before


def refused(argv: list[str], run: Path, *named: str) -> None:
    """Exit 1, one line naming the setting, the run's files byte for byte as they were."""
    before = snapshot(run)
    result = run_minibert(*argv, "--resume")
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("minibert: error: "), result.stderr
    assert all(words in lines[0] for words in named), (named, lines[0])
    assert snapshot(run) == before


def a_place(tmp_path: Path) -> Path:
    """tmp_path/work: the model (a copy of tiny_hub, named by a relative path), train.csv, dev.csv;
    links to each in tmp_path/links; an empty tmp_path/work/sub and tmp_path/elsewhere."""
    work = tmp_path / "work"
    shutil.copytree(TINY, work / "hub")
    write_examples(work / "train.csv", 8)
    write_examples(work / "dev.csv", 6, seed=1)
    (work / "sub").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "links").mkdir()
    for name in ("hub", "train.csv", "dev.csv"):
        (tmp_path / "links" / name).symlink_to(work / name)
    return work


def test_a_finetune_run_resumes_from_another_directory_with_its_files_named_any_way(tmp_path, monkeypatch):
    work = a_place(tmp_path)
    monkeypatch.chdir(work)
    assert run_minibert(*finetune("hub", "train.csv", "dev.csv", "run")).returncode == 0
    run = work / "run"
    monkeypatch.chdir(work / "sub")
    resumed_as_itself(finetune("../hub", "../train.csv", "../dev.csv", "../run"), run)  # relative, from a sub-folder
    monkeypatch.chdir(tmp_path / "elsewhere")
    resumed_as_itself(finetune(*(str(work / name) for name in ("hub", "train.csv", "dev.csv", "run"))), run)
    links = tmp_path / "links"
    resumed_as_itself(finetune(*(str(links / name) for name in ("hub", "train.csv", "dev.csv")), str(run)), run)
    resumed_as_itself(finetune("../links/hub", "../links/train.csv", "../links/dev.csv", "../work/run"), run)
    recorded = TrainingState.from_file(run / "training_state.pt")
    assert recorded.settings["train"] == "train.csv"  # as typed: the messages and the --resume command say it
    assert recorded.paths == {name: os.path.realpath(work / file) for name, file in
                              (("model", "hub"), ("train", "train.csv"), ("dev", "dev.csv"))}  # fmt: skip


def test_another_file_is_refused_whatever_directory_and_however_it_is_typed(tmp_path, monkeypatch):
    """Copies of the run's files (the same bytes, the same features) are other files: refused by
    name, the typed string naming them from another directory included (it once passed as equal)."""
    work = a_place(tmp_path)
    monkeypatch.chdir(work)
    assert run_minibert(*finetune("hub", "train.csv", "dev.csv", "run")).returncode == 0
    run = work / "run"
    elsewhere = tmp_path / "elsewhere"
    for name in ("hub", "train.csv", "dev.csv"):
        (shutil.copytree if name == "hub" else shutil.copy)(work / name, elsewhere / name)
    monkeypatch.chdir(elsewhere)
    given = {"model": "hub", "train": "train.csv", "dev": "dev.csv"}
    refused(finetune("hub", "train.csv", "dev.csv", str(run)), run, "the run was made with model (--model) = 'hub' (")
    for name in given:  # one setting at a time the copy, the others the run's own files
        argv = finetune(*(given[other] if other == name else str(work / given[other]) for other in given),
                        str(run))  # fmt: skip
        refused(argv, run, f"the run was made with {name} (--{name}) = {given[name]!r} "
                           f"({os.path.realpath(work / given[name])})",
                f"this command gives {given[name]!r} ({os.path.realpath(elsewhere / given[name])})")  # fmt: skip


def test_a_pretrain_run_resumes_from_another_directory_with_its_init_named_any_way(tmp_path, monkeypatch):
    work = a_place(tmp_path)
    write_instances(work / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=3))
    monkeypatch.chdir(work)

    def pretrain(init: str, data: str, output: str) -> list[str]:
        return ["pretrain", "--data", data, "--init", init, "--output", output, "--steps", "1", "--batch-size", "4"]

    made = run_minibert(*pretrain("hub", "data.tfrecord", "run"))
    assert made.returncode == 0, made.stderr
    run = work / "run"
    monkeypatch.chdir(work / "sub")
    resumed_as_itself(pretrain("../hub", "../data.tfrecord", "../run"), run)
    resumed_as_itself(pretrain(str(work / "hub"), str(work / "data.tfrecord"), str(run)), run)
    resumed_as_itself(pretrain("../../links/hub", "../data.tfrecord", "../run"), run)
    shutil.copytree(work / "hub", work / "sub" / "hub")  # the same files, another folder
    refused(pretrain("hub", "../data.tfrecord", "../run"), run, "the run was made with init (--init) = 'hub'")
    assert TrainingState.from_file(run / "training_state.pt").paths == {"init": os.path.realpath(work / "hub")}


def test_a_state_from_before_real_paths_resumes_from_its_own_directory_as_before(tmp_path, monkeypatch):
    """A state without ``paths`` (written before they were kept): its typed paths are read from the
    directory the command runs in, as they were: the same file typed another way is accepted there."""
    work = a_place(tmp_path)
    monkeypatch.chdir(work)
    assert run_minibert(*finetune("hub", "train.csv", "dev.csv", "run")).returncode == 0
    run = work / "run"
    state = TrainingState.from_file(run / "training_state.pt")
    buffer = io.BytesIO()
    torch.save({"format": 1, **{k: v for k, v in state.__dict__.items() if k != "paths"}}, buffer)
    (run / "training_state.pt").write_bytes(buffer.getvalue() + hashlib.sha256(buffer.getvalue()).digest())
    assert not getattr(TrainingState.from_file(run / "training_state.pt"), "paths", None)
    resumed_as_itself(finetune("hub", "train.csv", "dev.csv", "run"), run)
    resumed_as_itself(finetune(*(str(work / name) for name in ("hub", "train.csv", "dev.csv", "run"))), run)
    resumed_as_itself(finetune("../links/hub", "sub/../train.csv", "../links/dev.csv", "run"), run)
    shutil.copy(work / "train.csv", work / "copy.csv")
    refused(finetune("hub", "copy.csv", "dev.csv", "run"), run, "the run was made with train (--train) = 'train.csv'")


def test_a_checkpoint_prefix_and_a_moved_folder(tmp_path, monkeypatch):
    """Google's checkpoint prefix (DIR/model.ckpt-3: no file of that name) is its folder's real path
    and the name, compared from anywhere; a run whose files are gone from their real path (its folder
    moved since) compares the typed strings, as before real paths were kept."""
    from minibert.training.run.paths import real_path, same_path

    (tmp_path / "google" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    recorded = real_path("google/model.ckpt-3")
    assert recorded == os.path.join(os.path.realpath(tmp_path / "google"), "model.ckpt-3")
    monkeypatch.chdir(tmp_path / "google" / "sub")
    assert same_path("google/model.ckpt-3", recorded, "../model.ckpt-3")
    assert not same_path("google/model.ckpt-3", recorded, "../model.ckpt-4")
    assert not same_path("google/model.ckpt-3", recorded, "google/model.ckpt-3")  # (no such folder here)
    gone = str(tmp_path / "moved-away" / "train.csv")
    assert same_path("train.csv", gone, "train.csv") and not same_path("train.csv", gone, "other.csv")
    assert same_path("bert-base-uncased", None, "bert-base-uncased")  # a hub id: no real path, the same id
