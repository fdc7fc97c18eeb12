"""What fortunes-mini's README (and docs/fortunes-mini.md) says about its dtype is what transformers
does (issue 45, item 8): the weights are stored in bfloat16; transformers 5 loads them as bfloat16
(its default ``dtype="auto"`` keeps the file's type; transformers 4 gave float32), and
``dtype=torch.float32`` gives float32 — the dtype minibert computes in. Checked on the installed
transformers, with the logits' difference the README warns about measured."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import minibert

FOLDER = Path(minibert.__file__).parent / "bundled" / "fortunes-mini"
transformers = pytest.importorskip("transformers")
MAJOR = int(transformers.__version__.split(".")[0])


def test_the_file_holds_bfloat16_and_minibert_loads_float32():
    from safetensors import safe_open

    with safe_open(FOLDER / "model.safetensors", "pt") as weights:
        assert {weights.get_slice(name).get_dtype() for name in weights.keys()} == {"BF16"}
    assert next(minibert.BertForPreTraining.from_pretrained(FOLDER).parameters()).dtype == torch.float32


def test_transformers_loads_it_as_the_readme_says_and_float32_when_asked():
    default = transformers.BertForPreTraining.from_pretrained(FOLDER).eval()
    float32 = transformers.BertForPreTraining.from_pretrained(FOLDER, dtype=torch.float32).eval()
    assert {p.dtype for p in default.parameters()} == {torch.bfloat16 if MAJOR >= 5 else torch.float32}
    assert {p.dtype for p in float32.parameters()} == {torch.float32}
    tokenizer = minibert.BertTokenizer.from_pretrained(FOLDER)
    batch = tokenizer(["I love [MASK].", "a fool and his [MASK] are soon parted."], padding=True, return_tensors="pt")
    with torch.no_grad():
        delta = (default(**batch).prediction_logits.float() - float32(**batch).prediction_logits).abs().max().item()
    print(f"\ntransformers {transformers.__version__}: default-load vs float32 MLM logits, max |Δ| = {delta:.3f}")
    if MAJOR >= 5:  # the README's "a few hundredths": bf16 keeps 8 bits of mantissa, logits are ~10
        assert 0.005 < delta < 0.2, delta
