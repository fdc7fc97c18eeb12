"""SQuAD's exact match and F1 against the official evaluation scripts' definitions, worked by hand
(transformers 5 no longer ships ``transformers.data.metrics.squad_metrics``, and the official
scripts are not installable): each expected value below is computed in the comment beside it."""

from __future__ import annotations

import pytest

from minibert.training.tasks.squad_metrics import exact_match_score, f1_score, normalize_answer, squad_scores


@pytest.mark.parametrize("text,normal", [
    ("The Eiffel Tower!", "eiffel tower"),          # lower, punctuation, article
    ("  an   apple,  a pear ", "apple pear"),       # articles as words only, whitespace collapsed
    ("theatre and anthem", "theatre and anthem"),   # 'the'/'an' inside words stay
    ("U.S.-based", "usbased"),                      # punctuation removed before articles: no space left
    ("Café ‘quoted’", "café ‘quoted’"),             # string.punctuation is ASCII only
])  # fmt: skip
def test_normaliser_is_the_official_one(text, normal):
    assert normalize_answer(text) == normal


def test_f1_and_exact_by_hand():
    assert exact_match_score("The Cat.", "cat") == 1.0
    # pred {cat, sat, on, mat} vs gold {cat, sat, mat, today}: 3 common, P = 3/4, R = 3/4, F1 = 0.75
    assert f1_score("the cat sat on the mat", "cat sat mat today") == pytest.approx(0.75, abs=1e-15)
    # repeated words count as a multiset: pred [a b b] → [b b] after 'a' goes; gold [b c]: 1 common, P 1/2, R 1/2
    assert f1_score("a b b", "b c") == pytest.approx(0.5, abs=1e-15)
    assert f1_score("", "") == 1.0 and f1_score("", "cat") == 0.0 and f1_score("cat", "") == 0.0  # v2.0's rule


def test_file_scores_best_over_gold_and_v2_empty_answers():
    gold = {"q1": ["Denver Broncos", "the Broncos"],  # pred "Broncos": EM 0 then 1 → 1; F1 2/3 then 1 → 1
            "q2": ["Santa Clara, California"],       # pred "Santa Clara": P 1, R 2/3 → F1 0.8; EM 0
            "q3": [],                                # v2.0 unanswerable: gold "", pred "" → 1, 1
            "q4": ["1966"],                          # pred "" → 0, 0
            "q5": ["Levi's Stadium"]}                # no prediction → 0, 0 (counted in the mean)
    predictions = {"q1": "Broncos", "q2": "Santa Clara", "q3": "", "q4": ""}
    scores = squad_scores(gold, predictions, version_2=True)
    assert scores["exact_match"] == pytest.approx(100 * 2 / 5, abs=1e-12)
    assert scores["f1"] == pytest.approx(100 * (1 + 0.8 + 1) / 5, abs=1e-12)


def test_v1_1_keeps_gold_answers_that_normalise_to_nothing():
    """evaluate-v1.1.py keeps every gold answer and its F1 is 0 where no word is shared, empty texts
    too; v2.0 drops such gold answers and scores two empty texts 1 (the finetune run scored v1.1 files
    by v2.0's rules). Each figure below is worked from the two scripts' code."""
    gold, predictions = {"q1": ["The"], "q2": ["The", "cat"]}, {"q1": "the", "q2": "a"}
    # v1.1: q1 "the" vs "The": EM 1 (both normalise to ""), F1 0 (nothing shared); q2 "a" vs "The": EM 1, F1 0
    v1 = squad_scores(gold, predictions, version_2=False)
    assert v1 == {"exact_match": 100.0, "f1": 0.0}
    # v2.0: q1's gold becomes [""]: EM 1, F1 1; q2's becomes ["cat"]: EM 0, F1 0
    v2 = squad_scores(gold, predictions, version_2=True)
    assert v2 == {"exact_match": 50.0, "f1": 50.0}
    assert f1_score("", "", version_2=False) == 0.0 and f1_score("the", "a", version_2=True) == 1.0


def test_v1_1_question_without_gold_answers_is_refused_not_scored_zero():
    """evaluate-v1.1.py scores a question by max(metric(prediction, gold) for gold in its answers): a
    question without answers fails there (max of nothing). minibert counted it as a wrong answer:
    one right answer of one gradable question scored 33.3 over three. Now a ValueError naming it;
    v2.0's rule expects "" for it."""
    gold, predictions = {"a": ["the mat"], "b": []}, {"a": "the mat", "b": "The cat"}
    with pytest.raises(ValueError, match=r"^question 'b' has no gold answer: SQuAD v1.1 scores only answered"):
        squad_scores(gold, predictions, version_2=False)
    # v2.0: "a" EM 1, F1 1; "b" gold [""], prediction "The cat" → 0, 0 (and "" would score 1, 1)
    assert squad_scores(gold, predictions, version_2=True) == {"exact_match": 50.0, "f1": 50.0}
    # v1.1, answered questions: "a" exact → 1, 1; "c" "on the mat" vs "mat": EM 0, F1 P 1/2 R 1 → 2/3
    scores = squad_scores({"a": ["the mat"], "c": ["mat", "a cat"]}, {"a": "the mat", "c": "on the mat"},
                          version_2=False)  # fmt: skip
    assert scores["exact_match"] == 50.0 and scores["f1"] == pytest.approx(100 * (1 + 2 / 3) / 2, abs=1e-12)
