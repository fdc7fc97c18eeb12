"""docs/cli.md's table of exit codes is what the commands do: every cell is run.

Each row is a command, each column a class of bad input (a missing file, a directory in its place,
bytes that are not UTF-8, malformed JSON, an empty file, a field of the wrong type) or a usage
error. A run must exit with the cell's code, print exactly one line on stderr (``minibert: error:
...``, naming the file; ``serve`` says first where it listens and how many connections its
open-files limit holds, while the model loads: docs/cli.md, docs/serving.md), no
traceback, and write nothing. Every command of the parser must have a row: a new command adds one
(and a way to feed it bad input, in COMMANDS below). A cell "–" is a class that does not apply to
the command's bad file (no JSON in a text corpus): it is not run, and it must be exactly the classes
this file has no way to spoil that kind of file with.

The runs are in this process (helpers.run_minibert): each ends before any model computes, in
milliseconds, except the few that load the tiny checkpoint first.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from helpers import run_minibert as run
from minibert.apps import cli
from random_instances import random_instances, write_instances
from tiny_hub import TINY  # a 2-layer BertModel with MiniLM's vocabulary

ROOT = Path(__file__).resolve().parents[1]
QA = ROOT / "tests" / "data" / "qa_reference"
COLUMNS = ["missing", "a directory", "not UTF-8", "malformed JSON", "empty", "wrong field"]


NOT_APPLICABLE = "–"  # a cell of a class that the command's bad file cannot have


def table() -> dict[str, dict[str, int | None]]:
    """docs/cli.md's second table: {command: {column: exit code, or None where it does not apply}}."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    rows = re.findall(rf"^\| `([a-z-]+)` \| [^|]+ \|((?: [\d{NOT_APPLICABLE}] \|)+)$", text, flags=re.M)
    header = re.search(r"^\| command \| the bad file \|(.*)\|$", text, flags=re.M).group(1)
    columns = [name.strip() for name in header.split("|")]
    assert columns == [*COLUMNS, "usage error"], columns
    cells = [[cell.strip() for cell in codes.split("|")[:-1]] for _, codes in rows]
    return {
        command: {column: None if cell == NOT_APPLICABLE else int(cell) for column, cell in zip(columns, row)}
        for (command, _), row in zip(rows, cells)
    }


TABLE = table()

# The bad content of each column, for a JSON-lines input file of records with ``fields``.
INPUT_FILES = {
    "not UTF-8": b'{"text": "caf\xe9"}\n',
    "malformed JSON": b'{"text": \n',
    "empty": b"",
    "wrong field": b'{"text": 7}\n',
}
# A text corpus (one sentence per line) has no JSON: two of the classes do not apply ("–").
TEXT_FILES = {
    "not UTF-8": b"caf\xe9\n",
    "empty": b"",
}
# The same classes in a model directory: which file is spoiled, and how.
MODEL_FILES = {
    "a directory": ("config.json", None),
    "not UTF-8": ("config.json", b'{"model_type": "bert\xe9"}'),
    "malformed JSON": ("config.json", b'{"hidden_size": '),
    "empty": ("config.json", b""),
    "wrong field": ("config.json", json.dumps({"hidden_size": "big"}).encode()),
}
# tokenize reads the tokenizer's files, not config.json.
TOKENIZER_FILES = {
    "a directory": ("vocab.txt", None),
    "not UTF-8": ("vocab.txt", b"[PAD]\n\xe9\n"),
    "malformed JSON": ("tokenizer_config.json", b'{"do_lower_case": '),
    "empty": ("vocab.txt", b""),
    "wrong field": ("tokenizer_config.json", b'{"padding_side": "up"}'),
}

VOCAB = ROOT / "tests" / "data" / "qa_reference" / "vocab.txt"  # each piece once (tiny_hub's repeats some)

