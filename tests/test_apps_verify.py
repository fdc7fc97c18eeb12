"""``minibert verify``: every layer of minibert's model against transformers' on the same
checkpoint, float32 on both sides whatever dtype the checkpoint was stored in (transformers 5
loads a stored dtype, bfloat16 for the bundled fortunes-mini, where minibert computes in float32:
compared as loaded, the two differed by 6e-2 and verify failed on minibert's own default model)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers import run_minibert

transformers = pytest.importorskip("transformers")
DATA = Path(__file__).parent / "data"


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
                                     intermediate_size=37, num_labels=2 if "Question" in kind else 3)  # fmt: skip
    _saved(tmp_path, getattr(transformers, kind)(config))
    result = run_minibert("verify", "--model", str(tmp_path), "--text", "w1 w2 w3", "--dtype", dtype)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "pooler" not in result.stdout
    if dtype == "float32":
        assert ("masked-LM logits" in result.stdout) == (kind == "BertForMaskedLM")


# Each class's rows past the encoder's, as transformers' class of that name computes them.
HEAD_ROWS = {
    "BertModel": [],
    "BertForPreTraining": ["masked-LM logits", "next-sentence logits"],
    "BertForMaskedLM": ["masked-LM logits"],
    "BertForNextSentencePrediction": ["next-sentence logits"],
    "BertForSequenceClassification": ["classifier logits"],
    "BertForTokenClassification": ["token-classifier logits"],
    "BertForQuestionAnswering": ["answer-start logits", "answer-end logits"],
    "BertForMultipleChoice": ["multiple-choice logits"],
}
POOLED = {"BertModel", "BertForPreTraining", "BertForNextSentencePrediction", "BertForSequenceClassification",
          "BertForMultipleChoice"}  # the classes transformers builds with a pooler  # fmt: skip


def _rows(stdout: str) -> list[str]:
    """The table's output names (between its header and the summary line)."""
    return [line.rsplit(None, 2)[0].strip() for line in stdout.splitlines()[1:-1]]


@pytest.mark.parametrize("kind,labels", [*((kind, 2 if "Question" in kind else 3) for kind in HEAD_ROWS),
                                         ("BertForSequenceClassification", 1)])  # (a QA head: a start and an end)
def test_verify_compares_the_logits_of_every_head_with_transformers_class(tmp_path, kind, labels):
    """The checkpoint as it is: its encoder, its pooler when it has one, and its head's logits, each
    against transformers' class of the same name. Before, a next-sentence checkpoint (no masked-LM
    head) was refused with advice the command cannot follow, and a classifier, token classifier,
    QA or multiple-choice checkpoint was compared as a bare BertModel, its head (what classify,
    tag, answer and rerank return) never. The texts are one question's choices for the last."""
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37, num_labels=labels)  # fmt: skip
    _saved(tmp_path, getattr(transformers, kind)(config))
    result = run_minibert("verify", "--model", str(tmp_path), "--text", "w1 w2 w3", "--text", "w4 w5",
                          "--text", "w6")  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout
    encoder = ["embeddings", "layer 1", "layer 2", *(["pooler_output"] if kind in POOLED else []), "attention 1",
               "attention 2"]  # fmt: skip
    assert _rows(result.stdout) == encoder + HEAD_ROWS[kind], result.stdout
    assert "has no place for" not in result.stderr  # every tensor of the checkpoint is compared


def test_verify_compares_the_pooler_of_a_masked_lm_checkpoint_that_has_one(tmp_path):
    """BertForMaskedLM is built without a pooler: a masked-LM checkpoint saved with one (the
    pre-training heads less the next-sentence head) had its pooler dropped from the comparison."""
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37)  # fmt: skip
    _saved(tmp_path, transformers.BertForPreTraining(config))
    state = {name: tensor for name, tensor in load_file(tmp_path / "model.safetensors").items()
             if "seq_relationship" not in name}  # fmt: skip
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    result = run_minibert("verify", "--model", str(tmp_path), "--text", "w1 w2 w3")
    assert result.returncode == 0, result.stderr + result.stdout
    assert _rows(result.stdout) == ["embeddings", "layer 1", "layer 2", "pooler_output", "attention 1",
                                    "attention 2", "masked-LM logits"]  # fmt: skip


