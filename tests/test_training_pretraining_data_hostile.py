"""``minibert pretraining-data`` attacked (issue 36, item 5: pre-training data): every bad input is
one line on stderr, exit 1 (2 only for argparse's usage errors), a DataError-family message naming
the file, line, flag or limit, and nothing written. The inputs at their limits that are not errors
(one-sentence documents, one enormous sentence, flags at their bounds) give instances that keep
the rules every instance must keep. (Equality with Google's script: test_training_pretraining_data.py.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_minibert as run
from minibert.errors import DataError
from minibert.formats.tfrecord import read_examples
from minibert.training.pretraining_data.create import create_pretraining_data
from minibert.training.pretraining_data.options import InstanceOptions

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "##s", "##ed", "it", "was", "warm", "."]
TEXT = (
    "The cat sat on the mat.\nIt was warm.\nThe dog ran far away.\n\n"
    "A cat ran.\nThe dogs sat on a mat.\n\nIt was a dog.\nThe cats ran far away.\nIt was warm on the mat.\n"
)


@pytest.fixture
def files(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + WORDS) + "\n", encoding="utf-8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    return {"vocab": vocab, "corpus": corpus, "out": out, "dir": tmp_path}


def _args(files, *extra, output=None) -> list[str]:
    output = output or str(files["out"] / "train.tfrecord")
    return ["pretraining-data", "--input", str(files["corpus"]), "--vocab", str(files["vocab"]), "--output", output,
            "--dupe-factor", "2", *extra]  # fmt: skip


def _write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


# Each case: (what it does to the files or flags → the command's arguments, text the one line must hold)
CASES = {
    "missing input": (lambda f: _args(f)[:2] + [str(f["dir"] / "nope.txt")] + _args(f)[3:], "nope.txt does not exist"),
    "input is a directory": (lambda f: _args(f)[:2] + [str(f["out"])] + _args(f)[3:], "is not a file"),
    "second input missing": (lambda f: _args(f)[:3] + [str(f["dir"] / "gone.txt")] + _args(f)[3:], "gone.txt"),
    "missing vocab": (lambda f: _args(f)[:4] + [str(f["dir"] / "v.txt")] + _args(f)[5:], "v.txt does not exist"),
    "vocab not UTF-8": (lambda f: (_write(f["vocab"], b"[CLS]\n\xff\xfe\n"), _args(f))[1], "not UTF-8"),
    "empty vocab": (lambda f: (_write(f["vocab"], b""), _args(f))[1], "is empty"),
    "vocab without [MASK]": (lambda f: (_write(f["vocab"], "\n".join(SPECIAL[:4] + WORDS)), _args(f))[1], "[MASK]"),
    "vocab without [CLS]": (
        lambda f: (_write(f["vocab"], "\n".join(["[UNK]", "[SEP]", "[MASK]"] + WORDS)), _args(f))[1],
        "lacks [CLS]",
    ),  # fmt: skip
    "vocab without [SEP]": (
        lambda f: (_write(f["vocab"], "\n".join(["[UNK]", "[CLS]", "[MASK]"] + WORDS)), _args(f))[1],
        "lacks [SEP]",
    ),  # fmt: skip
    "vocab with a duplicate line": (
        lambda f: (_write(f["vocab"], "\n".join(SPECIAL + WORDS + ["cat"])), _args(f))[1],
        "repeats line 7",
    ),  # fmt: skip
    "vocab piece with spaces": (
        lambda f: (_write(f["vocab"], "\n".join(SPECIAL + WORDS + [" dog "])), _args(f))[1],
        "has spaces around",
    ),  # fmt: skip
    "empty corpus": (lambda f: (_write(f["corpus"], b""), _args(f))[1], "no sentences"),
    "only blank lines": (lambda f: (_write(f["corpus"], "\n \n\t\n\u2028\n\x0c\n"), _args(f))[1], "no sentences"),
    "only control characters": (
        lambda f: (_write(f["corpus"], "\x01\u200b\n\x7f\n" + " \n" * 20), _args(f))[1],
        "no sentences",
    ),  # fmt: skip
    # NUL bytes are not text whatever --invalid-utf8 says (random bytes once made instances under ignore)
    "random bytes under --invalid-utf8 ignore": (
        lambda f: (_write(f["corpus"], __import__("random").Random(0).randbytes(4096)), _args(f, "--invalid-utf8",
                                                                                             "ignore"))[1],
        "a NUL byte",
    ),  # fmt: skip
    "one NUL in real text": (lambda f: (_write(f["corpus"], "The cat sat.\nIt was\x00 warm.\n"), _args(f))[1],
                             "line 2: a NUL byte (byte 6 of the line)"),  # fmt: skip
    "one NUL under ignore": (lambda f: (_write(f["corpus"], "The cat sat.\n\x00\n"), _args(f, "--invalid-utf8",
                                                                                         "ignore"))[1],
                             "line 2: a NUL byte"),  # fmt: skip
    "invalid UTF-8": (lambda f: (_write(f["corpus"], b"The cat.\nIt \xff was.\n"), _args(f))[1], "line 2: not UTF-8"),
    "output directory missing": (lambda f: _args(f, output=str(f["dir"] / "no" / "t.tfrecord")), "does not exist"),
    # (--output naming a folder, existing or with a trailing slash: a usage error, exit 2, in
    # test_training_pretraining_data_outputs.py)
    "a shard missing its directory": (
        lambda f: _args(f, output=f"{f['out']}/a.tfrecord,{f['dir']}/no/b.tfrecord"),
        "does not exist",
    ),  # fmt: skip
    "the same shard twice": (
        lambda f: _args(f, output=f"{f['out']}/a.tfrecord,{f['out']}/a.tfrecord"),
        "must be different files",
    ),  # fmt: skip
    "output is a FIFO": (
        lambda f: (os.mkfifo(f["out"] / "t.tfrecord"), _args(f, output=str(f["out"] / "t.tfrecord")))[1],
        "t.tfrecord: it is a FIFO (named pipe), not a regular file",
    ),  # fmt: skip
    "a shard is a FIFO": (
        lambda f: (os.mkfifo(f["out"] / "b"), _args(f, output=f"{f['out']}/a.tfrecord,{f['out']}/b"))[1],
        "it is a FIFO",
    ),  # fmt: skip
    "output directory is a file": (
        lambda f: _args(f, output=str(f["corpus"] / "t.tfrecord")),
        "corpus.txt' is a file, not a directory",  # quoted (repr)
    ),  # fmt: skip
    "output is the input": (lambda f: _args(f, output=str(f["corpus"])), "is the input file"),
    "output is the vocab": (lambda f: _args(f, output=str(f["vocab"])), "is the vocabulary file"),
}


def test_a_fifo_or_device_as_output_is_refused_and_left_as_it_is(files, monkeypatch):
    # As root, `--output /dev/null` replaced the system's /dev/null with a regular file: the rename
    # of the finished output went over whatever the path named. A FIFO is real here; a character
    # device is a stubbed stat (never a real device node: a failure would replace it).
    import stat as stats

    from minibert.formats import atomic_files

    fifo = files["out"] / "pipe.tfrecord"
    os.mkfifo(fifo)
    result = run(*_args(files, output=str(fifo)))
    assert result.returncode == 1 and f"cannot write {fifo}: it is a FIFO" in result.stderr, result.stderr
    assert stats.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(files["out"]) == ["pipe.tfrecord"]
    device = files["out"] / "null"
    device.write_bytes(b"")
    real_stat = os.stat

    def device_stat(path, *args, **kwargs):
        found = real_stat(path, *args, **kwargs)
        if os.fspath(path) == os.fspath(device):
            return os.stat_result((stats.S_IFCHR | 0o666, *tuple(found)[1:]))
        return found

    monkeypatch.setattr(atomic_files.os, "stat", device_stat)
    result = run(*_args(files, output=str(device)))
    assert result.returncode == 1 and f"cannot write {device}: it is a character device" in result.stderr
    assert device.read_bytes() == b""  # never written, never replaced


def _snapshot(directory: Path) -> dict:
    return {path: path.read_bytes() for path in directory.rglob("*") if path.is_file()}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_exit_1_and_nothing_written(name, files):
    make_args, expected = CASES[name]
    args = make_args(files)
    before = _snapshot(files["dir"])
    result = run(*args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, f"{name}: exit {result.returncode}, stderr {result.stderr!r}"
    assert lines[0].startswith("minibert: error: ") and expected in lines[0], lines[0]
    assert _snapshot(files["dir"]) == before, "something was written (or changed)"
    assert not result.stdout


@pytest.mark.parametrize("flag", [["--max-seq-length", "abc"], ["--masked-lm-prob", "x"], ["--format", "jsonl"],
                                  ["--invalid-utf8", "replace"], ["--dupe-factor", "1.5"]])  # fmt: skip
def test_malformed_flags_are_usage_errors(flag, files):
    result = run(*_args(files, *flag))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not list(files["out"].iterdir())


# A number outside its flag's limits is a usage error naming the flag and the limits (the parser's
# types come from InstanceOptions' fields: the same limits the library checks).
OUT_OF_LIMITS = {
    "max-seq-length 4": (["--max-seq-length", "4"], "--max-seq-length: must be a whole number from 5 to 8192, got 4"),
    "max-seq-length 0": (["--max-seq-length", "0"], "--max-seq-length: must be a whole number from 5 to 8192"),
    "max-seq-length negative": (["--max-seq-length=-128"], "from 5 to 8192, got -128"),
    "max-seq-length ²": (["--max-seq-length", "²"], "--max-seq-length: must be a whole number from 5 to 8192, got '²'"),
    # Upper limits: 10⁹ pieces took 15.8 GB and ended in 'internal error: MemoryError'; 10²¹ and a
    # --max-predictions-per-seq of 10²¹ said 'Maximum allowed dimension exceeded'; --dupe-factor 10²⁰
    # ran for minutes, growing, writing nothing.
    "max-seq-length 8193": (["--max-seq-length", "8193"], "--max-seq-length: must be a whole number from 5 to 8192, "
                                                        "got 8193"),
    "max-seq-length 10^9": (["--max-seq-length", "1000000000"], "--max-seq-length: must be a whole number from 5 to "
                                                                "8192, got 1000000000"),
    "max-seq-length 10^21": (["--max-seq-length", "1" + "0" * 21], "--max-seq-length: must be a whole number from 5"),
    "max-predictions 10^21": (["--max-predictions-per-seq", "1" + "0" * 21],
                              "--max-predictions-per-seq: must be a whole number from 1 to 8192"),
    # the rule: not above the larger of --max-seq-length and Google's default 20 (20 > 10 is accepted)
    "max-predictions above the length": (["--max-seq-length", "32", "--max-predictions-per-seq", "33"],
                                         "--max-predictions-per-seq 33 is more than 32, the larger of "
                                         "--max-seq-length (32) and Google's default 20"),
    "max-predictions above 20, length 10": (["--max-seq-length", "10", "--max-predictions-per-seq", "21"],
                                            "--max-predictions-per-seq 21 is more than 20, the larger of "
                                            "--max-seq-length (10) and Google's default 20"),
    "dupe-factor 101": (["--dupe-factor", "101"], "--dupe-factor: must be a whole number from 1 to 100, got 101"),
    "dupe-factor 10^20": (["--dupe-factor", "1" + "0" * 20], "--dupe-factor: must be a whole number from 1 to 100"),
    "masked-lm-prob 0": (["--masked-lm-prob", "0"], "--masked-lm-prob: must be a number above 0 and at most 1, got 0"),
    "masked-lm-prob above 1": (["--masked-lm-prob", "1.5"], "--masked-lm-prob: must be a number above 0 and at most 1"),
    "masked-lm-prob negative": (["--masked-lm-prob=-0.1"], "--masked-lm-prob"),
    "masked-lm-prob nan": (["--masked-lm-prob", "nan"], "--masked-lm-prob: must be a number above 0 and at most 1"),
    "short-seq-prob above 1": (
        ["--short-seq-prob", "1.01"],
        "--short-seq-prob: must be a number from 0 to 1, got 1.01",
    ),
    "short-seq-prob inf": (["--short-seq-prob", "inf"], "--short-seq-prob: must be a number from 0 to 1, got inf"),
    "dupe-factor 0": (["--dupe-factor", "0"], "--dupe-factor: must be a whole number from 1 to 100, got 0"),
    "max-predictions 0": (["--max-predictions-per-seq", "0"], "--max-predictions-per-seq: must be a whole number"),
}


@pytest.mark.parametrize("name", list(OUT_OF_LIMITS))
def test_a_number_outside_its_limits_is_a_usage_error_naming_them(name, files):
    flag, expected = OUT_OF_LIMITS[name]
    result = run(*_args(files, *flag))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and expected in lines[0], result.stderr
    assert not list(files["out"].iterdir())


def test_the_library_raises_documented_errors(files):
    """The same refusals from the library: DataError, as create_pretraining_data documents, for the
    vocabulary file too (an empty or non-UTF-8 one was a CheckpointError, which ``except DataError``
    missed)."""
    with pytest.raises(DataError, match=r"max_seq_length must be a whole number from 5 to 8192, got 4 \(from the "):
        InstanceOptions(max_seq_length=4)
    with pytest.raises(DataError, match=r"max_seq_length must be .* to 8192, got 100000 \(.* 8192 positions, 16 times"):
        InstanceOptions(max_seq_length=100_000)
    with pytest.raises(DataError, match=r"dupe_factor must be a whole number from 1 to 100, got 101 \(.*in memory"):
        InstanceOptions(dupe_factor=101)
    with pytest.raises(DataError, match=r"masked_lm_prob must be a number above 0 and at most 1, got nan"):
        InstanceOptions(masked_lm_prob=float("nan"))
    with pytest.raises(DataError, match="dupe_factor must be a whole number from 1 to 100, got 2.0"):
        InstanceOptions(dupe_factor=2.0)
    with pytest.raises(DataError, match=r"max_predictions_per_seq 5000 is more than 20, the larger of max_seq_length "
                                        r"\(8\) and Google's default 20"):  # (90 kB for 3 instances, unchecked)
        InstanceOptions(max_seq_length=8, max_predictions_per_seq=5000)
    assert InstanceOptions(max_seq_length=8, max_predictions_per_seq=20).max_predictions_per_seq == 20  # Google's
    with pytest.raises(DataError, match="lacks"):
        _write(files["vocab"], "\n".join(SPECIAL[:3] + WORDS))
        create_pretraining_data([files["corpus"]], files["vocab"], [files["out"] / "t.tfrecord"])
    for content, message in [("", "is empty"), (b"[UNK]\n\xff\n", "is not UTF-8")]:
        _write(files["vocab"], content)
        with pytest.raises(DataError, match=message):
            create_pretraining_data([files["corpus"]], files["vocab"], [files["out"] / "t.tfrecord"])
    assert not list(files["out"].iterdir())


@pytest.mark.parametrize("options", [{"max_seq_length": 64}, 64], ids=["dict", "int"])
def test_options_of_another_type_are_refused_before_anything_is_read(files, monkeypatch, options):
    """A dict of options read the whole vocabulary and corpus, then failed with "AttributeError:
    'dict' object has no attribute 'dupe_factor'"; now a DataError saying what to write, first."""
    from minibert.training.pretraining_data import create

    monkeypatch.setattr(create.PretrainingVocabulary, "load", None)  # (calling it would be a TypeError)
    with pytest.raises(DataError, match=f"options must be an InstanceOptions, got {type(options).__name__}"):
        create_pretraining_data([files["corpus"]], files["vocab"], [files["out"] / "t.tfrecord"], options)
    with pytest.raises(DataError, match="vocab_file must be a path"):
        create_pretraining_data([files["corpus"]], str(files["vocab"]).encode(), [files["out"] / "t.tfrecord"])
    assert not list(files["out"].iterdir())