# command → (what goes bad: "input", "text", "model" or "tokenizer"; argv given the bad path; argv of a usage error)
COMMANDS = {
    "embed": ("input", lambda bad: ["embed", "--model", str(TINY), "--input", bad], ["embed", "x", "--input", "f"]),
    "classify": ("input", lambda bad: ["classify", "--model", str(TINY), "--input", bad], ["classify", "x"]),
    "tag": ("input", lambda bad: ["tag", "--model", str(TINY), "--input", bad], ["tag", "--stride", "x", "t"]),
    "answer": ("input", lambda bad: ["answer", "--model", str(QA), "--input", bad], ["answer", "--question", "q"]),
    "rerank": ("input", lambda bad: ["rerank", "--model", str(TINY), "q", "--input", bad], ["rerank"]),
    "tokenize": ("tokenizer", lambda bad: ["tokenize", "x", "--model", bad], ["tokenize"]),
    "similarity": ("model", lambda bad: ["similarity", "a", "b", "--model", bad], ["similarity", "a"]),
    "fill-mask": ("model", lambda bad: ["fill-mask", "a [MASK]", "--model", bad], ["fill-mask", "--top-k", "x", "a"]),
    "next-sentence": ("model", lambda bad: ["next-sentence", "a", "b", "--model", bad], ["next-sentence", "a"]),
    "verify": ("model", lambda bad: ["verify", "--model", bad], ["verify", "--tolerance", "small"]),
    "convert": ("model", lambda bad: ["convert", bad, bad + "-out"], ["convert", "only-source"]),
    "serve": ("model", lambda bad: ["serve", "--model", bad, "--port", "0"], ["serve", "--port", "99999"]),
    "explore": ("model", lambda bad: ["explore", "a [MASK]", "--model", bad, "-o", "page.html"], ["explore", "a"]),
    "vocab": (
        "text",
        lambda bad: ["vocab", "--input", bad, "--output", str(Path(bad).parent)],  # an existing directory
        ["vocab", "--input", "corpus.txt"],
    ),
    "pretraining-data": (
        "text",
        lambda bad: ["pretraining-data", "--input", bad, "--vocab", str(VOCAB), "--output", "out.tfrecord"],
        ["pretraining-data", "--input", "c.txt", "--vocab", str(VOCAB), "--output", "o", "--dupe-factor", "x"],
    ),
    "pretrain": (
        "model",  # --init DIR: the checkpoint to continue from (the instances are good ones)
        lambda bad: [
            "pretrain",
            "--data",
            str(_instances()),
            "--init",
            bad,
            "--output",
            "run",
            "--steps",
            "1",
            "--batch-size",
            "2",
        ],  # fmt: skip
        [
            "pretrain",
            "--data",
            "d.tfrecord",
            "--init",
            "m",
            "--config",
            "c.json",
            "--output",
            "r",
            "--steps",
            "1",
            "--batch-size",
            "2",
        ],  # fmt: skip
    ),
    "finetune": (
        "model",  # --model DIR: the checkpoint to fine-tune (the labelled examples are good ones)
        lambda bad: ["finetune", "--model", bad, "--train", str(_examples()), "--output", "run", "--batch-size", "2"],
        ["finetune", "--model", "m", "--output", "r"],  # no --train
    ),
    "plot": ("run", lambda bad: ["plot", bad], ["plot"]),
    "example-data": (
        "output",  # --output DIR already holding a file of a sample's name, with other bytes (or a directory)
        lambda bad: ["example-data", "mrpc", "--output", str(Path(bad).parent)],
        ["example-data", "no-such-set", "--output", "x"],
    ),
}
# What each kind of bad file can be spoiled with; the other columns are "–" in the table. A "run" is
# a pretrain run directory, its metrics.jsonl spoiled as an input file is.
SPOILERS = {"input": INPUT_FILES, "text": TEXT_FILES, "model": MODEL_FILES, "tokenizer": TOKENIZER_FILES,
            "run": INPUT_FILES, "output": TEXT_FILES}  # fmt: skip


@functools.cache
def _instances() -> Path:
    """Good pre-training instances for the tiny checkpoint (outside every test's directory)."""
    directory = Path(tempfile.mkdtemp(prefix="exit-codes-"))
    vocab_size = json.loads((TINY / "config.json").read_text())["vocab_size"]
    return write_instances(directory / "good.tfrecord", random_instances(4, vocab_size))


