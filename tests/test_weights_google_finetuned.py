"""Google's fine-tuned TensorFlow checkpoints: what run_classifier.py and run_squad.py write loads into
the right head, with the user's labels, and converts to a hub folder transformers loads.

The checkpoints are made by Google's own code in the TensorFlow venv (tests/tf_google_finetuned_runner.py):
``run_classifier.create_model`` / ``run_squad.create_model`` of bert-tensorflow 1.0.4 on the tiny
config of tests/data/uncased_L-2_H-32_A-2, three steps of ``optimization.create_optimizer`` (so the
checkpoint carries the ``adam_m``/``adam_v`` slots and ``global_step`` as the Estimator saves them),
``tf.train.Saver`` → ``model.ckpt-3``. TensorFlow then restores it in an is_training=False graph and
computes the logits: the reference every number here is compared with.

Google's ``modeling.gelu`` is the tanh approximation, so the checkpoints' bert_config.json says
``gelu_new`` (transformers' and minibert's name for that function): a config saying ``gelu`` means
the exact erf GELU in transformers and minibert (docs/checkpoints.md).

The tolerance, 2e-6: every logit is a fp32 computation of ~10 chained steps (2 layers of matmuls
over ≤ 37 terms, softmax, LayerNorm, GELU, tanh pooler) on values of order 1–10; each step rounds
within a few ulps (fp32's unit roundoff 6e-8) and TensorFlow and torch sum in different orders, so
the two implementations differ by ~1e-7 on logits of order 1 (measured: ≤ 2.4e-7). The weights are
drawn with initializer_range 0.2 (BERT's 0.02 keeps GELU's inputs so small that erf and tanh agree
within 2e-6): then the erf GELU in place of the tanh one moves the logits by 1.5e-5 (classifier) and
1.5e-4 (SQuAD), a wrong name or a kernel not transposed by far more.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

import tf_reference
from helpers import assert_close, run_minibert
from minibert import (
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertModel,
    BertTokenizer,
    CheckpointError,
    Embedder,
)

DATA = Path(__file__).parent / "data"
GOOGLE_DIR = DATA / "uncased_L-2_H-32_A-2"
RUNNER = Path(__file__).parent / "tf_google_finetuned_runner.py"
LABELS = ["contradiction", "entailment", "neutral"]  # run_classifier.MnliProcessor.get_labels(), in its order
CACHE = Path.home() / ".cache" / "minibert" / "tf-google-finetuned"  # TensorFlow's results (_cached_run)
INITIALIZER_RANGE = 0.2  # weights 10x BERT's 0.02: GELU's inputs reach |x| ~ 2, where erf and tanh differ
TOLERANCE = 2e-6  # fp32 arithmetic of two implementations (the module docstring says why)
EVAL_TEXTS = ["the bank robber was thirsty", "i love paris", ("money in the bank", "the river was wet")]
TRAIN_TEXTS = [("i love paris", "the bank"), ("water in the river", "money"), "the robber drank water",
               ("paris", "the bank robber was thirsty and drank water")]  # fmt: skip


def _features(texts) -> dict:
    """input_ids / input_mask / segment_ids as Google's features hold them (padded to 16)."""
    tokenizer = BertTokenizer.from_pretrained(GOOGLE_DIR)
    rows = [tokenizer(*text) if isinstance(text, tuple) else tokenizer(text) for text in texts]
    features = {"input_ids": [], "input_mask": [], "segment_ids": []}
    for row in rows:
        padding = [0] * (16 - len(row["input_ids"]))
        features["input_ids"].append(row["input_ids"] + padding)
        features["input_mask"].append(row["attention_mask"] + padding)
        features["segment_ids"].append(row["token_type_ids"] + padding)
    return features


