"""Each task's dev metric equals the reference's on the same predictions: scikit-learn's accuracy,
F1 and Matthews correlation, scipy's Pearson and Spearman (with ties), on random labels and scores
and on the degenerate cases (one class predicted, constant scores: scipy's NaN, not a made-up 0)."""

from __future__ import annotations

import numpy as np
import pytest

from minibert.training.tasks import task_named
from minibert.training.tasks.metrics import accuracy, f1, matthews, pearson, spearman, task_metrics

metrics = pytest.importorskip("sklearn.metrics")
stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("seed", range(5))
def test_classification_metrics_equal_scikit_learns(seed):
    rng = np.random.default_rng(seed)
    classes = 2 + seed % 3
    gold, predicted = rng.integers(classes, size=200), rng.integers(classes, size=200)
    predicted[:120] = gold[:120]  # better than chance
    assert accuracy(gold, predicted) == metrics.accuracy_score(gold, predicted)
    assert matthews(gold, predicted) == pytest.approx(metrics.matthews_corrcoef(gold, predicted), abs=1e-12)
    if classes == 2:
        assert f1(gold, predicted) == pytest.approx(metrics.f1_score(gold, predicted), abs=1e-12)


def test_degenerate_predictions_match_scikit_learn():
    gold, predicted = np.array([0, 1, 1, 0]), np.zeros(4, dtype=int)
    assert matthews(gold, predicted) == metrics.matthews_corrcoef(gold, predicted) == 0.0
    assert f1(gold, predicted) == metrics.f1_score(gold, predicted, zero_division=0.0) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_correlations_equal_scipys_with_ties(seed):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 6, size=150).astype(float)  # STS-B-like scores with many ties
    scores = gold + rng.normal(size=150)
    scores[:20] = scores[0]
    assert pearson(gold, scores) == pytest.approx(stats.pearsonr(gold, scores)[0], abs=1e-12)
    assert spearman(gold, scores) == pytest.approx(stats.spearmanr(gold, scores)[0], abs=1e-12)


@pytest.mark.parametrize("gold, scores", [([1.0], [0.3]), ([1.0, 1.0], [0.3, 0.5]), ([1.0, 2.0, 3.0], [0.4] * 3),
                                          ([2.0, 2.0, 2.0], [2.0, 2.0, 2.0])])  # fmt: skip
def test_an_undefined_correlation_is_nan_as_scipys_not_zero(gold, scores):
    """Constant gold scores (a one-row dev file) or constant predictions: 0/0. scipy says NaN (and
    warns); minibert once said 0.0, which the run then reported and could pick best/ on."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's ConstantInputWarning / DegenerateDataWarning
        expected = (stats.pearsonr(gold, scores)[0] if len(gold) > 1 else np.nan,
                    stats.spearmanr(gold, scores)[0] if len(gold) > 1 else np.nan)  # fmt: skip
    assert np.isnan(expected).all()
    assert np.isnan(pearson(gold, scores)) and np.isnan(spearman(gold, scores))


def test_each_glue_task_reports_its_own_figure():
    logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    assert set(task_metrics(np.array([1, 0, 0]), logits, "mrpc", ["0", "1"])) == {"accuracy", "f1"}
    assert set(task_metrics(np.array([1, 0, 0]), logits, "cola", ["0", "1"])) == {"accuracy", "matthews"}
    assert set(task_metrics(np.array([1, 0, 0]), logits, "sst-2", ["0", "1"])) == {"accuracy"}
    regress = task_named("regress")
    assert set(regress.metrics(np.array([1.0, 2.0, 3.0]), logits[:, :1], None, None)) == {"pearson", "spearman"}


@pytest.mark.parametrize("glue", ["mrpc", "qqp"])
@pytest.mark.parametrize("labels", [["0", "1"], ["1", "0"]])
def test_the_f1_is_the_label_1s_whatever_its_id(glue, labels):
    """MRPC's and QQP's F1 is the positive class's, the label "1" (scikit-learn's pos_label): with
    ``--labels 1,0`` that is id 0, and the figure was the negative class's (0.67 for a true 0.0)."""
    names = np.array(labels)
    gold, predicted = np.array([0, 1, 0, 1, 1, 0]), np.array([1, 1, 1, 1, 0, 0])
    logits = np.eye(2)[predicted]
    expected = metrics.f1_score(names[gold], names[predicted], pos_label="1")
    assert task_metrics(gold, logits, glue, labels)["f1"] == pytest.approx(expected, abs=1e-12)
    assert task_metrics(gold, logits, glue, ["a", "b"])["f1"] == 0.0  # no "1": never gold nor predicted