@functools.cache
def _examples() -> Path:
    """Good labelled examples for finetune (outside every test's directory)."""
    path = Path(tempfile.mkdtemp(prefix="exit-codes-")) / "train.csv"
    path.write_text("text,label\n" + "the water is wet,wet\nthe sand is dry,dry\n" * 2, encoding="utf-8")
    return path


def test_every_command_has_a_row_and_every_row_a_command():
    parser_commands = set(cli.build_parser()._subparsers._group_actions[0].choices)
    assert set(TABLE) == parser_commands, "docs/cli.md's exit-code table and the parser's commands differ"
    assert set(COMMANDS) == parser_commands, "a command without bad input in COMMANDS (this file)"


def test_a_class_is_not_applicable_exactly_where_the_file_cannot_have_it():
    for command, (kind, _, _) in COMMANDS.items():
        missing = {"missing"} if kind != "output" else set()  # a missing output folder is made: no error
        applicable = {*missing, "a directory", *SPOILERS[kind], "usage error"}
        not_applicable = {column for column, code in TABLE[command].items() if code is None}
        assert not_applicable == set(TABLE[command]) - applicable, f"{command}: the cells '–' are {not_applicable}"


def _bad_input_file(directory: Path, column: str, kind: str) -> Path:
    path = directory / ("bad.jsonl" if kind == "input" else "bad.txt")
    if column == "a directory":
        path.mkdir()
    elif column != "missing":
        path.write_bytes(SPOILERS[kind][column])
    return path


def _bad_run(directory: Path, column: str) -> Path:
    path = directory / "run"
    if column != "missing":
        path.mkdir()
        if column == "a directory":
            (path / "metrics.jsonl").mkdir()
        else:
            (path / "metrics.jsonl").write_bytes(INPUT_FILES[column])
    return path


def _bad_model(directory: Path, column: str, spoiled: dict) -> Path:
    path = directory / "model"
    if column == "missing":
        return path
    shutil.copytree(TINY, path)
    name, content = spoiled[column]
    (path / name).unlink()
    if content is None:
        (path / name).mkdir()
    else:
        (path / name).write_bytes(content)
    return path


CASES = [
    (command, column) for command in TABLE for column in [*COLUMNS, "usage error"] if TABLE[command][column] is not None
]