def test_the_library_checks_its_arguments_as_the_command_does(files):
    """What the command's parser rules out is a DataError naming the argument, before anything is
    read: "False" for do_lower_case lowercased (any truthy value did), and a bad invalid_utf8 was a
    ValueError raised after the vocabulary was loaded."""
    out = files["out"] / "t.tfrecord"
    for name, value in [("do_lower_case", "False"), ("do_lower_case", 0), ("preserve_unused_tokens", "no"),
                        ("preserve_unused_tokens", None)]:  # fmt: skip
        with pytest.raises(DataError, match=f"^{name} must be True or False, got {value!r}$"):
            create_pretraining_data([files["corpus"]], files["vocab"], [out], **{name: value})
    with pytest.raises(DataError, match=r"^invalid_utf8 must be one of \('error', 'ignore'\), got 'replace'$"):
        create_pretraining_data([files["corpus"]], files["dir"] / "missing-vocab.txt", [out], invalid_utf8="replace")
    for inputs, outputs, problem in [(b"corpus.txt", [out], "input_files must be a path or a list of paths, got bytes"),
                                     ([files["corpus"]], [out, 3], "output_files must be paths (str or Path), got 3")]:
        with pytest.raises(DataError, match=f"^{re.escape(problem)}$"):
            create_pretraining_data(inputs, files["vocab"], outputs)
    assert not list(files["out"].iterdir())


