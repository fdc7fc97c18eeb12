"""Each task's own dev metric, as the GLUE benchmark and the BERT paper report it.

    accuracy            the share of examples whose label is predicted (every classification task)
    f1                  F1 of the positive class, the label "1" (MRPC, QQP: their classes are unbalanced)
    matthews            Matthews correlation, the balance of all four cells (CoLA)
    pearson, spearman   correlation of the predicted scores with the gold ones (STS-B; regression)

    >>> round(matthews([1, 1, 0, 0], [1, 0, 0, 0]), 4)
    0.5774

The main metric (the one that picks the best checkpoint) is accuracy, except F1 for MRPC and QQP,
and Matthews for CoLA (``MAIN_METRIC``); a regression's is Spearman's (regress.py). Plain numpy: the test compares
every figure with scikit-learn's and scipy's on the same predictions. Where a figure is undefined
scikit-learn and scipy disagree in kind: F1 and Matthews are 0.0 by scikit-learn's convention (kept
here), a correlation of constant scores is NaN in scipy (kept too: the loop says "undefined").
"""

from __future__ import annotations

import numpy as np

MAIN_METRIC = {"mrpc": "f1", "qqp": "f1", "cola": "matthews", "sts-b": "spearman"}


def accuracy(gold, predicted) -> float:
    return float(np.mean(np.asarray(gold) == np.asarray(predicted)))


def f1(gold, predicted, positive: int = 1) -> float:
    """2·TP / (2·TP + FP + FN) for the ``positive`` class; 0.0 when it is never predicted nor gold."""
    gold, predicted = np.asarray(gold) == positive, np.asarray(predicted) == positive
    true_positive = np.sum(gold & predicted)
    wrong = np.sum(gold != predicted)
    return float(2 * true_positive / (2 * true_positive + wrong)) if true_positive + wrong else 0.0


def matthews(gold, predicted) -> float:
    """(TP·TN − FP·FN) / √((TP+FP)(TP+FN)(TN+FP)(TN+FN)) in its multi-class form (Gorodkin's R_K,
    as scikit-learn computes it); 0.0 when a denominator is 0."""
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    classes = np.union1d(gold, predicted)
    confusion = np.array([[np.sum((gold == g) & (predicted == p)) for p in classes] for g in classes], dtype=np.float64)
    true_sum, predicted_sum = confusion.sum(1), confusion.sum(0)
    correct, samples = np.trace(confusion), confusion.sum()
    covariance = correct * samples - true_sum @ predicted_sum
    denominator = np.sqrt((samples**2 - predicted_sum @ predicted_sum) * (samples**2 - true_sum @ true_sum))
    return float(covariance / denominator) if denominator else 0.0


def pearson(gold, predicted) -> float:
    """cov(gold, predicted) / (σ_gold · σ_predicted); NaN, as scipy's, when it is 0/0: the gold scores
    or the predictions are all equal (a one-row dev file, say), where no correlation is defined.
    The loop records such a figure as undefined (null in metrics.jsonl), never as a number.

    >>> pearson([1.0, 1.0], [0.3, 0.5])
    nan
    """
    gold, predicted = np.asarray(gold, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    if (gold == gold[0]).all() or (predicted == predicted[0]).all():  # (as scipy: the mean's rounding is no spread)
        return float("nan")
    gold, predicted = gold - gold.mean(), predicted - predicted.mean()
    denominator = np.sqrt((gold @ gold) * (predicted @ predicted))
    return float(gold @ predicted / denominator) if denominator else float("nan")


def _ranks(values) -> np.ndarray:
    """1-based ranks, ties given their mean rank (as scipy.stats.rankdata's default)."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    sorted_values = values[order]
    start = 0
    for end in range(1, len(values) + 1):
        if end == len(values) or sorted_values[end] != sorted_values[start]:
            ranks[order[start:end]] = (start + end + 1) / 2  # the mean of ranks start+1 … end
            start = end
    return ranks


def spearman(gold, predicted) -> float:
    """Pearson's correlation of the ranks (NaN where that is undefined: either side's ranks all tied)."""
    return pearson(_ranks(gold), _ranks(predicted))


POSITIVE_LABEL = "1"  # MRPC's "equivalent", QQP's "duplicate": the class whose F1 GLUE reports


def _positive_f1(gold, predicted, labels: list[str]) -> float:
    """F1 of the label "1" at whatever id it has (``--labels 1,0`` gives it id 0); 0.0, as where it
    is never gold nor predicted, when the labels have no "1"."""
    return f1(gold, predicted, labels.index(POSITIVE_LABEL)) if POSITIVE_LABEL in labels else 0.0


GLUE_FIGURES = {"mrpc": {"f1": _positive_f1}, "qqp": {"f1": _positive_f1},
                "cola": {"matthews": lambda gold, predicted, labels: matthews(gold, predicted)}}  # fmt: skip


def task_metrics(gold: np.ndarray, logits: np.ndarray, glue: str | None, labels: list[str]) -> dict[str, float]:
    """A classifier's dev figures from the gold label ids (N,), its logits (N, K) and its labels in
    id order: accuracy, and the GLUE task's own figure (``GLUE_FIGURES``)."""
    predicted = logits.argmax(-1)
    figures = {"accuracy": accuracy(gold, predicted)}
    for name, figure in GLUE_FIGURES.get(glue or "", {}).items():
        figures[name] = figure(gold, predicted, labels)
    return figures
