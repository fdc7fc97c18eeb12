"""The fast path where a graph is made of it: short sequences' written-out attention against the fused
kernel, every layer within helpers.bound_from_exact of float64; a torch.jit trace of an unpadded
example given a padded batch; torch.export of the default load; the legacy ONNX export. Each against
transformers' numbers.

Tolerance: the parity bound of tests/test_model.py, 1e-5 absolute per layer (test_speed_gemm.py
says why a backend's reordered sums stay far below it).
"""

from __future__ import annotations

import pytest
import torch

from helpers import assert_close, compare_real_tokens_with_exact, exact_reference, max_abs_diff, needs_onednn
from minibert import BertModel
from minilm_models import batch_of

transformers = pytest.importorskip("transformers")

ATOL = 1e-5


pytestmark = pytest.mark.usefixtures("own_gemm_cache")  # each test measures into its own cache


def test_short_sequences_written_out_compute_what_the_fused_kernel_computes(minilm_dir, minilm_reference, real_texts):
    """The fast path's written-out attention (speed/fast_path.py's written_out, for sequences up to the
    measured length) against the fused kernel, on a batch that packs and attends in length groups
    (masks included): every layer within helpers.bound_from_exact of float64 (the same formula; the sums only
    ordered otherwise, so each lands in fp32's own spread, ~1e-5 wide at layer 5)."""
    import corpus
    from minibert.speed.packing import Packing

    model = BertModel.from_pretrained(minilm_dir, gemm="mkl")
    by_length = sorted((text for text in corpus.docstrings() if 20 < len(text) < 1200), key=len)
    batch = batch_of(minilm_dir, [by_length[-1], *by_length[:4], *real_texts[:4]])
    assert Packing(batch["attention_mask"]).groups is not None
    threads = torch.get_num_threads()
    with torch.no_grad():
        model.short_attention = {}  # (groups are made where padding is skipped)
        fused = model(**batch, output_hidden_states=True, skip_padding=True)
        model.short_attention = {threads: 10_000}  # every group written out
        written = model(**batch, output_hidden_states=True, skip_padding=True)
        model.short_attention = {threads + 1: 10_000}  # another thread count's entry: not this one's
        again = model(**batch, skip_padding=True).last_hidden_state
        theirs = minilm_reference(**batch, output_hidden_states=True)
        exact = exact_reference(minilm_reference)(**batch, output_hidden_states=True)
    # Both against float64 at the real tokens, within 1e-5 beyond twice transformers' fp32 error at each
    # depth: a flat 1e-5 between the two orders failed at 1.26e-5 (layer 5) on a batch with another docstring.
    for name, output in (("fused kernel", fused), ("written out", written)):
        compare_real_tokens_with_exact(output, theirs, exact, batch["attention_mask"], name)
    assert max_abs_diff(fused.last_hidden_state, written.last_hidden_state) > 0  # two computations, not one
    assert torch.equal(again, fused.last_hidden_state)


def _traced_model(directory, backend: str) -> BertModel:
    """A model loaded to be traced (tuples out, as transformers' ``torchscript=True`` gives): ``backend`` is a
    GEMM backend, or "book" for the book's modules."""
    model = BertModel.from_pretrained(directory, gemm="mkl" if backend == "book" else backend, return_dict=False)
    return model.use_book_modules() if backend == "book" else model


def _args(batch) -> tuple:
    return batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]


