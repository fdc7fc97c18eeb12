"""A run folder of Google's code, compared with Google's TensorFlow: the checkpoint a prefix names, and a
bert_config.json that omits fields.

Google's run_classifier.create_model (bert-tensorflow 1.0.4, in the TensorFlow venv:
tests/tf_google_finetuned_runner.py) is trained into one folder twice, 3 and then 6 steps of
``optimization.create_optimizer``, saved with ``tf.train.Saver``: ``model.ckpt-3`` and ``model.ckpt-6``,
the ``checkpoint`` file naming model.ckpt-6. Its config omits ``type_vocab_size``: Google's
``BertConfig.from_dict`` then keeps its default, 16 (transformers' is 2), and the segment ids of the
inputs reach 15. TensorFlow restores each checkpoint and computes the logits: the reference.

The tolerance is test_weights_google_finetuned.py's (2e-6: fp32 arithmetic of two implementations,
logits of order 1, ~10 chained steps; its docstring says why); the two checkpoints' logits differ by
far more, and 2 rows of token types in place of 16 do not load at all.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from test_weights_google_finetuned import GOOGLE_DIR, INITIALIZER_RANGE, TOLERANCE, _cached_run, _features

from helpers import assert_close
from minibert import BertForSequenceClassification

EVAL_TEXTS = ["the bank robber was thirsty", "i love paris", ("money in the bank", "the river was wet")]
TRAIN_TEXTS = [("i love paris", "the bank"), ("water in the river", "money"), "the robber drank water"]


def _with_high_segments(features: dict) -> dict:
    """The features with the last real token of each row in segment 15: Google's 16 token types used."""
    segments = [list(row) for row in features["segment_ids"]]
    for row, mask in zip(segments, features["input_mask"]):
        row[sum(mask) - 1] = 15
    return {**features, "segment_ids": segments}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """(the folder, {steps: TensorFlow's logits}): model.ckpt-3 and model.ckpt-6 of Google's code."""
    directory = tmp_path_factory.mktemp("google_run") / "mnli_output"
    directory.mkdir()
    config = json.loads((GOOGLE_DIR / "bert_config.json").read_text())  # hidden_act "gelu": Google's tanh form
    del config["type_vocab_size"]
    config["initializer_range"] = INITIALIZER_RANGE
    train = {**_with_high_segments(_features(TRAIN_TEXTS)), "labels": [0, 1, 2]}
    logits = {}
    for steps in (3, 6):
        request = {"script": "run_classifier", "config": config, "num_labels": 3, "output_dir": str(directory),
                   "seed": 0, "learning_rate": 1e-2, "steps": steps, "train": train,
                   "eval": _with_high_segments(_features(EVAL_TEXTS))}  # fmt: skip
        result = _cached_run(request)
        assert ["bert/embeddings/token_type_embeddings", [16, 32]] in result["variables"]
        logits[steps] = torch.tensor(result["logits"])
    (directory / "bert_config.json").write_text(json.dumps({**config, "hidden_act": "gelu_new"}))
    shutil.copyfile(GOOGLE_DIR / "vocab.txt", directory / "vocab.txt")
    return directory, logits


def _logits(model_name) -> torch.Tensor:
    features = _with_high_segments(_features(EVAL_TEXTS))
    model = BertForSequenceClassification.from_pretrained(model_name)
    with torch.no_grad():
        return model(input_ids=torch.tensor(features["input_ids"]), attention_mask=torch.tensor(features["input_mask"]),
                     token_type_ids=torch.tensor(features["segment_ids"])).logits  # fmt: skip


def test_a_bert_config_json_without_type_vocab_size_is_read_as_google_reads_it(run_folder):
    """No type_vocab_size: Google's 16, not transformers' 2 (which refused the checkpoint's (16, 32)
    table, saying the config "belongs to another model")."""
    directory, logits = run_folder
    assert_close(_logits(directory), logits[6], "the folder (model.ckpt-6) vs TensorFlow", atol=TOLERANCE)


def test_a_checkpoint_prefix_gives_that_checkpoints_numbers(run_folder):
    """DIR/model.ckpt-3 (as --init_checkpoint names it) is model.ckpt-3, though the 'checkpoint' file
    names model.ckpt-6: it was refused with "pass its folder", and the folder gave model.ckpt-6's numbers."""
    directory, logits = run_folder
    assert (logits[3] - logits[6]).abs().max() > 100 * TOLERANCE  # two checkpoints, told apart
    assert_close(_logits(directory / "model.ckpt-3"), logits[3], "model.ckpt-3 vs TensorFlow", atol=TOLERANCE)
