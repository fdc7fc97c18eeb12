"""The command's files follow the user's rules: the umask's modes, no clobbered input, one row per
input line (the line rule), stdin, every text writable in every format."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from helpers import pipe_holding
from helpers import run_minibert as run
from minibert.apps import cli
from tiny_hub import TINY


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("suffix", [".npy", ".jsonl"])
@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002, 0o077])
def test_a_new_output_gets_the_umask_mode_and_a_replaced_one_keeps_its_mode(minilm_dir, tmp_path, suffix, umask):
    source = tmp_path / "in.txt"
    source.write_text("one\ntwo\n", encoding="utf-8")
    fresh = tmp_path / f"fresh{suffix}"
    result = run("embed", "--input", str(source), "--output", str(fresh), "--model", str(minilm_dir), umask=umask)
    assert result.returncode == 0, result.stderr
    assert _mode(fresh) == 0o666 & ~umask, oct(_mode(fresh))
    kept = tmp_path / f"kept{suffix}"
    kept.write_bytes(b"old")
    os.chmod(kept, 0o604)
    result = run("embed", "--input", str(source), "--output", str(kept), "--model", str(minilm_dir), umask=umask)
    assert result.returncode == 0, result.stderr
    assert _mode(kept) == 0o604 and kept.read_bytes() != b"old"


def test_output_that_is_the_input_is_refused_before_reading(minilm_dir, tmp_path):
    source = tmp_path / "texts.jsonl"
    source.write_text('{"text": "one"}\n', encoding="utf-8")
    (tmp_path / "link.jsonl").symlink_to(source)
    os.link(source, tmp_path / "hard.jsonl")
    (tmp_path / "sub").mkdir()
    before = source.read_bytes()
    for output in (source, tmp_path / "sub" / ".." / "texts.jsonl", tmp_path / "link.jsonl", tmp_path / "hard.jsonl"):
        result = run("embed", "--input", str(source), "--output", str(output), "--model", str(tmp_path / "nothing"))
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1, result.stderr
        assert "is the input file" in lines[0], lines[0]  # refused before the (missing) model is looked at
        assert source.read_bytes() == before


@pytest.mark.parametrize("command", [["embed", "hello"], ["classify", "hello"], ["explore", "hello"]])
def test_an_output_that_is_a_fifo_or_under_a_file_is_refused_before_loading(tmp_path, command):
    # `embed "hi" --output ff.jsonl` with ff.jsonl a FIFO embedded, then renamed a regular file over it.
    fifo = tmp_path / ("page.html" if command[0] == "explore" else "vectors.jsonl")
    os.mkfifo(fifo)
    result = run(*command, "--output", str(fifo), "--model", str(tmp_path / "nothing"))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert f"cannot write {fifo}: it is a FIFO (named pipe), not a regular file" in lines[0], lines[0]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == [fifo.name]
    text = tmp_path / "notes.txt"
    text.write_text("x\n")
    result = run(*command, "--output", str(text / fifo.name), "--model", str(tmp_path / "nothing"))
    assert result.returncode == 1 and f"{text} is a file, not a directory" in result.stderr, result.stderr


def _texts_of(jsonl_output) -> list[str]:
    return [json.loads(line)["text"] for line in jsonl_output.read_text(encoding="utf-8").splitlines()]


def test_the_line_rule_one_row_per_line(minilm_dir, tmp_path):
    """\\n and \\r\\n end a line; a bare \\r is text; a blank line is the empty text (.txt and .jsonl
    alike); a last line without \\n counts."""
    text = tmp_path / "in.txt"
    text.write_bytes(b"first\r\nsecond\rstill second\n\n  \nlast without newline")
    out = tmp_path / "out.jsonl"
    assert run("embed", "--input", str(text), "--output", str(out), "--model", str(minilm_dir)).returncode == 0
    assert _texts_of(out) == ["first", "second\rstill second", "", "  ", "last without newline"]

    records = tmp_path / "in.jsonl"
    records.write_bytes(b'{"text": "a"}\r\n\n   \n{"text": "b\\rc"}\n{"text": "d"}')
    out = tmp_path / "out2.jsonl"
    assert run("embed", "--input", str(records), "--output", str(out), "--model", str(minilm_dir)).returncode == 0
    assert _texts_of(out) == ["a", "", "", "b\rc", "d"]
    npy = tmp_path / "out.npy"
    assert run("embed", "--input", str(records), "--output", str(npy), "--model", str(minilm_dir)).returncode == 0
    assert np.load(npy).shape == (5, 384)


@pytest.mark.parametrize("how", [["--input", "-"], ["-"]], ids=["--input -", "-"])
def test_stdin_is_read_one_text_per_line(minilm_dir, tmp_path, how):
    out = tmp_path / "out.jsonl"
    result = run("embed", *how, "--output", str(out), "--model", str(minilm_dir), stdin=b"alpha\r\nbeta\rgamma\n\n")
    assert result.returncode == 0, result.stderr
    assert _texts_of(out) == ["alpha", "beta\rgamma", ""]
    result = run("embed", *how, "--model", str(minilm_dir), stdin="héllo wörld\n".encode())
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["text"] for row in rows] == ["héllo wörld"] and len(rows[0]["embedding"]) == 384


@pytest.mark.parametrize("kind", ["pipe", "fifo"])
def test_a_pipe_as_input_is_read_once_as_stdin_is(minilm_dir, tmp_path, kind):
    """--input <(cmd) or a named FIFO: every line embedded, as from a file (a pipe read to count its
    lines was empty when read again: "changed while it was read"; a FIFO opened again waited forever)."""
    source = tmp_path / "in.txt"
    source.write_text("one\ntwo\n\nthree\n", encoding="utf-8")
    reference = tmp_path / "reference.npy"
    assert run("embed", "--input", str(source), "--output", str(reference), "--model", str(minilm_dir)).returncode == 0
    out = tmp_path / "out.npy"
    with pipe_holding(source.read_bytes(), tmp_path / "fifo.txt" if kind == "fifo" else None) as path:
        result = run("embed", "--input", path, "--output", str(out), "--model", str(minilm_dir))
    assert result.returncode == 0, result.stderr
    assert "wrote 4 embeddings" in result.stderr
    np.testing.assert_array_equal(np.load(out), np.load(reference))  # the same texts, the same batches
    with pipe_holding(b"x\n") as path:
        refused = run("embed", "--input", path, "--output", str(tmp_path / "r.npy"), "--resume")
    assert refused.returncode == 2 and "a pipe" in refused.stderr and len(refused.stderr.splitlines()) == 1


def test_resume_from_stdin_is_refused(tmp_path):
    result = run("embed", "--input", "-", "--output", str(tmp_path / "o.npy"), "--resume", stdin=b"x\n")
    assert result.returncode == 2 and "not stdin" in result.stderr


def test_rounded_terminal_values_have_no_made_up_negative_zero():
    values = np.array([-4e-7, -0.0, 4e-7, -0.25, 0.1234567], dtype=np.float32)
    from minibert.apps.embed_files import _rounded

    rounded = _rounded(values)
    assert json.dumps(rounded) == "[0.0, 0.0, 0.0, -0.25, 0.123457]"


def test_every_text_can_be_written_in_every_format(minilm_dir, tmp_path, capsys):
    """Lone surrogates (what Python makes of undecodable bytes in a command-line argument), NUL,
    controls, astral characters: written as valid UTF-8 JSON, read back as the same text."""
    texts = ["bad byte \udcff here", "nul \x00 and bell \x07", "astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 😀", "rtl \u202e text", ""]
    for suffix in (".jsonl", ".npy"):
        output = tmp_path / f"out{suffix}"
        assert cli.main(["embed", *texts, "--output", str(output), "--model", str(minilm_dir)]) == 0
        if suffix == ".jsonl":
            assert _texts_of(output) == texts  # read back as UTF-8: no invalid bytes were written
        else:
            assert np.load(output).shape == (len(texts), 384)
    capsys.readouterr()
    assert cli.main(["embed", *texts, "--model", str(minilm_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["text"] for line in lines] == texts
    for line in lines:
        line.encode("utf-8")  # printable on a UTF-8 terminal


@pytest.mark.parametrize("command", [["fill-mask", "Paris is the [MASK] of France."], ["next-sentence", "A.", "B."]])
def test_commands_that_need_heads_use_the_bundled_toy_offline(command, tmp_path):
    """Offline, without --model: the bundled minibert/fortunes-mini (it has the heads; the demo's
    all-MiniLM-L6-v2 has none), named in one line that says it is a toy, then the usual model line."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run([sys.executable, "-m", "minibert", *command], capture_output=True, text=True, env=env,
                            timeout=120, cwd=tmp_path)  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 0 and len(lines) == 2, result.stderr
    assert "is not reachable" in lines[0] and "using the bundled minibert/fortunes-mini, a toy BERT" in lines[0]
    assert lines[1] == "minibert: model minibert/fortunes-mini" and result.stdout.strip()
    assert "all-MiniLM-L6-v2" not in result.stderr


