"""Fine-tuning's step against Google's arithmetic, written out here on transformers' model.

The run (``minibert finetune`` as a function) and the reference start from the same weights — a
checkpoint saved by transformers' ``BertForSequenceClassification`` with its head, which the run
continues — and replay the same batches (the run's ``order.jsonl``). The reference is Google's
``run_classifier.create_model`` loss (mean cross-entropy on the pooled output) and
``optimization.py`` (global-norm clip 1.0, AdamWeightDecayOptimizer without bias correction, decay
0.01 except LayerNorm and bias, warmup then linear decay), typed in from Google's source below —
not minibert's AdamWeightDecay. Dropout is 0 so both compute the same function.

Tolerance: after 4 updates every weight tensor within 1e-4 of its largest |value|. The two differ
only by the order of float32 sums in the forward and backward passes (relative ~1e-6 per gradient);
Adam's m / √v rescales a gradient by its own size, so the update differences stay ~1e-6 · rate.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from minibert.training.finetune import FinetuneOptions, finetune  # noqa: E402

TINY = Path(__file__).parent / "data" / "tiny_hub"
TEXTS = [("the machine drank water", "pos"), ("a bank of the river", "neg"), ("i love paris", "pos"),
         ("money in the vault", "neg"), ("he was thirsty", "pos"), ("she is an engineer", "neg"),
         ("they drank all the water in paris", "pos"), ("the river bank had money", "neg")]  # fmt: skip
LABELS = ["neg", "pos"]


def start_checkpoint(directory: Path) -> Path:
    """transformers' BertForSequenceClassification on the tiny BERT, its head drawn by transformers."""
    torch.manual_seed(7)
    model = transformers.BertForSequenceClassification.from_pretrained(
        TINY, num_labels=2, id2label=dict(enumerate(LABELS)), label2id={k: i for i, k in enumerate(LABELS)},
        attn_implementation="eager")  # fmt: skip
    model.save_pretrained(directory)
    for name in ("vocab.txt", "tokenizer_config.json"):
        (directory / name).write_bytes((TINY / name).read_bytes())
    return directory


def google_rate(peak: float, done: int, warmup: int, steps: int) -> float:
    """optimization.create_optimizer: polynomial_decay(power 1.0, end 0), then warmup by global_step."""
    decayed = peak * (1.0 - min(done, steps) / steps)
    return peak * done / warmup if done < warmup else decayed


def google_steps(start: Path, order: list[list[int]], peak: float, warmup: int) -> dict[str, torch.Tensor]:
    """Google's fine-tuning steps, by hand, on transformers' model."""
    model = transformers.BertForSequenceClassification.from_pretrained(
        start, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout=0.0,
        attn_implementation="eager").train()  # fmt: skip
    tokenizer = transformers.BertTokenizer.from_pretrained(start)
    moments = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in model.named_parameters()}
    exclude = ["LayerNorm", "layer_norm", "bias"]  # run_classifier's exclude_from_weight_decay
    for done, rows in enumerate(order):
        batch = tokenizer([TEXTS[row][0] for row in rows], padding=True, return_tensors="pt")
        labels = torch.tensor([LABELS.index(TEXTS[row][1]) for row in rows])
        logits = model(**batch).logits
        log_probs = torch.log_softmax(logits, dim=-1)  # per_example_loss = -Σ one_hot · log_probs
        loss = -(torch.nn.functional.one_hot(labels, 2) * log_probs).sum(-1).mean()
        model.zero_grad()
        loss.backward()
        grads = {name: p.grad for name, p in model.named_parameters()}
        global_norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads.values())).float()
        clip = 1.0 / torch.maximum(global_norm, torch.tensor(1.0))  # tf.clip_by_global_norm(grads, 1.0)
        rate = google_rate(peak, done, warmup, len(order))
        with torch.no_grad():
            for name, param in model.named_parameters():
                grad = grads[name] * clip
                m, v = moments[name]
                next_m = 0.9 * m + 0.1 * grad
                next_v = 0.999 * v + 0.001 * grad * grad
                update = next_m / (torch.sqrt(next_v) + 1e-6)
                if not any(re.search(word, name) for word in exclude):
                    update = update + 0.01 * param
                param.sub_(rate * update)
                moments[name] = (next_m, next_v)
    return {name: p.detach() for name, p in model.named_parameters()}


def test_four_steps_equal_googles_arithmetic(tmp_path):
    start = start_checkpoint(tmp_path / "start")
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in TEXTS), encoding="utf-8")
    peak = 1e-3
    options = FinetuneOptions(model=str(start), train=str(train), output=str(tmp_path / "run"), epochs=2,
                              batch_size=4, learning_rate=peak, warmup_proportion=0.5, dropout=0.0, seed=3,
                              max_seq_length=16)  # fmt: skip
    run = finetune(options)
    order = [json.loads(line)["examples"] for line in (run / "order.jsonl").read_text().splitlines()]
    assert len(order) == 4 and sorted(order[0] + order[1]) == list(range(8)), "epoch 1 sees each example once"
    rates = [json.loads(line)["learning_rate"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rates == [google_rate(peak, done, 2, 4) for done in range(4)] == [0.0, 5e-4, 5e-4, 2.5e-4]

    expected = google_steps(start, order, peak, warmup=2)
    ours = transformers.BertForSequenceClassification.from_pretrained(run, attn_implementation="eager")
    worst = 0.0
    for name, weight in ours.named_parameters():
        reference = expected[name]
        scale = float(reference.abs().max())
        difference = float((weight.detach() - reference).abs().max())
        worst = max(worst, difference / scale)
        assert difference <= 1e-4 * scale, f"{name}: max |Δ| {difference:.3g} (largest |w| {scale:.3g})"
    start_head = transformers.BertForSequenceClassification.from_pretrained(start).classifier.weight
    moved = float((ours.classifier.weight - start_head).abs().max().detach())
    assert moved > 1e-4, "the head did not train: the comparison would prove nothing"
    print(f"max |Δ| / max |w| over the tensors: {worst:.2e}")
