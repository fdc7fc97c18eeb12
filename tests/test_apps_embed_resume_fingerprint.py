"""`minibert embed --resume`: what makes a run "the same run" (apps/run_fingerprint.py), and the run's
files under the conditions a long run meets (apps/resumable.py): a recipe or tokenizer file changed
in the model's folder, a new hub revision, the folder named another way, `--dtype fastest` or the
thread count resolving otherwise, a full disk, two long output names that share their start, a kill
as the run finishes, and Ctrl-C's one line.

A run is stopped here in this process (a KeyboardInterrupt after its N-th commit, which leaves the
state and the partial file as a kill does: test_apps_embed_resume.py kills real processes)."""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from helpers import run_minibert
from tiny_hub import TINY as MODEL  # a random 2-layer BERT, hidden size 32

MEAN = '{"word_embedding_dimension": 32, "pooling_mode_mean_tokens": true}'
CLS = '{"word_embedding_dimension": 32, "pooling_mode_cls_token": true}'
TEXTS = [f"text number {i} about {'cats' if i % 2 else 'dogs'}" for i in range(10)]


@pytest.fixture
def st_model(tmp_path) -> Path:
    """tiny_hub as a sentence-transformers folder: modules.json, mean pooling in 1_Pooling/."""
    folder = tmp_path / "st"
    shutil.copytree(MODEL, folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))  # fmt: skip
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(MEAN)
    return folder