@pytest.mark.parametrize("backend", ["mkl", "book", pytest.param("onednn-fused", marks=needs_onednn)])
def test_a_trace_of_an_unpadded_example_masks_a_padded_batch(backend, minilm_dir, minilm_reference, real_texts):
    """torch.jit.trace records one call. minibert chose in Python whether a batch had padding, so a trace of one
    unpadded sentence (as export tutorials trace) held no attention mask at all: a padded batch run through it
    was 0.49-1.5 from transformers at real tokens (mkl, the book's modules); on oneDNN the trace failed (the packed
    weight is no tensor a graph can hold). While tracing, the mask is always applied and the layers run on
    F.linear: transformers' numbers, here and on a batch of another length."""
    model = _traced_model(minilm_dir, backend)
    with torch.no_grad():
        traced = torch.jit.trace(model, _args(batch_of(minilm_dir, "Hello world")))
        for texts in (real_texts[:4], real_texts[-3:]):
            batch = batch_of(minilm_dir, texts)
            real = batch["attention_mask"].bool()
            assert not real.all()
            hidden, pooled = traced(*_args(batch))
            theirs = minilm_reference(**batch)
            assert_close(hidden[real], theirs.last_hidden_state[real], f"{backend}: traced, on a padded batch", ATOL)
            assert_close(pooled, theirs.pooler_output, f"{backend}: traced, the pooler", ATOL)


@needs_onednn
@pytest.mark.parametrize("short", ["as measured", "written out up to 16 tokens"])
def test_torch_export_of_the_default_load_computes_transformers_numbers(minilm_dir, minilm_reference, real_texts,
                                                                        short):
    """torch.export.export stopped in the input checks (``int(ids.min())``: a value an exported graph cannot
    know) and in the choice of a mask. The checks now run in eager calls only; the exported program of the
    model as loaded (oneDNN on this CPU), with dynamic batch and length, traced on an unpadded batch,
    computes transformers' numbers on padded batches. Whatever length this CPU measured attention to be
    faster written out up to: read while recording, it became a guard (tokens <= 16) and export refused
    the dynamic length (seen on a loaded AMD EPYC Zen 3, whose measurement came out 16)."""
    model = BertModel.from_pretrained(minilm_dir, gemm="onednn", return_dict=False)
    if short != "as measured":
        model.short_attention = {torch.get_num_threads(): 16}
    example = batch_of(minilm_dir, ["Hello world", "Good morning"])
    assert example["attention_mask"].bool().all()
    dims = {0: torch.export.Dim("batch"), 1: torch.export.Dim("tokens", max=512)}
    with torch.no_grad():
        program = torch.export.export(model, _args(example), dynamic_shapes=(dims, dims, dims)).module()
        for texts in (real_texts[:4], real_texts[-3:]):
            batch = batch_of(minilm_dir, texts)
            real = batch["attention_mask"].bool()
            hidden, pooled = program(*_args(batch))
            theirs = minilm_reference(**batch)
            assert_close(hidden[real], theirs.last_hidden_state[real], "torch.export, on a padded batch", ATOL)
            assert_close(pooled, theirs.pooler_output, "torch.export, the pooler", ATOL)
    with pytest.raises(ValueError, match="outside the vocabulary"):  # eager calls still check
        model(torch.tensor([[101, 10**6, 102]]))


def test_the_legacy_onnx_export_of_an_unpadded_example_takes_the_mask(minilm_dir, minilm_reference, real_texts,
                                                                      tmp_path):
    """torch.onnx.export(dynamo=False) traces as torch.jit.trace does: the graph exported from one unpadded
    sentence had no attention_mask input, and gave onnxruntime 0.49 from transformers on a padded batch."""
    onnxruntime = pytest.importorskip("onnxruntime")
    model = BertModel.from_pretrained(minilm_dir, gemm="mkl", return_dict=False)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = _args(batch_of(minilm_dir, "Hello world"))
    with torch.no_grad():
        traced = torch.jit.trace(model, example)  # (the legacy exporter fills keyword-only parameters in by position)
        torch.onnx.export(traced, example, tmp_path / "model.onnx", dynamo=False,
                          input_names=names, output_names=["last_hidden_state", "pooler_output"],
                          dynamic_axes={name: {0: "batch", 1: "tokens"} for name in names})  # fmt: skip
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"))
    assert [graph_input.name for graph_input in session.get_inputs()] == names
    batch = batch_of(minilm_dir, real_texts[:4])
    hidden, _ = session.run(None, {name: batch[name].numpy() for name in names})
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        theirs = minilm_reference(**batch).last_hidden_state[real]
    assert_close(torch.from_numpy(hidden)[real], theirs, "onnxruntime, on a padded batch", ATOL)
