"""SQuAD's exact match and F1, as the official evaluation scripts (evaluate-v1.1.py, evaluate-v2.0.py)
define them: both texts normalised (lower case, punctuation removed, the articles a/an/the removed,
whitespace collapsed), exact match 1 if equal, F1 over the bag of normalised words; each question
scores its best over the gold answers, and the file's figures are the means × 100.

The two scripts differ where a text normalises to nothing. evaluate-v2.0.py drops such gold answers
(a question left without any has the gold answer "", which only an empty prediction matches) and
scores two empty texts F1 1; evaluate-v1.1.py keeps every gold answer and scores F1 0 wherever no
word is shared, two empty texts too. ``version_2`` says which (finetune's
``--version-2-with-negative``): gold "The" and prediction "the" is F1 1 under v2.0, 0 under v1.1.

>>> normalize_answer("The  Cat's, hat!")
'cats hat'
>>> round(f1_score("the cat sat", "a cat sat down"), 4)
0.8
"""

from __future__ import annotations

import re
import string
from collections import Counter

PUNCTUATION = set(string.punctuation)
ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (the official normaliser, in its order)."""
    text = "".join(character for character in text.lower() if character not in PUNCTUATION)
    return " ".join(ARTICLES.sub(" ", text).split())


def exact_match_score(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str, version_2: bool = True) -> float:
    """Word-bag F1 of the normalised texts; an empty text scores 0, and two score 1 under v2.0's rule."""
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if version_2 and (not predicted or not expected):
        return float(predicted == expected)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def squad_scores(gold_answers: dict[str, list[str]], predictions: dict[str, str], *,
                 version_2: bool) -> dict[str, float]:  # fmt: skip
    """{"exact_match", "f1"} in percent over every question of ``gold_answers`` (a missing prediction
    scores 0); each question's best over its gold answers, by evaluate-v2.0.py's rules or
    evaluate-v1.1.py's (``version_2``: see above). A v1.1 question without gold answers is a
    ValueError naming it: evaluate-v1.1.py's max over no answers fails (read_squad_examples refuses
    such a dev file first)."""
    exact = f1 = 0.0
    for qas_id, answers in gold_answers.items():
        if version_2:
            answers = [answer for answer in answers if normalize_answer(answer)] or [""]
        elif not answers:
            raise ValueError(f"question {qas_id!r} has no gold answer: SQuAD v1.1 scores only answered questions")
        prediction = predictions.get(qas_id)
        if prediction is None:
            continue
        exact += max(exact_match_score(prediction, answer) for answer in answers)
        f1 += max(f1_score(prediction, answer, version_2) for answer in answers)
    count = max(len(gold_answers), 1)
    return {"exact_match": 100.0 * exact / count, "f1": 100.0 * f1 / count}