def test_warnings_are_one_line_in_the_commands_terms(tmp_path):
    """A library warning (here: a text cut at the model's length) reaches stderr as one
    'minibert: warning:' line naming the command's option, with no source line echoed."""
    model = str(TINY)
    long_text = " ".join(["word"] * 2000)
    result = run("similarity", long_text, "short text", "--model", model)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("minibert: warning: 1 of 2 texts") and "--long-text window" in lines[0], lines[0]
    assert "long_text=" not in result.stderr and "warnings.warn" not in result.stderr


def test_an_output_of_the_wrong_kind_is_one_line_naming_it_before_any_work(tmp_path):
    """embed --output DIR.npy (a directory) and example-data --output FILE: said at once, naming the
    path (they were errno messages: the directory's only after every text was embedded, naming the
    temporary file)."""
    (tmp_path / "d.npy").mkdir()
    embedded = run("embed", "hi", "--output", str(tmp_path / "d.npy"), "--model", str(tmp_path / "no model"))
    assert embedded.returncode == 1 and embedded.stderr.strip().splitlines() == [
        f"minibert: error: --output {tmp_path / 'd.npy'} is a directory: give the name of a file to write"]
    (tmp_path / "texts.txt").write_text("kept\n", encoding="utf-8")
    written = run("example-data", "languages", "--output", str(tmp_path / "texts.txt"))
    assert written.returncode == 1 and written.stderr.strip().splitlines() == [
        f"minibert: error: --output {tmp_path / 'texts.txt'} is a file, not a folder: give a folder for the data "
        "set's files"]  # fmt: skip
    assert (tmp_path / "texts.txt").read_text(encoding="utf-8") == "kept\n"
    if os.path.exists("/dev/full"):  # not "a file": a device (it said "is a file" of anything not a folder)
        device = run("example-data", "languages", "--output", "/dev/full")
        assert device.returncode == 1 and device.stderr.strip().splitlines() == [
            "minibert: error: --output /dev/full is a character device, not a folder: give a folder for the data "
            "set's files"]  # fmt: skip