def test_one_path_is_one_file_as_a_list_of_one(files, monkeypatch):
    """A str was a Sequence of one-character paths: output "xy" wrote shards "x" and "y"."""
    monkeypatch.chdir(files["out"])
    create_pretraining_data([files["corpus"]], files["vocab"], ["listed.tfrecord"])
    for name, make in [("xy", str), ("path.tfrecord", Path)]:
        summary = create_pretraining_data(make(files["corpus"]), make(files["vocab"]), make(name))
        assert len(summary.per_file) == 1 and (files["out"] / name).read_bytes() == Path("listed.tfrecord").read_bytes()
    assert sorted(os.listdir(files["out"])) == ["listed.tfrecord", "path.tfrecord", "xy"]


def test_a_stray_space_in_the_output_list_shows_in_the_quoted_directory(files):
    """--output "a.tfrecord, b.tfrecord": the second directory starts with a space; unquoted, the
    message read "the directory out does not exist" beside an existing out."""
    result = run(*_args(files, output=f"{files['out']}/a.tfrecord, {files['out']}/b.tfrecord"))
    assert f"the directory ' {files['out']}' does not exist" in result.stderr, result.stderr
    assert result.returncode == 1 and not list(files["out"].iterdir())


# --- inputs at their limits that are not errors ---------------------------------------------------