@pytest.fixture
def texts(tmp_path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("".join(text + "\n" for text in TEXTS), encoding="utf-8")
    return path


def _embed(model, texts: Path, output: Path, *extra: str):
    return run_minibert("embed", "--model", str(model), "--input", str(texts), "--output", str(output),
                        "--commit-every", "3", *extra)  # fmt: skip


def _stopped_after(monkeypatch, commits: int, model, texts, output, *extra) -> None:
    """A --resume run stopped (as by a kill) after its ``commits``-th commit (the header's is the first)."""
    from minibert.apps.resumable import ResumableOutput

    real, count = ResumableOutput.commit, [0]

    def commit(self, *args, **kwargs):
        real(self, *args, **kwargs)
        count[0] += 1
        if count[0] >= commits:
            raise KeyboardInterrupt

    monkeypatch.setattr(ResumableOutput, "commit", commit)
    result = _embed(model, texts, output, "--resume", *extra)
    monkeypatch.setattr(ResumableOutput, "commit", real)
    assert result.returncode == 130, result.stderr
    return result


def _refused(result, what: str) -> None:
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("minibert: error:") and "from a run with other settings (" in last, result.stderr
    changes = "; " + last.split("from a run with other settings (", 1)[1]  # "PART: OLD → NEW; PART: ..."
    assert f"; {what}: " in changes, result.stderr


# ----------------------------------------------------------------------------- defect 1: the model


def _swap_two_tokens(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    a, b = lines.index("the"), lines.index("of")
    lines[a], lines[b] = lines[b], lines[a]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


CHANGES = {  # a file of the model's folder, changed between the kill and the resume: other numbers
    "1_Pooling/config.json": lambda m: (m / "1_Pooling/config.json").write_text(CLS),
    "sentence_bert_config.json": lambda m: (m / "sentence_bert_config.json").write_text('{"max_seq_length": 4}'),
    "config_sentence_transformers.json": lambda m: (m / "config_sentence_transformers.json").write_text(
        '{"prompts": {"query": "query: "}, "default_prompt_name": "query"}'),
    "modules.json (a Normalize added)": lambda m: (m / "modules.json").write_text(json.dumps(
        [*json.loads((m / "modules.json").read_text()),
         {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])),
    "tokenizer_config.json": lambda m: (m / "tokenizer_config.json").write_text(
        '{"do_lower_case": false, "model_max_length": 64}'),
    "vocab.txt": lambda m: _swap_two_tokens(m / "vocab.txt"),
    "config.json": lambda m: (m / "config.json").write_text(
        json.dumps({**json.loads((m / "config.json").read_text()), "layer_norm_eps": 0.5})),
}  # fmt: skip


@pytest.mark.parametrize("changed", sorted(CHANGES))
def test_a_model_file_changed_between_the_kill_and_the_resume_is_refused(st_model, texts, tmp_path, monkeypatch,
                                                                         changed):  # fmt: skip
    """Before: only the name as typed and the weights' size and mtime were recorded; the resume
    finished with exit 0, its rows from two models."""
    output = tmp_path / "out.npy"
    _stopped_after(monkeypatch, 2, st_model, texts, output)
    CHANGES[changed](st_model)
    _refused(_embed(st_model, texts, output, "--resume"), "model")
    assert not output.exists()


def test_the_same_folder_named_another_way_resumes_to_the_uninterrupted_bytes(st_model, texts, tmp_path,
                                                                              monkeypatch):  # fmt: skip
    """Before: `st` then `./st` (or `st/`, or the absolute path) was refused as "another model"."""
    monkeypatch.chdir(tmp_path)
    expected = tmp_path / "expected.npy"
    assert _embed("st", texts, expected).returncode == 0
    for index, again in enumerate(("./st", "st/", str(st_model.resolve()))):
        output = tmp_path / f"out{index}.npy"
        _stopped_after(monkeypatch, 2, "st", texts, output)
        result = _embed(again, texts, output, "--resume")
        assert result.returncode == 0 and "resuming after 3 of 10 texts" in result.stderr, (again, result.stderr)
        assert output.read_bytes() == expected.read_bytes()


def _hub_cache(root: Path, model: Path, commit: str) -> Path:
    """A Hugging Face cache whose acme/tiny `main` is ``commit``, a snapshot of the folder ``model``,
    with the file list `hf download` keeps (trees/COMMIT.json: the files it lacks are known absent)."""
    repository = root / "models--acme--tiny"
    snapshot = repository / "snapshots" / commit
    shutil.copytree(model, snapshot)
    files = {path.relative_to(snapshot).as_posix(): {"size": path.stat().st_size, "blob_id": "0"}
             for path in snapshot.rglob("*") if path.is_file()}  # fmt: skip
    (repository / "trees").mkdir(exist_ok=True)
    (repository / "trees" / f"{commit}.json").write_text(json.dumps({"format_version": 1, "files": files}))
    (repository / "refs").mkdir(exist_ok=True)
    (repository / "refs" / "main").write_text(commit)
    return repository / "snapshots" / commit


def test_a_new_hub_revision_with_the_same_weights_is_refused(st_model, texts, tmp_path, monkeypatch):
    """Before: a revision that kept model.safetensors (one blob in the cache) and changed the pooling
    was resumed without a word: rows of both revisions in one file."""
    from huggingface_hub import constants

    root = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    _hub_cache(root, st_model, "0123" * 10)
    output = tmp_path / "out.npy"
    _stopped_after(monkeypatch, 2, "acme/tiny", texts, output)
    newer = _hub_cache(root, st_model, "fedc" * 10)
    (newer / "1_Pooling" / "config.json").write_text(CLS)
    _refused(_embed("acme/tiny", texts, output, "--resume"), "model")


# ----------------------------------------------------------------------------- defect 2: dtype, threads


def test_dtype_fastest_resolved_otherwise_on_resume_is_refused(texts, tmp_path, monkeypatch):
    """--dtype fastest is bfloat16 where bf16 is measured faster, float32 elsewhere: before, the flag
    was recorded, and a run killed on one machine and resumed on the other mixed the two."""
    from minibert.speed import bf16

    output = tmp_path / "out.npy"
    monkeypatch.setattr(bf16, "bf16_is_faster", lambda *args, **kwargs: True)
    flags = ("--dtype", "fastest", "--gemm", "mkl")  # (one library: `auto` may choose by the dtype)
    _stopped_after(monkeypatch, 2, MODEL, texts, output, *flags)
    monkeypatch.setattr(bf16, "bf16_is_faster", lambda *args, **kwargs: False)
    _refused(_embed(MODEL, texts, output, "--resume", *flags), "dtype")
    assert json.loads((tmp_path / ".out.npy.resume.json").read_text())["run"]["dtype"] == "bfloat16"


def test_another_thread_count_on_resume_is_refused(texts, tmp_path, monkeypatch):
    """MKL and oneDNN split reductions by the thread count (1e-7 on all-MiniLM-L6-v2): before, it was
    recorded nowhere and a resume under another count matched neither uninterrupted run."""
    threads = torch.get_num_threads()
    output = tmp_path / "out.npy"
    mkl = ("--gemm", "mkl")  # one library whatever the count (`auto` may choose by the count: refused for that)
    try:
        torch.set_num_threads(1)
        _stopped_after(monkeypatch, 2, MODEL, texts, output, *mkl)
        torch.set_num_threads(2)
        _refused(_embed(MODEL, texts, output, "--resume", *mkl), "thread count")
        torch.set_num_threads(1)
        assert _embed(MODEL, texts, output, "--resume", *mkl).returncode == 0  # the control: its own count resumes
    finally:
        torch.set_num_threads(threads)


# ----------------------------------------------------------------------------- defect 3: a full disk


class _SmallDisk(io.FileIO):
    """A file on a disk with room for 500 bytes (the header's commit fits, the rows do not)."""

    def write(self, data):
        if self.tell() + len(data) > 500:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)


@pytest.mark.parametrize("where", ["the rows", "a full disk", "the state", "the lock"])
def test_a_full_or_read_only_disk_names_the_output(texts, tmp_path, monkeypatch, where):
    """Before: `[Errno 28] No space left on device`, naming nothing; the lock: a hidden file's name."""
    from minibert.apps import resumable
    from minibert.formats import atomic_files

    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if where == "the rows":
        calls = [0]

        def fsync(descriptor):
            calls[0] += 1
            if calls[0] > 1:  # (the header's commit gets through)
                raise full
            os.fsync(descriptor)

        monkeypatch.setattr(resumable.os, "fsync", fsync)
    elif where == "a full disk":  # every write of the partial file's bytes, in commit() and in close()
        monkeypatch.setattr(resumable.os, "fdopen", lambda descriptor, mode: io.BufferedRandom(
            _SmallDisk(descriptor, "r+")))  # fmt: skip
    elif where == "the state":
        real = atomic_files.tempfile.mkstemp

        def mkstemp(*args, prefix="", **kwargs):
            if ".resume.json." in prefix:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / f"{prefix}x.partial"))
            return real(*args, prefix=prefix, **kwargs)

        monkeypatch.setattr(atomic_files.tempfile, "mkstemp", mkstemp)
    else:
        real_open = os.open

        def refusing_open(path, *args, **kwargs):
            if str(path).endswith(".resume.lock"):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(resumable.os, "open", refusing_open)
    output = tmp_path / "v.npy"
    result = _embed(MODEL, texts, output, "--resume")
    reason = os.strerror(errno.EROFS if where == "the lock" else errno.ENOSPC)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"minibert: error: cannot write {output}: {reason}", result.stderr


