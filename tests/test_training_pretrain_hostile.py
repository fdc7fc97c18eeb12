"""Bad input to `minibert pretrain`, attacked before users do (issue 36, item 5: the feature-level
TFRecord cases and the training state; issue 34's bad-input list).

Every case: exit code 1 (2 for argparse usage errors), one line on stderr naming the file, record,
feature or field, and nothing written (no run folder for bad data; a refused --resume leaves the
run's files byte for byte as they were).
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import run_minibert
from minibert import BertConfig, BertTokenizer
from minibert.errors import DataError
from minibert.formats.atomic_files import atomic_output
from minibert.formats.tfrecord import frame_records
from minibert.heads import BertForPreTraining
from minibert.training.run.checkpoint import TrainingState
from minibert.training.tasks.tfrecord_instances import check_tokenizer_ids, read_instances
from random_instances import random_instances, write_instances

TINY = "tests/data/tiny_hub"  # vocab_size 111, type_vocab_size 2, max_position_embeddings 64
CONFIG = BertForPreTraining.from_pretrained(TINY).config


def one_line_error(result, code: int = 1) -> str:
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("minibert: error:"), result.stderr
    return lines[0]


# ------------------------------------------------------------------ TFRecords read by training


def mutated(name: str, record: int = 2):
    """Instances whose ``record``-th has feature ``name`` replaced by the case's value (or removed)."""

    def make(value):
        instances = random_instances(5, vocab_size=111, seq_len=16, predictions=4, seed=1)
        if value is None:
            del instances[record][name]
        else:
            instances[record][name] = value
        return instances

    return make


FEATURE_CASES = {
    "missing input_ids": ("input_ids", None, "'input_ids' is missing"),
    "missing input_mask": ("input_mask", None, "'input_mask' is missing"),
    "missing segment_ids": ("segment_ids", None, "'segment_ids' is missing"),
    "missing masked_lm_positions": ("masked_lm_positions", None, "'masked_lm_positions' is missing"),
    "missing masked_lm_ids": ("masked_lm_ids", None, "'masked_lm_ids' is missing"),
    "missing masked_lm_weights": ("masked_lm_weights", None, "'masked_lm_weights' is missing"),
    "missing next_sentence_labels": ("next_sentence_labels", None, "'next_sentence_labels' is missing"),
    "input_ids as floats": ("input_ids", np.ones(16, np.float32), "holds float values, expected int64"),
    "weights as int64": ("masked_lm_weights", np.ones(4, np.int64), "holds int64 values, expected float"),
    "segment_ids as bytes": ("segment_ids", [b"0"] * 16, "holds bytes values, expected int64"),
    "labels as floats": ("next_sentence_labels", np.array([1.0], np.float32), "expected int64"),
    "input_mask one short": ("input_mask", np.ones(15, np.int64), "has 15 values, expected 16"),
    "input_ids one long": ("input_ids", np.full(17, 7, np.int64), "has 17 values, expected 16"),
    "positions of another size": ("masked_lm_positions", np.ones(5, np.int64), "has 5 values, expected 4"),
    "weights of another size": ("masked_lm_weights", np.ones(3, np.float32), "has 3 values, expected 4"),
    "two next-sentence labels": ("next_sentence_labels", np.array([0, 1]), "has 2 values, expected 1"),
    "empty next-sentence label": ("next_sentence_labels", np.zeros(0, np.int64), "has 0 values"),
    "id = vocab_size": ("input_ids", np.full(16, 111, np.int64), "beyond the model's vocabulary (vocab_size = 111)"),
    "id huge": ("input_ids", np.full(16, 2**62, np.int64), "beyond the model's vocabulary"),
    "id negative": ("input_ids", np.full(16, -1, np.int64), "beyond the model's vocabulary"),
    "masked id beyond vocab": ("masked_lm_ids", np.full(4, 500, np.int64), "'masked_lm_ids' holds an id beyond"),
    "segment id 2": ("segment_ids", np.full(16, 2, np.int64), "segment id beyond type_vocab_size = 2"),
    "mask value 2": ("input_mask", np.full(16, 2, np.int64), "a value other than 0 and 1"),
    "position = T": ("masked_lm_positions", np.full(4, 16, np.int64), "a position outside the 16 tokens"),
    "position negative": ("masked_lm_positions", np.full(4, -3, np.int64), "a position outside"),
    "weight NaN": ("masked_lm_weights", np.full(4, np.nan, np.float32), "negative or not finite"),
    "weight infinite": ("masked_lm_weights", np.full(4, np.inf, np.float32), "negative or not finite"),
    "weight negative": ("masked_lm_weights", np.full(4, -1.0, np.float32), "negative or not finite"),
    "label 2": ("next_sentence_labels", np.array([2]), "a label other than 0"),
    "label -1": ("next_sentence_labels", np.array([-1]), "a label other than 0"),
}


