"""minibert/fortunes-mini, the toy English BERT with its heads shipped inside the package
(src/minibert/bundled/fortunes-mini, docs/fortunes-mini.md):

* the name loads it with every class, offline (``HF_HUB_OFFLINE=1``, a dead ``HF_ENDPOINT``, an
  empty cache): the rule is in one place, loading/hub.py's ``resolve_file``; a local directory of
  that relative path still wins;
* transformers' ``BertForPreTraining`` loads the same folder and computes the same MLM and NSP
  logits (the parity tolerance of every parity test, helpers.bound_from_exact);
* ``fill-mask``, ``next-sentence`` and ``explore`` without --model, when the default cannot be
  reached, use it with one stderr line; ``fill_mask()``/``next_sentence()`` with a warning;
* its files are package data: pyproject's globs take every one of them (and, slow, a built wheel
  holds them).
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import minibert
from helpers import assert_close, bound_from_exact, exact_reference, run_minibert
from minibert.errors import ModelNotFoundError
from minibert.loading.hub import BUNDLED_FOLDER, bundled_path
from tiny_hub import TINY

ROOT = Path(__file__).resolve().parents[1]
NAME = "minibert/fortunes-mini"
FOLDER = ROOT / "src" / "minibert" / "bundled" / "fortunes-mini"
FILES = {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "training.json", "README.md"}


@pytest.fixture
def no_hub(monkeypatch, tmp_path):
    """No way to the hub and nothing in the cache: only what the package holds can load."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing answers
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.chdir(tmp_path)  # no ./minibert/fortunes-mini directory here


def test_the_bundle_is_a_hub_layout_bert_for_pre_training():
    assert {path.name for path in FOLDER.iterdir()} == FILES
    assert bundled_path(NAME) == BUNDLED_FOLDER / "fortunes-mini" and BUNDLED_FOLDER.resolve() == FOLDER.parent
    config = json.loads((FOLDER / "config.json").read_text())
    shape = {key: config[key] for key in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                           "intermediate_size", "max_position_embeddings")}  # fmt: skip
    assert shape == {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024,
                     "max_position_embeddings": 64}  # fmt: skip
    assert config["architectures"] == ["BertForPreTraining"]
    assert config["vocab_size"] == len((FOLDER / "vocab.txt").read_text(encoding="utf-8").splitlines())
    # a text longer than the model's 64 positions is cut (truncation=True) to what the model takes
    assert json.loads((FOLDER / "tokenizer_config.json").read_text())["model_max_length"] <= 64
    assert (FOLDER / "model.safetensors").stat().st_size < 25e6  # a few MB ship in the wheel


@pytest.mark.parametrize("cls", ["BertModel", "BertForPreTraining", "BertForMaskedLM", "BertForNextSentencePrediction",
                                 "BertTokenizer", "Embedder"])  # fmt: skip
def test_every_class_loads_it_by_name_offline(cls, no_hub):
    loaded = getattr(minibert, cls).from_pretrained(NAME)
    if cls == "BertTokenizer":
        assert loaded.vocab_file == FOLDER / "vocab.txt" and loaded.tokenize("I love you") == ["i", "love", "you"]
    elif cls == "Embedder":
        assert loaded.embed(["I love you"]).shape == (1, 256)
    else:
        assert loaded.name_or_path == NAME and loaded.config.hidden_size == 256
        assert next(loaded.parameters()).dtype == torch.float32  # stored in bf16, computed in fp32


def test_the_tasks_and_the_explorer_take_the_name_offline(no_hub):
    guesses = minibert.fill_mask("I love [MASK].", model=NAME)
    assert len(guesses) == 5 and all(guess["token_str"] for guess in guesses)
    assert 0.0 < minibert.next_sentence("I was thirsty.", "I drank water.", model=NAME) < 1.0
    exploration = minibert.explore(NAME, "I love [MASK].", top_k=3)
    assert [piece for piece, _ in exploration.data.predictions(4)[3]] == [guess["token_str"] for guess in guesses[:3]]


def test_the_hub_is_never_asked_for_the_bundled_name(no_hub, monkeypatch):
    """Online mode with a dead endpoint, and the hub's download function made to fail: the name
    resolves before any of it is reached."""
    from minibert.loading import hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")

    def no_download(*args, **kwargs):
        raise AssertionError(f"the hub was asked: {args}")

    monkeypatch.setattr(hub, "_download", no_download)
    assert minibert.BertForPreTraining.from_pretrained(NAME).config.num_hidden_layers == 4
    assert minibert.BertTokenizer.from_pretrained(NAME).vocab_file == FOLDER / "vocab.txt"


