"""dtype="int8" and weights that are not finite (issue 53, item 3): a NaN or an infinity in a
checkpoint (any format, any dtype, a head too) is refused for int8 by name, in one line on the
command line, and never passes through a cached verdict; one that reaches an int8 projection after
loading gives NaN or an infinity exactly where float32 does. Small random checkpoints
(int8_checkpoints.py).
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from helpers import run_minibert
from int8_checkpoints import saved
from minibert import (
    BertForSequenceClassification,
    BertModel,  # fmt: skip
)
from minibert.errors import QuantizationError
from minibert.speed import int8_check
from minibert.speed.int8 import Int8Linear
from minibert.speed.packed_linear import AppliedBy

pytestmark = pytest.mark.usefixtures("int8_measured_faster")  # a fresh measurement cache per test, int8 faster


# --- broken weights (issue 53, item 3) -----------------------------------------------------------------------

BROKEN = {  # a name in the checkpoint, where in it, what is put there
    "inf in a feed-forward weight": ("encoder.layer.0.intermediate.dense.weight", (3, 5), float("inf")),
    "-inf in an output projection": ("encoder.layer.1.output.dense.weight", (0, 0), float("-inf")),
    "NaN in a query weight": ("encoder.layer.0.attention.self.query.weight", (1, 2), float("nan")),
    "NaN in one word's embedding row": ("embeddings.word_embeddings.weight", (7, slice(None)), float("nan")),
    "NaN in a LayerNorm": ("embeddings.LayerNorm.weight", (4,), float("nan")),
    "inf in a bias": ("encoder.layer.1.attention.output.dense.bias", (2,), float("inf")),
    "NaN in the pooler": ("pooler.dense.weight", (0, 1), float("nan")),
    # issue 53's own hostile pass: every kind of tensor the encoder reads, and more than one value
    "NaN in a position's row": ("embeddings.position_embeddings.weight", (3, slice(None)), float("nan")),
    "inf in a segment's row": ("embeddings.token_type_embeddings.weight", (1, 0), float("inf")),
    "-inf in a middle LayerNorm bias": ("encoder.layer.0.attention.output.LayerNorm.bias", (9,), float("-inf")),
    "inf in a key weight": ("encoder.layer.1.attention.self.key.weight", (10, 11), float("inf")),
    "NaN in a value bias": ("encoder.layer.0.attention.self.value.bias", (0,), float("nan")),
    "NaN in a feed-forward bias": ("encoder.layer.1.intermediate.dense.bias", (127,), float("nan")),
    "NaN in the last output LayerNorm": ("encoder.layer.1.output.LayerNorm.weight", (63,), float("nan")),
    "a whole weight of NaN": ("encoder.layer.0.output.dense.weight", (slice(None), slice(None)), float("nan")),
}
COUNTS = {"a whole weight of NaN": 64 * 128}


def _broken(directory, tmp_path, name, where, value):
    from safetensors.torch import save_file

    state = load_file(directory / "model.safetensors")
    state[name] = state[name].clone()
    state[name][where] = value
    target = tmp_path / "broken"
    shutil.copytree(directory, target)
    save_file(state, target / "model.safetensors")
    return target


@pytest.mark.parametrize("case", list(BROKEN))
def test_int8_refuses_a_non_finite_weight_naming_it_and_float32_warns(tiny_dir, tmp_path, case):
    name, where, value = BROKEN[case]
    broken = _broken(tiny_dir, tmp_path, name, where, value)
    count = COUNTS.get(case, 64 if isinstance(where[-1], slice) else 1)
    with pytest.raises(QuantizationError, match=rf"refused for dtype='int8': NaN or infinite weights \(\S*"
                                                rf"{name.split('.')[-2]}\S* holds {count:,} of "):  # fmt: skip
        BertModel.from_pretrained(broken, dtype="int8")
    cache = tmp_path / "cache" / "gemm.json"
    assert not cache.exists() or "nan" not in cache.read_text().lower()  # no verdict kept for it
    with pytest.warns(UserWarning, match=rf"NaN or infinite weights .* holds {count:,} of .*every output that reads"):
        model = BertModel.from_pretrained(broken)
    assert model.dtype == torch.float32  # float32 computes what the checkpoint holds: NaN where it is read


def test_the_command_refuses_an_int8_model_with_broken_weights_in_one_line(tmp_path):
    from pathlib import Path

    broken = _broken(Path("tests/data/tiny_hub"), tmp_path, "bert.encoder.layer.0.intermediate.dense.weight", (3, 5),
                     float("inf"))  # fmt: skip
    result = run_minibert("embed", "hello world", "--model", str(broken), "--dtype", "int8")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "NaN or infinite weights" in result.stderr and "ChooseQuantizationParams" not in result.stderr


def test_a_nan_cosine_is_never_a_pass_nor_kept(monkeypatch):
    nan = float("nan")
    monkeypatch.setattr(int8_check, "read_cache", lambda: {"k": {"int8_mean_cosine": nan, "int8_worst_cosine": nan,
                                                                 "texts": 8}})  # fmt: skip
    assert int8_check._cached_check("k") is None


def test_the_finite_check_is_exact_where_a_sum_overflows():
    """Loading screens each tensor by its sum (speed): a sum that overflows on huge finite weights must
    not make them count as broken, and one NaN or a pair of opposite infinities must."""
    from minibert.loading.from_pretrained import _all_finite

    assert _all_finite(torch.full((4,), 3e38)) and _all_finite(torch.tensor([60000.0, 60000.0]).half())
    for values in ([1.0, float("nan")], [float("inf")], [float("inf"), float("-inf")], [-float("inf"), 2.0]):
        assert not _all_finite(torch.tensor(values)), values


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_a_half_precision_checkpoint_with_an_infinity_is_refused_for_int8(tiny_dir, tmp_path, dtype):
    """float16 holds only up to 65,504: a checkpoint saved in half precision may carry an inf where the
    float32 weight was large. Read in int8 it is refused like any other, by the name in the file."""
    from safetensors.torch import save_file

    state = {name: tensor.to(dtype) for name, tensor in load_file(tiny_dir / "model.safetensors").items()}
    state["encoder.layer.1.intermediate.dense.weight"][0, 0] = float("inf")
    target = tmp_path / "half"
    shutil.copytree(tiny_dir, target)
    save_file(state, target / "model.safetensors")
    with pytest.raises(QuantizationError, match=r"encoder\.layer\.1\.intermediate\.dense\.weight holds 1 of "):
        BertModel.from_pretrained(target, dtype="int8")


def test_a_broken_weight_in_a_pickled_checkpoint_is_refused_for_int8(tiny_dir, tmp_path):
    state = load_file(tiny_dir / "model.safetensors")
    state["encoder.layer.0.attention.self.query.weight"][2, 2] = float("nan")
    target = tmp_path / "bin"
    target.mkdir()
    shutil.copy(tiny_dir / "config.json", target)
    torch.save(state, target / "pytorch_model.bin")
    with pytest.raises(QuantizationError, match=r"query\.weight holds 1 of "):
        BertModel.from_pretrained(target, dtype="int8")


def test_a_broken_classifier_head_is_refused_for_int8_though_the_head_stays_float32(tmp_path):
    """The head of an int8 model is float32, but a NaN there is still a NaN in every answer."""
    from safetensors.torch import save_file

    directory = saved(BertForSequenceClassification, tmp_path / "cls")
    state = load_file(directory / "model.safetensors")
    state["classifier.weight"][1, 4] = float("nan")
    save_file(state, directory / "model.safetensors")
    with pytest.raises(QuantizationError, match=r"classifier\.weight holds 1 of "):
        BertForSequenceClassification.from_pretrained(directory, dtype="int8")
    result = run_minibert("classify", "a text", "--model", str(directory), "--dtype", "int8")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "classifier.weight" in result.stderr and "NaN or infinite weights" in result.stderr


def test_the_embedder_and_verify_refuse_a_broken_weight_for_int8(tiny_dir, tmp_path):
    from minibert import Embedder

    broken = _broken(tiny_dir, tmp_path, "encoder.layer.0.intermediate.dense.weight", (3, 5), float("nan"))
    (broken / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                                                + [f"w{n}" for n in range(115)]) + "\n")  # fmt: skip
    (broken / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    with pytest.raises(QuantizationError, match=r"intermediate\.dense\.weight holds 1 of "):
        Embedder.from_pretrained(broken, dtype="int8")
    result = run_minibert("verify", "--model", str(broken), "--dtype", "int8")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "NaN or infinite weights" in result.stderr


def test_a_cached_pass_does_not_let_a_broken_file_through(tiny_dir, tmp_path):
    """The verdict of the check at load is cached by the file's size and time: a broken file written
    over a good one with the same size and time is still refused (the finite check reads the weights
    every time, before any cached verdict is looked at)."""
    good = _broken(tiny_dir, tmp_path / "good", "encoder.layer.1.output.dense.weight", (1, 1), 0.5)  # (finite)
    BertModel.from_pretrained(good, dtype="int8")  # the verdict is cached
    weights = good / "model.safetensors"
    stat = weights.stat()
    broken = _broken(tiny_dir, tmp_path / "bad", "encoder.layer.1.output.dense.weight", (1, 1), float("nan"))
    shutil.copyfile(broken / "model.safetensors", weights)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert weights.stat().st_size == stat.st_size
    with pytest.raises(QuantizationError, match=r"output\.dense\.weight holds 1 of "):
        BertModel.from_pretrained(good, dtype="int8")


# --- a NaN or an infinity that reaches an int8 projection after loading -----------------------------------

LIBRARIES_HERE = [library for library in int8_check.LIBRARIES if int8_check.library_unavailable(library) is None]


def _int8_layers_of(linear):
    """(an int8 layer of ``linear`` on each library here, the float32 function it stands for): on
    oneDNN also with GELU applied as the product is written, beside the function's own GELU."""
    from minibert.activations import ACTIVATIONS
    from minibert.speed.packed_linear import FUSIBLE

    layers = [(Int8Linear(linear, library), linear) for library in LIBRARIES_HERE]
    if "onednn" in LIBRARIES_HERE:
        gelu = ACTIVATIONS["gelu"]
        fused, pair = Int8Linear(linear, "onednn", FUSIBLE["gelu"], gelu), nn.Module()
        pair.intermediate, pair.activation = fused, AppliedBy(pair, fused)  # (the post-op applies only in its pair)
        layers.append((fused, lambda x: gelu(linear(x))))
    return layers


