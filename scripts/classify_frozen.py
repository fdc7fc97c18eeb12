"""A linear classifier on frozen BERT features: the feature-extraction recipe of the BERT paper.

The task: tell which language a sentence is in (French, German, Spanish, Italian, Portuguese,
Dutch), on real sentences — Django's admin messages as its translators wrote them (the corpus in
tests/corpus.py). BERT is not trained at all: each sentence becomes one pooled vector, and only a
linear layer (softmax regression) is fitted on top.

    python scripts/classify_frozen.py                    # mean pooling, the bundled MiniLM
    python scripts/classify_frozen.py --pooling cls --layers -2

Needs django (pip install django), whose catalogues are the sentences, and the clone's tests/ folder.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from needs import default_model, need  # noqa: E402

LANGUAGES = ["fr", "de", "es", "it", "pt", "nl"]


def load_dataset(per_language: int = 300, seed: int = 0) -> tuple[list[str], list[int]]:
    django = need("django", "for its sentences (Django's translation catalogues)", install="django")
    from corpus import _po_strings

    root = Path(django.__file__).parent
    texts, labels = [], []
    for label, language in enumerate(LANGUAGES):
        sentences = []
        for path in sorted(root.glob(f"**/locale/{language}/LC_MESSAGES/django.po")):
            sentences.extend(text for text in _po_strings(path) if len(text.split()) >= 4 and "%" not in text)
        sentences = sorted(set(sentences))
        random.Random(seed).shuffle(sentences)
        texts.extend(sentences[:per_language])
        labels.extend([label] * len(sentences[:per_language]))
    return texts, labels


def train_linear(features: np.ndarray, labels: np.ndarray, classes: int, epochs: int = 300) -> torch.nn.Linear:
    """Softmax regression with full-batch Adam; the features are standardized first."""
    torch.manual_seed(0)
    x = torch.from_numpy(features)
    y = torch.from_numpy(labels)
    layer = torch.nn.Linear(x.shape[1], classes)
    optimizer = torch.optim.Adam(layer.parameters(), lr=1e-2, weight_decay=1e-4)
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(layer(x), y)
        loss.backward()
        optimizer.step()
    return layer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="hub id or directory (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--pooling", default="mean")
    parser.add_argument("--layers", type=int, default=-1)
    args = parser.parse_args()
    from minibert import Embedder

    texts, labels = load_dataset()
    args.model = args.model or default_model()
    order = np.random.default_rng(0).permutation(len(texts))
    split = int(0.7 * len(texts))
    train, test = order[:split], order[split:]
    embedder = Embedder.from_pretrained(args.model)
    features = embedder.embed(texts, pooling=args.pooling, layers=args.layers)
    mean, std = features[train].mean(0), features[train].std(0) + 1e-6
    features = (features - mean) / std
    labels = np.array(labels)
    layer = train_linear(features[train], labels[train], len(LANGUAGES))
    with torch.no_grad():
        predicted = layer(torch.from_numpy(features[test])).argmax(1).numpy()
    accuracy = (predicted == labels[test]).mean()
    majority = np.bincount(labels[train]).max() / len(train)
    print(f"{len(texts)} sentences in {len(LANGUAGES)} languages; {len(train)} to train, {len(test)} to test")
    print(f"features: {args.pooling} pooling of layer {args.layers} of {args.model} ({features.shape[1]} dims), frozen")
    print(f"test accuracy of a linear classifier: {accuracy:.3f}   (majority class: {majority:.3f})")


if __name__ == "__main__":
    main()