def test_a_name_too_long_for_the_file_system_is_said_without_python_s_errno(tmp_path):
    """A name longer than the file system allows (NAME_MAX, 255 bytes on ext4 and tmpfs) was
    ``[Errno 36] File name too long: '...'``, and vocab added "create it first" to it: now the path,
    then why, and advice only where it is true."""
    long_name = "a" * (os.pathconf(tmp_path, "PC_NAME_MAX") + 1)
    too_long = tmp_path / long_name
    embedded = run("embed", "hi", "--output", f"{too_long}.npy", "--model", str(tmp_path / "no model"))
    assert embedded.returncode == 1 and embedded.stderr.strip().splitlines() == [
        f"minibert: error: cannot write {too_long}.npy: File name too long"], embedded.stderr  # (docs/cli.md's words)
    converted = run("convert", str(tmp_path / "no model"), str(too_long))
    assert converted.returncode == 1 and converted.stderr.strip().splitlines() == [
        f"minibert: error: cannot write {too_long}: File name too long"], converted.stderr
    (tmp_path / "corpus.txt").write_text("a few words\n", encoding="utf-8")
    learned = run("vocab", "--input", str(tmp_path / "corpus.txt"), "--output", str(too_long))
    assert learned.returncode == 1 and learned.stderr.strip().splitlines() == [
        f"minibert: error: cannot write {too_long}: File name too long"], learned.stderr
    learned = run("vocab", "--input", str(tmp_path / "corpus.txt"), "--output", str(tmp_path / "corpus.txt"))
    assert learned.stderr.strip().splitlines() == [
        f"minibert: error: output directory {tmp_path / 'corpus.txt'} is a file, not a directory"], learned.stderr