@pytest.mark.parametrize(("command", "column"), CASES, ids=[f"{c}-{k}" for c, k in CASES])
def test_the_exit_code_is_the_tables(command, column, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a usage error's relative paths, and the check that nothing is written
    work = tmp_path / "work"
    work.mkdir()
    kind, argv_of, usage = COMMANDS[command]
    if column == "usage error":
        argv = usage
    elif kind in ("input", "text"):
        argv = argv_of(str(_bad_input_file(work, column, kind)))
    elif kind == "run":
        argv = argv_of(str(_bad_run(work, column)))
    elif kind == "output":
        (work / "out").mkdir()
        argv = argv_of(str(_bad_input_file(work / "out", column, "text").rename(work / "out" / "dev.tsv")))
    else:
        argv = argv_of(str(_bad_model(work, column, SPOILERS[kind])))
    before = sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*"))
    result = run(*argv)
    lines = result.stderr.strip().splitlines()
    if command == "serve" and column != "usage error":  # the server listens first, then loads the model
        assert lines[0].startswith("minibert: serving on http://127.0.0.1:"), result.stderr
        lines = [line for line in lines[1:] if not line.startswith("minibert: open-files limit ")]
    assert result.returncode == TABLE[command][column], f"{argv}: exit {result.returncode}\n{result.stderr}"
    assert len(lines) == 1 and lines[0].startswith("minibert: error:"), f"{argv}:\n{result.stderr}"
    assert "Traceback" not in result.stderr and result.stdout == ""
    if column != "usage error":
        named = {"model": "model", "tokenizer": "model", "input": "bad.jsonl", "run": "run",
                 "output": "dev.tsv"}.get(kind, "bad.txt")  # fmt: skip
        assert named in lines[0], f"the line should name the file: {lines[0]}"
    assert sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*")) == before, "a failed run wrote files"


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["embed", "hi", "--model", ""], "--model"),  # --model "$MODEL" with the variable unset: no fallback
        (["fill-mask", "a [MASK]", "--model", ""], "--model"),
        (["next-sentence", "a", "b", "--model", " "], "--model"),
        (["classify", "a", "--model", ""], "--model"),
        (["tokenize", "a", "--model", ""], "--model"),
        # serve: --port 70000 after it, so that a server never starts here if --model "" were let through
        (["serve", "--model", "", "--port", "70000"], "--model"),
        (["finetune", "--model", "", "--train", "t.csv", "--output", "run"], "--model"),
        (["pretrain", "--init", "", "--data", "x", "--output", "run", "--steps", "1", "--batch-size", "1"], "--init"),
        (["embed", "hi", "--model", str(TINY), "--prompt", "q: ", "--prompt-name", "x"], "--prompt-name"),
        (["explore", "a", "--model", str(TINY), "-o", ""], "--output/-o"),  # it said '--output . is a directory'
        (["embed", "hi", "--model", str(TINY), "--device", "cuda:99999999999999999999"], "--device"),
        (["embed", "hi", "--model", str(TINY), "--device", "cuda:256"], "--device"),  # torch would read cuda:0
        (["embed", "hi", "--model", str(TINY), "--max-length", "2"], "--max-length"),  # [CLS] [SEP] and no room
        (["rerank", "q", "a", "--model", str(TINY), "--max-length", "1"], "--max-length"),
    ],
)  # fmt: skip
def test_a_flag_value_that_cannot_be_meant_is_a_usage_error_naming_the_flag(argv, flag, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run(*argv)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and f"argument {flag}:" in lines[0], result.stderr
    assert "using the bundled" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    "argv, advice",
    [
        (["fill-mask", "a [MASK] b"], "fill-mask needs a checkpoint with BERT's pre-training heads"),
        (["next-sentence", "a", "b"], "next-sentence needs a checkpoint with BERT's pre-training heads"),
        (["tag", "a"], "minibert finetune --task tag"),
        (["answer", "--question", "a", "--context", "b"], "minibert finetune --task answer"),
        (["classify", "a"], "to classify with it, fine-tune a classifier first"),
    ],
)  # fmt: skip
def test_a_missing_head_is_met_with_advice_for_the_command_run(argv, advice, minilm_dir):
    """An encoder alone (all-MiniLM-L6-v2) given to each command: its own remedy, one line (every
    command was told to fine-tune a classifier, which gives no masked-LM, tagging or answering head)."""
    result = run(*argv, "--model", str(minilm_dir))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and advice in lines[-1], result.stderr
    assert lines[-1].startswith("minibert: error:") and "Traceback" not in result.stderr
    if argv[0] != "classify":
        assert "classify with it" not in lines[-1], lines[-1]


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["explore", "the cat", "--max-length", "65"],
         "--max-length must be an int from 3 ([CLS] a piece [SEP]) to the model's 64 positions, got 65"),
        (["explore", "the cat [MASK] .", "--top-k", "50"],
         "--top-k must be an int from 1 to the vocabulary's 15, got 50"),
    ],
)  # fmt: skip
def test_an_explore_flag_outside_the_models_limits_is_a_usage_error_naming_the_flag(argv, expected, tmp_path):
    """explore's --max-length past the model's positions and --top-k past its vocabulary exited 1
    naming the Python keywords (max_length, top_k), where embed's --max-length exits 2 naming the flag."""
    from explore_reference import random_masked_lm

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", ".", "a", "dog", "on", "mat",
                  "##s", "and"]  # fmt: skip
    random_masked_lm(tmp_path / "model", vocabulary)  # 15 pieces, 64 positions
    result = run(*argv, "--model", str(tmp_path / "model"), "-o", str(tmp_path / "page.html"))
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [f"minibert: error: {expected}"], \
        result.stderr  # fmt: skip
    assert not (tmp_path / "page.html").exists()
