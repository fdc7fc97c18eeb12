"""``pretraining-data``'s outputs named in ways a string check misses, and numbers of NumPy's types:

* two ``--output`` shards that are one file (a symbolic link to the other, even before the other
  exists; a linked folder; a hard link) were both renamed onto it: half the instances lost, and
  "written to 2 files (795, 795)". Now refused before anything is read, naming both paths;
* ``--output shards/`` wrote a file named ``shards`` and said "written to shards/": a name that can
  only be a folder, or an existing directory, is a usage error naming it (the library: a DataError);
* ``InstanceOptions(dupe_factor=np.int64(2))`` said "must be a whole number from 1 to 100, got
  np.int64(2)", untrue: NumPy's numbers within the limits are taken as the Python numbers they equal
  (in every options dataclass checked by limits.py), and a bool still is not a number.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from helpers import run_minibert as run
from minibert.errors import DataError
from minibert.formats.file_sets import files_written_together
from minibert.formats.tfrecord import read_examples
from minibert.training.pretraining_data.create import create_pretraining_data
from minibert.training.pretraining_data.options import InstanceOptions

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "it", "was", "warm", "."]
TEXT = "The cat sat on the mat.\nIt was warm.\n\nA cat ran.\nThe dog sat on a mat.\n\nIt was a dog.\nIt ran far away.\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL + WORDS) + "\n", encoding="utf-8")
    (tmp_path / "corpus.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "out").mkdir()
    return tmp_path


def _command(files: Path, output: str) -> list[str]:
    return ["pretraining-data", "--input", str(files / "corpus.txt"), "--vocab", str(files / "vocab.txt"),
            "--output", output, "--max-seq-length", "16", "--max-predictions-per-seq", "3",
            "--dupe-factor", "2"]  # fmt: skip


def _everything(folder: Path) -> dict:
    """Each entry under ``folder``: a link's target, a file's bytes (what a refusal must leave as it was)."""
    return {path: os.readlink(path) if path.is_symlink() else path.read_bytes() if path.is_file() else "folder"
            for path in sorted(folder.rglob("*"))}  # fmt: skip


def _one_file_twice(out: Path) -> dict[str, tuple[str, str]]:
    """Pairs of names that are one file, made under ``out``: (first, second)."""
    (out / "l2.tfrecord").symlink_to("a2.tfrecord")  # a2.tfrecord need not exist yet (the review's case)
    (out / "existing.tfrecord").write_bytes(b"old")
    os.link(out / "existing.tfrecord", out / "hard.tfrecord")
    (out / "sub").mkdir()
    (out / "linked").symlink_to("sub")
    return {
        "a link to a file not written yet": (str(out / "a2.tfrecord"), str(out / "l2.tfrecord")),
        "the link first": (str(out / "l2.tfrecord"), str(out / "a2.tfrecord")),
        "a hard link": (str(out / "existing.tfrecord"), str(out / "hard.tfrecord")),
        "a linked folder": (str(out / "sub" / "s.tfrecord"), str(out / "linked" / "s.tfrecord")),
        "a dot in the path": (str(out / "b.tfrecord"), f"{out}/./b.tfrecord"),
    }


PAIRS = ["a link to a file not written yet", "the link first", "a hard link", "a linked folder", "a dot in the path"]


@pytest.mark.parametrize("pair", PAIRS)
def test_two_names_of_one_file_are_refused_naming_both(files, pair):
    first, second = _one_file_twice(files / "out")[pair]
    before = _everything(files)
    result = run(*_command(files, f"{first},{second}"))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert f"the output files must be different files (one per shard): {first!r} and {second!r} are the same file" \
        in lines[0], lines[0]  # fmt: skip
    assert _everything(files) == before  # nothing read, nothing written: the link still dangles
    with pytest.raises(DataError, match="are the same file"):
        create_pretraining_data(files / "corpus.txt", files / "vocab.txt", [first, "other.tfrecord", second])
    assert _everything(files) == before


def test_distinct_files_through_links_are_still_written(files):
    """A link to a third file is no repeat: each shard lands where its name leads, instances in both."""
    out = files / "out"
    (out / "link.tfrecord").symlink_to("target.tfrecord")
    result = run(*_command(files, f"{out}/a.tfrecord,{out}/link.tfrecord"))
    assert result.returncode == 0, result.stderr
    first, second = (len(list(read_examples(path))) for path in (out / "a.tfrecord", out / "target.tfrecord"))
    assert first > 0 and second > 0 and f"written to 2 files ({first}, {second})" in result.stderr
    assert (out / "link.tfrecord").is_symlink()


def test_files_written_together_refuses_one_file_twice(tmp_path):
    """The writer itself: the second rename would replace the first file, so it writes neither."""
    from minibert.formats.file_sets import same_file

    (tmp_path / "l").symlink_to("a")
    with pytest.raises(DataError, match=f"{tmp_path}/a and {tmp_path}/l are the same file"):
        with files_written_together([tmp_path / "a", tmp_path / "l"]):
            pytest.fail("the block ran")
    assert sorted(os.listdir(tmp_path)) == ["l"]
    assert same_file(tmp_path / "a", tmp_path / "l") and not same_file(tmp_path / "a", tmp_path / "b")


FOLDER_NAMES = {  # --output as typed (under out/) → the usage error's words
    "a trailing slash": ("shards/", "'{out}/shards/' names a folder: name the file(s) to write"),
    "a trailing slash on the second shard": ("a.tfrecord,{out}/shards/", "'{out}/shards/' names a folder"),
    "an existing directory": ("sub", "'{out}/sub' is a directory: name the file(s) to write in it"),
    "an existing directory, slash and all": ("sub/", "'{out}/sub/' names a folder"),
}


@pytest.mark.parametrize("name", list(FOLDER_NAMES))
def test_a_folder_as_output_is_a_usage_error_naming_it(files, name):
    out = files / "out"
    (out / "sub").mkdir()
    typed, expected = FOLDER_NAMES[name]
    before = _everything(files)
    result = run(*_command(files, f"{out}/" + typed.format(out=out)))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert f"argument --output: {expected.format(out=out)}" in lines[0], lines[0]
    assert _everything(files) == before and not (out / "shards").exists()


def test_the_library_refuses_a_folder_name_too(files, monkeypatch):
    monkeypatch.chdir(files)
    for name in ["shards/", "out/..", f"{files}/out/"]:
        with pytest.raises(DataError, match=f"output {name!r} names a folder, not a file"):
            create_pretraining_data("corpus.txt", "vocab.txt", ["a.tfrecord", name])
    assert not (files / "shards").exists() and not (files / "a.tfrecord").exists()


def test_numpy_numbers_within_the_limits_are_the_numbers_they_equal(files):
    given = InstanceOptions(max_seq_length=np.int32(16), max_predictions_per_seq=np.uint8(3), dupe_factor=np.int64(2),
                            masked_lm_prob=np.float64(0.2), short_seq_prob=np.float32(0.5))  # fmt: skip
    plain = InstanceOptions(max_seq_length=16, max_predictions_per_seq=3, dupe_factor=2, masked_lm_prob=0.2,
                            short_seq_prob=0.5)  # fmt: skip
    assert given == plain and repr(given) == repr(plain)
    assert all(type(getattr(given, name)) is type(getattr(plain, name)) for name in ("dupe_factor", "masked_lm_prob"))
    # np.float32(0.15) is taken at its exact value, 0.15000000596046448, not silently as 0.15
    assert InstanceOptions(masked_lm_prob=np.float32(0.15)).masked_lm_prob == float(np.float32(0.15)) != 0.15
    # the same instances as with Python's numbers, the seed a NumPy int too (random.Random refuses one)
    out = files / "out"
    create_pretraining_data(files / "corpus.txt", files / "vocab.txt", out / "np.tfrecord", given, np.int64(7))
    create_pretraining_data(files / "corpus.txt", files / "vocab.txt", out / "py.tfrecord", plain, 7)
    assert (out / "np.tfrecord").read_bytes() == (out / "py.tfrecord").read_bytes()


@pytest.mark.parametrize("field, value, expected", [
    ("dupe_factor", True, r"must be a whole number from 1 to 100, got True \(a bool\)"),
    ("dupe_factor", np.bool_(True), r"got np.True_ \(a bool\)"),
    ("dupe_factor", np.float64(2.0), r"got np.float64\(2.0\) \(a float64\)"),
    ("dupe_factor", np.int64(101), "must be a whole number from 1 to 100, got 101"),
    ("masked_lm_prob", np.float32("nan"), "must be a number above 0 and at most 1, got nan"),
    ("masked_lm_prob", np.bool_(True), r"got np.True_ \(a bool\)"),
    ("short_seq_prob", "0.1", r"must be a number from 0 to 1, got '0.1' \(a str\)"),
])  # fmt: skip
def test_what_is_not_a_number_of_the_field_s_kind_is_still_refused_saying_its_type(field, value, expected):
    with pytest.raises(DataError, match=f"{field} .*{expected}"):
        InstanceOptions(**{field: value})


@pytest.mark.parametrize("seed", [True, 3.0, "3", np.float64(3)])
def test_a_seed_that_is_not_a_whole_number_is_refused_naming_its_type(files, seed):
    expected = rf"random_seed must be a whole number \(an int\), got .* \({type(seed).__name__}\)"
    with pytest.raises(DataError, match=expected):
        create_pretraining_data(files / "corpus.txt", files / "vocab.txt", files / "out" / "t.tfrecord",
                                random_seed=seed)  # fmt: skip
    assert not list((files / "out").iterdir())


def test_the_other_options_checked_by_limits_take_numpy_numbers_too():
    """limits.py's check is shared: pretrain's and finetune's options convert them the same way."""
    from minibert.training.options import FinetuneOptions, PretrainOptions

    options = PretrainOptions(data=["d"], output="o", steps=np.int64(3), batch_size=np.int32(2), init="m",
                              learning_rate=np.float32(0.5))  # fmt: skip
    options.check(processes=1)
    assert options == PretrainOptions(data=["d"], output="o", steps=3, batch_size=2, init="m", learning_rate=0.5)
    assert (type(options.steps), type(options.learning_rate)) == (int, float)
    finetune = FinetuneOptions(model="m", train="t.csv", output="o", batch_size=np.int64(4), epochs=np.float64(2.5))
    finetune.check(processes=1)
    assert (finetune.batch_size, finetune.epochs) == (4, 2.5)
    assert (type(finetune.batch_size), type(finetune.epochs)) == (int, float)
    with pytest.raises(DataError, match=r"--steps must be .*, got np.True_ \(a bool\)"):
        PretrainOptions(data=["d"], output="o", steps=np.bool_(True), batch_size=2, init="m").check(processes=1)
