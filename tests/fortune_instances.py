"""A tiny pre-training instance maker for the training tests and the docs' recipe: Debian's
fortunes (`apt-get install fortunes`) → a WordPiece vocabulary (tokenizers' trainer, the reference
learner) → masked-LM / next-sentence instances in Google's layout, written as TFRecords.

Not Google's create_pretraining_data.py (that is `minibert pretraining-data`): a short version
of the same recipe — fortunes are documents, their sentences are split on . ! ?, B follows A or
(half the time) is a sentence of another fortune, 15% of the pieces are predicted (80% [MASK],
10% a random piece, 10% kept).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np

from minibert.formats.atomic_files import atomic_output
from minibert.formats.tfrecord import write_examples
from minibert.tokenizer import BertTokenizer

FORTUNES = Path("/usr/share/games/fortunes")
ENGLISH = ["fortunes", "computers", "literature", "science", "people", "wisdom", "work", "politics", "education",
           "food", "love", "humorists", "law", "medicine", "miscellaneous", "platitudes", "songs-poems",
           "sports"]  # fmt: skip


def fortune_documents(limit: int | None = None) -> list[list[str]]:
    """Each fortune as a list of sentences."""
    documents = []
    for name in ENGLISH:
        path = FORTUNES / name
        if not path.exists():
            continue
        for fortune in path.read_text(encoding="utf-8", errors="replace").split("\n%\n"):
            text = " ".join(fortune.split())
            sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if s]
            if len(sentences) >= 2:
                documents.append(sentences)
    return documents[:limit]


def train_vocab(documents: list[list[str]], path: Path, size: int = 4000) -> Path:
    """vocab.txt learned by tokenizers' BertWordPieceTokenizer (the special tokens are ids 0–4)."""
    from tokenizers import BertWordPieceTokenizer

    learner = BertWordPieceTokenizer(lowercase=True)
    learner.train_from_iterator((" ".join(document) for document in documents), vocab_size=size, show_progress=False)
    path.mkdir(parents=True, exist_ok=True)
    learner.save_model(str(path))
    return path / "vocab.txt"


def make_instances(documents: list[list[str]], vocab: Path, output: Path, seq_len: int = 64, predictions: int = 10,
                   seed: int = 12345, copies: int = 2) -> int:  # fmt: skip
    """Write ``copies`` passes of instances over the documents; returns how many."""
    tokenizer = BertTokenizer(vocab)
    rng = random.Random(seed)
    ids_of = [[tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s)) for s in document] for document in documents]
    special = {tokenizer.convert_tokens_to_ids(t) for t in ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")}
    cls, sep, mask = (tokenizer.convert_tokens_to_ids(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
    instances = []
    for _ in range(copies):
        for index, document in enumerate(ids_of):
            split = rng.randrange(1, len(document))
            a = [piece for sentence in document[:split] for piece in sentence]
            if rng.random() < 0.5:
                other = rng.randrange(len(ids_of) - 1)  # another fortune
                other = ids_of[other + (other >= index)]
                b, label = other[rng.randrange(len(other))], 1
            else:
                b, label = [piece for sentence in document[split:] for piece in sentence], 0
            a, b = list(a), list(b)
            while len(a) + len(b) > seq_len - 3:
                (a if len(a) > len(b) else b).pop()
            if not a or not b:
                continue
            tokens = [cls, *a, sep, *b, sep]
            segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
            candidates = [i for i, t in enumerate(tokens) if t not in special]
            count = min(predictions, max(1, round(len(tokens) * 0.15)), len(candidates))
            positions = sorted(rng.sample(candidates, count))
            labels = [tokens[i] for i in positions]
            for i in positions:
                draw = rng.random()
                tokens[i] = mask if draw < 0.8 else tokens[i] if draw < 0.9 else rng.randrange(tokenizer.vocab_size)
            pad, pad_predictions = seq_len - len(tokens), predictions - count
            instances.append({
                "input_ids": tokens + [0] * pad, "input_mask": [1] * len(tokens) + [0] * pad,
                "segment_ids": segments + [0] * pad, "masked_lm_positions": positions + [0] * pad_predictions,
                "masked_lm_ids": labels + [0] * pad_predictions,
                "masked_lm_weights": np.array([1.0] * count + [0.0] * pad_predictions, np.float32),
                "next_sentence_labels": [label],
            })  # fmt: skip
    rng.shuffle(instances)
    with atomic_output(output) as handle:
        return write_examples(handle, instances)