@pytest.mark.parametrize("resume", [False, True])
def test_an_output_that_is_a_symbolic_link_is_written_where_it_points(minilm_dir, tmp_path, resume):
    """`--output link.npy` replaced the link itself with a regular file and left its target as it was
    (the rename goes over whatever has the name). As the shell's `>`, `cp` and np.save do, the vectors
    now go to the link's target, in its folder, and the link stays; `--resume` too."""
    source = tmp_path / "in.txt"
    source.write_text("one\ntwo\nthree\n", encoding="utf-8")
    flags = ["--resume"] if resume else []
    plain = tmp_path / "plain.npy"
    assert run("embed", "--input", str(source), "--output", str(plain), "--model", str(minilm_dir)).returncode == 0
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "vectors.npy"
    target.write_bytes(b"old")
    os.chmod(target, 0o604)
    link = tmp_path / "link.npy"
    link.symlink_to(os.path.relpath(target, tmp_path))
    result = run("embed", "--input", str(source), "--output", str(link), "--model", str(minilm_dir), *flags)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == os.path.relpath(target, tmp_path)
    assert target.read_bytes() == plain.read_bytes() and _mode(target) == 0o604
    assert sorted(os.listdir(tmp_path / "elsewhere")) == ["vectors.npy"]  # no temporary, state or lock left
    assert sorted(os.listdir(tmp_path)) == ["elsewhere", "in.txt", "link.npy", "plain.npy"]
    dangling = tmp_path / "dangling.npy"
    dangling.symlink_to("elsewhere/new.npy")  # a link to a file not made yet: the file is made, as `>` makes it
    result = run("embed", "--input", str(source), "--output", str(dangling), "--model", str(minilm_dir), *flags)
    assert result.returncode == 0, result.stderr
    assert dangling.is_symlink() and (tmp_path / "elsewhere" / "new.npy").read_bytes() == plain.read_bytes()
    if resume:  # an unfinished run through the link: its files are named where they are, beside the target
        state = tmp_path / "elsewhere" / ".vectors.npy.resume.json"
        state.write_text("{}")
        result = run("embed", "--input", str(source), "--output", str(link), "--model", str(minilm_dir))
        assert result.returncode == 1 and f"or delete {state}, " in result.stderr, result.stderr


def test_jsonl_is_matched_in_any_case_and_other_structured_inputs_are_refused(minilm_dir, tmp_path):
    # DOCS.JSONL was read as plain text: each JSON line itself embedded, while --output x.JSONL was refused
    (tmp_path / "DOCS.JSONL").write_text('{"text": "one"}\n{"text": "two"}\n', encoding="utf-8")
    (tmp_path / "docs.txt").write_text("one\ntwo\n", encoding="utf-8")
    upper = tmp_path / "OUT.JSONL"
    result = run("embed", "--model", str(minilm_dir), "--input", str(tmp_path / "DOCS.JSONL"), "--output", str(upper))
    assert result.returncode == 0, result.stderr
    plain = run("embed", "--model", str(minilm_dir), "--input", str(tmp_path / "docs.txt"), "--json")
    assert upper.read_text(encoding="utf-8").count("\n") == 2 and _texts_of(upper) == ["one", "two"]
    assert [row["text"] for row in map(json.loads, plain.stdout.splitlines())] == ["one", "two"]
    for name in ("docs.json", "docs.ndjson", "docs.csv", "DOCS.TSV"):
        (tmp_path / name).write_text("text\none\n", encoding="utf-8")
        refused = run("embed", "--model", str(minilm_dir), "--input", str(tmp_path / name))
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.count("\n") == 1 and "is not read by this command: give .txt" in refused.stderr


