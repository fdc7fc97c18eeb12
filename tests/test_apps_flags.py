"""The commands' flags come from one place each: the process flags (--debug) from one parent parser,
every number through flag_types' parsers (one rule naming the flag and its limits), and the defaults
of pretraining-data and pretrain from their options dataclasses."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from helpers import run_minibert
from minibert.apps import cli
from minibert.apps.flag_types import parser_of
from minibert.training.options import PretrainOptions
from minibert.training.pretraining_data.options import InstanceOptions
from tiny_hub import TINY


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    [subparsers] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(subparsers.choices)


def test_every_command_takes_debug():
    commands = _commands()
    assert {"embed", "vocab", "pretraining-data", "pretrain", "plot", "convert", "serve", "explore"} <= set(commands)
    without = [name for name, sub in commands.items() if not any("--debug" in a.option_strings for a in sub._actions)]
    assert not without, f"these commands refuse --debug: {without}"


def test_vocab_takes_debug_after_its_name():
    """Issue 43: `minibert vocab … --debug` was "unrecognized arguments"."""
    args = cli.build_parser().parse_args(["vocab", "--input", "a.txt", "--output", "out", "--debug"])
    assert args.debug is True


def test_no_number_flag_is_parsed_by_bare_int_or_float():
    """int('²') raises 'invalid literal', int('1e30') a ValueError argparse reports as 'invalid int
    value'; a bare int also has no limits (a seed of 10**20 reached torch). Every number flag goes
    through flag_types (its parsers are named "whole number" and "number")."""
    bare = [
        f"{name} {'/'.join(action.option_strings)}"
        for name, sub in _commands().items()
        for action in sub._actions
        if action.type in (int, float)
    ]
    assert not bare, f"number flags without limits: {bare}"


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["pretrain", "--data", "x", "--output", "o", "--steps", "1", "--batch-size", "1", "--init", "m",
          "--seed", "100000000000000000000"],
         "argument --seed: must be a whole number from 0 to 9223372036854775807, got 100000000000000000000"),
        (["vocab", "--input", "x", "--output", "o", "--vocab-size", "²"],
         "argument --vocab-size: must be a whole number of at least 1, got '²'"),
        (["explore", "a text", "--output", "p.html", "--max-length", "1", "--truncate"],
         "argument --max-length: must be a whole number of at least 3, got 1"),
        (["explore", "a", "b", "--output", "p.html", "--max-length", "4", "--truncate"],
         "--max-length 4 cannot hold a pair"),
        (["classify", "--model", "m", "--batch-size", "1e3", "a"],
         "argument --batch-size: must be a whole number of at least 1, got '1e3'"),
    ],
)  # fmt: skip
def test_raw_messages_of_issue_45_name_the_flag_and_its_limits(argv, expected):
    """Issue 45 item 6: these said "Overflow when unpacking long long", "invalid parse value: '²'"
    and "room for -1 pieces"; now one usage line (exit 2) naming the flag and its limits."""
    done = run_minibert(*argv)  # each refused by the parser: nothing is read or written
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and expected in lines[0], done.stderr


def test_the_options_dataclasses_are_the_flags_defaults():
    """Each default and limit is written once, in the dataclass: the parsed defaults build the
    dataclass's own defaults, and the flags' parsers refuse what the dataclass refuses."""
    commands = _commands()
    required = ["--data", "d", "--output", "o", "--steps", "3", "--batch-size", "2", "--init", "m"]
    parsed = commands["pretrain"].parse_args(required)
    values = {field.name: getattr(parsed, field.name) for field in dataclasses.fields(PretrainOptions)
              if field.name not in ("progress", "gemm")}  # fmt: skip  (--gemm: the process's flag, not a field's)
    assert PretrainOptions(**values) == PretrainOptions(data=["d"], output="o", steps=3, batch_size=2, init="m")
    parsed = commands["pretraining-data"].parse_args(["--input", "a", "--vocab", "v", "--output", "o"])
    values = {field.name: getattr(parsed, field.name) for field in dataclasses.fields(InstanceOptions)}
    assert InstanceOptions(**values) == InstanceOptions()
    help_text = " ".join(commands["pretraining-data"].format_help().split())
    assert "(default 128)" in help_text and "(default 0.15)" in help_text


def test_parser_of_uses_the_limits_words():
    from minibert.limits import Limits

    parse = parser_of(Limits(float, 0.0, 1.0, above_low=True))
    assert parse("1") == 1.0
    with pytest.raises(argparse.ArgumentTypeError, match="must be a number above 0 and at most 1, got 0"):
        parse("0")


@pytest.mark.parametrize("flag", [["--device", "cpu"], ["--gemm", "mkl"]])
def test_tokenize_runs_no_model_and_takes_no_model_run_flags(flag):
    """tokenize reads the vocabulary only: --device and --gemm would change nothing, so they are a
    usage error (once accepted and ignored), without the hint meant for a second text."""
    result = run_minibert("tokenize", "hello", *flag)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    said = "--gemm picks the linear layers' library of a model the command runs; minibert tokenize runs none (see" \
        if flag[0] == "--gemm" else f"unrecognized arguments: {' '.join(flag)} (see"  # fmt: skip
    assert said in lines[0] and "--pair" not in lines[0], lines[0]


# Each command that writes a file or folder it is told, with its other arguments as a user gives
# them; "" is put where the output's name goes ("--output", "" or convert's DESTINATION).
EMPTY_OUTPUT = {
    "embed": ["embed", "--input", "texts.txt", "--output", ""],
    "classify": ["classify", "--model", "cls", "--input", "texts.txt", "--output", ""],
    "tag": ["tag", "--model", "ner", "--input", "texts.txt", "--output", ""],
    "answer": ["answer", "--model", "qa", "--input", "questions.jsonl", "--output", ""],
    "rerank": ["rerank", "--model", "ce", "--query", "q", "--input", "texts.txt", "--output", ""],
    "vocab": ["vocab", "--input", "texts.txt", "--output", ""],
    "example-data": ["example-data", "mrpc", "--output", ""],
    "plot": ["plot", "run", "--output", ""],
    "pretraining-data": ["pretraining-data", "--input", "texts.txt", "--vocab", "vocab.txt", "--output", ""],
    "pretrain": ["pretrain", "--data", "x.tfrecord", "--init", "pt", "--steps", "1", "--batch-size", "2",
                 "--output", ""],  # fmt: skip
    "finetune": ["finetune", "--model", "enc", "--train", "train.tsv", "--glue", "mrpc", "--output", ""],
    "explore": ["explore", "a text", "--output", ""],
    "convert": ["convert", "source", ""],
}


def test_every_command_that_writes_where_it_is_told_is_in_the_empty_output_cases():
    """A new command with --output (or a destination) gets a case below."""
    takes = {name for name, sub in _commands().items()
             if any("--output" in a.option_strings or a.dest == "destination" for a in sub._actions)}  # fmt: skip
    assert takes == set(EMPTY_OUTPUT), f"missing: {takes - set(EMPTY_OUTPUT)}, extra: {set(EMPTY_OUTPUT) - takes}"


@pytest.mark.parametrize("argv", EMPTY_OUTPUT.values(), ids=EMPTY_OUTPUT.keys())
def test_an_empty_output_is_a_usage_error_naming_the_flag_and_nothing_is_written(argv, tmp_path, monkeypatch):
    """docs/cli.md: an empty --output (``--output "$OUT"`` with the variable unset) is exit 2. It
    was read as the current folder (vocab, example-data wrote there) or as "print" (embed, classify)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "texts.txt").write_text("a\nb\n", encoding="utf-8")
    before = sorted(tmp_path.iterdir())
    result = run_minibert(*argv)
    lines = result.stderr.strip().splitlines()
    named = "destination" if argv[0] == "convert" else "--output"
    assert result.returncode == 2 and len(lines) == 1, (result.returncode, result.stderr)
    assert f"argument {named}" in lines[0] and "is empty" in lines[0], lines[0]
    assert result.stdout == "" and sorted(tmp_path.iterdir()) == before


