"""It learns as the reference does: with dropout 0, the dev accuracy of ``minibert finetune`` on
all-MiniLM-L6-v2 equals (±1 example) what a reference loop reaches from the same start and the
same order of examples.

The reference loop is transformers' BertForSequenceClassification with Google's step typed in by
hand (test_training_finetune_step.google_steps: mean cross-entropy on the pooled output, global-norm
clip 1.0, AdamWeightDecay without bias correction, warmup then linear decay), replaying the run's
``order.jsonl``; its batches are padded by transformers' tokenizer, not cut by minibert's Features.
The start: the pretrained encoder with the head Google's initialiser draws for the run's seed
(load_classifier with the run's seed, saved and loaded into transformers). Real text: which
language a Django admin message is in (scripts/language_examples.py), 3 languages.

Why ±1 example and not exact: the two compute the same function in a different order of fp32
sums; after 11 steps the weights differ by ~1e-6 relative, which can move a dev example lying on
the decision boundary. Marked slow: minutes of CPU (two fine-tunes of MiniLM).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from test_training_finetune_learns import make_data  # noqa: E402
from test_training_finetune_step import google_steps  # noqa: E402

from minibert.apps.cli import main  # noqa: E402
from minibert.training.tasks.head import load_classifier  # noqa: E402

LENGTH, BATCH, RATE = 32, 8, 1e-4


def read_csv(path: Path) -> tuple[list[str], list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [row["sentence"] for row in rows], [row["language"] for row in rows]


def start_folder(minilm_dir: Path, labels: list[str], seed: int, folder: Path) -> Path:
    """The run's start as a hub folder transformers loads: the encoder and the seeded new head."""
    torch.manual_seed(seed)  # the loop's seeding before a network is built (training/run/loop.py)
    load_classifier(str(minilm_dir), labels, "single_label_classification", False, seed).save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).write_bytes((minilm_dir / name).read_bytes())
    return folder


@torch.no_grad()
def predictions(model, tokenizer, texts: list[str]) -> torch.Tensor:
    model.eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=LENGTH, return_tensors="pt")
    return model(**batch).logits.argmax(-1)


@pytest.mark.slow
def test_dev_accuracy_equals_the_reference_loops(tmp_path, minilm_dir):
    data = make_data(tmp_path / "data", 40, "fr,de,nl")
    run = tmp_path / "run"
    argv = ["finetune", "--model", str(minilm_dir), "--train", str(data / "train.csv"), "--dev", str(data / "dev.csv"),
            "--text-column", "sentence", "--label-column", "language", "--epochs", "1", "--dropout", "0",
            "--batch-size", str(BATCH), "--learning-rate", str(RATE), "--max-seq-length", str(LENGTH),
            "--output", str(run)]  # fmt: skip
    assert main(argv) == 0
    note = json.loads((run / "finetune.json").read_text())
    ours = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["dev_accuracy"]

    labels, texts = note["labels"], read_csv(data / "train.csv")
    order = [json.loads(line)["examples"] for line in (run / "order.jsonl").read_text().splitlines()]
    assert len(order) == note["steps"] >= 10

    def loss_of(model, tokenizer, rows):  # run_classifier.create_model, truncated as Google's features
        batch = tokenizer([texts[0][row] for row in rows], padding=True, truncation=True, max_length=LENGTH,
                          return_tensors="pt")  # fmt: skip
        targets = torch.tensor([labels.index(texts[1][row]) for row in rows])
        log_probs = torch.log_softmax(model(**batch).logits, dim=-1)
        return -(torch.nn.functional.one_hot(targets, len(labels)) * log_probs).sum(-1).mean()

    start = start_folder(minilm_dir, labels, note["options"]["seed"], tmp_path / "start")
    weights = google_steps(start, order, RATE, note["warmup_steps"],
                           transformers.BertForSequenceClassification, loss_of)  # fmt: skip
    reference = transformers.BertForSequenceClassification.from_pretrained(start)
    reference.load_state_dict(weights)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(start)
    dev_texts, dev_labels = read_csv(data / "dev.csv")
    theirs = predictions(reference, tokenizer, dev_texts)
    gold = torch.tensor([labels.index(label) for label in dev_labels])
    reference_accuracy = (theirs == gold).float().mean().item()
    run_model = transformers.BertForSequenceClassification.from_pretrained(run)
    differing = int((predictions(run_model, tokenizer, dev_texts) != theirs).sum())
    print(f"dev accuracy: minibert {ours:.4f}, reference loop {reference_accuracy:.4f} ({len(gold)} examples); "
          f"{differing} predictions differ")  # fmt: skip
    assert abs(ours - reference_accuracy) * len(gold) <= 1 + 1e-9, (ours, reference_accuracy)
    assert differing <= 1
