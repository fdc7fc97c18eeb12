"""How the linear layers' GEMM backend (speed/gemm.py) is chosen: measured once on this CPU and read
from the cache after, the cache invalidated by what the speed depends on and only ever a reason to
measure again when it is damaged, locked, unwritable or a FIFO, written by processes at once; the
margin a backend must beat f_linear by; the overrides (argument, then environment) and where oneDNN
cannot run; dtype="auto"'s bf16; the CLI's --gemm; and the short-attention table, measured, cached
and applied, with a fused model's cache key and calibration."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from helpers import needs_onednn
from minibert import BertModel
from minibert.speed import BACKENDS, bf16, cpu, gemm, measure, packed_linear
from minibert.speed.cache import cache_file
from minibert.speed.measure import ProjectionTimes

pytestmark = pytest.mark.usefixtures("own_gemm_cache")  # each test measures into its own cache


@needs_onednn
def test_the_choice_is_measured_once_then_read_from_the_cache(minilm_dir, caplog, monkeypatch):
    with caplog.at_level(logging.INFO, logger="minibert.gemm"):
        model = BertModel.from_pretrained(minilm_dir)
    [line] = [r.getMessage() for r in caplog.records if r.name == "minibert.gemm"]
    assert line.startswith(f"linear layers on {model.gemm_backend} (measured: GFLOP/s on one layer's projections")
    assert cpu.cpu_name() in line and "cached in" in line
    entries = json.loads(cache_file().read_text())
    [(key, record)] = entries.items()
    assert record["backend"] == model.gemm_backend and set(record["gflops"]) <= set(BACKENDS)
    assert all(part in key for part in (cpu.cpu_name(), torch.__version__, "384x1536", "gelu", "float32"))

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured again although the cache holds this CPU and shape")

    monkeypatch.setattr(gemm, "measure", no_measuring)
    assert gemm.choose(BertModel.from_pretrained(minilm_dir, gemm="mkl")).reason == "cached"


@needs_onednn
def test_a_measurement_that_could_not_be_cached_is_not_logged_as_cached(minilm_dir, caplog, monkeypatch, tmp_path):
    """The log said "cached in ~/.cache/minibert/gemm.json" also when the write failed (here the
    cache folder's parent is a file): the next process measured again. It says "not cached" and why."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(blocker / "cache"))
    with caplog.at_level(logging.INFO, logger="minibert.gemm"):
        BertModel.from_pretrained(minilm_dir)
    [line] = [r.getMessage() for r in caplog.records if r.name == "minibert.gemm"]
    assert f"; not cached ({blocker / 'cache' / 'gemm.json'}: " in line and "cached in" not in line, line


@needs_onednn
def test_a_command_shows_the_measurement_only_with_debug(minilm_dir, capsys):
    """The measurement is a diagnostic: a command's stderr holds it only when --debug asks (issue 44)."""
    from minibert.apps import cli

    for debug in (False, True):
        cache_file().unlink(missing_ok=True)  # measure again: the line is logged when measuring
        assert cli.main(["embed", "hello", "--model", str(minilm_dir)] + ["--debug"] * debug) == 0
        stderr = capsys.readouterr().err
        assert ("minibert: linear layers on" in stderr) == debug, stderr


def test_a_command_shows_why_minibert_gemm_was_not_followed(minilm_dir, monkeypatch):
    """$MINIBERT_GEMM naming a library that cannot run here (oneDNN's linear takes no float16) is
    noted and the model stays on mkl (docs/cli.md): the note reaches the command's stderr without
    --debug, which hides only the measurement. Before, the command's filter dropped every
    minibert.gemm record, warnings too: the setting was ignored without a word."""
    from helpers import run_minibert

    monkeypatch.setenv("MINIBERT_GEMM", "onednn")
    result = run_minibert("embed", "--model", str(minilm_dir), "--dtype", "float16", "hello world")
    assert result.returncode == 0, result.stderr
    noted = [line for line in result.stderr.splitlines() if "stay on mkl" in line]
    assert len(noted) == 1 and noted[0].startswith("minibert: MINIBERT_GEMM asks for onednn, which cannot run here "
                                                   "(dtype torch.float16)"), result.stderr  # fmt: skip
    assert "linear layers on" not in result.stderr  # the measurement itself: --debug's
    # The flag, asked for this model, is refused in one line that names it (and the keyword: library callers).
    result = run_minibert("embed", "--model", str(minilm_dir), "--dtype", "float16", "--gemm", "onednn", "hello world")
    assert result.returncode == 1 and result.stderr.splitlines() == [
        "minibert: error: gemm='onednn' (--gemm) asks for onednn, which cannot run here (dtype torch.float16)"]


@needs_onednn
@pytest.mark.parametrize("change", ["torch", "threads", "cpu", "flags"])
def test_the_cache_is_invalidated_by_what_the_speed_depends_on(change, minilm_dir, monkeypatch, request):
    model = BertModel.from_pretrained(minilm_dir, gemm="mkl")  # measures (attention too) and caches
    assert gemm.choose(model).reason == "cached"
    if change == "torch":
        monkeypatch.setattr(torch, "__version__", "9.9.9")
    elif change == "threads":  # a real change: a pretended count would make the measurement set it for real
        before = torch.get_num_threads()
        request.addfinalizer(lambda: torch.set_num_threads(before))
        torch.set_num_threads(1 if before > 1 else 2)
    else:
        info = cpu.read_cpuinfo()
        if change == "cpu":
            info["model name"] = "Another CPU"
        else:
            # A flag no CPU has, so the set changes on every machine (appending "avx512f" changed
            # nothing on a CPU that has it).
            info["flags"] = info.get("flags", "") + " minibert_test_only_flag"
        monkeypatch.setattr(cpu, "read_cpuinfo", lambda: info)
    assert gemm.choose(model).reason == "measured"
    assert len(json.loads(cache_file().read_text())) == 2


@needs_onednn
def test_a_damaged_or_unwritable_cache_only_means_measuring_again(minilm_dir, tmp_path, monkeypatch):
    model = BertModel.from_pretrained(minilm_dir, gemm="mkl")
    cache_file().parent.mkdir(parents=True, exist_ok=True)
    for damage in (b"{not json", b"[1, 2]", b'{"key": 5}', b"\xff\xfe"):
        cache_file().write_bytes(damage)
        assert gemm.choose(model).backend in BACKENDS
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(blocked / "cache"))  # its parent is a file: cannot be made
    assert gemm.choose(model).reason == "measured"
    assert gemm.choose(model).reason == "measured"