def _instances(files, **options) -> list[dict]:
    output = files["out"] / "t.tfrecord"
    seed = options.pop("seed", 1)
    invalid_utf8 = options.pop("invalid_utf8", "error")
    create_pretraining_data([files["corpus"]], files["vocab"], [output], InstanceOptions(**options), seed,
                            invalid_utf8=invalid_utf8)  # fmt: skip
    return [{name: value.tolist() for name, value in example.items()} for example in read_examples(output)]


def check_rules(instances: list[dict], max_seq_length: int, max_predictions: int) -> None:
    """What every instance must be: [CLS] A [SEP] B [SEP] with A and B non-empty, padded; segment
    ids 0 then 1; positions ascending inside the sequence, never on [CLS]/[SEP]; weights 1 then 0."""
    cls_id, sep_id = SPECIAL.index("[CLS]"), SPECIAL.index("[SEP]")
    for instance in instances:
        length = sum(instance["input_mask"])
        assert instance["input_mask"] == [1] * length + [0] * (max_seq_length - length)
        ids, segments = instance["input_ids"][:length], instance["segment_ids"][:length]
        positions = [p for p, w in zip(instance["masked_lm_positions"], instance["masked_lm_weights"]) if w]
        original = list(ids)
        for position, label in zip(positions, instance["masked_lm_ids"]):
            original[position] = label
        separators = [i for i, piece in enumerate(original) if piece == sep_id]
        assert original[0] == cls_id and len(separators) == 2 and separators[1] == length - 1
        assert 1 < separators[0] < length - 2, "A and B each have a piece"
        assert segments == [0] * (separators[0] + 1) + [1] * (length - separators[0] - 1)
        assert positions == sorted(set(positions)) and 1 <= len(positions) <= max_predictions
        assert all(0 < p < length - 1 and p != separators[0] for p in positions)
        assert instance["next_sentence_labels"] in ([0], [1])