def test_an_empty_write_features_is_a_usage_error_not_a_run_in_the_current_folder(tmp_path, monkeypatch):
    """finetune --write-features "" fine-tuned into the current folder (exit 0), or named an
    --output never given: the file it names is an output, refused empty like every --output."""
    monkeypatch.chdir(tmp_path)
    result = run_minibert("finetune", "--model", "enc", "--train", "train.tsv", "--glue", "mrpc",
                          "--write-features", "")  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "argument --write-features: is empty" in lines[0], lines
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("output", ["a.tfrecord,", "a.tfrecord,,b.tfrecord", ","])
def test_pretraining_data_refuses_an_empty_name_among_its_outputs_as_a_usage_error(output, tmp_path):
    result = run_minibert("pretraining-data", "--input", "t.txt", "--vocab", "v.txt", "--output", output)
    assert result.returncode == 2 and "argument --output: names an empty file in" in result.stderr, result.stderr


def test_a_list_flag_given_twice_joins_its_lists():
    """argparse's default for `nargs="+"` keeps the last list only: `vocab --input a.txt --input b.txt`
    learned from b.txt alone, without a word. Every list flag extends instead."""
    dropping = [f"{name} {action.option_strings[0]}" for name, sub in _commands().items() for action in sub._actions
                if action.option_strings and action.nargs in ("+", "*")
                and not isinstance(action, argparse._ExtendAction)]  # fmt: skip
    assert not dropping, f"given twice, these keep only the last list: {dropping}"
    parser = cli.build_parser()
    assert parser.parse_args(["vocab", "--input", "a", "--input", "b", "c", "--output", "o"]).input == ["a", "b", "c"]
    argv = ["pretraining-data", "--input", "a", "--input", "b", "--vocab", "v", "--output", "o"]
    assert parser.parse_args(argv).input == ["a", "b"]
    argv = ["pretrain", "--data", "a", "--data", "b", "--output", "o", "--steps", "1", "--batch-size", "1"]
    argv += ["--init", "m"]
    assert parser.parse_args(argv).data == ["a", "b"]
    assert parser.parse_args(["fill-mask", "a [MASK]", "--targets", "x", "--targets", "y"]).targets == ["x", "y"]
    assert parser.parse_args(["fill-mask", "a [MASK]"]).targets is None
    assert parser.parse_args(["vocab", "--input", "a", "--output", "o"]).special_tokens is None


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["embed", "x", "--max-length", "1000"], "--max-length must be an int from 3 to max_position_embeddings=64, "
                                                 "got 1000"),
        (["similarity", "a", "b", "--max-length", "1000"], "--max-length must be an int from 3 to max_position_"),
        (["embed", "x", "--layers", "5"], "--layers must be a hidden state of this model, 0..2 (or -1..-3), got 5"),
        (["similarity", "a", "b", "--layers=-4"], "--layers must be a hidden state of this model"),
        (["embed", "x", "--prompt-name", "passage"], "--prompt-name must be one of this model's prompts ('query', "
                                                     "'document'), got passage"),
        (["embed", "--input", "-", "--max-length", "1000"], "--max-length must be"),  # before stdin is embedded
    ],
)  # fmt: skip
def test_an_embedding_flag_outside_the_models_limits_is_a_usage_error_naming_the_flag(argv, expected):
    # these exited 1 naming the library's keyword (max_length, layer, prompt_name), where rerank,
    # answer and tag's flags out of their model's range exit 2 naming the flag
    result = run_minibert(*argv, "--model", str(TINY), stdin=b"a text\n")  # 2 layers, 64 positions, no prompts
    assert result.returncode == 2 and expected in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 2 and result.stdout == ""  # "model DIR", then the error