DAMAGED_FIELDS = {
    "gflops a string": ("gflops", {"mkl": "n/a"}), "gflops null": ("gflops", {"mkl": None}),
    "gflops NaN": ("gflops", {"mkl": float("nan")}), "gflops true": ("gflops", {"mkl": True}),
    "gflops a list": ("gflops", [1, 2]), "gflops missing": ("gflops", None),
    "gflops of no backend": ("gflops", {"blas": 3.0}), "backend a number": ("backend", 5),
    "short_attention a float": ("short_attention", {"2": 1.5}),
    "short_attention a string": ("short_attention", {"2": "16"}),
    "short_attention negative": ("short_attention", {"2": -1}),
    "short_attention true": ("short_attention", {"2": True}),
    "short_attention's threads not a number": ("short_attention", {"two": 16}),
    "short_attention null": ("short_attention", None),
}  # fmt: skip


@pytest.mark.parametrize("damage", DAMAGED_FIELDS)
def test_a_damaged_field_in_the_cache_only_means_measuring_again(minilm_dir, monkeypatch, caplog, damage):
    """gemm.json's ``gflops`` were taken as they were: a string or null there raised "Unknown format
    code 'f'" from every later load (the log line formats each rate), naming no file. Every field
    read is checked; a damaged one is a record not there: measured again, and written afresh."""
    model = BertModel.from_pretrained(minilm_dir, gemm="mkl")  # measures, and writes the record
    monkeypatch.setattr(gemm, "measure", lambda model, layer: gemm.Choice("mkl", "measured", {"mkl": 1.0}))
    monkeypatch.setattr(gemm, "measure_attention", lambda layer: {2: 16})  # (measuring again: quickly)
    assert gemm.choose(model).reason == "cached"
    records = json.loads(cache_file().read_text())
    name, value = DAMAGED_FIELDS[damage]
    for record in records.values():
        record[name] = value
    cache_file().write_text(json.dumps(records))
    with caplog.at_level(logging.DEBUG, logger="minibert.gemm"):
        assert gemm.choose(model).reason == "measured"
    assert gemm.choose(model).reason == "cached"  # written afresh


