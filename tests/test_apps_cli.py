"""The minibert command: outputs, files, errors, interruptions."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import corpus
import minibert
from helpers import assert_close, run_minibert
from minibert import Embedder
from minibert.apps import cli, embed_files
from tiny_hub import TINY

run = run_minibert  # in this process: the subprocess cases below are the ones that need a process


def test_tokenize_table(minilm_dir, capsys):
    assert cli.main(["tokenize", "I was thirsty!", "--pair", "I drank water :D", "--model", str(minilm_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["token", "id", "type", "mask"]
    assert [line.split() for line in lines[1:3]] == [["[CLS]", "101", "0", "1"], ["i", "1045", "0", "1"]]
    assert lines[-1].split() == ["[SEP]", "102", "1", "1"]
    assert len(lines) == 13


def test_embed_file_to_npy_matches_sentence_transformers(minilm_dir, tmp_path):
    st = pytest.importorskip("sentence_transformers")
    texts = [text.replace("\n", " ") for text in corpus.all_texts()[::2000]][:60]
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    result = run("embed", "--input", str(source), "--output", str(tmp_path / "out.npy"), "--normalize",
                 "--model", str(minilm_dir))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"model {minilm_dir}" in result.stderr
    vectors = np.load(tmp_path / "out.npy")
    expected = st.SentenceTransformer(str(minilm_dir), device="cpu").encode(texts, normalize_embeddings=True)
    assert vectors.shape == (len(texts), 384)
    cosine = (vectors * expected).sum(1)
    assert cosine.min() >= 0.99999, f"min cosine {cosine.min():.7f}"


def test_embed_jsonl_streams_in_chunks(minilm_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(embed_files, "CHUNK", 3)  # force several chunks (the --commit-every default)
    texts = ["first text", "", "third, with ünïcode", "fourth", "fifth 😀", "sixth", "seventh"]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": t, "id": i}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert cli.main(["embed", "--input", str(source), "--output", str(out), "--model", str(minilm_dir)]) == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [record["text"] for record in records] == texts
    expected = Embedder.from_pretrained(minilm_dir).embed(texts)
    assert_close(
        np.array([record["embedding"] for record in records]), expected, "jsonl output (chunks of 3 vs one batch)", 1e-5
    )
    assert cli.main(["embed", "--input", str(source), "--output", str(tmp_path / "o.npy"), "--model", str(minilm_dir),
                     "--pooling", "mean_max", "--layers=-1,-2"]) == 0  # fmt: skip
    assert np.load(tmp_path / "o.npy").shape == (7, 1536)


def test_embed_to_stdout_and_similarity(minilm_dir, capsys):
    assert cli.main(["embed", "hello world", "second", "--model", str(minilm_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and len(json.loads(lines[0])["embedding"]) == 384
    assert cli.main(["similarity", "bank vault", "river bank", "money", "--model", str(minilm_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    matrix = np.array([[float(v) for v in line.split()[1:]] for line in out[-3:]])
    vectors = Embedder.from_pretrained(minilm_dir).embed(["bank vault", "river bank", "money"], normalize=True)
    assert_close(matrix, vectors @ vectors.T, "similarity matrix", 1e-4)


def test_tokenize_of_a_long_text_warns_in_the_commands_terms(minilm_dir):
    """The tokenizer's own warning told a command-line user to "Pass truncation=True ... and
    return_overflowing_tokens=True with a stride": Python keywords, which tokenize has no flags for."""
    done = run_minibert("tokenize", "word " * 600, "--model", str(minilm_dir))
    warned = [line for line in done.stderr.splitlines() if line.startswith("minibert: warning:")]
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 603  # the header and every token
    assert warned == ["minibert: warning: 602 tokens, more than the model's 512 (model_max_length): it reads no more "
                      "at once; embed cuts a longer text (--long-text window reads all of it)"], done.stderr
    assert "truncation=True" not in done.stderr and "stride" not in done.stderr
    assert "warning" not in run_minibert("tokenize", "word " * 500, "--model", str(minilm_dir)).stderr


