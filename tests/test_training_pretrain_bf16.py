"""--bf16 says so where it is slower than float32 (training/run/precision.py): a measured, cached verdict.

Whether bf16 is faster is a property of the CPU, not a number a test can expect; what is tested is
what minibert does with the verdict: one warning line naming the CPU and both speeds where bf16 is
slower, none where it is faster, the verdict measured once and read from the cache after, a damaged
cache measured again. The speeds themselves are in scripts/bench.py's pre-training rows.
"""

from __future__ import annotations

import json

import pytest

from helpers import run_minibert
from minibert.speed import cpu
from minibert.speed.cache import cache_file
from minibert.training.run import precision
from random_instances import random_instances, write_instances

TINY = "tests/data/tiny_hub"  # hidden 32, intermediate 37, vocab 111
BATCH, SEQ_LEN = 4, 16  # the run's micro-batch: 64 tokens


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def pretrain_bf16(tmp_path, verdict: dict, *flag: str) -> list[str]:
    """`minibert pretrain --bf16` (or ``flag``) one step, with this verdict in the cache; its stderr lines."""
    key = precision.cache_key(32, 37, BATCH * SEQ_LEN)
    cache_file().parent.mkdir(parents=True, exist_ok=True)
    cache_file().write_text(json.dumps({key: verdict}))
    data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=SEQ_LEN))
    result = run_minibert("pretrain", "--data", str(data), "--init", TINY, "--output", str(tmp_path / "run"),
                          "--steps", "1", "--batch-size", str(BATCH), *(flag or ["--bf16"]))  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stderr.splitlines()


def test_a_slower_bf16_gets_one_warning_naming_the_cpu_and_both_speeds(tmp_path, cache_dir):
    lines = pretrain_bf16(tmp_path, {"fp32_gflops": 90.0, "bf16_gflops": 55.0})
    warned = [line for line in lines if "--bf16" in line]
    print("\n" + "\n".join(warned))
    assert len(warned) == 1, lines
    if cpu.has_native_bf16():
        assert warned[0].startswith("minibert: warning: --bf16 is slower than float32 on this CPU")
        assert cpu.cpu_name() in warned[0] and "55 GFLOP/s in bf16 against 90 in float32" in warned[0]
        assert str(cache_file()) in warned[0]
    else:  # emulated bf16: said without measuring
        assert "without bf16 instructions" in warned[0]


def test_the_warning_names_the_flag_given_and_the_speed_as_measured(tmp_path, cache_dir):
    """``finetune --precision bf16`` was told "without --bf16 this run is faster" (a flag finetune does
    not have), and a measured 0.0806 GFLOP/s was printed "0 GFLOP/s"."""
    if not cpu.has_native_bf16():
        pytest.skip("this CPU has no bf16 instructions: nothing is measured")
    slow = {"fp32_gflops": 7.13, "bf16_gflops": 0.0806}
    lines = pretrain_bf16(tmp_path, slow, "--precision", "bf16")
    warned = [line for line in lines if line.startswith("minibert: warning:")]
    assert len(warned) == 1 and warned[0].startswith("minibert: warning: --precision bf16 is slower than float32")
    assert "ran at 0.0806 GFLOP/s in bf16 against 7.13 in float32" in warned[0]
    assert warned[0].endswith("so without --precision bf16 this run is faster") and "--bf16" not in warned[0]
    train = tmp_path / "train.csv"
    train.write_text("text,label\na b,x\nb a,y\n", encoding="utf-8")
    cache_file().write_text(json.dumps({precision.cache_key(32, 37, tokens): slow for tokens in range(1, 513)}))
    result = run_minibert("finetune", "--model", TINY, "--train", str(train), "--output", str(tmp_path / "ft"),
                          "--precision", "bf16", "--batch-size", "2", "--max-seq-length", "64")  # fmt: skip
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if line.startswith("minibert: warning:")]
    assert len(warned) == 1 and warned[0].startswith("minibert: warning: --precision bf16 is slower"), warned
    assert "0.0806 GFLOP/s" in warned[0] and "--bf16" not in warned[0]