def test_a_name_that_is_only_its_suffix_is_read_and_written_by_that_suffix(minilm_dir, tmp_path):
    """``"$DIR/$SPLIT.jsonl"`` with SPLIT unset: a file named ``.jsonl`` was read as plain text (each JSON
    line embedded as it is; Path.suffix is "" there), a ``.csv`` so named was not refused, and --output
    ``.npy`` was refused with "must end in .npy or .jsonl, got .npy". The name's suffix decides, as for
    any other name."""
    folder = tmp_path / "split"
    folder.mkdir()
    (folder / ".jsonl").write_text('{"text": "hello"}\n{"text": "world"}\n', encoding="utf-8")
    read = run("embed", "--input", str(folder / ".jsonl"), "--json", "--model", str(minilm_dir))
    assert read.returncode == 0, read.stderr
    assert [row["text"] for row in map(json.loads, read.stdout.splitlines())] == ["hello", "world"]
    (folder / ".csv").write_text("text\none\n", encoding="utf-8")
    refused = run("embed", "--input", str(folder / ".csv"), "--model", str(minilm_dir))
    assert refused.returncode == 2 and "a .csv file is not read by this command" in refused.stderr, refused.stderr
    (folder / "out").mkdir()
    for name in (".npy", ".jsonl", ".NPY"):
        written = run("embed", "x", "y", "--output", str(folder / "out" / name), "--model", str(minilm_dir))
        assert written.returncode == 0, written.stderr
    assert np.load(folder / "out" / ".npy").shape == (2, 384)
    assert _texts_of(folder / "out" / ".jsonl") == ["x", "y"]
    classified = run("classify", "x", "--model", str(tmp_path / "no model"), "--output", str(folder / "c" / ".jsonl"))
    assert "--output must end in" not in classified.stderr  # (the model is missing: exit 1, about the model)
    assert classified.returncode == 1 and classified.stderr.count("minibert: error:") == 1, classified.stderr


def test_an_undecodable_argument_is_printed_escaped_under_a_strict_utf8_stdout(tmp_path, monkeypatch):
    # under LANG=en_US.UTF-8 stdout is strict UTF-8: `similarity $'caf\xe9' cafe` printed the table's
    # header, then died with "surrogates not allowed"; embed's terminal summary did the same
    from helpers import child_environment
    from minibert.apps import embed_files

    tiny = TINY
    command = [sys.executable, "-m", "minibert", "similarity", b"caf\xe9", "cafe", "--model", str(tiny)]
    result = subprocess.run(command, capture_output=True, env=child_environment(PYTHONIOENCODING="utf-8"), timeout=300)
    assert result.returncode == 0, result.stderr.decode()
    assert b"[0] caf\\udce9\n[1] cafe\n" in result.stdout
    import io

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    summary = embed_files._summary(0, "a\udcffb", np.ones(3, dtype=np.float32))
    assert summary.startswith("[0] a\\udcffb\n") and summary.encode("utf-8")


def test_example_data_says_how_many_squad_questions_each_version_holds(tmp_path):
    """Issue r21 reports, item 7: example-data squad said "3 paragraphs, 10 questions" of every file;
    v1.1's hold 7 questions, v2.0's 10 of which 3 are unanswerable. Counted here in the files written."""
    result = run("example-data", "squad", "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr
    counts = {}
    for name in ("train-v1.1.json", "dev-v1.1.json", "train-v2.0.json", "dev-v2.0.json"):
        paragraphs = [p for article in json.loads((tmp_path / name).read_text())["data"] for p in article["paragraphs"]]
        questions = [q for paragraph in paragraphs for q in paragraph["qas"]]
        counts[name] = (len(paragraphs), len(questions), sum(q.get("is_impossible", False) for q in questions))
    assert counts == {"train-v1.1.json": (3, 7, 0), "dev-v1.1.json": (3, 7, 0), "train-v2.0.json": (3, 10, 3),
                      "dev-v2.0.json": (3, 10, 3)}  # fmt: skip
    said = result.stderr.strip().splitlines()[-1]
    assert "3 paragraphs" in said and "7 questions in v1.1's, 10 (3 of them unanswerable) in v2.0's" in said, said
    assert "10 questions, in" not in said