@pytest.mark.parametrize("case", FEATURE_CASES)
def test_a_bad_feature_is_refused_naming_file_record_and_feature(case, tmp_path):
    name, value, problem = FEATURE_CASES[case]
    path = write_instances(tmp_path / "data.tfrecord", mutated(name)(value))
    with pytest.raises(DataError) as caught:
        read_instances([path], CONFIG)
    message = str(caught.value)
    assert str(path) in message and "record 2 (0-based)" in message and problem in message, message


def test_the_first_record_sets_the_sizes_and_a_later_file_is_named(tmp_path):
    good = write_instances(tmp_path / "good.tfrecord", random_instances(4, vocab_size=111, seq_len=16))
    longer = write_instances(tmp_path / "longer.tfrecord", random_instances(3, vocab_size=111, seq_len=20))
    with pytest.raises(DataError) as caught:
        read_instances([good, longer], CONFIG)
    assert str(caught.value) == (  # the size comes from good.tfrecord: "the first record" said record 0 of the other
        f"TFRecord file {longer}, record 0 (0-based): feature 'input_ids' has 20 values, expected 16 (as input_ids "
        f"of TFRecord file {good}, record 0 (0-based): the instances of every --data file share one max_seq_length)")
    bad = random_instances(3, vocab_size=111, seq_len=16)
    bad[1]["input_ids"] = np.full(16, 111, np.int64)
    second = write_instances(tmp_path / "second.tfrecord", bad)
    with pytest.raises(DataError, match=r"second.tfrecord, record 1 \(0-based\)"):
        read_instances([good, second], CONFIG)


def test_extra_features_are_ignored_as_tensorflow_ignores_them(tmp_path):
    instances = random_instances(3, vocab_size=111, seq_len=16)
    for instance in instances:
        instance["something_else"] = [b"ignored"]
    read = read_instances([write_instances(tmp_path / "extra.tfrecord", instances)], CONFIG)
    assert len(read) == 3 and "something_else" not in read.arrays


def test_instances_longer_than_the_position_table_are_refused(tmp_path):
    path = write_instances(tmp_path / "long.tfrecord", random_instances(3, vocab_size=111, seq_len=80))
    with pytest.raises(DataError, match="80 tokens are longer than the model's max_position_embeddings = 64"):
        read_instances([path], CONFIG)