def _google_run(directory: Path, script: str) -> dict:
    directory.mkdir()
    config = json.loads((GOOGLE_DIR / "bert_config.json").read_text())  # hidden_act "gelu": Google's tanh form
    config["initializer_range"] = INITIALIZER_RANGE
    train = {**_features(TRAIN_TEXTS), "labels": [0, 1, 2, 1], "start_positions": [1, 2, 3, 4],
             "end_positions": [2, 5, 3, 9]}  # fmt: skip
    request = {"script": script, "config": config, "num_labels": len(LABELS), "output_dir": str(directory),
               "seed": 0, "learning_rate": 1e-2, "steps": 3, "train": train, "eval": _features(EVAL_TEXTS)}  # fmt: skip
    result = _cached_run(request)
    (directory / "bert_config.json").write_text(json.dumps({**config, "hidden_act": "gelu_new"}))
    shutil.copyfile(GOOGLE_DIR / "vocab.txt", directory / "vocab.txt")
    return result


def _cached_run(request: dict) -> dict:
    """run_reference, kept between sessions: TensorFlow's checkpoint and answer are a pure function of
    the request, the runner's source and the venv (~40 s of TensorFlow's start on 2 busy cores, otherwise).
    Under CI, always run afresh."""
    output = Path(request["output_dir"])
    key = json.dumps({**request, "output_dir": ""}, sort_keys=True) + RUNNER.read_text() + str(tf_reference.venv_dir())
    cache = CACHE / hashlib.sha256(key.encode()).hexdigest()[:16]
    if not (cache / "result.json").is_file() or os.environ.get("CI", "").lower() == "true":
        result = tf_reference.run_reference(request, RUNNER)
        CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=CACHE))
        shutil.copytree(output, staging / "checkpoint_dir")
        (staging / "checkpoint_dir" / "result.json").write_text(json.dumps(result))
        shutil.rmtree(cache, ignore_errors=True)
        os.replace(staging / "checkpoint_dir", cache)
        shutil.rmtree(staging)
        return result
    result = json.loads((cache / "result.json").read_text())
    for path in cache.iterdir():
        if path.name != "result.json":
            shutil.copyfile(path, output / path.name)
    return result


@pytest.fixture(scope="module")
def google(tmp_path_factory):
    """{"classifier": (directory, TF's result), "squad": ...}: both runs at once (each ~25 s alone, mostly
    TensorFlow's start; ~85 s for both on 2 busy cores), or from the cache of an earlier session.
    Without the TensorFlow venv the tests skip, and fail under CI (tf_reference.py)."""
    root = tmp_path_factory.mktemp("google_finetuned")
    jobs = {"classifier": ("mnli_output", "run_classifier"), "squad": ("squad_output", "run_squad")}
    with ThreadPoolExecutor(2) as pool:
        futures = {key: pool.submit(_google_run, root / name, script) for key, (name, script) in jobs.items()}
        return {key: (root / jobs[key][0], future.result()) for key, future in futures.items()}


def _inputs() -> dict:
    features = _features(EVAL_TEXTS)
    return {"input_ids": torch.tensor(features["input_ids"]), "attention_mask": torch.tensor(features["input_mask"]),
            "token_type_ids": torch.tensor(features["segment_ids"])}  # fmt: skip


def test_the_checkpoints_carry_googles_names(google):
    """As run_classifier.py's and run_squad.py's Estimator save them: the heads' own names beside the
    encoder, and the optimizer's slots and step."""
    for key, head in (("classifier", ["output_bias", "output_weights"]),
                      ("squad", ["cls/squad/output_bias", "cls/squad/output_weights"])):  # fmt: skip
        directory, result = google[key]
        names = {name: shape for name, shape in result["variables"]}
        assert sorted(name for name in names if not name.startswith("bert/") and "/adam_" not in name) == sorted(
            ["global_step", *head]
        )
        assert all(f"{name}/adam_m" in names and f"{name}/adam_v" in names for name in head)
        assert names[head[1]] == [len(LABELS) if key == "classifier" else 2, 32]
        assert sorted(path.name for path in directory.glob("model.ckpt-3.*")) == [
            "model.ckpt-3.data-00000-of-00001",
            "model.ckpt-3.index",
            "model.ckpt-3.meta",
        ]
        assert (directory / "checkpoint").is_file()


