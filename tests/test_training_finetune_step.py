"""Fine-tuning's step against Google's arithmetic, written out here on transformers' models
(classify, regress, multilabel, tag).

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

from minibert.training import FinetuneOptions, finetune  # noqa: E402
from tiny_hub import TINY  # noqa: E402

TEXTS = [("the machine drank water", "pos"), ("a bank of the river", "neg"), ("i love paris", "pos"),
         ("money in the vault", "neg"), ("he was thirsty", "pos"), ("she is an engineer", "neg"),
         ("they drank all the water in paris", "pos"), ("the river bank had money", "neg")]  # fmt: skip
LABELS = ["neg", "pos"]
SCORES = [0.5, 3.0, 1.5, 4.0, 2.0, 2.5, 0.0, 5.0]
TAGS = ["B-PLACE", "B-THING", "O"]
TOPICS = ["drink", "money", "place"]
MULTI = ["drink", "money|place", "place", "money", "drink", "", "drink|place", "money|place"]


def tag_of(word: str) -> str:
    return {"paris": "B-PLACE", "river": "B-PLACE", "bank": "B-PLACE", "machine": "B-THING", "water": "B-THING",
            "money": "B-THING", "vault": "B-THING"}.get(word, "O")  # fmt: skip




def start_checkpoint(directory: Path, task: str) -> Path:
    """transformers' model of the task on the tiny BERT, its head drawn by transformers."""
    torch.manual_seed(7)
    cls, labels = getattr(transformers, TASKS[task][0]), TASKS[task][1]
    extra = {"regress": {"problem_type": "regression"}, "multilabel": {"problem_type": "multi_label_classification"}}
    extra = extra.get(task, {})
    model = cls.from_pretrained(TINY, num_labels=len(labels), id2label=dict(enumerate(labels)),
                                label2id={k: i for i, k in enumerate(labels)}, attn_implementation="eager",
                                **extra)  # fmt: skip
    model.save_pretrained(directory)
    for name in ("vocab.txt", "tokenizer_config.json"):
        (directory / name).write_bytes((TINY / name).read_bytes())
    return directory


def google_rate(peak: float, done: int, warmup: int, steps: int) -> float:
    """optimization.create_optimizer: polynomial_decay(power 1.0, end 0), then warmup by global_step."""
    decayed = peak * (1.0 - min(done, steps) / steps)
    return peak * done / warmup if done < warmup else decayed


def classification_loss(model, tokenizer, rows: list[int]) -> torch.Tensor:
    """run_classifier.create_model: mean over the batch of −Σ one_hot · log_softmax(logits)."""
    batch = tokenizer([TEXTS[row][0] for row in rows], padding=True, return_tensors="pt")
    labels = torch.tensor([LABELS.index(TEXTS[row][1]) for row in rows])
    log_probs = torch.log_softmax(model(**batch).logits, dim=-1)
    return -(torch.nn.functional.one_hot(labels, 2) * log_probs).sum(-1).mean()


def regression_loss(model, tokenizer, rows: list[int]) -> torch.Tensor:
    """Mean squared error of the one output against the score."""
    batch = tokenizer([TEXTS[row][0] for row in rows], padding=True, return_tensors="pt")
    scores = torch.tensor([SCORES[row] for row in rows])
    return ((model(**batch).logits[:, 0] - scores) ** 2).mean()


def multilabel_loss(model, tokenizer, rows: list[int]) -> torch.Tensor:
    """Mean over the batch and the labels of the sigmoid cross-entropy."""
    batch = tokenizer([TEXTS[row][0] for row in rows], padding=True, return_tensors="pt")
    targets = torch.tensor([[float(label in MULTI[row].split("|")) for label in TOPICS] for row in rows])
    return torch.nn.functional.binary_cross_entropy_with_logits(model(**batch).logits, targets)


