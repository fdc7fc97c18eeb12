"""`minibert embed --resume`: runs killed with SIGKILL at random points continue where they stopped
and end with exactly the uninterrupted output; a changed input, model or option is refused; memory
stays flat whatever the input size (minibert/resumable.py, the CLI)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import corpus
from helpers import assert_close, run_minibert
from tiny_hub import TINY as MODEL  # a random 2-layer BERT: fast, so many kills fit


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    texts = [" ".join(text.split()) for text in corpus.all_texts()[:2500]]
    path = tmp_path_factory.mktemp("resume") / "texts.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path


def _command(input_file: Path, output: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "minibert", "embed", "--input", str(input_file), "--output", str(output),
            "--model", str(MODEL), "--commit-every", "100", *extra]  # fmt: skip


def _run(command, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)


def _run_here(command):
    """The same command in this process (cli.main): for runs that are not killed."""
    assert command[1:3] == ["-m", "minibert"]
    return run_minibert(*command[3:])


def _state(output: Path) -> dict | None:
    try:
        return json.loads(output.with_name(f".{output.name}.resume.json").read_text())
    except (FileNotFoundError, ValueError):
        return None


def _kill_when(command, output: Path, target_texts: int) -> bool:
    """Start the run; SIGKILL it once its committed texts reach ``target_texts``. False if it
    finished first."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while process.poll() is None:
            state = _state(output)
            if state is not None and state["texts"] >= target_texts:
                time.sleep(random.random() * 0.05)  # somewhere inside the next chunk, or between chunks
                process.send_signal(signal.SIGKILL)
                process.wait()
                return True
            time.sleep(0.002)
        return False
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".npy", ".jsonl"])
def test_runs_killed_at_random_points_resume_to_the_uninterrupted_output(corpus_file, tmp_path, suffix):
    expected_file = tmp_path / f"whole{suffix}"
    assert _run(_command(corpus_file, expected_file)).returncode == 0
    output = tmp_path / f"resumed{suffix}"
    command = _command(corpus_file, output, "--resume")
    rng = random.Random(suffix)
    targets = sorted(rng.sample(range(1, 2400), 4 if suffix == ".npy" else 3))
    kills, resumed_at = 0, []
    for target in targets:
        if _kill_when(command, output, target):
            kills += 1
            resumed_at.append(_state(output)["texts"])
    assert kills >= len(targets) - 1, f"only {kills} runs were killed before finishing"
    assert not output.exists()  # a killed run never leaves a final file
    started = time.perf_counter()
    result = _run(command)
    resume_seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stderr
    assert f"resuming after {resumed_at[-1]} of 2500 texts" in result.stderr
    print(f"\n{suffix}: killed at {resumed_at} committed texts; the last resume took {resume_seconds:.1f} s")
    if suffix == ".npy":
        actual, expected = np.load(output), np.load(expected_file)
        assert actual.shape == expected.shape == (2500, 32)
        assert_close(actual, expected, "resumed .npy vs uninterrupted", atol=1e-5)
    else:
        actual = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
        expected = [json.loads(line) for line in expected_file.read_text(encoding="utf-8").splitlines()]
        assert [row["text"] for row in actual] == [row["text"] for row in expected]  # same rows, same order
        assert_close(np.array([r["embedding"] for r in actual]), np.array([r["embedding"] for r in expected]),
                     "resumed .jsonl vs uninterrupted", atol=1e-5)  # fmt: skip
    leftovers = sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("."))
    assert leftovers == [], f"resume files left behind: {leftovers}"


@pytest.fixture(scope="module")
def killed_run(corpus_file, tmp_path_factory) -> Path:
    """A directory holding texts.txt and the remains of a --resume run killed after 200 texts."""
    directory = tmp_path_factory.mktemp("killed")
    source = directory / "texts.txt"
    source.write_bytes(corpus_file.read_bytes())
    output = directory / "vectors.npy"
    assert _kill_when(_command(source, output, "--resume"), output, 200)
    return directory