def test_a_local_directory_of_that_path_still_wins(no_hub, tmp_path):
    local = tmp_path / "minibert" / "fortunes-mini"
    shutil.copytree(TINY, local)
    assert bundled_path(NAME) is None
    assert minibert.BertModel.from_pretrained(NAME).config.hidden_size != 256


def test_a_revision_of_the_bundled_model_is_refused(no_hub):
    with pytest.raises(ModelNotFoundError, match="bundled with minibert: it has no revisions"):
        minibert.BertModel.from_pretrained(NAME, revision="v2")


def test_transformers_loads_the_folder_and_computes_the_same_logits(no_hub):
    """transformers' BertForPreTraining on the bundled folder vs minibert's on the name: MLM and
    NSP logits at every position, pad rows included, within the parity bound (1e-5 beyond the
    rounding fp32 itself brings at this depth, measured on the reference in float64)."""
    transformers = pytest.importorskip("transformers")
    reference = transformers.BertForPreTraining.from_pretrained(FOLDER, dtype=torch.float32).eval()
    ours = minibert.BertForPreTraining.from_pretrained(NAME)
    tokenizer = minibert.BertTokenizer.from_pretrained(NAME)
    batch = tokenizer(["I love [MASK].", "What is the [MASK] of life?"], ["The end is near.", "Time is money."],
                      padding=True, return_tensors="pt")  # fmt: skip
    with torch.no_grad():
        theirs, exact = reference(**batch), exact_reference(reference)(**batch)
        mine = ours(**batch)
    for field in ("prediction_logits", "seq_relationship_logits"):
        bound = bound_from_exact(getattr(theirs, field), getattr(exact, field))
        delta = assert_close(getattr(mine, field), getattr(exact, field).float(), f"{field} vs exact", atol=bound)
        print(f"\nfortunes-mini {field}: max |Δ| vs exact {delta:.1e} (bound {bound:.1e})")


def test_fill_mask_command_without_a_hub_uses_the_bundled_toy(no_hub):
    done = run_minibert("fill-mask", "I [MASK] your father.")
    assert done.returncode == 0, done.stderr
    notes = done.stderr.splitlines()
    assert "using the bundled minibert/fortunes-mini, a toy BERT" in notes[0] and "not bert-base" in notes[0]
    assert notes[1] == f"minibert: model {NAME}"
    assert len(done.stdout.splitlines()) == 5
    assert done.stdout == run_minibert("fill-mask", "I [MASK] your father.", "--model", NAME).stdout


def test_next_sentence_command_without_a_hub_uses_the_bundled_toy(no_hub):
    done = run_minibert("next-sentence", "I was thirsty.", "I drank water.")
    assert done.returncode == 0, done.stderr
    assert "using the bundled minibert/fortunes-mini" in done.stderr
    assert done.stdout == run_minibert("next-sentence", "I was thirsty.", "I drank water.", "--model", NAME).stdout


def test_a_named_model_that_cannot_be_reached_is_not_replaced(no_hub):
    done = run_minibert("fill-mask", "I [MASK] you.", "--model", "google-bert/bert-base-uncased")
    assert done.returncode == 1 and "using the bundled" not in done.stderr
    assert "HF_HUB_OFFLINE=1 is set" in done.stderr


def test_fill_mask_without_a_model_and_a_hub_warns_and_uses_the_bundled_toy(no_hub):
    with pytest.warns(UserWarning, match="using the bundled minibert/fortunes-mini, a toy BERT"):
        guesses = minibert.fill_mask("I love [MASK].")
    assert guesses == minibert.fill_mask("I love [MASK].", model=NAME)
    with pytest.warns(UserWarning, match="using the bundled minibert/fortunes-mini"):
        probability = minibert.next_sentence("I was thirsty.", "I drank water.")
    assert probability == minibert.next_sentence("I was thirsty.", "I drank water.", model=NAME)


def test_pyproject_ships_every_file_of_the_bundle():
    section = (ROOT / "pyproject.toml").read_text().split("[tool.setuptools.package-data]", 1)[1]
    listed = re.search(r"^minibert = (\[.*?\])$", section, re.MULTILINE | re.DOTALL)  # (tomllib: 3.11+)
    globs = json.loads(listed.group(1))
    for path in FOLDER.iterdir():
        relative = path.relative_to(ROOT / "src" / "minibert").as_posix()
        assert any(fnmatch.fnmatch(relative, glob) for glob in globs), f"{relative} is not package data"