def test_documents_of_one_sentence_are_all_random_next(files):
    _write(files["corpus"], "The cat sat.\n\nA dog ran.\n\n\n\nIt was warm.\n\nThe mat.\n")
    instances = _instances(files, max_seq_length=16, dupe_factor=3)
    check_rules(instances, 16, 20)
    assert len(instances) == 12 and all(i["next_sentence_labels"] == [1] for i in instances)


def test_one_document_and_one_sentence(files):
    _write(files["corpus"], "The cat sat on the mat.\n")
    instances = _instances(files, max_seq_length=16, dupe_factor=2)
    check_rules(instances, 16, 20)
    assert len(instances) == 2  # B is drawn from the same (only) document after ten tries


def test_one_enormous_sentence_is_truncated(files):
    _write(files["corpus"], " ".join(WORDS[:10] * 20_000) + "\nIt was warm.\n\nA dog.\n")  # 200,000 pieces
    instances = _instances(files, max_seq_length=32, dupe_factor=2, max_predictions_per_seq=3)
    check_rules(instances, 32, 3)


def test_flags_at_their_limits(files):
    check_rules(_instances(files, max_seq_length=5, dupe_factor=3), 5, 20)
    check_rules(_instances(files, masked_lm_prob=1.0, max_predictions_per_seq=24, max_seq_length=24), 24, 24)
    check_rules(_instances(files, max_predictions_per_seq=1, short_seq_prob=1.0), 128, 1)
    check_rules(_instances(files, short_seq_prob=0.0, whole_word_mask=True, seed=-7), 128, 20)
    check_rules(_instances(files, max_seq_length=512, max_predictions_per_seq=512, dupe_factor=100), 512, 512)
    check_rules(_instances(files, max_seq_length=8192, max_predictions_per_seq=8192, dupe_factor=1), 8192, 8192)


