"""What every "is X faster than float32 here?" is measured against (speed/measure.py): float32 as a
loaded model runs it, on the faster of the GEMM backends gemm.py may pick (F.linear, oneDNN
prepacked), not on F.linear alone. On a full-width AVX-512 EPYC (Zen 5) MKL's float32 runs at 43%
of oneDNN's, so a verdict against MKL alone called int8 6.2x float32 where a whole run is 1.78x, and
a dtype between the two would be called faster than the float32 a user actually gets.

The verdicts' decisions are tested with the timings fixed (``measure.best_times`` replaced: a
measurement on a shared machine is noise, and a test must say what it decides, not what the CPU
did); the runs themselves are checked to compute the projection, each on its backend."""

from __future__ import annotations

import copy
import json
import logging

import pytest
import torch
from torch import nn

from helpers import needs_onednn
from minibert.speed import bf16, cpu, int8_check, measure
from minibert.speed.cache import cache_file, read_cache
from minibert.speed.packed_linear import PackedLinear, onednn_refuses

pytestmark = pytest.mark.usefixtures("own_gemm_cache")  # each test measures into its own cache

FP32_EPS = 2.0**-23


def fixed_times(seconds: dict[tuple[str, str], float]):
    """A ``best_times`` that answers ``seconds`` for each run it is given, keyed as
    time_candidates_against_float32 keys its runs: ("float32", backend), ("candidate", name); a run
    it has no figure for fails the test (the measurement asked for something this test did not expect)."""

    def best_times(runs, thread_counts, *args, **kwargs):
        missing = set(runs) - set(seconds)
        assert not missing, f"runs timed that the test gave no figure for: {missing}"
        return {(threads, key): seconds[key] for threads in thread_counts for key in runs}

    return best_times


@needs_onednn
def test_float32_runs_on_each_backend_a_loaded_model_may_run_on():
    assert set(measure.gemm_backends()) == {"mkl", "onednn"}  # oneDNN runs float32 wherever torch has it
    assert set(measure.gemm_backends(backward=True)) == {"mkl"}  # training multiplies through F.linear
    bf16_backends = set(measure.gemm_backends(bf16.to_bfloat16, torch.bfloat16))
    assert bf16_backends == ({"mkl", "onednn"} if onednn_refuses(torch.bfloat16) is None else {"mkl"})
    assert onednn_refuses(torch.float16) == "dtype torch.float16"


@needs_onednn
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_each_backend_computes_the_projection(dtype):
    """The runs timed are the projection itself on each backend (a backend that skipped the work
    would win every verdict): the same numbers as nn.Linear, up to the order of the float sums."""
    if dtype == torch.bfloat16 and onednn_refuses(dtype) is not None:
        pytest.skip(f"oneDNN takes no bfloat16 here: {onednn_refuses(dtype)}")
    generator = torch.Generator().manual_seed(0)
    linear = nn.Linear(96, 40)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(40, 96, generator=generator))
        linear.bias.copy_(torch.randn(40, generator=generator))
    x = torch.randn(17, 96, generator=generator)
    make = bf16.to_bfloat16 if dtype == torch.bfloat16 else None
    backends = measure.gemm_backends(make, dtype)
    assert isinstance(backends["onednn"](copy.deepcopy(linear)), PackedLinear)
    with torch.inference_mode():
        exact = torch.nn.functional.linear(x.double(), linear.weight.double(), linear.bias.double())  # (17, 40)
        magnitude = x.double().abs() @ linear.weight.double().abs().T + linear.bias.double().abs()
        for name, make_one in backends.items():
            got = make_one(copy.deepcopy(linear))(x.to(dtype)).double()
            if dtype == torch.float32:
                # fp32 products summed in any order: each of the 96 terms and partial sums rounds once
                bound = 97 * FP32_EPS * magnitude
            else:  # bf16 inputs (8 bits of mantissa: 2^-9 relative each), float32 sums, a bf16 output
                bound = (2 * 2.0**-9 + 97 * FP32_EPS) * magnitude + 2.0**-9 * exact.abs()
            excess = ((got - exact).abs() - bound).max().item()
            assert excess <= 0, f"{name} ({dtype}): off by more than rounding allows ({excess:.3g} over)"


def test_a_candidate_is_timed_against_the_faster_float32(monkeypatch):
    """MKL's float32 2.0 s, oneDNN's 1.0 s, the candidate 1.5 s: 0.67x float32, not 1.33x (which
    is what a verdict against MKL alone said)."""
    backends = set(measure.gemm_backends())
    for mkl, onednn, expected_backend in [(2.0, 1.0, "onednn"), (1.0, 2.0, "mkl")]:
        seconds = {("float32", "mkl"): mkl, ("float32", "onednn"): onednn, ("candidate", "candidate"): 1.5}
        if "onednn" not in backends:  # torch built without oneDNN: F.linear is the only float32
            seconds.pop(("float32", "onednn"))
            expected_backend = "mkl"
        monkeypatch.setattr(measure, "best_times", fixed_times(seconds))
        times = measure.time_against_float32(8, 16, lambda linear: linear, tokens=4, budget=0.0)
        faster = seconds[("float32", expected_backend)]
        assert times.float32_backend == expected_backend and times.float32 == faster
        assert times.speedup == pytest.approx(faster / 1.5)


