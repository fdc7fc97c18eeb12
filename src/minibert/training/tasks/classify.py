"""``--task classify``: one label per text or pair (GLUE's MRPC, SST-2, MNLI, ...; a CSV of your own).

Google's ``run_classifier.create_model``: the classifier reads the pooled [CLS] vector after
dropout 0.1, and the loss is the mean cross-entropy of the labels over the global batch:

    logits = W · dropout(pooled) + b          (B, K)
    loss   = Σ CE(logits, label) / B          B = the *global* batch (each piece adds its share)

The examples are read by examples.py (GLUE's processors' layouts, generic CSV/TSV/JSONL), made into
Google's features by features.py (of the model's own tokenizer's pieces), the dev figures computed
by metrics.py (accuracy; F1 for MRPC and QQP, Matthews for CoLA). regress.py and multilabel.py are
this task with another loss.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ...inputs import AS_ASKED
from .examples import check_labels, label_list, read_examples
from .features import make_features
from .finetuning import Finetuning
from .head import fit_labels, load_tokenizer, refuse_a_single_label
from .metrics import MAIN_METRIC, task_metrics
from .task import PieceSums, TrainingData


class Classify(Finetuning):
    name = "classify"

    def label_separator(self, options) -> str | None:
        """What joins an example's labels in its label field (multilabel); None: one label each."""
        return None

    def read(self, options) -> tuple:
        """Labelled texts or pairs → Google's features, cut by the model's tokenizer (examples.py, features.py)."""
        train_examples = read_examples(options.train, options.example_format("train"))
        dev_examples = read_examples(options.dev, options.example_format("dev")) if options.dev else None
        separator = self.label_separator(options)
        labels = self.labels_of(train_examples, options, separator)
        stated = bool(options.labels) or options.glue is not None
        labels, continues = fit_labels(options.model, labels, self.problem, stated)
        if labels is not None:
            check_labels(train_examples, labels, options.train, "--train", separator)
            if dev_examples:
                check_labels(dev_examples, labels, options.dev, "--dev", separator)
            refuse_a_single_label(labels, options)
        tokenizer = load_tokenizer(options.model)
        length = options.max_seq_length
        train = make_features(train_examples, tokenizer, length, labels, options.train, separator)
        dev = make_features(dev_examples, tokenizer, length, labels, options.dev, separator) if dev_examples else None
        return train, dev, labels, continues, tokenizer

    def labels_of(self, examples, options, separator: str | None) -> list[str] | None:
        """The labels in id order: --labels, the GLUE task's, or the training file's, sorted (numbers by value)."""
        return label_list(examples, options.example_format("train"), list(options.labels or []), separator)

    def logits(self, model, piece: dict[str, torch.Tensor]) -> torch.Tensor:
        """The classifier on the pooled output after dropout: (B, K).

        The encoder computes the real tokens only (``skip_padding``: speed/fast_path.py packs them,
        as the embedding path does): the classifier reads [CLS] alone, and a [PAD] row changes no
        real token (its key is masked out), so the loss and every gradient are those of the padded
        batch — with about half the work on typical sentence-pair batches
        (tests/test_training_finetune_padding.py)."""
        out = model.bert(piece["input_ids"], piece["input_mask"], piece["segment_ids"], use_fast_path=True,
                         skip_padding=True, **AS_ASKED)  # fmt: skip
        return model.classifier(model.dropout(out.pooler_output)).float()

    def sums(self, model, piece: dict[str, torch.Tensor], denominators: dict[str, float]) -> PieceSums:
        logits, labels = self.logits(model, piece), piece["label_ids"]  # (B, K), (B,)
        loss = F.cross_entropy(logits, labels, reduction="sum") / denominators["batch_size"]
        correct = (logits.argmax(-1) == labels).sum()
        return PieceSums(loss, {"loss": loss.detach(), "correct": correct})

    def metrics(self, gold: np.ndarray, logits: np.ndarray, data: TrainingData, options) -> dict[str, float]:
        return task_metrics(gold, logits, options.glue, data.labels)

    def main_metric(self, options) -> str:
        return MAIN_METRIC.get(options.glue or "", "accuracy")


TASK = Classify()