def test_write_batches_are_bounded_in_bytes_not_records(files, monkeypatch):
    # Batches were 1,024 records padded to max_seq_length whatever it was: 100,000 pieces on a
    # 300 KB corpus peaked at 4.1 GB. Now a batch's padded arrays stay within WRITE_BATCH_BYTES,
    # and the batch size does not change a byte of the output.
    from minibert.training.pretraining_data import records

    for length, predictions in [(5, 1), (128, 20), (512, 80), (512, 512)]:
        rows = records.batch_rows(length, predictions)
        padded = records.padded_columns([], length, predictions)  # the arrays' row widths, as written
        row_bytes = sum(column.itemsize * (column.shape[1] if column.ndim == 2 else 1) for column in padded.values())
        assert rows >= 1 and 2 * rows * row_bytes <= records.WRITE_BATCH_BYTES, (length, predictions, rows)
    assert records.batch_rows(512, 80) < records.batch_rows(128, 20)
    whole = _instances(files, max_seq_length=64, dupe_factor=5)
    written = (files["out"] / "t.tfrecord").read_bytes()
    monkeypatch.setattr(records, "WRITE_BATCH_BYTES", 1)  # one record a batch
    assert _instances(files, max_seq_length=64, dupe_factor=5) == whole
    assert (files["out"] / "t.tfrecord").read_bytes() == written


def test_invalid_utf8_ignored_on_request_is_the_text_without_those_bytes(files):
    """--invalid-utf8 ignore = Python's decode(errors="ignore"), which Google's convert_to_unicode
    applies to bytes: the same instances as the file with those bytes removed."""
    dirty = TEXT.encode().replace(b"warm.", b"wa\xffrm.\xc3").replace(b"dog", b"d\x80og")
    _write(files["corpus"], dirty)
    ignored = _instances(files, invalid_utf8="ignore")
    _write(files["corpus"], dirty.decode("utf-8", "ignore"))
    assert ignored == _instances(files)


