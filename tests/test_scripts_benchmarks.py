"""What the benchmarks in scripts/ measure, and how: interleaved rounds, fresh state where a row
says so, the same weights for each contender, the machine named, the peer a missing package would
have been said before any loading. Never how fast: no test here reads a timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import child_environment
from minibert import BertModel
from script_runs import SCRIPTS, environment_without, run_script

pytest.importorskip("transformers")  # (the peer of most rows)


def test_profile_embed_counts_written_out_attention_as_attention():
    """Where this CPU's measured verdict writes attention out (fast_path.written_out: two batched
    matmuls and a softmax), its ``bmm`` and ``_softmax`` are attention's time, as in bench.py's profile
    and docs/performance.md: profile_embed put ``bmm`` among the projections' GEMMs (their GFLOP/s too
    low, attention's too high) and the softmax in "everything else"."""
    import bench_model
    import profile_embed
    from torch.profiler import ProfilerActivity, profile

    from minibert import BertConfig

    assert profile_embed.GEMM_OPS is bench_model.GEMM_OPS  # one set for both tools
    model = BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=64)).eval()  # fmt: skip
    model.short_attention = {torch.get_num_threads(): 64}  # attention written out up to 64 tokens
    ids = torch.randint(5, 100, (2, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as prof:
        model(ids, mask)
    parts = profile_embed.split(prof.key_averages())
    assert set(parts["matrix multiplications"]) <= bench_model.GEMM_OPS, parts
    assert {"aten::bmm", "aten::_softmax"} <= set(parts["attention"]), parts


def test_bench_tokenizer_times_new_text_on_a_fresh_tokenizer_each_round(monkeypatch):
    """The tokenizer row times what a user gets: each round's minibert tokenizer meets the texts for
    the first time (its word cache empty when the clock starts), not a warm-up that already cached
    every word. The second row, labelled as repeated text, times one tokenizer that has seen them."""
    import bench_rows
    import bench_text

    from minibert.tokenizer.algorithm import WordPieceTokenizer

    calls, clock = [], []  # per timed call: {a minibert word cache: its size when that call first used it}
    timed, pieces, cached_pieces = bench_rows.timed, WordPieceTokenizer.pieces, WordPieceTokenizer.cached_pieces

    def spying_timed(fn):
        calls.append({})
        clock.append("running")
        try:
            return timed(fn)
        finally:
            clock.pop()

    def first_use(self):  # the cache read, by a word's segmentation or by a text's lookups of known words
        if clock:  # only what the clock times: not the warm-ups, nor the loading of fresh tokenizers
            calls[-1].setdefault(id(self), len(self._cache))

    def spying_pieces(self, word):
        first_use(self)
        return pieces(self, word)

    def spying_cached_pieces(self):
        first_use(self)
        return cached_pieces(self)

    monkeypatch.setattr(bench_rows, "timed", spying_timed)
    monkeypatch.setattr(WordPieceTokenizer, "pieces", spying_pieces)
    monkeypatch.setattr(WordPieceTokenizer, "cached_pieces", spying_cached_pieces)
    texts = ["The quick brown fox jumps over the lazy dog.", "Unaffable tokenizers tokenize real text!"] * 3
    new_text, again = bench_text.bench_tokenizer(texts, rounds=3)
    ours = [sizes for sizes in calls if sizes]  # the Rust calls never reach WordPieceTokenizer
    assert len(calls) == 12 and len(ours) == 6 and all(len(sizes) == 1 for sizes in ours), calls
    assert [list(sizes.values())[0] == 0 for sizes in ours] == [True] * 3 + [False] * 3, ours
    assert "new texts" in new_text["workload"] and "fresh tokenizer each round" in new_text["workload"]
    assert new_text["target"] == ">= 1.0x" and again["target"] == "report" and "again" in again["workload"]


def test_in_turn_turns_the_order_and_runs_before_untimed(monkeypatch):
    """bench_rows.in_turn: one warm-up call each, then A B, B A, ...; ``before`` runs ahead of every
    call of its side, outside the timed call."""
    import bench_rows

    events = []
    monkeypatch.setattr(bench_rows, "timed", lambda fn: events.append("clock") or fn() or 0.0)
    times = bench_rows.in_turn({"A": lambda: events.append("A"), "B": lambda: events.append("B")}, 3,
                               before={"A": lambda: events.append("fresh A")})  # fmt: skip
    assert events == ["fresh A", "A", "B",  # the warm-ups
                      "fresh A", "clock", "A", "clock", "B",
                      "clock", "B", "fresh A", "clock", "A",
                      "fresh A", "clock", "A", "clock", "B"]  # fmt: skip
    assert {name: len(values) for name, values in times.items()} == {"A": 3, "B": 3}
    assert bench_rows.round_order(["tf", "safetensors"], 1) == ["safetensors", "tf"]


def test_bench_import_ratio_reads_in_the_direction_of_its_target(monkeypatch):
    """The import row's target is minibert's share of transformers' time (<= 0.6x the time); its
    ratio cells hold that share, not its inverse (a row reading 2.35x against <= 0.6x)."""
    import bench_startup

    monkeypatch.setattr(bench_startup, "missing_modules", lambda *modules: [])
    monkeypatch.setattr(bench_startup, "side_by_side", lambda ours, theirs, rounds: ([0.3, 0.4, 0.5], [1.0] * 3))
    result = bench_startup.bench_import(3)
    assert result["target"] == "<= 0.6x the time"
    assert (result["ratio_median"], result["ratio_min"], result["ratio_max"]) == (0.4, 0.3, 0.5)
    assert "minibert's time over transformers'" in result["note"]


def test_start_up_rows_run_this_checkout_and_keep_the_users_path(monkeypatch, tmp_path):
    """The processes of the import, cold and tf rows import the minibert beside the script (src/ of
    this checkout, whatever is installed), with the user's own PYTHONPATH after it."""
    import bench_startup

    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    env = bench_startup.checkout_env()
    source = SCRIPTS.parent / "src"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(source), str(tmp_path)]
    found = subprocess.run([sys.executable, "-c", "import minibert; print(minibert.__file__)"], env=env,
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout  # fmt: skip
    assert Path(found.strip()).resolve().is_relative_to(source.resolve()), found
    assert bench_startup.missing_modules("minibert", "no_such_module_here") == ["no_such_module_here"]


def test_bench_window_sizes_bound_the_assembly_too(capsys):
    """``--window-sizes 300`` embeds and assembles 300 tokens only (the assembly ran to 1M tokens,
    ~2.9 GB, whatever was asked)."""
    import bench_text

    bench_text.bench_window_scaling([300])
    printed = capsys.readouterr().out
    assembly = printed.split("assembly of windows alone:")[1].strip().splitlines()
    assert [line.split("tokens:")[0].strip() for line in assembly] == ["300"], printed


@pytest.mark.slow
def test_bench_serve_names_the_cpu(tmp_path):
    """docs/serving.md quotes bench_serve.py's figures: its output and its --json name the CPU they
    were measured on (one small row, minibert alone)."""
    from minibert.speed.cpu import cpu_name

    result = run_script("bench_serve.py", "--quick", "--servers", "minibert", "--rounds", "1", "--rows", "1x1",
                        "--json", str(tmp_path / "rows.json"))  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[0].startswith(cpu_name()), result.stdout
    assert json.loads((tmp_path / "rows.json").read_text())["machine"].startswith(cpu_name())



def _serve_without_servers(monkeypatch):
    """bench_serve's servers and offline ceiling replaced by stand-ins that answer at once with a row per
    setting (no server starts): what is left is the run's own bookkeeping."""
    import bench_serve

    def rows(name, settings):
        return [{"server": name, "clients": clients, "texts_per_request": texts, "texts_per_s": 1.0, "p50_ms": 1.0,
                 "p99_ms": 1.0} for clients, texts, _ in settings]  # fmt: skip

    monkeypatch.setattr(bench_serve, "run_minibert", lambda model_dir, texts, settings, path, dtype="float32":
                        rows("minibert" if dtype == "float32" else "minibert-int8", settings))  # fmt: skip
    monkeypatch.setattr(bench_serve, "measure", lambda name, port, path, model, texts, settings: rows(name, settings))
    monkeypatch.setattr(bench_serve, "wait_ready", lambda url, process: None)
    monkeypatch.setattr(bench_serve, "offline", lambda model_dir, texts: 1.0)
    monkeypatch.setattr(bench_serve, "offline_rerank", lambda model_dir, texts: 1.0)
    return bench_serve


@pytest.mark.parametrize(("arguments", "status", "says"), [
    (["--servers", "infinity", "--infinity", "{tmp}/nowhere"], 1,
     "bench_serve.py: nothing to measure of --servers infinity: infinity-emb not found at {tmp}/nowhere "
     "(install it or pass --infinity PATH)"),
    (["--servers", "minibert", "--rows", "9x9"], 2, None),  # a usage error: argparse's own two lines
])  # fmt: skip
def test_bench_serve_with_nothing_to_measure_stops(monkeypatch, tmp_path, arguments, status, says):
    """``--servers infinity`` without infinity-emb said "only minibert measured", measured nothing and
    exited 0 with an empty --json; so did a ``--rows`` that names no row."""
    bench_serve = _serve_without_servers(monkeypatch)
    arguments = [argument.replace("{tmp}", str(tmp_path)) for argument in arguments]
    monkeypatch.setattr(sys, "argv", ["bench_serve.py", "--quick", "--rounds", "1", "--rows", "1x1", *arguments,
                                      "--json", str(tmp_path / "rows.json")])  # fmt: skip
    with pytest.raises(SystemExit) as stopped:
        bench_serve.main()
    assert (stopped.value.code if says is None else 1) == status
    if says is not None:
        assert str(stopped.value) == says.replace("{tmp}", str(tmp_path))
    assert not (tmp_path / "rows.json").exists()


def test_bench_serve_leaves_nothing_in_the_temporary_folder(monkeypatch, tmp_path):
    """``--task rerank`` left its cross-encoder (88 MB) and ``infinity-int8`` a copy of the model with
    its int8 ONNX file and infinity-emb's HF_HOME in $TMPDIR after every run. The servers are stand-ins
    (and infinity-emb's python one that exits at once); the files the run makes are real."""
    import tempfile

    import onnx_peer

    bench_serve = _serve_without_servers(monkeypatch)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    infinity = tmp_path / "infenv" / "infinity_emb"
    infinity.parent.mkdir()
    infinity.write_text("")
    (infinity.parent / "python").write_text("#!/bin/sh\nexit 0\n")
    (infinity.parent / "python").chmod(0o755)

    def export_onnx(checkpoint, directory):  # a stand-in file: the export itself is tested elsewhere
        (Path(directory) / "model.onnx").write_bytes(b"onnx")
        return Path(directory) / "model.onnx"

    monkeypatch.setattr(onnx_peer, "export_onnx", export_onnx)
    monkeypatch.setattr(onnx_peer, "quantize_int8", lambda exported: exported.rename(exported.with_name("q.onnx")))
    for arguments in (["--task", "rerank", "--servers", "minibert", "--rows", "1x32"],
                      ["--servers", "minibert,infinity-int8", "--infinity", str(infinity), "--rows", "1x1"]):
        monkeypatch.setattr(sys, "argv", ["bench_serve.py", "--quick", "--rounds", "1", *arguments])
        bench_serve.main()
    left = [path.name for path in (tmp_path / "tmp").iterdir()]
    assert [name for name in left if not name.startswith("torchinductor_")] == [], left  # torch's own cache aside


def test_bench_pretrain_contenders_start_from_the_same_weights():
    """bench_pretrain's "first loss" column read as comparable, but transformers' and minibert's models
    were each initialised after manual_seed(0) in their own module order: different weights, losses
    0.11 apart. minibert's models now take transformers' initial weights, so the first losses (before
    any step, dropout off) agree to float32's rounding: the batch's 20 masked positions and 4 pairs go
    through the same arithmetic in another order, and minibert's masked-LM mean divides by the weights'
    sum + 1e-5 (Google's), 5e-7 of the loss, ~4e-6 on a loss of ~8.4; 5e-5 allows ten times that."""
    import bench_pretrain

    shapes = bench_pretrain.Shapes(layers=2, hidden=64, tokens=32, batch=4, predictions=5, vocab=2000)
    times, first = bench_pretrain.time_steps(shapes, rounds=1, bf16=True)
    assert set(times) == set(first) == {"transformers + AdamW", "minibert", "minibert --bf16"}
    assert abs(first["minibert"] - first["transformers + AdamW"]) < 5e-5, first
    # bf16 from the same weights: within bf16's rounding (2^-8 relative, 0.03 of a loss of 8.4, at worst)
    assert abs(first["minibert --bf16"] - first["minibert"]) < 0.05, first

@pytest.mark.slow
def test_bench_explore_times_the_peer_over_the_rounds(tmp_path):
    """bench_explore.py's bertviz figure is a median of --rounds runs, like minibert's (it was one run,
    after all of minibert's). A stand-in bertviz counts its calls; the real one is not needed."""
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("needs Chromium at /usr/bin/chromium")
    pytest.importorskip("playwright")
    (tmp_path / "bertviz").mkdir()
    (tmp_path / "bertviz" / "__init__.py").write_text(
        "import types\ncalls = []\n"
        "def model_view(attention, tokens, html_action):\n"
        "    calls.append(1)\n"
        "    print(f'stand-in model_view call {len(calls)}')\n"
        "    return types.SimpleNamespace(data='<html></html>')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, str(SCRIPTS / "bench_explore.py"), "--positions", "16", "--rounds", "2"],
                            capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "stand-in model_view call 2" in result.stdout and "call 3" not in result.stdout, result.stdout
    assert "median of 2 rounds" in result.stdout, result.stdout


@pytest.mark.parametrize(("script", "arguments", "says"), [
    ("bench_int8.py", ["--texts", "5", "--rounds", "1", "--models", "minilm"],
     "needs onnxruntime for ONNX Runtime's int8 model, the peer of every row: pip install onnx onnxruntime"),
    ("bench_memory.py", ["--models", "minilm", "--rounds", "1", "--kinds", "minibert,ort-int8"],
     "needs onnxruntime for the ort-int8 column (ONNX Runtime's int8 model): pip install onnx onnxruntime"),
])  # fmt: skip
def test_benchmarks_that_need_onnx_runtime_say_so_before_loading(tmp_path, script, arguments, says):
    """Without ONNX Runtime, bench_int8.py loaded both models and exported the ONNX graph (a minute)
    before a ModuleNotFoundError traceback from the quantization; bench_memory.py died the same way."""
    result = subprocess.run([sys.executable, str(SCRIPTS / script), *arguments], capture_output=True, text=True,
                            timeout=600, env=environment_without(tmp_path, "onnxruntime"), cwd=tmp_path)  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr == f"{script} {says}\n", result.stderr[-2000:]
    assert result.stdout == "", result.stdout  # nothing measured, not even the machine described



def test_memory_rows_without_onnx_runtime_still_compare_with_transformers(monkeypatch, capsys):
    """bench.py's ``memory`` workload was skipped whole without ONNX Runtime (after building and
    exporting bert-base), though only its ort-int8 column needs it: now that column alone is left out,
    saying so, and the minibert-against-transformers rows are measured."""
    import bench_memory

    import bench

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime: ModuleNotFoundError
    asked = []

    def measure(path, directory, rounds, kinds=bench_memory.KINDS):
        asked.append(kinds)
        return {kind: {"held": 100.0, "peak": 200.0} for kind in kinds}

    monkeypatch.setattr(bench_memory, "measure", measure)
    monkeypatch.setattr(bench_memory, "model_path", lambda model, directory: directory)
    rows = bench_memory.memory_rows(models=("minilm",), rounds=1)
    assert asked == [tuple(kind for kind in bench_memory.KINDS if kind != "ort-int8")]
    assert [row["against"] for row in rows] == ["transformers"], rows
    said = capsys.readouterr().out
    assert "ort-int8 not measured: onnxruntime is not installed (pip install onnx onnxruntime)" in said, said
    ran = []
    assert bench._with_onnx("int8 rows", lambda: ran.append(1)) is None and ran == []  # skipped before it runs
    assert capsys.readouterr().out == "int8 rows skipped: onnxruntime is not installed (pip install onnx onnxruntime)\n"
    # a part of ONNX Runtime that only the rows import, missing: the same line, naming that part
    import types

    monkeypatch.setitem(sys.modules, "onnxruntime", types.ModuleType("onnxruntime"))

    def rows():
        raise ModuleNotFoundError("No module named 'onnxruntime.transformers'", name="onnxruntime.transformers")

    assert bench._with_onnx("onnx rows", rows) is None
    assert capsys.readouterr().out == ("onnx rows skipped: onnxruntime.transformers is not installed (pip install onnx "
                                       "onnxruntime)\n")  # fmt: skip



def test_performance_md_names_every_workload_bench_py_runs():
    """docs/performance.md's `--only` line listed 11 of bench.py's 14 workloads (not int8, pretrain
    or finetune, whose rows the page shows): each name in WORKLOADS, read from the script's source
    (importing it would load the benchmarks), is in that line, and each name there is a workload."""
    import ast
    import re

    root = Path(__file__).parents[1]
    tree = ast.parse((root / "scripts" / "bench.py").read_text(encoding="utf-8"))
    [workloads] = [ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                   and [getattr(target, "id", None) for target in node.targets] == ["WORKLOADS"]]  # fmt: skip
    page = (root / "docs" / "performance.md").read_text(encoding="utf-8")
    [listed] = re.findall(r"bench\.py --only .*# some rows: (.*)", page)
    assert [name.strip() for name in listed.split(",")] == list(workloads)



def test_the_prepared_gpu_command_runs_every_part_on_the_cpu(tmp_path):
    """A device is lent for 15 minutes, one prepared command at a time: scripts/gpu_run.sh must not
    find its broken part there. gpu_check.py's every part (parity, speed, profile) runs guarded and
    a failure is a line in the output, not an exit code, so this runs the whole prepared command,
    inputs included, on the CPU (gpu_check.py ``--device cpu --quick``, the gpu tests' quickest on the
    CPU) in a copy of scripts/ whose .gpu/ and $OUT are its own, and reads what it leaves: both parts
    exited 0, no part failed or was skipped, each section has rows, the tokenizers agree and float64
    minibert is transformers' float64 to rounding."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for script in [*SCRIPTS.glob("*.py"), SCRIPTS / "gpu_run.sh"]:  # (gpu_*.py and the helpers they import)
        (root / "scripts" / script.name).write_bytes(script.read_bytes())
    (root / "tests").symlink_to(SCRIPTS.parent / "tests")  # the gpu tests and their data, as in the checkout
    (root / "pyproject.toml").write_bytes((SCRIPTS.parent / "pyproject.toml").read_bytes())  # pytest's settings
    environment = child_environment()  # (a copied script finds the minibert under test on PYTHONPATH)
    inputs = subprocess.run([sys.executable, str(root / "scripts" / "gpu_inputs.py")], cwd=root, capture_output=True,
                            text=True, timeout=900, env=environment)  # fmt: skip
    assert inputs.returncode == 0, inputs.stderr[-3000:]
    results = tmp_path / "out"
    environment.update(OUT=str(results), PYTHON=sys.executable, MINIBERT_TEST_DEVICE="cpu",
                       GPU_TESTS="tests/test_gpu.py -k embed_and_classify", GPU_CHECK_ARGS="--device cpu --quick")
    result = subprocess.run(["bash", str(root / "scripts" / "gpu_run.sh")], cwd=tmp_path, capture_output=True,
                            text=True, timeout=900, env=environment)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "gpu tests: exit 0" in result.stdout and "gpu_check: exit 0" in result.stdout, result.stdout[-3000:]
    assert "1 passed" in (results / "pytest.log").read_text() and (results / "pytest.xml").exists()
    assert f"torch {torch.__version__}" in (results / "machine.txt").read_text()
    out = results / "gpu_check.json"
    report = json.loads(out.read_text())
    assert report["failures"] == [] and report["skipped"] == [], (report["failures"], report["skipped"])
    assert report["header"]["device"] == "cpu" and all(report[section] for section in ("parity", "speed", "profile"))
    embedding_rows = {row.get("what") for row in report["speed"]}  # the Embedder's plans against each other too
    assert {"fp16, next chunk tokenized ahead / one pass", "fp16, batch_size 256 / 32 (token budget)"} <= embedding_rows
    training = {row.get("ours") for row in report["speed"] if "train step" in str(row.get("what"))}
    assert {"minibert skip_padding", "minibert skip_padding, inputs on the GPU"} <= training, training  # (as the loop)
    [tokenizers] = [row for row in report["parity"] if row["kind"] == "tokenizer"]
    assert tokenizers["differ"] == 0 and tokenizers["texts"] > 0
    truths = [row for row in report["parity"] if row["kind"] == "float64 truth"]
    assert truths and all(delta <= 1e-12 for row in truths for delta in row["deltas"].values()), truths