def _write_entries(first: int, count: int) -> None:
    """Write ``count`` cache entries, slowly: each writer reads, waits, then writes back."""
    import time

    from minibert.speed import cache

    real_write = cache.write_atomically

    def slow_write(path, data):
        time.sleep(0.02)  # another process's turn would fall here without the lock
        real_write(path, data)

    cache.write_atomically = slow_write
    for index in range(first, first + count):
        cache.write_cache(f"key {index}", {"index": index})


def test_processes_writing_the_cache_at_once_keep_every_entry():
    """Each process reads gemm.json, adds its verdict and writes the whole file back: four at once
    kept 24 of 80 entries (the last rename won), so the lost verdicts were measured again by the
    next process. An exclusive lock beside the file makes the turns one after the other."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write_entries, args=(first, 5)) for first in range(0, 20, 5)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    assert [writer.exitcode for writer in writers] == [0, 0, 0, 0]
    assert sorted(json.loads(cache_file().read_text())) == sorted(f"key {index}" for index in range(20))


def test_a_cache_lock_held_too_long_only_means_not_caching(monkeypatch):
    """A process stopped while it holds the lock (SIGSTOP, a debugger) must not stop the others:
    after LOCK_SECONDS the verdict is simply not cached."""
    import fcntl
    import os

    from minibert.speed import cache

    cache.write_cache("first", {"x": 1})
    monkeypatch.setattr(cache, "LOCK_SECONDS", 0.2)
    holder = os.open(f"{cache_file()}.lock", os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # another open file: flock conflicts even within one process
        cache.write_cache("second", {"x": 2})
    finally:
        os.close(holder)
    assert list(cache.read_cache()) == ["first"]
    cache.write_cache("second", {"x": 2})
    assert sorted(cache.read_cache()) == ["first", "second"]


@pytest.mark.parametrize("name", ["gemm.json", "gemm.json.lock"])
def test_a_fifo_in_the_cache_is_no_cache_and_never_blocks(name):
    """A FIFO where gemm.json is made every model load hang in open() (it waits for a writer). The
    cache's files are opened only when they are regular files; a FIFO is left as it is."""
    import os
    import stat
    import threading

    from minibert.speed import cache

    cache_file().parent.mkdir(parents=True)
    fifo = cache_file().parent / name
    os.mkfifo(fifo)
    results = []
    worker = threading.Thread(target=lambda: results.append((cache.write_cache("k", {"x": 1}), cache.read_cache())),
                              daemon=True)  # fmt: skip
    worker.start()
    worker.join(10)
    if worker.is_alive():  # blocked: open the FIFO's other end so the thread can end, then fail
        with open(fifo, "wb" if name == "gemm.json" else "rb"):
            pass
        pytest.fail(f"the cache blocked on a FIFO at {name}")
    [(not_cached, entries)] = results  # nothing cached (and write_cache says why), the FIFO kept
    assert entries == {} and "not a regular file" in not_cached and stat.S_ISFIFO(os.lstat(fifo).st_mode)


@needs_onednn
def test_measuring_is_bounded_even_for_bert_large_shapes():
    """The measurement's rows shrink with the model, so a bert-large layer costs what a MiniLM
    layer does: within the budget plus one round of three candidates (~2 GFLOP each)."""
    from minibert import BertConfig

    config = BertConfig(hidden_size=1024, num_attention_heads=16, intermediate_size=4096, num_hidden_layers=1)
    model = BertModel(config).eval()
    gemm.measure(model)  # once to page in the weights and build oneDNN's kernels
    choice = gemm.measure(model)
    assert choice.backend in BACKENDS and set(choice.gflops) == set(BACKENDS)
    flops = 2 * gemm.calibration_tokens(1024, 4096) * 12 * 1024**2  # 4 H×H + 2 H×4H projections
    slowest_round = sum(2 * flops / (rate * 1e9) for rate in choice.gflops.values())  # 1 and 2 threads
    assert choice.seconds <= measure.BUDGET_SECONDS + 2 * slowest_round, choice


def test_a_backend_must_beat_f_linear_by_the_margin():
    assert gemm.decide({"mkl": 100.0, "onednn": 104.0, "onednn-fused": 103.0}) == "mkl"  # within the noise
    assert gemm.decide({"mkl": 100.0, "onednn": 117.0, "onednn-fused": 110.0}) == "onednn"  # Zen 4: a real win
    assert gemm.decide({"mkl": 100.0, "onednn": 230.0, "onednn-fused": 240.0}) == "onednn-fused"
    assert gemm.decide({"mkl": 150.0, "onednn": 100.0}) == "mkl"