def _tf_classifier(folder, outputs: int):
    """Google's run_classifier.py output: the tests' TensorFlow checkpoint's encoder and pooler with
    a classifier of ``outputs`` (output_weights, output_bias) at the top level, bert_config.json
    naming no labels and no architectures."""
    import shutil

    from tf_bundles import write_checkpoint

    from minibert.loading.tf_checkpoint import read_tf_checkpoint

    source = DATA / "uncased_L-2_H-32_A-2"
    tensors = {name: tensor for name, tensor in read_tf_checkpoint(source / "bert_model.ckpt").items()
               if name.startswith("bert/")}  # fmt: skip
    torch.manual_seed(outputs)
    tensors.update(output_weights=torch.randn(outputs, 32) * 0.2, output_bias=torch.randn(outputs) * 0.2)
    folder.mkdir()
    write_checkpoint(folder / "bert_model.ckpt", tensors)
    for name in ("bert_config.json", "vocab.txt"):
        shutil.copy(source / name, folder / name)
    return folder


@pytest.mark.parametrize("heads", ["pre-training", "classifier"])
def test_verify_reads_a_tensorflow_checkpoint_converted_for_the_reference(tmp_path, heads):
    """transformers 5 cannot read TensorFlow checkpoints, which minibert loads: verify failed with
    transformers' raw "no file named model.safetensors" as its own error. The reference now reads
    the checkpoint as `minibert convert` writes it, in a temporary folder, and says so."""
    folder = DATA / "uncased_L-2_H-32_A-2" if heads == "pre-training" else _tf_classifier(tmp_path / "tf", 3)
    result = run_minibert("verify", "--model", str(folder))
    assert result.returncode == 0, result.stderr + result.stdout
    assert f"minibert: {folder} is a TensorFlow checkpoint, which transformers 5 cannot read: the reference reads " \
           "it converted as `minibert convert` converts it (in a temporary folder)" in result.stderr  # fmt: skip
    head = ["masked-LM logits", "next-sentence logits"] if heads == "pre-training" else ["classifier logits"]
    assert _rows(result.stdout)[-len(head):] == head, result.stdout
    assert "pooler_output" in _rows(result.stdout)


def test_a_failure_of_transformers_is_said_as_the_references(tmp_path):
    """A config transformers cannot run on the sample batch (chunk_size_feed_forward 4: its chunks
    must divide the batch's length) printed transformers' words as if minibert had failed."""
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37, chunk_size_feed_forward=4)  # fmt: skip
    _saved(tmp_path, transformers.BertModel(config))
    result = run_minibert("verify", "--model", str(tmp_path), "--text", "w1 w2 w3")  # 5 tokens
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("minibert: error: transformers (the reference) failed on the sample batch: "), lines
    assert len([line for line in lines if "error" in line]) == 1


def test_a_nan_fails_verify_and_the_summary_says_where(tmp_path):
    """max() skips a NaN that is not first and NaN > tolerance is False: an output marked NO passed,
    exit 0, under "max |Δ| ... 0.000e+00". A NaN weight in the last layer makes it and the pooler NaN."""
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37)  # fmt: skip
    _saved(tmp_path, transformers.BertModel(config))
    state = load_file(tmp_path / "model.safetensors")
    state["encoder.layer.1.output.dense.weight"][0, 0] = float("nan")
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    result = run_minibert("verify", "--model", str(tmp_path), "--text", "w1 w2 w3")
    assert result.returncode == 1, result.stdout
    assert result.stdout.splitlines()[-1] == "max |Δ| over 6 outputs: NaN in layer 2, pooler_output"
    assert result.stderr.strip().splitlines()[-1] == (f"minibert: error: {tmp_path}: NaN in layer 2 and 1 more: "
                                                      "minibert's or transformers' output there is not a number")


def test_a_nan_on_one_side_fails_wherever_it_is_in_the_table():
    from minibert.apps.verify import verdict

    nan = float("nan")
    for rows in ([("a", 0.0), ("b", nan)], [("a", nan), ("b", 0.0)], [("a", nan)]):
        summary, failure = verdict(rows, 1e-5)
        assert failure is not None and failure.startswith("NaN in ") and "NaN in" in summary, rows
    assert verdict([("a", 0.0), ("b", 2e-6)], 1e-5) == ("max |Δ| over 2 outputs: 2.000e-06", None)