def test_a_run_classifier_checkpoint_classifies_as_tensorflow(google, caplog):
    directory, result = google["classifier"]
    with caplog.at_level(logging.INFO, logger="minibert"):
        unnamed = BertForSequenceClassification.from_pretrained(directory)
    assert unnamed.labels.id2label == {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, "the count is output_weights'"
    assert "output_weights (3, 32) has 3 outputs" in caplog.text
    assert "adam" not in caplog.text and "global_step" not in caplog.text  # the optimizer's tensors: left out
    model = BertForSequenceClassification.from_pretrained(directory, id2label=dict(enumerate(LABELS)))
    assert model.config.extra["id2label"] == dict(enumerate(LABELS)) and model.labels.label2id["neutral"] == 2
    with torch.no_grad():
        logits = model(**_inputs()).logits
    worst = assert_close(logits, result["logits"], "classifier logits vs run_classifier.create_model", TOLERANCE)
    print(f"\nrun_classifier logits {tuple(logits.shape)}: max |Δ| vs TensorFlow = {worst:.2g}")
    assert_close(model.classifier.weight, result["head"]["output_weights"], "classifier.weight", atol=0.0)


def test_a_run_squad_checkpoint_answers_as_tensorflow(google):
    directory, result = google["squad"]
    model = BertForQuestionAnswering.from_pretrained(directory)
    with torch.no_grad():
        output = model(**_inputs())
    for name in ("start_logits", "end_logits"):
        worst = assert_close(getattr(output, name), result[name], f"{name} vs run_squad.create_model", TOLERANCE)
        print(f"\nrun_squad {name}: max |Δ| vs TensorFlow = {worst:.2g}")


def test_labels_that_do_not_fit_the_head_are_refused_naming_both(google):
    directory, _ = google["classifier"]
    with pytest.raises(CheckpointError) as error:
        BertForSequenceClassification.from_pretrained(directory, id2label={0: "no", 1: "yes"})
    assert "output_weights (3, 32) has 3 outputs" in str(error.value)
    assert "the labels given are 2 (no, yes)" in str(error.value)


def test_the_encoder_alone_names_the_head_it_ignores(google, caplog):
    directory, _ = google["classifier"]
    with caplog.at_level(logging.INFO, logger="minibert"):
        BertModel.from_pretrained(directory)
    assert "BertModel has no place for 2 tensors of the checkpoint's other heads (ignored): output_bias, " \
           "output_weights" in caplog.text  # fmt: skip
    assert Embedder.from_pretrained(directory).embed(["i love paris"]).shape == (1, 32)


@pytest.mark.parametrize(("key", "cls", "message"), [
    ("classifier", BertForQuestionAnswering,
     "has no tensors for run_squad.py's question-answering head (cls/squad/output_*), which BertForQuestionAnswering "
     "needs; it has run_classifier.py's classifier (output_weights, output_bias); load it with "
     "BertForSequenceClassification"),
    ("squad", BertForSequenceClassification,
     "has no tensors for run_classifier.py's classifier (output_weights, output_bias), which "
     "BertForSequenceClassification needs; it has run_squad.py's question-answering head (cls/squad/output_*); "
     "load it with BertForQuestionAnswering"),
    ("classifier", BertForMaskedLM, "has no tensors for the masked-LM head (cls/predictions/*), which BertForMaskedLM "
     "needs; it has run_classifier.py's classifier (output_weights, output_bias); load it with "
     "BertForSequenceClassification"),
])  # fmt: skip
def test_a_class_that_needs_another_head_names_the_head_there_is(google, key, cls, message):
    directory, _ = google[key]
    with pytest.raises(CheckpointError) as error:
        cls.from_pretrained(directory)
    assert message in str(error.value)


def test_convert_writes_a_classifier_transformers_loads_with_tensorflows_logits(google, tmp_path):
    transformers = pytest.importorskip("transformers")
    directory, result = google["classifier"]
    out = tmp_path / "mnli_hub"
    done = run_minibert("convert", str(directory), str(out), "--labels", ",".join(LABELS))
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {"0": "contradiction", "1": "entailment", "2": "neutral"}
    assert config["label2id"] == {"contradiction": 0, "entailment": 1, "neutral": 2}
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(str(out)).eval()
    assert type(theirs).__name__ == "BertForSequenceClassification" and theirs.config.id2label[2] == "neutral"
    with torch.no_grad():
        logits = theirs(**_inputs()).logits
    worst = assert_close(logits, result["logits"], "transformers on the converted folder vs TensorFlow", TOLERANCE)
    print(f"\nconverted classifier in transformers: max |Δ| vs TensorFlow = {worst:.2g}")

    classified = run_minibert("classify", "--model", str(out), "--top-k", "all", EVAL_TEXTS[0])
    assert classified.returncode == 0, classified.stderr
    scores = {row["label"]: row["score"] for row in json.loads(classified.stdout)["labels"]}
    expected = torch.tensor(result["logits"][0], dtype=torch.float64).softmax(-1)
    assert_close([scores[label] for label in LABELS], expected, "classify's scores vs softmax(TF logits)", TOLERANCE)


def test_classify_names_the_labels_of_a_google_checkpoint(google):
    directory, result = google["classifier"]
    done = run_minibert("classify", "--model", str(directory), "--labels", ",".join(LABELS), EVAL_TEXTS[1])
    assert done.returncode == 0, done.stderr
    best = max(range(3), key=lambda index: result["logits"][1][index])
    assert json.loads(done.stdout)["labels"][0]["label"] == LABELS[best]
    refused = run_minibert("classify", "--model", str(directory), "--labels", "no,yes", EVAL_TEXTS[1])
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "has 3 outputs, one per label; the labels given are 2 (no, yes)" in refused.stderr


def test_convert_writes_a_question_answering_folder_transformers_loads(google, tmp_path):
    transformers = pytest.importorskip("transformers")
    directory, result = google["squad"]
    out = tmp_path / "squad_hub"
    assert run_minibert("convert", str(directory), str(out)).returncode == 0
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertForQuestionAnswering"]
    theirs = transformers.AutoModelForQuestionAnswering.from_pretrained(str(out)).eval()
    with torch.no_grad():
        output = theirs(**_inputs())
    for name in ("start_logits", "end_logits"):
        assert_close(getattr(output, name), result[name], f"converted {name} in transformers vs TensorFlow", TOLERANCE)
    refused = run_minibert("convert", str(directory), str(tmp_path / "other"), "--labels", "a,b")
    assert refused.returncode == 1 and "has no classifier" in refused.stderr and "BertForQuestionAnswering" in \
        refused.stderr  # fmt: skip


def test_finetune_continues_from_run_classifiers_head(google, tmp_path):
    """``minibert finetune --model`` a run_classifier.py checkpoint with ``--labels``: the run starts from
    Google's output_weights / output_bias, not a fresh head. One step at a learning rate of 1e-9 moves
    a weight by at most ~1e-9 (AdamW's step is ≤ lr·(1 + weight decay·|w|)); a fresh head (truncated
    normal 0.02) would be ~1e-2 away."""
    from safetensors.torch import load_file

    directory, result = google["classifier"]
    train = tmp_path / "train.csv"
    train.write_text("text,label\ni love paris,entailment\nthe bank,neutral\nwater,contradiction\nmoney,neutral\n")
    run = tmp_path / "run"
    done = run_minibert("finetune", "--model", str(directory), "--train", str(train), "--output", str(run),
                        "--labels", ",".join(LABELS), "--batch-size", "4", "--epochs", "1", "--learning-rate", "1e-9",
                        "--max-seq-length", "16", "--dropout", "0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"continuing --model's classifier (3 labels: {', '.join(LABELS)})" in done.stderr
    assert json.loads((run / "finetune.json").read_text())["head"] == "continued"
    assert json.loads((run / "config.json").read_text())["id2label"] == {str(i): label for i, label in
                                                                         enumerate(LABELS)}  # fmt: skip
    tensors = load_file(run / "model.safetensors")
    assert_close(tensors["classifier.weight"], result["head"]["output_weights"], "the head after one step", 1e-7)
    assert_close(tensors["classifier.bias"], result["head"]["output_bias"], "the bias after one step", 1e-7)
    refused = run_minibert("finetune", "--model", str(directory), "--train", str(train), "--output",
                           str(tmp_path / "other"), "--labels", "entailment,neutral", "--max-seq-length",
                           "16")  # fmt: skip
    assert refused.returncode == 1 and "has a classifier with 3 outputs; the task needs 2" in refused.stderr