def tagging_loss(model, tokenizer, rows: list[int]) -> torch.Tensor:
    """Mean cross-entropy over the pieces that carry a tag: the first piece of each word (run_ner)."""
    sentences = [TEXTS[row][0].split() for row in rows]
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    labels = torch.full(batch["input_ids"].shape, -100)
    for index in range(len(rows)):
        previous = None
        for position, word in enumerate(batch.word_ids(index)):
            if word is not None and word != previous:
                labels[index, position] = TAGS.index(tag_of(sentences[index][word]))
            previous = word
    logits = model(**batch).logits
    kept = labels != -100
    return torch.nn.functional.cross_entropy(logits[kept], labels[kept])


def google_steps(start: Path, order: list[list[int]], peak: float, warmup: int, cls, loss_of
                 ) -> dict[str, torch.Tensor]:  # fmt: skip
    """Google's fine-tuning steps, by hand, on transformers' model."""
    model = cls.from_pretrained(start, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                classifier_dropout=0.0, attn_implementation="eager").train()  # fmt: skip
    tokenizer = transformers.BertTokenizerFast.from_pretrained(start)
    moments = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in model.named_parameters()}
    exclude = ["LayerNorm", "layer_norm", "bias"]  # run_classifier's exclude_from_weight_decay
    for done, rows in enumerate(order):
        loss = loss_of(model, tokenizer, rows)
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


TASKS = {  # --task: (transformers' class, its labels, the reference loss)
    "classify": ("BertForSequenceClassification", LABELS, classification_loss),
    "regress": ("BertForSequenceClassification", ["score"], regression_loss),
    "multilabel": ("BertForSequenceClassification", TOPICS, multilabel_loss),
    "tag": ("BertForTokenClassification", TAGS, tagging_loss),
}


def write_train(directory: Path, task: str) -> Path:
    if task == "tag":
        path = directory / "train.txt"
        path.write_text("".join("".join(f"{w} {tag_of(w)}\n" for w in t.split()) + "\n" for t, _ in TEXTS))
        return path
    path = directory / "train.csv"
    labels = {"regress": SCORES, "multilabel": MULTI}.get(task, [y for _, y in TEXTS])
    path.write_text("text,label\n" + "".join(f"{t},{y}\n" for (t, _), y in zip(TEXTS, labels)), encoding="utf-8")
    return path


@pytest.mark.parametrize("task", sorted(TASKS))
def test_four_steps_equal_googles_arithmetic(tmp_path, task):
    start = start_checkpoint(tmp_path / "start", task)
    train = write_train(tmp_path, task)
    peak = 1e-3
    options = FinetuneOptions(model=str(start), train=str(train), output=str(tmp_path / "run"), epochs=2, task=task,
                              batch_size=4, learning_rate=peak, warmup_proportion=0.5, dropout=0.0, seed=3,
                              max_seq_length=16)  # fmt: skip
    run = finetune(options)
    order = [json.loads(line)["examples"] for line in (run / "order.jsonl").read_text().splitlines()]
    assert len(order) == 4 and sorted(order[0] + order[1]) == list(range(8)), "epoch 1 sees each example once"
    rates = [json.loads(line)["learning_rate"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rates == [google_rate(peak, done, 2, 4) for done in range(4)] == [0.0, 5e-4, 5e-4, 2.5e-4]

    cls = getattr(transformers, TASKS[task][0])
    expected = google_steps(start, order, peak, 2, cls, TASKS[task][2])
    ours = cls.from_pretrained(run, attn_implementation="eager")
    worst = 0.0
    for name, weight in ours.named_parameters():
        reference = expected[name]
        scale = float(reference.abs().max())
        difference = float((weight.detach() - reference).abs().max())
        worst = max(worst, difference / scale)
        assert difference <= 1e-4 * scale, f"{name}: max |Δ| {difference:.3g} (largest |w| {scale:.3g})"
    start_head = cls.from_pretrained(start).classifier.weight
    moved = float((ours.classifier.weight - start_head).abs().max().detach())
    assert moved > 1e-4, "the head did not train: the comparison would prove nothing"
    print(f"max |Δ| / max |w| over the tensors: {worst:.2e}")