# ----------------------------------------------------------------------------- defect 4: long names


def test_two_long_output_names_that_share_their_start_are_two_runs(texts, tmp_path, monkeypatch):
    """Names of 253 bytes that differ after byte 243: before, their hidden names were cut to one
    `.vvv….resume.json`: the second output was refused as "an unfinished --resume run", and the
    advice deleted the first run's progress."""
    stem = "v" * 243
    first, other = tmp_path / f"{stem}_first.npy", tmp_path / f"{stem}_other.npy"
    expected = tmp_path / "expected.npy"
    assert _embed(MODEL, texts, expected).returncode == 0
    _stopped_after(monkeypatch, 2, MODEL, texts, first)
    assert _embed(MODEL, texts, other).returncode == 0  # a plain run of the other name
    result = _embed(MODEL, texts, other, "--resume")  # and a resumable one
    assert result.returncode == 0 and "resuming" not in result.stderr, result.stderr
    result = _embed(MODEL, texts, first, "--resume")
    assert result.returncode == 0 and "resuming after 3 of 10 texts" in result.stderr, result.stderr
    assert first.read_bytes() == other.read_bytes() == expected.read_bytes()
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == []


def test_hidden_names_fit_with_the_state_s_temporary_file():
    from minibert.apps.resumable import _hidden
    from minibert.formats.atomic_files import NAME_MAX, TEMPORARY_ROOM, hidden_prefix

    for name in ("out.npy", "a" * 236 + ".npy", "é" * 125 + ".npy", "v" * 251 + ".npy"):
        names = [_hidden(name, rest) for rest in ("partial", "resume.json", "resume.lock")]
        assert all(len(os.fsencode(hidden)) <= NAME_MAX for hidden in names)
        state = names[1]  # replaced through .STATE.xxxxxxxx.partial, whose prefix must keep the digest
        assert hidden_prefix(state) == f".{state}." and len(os.fsencode(state)) + TEMPORARY_ROOM + 2 <= NAME_MAX