def test_files_that_are_not_instances(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("Once upon a time there was a file that was not a TFRecord.\n" * 3)
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    garbage = tmp_path / "garbage.tfrecord"
    with atomic_output(garbage) as handle:  # CRCs right, the data not a protobuf
        handle.write(frame_records([b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"]))
    for path, match in [(text, "text.txt, record 0"), (empty, "no instances"), (garbage, "garbage.tfrecord, record 0"),
                        (tmp_path / "absent.tfrecord", "does not exist"), (tmp_path, "is a directory")]:  # fmt: skip
        with pytest.raises(DataError, match=match):
            read_instances([path], CONFIG)


def test_a_crc_failure_stops_the_command_before_any_step(tmp_path):
    path = write_instances(tmp_path / "data.tfrecord", random_instances(6, vocab_size=111, seq_len=16))
    data = bytearray(path.read_bytes())
    data[-10] ^= 0x01  # inside the last record's data
    path.write_bytes(bytes(data))
    output = tmp_path / "run"
    line = one_line_error(run_minibert("pretrain", "--data", str(path), "--init", TINY, "--output", str(output),
                                       "--steps", "2", "--batch-size", "2"))  # fmt: skip
    assert "CRC" in line and str(path) in line and "record 5 (0-based)" in line, line
    assert not output.exists()  # nothing written, no step taken


# ------------------------------------------------------------------ the command line


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    return write_instances(folder / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=5))


def pretrain(data: Path, output: Path, *extra: str):
    return run_minibert("pretrain", "--data", str(data), "--output", str(output), "--steps", "2", *extra)


@pytest.mark.parametrize(
    "flags, code, message",
    [
        (["--init", TINY, "--batch-size", "0"], 2, "--batch-size: must be a whole number of at least 1, got 0"),
        (["--batch-size", "2"], 2, "one of the arguments --init --config is required"),
        (["--init", TINY, "--config", "c.json", "--batch-size", "2"], 2, "not allowed with argument"),
        (["--config", f"{TINY}/config.json", "--batch-size", "2"], 2, "--config needs --vocab"),  # flags alone decide
        (["--init", TINY, "--batch-size", "3", "--accumulate", "2"], 2, "does not split into 1 process(es)"),
        (
            ["--init", TINY, "--batch-size", "2", "--dropout", "1.5"],
            2,
            "--dropout: must be a number at least 0 and below 1, got 1.5",
        ),
        (
            ["--init", TINY, "--batch-size", "2", "--learning-rate", "nan"],
            2,
            "--learning-rate: must be a number above 0, got nan",
        ),
        (
            ["--init", TINY, "--batch-size", "2", "--warmup-steps", "-1"],
            2,
            "--warmup-steps: must be a whole number of at least 0, got -1",
        ),
        (
            ["--init", TINY, "--batch-size", "2", "--max-grad-norm", "0"],
            2,
            "--max-grad-norm: must be a number above 0, got 0",
        ),
        (
            ["--init", TINY, "--batch-size", "2", "--seed", "100000000000000000000"],
            2,
            "--seed: must be a whole number from 0 to 9223372036854775807, got 100000000000000000000",
        ),
        (["--init", "tests/data/no-such-model", "--batch-size", "2"], 1, "no-such-model"),
        (["--config", "missing.json", "--vocab", f"{TINY}/vocab.txt", "--batch-size", "2"], 1, "missing.json"),
    ],
)
def test_bad_flags(data, tmp_path, flags, code, message):
    output = tmp_path / "run"
    line = one_line_error(pretrain(data, output, *flags), code)
    assert message in line, line
    assert not output.exists()


def test_options_made_in_python_take_one_path_as_one_file(data, tmp_path):
    """PretrainOptions(data="x.tfrecord") read each character as a file ("TFRecord file c does not
    exist"), as create_pretraining_data never does: one str or Path is one file; other values are refused."""
    from minibert.training import PretrainOptions, pretrain

    def options(given, output="run"):
        return PretrainOptions(data=given, init=TINY, output=str(tmp_path / output), steps=1, batch_size=2)

    assert options(str(data)).data == options(data).data == options((data,)).data == [str(data)]
    for given, message in [(5, "data must be a TFRecord file's path or a list of paths, got int"),
                           (b"x.tfrecord", "got bytes"), ([str(data), 7], "data must be paths (str or Path), got 7")]:
        with pytest.raises(DataError, match=re.escape(message)):
            options(given)
    folder = pretrain(options(str(data)))
    assert len((folder / "metrics.jsonl").read_text().splitlines()) == 1


def test_a_warmup_longer_than_the_run_runs_as_google_and_says_so(data, tmp_path):
    """Google's run_pretraining.py takes a warmup longer than the run (the rate rises throughout,
    never reaching the peak nor decaying); it ran silently, under a --steps help that said the
    schedule reaches 0 there. Now it runs the same rates and one warning line says so."""
    output = tmp_path / "run"
    result = pretrain(data, output, "--init", TINY, "--batch-size", "2", "--warmup-steps", "5", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if line.startswith("minibert: warning:")]
    assert warned == ["minibert: warning: --warmup-steps 5 is more than --steps 2: the rate rises for the whole run "
                      "(to 2e-05 at the last update), never reaching --learning-rate 0.0001 nor decaying to 0 "
                      "(Google's rule allows it)"], result.stderr  # fmt: skip
    rates = [json.loads(line)["learning_rate"] for line in (output / "metrics.jsonl").read_text().splitlines()]
    assert rates == [0.0, 2e-05]  # peak · s / warmup, s = 0, 1
    quiet = pretrain(data, tmp_path / "quiet", "--init", TINY, "--batch-size", "2", "--warmup-steps", "2")
    assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet.stderr


def test_a_vocabulary_larger_than_the_config_is_refused(data, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "".join(f"{piece}\n" for piece in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        + "".join(f"piece{i}\n" for i in range(200))
    )
    line = one_line_error(pretrain(data, tmp_path / "run", "--config", f"{TINY}/config.json", "--vocab", str(vocab),
                                   "--batch-size", "2"))  # fmt: skip
    assert "vocab_size is 111" in line and "vocab.txt" in line, line


def test_a_run_from_a_config_cuts_texts_where_its_positions_end(data, tmp_path):
    """Not hostile, a trap all the same: the run's tokenizer said 512 (BERT's usual) for a model of 64
    positions, so fill_mask on a long text handed the model more tokens than it has positions."""
    result = pretrain(data, tmp_path / "run", "--config", f"{TINY}/config.json", "--vocab", f"{TINY}/vocab.txt",
                      "--batch-size", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "run" / "tokenizer_config.json").read_text())["model_max_length"] == 64
    assert BertTokenizer.from_pretrained(tmp_path / "run").model_max_length == 64


def config_file(path: Path, **fields) -> Path:
    """tiny_hub's config.json with ``fields`` changed, written at ``path`` (a name of the test's choosing)."""
    path.write_text(json.dumps({**json.loads(Path(f"{TINY}/config.json").read_text()), **fields}))
    return path


def test_ids_the_saved_tokenizer_cannot_give_are_refused(tmp_path):
    """A model of vocab_size 200 with a vocabulary of 111 pieces (a vocabulary padded to a round
    size): ids 111 … 199 have embeddings, so the run trained on them, and saved a tokenizer that
    never gives them. Refused before any step, from --config with --vocab and from --init alike."""
    data = write_instances(tmp_path / "wide.tfrecord", random_instances(4, vocab_size=200, seq_len=16, seed=3))
    config = config_file(tmp_path / "cfg200.json", vocab_size=200)
    init = tmp_path / "init200"
    BertForPreTraining(BertConfig.from_json_file(config)).save_pretrained(init)
    shutil.copy(f"{TINY}/vocab.txt", init / "vocab.txt")
    for flags, source in [(["--config", str(config), "--vocab", f"{TINY}/vocab.txt"], f"--vocab {TINY}/vocab.txt"),
                          (["--init", str(init)], f"--init {init}'s tokenizer")]:  # fmt: skip
        output = tmp_path / f"run{len(flags)}"
        line = one_line_error(pretrain(data, output, *flags, "--batch-size", "2"))
        assert re.search(rf"wide\.tfrecord, record 0 \(0-based\): feature 'input_ids' holds id 1[1-9]\d, which "
                         rf"{re.escape(source)} cannot give: it has 111 ids \(0 to 110\) and the model's vocab_size "
                         r"is 200", line), line  # fmt: skip
        assert not output.exists()


def test_masked_lm_ids_the_tokenizer_cannot_give_are_refused(tmp_path):
    instances = random_instances(5, vocab_size=100, seq_len=16, seed=2)
    instances[3]["masked_lm_ids"] = np.array([7, 105, 0, 0], np.int64)  # input_ids all below 100
    read = read_instances([write_instances(tmp_path / "labels.tfrecord", instances)], CONFIG)
    with pytest.raises(DataError, match=r"record 3 \(0-based\): feature 'masked_lm_ids' holds id 105, which the "
                                        r"tokenizer cannot give: it has 100 ids"):  # fmt: skip
        check_tokenizer_ids(read, 100, "the tokenizer", CONFIG)
    check_tokenizer_ids(read, 106, "the tokenizer", CONFIG)  # every id within: nothing said


def test_a_config_refused_is_named_as_given(data, tmp_path):
    """The config a message names is the --config file given, not config.json."""
    flags = ["--vocab", f"{TINY}/vocab.txt", "--batch-size", "2"]
    short = config_file(tmp_path / "short.json", max_position_embeddings=8)
    line = one_line_error(pretrain(data, tmp_path / "run", "--config", str(short), *flags))
    assert line.endswith(f"16 tokens are longer than the model's max_position_embeddings = 8 (--config {short})"), line
    untied = config_file(tmp_path / "untied.json", tie_word_embeddings=False)
    line = one_line_error(pretrain(data, tmp_path / "run", "--config", str(untied), *flags))
    assert f"error: --config {untied}: config field tie_word_embeddings = false" in line, line
    assert not (tmp_path / "run").exists()


def test_missing_data_file(tmp_path):
    line = one_line_error(pretrain(tmp_path / "absent.tfrecord", tmp_path / "run", "--init", TINY, "--batch-size", "2"))
    assert "absent.tfrecord does not exist" in line


def test_data_that_is_not_a_regular_file_is_named(tmp_path):
    """/dev/urandom was read as records of made-up sizes (a pipe, `<(cat x.tfrecord)`: "Illegal seek";
    tests/test_formats_tfrecord_hostile.py)."""
    line = one_line_error(pretrain(Path("/dev/urandom"), tmp_path / "run", "--init", TINY, "--batch-size", "2"))
    assert line.startswith("minibert: error: TFRecord file /dev/urandom is a character device, not a regular"), line
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ the training state


@pytest.fixture(scope="module")
def finished(data, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("finished") / "run"
    result = pretrain(data, run, "--init", TINY, "--batch-size", "2", "--keep-state")  # the whole state, to tamper with
    assert result.returncode == 0, result.stderr
    return run


def snapshot(run: Path) -> dict[str, bytes]:
    return {path.name: hashlib.sha256(path.read_bytes()).digest() for path in sorted(run.iterdir())}


def test_an_output_that_holds_a_run_is_not_overwritten(data, finished, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    before = snapshot(run)
    line = one_line_error(pretrain(data, run, "--init", TINY, "--batch-size", "2"))
    assert "already holds a run" in line and "--resume" in line
    assert snapshot(run) == before


def test_resume_with_nothing_to_resume(data, tmp_path):
    line = one_line_error(pretrain(data, tmp_path / "run", "--init", TINY, "--batch-size", "2", "--resume"))
    assert "nothing to resume" in line and "training_state.pt" in line



def test_resume_with_another_vocabulary_or_casing_is_refused(data, tmp_path):
    """--config and --vocab (and --cased) are not settings a resume compares by name: another
    vocab.txt of the same size (two pieces swapped) or the other casing once resumed silently and
    saved that tokenizer beside weights trained on the first one's ids."""
    vocab = tmp_path / "vocab.txt"
    shutil.copy(Path(TINY) / "vocab.txt", vocab)
    run = tmp_path / "run"
    argv = ["--config", str(Path(TINY) / "config.json"), "--vocab", str(vocab), "--batch-size", "2", "--keep-state"]
    assert pretrain(data, run, *argv).returncode == 0
    before = {path.name: path.read_bytes() for path in run.iterdir() if path.is_file()}
    pieces = vocab.read_text(encoding="utf-8").splitlines()
    pieces[-1], pieces[-2] = pieces[-2], pieces[-1]
    vocab.write_text("\n".join(pieces) + "\n", encoding="utf-8")
    line = one_line_error(pretrain(data, run, *argv, "--resume"))
    assert "the tokenizer this command gives (--vocab and --cased) is not the run's" in line, line
    shutil.copy(Path(TINY) / "vocab.txt", vocab)
    line = one_line_error(pretrain(data, run, *argv, "--cased", "--resume"))
    assert "the tokenizer this command gives (--vocab and --cased) is not the run's" in line, line
    assert {path.name: path.read_bytes() for path in run.iterdir() if path.is_file()} == before
    assert pretrain(data, run, *argv, "--resume").returncode == 0  # the run's own vocabulary: resumed

def rewrite(change):
    """A state rewritten with a valid SHA-256: the structure checks alone must catch ``change``."""

    def apply(path: Path) -> None:
        state = TrainingState.from_file(path)
        change(state)
        path.write_bytes(state.to_bytes())

    return apply


def raw(change):
    def apply(path: Path) -> None:
        path.write_bytes(change(path.read_bytes()))

    return apply


def resaved(values):
    buffer = io.BytesIO()
    torch.save(values, buffer)
    return buffer.getvalue() + hashlib.sha256(buffer.getvalue()).digest()


def first_moment(state):
    return next(iter(state.moments))


STATE_CASES = {
    "truncated to half": (raw(lambda b: b[: len(b) // 2]), "truncated or was altered"),
    "truncated by one byte": (raw(lambda b: b[:-1]), "truncated or was altered"),
    "empty": (raw(lambda b: b""), "truncated or was altered"),
    "one bit flipped": (raw(lambda b: b[:100] + bytes([b[100] ^ 1]) + b[101:]), "truncated or was altered"),
    "not a torch file": (raw(lambda b: b"x" * 64 + hashlib.sha256(b"x" * 64).digest()), "cannot be read"),
    "a list, not a state": (raw(lambda b: resaved([1, 2, 3])), "not a minibert training state"),
    "another format": (raw(lambda b: resaved({"format": 99})), "not a minibert training state of format 1"),
    "rng field missing": (raw(lambda b: resaved({"format": 1, "step": 1})), "missing data_position"),
    "moments of the wrong shape": (
        rewrite(lambda s: s.moments.update({first_moment(s): (torch.zeros(3), torch.zeros(3))})),
        "optimizer moments of bert.embeddings.word_embeddings.weight: m is (3,)",
    ),
    "a moment missing": (rewrite(lambda s: s.moments.pop(first_moment(s))), "do not name the model's parameters"),
    "moments not a pair": (rewrite(lambda s: s.moments.update({first_moment(s): (torch.zeros(1),)})), "not a pair"),
    "moments NaN": (rewrite(lambda s: s.moments[first_moment(s)][1].fill_(float("nan"))), "NaN or infinite"),
    "step beyond --steps": (rewrite(lambda s: setattr(s, "step", 3)), "step 3 is outside 0 … --steps 2"),
    "step negative": (rewrite(lambda s: setattr(s, "step", -1)), "step -1 is outside"),
    "step a float": (rewrite(lambda s: setattr(s, "step", 1.5)), "step 1.5 is outside"),
    "data position beyond the file": (rewrite(lambda s: setattr(s, "data_position", 10**9)), "data position"),
    "data position off by one": (rewrite(lambda s: setattr(s, "data_position", 5)), "does not follow from step"),
    "random-number states missing": (rewrite(lambda s: setattr(s, "rng", [])), "random-number states are missing"),
    "random-number state cut": (rewrite(lambda s: setattr(s, "rng", [s.rng[0][:10]])), "not a CPU generator state"),
    "weights of another shape": (
        rewrite(lambda s: s.weights.update({"nsp_head.bias": torch.zeros(3)})),
        "weights: nsp_head.bias is (3,)",
    ),
    "a weight missing": (rewrite(lambda s: s.weights.pop("nsp_head.bias")), "missing ['nsp_head.bias']"),
    "weights infinite": (rewrite(lambda s: s.weights["nsp_head.bias"].fill_(float("inf"))), "NaN or infinite"),
    "weights in float16": (
        rewrite(lambda s: s.weights.update({"nsp_head.bias": s.weights["nsp_head.bias"].half()})),
        "torch.float16, expected (2,) torch.float32",
    ),
    "another config": (rewrite(lambda s: s.config.update({"hidden_act": "relu"})), "config differs in hidden_act"),
    "other data": (rewrite(lambda s: setattr(s, "data_fingerprint", "0" * 64)), "trained on other data"),
    "another weight decay": (  # (not the rate: a diverged run resumes with a lower one, test_training_nonfinite.py)
        rewrite(lambda s: s.settings.update({"weight_decay": 0.5})),
        "made with weight_decay (--weight-decay) = 0.5",
    ),
    "another process count": (rewrite(lambda s: s.settings.update({"processes": 2})), "made with processes = 2"),
}


@pytest.mark.parametrize("case", STATE_CASES)
def test_a_tampered_training_state_is_refused_on_resume(case, data, finished, tmp_path):
    change, problem = STATE_CASES[case]
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    change(run / "training_state.pt")
    before = snapshot(run)
    line = one_line_error(pretrain(data, run, "--init", TINY, "--batch-size", "2", "--resume"))
    assert "training_state.pt" in line and problem in line, line
    assert snapshot(run) == before  # nothing overwritten


@pytest.mark.parametrize(
    "flags, problem",
    [
        (["--batch-size", "4"], "made with batch_size (--batch-size) = 2, this command gives 4"),
        (["--batch-size", "2", "--seed", "7"], "made with seed (--seed) = 12345"),
        (["--batch-size", "2", "--dropout", "0"], "made with dropout (--dropout) = None"),
        (["--batch-size", "2", "--bf16"], "made with precision (--precision) = 'fp32', this command gives 'bf16'"),
    ],
)
def test_resume_with_other_settings_is_refused(flags, problem, data, finished, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    before = snapshot(run)
    line = one_line_error(pretrain(data, run, "--init", TINY, *flags, "--resume"))
    assert problem in line, line
    assert snapshot(run) == before


def test_resume_on_other_data_is_refused(finished, tmp_path):
    other = write_instances(tmp_path / "other.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=99))
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    line = one_line_error(pretrain(other, run, "--init", TINY, "--batch-size", "2", "--resume"))
    assert "trained on other data" in line


def test_a_finished_run_resumes_to_itself(data, finished, tmp_path):
    """--resume of a run at its last step: nothing to do, the same files (no error)."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    weights = (run / "model.safetensors").read_bytes()
    assert pretrain(data, run, "--init", TINY, "--batch-size", "2", "--resume").returncode == 0
    assert (run / "model.safetensors").read_bytes() == weights
    assert copy.copy((run / "metrics.jsonl").read_text().count("\n")) == 2