def test_training_times_float32_on_f_linear_alone(monkeypatch):
    """A training step's float32 is F.linear's (a packed layer falls back to it when a gradient is
    recorded): --bf16's verdict is against that, with no oneDNN run timed beside it."""
    monkeypatch.setattr(measure, "best_times",
                        fixed_times({("float32", "mkl"): 2.0, ("candidate", "candidate"): 1.0}))  # fmt: skip
    times = measure.time_against_float32(8, 16, lambda linear: linear, tokens=4, budget=0.0, backward=True)
    assert times.float32_backend == "mkl" and times.speedup == 2.0


@needs_onednn
def test_int8_between_mkl_and_onednn_float32_is_said_to_buy_no_speed(monkeypatch, caplog):
    """int8 1.5 s, float32 2.0 s on MKL and 1.0 s on oneDNN: a float32 model runs on oneDNN here, so
    int8 buys no speed, and the warning says so (against MKL alone it read 1.33x, no warning)."""
    monkeypatch.setattr(int8_check, "LIBRARIES", ("fbgemm",))  # one library: the figures are this test's
    monkeypatch.setattr(int8_check, "_warned", set())
    monkeypatch.setattr(measure, "best_times", fixed_times({("float32", "mkl"): 2.0, ("float32", "onednn"): 1.0,
                                                            ("candidate", "fbgemm"): 1.5}))  # fmt: skip
    speedups = int8_check.int8_speedups(32, 64, budget=0.0)
    assert speedups == {"fbgemm": pytest.approx(0.667, abs=1e-3)}
    [record] = [record for record in read_cache().values() if "speedups" in record]
    assert record["float32_backend"] == "onednn"
    config = type("Config", (), {"hidden_size": 32, "intermediate_size": 64})()
    with caplog.at_level(logging.WARNING, logger="minibert.int8"):
        int8_check._say_what_int8_buys(config, int8_check.Int8Library("fbgemm", speedups["fbgemm"], "measured"))
    assert "measured 0.67x float32 (on its faster GEMM library here)" in caplog.text
    assert "buys no speed here" in caplog.text


def test_fastest_is_bfloat16_only_where_it_beats_the_faster_float32(monkeypatch):
    """dtype="fastest" on a CPU with bf16 instructions: bfloat16 1.2 s at best, float32 2.0 s on MKL
    and 1.0 s on oneDNN. Against MKL alone bf16 won (1.67x) and "fastest" loaded the slower model."""
    monkeypatch.setattr(cpu, "read_cpuinfo", lambda: {"flags": "avx512f avx512_bf16", "model name": "test CPU"})
    bf16_backends = measure.gemm_backends(bf16.to_bfloat16, torch.bfloat16)
    float32_backends = measure.gemm_backends()
    for onednn_float32, expected in [(1.0, False), (3.0, True)]:
        cache_file().unlink(missing_ok=True)
        seconds = {("float32", "mkl"): 2.0, ("float32", "onednn"): onednn_float32}
        seconds = {key: value for key, value in seconds.items() if key[1] in float32_backends}
        seconds.update({("candidate", name): 1.2 if name == "onednn" else 1.5 for name in bf16_backends})
        monkeypatch.setattr(measure, "best_times", fixed_times(seconds))
        if "onednn" not in float32_backends:  # no oneDNN at all: MKL's 2.0 s is float32's, bf16 wins
            expected = True
        assert bf16.bf16_is_faster(32, 64) is expected, seconds
        [record] = [record for record in json.loads(cache_file().read_text()).values() if "bf16_faster" in record]
        fastest_float32 = min(float32_backends, key=lambda name: seconds["float32", name])
        fastest_bf16 = min(bf16_backends, key=lambda name: seconds["candidate", name])
        assert record["float32_backend"] == fastest_float32 and record["bfloat16_backend"] == fastest_bf16
        assert record["float32_seconds"] == seconds["float32", fastest_float32]


def timed_runs(seconds: dict[tuple[str, str], float], timed: list):
    """``fixed_times`` that also records the runs each measurement timed (into ``timed``)."""
    answer = fixed_times(seconds)

    def best_times(runs, *args, **kwargs):
        timed.append(set(runs))
        return answer(runs, *args, **kwargs)

    return best_times