def _copy_of(killed_run: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(texts.txt, vectors.npy) of a fresh copy of the killed run; the copy keeps the input's mtime."""
    import shutil

    target = tmp_path / "run"
    shutil.copytree(killed_run, target)
    return target / "texts.txt", target / "vectors.npy"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("input", "(input: sha256:"),
        ("--pooling=cls", "options: pooling null → [\"cls\"]"),
        ("--normalize", "options: normalize null → true"),
        ("--commit-every=50", "options: commit_every 100 → 50"),
        ("model", "model: "),
    ],
)
def test_resume_with_a_changed_input_model_or_option_is_refused(killed_run, tmp_path, change, message):
    source, output = _copy_of(killed_run, tmp_path)
    command = _command(source, output, "--resume")
    if change == "input":
        with source.open("a", encoding="utf-8") as handle:
            handle.write("one more line\n")
    elif change == "model":
        other = tmp_path / "other_model"
        other.mkdir()
        for name in os.listdir(MODEL):
            (other / name).write_bytes((MODEL / name).read_bytes())
        command[command.index("--model") + 1] = str(other)
    elif change == "--commit-every=50":
        command[command.index("--commit-every") + 1] = "50"
    else:
        command.append(change)
    result = _run_here(command)
    assert result.returncode == 1  # a file that does not fit the run: bad input (docs/cli.md's exit codes)
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("minibert: error:") and message in lines[-1], result.stderr
    assert not output.exists() and _state(output)["texts"] >= 200  # the earlier progress is kept


def test_a_plain_run_does_not_clobber_an_unfinished_resumable_one(killed_run, tmp_path):
    source, output = _copy_of(killed_run, tmp_path)
    result = _run_here(_command(source, output))
    assert result.returncode == 1 and "unfinished --resume run" in result.stderr
    assert _state(output) is not None
    command = _command(source, output)
    command[command.index("--model") + 1] = str(tmp_path / "no-model")  # refused before the model is looked for
    result = _run_here(command)
    assert result.returncode == 1 and "unfinished --resume run" in result.stderr, result.stderr


def test_resume_under_another_gemm_library_is_refused_and_under_the_same_one_continues(killed_run, tmp_path):
    # mkl and onednn round differently (1e-7): a run killed under one and resumed under the other
    # finished without a word, its rows matching neither uninterrupted run
    outcomes = {}
    recorded = _state(killed_run / "vectors.npy")["run"].get("GEMM library", "mkl")  # (none before the fix)
    for library in sorted({"mkl", "onednn", recorded}):
        source, output = _copy_of(killed_run, tmp_path / library)
        result = _run_here(_command(source, output, "--resume", "--gemm", library))
        outcomes[library] = result.returncode
        if result.returncode:
            assert result.returncode == 1, result.stderr
            assert "from a run with other settings (GEMM library: " in result.stderr, result.stderr
            assert _state(output)["texts"] >= 200
    assert sorted(outcomes.values()) == [0] + [1] * (len(outcomes) - 1), outcomes  # its own library resumes


def test_a_resume_state_from_before_the_gemm_library_was_recorded_is_refused(killed_run, tmp_path):
    source, output = _copy_of(killed_run, tmp_path)
    state_file = output.with_name(f".{output.name}.resume.json")
    state = json.loads(state_file.read_text())
    for key in ("GEMM library", "device"):
        state["run"].pop(key, None)
    state_file.write_text(json.dumps(state))
    result = _run_here(_command(source, output, "--resume"))
    assert result.returncode == 1 and "(GEMM library: (not recorded) → " in result.stderr, result.stderr
    assert "; device: (not recorded) → " in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()[-1:]) == 1 and _state(output)["texts"] >= 200


def test_the_copied_killed_run_resumes(killed_run, tmp_path):
    """The control for the refusals above: unchanged, the same copy resumes and completes."""
    source, output = _copy_of(killed_run, tmp_path)
    result = _run_here(_command(source, output, "--resume"))
    assert result.returncode == 0 and "resuming after" in result.stderr, result.stderr
    assert np.load(output).shape == (2500, 32)


def test_resume_needs_input_and_output(tmp_path):
    result = _run_here([sys.executable, "-m", "minibert", "embed", "x", "--resume", "--model", str(MODEL)])
    assert result.returncode == 2 and "--resume needs --input FILE and --output FILE" in result.stderr