@needs_onednn
def test_overrides_argument_then_environment(minilm_dir, monkeypatch, caplog):
    monkeypatch.setenv("MINIBERT_GEMM", "onednn")
    assert BertModel.from_pretrained(minilm_dir).gemm_backend == "onednn"
    assert BertModel.from_pretrained(minilm_dir, gemm="mkl").gemm_backend == "mkl"  # the argument wins
    monkeypatch.setenv("MINIBERT_GEMM", "fastest")
    with pytest.raises(ValueError, match="MINIBERT_GEMM must be one of auto, mkl, onednn, onednn-fused; got 'fastest'"):
        BertModel.from_pretrained(minilm_dir)
    with pytest.raises(ValueError, match="gemm backend must be one of"):
        packed_linear.use_backend(BertModel.from_pretrained(minilm_dir, gemm="mkl"), "blas")


def test_where_onednn_cannot_run_an_argument_is_refused_and_the_environment_noted(minilm_dir, monkeypatch, caplog):
    monkeypatch.setattr(gemm, "_unavailable_reason", lambda model: "torch was built without oneDNN")
    with pytest.raises(ValueError, match=r"gemm='onednn' \(--gemm\) asks for onednn, which cannot run here \(torch"):
        BertModel.from_pretrained(minilm_dir, gemm="onednn")
    monkeypatch.setenv("MINIBERT_GEMM", "onednn")
    with caplog.at_level(logging.WARNING, logger="minibert.gemm"):
        assert BertModel.from_pretrained(minilm_dir).gemm_backend == "mkl"
    assert "stay on mkl" in caplog.text
    monkeypatch.delenv("MINIBERT_GEMM")
    cache_file().unlink()  # auto, measured afresh: oneDNN is not a candidate
    with caplog.at_level(logging.INFO, logger="minibert.gemm"):
        model = BertModel.from_pretrained(minilm_dir)
    assert model.gemm_backend == "mkl" and "linear layers on mkl (oneDNN cannot run here" in caplog.text


@needs_onednn
def test_why_onednn_cannot_run_names_the_dtype_before_how_the_weights_were_made():
    """A float16 model made inside inference_mode: oneDNN takes no float16 at all, so that is the
    reason given (making the model outside inference_mode would change nothing); a float32 one
    made there is refused for its inference tensors."""
    from minibert import BertConfig

    config = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                        vocab_size=100)  # fmt: skip
    with torch.inference_mode():
        half, full = BertModel(config).half(), BertModel(config)
    assert gemm._unavailable_reason(half) == "dtype torch.float16"
    assert gemm._unavailable_reason(full).startswith("its weights are inference tensors")


def test_dtype_auto_is_bfloat16_only_where_bf16_is_measured_faster(minilm_dir, monkeypatch):
    """ "auto" asks the measurement, not the flags: bf16 instructions without AMX can be slower than
    float32 (an Intel Xeon, family 6 model 207: 0.6x), and without them torch emulates bf16."""
    monkeypatch.setenv("MINIBERT_GEMM", "mkl")  # emulated bf16 on oneDNN may be refused on this CPU
    for flags, bf16_seconds, expected in [("fma avx2", None, torch.float32),  # not even measured
                                          ("avx512f avx512_bf16", 0.5, torch.bfloat16),
                                          ("avx512f avx512_bf16", 2.0, torch.float32),
                                          ("avx512f avx512_bf16", 0.95, torch.float32),  # a tie: exact numbers
                                          ("amx_bf16 amx_tile", 0.5, torch.bfloat16)]:  # fmt: skip
        info = {"flags": flags, "model name": f"test CPU {flags}"}
        monkeypatch.setattr(cpu, "read_cpuinfo", lambda info=info: info)
        cache_file().unlink(missing_ok=True)

        def timed(hidden, intermediate, candidates, bf16_seconds=bf16_seconds, **how):
            assert bf16_seconds is not None, "measured on a CPU without bf16 instructions"
            assert how["dtype"] == torch.bfloat16 and "mkl" in candidates  # bfloat16 on each backend it may run on
            return {name: ProjectionTimes(1.0, bf16_seconds, flops=0) for name in candidates}

        monkeypatch.setattr(bf16, "time_candidates_against_float32", timed)
        assert BertModel.from_pretrained(minilm_dir, dtype="fastest").dtype == expected, flags
        if bf16_seconds is not None:  # cached: a second load does not measure again
            monkeypatch.setattr(bf16, "time_candidates_against_float32",
                                lambda *args, **how: pytest.fail("measured twice"))  # fmt: skip
            assert BertModel.from_pretrained(minilm_dir, dtype="fastest").dtype == expected