# ----------------------------------------------------------------------------- defect 5: killed as it finishes


@pytest.mark.parametrize("when", ["after the rename", "before the rename"])
def test_a_run_killed_as_it_finishes_is_complete_on_the_next_run(texts, tmp_path, monkeypatch, when):
    """Before: killed between the rename of .OUT.partial and the removal of the state, `--resume`
    said the partial file was missing and a plain run called the complete output "unfinished"."""
    from minibert.apps import resumable

    expected = tmp_path / "expected.npy"
    assert _embed(MODEL, texts, expected).returncode == 0
    real = os.replace

    def replace(source, target, *args, **kwargs):
        if str(source).endswith(".out.npy.partial"):
            if when == "after the rename":
                real(source, target, *args, **kwargs)
            raise KeyboardInterrupt  # a kill at that instant
        return real(source, target, *args, **kwargs)

    for command in ("--resume", "plain"):
        output = tmp_path / "out.npy"
        output.unlink(missing_ok=True)
        monkeypatch.setattr(resumable.os, "replace", replace)
        assert _embed(MODEL, texts, output, "--resume").returncode == 130
        monkeypatch.setattr(resumable.os, "replace", real)
        assert (tmp_path / ".out.npy.resume.json").exists()
        result = _embed(MODEL, texts, output, *(["--resume"] if command == "--resume" else []))
        assert result.returncode == 0, (command, result.stderr)
        assert output.read_bytes() == expected.read_bytes()
        assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == [], command


# ----------------------------------------------------------------------------- defect 6: Ctrl-C's line


def test_a_stopped_resumable_run_says_what_is_committed_and_how_to_continue(texts, tmp_path, monkeypatch):
    """Before: "interrupted; no output file was written", read as "everything is lost"."""
    output = tmp_path / "sig.npy"
    result = _stopped_after(monkeypatch, 3, MODEL, texts, output)  # the header, then two chunks of 3
    assert result.stderr.strip().splitlines()[-1] == ("minibert: interrupted; 6 of 10 texts are committed in "
                                                      ".sig.npy.partial; run the same command again to continue")
    result = _embed(MODEL, texts, output, "--resume")
    assert result.returncode == 0 and "resuming after 6 of 10 texts" in result.stderr