@pytest.mark.slow
def test_memory_stays_flat_whatever_the_input_size(tmp_path):
    """Peak RSS of a whole run on 40,000 texts is within a few MB of the run on 10,000 texts. The texts
    are all different, of random lengths: each batch holds a count of real tokens not seen before,
    a GEMM shape oneDNN and ideep (torch's wrapper) each keep a primitive for, 1,024 by default
    (speed/malloc.py). With repeated texts the shapes repeat and the test could not fail; with both
    caches at 1,024, the run on 40,000 texts peaked 155 MB above the run on 10,000 (Intel Xeon).
    The smaller run is 10,000 texts because memory rises, boundedly, until the capped caches are
    full and hold the largest shapes the texts' lengths make: 2,000, 5,000, 10,000, 20,000 and
    40,000 texts peaked at 295, 303, 309, 313 and 315 MB, so comparing 2,000 with 20,000 measured
    the caches filling, not growth, and its margin was within run-to-run noise."""
    words = " ".join(corpus.all_texts()[:3000]).split()
    rng = random.Random(0)
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 50))) for _ in range(40_000)]
    peaks = {}
    for count in (10_000, 40_000):
        source = tmp_path / f"{count}.txt"
        source.write_text("\n".join(texts[:count]) + "\n", encoding="utf-8")
        probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
                 "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")  # fmt: skip
        # oneDNN by name: the choice measured for this tiny model may be MKL, which keeps no primitives
        command = _command(source, tmp_path / f"{count}.npy", "--resume", "--gemm", "onednn")
        command[command.index("--commit-every") + 1] = "2048"
        result = _run([sys.executable, "-c", probe, *command])
        assert result.returncode == 0, result.stderr
        peaks[count] = int(result.stdout.split()[-1]) / 1024  # MB
    print(f"\npeak RSS: 10,000 texts {peaks[10_000]:.0f} MB, 40,000 texts {peaks[40_000]:.0f} MB")
    assert peaks[40_000] - peaks[10_000] < 25, peaks


def test_a_state_write_cut_by_sigkill_leaves_nothing_after_the_resume(tmp_path):
    """SIGKILL while the state file is being replaced leaves that write's temporary file
    (.OUT.resume.json.XXXX.partial; found by the random-kill test): the next run removes it."""
    from minibert.apps.resumable import ResumableOutput

    out = tmp_path / "out.npy"
    first = ResumableOutput(out, {"run": "same"})
    assert first.start() == 0
    first.write(b"x" * 8)
    first.commit(2)
    first.close()
    stale = tmp_path / f".{first.state_path.name}.k1ll3d.partial"  # what write_atomically was writing
    stale.write_bytes(b'{"half": ')
    unrelated = tmp_path / ".other.npy.resume.json.k1ll3d.partial"  # another output's: kept
    unrelated.write_bytes(b"")
    again = ResumableOutput(out, {"run": "same"})
    assert again.start() == 2
    again.finish()
    assert out.read_bytes() == b"x" * 8
    assert sorted(path.name for path in tmp_path.iterdir()) == [unrelated.name, "out.npy"]


# ----------------------------------------------------------------------------- hardening (round 3)


HEADER = b"HEADER-8"  # a stand-in for the .npy header: 8 bytes
ROW = 4  # bytes per text


def _fresh(path: Path, **kwargs):
    from minibert.apps.resumable import ResumableOutput

    return ResumableOutput(path, {"run": "same"}, row_size=ROW, total=5, **kwargs)


def _two_texts_committed(out: Path) -> Path:
    """An output whose run committed two texts, then stopped (the state and the partial file stay)."""
    run = _fresh(out)
    run.start(HEADER)
    run.write(b"r0r0r1r1")
    run.commit(2)
    run.close()
    return out


def test_killed_inside_the_first_chunk_resumes_to_the_same_bytes(tmp_path):
    """The header is committed before the first chunk: a run killed inside that chunk resumes from
    0 texts and must not write the header a second time (it did: every row shifted, exit 0)."""
    out = tmp_path / "out.bin"
    first = _fresh(out)
    assert first.start(HEADER) == 0
    first.write(b"r0r0r1")  # part of the first chunk, never committed: the kill comes here
    first.close()
    again = _fresh(out)
    assert again.start(HEADER) == 0
    for row in range(5):
        again.write(f"r{row}r{row}".encode())
        again.commit(row + 1)
    again.finish()
    assert out.read_bytes() == HEADER + b"".join(f"r{row}r{row}".encode() for row in range(5))