def test_the_flag_named_is_the_flag_given(monkeypatch, recwarn):
    from minibert.training.options import FinetuneOptions, PretrainOptions

    given = {"data": ["d"], "output": "o", "steps": 1, "batch_size": 1, "init": "i"}
    assert precision.precision_flag(PretrainOptions(**given, bf16=True)) == "--bf16"
    assert precision.precision_flag(PretrainOptions(**given, precision="bf16")) == "--precision bf16"
    assert precision.precision_flag(FinetuneOptions(model="m", train="t.csv", output="o", precision="bf16")) == (
        "--precision bf16")  # fmt: skip
    monkeypatch.setattr(precision, "has_native_bf16", lambda: False)
    assert precision.check_bf16(32, 64, 16, "--precision bf16") is None
    assert str(recwarn.pop(UserWarning).message).startswith("--precision bf16 on a CPU without bf16 instructions")


def test_a_faster_bf16_runs_without_a_word(tmp_path, cache_dir):
    if not cpu.has_native_bf16():
        pytest.skip("this CPU has no bf16 instructions: --bf16 is always warned about")
    lines = pretrain_bf16(tmp_path, {"fp32_gflops": 55.0, "bf16_gflops": 90.0})
    assert not [line for line in lines if "--bf16" in line or "warning" in line], lines


def test_the_verdict_is_measured_once_then_read_from_the_cache(cache_dir, recwarn):
    if not cpu.has_native_bf16():
        pytest.skip("this CPU has no bf16 instructions: nothing is measured")
    measured = precision.check_bf16(32, 64, 16)
    assert not measured.cached and measured.fp32_gflops > 0 and measured.bf16_gflops > 0
    record = json.loads(cache_file().read_text())[precision.cache_key(32, 64, 16)]
    assert record["cpu"] == cpu.cpu_name()
    again = precision.check_bf16(32, 64, 16)
    assert again.cached and (again.fp32_gflops, again.bf16_gflops) == (measured.fp32_gflops, measured.bf16_gflops)
    print(f"\nbf16 autocast {measured.speedup:.2f}x float32 on {cpu.cpu_name()} (tiny shapes, under load)")


@pytest.mark.parametrize("damage", ["{not json", "[1, 2]", '{"KEY": {"fp32_gflops": "fast", "bf16_gflops": 1}}'])
def test_a_damaged_cache_is_measured_again(cache_dir, recwarn, damage):
    if not cpu.has_native_bf16():
        pytest.skip("this CPU has no bf16 instructions: nothing is measured")
    cache_dir.mkdir()
    cache_file().write_text(damage.replace("KEY", precision.cache_key(32, 64, 16)))
    verdict = precision.check_bf16(32, 64, 16)
    assert not verdict.cached and verdict.fp32_gflops > 0
    assert precision.cache_key(32, 64, 16) in json.loads(cache_file().read_text())


def test_a_verdict_that_could_not_be_cached_is_not_said_to_be(tmp_path, monkeypatch):
    """The warning said "measured once, cached in ~/.cache/minibert/gemm.json" also when that write
    failed (a home that is read-only, a cache folder that is a file): the next run measured again,
    against the warning's word. It now says it was not cached, and why."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(blocker / "cache"))  # mkdir fails: NotADirectoryError
    monkeypatch.setattr(precision, "has_native_bf16", lambda: True)
    monkeypatch.setattr(precision, "measure", lambda *shape: precision.Bf16Verdict(90.0, 30.0))
    with pytest.warns(UserWarning) as caught:
        precision.check_bf16(32, 64, 16, "--precision bf16")
    [message] = [str(warning.message) for warning in caught]
    assert f"(measured once, not cached ({blocker / 'cache' / 'gemm.json'}: " in message, message
    assert "measured again by the next process" in message and "cached in" not in message
