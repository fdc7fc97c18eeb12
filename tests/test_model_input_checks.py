"""The model's inputs are checked before any compute (inputs.py): whatever ids, types and mask a
caller passes, the model either runs or raises a ValueError/TypeError saying which input is wrong
and why, never an IndexError or a CUDA-style assert from deep inside."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibert import BertConfig, BertModel
from tiny_hub import TINY as TINY_CHECKPOINT  # a random 2-layer BERT in the hub's layout

TINY = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                  max_position_embeddings=20, type_vocab_size=2)  # fmt: skip


@pytest.fixture(scope="module")
def tiny():
    return BertModel(TINY).eval()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch=st.integers(1, 3),
    tokens=st.integers(0, 25),
    low=st.integers(-5, 120),
    high=st.integers(-5, 120),
    type_high=st.integers(0, 3),
    mask_shape_off=st.booleans(),
    as_float=st.booleans(),
)
def test_model_validation_never_crashes_deep_inside(
    tiny, batch, tokens, low, high, type_high, mask_shape_off, as_float
):
    low, high = min(low, high), max(low, high)
    ids = torch.randint(low, high + 1, (batch, tokens))
    type_ids = torch.randint(0, type_high + 1, (batch, tokens))
    mask = torch.ones(batch, tokens + (1 if mask_shape_off else 0), dtype=torch.long)
    if as_float:
        ids = ids.float()
    try:
        out = tiny(ids, attention_mask=mask, token_type_ids=type_ids)
    except TypeError as error:
        assert as_float and "input_ids must hold integers" in str(error)
        return
    except ValueError as error:
        message = str(error)
        problems = []
        if tokens == 0:
            problems.append("at least one sequence of one token")
        if tokens > 20:
            problems.append("max_position_embeddings=20")
        if tokens and (ids.min() < 0 or ids.max() >= 100):
            problems.append("outside the vocabulary [0, 100)")
        if mask_shape_off:
            problems.append("attention_mask has shape")
        if tokens and type_ids.max() >= 2:
            problems.append("type_vocab_size=2")
        assert problems, f"unexpected ValueError: {message}"
        assert any(problem in message for problem in problems), message
        return
    assert not as_float and 0 < tokens <= 20 and not mask_shape_off
    assert 0 <= ids.min() and ids.max() < 100 and type_ids.max() < 2
    assert out.last_hidden_state.shape == (batch, tokens, 16)


def test_validation_messages(tiny):
    with pytest.raises(ValueError, match="sequence of 21 tokens is longer than max_position_embeddings=20"):
        tiny(torch.zeros(1, 21, dtype=torch.long))
    with pytest.raises(ValueError, match="input_ids contains 100, outside the vocabulary \\[0, 100\\)"):
        tiny(torch.tensor([[1, 100]]))
    with pytest.raises(ValueError, match="input_ids contains -1"):
        tiny([[1, -1]])
    with pytest.raises(TypeError, match="input_ids must hold integers, got dtype torch.float32"):
        tiny(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="token_type_ids contains 2, outside \\[0, type_vocab_size=2\\)"):
        tiny([[1, 2]], token_type_ids=[[0, 2]])
    with pytest.raises(ValueError, match="attention_mask has shape \\(1, 3\\) but input_ids has \\(1, 2\\)"):
        tiny([[1, 2]], attention_mask=[[1, 1, 1]])
    with pytest.raises(ValueError, match="attention_mask must hold only 0"):
        tiny([[1, 2]], attention_mask=[[1, 5]])
    with pytest.raises(TypeError, match="input_ids must be a tensor or a \\(nested\\) list of ints"):
        tiny([[1, 2], [3]])
    assert tiny([1, 2, 3]).last_hidden_state.shape == (1, 3, 16)  # one unbatched sequence is fine




@pytest.fixture(scope="module")
def tiny_reference():
    """(the tiny checkpoint's model, a batch of ids, its output with the usual int64 ids and mask)."""
    model = BertModel.from_pretrained(TINY_CHECKPOINT)
    ids = torch.tensor([[2, 17, 33, 9, 3, 0], [2, 40, 41, 3, 0, 0]])
    with torch.no_grad():
        expected = model(ids, attention_mask=(ids != 0).long()).last_hidden_state
    return model, ids, expected


# ----------------------------------------------------------------------------- ids of every dtype

INTEGER_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32,
                  torch.uint64]  # fmt: skip
