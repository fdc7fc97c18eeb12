"""Loading and running under every grad mode, on every GEMM backend (issue 36, item 1).

Each case runs in a fresh process (tests/grad_mode_worker.py) with a fresh GEMM cache, so the
measurement, the packing of the weights and the choice happen exactly as for a user's first run
(forked from one that has imported torch and nothing of minibert's: tests/fork_server.py);
its numbers are compared here with transformers' own (eager attention, float32), within the parity
bound of tests/test_model.py: 1e-5 beyond fp32's own rounding at MiniLM's depth, as transformers
measures it against float64 (helpers.bound_from_exact; a wrong weight or function is off by 1e-3).

Cases × backends {mkl, onednn, onednn-fused, auto}: load and run inside ``torch.inference_mode()``;
``Embedder.from_pretrained(...).embed`` inside it; load under ``no_grad`` then one gradient step;
bfloat16 inside inference_mode, then back to float32; ``copy.deepcopy`` and pickle of a loaded model;
a model with heads loaded inside it; float16 weights (which oneDNN cannot take: refused by name).
The default suite runs a few representative cases; the whole matrix is ``slow``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from fork_server import ForkServer

from conftest import make_google_checkpoint
from helpers import assert_close, bound_from_exact, child_environment, exact_reference, needs_onednn
from minibert import BertTokenizer
from minibert.speed import BACKENDS

transformers = pytest.importorskip("transformers")
ATOL = 1e-5
WORKER = Path(__file__).with_name("grad_mode_worker.py")
TEXTS = ["I love Paris.", "The quick brown fox jumps over the lazy dog, then rests near the river bank."]
CASES = ("load_and_run", "embed", "train", "bf16_and_back", "copies", "head", "float16")
# A few cases in the default suite (each a fresh process, ~4 s); the rest of the matrix is slow.
QUICK = {("load_and_run", "auto"), ("train", "onednn"), ("bf16_and_back", "onednn-fused"),
         ("copies", "onednn-fused"), ("float16", "onednn")}  # fmt: skip


@pytest.fixture(scope="module")
def fork_server():
    """Each case's process, forked from one Python that has imported torch (~3 s a case saved)."""
    server = ForkServer(child_environment())  # this checkout's src/ first on the path, as the other subprocess tests
    yield server
    server.close()


@pytest.fixture(scope="module")
def batch(minilm_dir):
    return BertTokenizer.from_pretrained(minilm_dir)(TEXTS, padding=True, return_tensors="pt")


@pytest.fixture(scope="module")
def heads_checkpoint(tmp_path_factory, vocab_file):
    """(directory, transformers BertForPreTraining) of a small checkpoint with both pre-training heads."""
    directory = tmp_path_factory.mktemp("pretraining-heads")
    model = make_google_checkpoint(directory, vocab_file, layers=2, hidden=64, heads=4, intermediate=128, seed=3)
    return directory, model.eval()


def run_case(fork_server, case, backend, model_dir, batch, tmp_path) -> dict:
    inputs, out = tmp_path / "inputs.pt", tmp_path / "out.pt"
    torch.save({"batch": dict(batch), "texts": TEXTS}, inputs)
    argv = [str(WORKER), case, str(model_dir), str(inputs), str(out)]
    source = f"import runpy, sys\nsys.argv = {argv!r}\nrunpy.run_path(sys.argv[0], run_name='__main__')\n"
    environ = {"MINIBERT_GEMM": backend, "MINIBERT_CACHE_DIR": str(tmp_path / "cache")}
    done = fork_server.run(source, tmp_path, timeout=300, environ=environ)
    assert done.returncode == 0, f"{case} on {backend} failed:\n{done.stderr[-3000:]}"
    return torch.load(out)


def _outputs(model, batch):
    with torch.no_grad():
        return model(**batch)


_EXPECTED = {}  # id(reference model) → (its last_hidden_state, float64's): computed once per model


def check_states(ours, reference, batch, name):
    """last_hidden_state of real tokens against transformers', within the bound from exact."""
    real = batch["attention_mask"].bool()
    if id(reference) not in _EXPECTED:
        exact = _outputs(exact_reference(reference), batch).last_hidden_state
        _EXPECTED[id(reference)] = (reference, _outputs(reference, batch).last_hidden_state, exact)
    _, theirs, exact = _EXPECTED[id(reference)]
    return assert_close(ours[real], theirs[real], name, bound_from_exact(theirs[real], exact[real], ATOL))


def _matrix():
    for case in CASES:
        for backend in (*BACKENDS, "auto"):
            marks = [needs_onednn] if backend.startswith("onednn") else []
            if (case, backend) not in QUICK:
                marks.append(pytest.mark.slow)
            yield pytest.param(case, backend, marks=marks, id=f"{case}-{backend}")


@pytest.mark.parametrize(("case", "backend"), list(_matrix()))
def test_grad_mode_case(case, backend, minilm_dir, batch, minilm_reference, heads_checkpoint, fork_server, tmp_path):
    model_dir = heads_checkpoint[0] if case == "head" else minilm_dir
    result = run_case(fork_server, case, backend, model_dir, batch, tmp_path)
    CHECKS[case](result, backend, batch, minilm_reference, heads_checkpoint, tmp_path)


def check_load_and_run(result, backend, batch, reference, heads_checkpoint, tmp_path):
    if backend != "auto":
        assert result["backend"] == backend
    worst = check_states(result["last_hidden_state"], reference, batch, f"{backend}: loaded in inference_mode")
    pooled = _outputs(reference, batch).pooler_output
    assert_close(result["pooler_output"], pooled, f"{backend}: pooler", ATOL)
    print(f"\n{backend}: loaded and run in inference_mode, max |Δ| {worst:.1e}")