def test_the_cli_resumes_a_run_stopped_inside_its_first_chunk(tmp_path, monkeypatch):
    """The same through `minibert embed --resume`: stopped at its first embedding call (after the
    header's commit), then run again: byte for byte the uninterrupted run's .npy."""
    from helpers import run_minibert
    from minibert import Embedder

    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"text number {i}\n" for i in range(7)))
    expected, output = tmp_path / "expected.npy", tmp_path / "out.npy"
    common = ["embed", "--input", str(texts), "--model", str(MODEL), "--resume", "--commit-every", "3"]
    assert run_minibert(*common, "--output", str(expected)).returncode == 0
    embed = Embedder.embed_with_report

    def stopped(self, texts, *args, **kwargs):
        if texts:  # (no text: the flags checked against the model before the run starts)
            raise KeyboardInterrupt
        return embed(self, texts, *args, **kwargs)

    monkeypatch.setattr(Embedder, "embed_with_report", stopped)
    assert run_minibert(*common, "--output", str(output)).returncode == 130
    state = json.loads((tmp_path / ".out.npy.resume.json").read_text())
    assert state["texts"] == 0 and state["bytes"] > 0  # the header alone was committed
    monkeypatch.setattr(Embedder, "embed_with_report", embed)
    assert run_minibert(*common, "--output", str(output)).returncode == 0
    assert output.read_bytes() == expected.read_bytes()


def test_a_second_run_on_the_same_output_is_refused(tmp_path):
    from minibert.apps.resumable import ResumeError

    out = tmp_path / "out.bin"
    first = _fresh(out)
    first.start(HEADER)
    with pytest.raises(ResumeError, match="another minibert run is writing .*out.bin"):
        _fresh(out).start(HEADER)
    first.close()  # the lock goes with the run (a killed process's lock goes with it too)
    second = _fresh(out)
    assert second.start(HEADER) == 0
    second.close()


@pytest.mark.parametrize(
    "change,says",
    [
        ({"bytes": -1}, "bytes must be a count"),
        ({"texts": -2}, "texts must be a count"),
        ({"texts": True}, "texts must be a count"),
        ({"bytes": 8 + 3 * ROW + 1}, "is not the header \\+ 2 rows of 4 bytes"),
        ({"texts": 9, "bytes": 8 + 9 * ROW}, "texts 9 is more than the 5 of the input"),
        ({"run": "same"}, "run must be an object"),
        ({"bytes": 3, "texts": 0}, "less than the 8-byte header"),
        ({"version": 7}, "version 7"),
        ({"version": True}, "version True"),  # (true == 1 in Python: it was taken for version 1)
        ({"version": 1.0}, "version 1.0"),
    ],
)
def test_a_state_file_that_lies_is_refused(tmp_path, change, says):
    from minibert.apps.resumable import ResumeError

    out = _two_texts_committed(tmp_path / "out.bin")
    state_file = tmp_path / ".out.bin.resume.json"
    state = {**json.loads(state_file.read_text()), **change}
    state_file.write_text(json.dumps(state))
    with pytest.raises(ResumeError, match=says):
        _fresh(out).start(HEADER)
    state_file.write_text('["not", "an", "object"]')
    with pytest.raises(ResumeError, match="not a JSON object"):
        _fresh(out).start(HEADER)


def test_the_partial_file_is_checked_against_the_state(tmp_path):
    from minibert.apps.resumable import ResumableOutput, ResumeError

    out = _two_texts_committed(tmp_path / "out.bin")
    partial = tmp_path / ".out.bin.partial"
    partial.write_bytes(b"OTHERHDR" + b"r0r0r1r1")  # another header
    with pytest.raises(ResumeError, match="does not start with this run's header"):
        _fresh(out).start(HEADER)
    partial.write_bytes(HEADER + b"r0r0")  # shorter than the commit
    with pytest.raises(ResumeError, match="names 16 bytes .* which has 12"):
        _fresh(out).start(HEADER)
    lines = tmp_path / "out.jsonl"  # .jsonl: one line per committed text
    run = ResumableOutput(lines, {"run": "same"}, lines=True, total=5)
    run.start()
    run.write(b'{"a": 1}\n{"b": 2}\n')
    run.commit(2)
    run.close()
    state_file = tmp_path / ".out.jsonl.resume.json"
    state_file.write_text(json.dumps({**json.loads(state_file.read_text()), "texts": 3}))
    with pytest.raises(ResumeError, match="holds 2 lines where .* says 3 texts"):
        ResumableOutput(lines, {"run": "same"}, lines=True, total=5).start()