def test_the_files_of_a_failed_default_load_are_not_the_fallbacks(tmp_path, capsys):
    """A partly cached default hub model noted its config.json before ModelNotFoundError; the bundled
    fallback's config.json was then dropped (the first path of a name is kept), and the "model"
    digest hashed a file never used: edits to the files really read went unseen on resume."""
    import argparse

    from minibert.apps.commands import load_model
    from minibert.errors import ModelNotFoundError
    from minibert.loading.files_read import note, recording

    partial, used = tmp_path / "cached" / "config.json", tmp_path / "bundled" / "config.json"

    def loader(name):
        if not calls:
            calls.append(name)
            note("config.json", partial)
            raise ModelNotFoundError("not cached, no hub")
        calls.append(name)
        return note("config.json", used)

    calls = []
    args = argparse.Namespace(model=None, device="cpu", command="fill-mask")
    with recording() as read:
        assert load_model(args, loader, needs_heads="fill-mask") == used
    assert len(calls) == 2 and read == {"config.json": used}


# ------------------------------------------------- review r23: minibert's version, the changes named, the lock


def test_a_resume_after_a_minibert_upgrade_is_refused_naming_both_versions(texts, tmp_path, monkeypatch):
    """Before: the fingerprint held torch's version but not minibert's, so a run killed under one
    minibert and resumed under another (a pooling fix between the two) mixed both versions' rows."""
    import minibert

    output = tmp_path / "out.npy"
    _stopped_after(monkeypatch, 2, MODEL, texts, output)
    recorded = json.loads((tmp_path / ".out.npy.resume.json").read_text())["run"]
    assert recorded["minibert version"] == minibert.__version__
    monkeypatch.setattr(minibert, "__version__", "99.0.0")
    result = _embed(MODEL, texts, output, "--resume")
    _refused(result, "minibert version")
    assert f"minibert version: {recorded['minibert version']} → 99.0.0" in result.stderr, result.stderr
    monkeypatch.undo()  # the control: under the version that wrote it, the run resumes
    assert _embed(MODEL, texts, output, "--resume").returncode == 0


def test_a_refused_resume_names_each_changed_option_with_both_values(texts, tmp_path, monkeypatch):
    """Before: "... is from a run with another options", leaving the user to find which flag of a long
    command line it was (the options were one JSON string)."""
    output = tmp_path / "out.npy"
    _stopped_after(monkeypatch, 2, MODEL, texts, output)
    result = _embed(MODEL, texts, output, "--resume", "--batch-size", "8", "--normalize")
    _refused(result, "options")
    assert "(options: batch_size 32 → 8, normalize null → true); refusing to mix results" in result.stderr


def test_a_state_from_before_the_options_were_an_object_is_compared_option_by_option():
    from minibert.apps.resumable import fingerprint_changes

    old = {"options": json.dumps({"batch_size": 32, "pooling": None}), "torch version": "2.5.0"}
    new = {"options": {"batch_size": 32, "pooling": ["cls"]}, "torch version": "2.5.0", "minibert version": "0.1.0"}
    assert fingerprint_changes(old, new) == ["minibert version: (not recorded) → 0.1.0",
                                             'options: pooling null → ["cls"]']


def test_the_lock_of_a_state_deleted_by_hand_is_removed_by_the_plain_run(texts, tmp_path, monkeypatch):
    """Before: the refusal named the state and the partial file; deleted as it said, the plain run
    succeeded and left .OUT.resume.lock beside the output for good."""
    output = tmp_path / "out.npy"
    _stopped_after(monkeypatch, 2, MODEL, texts, output)
    result = _embed(MODEL, texts, output)
    assert result.returncode == 1 and "unfinished --resume run" in result.stderr
    assert result.stderr.strip().endswith(".out.npy.resume.json, .out.npy.partial and .out.npy.resume.lock")
    for name in (".out.npy.resume.json", ".out.npy.partial"):
        (tmp_path / name).unlink()
    assert _embed(MODEL, texts, output).returncode == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.npy", "texts.txt"]


def test_a_lock_a_run_holds_is_not_removed_by_a_plain_run(texts, tmp_path):
    import fcntl

    output = tmp_path / "out.npy"
    lock = tmp_path / ".out.npy.resume.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another run, starting
        assert _embed(MODEL, texts, output).returncode == 0
        assert lock.exists()