@pytest.mark.slow
def test_a_built_wheel_holds_the_bundle(tmp_path):
    """`pip wheel . --no-deps` (on a copy: setuptools writes build/ beside the sources) holds the
    bundle's five files, byte for byte (slow: ~7 s)."""
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    # the installed setuptools when there is one (no download); else pip's isolated build fetches it
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", *isolation, "-q", "-w",
                    str(tmp_path / "wheel")], check=True, capture_output=True, timeout=300)  # fmt: skip
    (wheel,) = (tmp_path / "wheel").glob("minibert-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {Path(name).name: archive.read(name) for name in archive.namelist()
                   if name.startswith("minibert/bundled/fortunes-mini/")}  # fmt: skip
    assert set(shipped) == FILES
    assert all(shipped[name] == (FOLDER / name).read_bytes() for name in FILES)


def test_the_bundle_script_makes_the_folder_from_a_run(tmp_path):
    """scripts/bundle_run.py, the drop-in: the run's tensors under the same names, rounded to bf16 as
    torch rounds them; config and vocabulary copied; the tokenizer's length set to the positions."""
    from safetensors.torch import load_file

    from minibert.config import BertConfig

    run, output = tmp_path / "run", tmp_path / "bundle"
    config = tmp_path / "config.json"
    shape = {"vocab_size": 8000, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64, "max_position_embeddings": 64}  # fmt: skip
    config.write_text(json.dumps(shape))
    torch.manual_seed(0)
    minibert.BertForPreTraining(BertConfig.from_json_file(config)).save_pretrained(run)
    minibert.BertTokenizer(FOLDER / "vocab.txt").save_pretrained(run)
    settings = {"steps": 3, "batch_size": 2}  # what a run's training state holds, in short
    torch.save({"settings": settings}, run / "training_state.pt")
    figures = [{"step": step, "loss": 9.0 - step, "mlm_loss": 8.5 - step, "nsp_loss": 0.5, "mlm_accuracy": step / 10,
                "nsp_accuracy": 0.5, "seconds": 0.25} for step in (1, 2, 3)]  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in figures))
    text, data = tmp_path / "text.txt", tmp_path / "data.tfrecord"
    text.write_bytes(b"a text\n"), data.write_bytes(b"instances")
    command = [sys.executable, str(ROOT / "scripts" / "bundle_run.py"), str(run), "--output", str(output),
               "--text", str(text), "--data", str(data)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert {path.name for path in output.iterdir()} == FILES - {"README.md"}
    record = json.loads((output / "training.json").read_text())
    assert record["sha256"]["text"] == hashlib.sha256(b"a text\n").hexdigest()
    assert record["sha256"]["instances"] == hashlib.sha256(b"instances").hexdigest()
    weights = (output / "model.safetensors").read_bytes()
    assert record["sha256"]["bfloat16 weights"] == hashlib.sha256(weights).hexdigest()
    assert record["settings"] == settings and record["config"]["hidden_size"] == 32
    assert record["metrics"]["first_step"]["mlm_loss"] == 7.5 and record["metrics"]["seconds"] == 0.75
    assert record["metrics"]["last_100_steps"]["mlm_loss"] == 6.5  # the mean of 7.5, 6.5, 5.5
    source, halved = load_file(run / "model.safetensors"), load_file(output / "model.safetensors")
    assert set(halved) == set(source) and all(tensor.dtype == torch.bfloat16 for tensor in halved.values())
    assert all(torch.equal(halved[name], source[name].to(torch.bfloat16)) for name in source)
    assert (output / "vocab.txt").read_bytes() == (FOLDER / "vocab.txt").read_bytes()
    assert json.loads((output / "tokenizer_config.json").read_text())["model_max_length"] == 64
    loaded = minibert.BertForPreTraining.from_pretrained(output)
    assert torch.equal(loaded.bert.embeddings.word_embeddings.weight, source["bert.embeddings.word_embeddings.weight"]
                       .to(torch.bfloat16).float())  # fmt: skip


def test_the_bundle_carries_its_training_texts_licence_notice():
    """The folder's README reproduces the BSD notice of Debian's fortunes (its copyright file, when
    the package is installed, is the reference), names the text and marks where the metrics go."""
    readme = (FOLDER / "README.md").read_text(encoding="utf-8")
    copyright_file = Path("/usr/share/doc/fortunes/copyright")
    if copyright_file.exists():
        text = copyright_file.read_text(encoding="utf-8", errors="replace")
        notice = text[text.index("Copyright (c) 1991") : text.index("SUCH DAMAGE.") + len("SUCH DAMAGE.")]
    else:  # the notice's first and last lines
        notice = "Copyright (c) 1991 The Regents of the University of California.\nSUCH DAMAGE."
    lines = {line.strip() for line in readme.splitlines()}
    missing = [line.strip() for line in notice.splitlines() if line.strip() and line.strip() not in lines]
    assert not missing, f"not in the bundle's README.md: {missing[:3]}"
    words = " ".join(readme.split())
    assert "Debian's `fortunes` package" in words and "docs/pretraining.md §4" in words and "Metrics" in words