OTHER_DTYPES = [torch.bool, torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES + OTHER_DTYPES, ids=str)
def test_ids_of_every_dtype_are_accepted_or_refused_with_minibert_error(tiny_reference, dtype):
    model, ids, expected = tiny_reference
    mask = (ids != 0).long()
    for name in ("input_ids", "token_type_ids"):
        inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
        inputs[name] = inputs[name].to(dtype)
        if dtype in INTEGER_DTYPES:
            with torch.no_grad():
                got = model(**inputs).last_hidden_state
            assert torch.equal(got, expected), f"{name} as {dtype}"
        else:
            with pytest.raises(TypeError, match=f"{name} must hold integers"):
                model(**inputs)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.int64, torch.float16, torch.float32], ids=str)
def test_attention_masks_of_every_usual_dtype_mean_the_same(tiny_reference, dtype):
    model, ids, expected = tiny_reference
    with torch.no_grad():
        got = model(ids, attention_mask=(ids != 0).to(dtype)).last_hidden_state
    assert torch.equal(got, expected)


def test_ids_as_lists_or_numpy_mean_the_same_and_text_is_refused(tiny_reference):
    model, ids, expected = tiny_reference
    mask = (ids != 0).long()
    with torch.no_grad():
        for value in (ids.tolist(), ids.numpy(), ids.numpy().astype(np.int32)):
            assert torch.equal(model(value, attention_mask=mask.tolist()).last_hidden_state, expected)
    for value in ("2 17 3", [[2, "x"]], object()):
        with pytest.raises(TypeError, match="input_ids"):
            model(value)


# ----------------------------------------------------------------------------- transformers' other call arguments


def test_position_ids_as_transformers(tiny_reference):
    """transformers' ``position_ids``: arange (its default) gives the plain call's numbers; shifted,
    per row, or one row for every row, the numbers transformers computes; outside the position table
    or of another shape, a ValueError naming it. Also positionally (4th, as in transformers)."""
    transformers = pytest.importorskip("transformers")
    model, ids, expected = tiny_reference
    reference = transformers.BertModel.from_pretrained(TINY_CHECKPOINT, attn_implementation="eager").eval()
    mask = (ids != 0).long()
    tokens = ids.shape[1]
    arange = torch.arange(tokens)
    for positions in (arange[None], arange, arange[None] + 3, torch.stack([arange + 1, arange.flip(0)]),
                      arange[None].expand(2, tokens).numpy()):  # fmt: skip
        with torch.no_grad():
            ours = model(ids, mask, None, positions).last_hidden_state
            given = torch.as_tensor(positions).reshape(-1, tokens)  # (transformers takes 2-D ones only)
            theirs = reference(ids, attention_mask=mask, position_ids=given).last_hidden_state
        assert float((ours - theirs).abs().max()) <= 1e-5, positions
        if torch.equal(torch.as_tensor(positions).expand(2, tokens), arange.expand(2, tokens)):
            assert torch.equal(ours, expected)
    for positions, message in ((arange[None] + 60, "position_ids contains 65, outside"),
                               (arange[:4], r"position_ids has shape \(1, 4\)"),
                               (torch.zeros(3, tokens, dtype=torch.long), r"position_ids has shape \(3, 6\)"),
                               (arange.float(), "position_ids must hold integers")):  # fmt: skip
        with pytest.raises((ValueError, TypeError), match=message):
            model(ids, attention_mask=mask, position_ids=positions)



def test_another_threads_compile_does_not_turn_this_threads_checks_off(tiny, monkeypatch):
    """torch's is_compiling() is one flag for the whole process (torch 2.13): while another thread
    compiled or exported, an eager call here skipped its checks and computed a mask of 2s unchecked.
    The checks are left out only where this thread records a graph (its own tracing context)."""
    import minibert.inputs

    monkeypatch.setattr(minibert.inputs, "_is_compiling", lambda: True)  # as while another thread compiles
    assert not minibert.inputs.recording_graph()
    with pytest.raises(ValueError, match="attention_mask must hold only 0"):
        tiny(torch.tensor([[1, 2, 3]]), attention_mask=torch.tensor([[1, 2, 1]]))


def test_recording_graph_is_true_in_what_torch_compile_traces_and_false_when_run():
    """torch.compile's dynamo sees recording_graph() as True (no choice may read the tensors' values
    there); run eagerly, in any thread, it is False (the checks run)."""
    import minibert.inputs

    def which(x):
        return x + 1 if minibert.inputs.recording_graph() else x - 1

    assert which(torch.zeros(1)).item() == -1
    assert torch.compile(which, backend="eager")(torch.zeros(1)).item() == 1