def test_dtype_fastest_is_measured_on_the_gemm_library_the_load_asks_for(minilm_dir, monkeypatch):
    """from_pretrained(dtype="fastest", gemm="mkl"): both dtypes timed on MKL alone, the library the
    model is told to run on (bf16.py), and the model loads in the dtype that measurement chose."""
    monkeypatch.setattr(cpu, "read_cpuinfo", lambda: {"flags": "amx_bf16 amx_tile", "model name": "test CPU"})
    asked = []

    def timed(hidden, intermediate, candidates, **how):
        asked.append((sorted(candidates), how["float32_on"]))
        return {name: ProjectionTimes(1.0, 0.5, flops=0, float32_backend="mkl") for name in candidates}

    monkeypatch.setattr(bf16, "time_candidates_against_float32", timed)
    model = BertModel.from_pretrained(minilm_dir, dtype="fastest", gemm="mkl")
    assert asked == [(["mkl"], "mkl")] and model.dtype == torch.bfloat16 and model.gemm_backend == "mkl"


def test_bf16_is_faster_measures_this_cpu():
    """The real measurement runs (both dtypes, this CPU) and its verdict is what the cache holds."""
    verdict = bf16.bf16_is_faster(64, 256, budget=0.05)
    entries = json.loads(cache_file().read_text()).values() if cache_file().exists() else []  # none: not measured
    records = [record for record in entries if "bf16_faster" in record]
    assert len(records) == (1 if cpu.has_native_bf16() else 0)
    if records:
        assert records[0]["bf16_faster"] is verdict
        assert verdict == (
            records[0]["bfloat16_seconds"] * (1 + bf16.BF16_MARGIN) < records[0]["float32_seconds"]
        )
        assert records[0]["float32_backend"] in measure.gemm_backends()
        assert records[0]["bfloat16_backend"] in measure.gemm_backends(bf16.to_bfloat16, torch.bfloat16)
    else:
        assert verdict is False


def test_cli_gemm_flag_reaches_the_model(minilm_dir, monkeypatch, tmp_path):
    from helpers import run_minibert

    seen = []
    original = gemm.choose
    monkeypatch.setattr(gemm, "choose", lambda model, gemm=None: seen.append(model) or original(model, gemm))
    result = run_minibert("embed", "--model", str(minilm_dir), "--gemm", "mkl", "a text")
    assert result.returncode == 0, result.stderr
    assert seen and seen[-1].gemm_backend == "mkl"
    result = run_minibert("embed", "--model", str(minilm_dir), "--gemm", "blas", "a text")
    assert result.returncode == 2 and "invalid choice: 'blas'" in result.stderr


def test_the_short_attention_table_is_measured_cached_and_applied(minilm_dir, monkeypatch):
    model = BertModel.from_pretrained(minilm_dir)
    table = model.short_attention
    assert set(table) == {1, torch.get_num_threads()} and set(table.values()) <= {0, 16, 32, 64, 128}
    [record] = json.loads(cache_file().read_text()).values()
    assert {int(k): v for k, v in record["short_attention"].items()} == table
    monkeypatch.setattr(gemm, "measure_attention", lambda layer: {1: 64, 2: 64})
    del record["short_attention"]  # a record from before: measured again
    cache_file().write_text(json.dumps({key: record for key in json.loads(cache_file().read_text())}))
    assert BertModel.from_pretrained(minilm_dir, gemm="onednn").short_attention == {1: 64, 2: 64}
    assert gemm.choose(BertModel.from_pretrained(minilm_dir)).reason == "cached"


@needs_onednn
def test_a_fused_model_has_the_same_cache_key_and_calibration(minilm_dir):
    """With the GELU applied by oneDNN (``onednn-fused``), the model still names its activation:
    the same cache key as before fusing (choosing again reads the cache), and a calibration on it
    applies the real GELU on the plain path (not the fused layer's identity)."""
    plain = BertModel.from_pretrained(minilm_dir, gemm="mkl")
    fused = BertModel.from_pretrained(minilm_dir, gemm="onednn-fused")
    layer_plain, layer_fused = packed_linear.encoder_layers(plain)[0], packed_linear.encoder_layers(fused)[0]
    assert gemm.backend_cache_key(layer_fused) == gemm.backend_cache_key(layer_plain)
    assert "onednn-fused" in gemm.measure(fused).gflops