def test_fill_mask_command(google_base, capsys):
    directory, _ = google_base
    assert cli.main(["fill-mask", "I [MASK] your father.", "--model", str(directory), "--top-k", "3"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert cli.main(["fill-mask", "I [MASK] your father.", "--model", str(directory), "--targets", "love", "am"]) == 0
    expected = minibert.fill_mask("I [MASK] your father.", model=directory, targets=["love", "am"])
    assert [line.split()[1] for line in capsys.readouterr().out.splitlines()] == [a["token_str"] for a in expected]


def test_fill_mask_targets_that_name_no_piece_are_one_usage_line_naming_the_flag():
    """``--targets ""``: a warning per target, then "targets must name at least one piece", exit 1;
    a flag's value that cannot be used is exit 2, one line naming --targets (docs/cli.md)."""
    done = run_minibert("fill-mask", "I [MASK] you", "--model", "minibert/fortunes-mini", "--targets", "", "  ")
    errors = [line for line in done.stderr.splitlines() if line != "minibert: model minibert/fortunes-mini"]
    assert done.returncode == 2 and errors == ["minibert: error: --targets must be words of which at least one has a "
                                               "piece of the vocabulary (none of these 2 has one), got ['', ' ']"], \
        done.stderr  # fmt: skip
    kept = run_minibert("fill-mask", "I [MASK] you", "--model", "minibert/fortunes-mini", "--targets", "", "love")
    assert kept.returncode == 0 and "the target '' is not in the vocabulary and has no piece" in kept.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (["embed", "x", "--model", "/no/such/dir"], "is not an existing directory"),
        (["embed", "--input", "/no/such/file.txt", "--model", "{minilm}"], "input file not found: /no/such/file.txt"),
        (["embed", "x", "--output", "out.csv", "--model", "{minilm}"], "--output must end in .npy or .jsonl"),
        (["embed", "--model", "{minilm}"], "nothing to embed"),
        (["embed", "x", "--max-length", "100000", "--model", "{minilm}"], "--max-length must be an int from 3"),
        (["embed", "x", "--layers", "12", "--model", "{minilm}"], "--layers must be a hidden state of this model"),
        (["fill-mask", "no mask", "--model", "{minilm}"], "has no tensors for the masked-LM head"),
        (["tokenize", "x", "--model", "offline-org/never-downloaded"], "not in the local Hugging Face cache"),
    ],
)
def test_errors_are_one_line(args, message, minilm_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [arg.replace("{minilm}", str(minilm_dir)) for arg in args]
    result = run(*args)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("minibert: error")]
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.iterdir()), "a failed run must not leave files behind"


def test_bad_jsonl_line_is_named(minilm_dir, tmp_path, capsys):
    source = tmp_path / "bad.jsonl"
    source.write_text('{"text": "ok"}\n{"txt": "no text field"}\n', encoding="utf-8")
    assert (
        cli.main(["embed", "--input", str(source), "--output", str(tmp_path / "o.npy"), "--model", str(minilm_dir)])
        == 1
    )
    assert f'{source}:2: expected an object with a "text" string' in capsys.readouterr().err
    assert not (tmp_path / "o.npy").exists()


def test_usage_errors_are_one_line():
    result = run("embed", "--pooling", "median", "x")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("minibert: error: argument --pooling")


def test_debug_shows_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "minibert", "--debug", "embed", "x", "--model",
                             str(tmp_path / "missing")], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode != 0 and "Traceback" in result.stderr


ENDING = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGALRM]
IN_THE_FULL_RUN_ONLY = {signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGALRM}  # same path as SIGTERM


@pytest.mark.parametrize(
    "signum",
    [pytest.param(signum, id=signal.Signals(signum).name,
                  marks=[pytest.mark.slow] if signum in IN_THE_FULL_RUN_ONLY else []) for signum in ENDING],
)  # fmt: skip
def test_interrupted_run_leaves_no_partial_file_and_keeps_the_old_one(signum, minilm_dir, tmp_path):
    texts = [text.replace("\n", " ") for text in corpus.docstrings()] * 20
    source = tmp_path / "big.txt"
    source.write_text("\n".join(texts), encoding="utf-8")
    output = tmp_path / "vectors.npy"
    np.save(output, np.arange(6.0))
    before = output.read_bytes()
    process = subprocess.Popen(
        [sys.executable, "-m", "minibert", "embed", "--input", str(source), "--output", str(output),
         "--model", str(minilm_dir), "--no-progress"],
        stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),  # as from a terminal, whatever this runner ignores
    )  # fmt: skip
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not list(tmp_path.glob(".vectors.npy.*.partial")):
            time.sleep(0.05)
        assert list(tmp_path.glob(".vectors.npy.*.partial")), "the run should have started writing"
        time.sleep(1.0)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == (130 if signum == signal.SIGINT else 128 + signum)
    expected = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
    assert expected in stderr and "no output file was written" in stderr and "Traceback" not in stderr, stderr
    assert output.read_bytes() == before, "the existing output file was clobbered"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt", "vectors.npy"], "a partial file was left"