def test_an_int8_layer_is_nan_or_infinite_exactly_where_float32_is():
    """Before: FBGEMM's quantizer skipped the NaN when it took the range and rounded it to a number
    (finite outputs, where float32 gives NaN), and oneDNN's raised torch's own "min should be less
    than or equal to max". Now both give the rows float32 gives NaN or infinite as such, and the
    other rows the numbers they get without the bad ones in the call."""
    torch.manual_seed(0)
    linear = nn.Linear(16, 8)
    x = torch.randn(2, 3, 16)
    x[0, 1, 4], x[1, 2, 7], x[1, 0, 2] = float("nan"), float("inf"), -float("inf")
    clean = torch.cat([x[0, [0, 2]], x[1, [1]]])  # the rows without a NaN or an infinity
    for layer, function in _int8_layers_of(linear):
        with torch.inference_mode():
            out, expected = layer(x), function(x)  # (2, 3, 8)
            assert torch.equal(out.isfinite(), expected.isfinite()), (layer, out)
            assert torch.equal(out[0, 1].isnan(), expected[0, 1].isnan())  # a NaN row: NaN throughout
            assert torch.equal(torch.cat([out[0, [0, 2]], out[1, [1]]]), layer(clean))


@pytest.mark.parametrize("library", LIBRARIES_HERE)
def test_a_nan_written_into_an_embedding_after_loading_gives_nan_in_int8_as_in_float32(tiny_dir, monkeypatch,
                                                                                       library):
    """The report's case: the embeddings stay float32 and writable; a NaN in one row reaches the
    int8 projections. float32 gives that text NaN throughout (attention spreads it over its tokens)
    and the other text of the batch its own numbers: so does int8, on either library, the other
    text's vectors as close to float32's as int8 keeps any (the loader's floor)."""
    monkeypatch.setenv("MINIBERT_INT8", library)
    monkeypatch.setattr(int8_check, "int8_speedups", lambda hidden, intermediate: {"fbgemm": 2.0, "onednn": 2.0})
    models = BertModel.from_pretrained(tiny_dir), BertModel.from_pretrained(tiny_dir, dtype="int8")
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    with torch.inference_mode():
        for model in models:
            model.get_input_embeddings().weight[7, 3] = float("nan")
        exact, approximate = (model(ids).last_hidden_state for model in models)
    assert exact[0].isnan().all() and exact[1].isfinite().all()
    assert torch.equal(approximate.isnan(), exact.isnan())
    assert nn.functional.cosine_similarity(approximate[1], exact[1], dim=-1).min() > int8_check.COSINE_FLOOR