@needs_onednn
@pytest.mark.parametrize("how", ["argument", "environment"])
def test_fastest_times_both_dtypes_on_the_gemm_library_asked_for(monkeypatch, how):
    """With a GEMM library asked for (from_pretrained's ``gemm=``, or ``$MINIBERT_GEMM``), the model
    runs its projections there whatever is faster, so "fastest" times both dtypes there alone. Here
    bfloat16 on oneDNN (0.5 s) halves float32 on oneDNN (1.0 s), but on MKL it is 1.9 s against
    2.0 s, a tie: asked for MKL, "fastest" is float32 (timed on the faster library, it said
    bfloat16, and loaded a model slower than the float32 one the user asked MKL for)."""
    if onednn_refuses(torch.bfloat16) is not None:
        pytest.skip(f"oneDNN takes no bfloat16 here: {onednn_refuses(torch.bfloat16)}")
    monkeypatch.setattr(cpu, "read_cpuinfo", lambda: {"flags": "avx512f avx512_bf16", "model name": "test CPU"})
    seconds = {("float32", "mkl"): 2.0, ("float32", "onednn"): 1.0, ("candidate", "mkl"): 1.9,
               ("candidate", "onednn"): 0.5}  # fmt: skip
    timed = []
    monkeypatch.setattr(measure, "best_times", timed_runs(seconds, timed))

    def verdict(library: str | None) -> bool:
        if how == "environment":
            monkeypatch.setenv("MINIBERT_GEMM", library or "auto")
            return bf16.bf16_is_faster(32, 64)
        return bf16.bf16_is_faster(32, 64, gemm=library)

    assert verdict("mkl") is False
    assert timed[-1] == {("float32", "mkl"), ("candidate", "mkl")}  # MKL alone, both dtypes
    for library in ("onednn", "onednn-fused"):  # the fused one multiplies on oneDNN too
        assert verdict(library) is True
    assert timed[-1] == {("float32", "onednn"), ("candidate", "onednn")}
    assert len(timed) == 2, "onednn-fused measured again: it is oneDNN's verdict, cached"
    assert verdict(None) is True and len(timed[-1]) == 4  # auto: each on both, the faster counting
    records = {key: record for key, record in read_cache().items() if "bf16_faster" in record}
    assert sorted(record["bf16_faster"] for record in records.values()) == [False, True, True]  # cached apart
    assert [r["float32_backend"] for r in records.values() if not r["bf16_faster"]] == ["mkl"]
    assert verdict("mkl") is False and len(timed) == 3  # the MKL verdict read back, not measured again


def test_fastest_is_float32_where_the_library_asked_for_takes_no_bfloat16(monkeypatch):
    """oneDNN asked for, on a CPU where it refuses bfloat16 (bf16 instructions torch has, oneDNN's
    reorder not): the bfloat16 model would be refused at load (``gemm=``) or moved to MKL with a
    warning (``$MINIBERT_GEMM``), so "fastest" is float32 there, without measuring."""
    monkeypatch.setattr(cpu, "read_cpuinfo", lambda: {"flags": "avx512f avx512_bf16", "model name": "test CPU"})
    monkeypatch.setattr(measure, "onednn_refuses",
                        lambda dtype: "no bfloat16 reorder" if dtype == torch.bfloat16 else None)  # fmt: skip
    monkeypatch.setattr(measure, "best_times", lambda *args, **kwargs: pytest.fail("measured"))
    assert bf16.bf16_is_faster(32, 64, gemm="onednn") is False
    monkeypatch.setenv("MINIBERT_GEMM", "onednn-fused")
    assert bf16.bf16_is_faster(32, 64) is False


def test_float32_timed_on_one_library_names_one_it_has(monkeypatch):
    """``float32_on`` names one of ``gemm_backends``; any other name is a ValueError naming them,
    not an empty measurement (training's float32 runs on MKL alone)."""
    with pytest.raises(ValueError, match=r"float32_on='onednn': not one of \['mkl'\]"):
        measure.time_against_float32(8, 16, lambda linear: linear, tokens=4, budget=0.0, backward=True,
                                     float32_on="onednn")  # fmt: skip


@needs_onednn
def test_asked_inside_inference_mode_the_packed_runs_still_pack(caplog):
    """A verdict asked inside ``torch.inference_mode()`` (bf16_is_faster called directly, under a
    serving loop's mode): layers made there would be inference tensors, which PackedLinear never packs
    (it runs them on F.linear and says so), and "oneDNN" would be MKL timed twice, then cached."""
    with caplog.at_level(logging.INFO, logger="minibert.gemm"), torch.inference_mode():
        times = measure.time_against_float32(8, 16, lambda linear: PackedLinear(linear), tokens=4, budget=0.0)
    assert times.float32 > 0 and "running on F.linear" not in caplog.text, caplog.text
