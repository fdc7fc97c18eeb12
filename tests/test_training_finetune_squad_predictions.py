"""SQuAD predictions: for the same start/end logits, predictions.json, nbest_predictions.json and
null_odds.json byte for byte equal to the files Google's ``run_squad.write_predictions`` writes
(bert-tensorflow 1.0.4 in the TensorFlow venv), v1.1 and v2.0, on real text (tests/squad_files.py)
read through several windows. The logits are rounded to one decimal so that ties occur: the order
of equal logits is part of Google's rule (a stable sort)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from test_training_finetune_squad_features import google_squad

from minibert.training.tasks.head import load_tokenizer
from minibert.training.tasks.squad_examples import read_squad_examples
from minibert.training.tasks.squad_features import convert_examples_to_features
from minibert.training.tasks.squad_predictions import predict_answers, write_predictions
from squad_files import squad_data, write_squad

SIZES = {"max_seq_length": 64, "doc_stride": 24, "max_query_length": 16}


@pytest.mark.parametrize("version_2,threshold", [(False, 0.0), (True, 0.0), (True, -1.5)])
def test_predictions_equal_googles_write_predictions(tmp_path, minilm_dir, version_2, threshold):
    tokenizer = load_tokenizer(str(minilm_dir))
    path = write_squad(tmp_path / "dev.json", paragraphs=4, fortunes_per_context=8, questions=6, version_2=version_2,
                       training=False)  # fmt: skip
    examples, _ = read_squad_examples(path, is_training=False, version_2=version_2)
    features = convert_examples_to_features(examples, tokenizer, is_training=False, **SIZES)
    generator = np.random.default_rng(0)
    logits = {}
    for feature in features:  # (2, T): start and end logits; [CLS] raised so that the null answer wins sometimes
        rows = np.round(generator.normal(0, 2, (2, SIZES["max_seq_length"])), 1)
        rows[:, 0] += 5.5
        logits[feature.unique_id] = rows.astype(np.float32).tolist()
    (tmp_path / "google").mkdir()
    job = {"file": str(path), "is_training": False, "version_2": version_2, "null_score_diff_threshold": threshold,
           "logits": {str(k): v for k, v in logits.items()}, "output_dir": str(tmp_path / "google")}  # fmt: skip
    google = google_squad({"vocab": str(minilm_dir / "vocab.txt"), "do_lower_case": True, "jobs": [job], **SIZES})[0]
    predictions, nbest, null_odds = predict_answers(examples, features, logits, version_2=version_2,
                                                    null_score_diff_threshold=threshold)  # fmt: skip
    (tmp_path / "ours").mkdir()
    write_predictions(tmp_path / "ours", predictions, nbest, null_odds)
    expected_names = {"predictions.json", "nbest_predictions.json"} | ({"null_odds.json"} if version_2 else set())
    assert set(google["written"]) == expected_names
    for name, text in google["written"].items():
        assert (tmp_path / "ours" / name).read_text(encoding="utf-8") == text, name
    answers = json.loads(google["written"]["predictions.json"]).values()
    assert len({len(f.tokens) for f in features}) > 1 and any(answers)
    if version_2:
        assert "" in answers  # the null rule decided some questions


def test_a_question_without_windows_is_googles_empty_under_v1_and_unanswered_under_v2(tmp_path, minilm_dir):
    """A context of no word piece (a zero-width space; an empty one) gives its question no window.
    v1.1: Google's write_predictions answers it its placeholder "empty": the files are Google's, byte
    for byte. v2.0: Google's code stops with an IndexError (it looks up the null answer in a window
    that does not exist; minibert did too): the question is answered "" with no null odds, and the
    other questions are answered as without it."""
    tokenizer = load_tokenizer(str(minilm_dir))
    no_pieces = [{"context": "\u200b", "qas": [{"id": "zero-width", "question": "what?", "is_impossible": False,
                                               "answers": [{"text": "\u200b", "answer_start": 0}]}]},
                 {"context": "", "qas": [{"id": "empty", "question": "what?", "answers": [], "is_impossible": True}]}]
    generator, ours = np.random.default_rng(0), {}
    for version_2 in (False, True):
        data = squad_data(paragraphs=2, fortunes_per_context=4, questions=3, version_2=version_2, training=False)
        data["data"].insert(1, {"title": "no pieces", "paragraphs": no_pieces if version_2 else no_pieces[:1]})
        path = tmp_path / f"dev-v{int(version_2)}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        examples, _ = read_squad_examples(path, is_training=False, version_2=version_2)
        features = convert_examples_to_features(examples, tokenizer, is_training=False, **SIZES)
        logits = {f.unique_id: np.round(generator.normal(0, 2, (2, SIZES["max_seq_length"])), 1).tolist()
                  for f in features}  # fmt: skip
        ours[version_2] = (path, examples, features, logits,
                           predict_answers(examples, features, logits, version_2=version_2))  # fmt: skip
    path, examples, features, logits, (predictions, nbest, null_odds) = ours[False]
    (tmp_path / "google").mkdir()
    job = {"file": str(path), "is_training": False, "version_2": False, "output_dir": str(tmp_path / "google"),
           "logits": {str(k): v for k, v in logits.items()}}  # fmt: skip
    google = google_squad({"vocab": str(minilm_dir / "vocab.txt"), "do_lower_case": True, "jobs": [job], **SIZES})[0]
    write_predictions(tmp_path, predictions, nbest, null_odds)
    assert predictions["zero-width"] == "empty" and len(google["written"]) == 2
    for name, text in google["written"].items():
        assert (tmp_path / name).read_text(encoding="utf-8") == text, name
    path, examples, features, logits, (predictions, nbest, null_odds) = ours[True]
    assert predictions["zero-width"] == predictions["empty"] == ""
    for qas_id in ("zero-width", "empty"):
        assert nbest[qas_id] == [{"text": "", "probability": 1.0, "start_logit": 0.0, "end_logit": 0.0}]
        assert qas_id not in null_odds
    windowed = {examples[f.example_index].qas_id for f in features}
    kept = [example for example in examples if example.qas_id in windowed]
    alone = predict_answers(kept, [replace(f, example_index=kept.index(examples[f.example_index])) for f in features],
                            logits, version_2=True)  # fmt: skip
    assert len(kept) == 6 and all(part[key] == whole[key] for part, whole in zip(alone, (predictions, nbest, null_odds))
                                  for key in part)  # fmt: skip