def test_pooling_choices_are_the_embedders():
    """--pooling takes exactly the library's modes (one definition: embedding/options.py)."""
    from minibert.apps.cli import build_parser
    from minibert.embedding.options import POOLINGS

    parser = build_parser()
    for mode in POOLINGS:
        assert parser.parse_args(["embed", "x", "--pooling", mode]).pooling == [mode]
    assert parser.parse_args(["embed", "x", "--pooling", "cls,mean"]).pooling == ["cls", "mean"]
    with pytest.raises(SystemExit):
        parser.parse_args(["embed", "x", "--pooling", "average"])


def test_version_and_python_dash_m():
    import minibert

    for module in ("minibert", "minibert.apps.cli"):
        done = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.strip() == f"minibert {minibert.__version__}", done
    done = subprocess.run([sys.executable, "-m", "minibert", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "usage: minibert" in done.stdout


def test_a_signal_the_run_was_started_ignoring_stays_ignored(minilm_dir, tmp_path, monkeypatch):
    """`nohup minibert ...` ignores SIGHUP: the command does not take that back (SIGTERM, not
    ignored, gets the command's handler: the control)."""
    seen = {}
    embed = Embedder.embed_with_report

    def spy(self, *args, **kwargs):  # the dispositions in the middle of the run
        seen.update(hup=signal.getsignal(signal.SIGHUP), term=signal.getsignal(signal.SIGTERM))
        return embed(self, *args, **kwargs)

    monkeypatch.setattr(Embedder, "embed_with_report", spy)
    saved = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert cli.main(["embed", "x", "--model", str(minilm_dir), "--output", str(tmp_path / "o.npy")]) == 0
    finally:
        signal.signal(signal.SIGHUP, saved)
    assert seen["hup"] is signal.SIG_IGN and seen["term"] is cli._terminate, seen


def test_minibert_alone_prints_help():
    """`minibert` with no arguments shows what it can do (exit 0), not a usage error."""
    from helpers import run_minibert

    result = run_minibert()
    assert result.returncode == 0 and "usage: minibert" in result.stdout and "embed" in result.stdout
    assert result.stderr == ""


def test_layers_take_negative_lists_with_or_without_the_equals_sign(minilm_dir):
    """`--layers -1,-2` (what a newcomer types) gives what `--layers=-1,-2` gives; argparse alone
    reads "-1,-2" as an option and stops with "expected one argument"."""
    from helpers import run_minibert

    common = ["embed", "a short text", "--layer-combine", "sum", "--model", str(minilm_dir)]
    spaced = run_minibert(*common, "--layers", "-1,-2")
    joined = run_minibert(*common, "--layers=-1,-2")
    last = run_minibert(*common, "--layers", "-1")
    assert spaced.returncode == 0 and joined.returncode == 0, spaced.stderr
    assert spaced.stdout == joined.stdout and spaced.stdout != last.stdout


@pytest.mark.parametrize("value", ["-1e-3", "-1.", "-2E+1", "-.5", "-1", "-1.5"])
def test_a_negative_number_is_its_flags_value_however_it_is_written(value):
    """argparse reads "-1" and "-1.5" as values but "-1e-3" as an option ("expected one argument"):
    every negative number given to a flag is its value, as `--flag=value` makes it."""
    from minibert.apps.cli import _negative_values_joined, build_parser

    argv = ["finetune", "--model", "m", "--train", "t.json", "--task", "answer", "--version-2-with-negative",
            "--null-score-diff-threshold", value, "--output", "o"]  # fmt: skip
    args = build_parser().parse_args(_negative_values_joined(argv))
    assert args.null_score_diff_threshold == float(value)


def test_similarity_is_capped_at_a_table_people_read_before_the_model_loads(tmp_path):
    # 40,000 arguments (230 kB) asked torch for a 6.4 GB matrix, then printed 13 GB of table
    texts = [f"w{n}" for n in range(257)]
    refused = run_minibert("similarity", *texts, "--model", str(tmp_path / "no-model"))
    assert refused.returncode == 2 and refused.stdout == "", refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "at most 256 texts, got 257; for more" in refused.stderr
    assert "minibert embed --input FILE --output vectors.npy" in refused.stderr
    kept = run_minibert("similarity", *texts[:256], "--model", str(TINY))
    assert kept.returncode == 0 and kept.stdout.count("\n") == 1 + 256 + 1 + 256, kept.stderr


class SignalAfterEachWrite(io.StringIO):
    """A stderr on which the signal lands as it does on Python's own: checked after each write is
    out, so a ``print``'s text can be out and its newline not (``armed``: the text it lands after)."""

    def __init__(self, armed: str):
        super().__init__()
        self.armed = armed

    def write(self, text: str) -> int:
        written = super().write(text)
        if text == self.armed:
            raise KeyboardInterrupt
        return written


PROGRESS = "minibert: step 6/60  loss 0.6553  rate 0.000833  5,267 tokens/s  0.0 min left"
LIVE = "\rstep 6/60  loss 0.6553  rate 0.000833  5,267 tokens/s  0.0 min left   "  # (report.py's, on a terminal)


@pytest.mark.parametrize("written, stop, said", [
    (PROGRESS, "signal", "minibert: interrupted; no output file was written"),  # between a print's text and newline
    (LIVE, KeyboardInterrupt, "minibert: interrupted; no output file was written"),  # Ctrl-C on a live line
    (LIVE, ValueError("the run failed"), "minibert: error: the run failed"),
    (PROGRESS, KeyboardInterrupt, "minibert: interrupted; no output file was written"),  # after a whole line
])  # fmt: skip
def test_a_stop_or_an_error_starts_a_line_of_its_own(written, stop, said, monkeypatch):
    """A run stopped while its progress line was half written ended "... 0.0 min leftminibert:
    interrupted; ..." (a finetune's Ctrl-C, seen in CI): the last line must stand alone, and no
    blank line is added where the line before was whole."""
    stderr = SignalAfterEachWrite(armed=written if stop == "signal" else None)
    monkeypatch.setattr(sys, "stderr", stderr)

    def command(args):
        print(written, end="" if written.startswith("\r") else "\n", file=sys.stderr)
        raise stop

    monkeypatch.setattr(cli, "cmd_tokenize", command)
    assert cli.main(["tokenize", "a text"]) == (1 if isinstance(stop, ValueError) else 130)
    assert sys.stderr is stderr, "the command's stderr was not given back"
    lines = stderr.getvalue().split("\n")
    assert lines[-2:] == [said, ""] and lines[-3] == written, stderr.getvalue()


def test_similarity_takes_normalize_as_cli_md_says(minilm_dir, tmp_path, capsys):
    """docs/cli.md: `--normalize`/`--no-normalize` override the recipe's normalization in `embed` and
    `similarity`; similarity refused them (unrecognized arguments), though a dot-product model's table
    depends on it. MiniLM made a dot-product model here (its own similarity function set to dot)."""
    import shutil

    folder = shutil.copytree(minilm_dir, tmp_path / "dot")
    settings = json.loads((folder / "config_sentence_transformers.json").read_text())
    (folder / "config_sentence_transformers.json").write_text(json.dumps({**settings, "similarity_fn_name": "dot"}))
    texts = ["bank vault", "river bank"]
    for flag, normalize in (("--normalize", True), ("--no-normalize", False)):
        assert cli.main(["similarity", *texts, flag, "--model", str(folder)]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == "similarity: dot"
        matrix = np.array([[float(v) for v in line.split()[1:]] for line in out[-2:]])
        vectors = Embedder.from_pretrained(folder).embed(texts, normalize=normalize)
        assert_close(matrix, vectors @ vectors.T, f"similarity {flag}", 1e-4)
    assert abs(matrix[0, 0] - 1) > 0.1  # (unnormalized: no longer a cosine)