def test_a_run_of_blank_lines_holds_no_document_per_line(files):
    """Each blank line started a new, empty document, dropped only at the end: 5 MB of blank lines
    peaked at 479 MB. A run of them now ends one document, and the documents are the same (the
    instances against Google's script: test_training_pretraining_data.py)."""
    import tracemalloc

    from minibert.formats.plain_text import read_text_lines
    from minibert.training.pretraining_data.documents import read_documents

    _write(files["corpus"], "The cat.\n" + "\n \r\n" * 150_000 + "A dog.\nIt ran.\n\n\n")  # 300,000 blank lines

    def peak(read) -> tuple[object, int]:
        tracemalloc.start()
        try:
            return read(), tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    documents, held = peak(lambda: read_documents([files["corpus"]], lambda text: [len(text)]))
    _, reading = peak(lambda: sum(1 for _ in read_text_lines(files["corpus"])))  # the file's lines, read and dropped
    assert documents == [[[8]], [[6], [7]]]
    assert held < reading + 1_000_000, f"{held:,} bytes at the peak, {reading:,} to read the lines"  # (19 MB more)


def test_lines_end_at_newline_only(files):
    """Form feed, \x1c, U+2028, U+0085 and \r inside a line do not end it (TensorFlow's reader splits
    at \n alone; Python's splitlines would split at each): still 8 sentences in 3 documents."""
    odd = (
        TEXT.replace("sat on", "sat\x0con").replace("far away", "far\u2028away").replace("It was warm", "It\rwas warm")
    )
    _write(files["corpus"], odd.replace("A cat", "A\x1ccat\x85"))
    summary = create_pretraining_data([files["corpus"]], files["vocab"], [files["out"] / "t.tfrecord"])
    assert (summary.documents, summary.sentences) == (3, 8)


def test_cli_writes_round_robin_shards_with_the_umask(files):
    shards = [files["out"] / f"s{index}.tfrecord" for index in range(3)]
    old_umask = os.umask(0o027)
    os.umask(old_umask)
    result = run(*_args(files, output=",".join(map(str, shards))), umask=0o027)
    assert result.returncode == 0, result.stderr
    assert "instances from 3 documents (8 sentences) written to 3 files" in result.stderr
    single = files["out"] / "one.tfrecord"
    assert run(*_args(files, output=str(single))).returncode == 0
    everything = [example["input_ids"].tolist() for example in read_examples(single)]
    for index, shard in enumerate(shards):
        assert [example["input_ids"].tolist() for example in read_examples(shard)] == everything[index::3]
        assert os.stat(shard).st_mode & 0o777 == 0o640


def test_the_tokenizer_pretraining_data_and_vocab_do_not_load_torch(files):
    """None of them uses torch: a loading module imported it at the top, and the tokenizer imports
    that module, so `minibert pretraining-data` took 200 MB more peak memory and seconds longer
    (docs/pretraining.md's figures). Each runs in a fresh process, torch never imported."""
    pretraining = _args(files)
    vocab = ["vocab", "--input", str(files["corpus"]), "--output", str(files["out"]), "--vocab-size", "60",
             "--min-frequency", "1"]  # fmt: skip
    code = ("import sys, minibert.tokenizer; from minibert import BertTokenizer; from minibert.apps.cli import main\n"
            f"assert BertTokenizer({str(files['vocab'])!r})('The cat sat.')['input_ids']\n"
            "assert 'torch' not in sys.modules, 'the tokenizer imported torch'\n"
            f"print(main({pretraining!r}), main({vocab!r}), [m for m in sys.modules if m.split('.')[0] == 'torch'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "0 0 []", done.stdout + done.stderr


def test_import_minibert_and_the_cli_do_not_load_the_training_room():
    code = ("import sys, minibert, minibert.apps.cli; from minibert import BertTokenizer; "
            "print(sorted(m for m in sys.modules if m.startswith('minibert.training')))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