def check_embed(result, backend, batch, reference, heads_checkpoint, tmp_path):
    """all-MiniLM-L6-v2's recipe: mean of the real tokens' vectors, normalized (sentence-transformers')."""
    states = _outputs(reference, batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = torch.nn.functional.normalize((states * mask).sum(1) / mask.sum(1), dim=-1)
    worst = assert_close(result["vectors"], expected, f"{backend}: Embedder in inference_mode", ATOL)
    print(f"\n{backend}: embedded in inference_mode, max |Δ| {worst:.1e}")


def check_train(result, backend, batch, reference, heads_checkpoint, tmp_path):
    """The gradients of a fixed loss equal transformers' (float64's, within fp32's spread), and the
    weights after one step compute what transformers computes with them."""
    real = batch["attention_mask"].bool()
    grads = {}
    for model in (reference, exact_reference(reference)):
        model.zero_grad()
        model(**batch).last_hidden_state[real].pow(2).mean().backward()
        layers = model.encoder.layer
        grads[model.dtype] = (layers[0].attention.self.query.weight.grad, layers[-1].intermediate.dense.weight.grad)
    for index, name in enumerate(("grad_query_0", "grad_intermediate_last")):
        theirs, exact = grads[torch.float32][index], grads[torch.float64][index]
        scale = exact.abs().max().item()  # gradients are not of magnitude 1: the bound scales with them
        assert_close(result[name], theirs, f"{backend}: {name}", bound_from_exact(theirs, exact, ATOL * scale))
    reference.zero_grad()
    stepped = transformers.BertModel.from_pretrained(str(tmp_path / "out.pt.model"), attn_implementation="eager")
    worst = check_states(result["after_step"], stepped.eval(), batch, f"{backend}: after one step")
    print(f"\n{backend}: gradients as transformers', after the step max |Δ| {worst:.1e}")


def check_bf16_and_back(result, backend, batch, reference, heads_checkpoint, tmp_path):
    """Back in float32, the model computes what transformers computes with the bf16-rounded weights;
    in bfloat16 (8 bits of mantissa: ~0.4% per rounding) every real token's vector keeps cosine ≥ 0.99
    with that (a wrong weight or function falls far below)."""
    import copy

    rounded = copy.deepcopy(reference)
    with torch.no_grad():
        for parameter in rounded.parameters():
            parameter.copy_(parameter.bfloat16().float())
    for name in ("back_inside", "back_outside"):
        check_states(result[name], rounded, batch, f"{backend}: bf16 and {name}")
    real = batch["attention_mask"].bool()
    theirs = _outputs(rounded, batch).last_hidden_state[real]
    cosine = torch.nn.functional.cosine_similarity(result["bf16"][real], theirs, dim=-1).min().item()
    assert cosine >= 0.99, f"{backend}: bfloat16 min cosine {cosine:.5f}"
    print(f"\n{backend}: bfloat16 min cosine {cosine:.5f}; back to float32 as transformers")


def check_copies(result, backend, batch, reference, heads_checkpoint, tmp_path):
    for name, states in result.items():
        check_states(states, reference, batch, f"{backend}: {name}")


def check_head(result, backend, batch, reference, heads_checkpoint, tmp_path):
    if backend != "auto":
        assert result["backend"] == backend
    _, theirs_model = heads_checkpoint
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        theirs = theirs_model(**batch)
        exact = exact_reference(theirs_model)(**batch)
    bound = bound_from_exact(theirs.prediction_logits[real], exact.prediction_logits[real], ATOL)
    assert_close(result["prediction_logits"][real], theirs.prediction_logits[real], f"{backend}: MLM logits", bound)
    assert_close(result["seq_relationship_logits"], theirs.seq_relationship_logits, f"{backend}: NSP logits", ATOL)


def check_float16(result, backend, batch, reference, heads_checkpoint, tmp_path):
    """oneDNN's linear takes float32 and bfloat16 only: asked for by name on float16 weights, it is
    refused, naming the reason; mkl (and auto, which then keeps mkl) computes in float16."""
    if backend.startswith("onednn"):
        assert set(result) == {"error"}, f"{backend} on float16 weights was not refused"
        assert "cannot run here" in result["error"] and "float16" in result["error"], result["error"]
        return
    real = batch["attention_mask"].bool()
    theirs = _outputs(reference, batch).last_hidden_state[real]
    cosine = torch.nn.functional.cosine_similarity(result["last_hidden_state"][real], theirs, dim=-1).min().item()
    assert cosine >= 0.99, f"{backend}: float16 min cosine {cosine:.5f}"  # 11 bits of mantissa: tighter than bf16


CHECKS = {name: globals()[f"check_{name}"] for name in CASES}


def test_resizing_inside_inference_mode_makes_ordinary_tensors():
    """resize_token_embeddings inside inference_mode (after add_tokens in a serving process, say)
    makes ordinary tables, as loading does: the model can still be fine-tuned afterwards."""
    from minibert import BertConfig, BertForMaskedLM

    config = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=99)
    model = BertForMaskedLM(config)
    with torch.inference_mode():
        table = model.resize_token_embeddings(110)
    assert not table.weight.is_inference() and not model.mlm_head.bias.is_inference()
    ids = torch.tensor([[1, 105, 2]])
    model(ids, labels=ids).loss.backward()
    assert table.weight.grad is not None and model.mlm_head.bias.grad is not None
