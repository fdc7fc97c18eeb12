"""``minibert verify``: every layer of minibert's model against transformers' on the same
checkpoint, float32 on both sides whatever dtype the checkpoint was stored in (transformers 5
loads a stored dtype, bfloat16 for the bundled fortunes-mini, where minibert computes in float32:
compared as loaded, the two differed by 6e-2 and verify failed on minibert's own default model)."""

from __future__ import annotations

import pytest
import torch

from helpers import run_minibert

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("stored", [torch.float32, torch.bfloat16], ids=str)
def test_verify_passes_whatever_dtype_the_checkpoint_was_stored_in(tmp_path, stored):
    folder = tmp_path / "model"
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37)  # fmt: skip
    transformers.BertModel(config).to(stored).save_pretrained(folder)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{n}" for n in range(94))]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    result = run_minibert("verify", "--model", str(folder), "--text", "w1 w2 w3", "--text", "w4")
    assert result.returncode == 0, result.stderr + result.stdout
    # a folder without tokenizer_config.json sets no length limit (as transformers): a long text is cut
    # where the model's positions end, not refused
    result = run_minibert("verify", "--model", str(folder), "--text", "w1 " * 600)
    assert result.returncode == 0, result.stderr + result.stdout


def test_verify_passes_on_the_bundled_model():
    result = run_minibert("verify", "--model", "minibert/fortunes-mini")
    assert result.returncode == 0, result.stderr + result.stdout


def _saved(folder, model) -> None:
    model.save_pretrained(folder)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{n}" for n in range(94))]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")


@pytest.mark.parametrize("kind", ["BertForTokenClassification", "BertForQuestionAnswering", "BertForMaskedLM"])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_verify_compares_a_checkpoint_without_a_pooler_as_transformers_loads_it(tmp_path, kind, dtype):
    # token classifiers and QA models are saved without a pooler (as `finetune --task tag|answer` writes
    # them), a masked-LM save without a pooler or next-sentence head: verify refused all three, telling
    # a command-line user to "load it with BertForTokenClassification"
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37, num_labels=3)  # fmt: skip
    _saved(tmp_path, getattr(transformers, kind)(config))
    result = run_minibert("verify", "--model", str(tmp_path), "--text", "w1 w2 w3", "--dtype", dtype)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "pooler" not in result.stdout
    if dtype == "float32":
        assert ("masked-LM logits" in result.stdout) == (kind == "BertForMaskedLM")