@pytest.mark.parametrize("with_state", [True, False])
def test_the_partial_file_is_never_written_through_a_symlink(tmp_path, with_state):
    from minibert.apps.resumable import ResumeError

    out = tmp_path / "out.bin"
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious " * 1000)
    if with_state:
        run = _fresh(out)
        run.start(HEADER)
        run.write(b"r0r0")
        run.commit(1)
        run.close()
        (tmp_path / ".out.bin.partial").unlink()
    (tmp_path / ".out.bin.partial").symlink_to(victim)
    with pytest.raises(ResumeError, match="is a symbolic link"):
        _fresh(out).start(HEADER)
    assert victim.read_bytes() == b"precious " * 1000


@pytest.mark.parametrize("step", ["after the rows are written", "between the fsync and the state write"])
@pytest.mark.parametrize("at_commit", range(6))
def test_a_kill_at_any_commit_step_resumes_to_the_same_bytes(tmp_path, monkeypatch, step, at_commit):
    """Killed at commit ``at_commit`` (0 = the header's), either before that commit starts (rows
    written, not yet durable) or between its two steps (rows durable, the state not yet replaced):
    the resumed run's output is byte for byte the uninterrupted one's."""
    from minibert.apps import resumable

    out = tmp_path / "out.bin"
    expected = HEADER + b"".join(f"r{row}r{row}".encode() for row in range(5))
    commits = [0]
    real_write = resumable.write_atomically

    def interrupted(path, data):
        if commits[0] == at_commit and step == "between the fsync and the state write":
            raise KeyboardInterrupt
        commits[0] += 1
        return real_write(path, data)

    monkeypatch.setattr(resumable, "write_atomically", interrupted)
    run = _fresh(out)
    try:
        done = run.start(HEADER)
        for row in range(done, 5):
            run.write(f"r{row}r{row}".encode())
            if commits[0] == at_commit and step == "after the rows are written":
                raise KeyboardInterrupt
            run.commit(row + 1)
        run.finish()
    except KeyboardInterrupt:
        run.close()
    monkeypatch.setattr(resumable, "write_atomically", real_write)
    if out.exists():  # the run got through (the kill came after its last commit)
        assert out.read_bytes() == expected
        return
    again = _fresh(out)
    for row in range(again.start(HEADER), 5):
        again.write(f"r{row}r{row}".encode())
        again.commit(row + 1)
    again.finish()
    assert out.read_bytes() == expected


def test_a_run_found_finished_at_start_has_nothing_to_write_or_commit(tmp_path):
    """start() completes a run killed as it finished and says write, commit and finish then have
    nothing to do; write and commit used the file handle, None there (AttributeError)."""
    out = tmp_path / "out.bin"
    run = _fresh(out)
    run.start(HEADER)
    run.write(b"r0r0r1r1r2r2r3r3r4r4")
    run.commit(5, finished=True)  # finish() is killed here, before the rename
    run.close()
    again = _fresh(out)
    assert again.start(HEADER) == 5 and again.finished
    again.write(b"")
    again.commit(5)
    again.finish()
    again.close()
    assert out.read_bytes() == HEADER + b"r0r0r1r1r2r2r3r3r4r4"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.bin"]


def test_an_output_link_to_a_missing_folder_is_named_as_the_output_with_resume(tmp_path):
    """`--output lk/out.npy` a link into a folder that does not exist: without --resume, "cannot write
    lk/out.npy: the folder ... does not exist"; with it, "cannot create the lock file
    .../.out.npy.resume.lock", a hidden file cli.md promises never to name. Now the same line for both."""
    texts = tmp_path / "texts.txt"
    texts.write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "lk").mkdir()
    (tmp_path / "lk" / "out.npy").symlink_to(tmp_path / "missing" / "out.npy")
    said = set()
    for resume in ([], ["--resume"]):
        result = run_minibert("embed", "--input", str(texts), "--output", str(tmp_path / "lk" / "out.npy"), *resume,
                              "--model", str(MODEL))  # fmt: skip
        assert result.returncode == 1, result.stderr
        said.add(result.stderr.strip().splitlines()[-1])
    assert said == {f"minibert: error: cannot write {tmp_path / 'lk' / 'out.npy'}: the folder {tmp_path / 'missing'} "
                    "does not exist"}, said
