"""Start/end logits → answers, as Google's ``run_squad.write_predictions``.

For every window of a question, the ``n_best_size`` (20) highest start logits and end logits are
paired; a pair is a candidate if both ends are context pieces, the start is in its best window
(``token_is_max_context``), end ≥ start, and it spans at most ``max_answer_length`` (30) pieces.
Candidates are ranked by start + end logit; the first ``n_best_size`` distinct texts are kept, each
text mapped back to the original words by ``get_final_text`` (the pieces "steve smith" inside the
words "Steve Smith's" → "Steve Smith"), with their softmax probabilities.

SQuAD v2.0: the null answer (start = end = [CLS]) scores the lowest start[0] + end[0] over the
windows; the answer is "" when that null score minus the best non-null score exceeds
``null_score_diff_threshold``, and the difference is written to ``null_odds.json`` (a question
whose only valid answer is the null one is answered "" and has no odds; the file is written for
every v2.0 evaluation, ``{}`` when no question has odds, as Google's run_squad.py writes it).
A question whose context has no piece has no window: v1.1 answers it Google's placeholder
"empty", v2.0 answers it "" without odds (Google's code stops with an IndexError).

>>> final_text("steve smith", "Steve Smith's", do_lower_case=True)
'Steve Smith'
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ...tokenizer.google import GoogleBasicTokenizer
from .squad_examples import SquadExample
from .squad_features import SquadFeature


@dataclass
class Candidate:
    feature_index: int
    start_index: int
    end_index: int
    start_logit: float
    end_logit: float


def final_text(predicted: str, original: str, do_lower_case: bool) -> str:
    """The part of ``original`` (words) that the normalised pieces' text ``predicted`` spells, by a
    character alignment without spaces; ``original`` itself when the alignment fails (Google's rule)."""
    tokenized = " ".join(GoogleBasicTokenizer(do_lower_case).tokenize(original))
    start = tokenized.find(predicted)
    if start == -1:
        return original
    end = start + len(predicted) - 1
    original_kept = [index for index, character in enumerate(original) if character != " "]
    tokenized_kept = [index for index, character in enumerate(tokenized) if character != " "]
    if len(original_kept) != len(tokenized_kept):
        return original
    to_kept = {position: number for number, position in enumerate(tokenized_kept)}
    if start not in to_kept or end not in to_kept:
        return original
    return original[original_kept[to_kept[start]]:original_kept[to_kept[end]] + 1]


def best_indexes(logits: list[float], n_best_size: int) -> list[int]:
    """The indices of the ``n_best_size`` largest logits, largest first (ties: the earlier index)."""
    return [index for index, _ in sorted(enumerate(logits), key=lambda pair: pair[1], reverse=True)[:n_best_size]]


def softmax(scores: list[float]) -> list[float]:
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    return [value / sum(exps) for value in exps]


def _candidates(features: list[SquadFeature], logits: dict, n_best_size: int, max_answer_length: int,
                version_2: bool) -> tuple[list[Candidate], float, Candidate]:  # fmt: skip
    """Every valid (start, end) pair over the windows, the null score and the null candidate."""
    candidates, null_score, null = [], 1000000.0, Candidate(0, 0, 0, 0.0, 0.0)
    for feature_index, feature in enumerate(features):
        starts, ends = logits[feature.unique_id]
        if version_2 and starts[0] + ends[0] < null_score:
            null_score, null = starts[0] + ends[0], Candidate(feature_index, 0, 0, starts[0], ends[0])
        for start in best_indexes(starts, n_best_size):
            for end in best_indexes(ends, n_best_size):
                valid = (start < len(feature.tokens) and end < len(feature.tokens)
                         and start in feature.token_to_orig_map and end in feature.token_to_orig_map
                         and feature.token_is_max_context.get(start, False)
                         and start <= end < start + max_answer_length)  # fmt: skip
                if valid:
                    candidates.append(Candidate(feature_index, start, end, starts[start], ends[end]))
    if version_2 and features:  # (a context of no pieces has no window, so no null candidate: answered "")
        candidates.append(null)
    return sorted(candidates, key=lambda c: c.start_logit + c.end_logit, reverse=True), null_score, null


def _text(candidate: Candidate, feature: SquadFeature, example: SquadExample, do_lower_case: bool) -> str:
    """The answer's text: the pieces joined (## glued), aligned back onto the context's words."""
    pieces = " ".join(feature.tokens[candidate.start_index:candidate.end_index + 1])
    pieces = " ".join(pieces.replace(" ##", "").replace("##", "").strip().split())
    first, last = feature.token_to_orig_map[candidate.start_index], feature.token_to_orig_map[candidate.end_index]
    return final_text(pieces, " ".join(example.doc_tokens[first:last + 1]), do_lower_case)


def predict_answers(examples: list[SquadExample], features: list[SquadFeature], logits: dict, *,
                    n_best_size: int = 20, max_answer_length: int = 30, do_lower_case: bool = True,
                    version_2: bool = False, null_score_diff_threshold: float = 0.0
                    ) -> tuple[dict, dict, dict | None]:  # fmt: skip
    """(predictions, nbest, null_odds) keyed by question id (null_odds: None for v1.1); ``logits``:
    unique_id → (starts, ends)."""
    by_example = defaultdict(list)
    for feature in features:
        by_example[feature.example_index].append(feature)
    predictions, nbest_all, null_odds = {}, {}, {}
    for example_index, example in enumerate(examples):
        windows = by_example[example_index]
        candidates, null_score, null = _candidates(windows, logits, n_best_size, max_answer_length, version_2)
        nbest, seen = [], set()
        for candidate in candidates:
            if len(nbest) >= n_best_size:
                break
            window = windows[candidate.feature_index]
            text = _text(candidate, window, example, do_lower_case) if candidate.start_index else ""
            if text in seen and candidate.start_index:
                continue
            seen.add(text)
            nbest.append((text, candidate.start_logit, candidate.end_logit))
        if version_2 and "" not in seen:
            nbest.append(("", null.start_logit, null.end_logit))
        nbest = nbest or [("empty", 0.0, 0.0)]
        probabilities = softmax([start + end for _, start, end in nbest])
        nbest_all[example.qas_id] = [{"text": text, "probability": probability, "start_logit": start, "end_logit": end}
                                     for (text, start, end), probability in zip(nbest, probabilities)]  # fmt: skip
        if not version_2:
            predictions[example.qas_id] = nbest[0][0]
            continue
        best = next((entry for entry in nbest if entry[0]), None)
        if best is None:  # only the null answer is valid (Google's code stops here with an AttributeError)
            predictions[example.qas_id] = ""
            continue
        null_odds[example.qas_id] = null_score - best[1] - best[2]
        predictions[example.qas_id] = "" if null_odds[example.qas_id] > null_score_diff_threshold else best[0]
    return predictions, nbest_all, null_odds if version_2 else None


def write_predictions(directory: str | Path, predictions: dict, nbest: dict, null_odds: dict | None) -> None:
    """predictions.json, nbest_predictions.json (and null_odds.json for v2.0), Google's layout
    (``json.dumps(..., indent=4)`` and a newline), each written atomically."""
    from ...formats.atomic_files import atomic_output

    files = {"predictions.json": predictions, "nbest_predictions.json": nbest}
    if null_odds is not None:  # v2.0 (an untrained head may leave every question without odds: {})
        files["null_odds.json"] = null_odds
    for name, content in files.items():
        with atomic_output(str(Path(directory) / name)) as handle:
            handle.write((json.dumps(content, indent=4) + "\n").encode("utf-8"))
