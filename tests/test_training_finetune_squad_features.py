"""SQuAD's inputs: examples read as Google's ``run_squad.read_squad_examples`` reads them and every
window equal to Google's ``convert_examples_to_features`` (tokens, ids, mask, segment ids,
token_to_orig_map, token_is_max_context, start/end positions) — compared with Google's own functions
(bert-tensorflow 1.0.4, in the TensorFlow venv of tf_reference.py) on real text (tests/squad_files.py):
long contexts read through many windows, answers at random characters (inside words, at window edges,
the context's last word), questions longer than max_query_length, v2.0 unanswerable questions.

Google's side of every test here comes from one run of the TensorFlow venv (the ``google`` fixture:
each run imports TensorFlow and bert, ~6 s), its jobs each with its own sizes."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from minibert.apps.cli import main
from minibert.errors import DataError
from minibert.training.tasks.head import load_vocabulary
from minibert.training.tasks.squad_examples import read_squad_examples
from minibert.training.tasks.squad_features import convert_examples_to_features
from squad_files import squad_data, write_squad
from tf_reference import run_reference

RUNNER = Path(__file__).parent / "tf_google_squad_runner.py"


def google_squad(request: dict) -> list[dict]:
    return run_reference(request, RUNNER)


def as_google(example) -> list:
    return [example.qas_id, example.question_text, example.doc_tokens, example.orig_answer_text,
            example.start_position, example.end_position, example.is_impossible]  # fmt: skip


def feature_row(feature) -> list:
    return [feature.unique_id, feature.example_index, feature.doc_span_index, feature.tokens,
            [list(item) for item in sorted(feature.token_to_orig_map.items())],
            [list(item) for item in sorted(feature.token_is_max_context.items())],
            feature.input_ids, feature.input_mask, feature.segment_ids, feature.start_position,
            feature.end_position]  # fmt: skip


SIZES = [(64, 24, 16), (384, 128, 64)]  # (max_seq_length, doc_stride, max_query_length)
WRITE_FEATURES = {"max_seq_length": 64, "doc_stride": 24, "max_query_length": 16}


@pytest.fixture(scope="module")
def google(tmp_path_factory, minilm_dir) -> dict:
    """Every test's files, minibert's --write-features files, and Google's answers for all of them,
    from one run of the TensorFlow venv: {key: (job, Google's result, extra)}."""
    directory = tmp_path_factory.mktemp("squad-features")
    jobs, extra = {}, {}
    for max_seq_length, doc_stride, max_query_length in SIZES:
        size = {"paragraphs": 6, "fortunes_per_context": 30 if max_seq_length > 100 else 8, "questions": 9}
        for version_2 in (False, True):
            for training in (True, False):
                path = write_squad(directory / f"{max_seq_length}-v{int(version_2)}{int(training)}.json",
                                   version_2=version_2, training=training, **size)  # fmt: skip
                jobs[(max_seq_length, version_2, training)] = {
                    "file": str(path), "is_training": training, "version_2": version_2,
                    "max_seq_length": max_seq_length, "doc_stride": doc_stride, "max_query_length": max_query_length,
                }  # fmt: skip
    for version_2 in (False, True):  # `finetune --task answer --write-features`, minibert's file for Google to read
        train = write_squad(directory / f"train-v{int(version_2)}.json", version_2=version_2, training=True,
                            paragraphs=3, fortunes_per_context=8, questions=6)  # fmt: skip
        path = directory / f"train-v{int(version_2)}.tfrecord"
        argv = ["finetune", "--task", "answer", "--model", str(minilm_dir), "--train", str(train), "--write-features",
                str(path), "--max-seq-length", str(WRITE_FEATURES["max_seq_length"]),
                "--doc-stride", str(WRITE_FEATURES["doc_stride"]),
                "--max-query-length", str(WRITE_FEATURES["max_query_length"])]  # fmt: skip
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main([*argv, *(["--version-2-with-negative"] if version_2 else [])])
        extra[("write", version_2)] = {"code": code, "out": out.getvalue(), "path": path}
        if code == 0:  # (else the test says so; Google has no file to read)
            jobs[("write", version_2)] = {"file": str(train), "is_training": True, "version_2": version_2,
                                          "tfrecord": str(path), **WRITE_FEATURES}  # fmt: skip
    request = {"vocab": str(minilm_dir / "vocab.txt"), "do_lower_case": True, **WRITE_FEATURES,
               "jobs": list(jobs.values())}  # fmt: skip
    answers = dict(zip(jobs, google_squad(request)))
    return {key: (jobs.get(key), answers.get(key), extra.get(key)) for key in jobs.keys() | extra.keys()}


@pytest.mark.parametrize("max_seq_length,doc_stride,max_query_length", SIZES)
def test_squad_features_equal_googles(google, minilm_dir, max_seq_length, doc_stride, max_query_length):
    """v1.1 and v2.0, training and evaluation: the same examples and every feature field as Google's;
    checked to exercise what matters: several windows per example, answers outside a window ([CLS]),
    answers on a window's first or last piece, pieces not in their best window, questions truncated."""
    _, vocabulary = load_vocabulary(str(minilm_dir))
    runs = [google[(max_seq_length, version_2, training)] for version_2 in (False, True) for training in (True, False)]
    jobs, google = [job for job, _, _ in runs], [answer for _, answer, _ in runs]
    counts = {"windows>1": 0, "cls": 0, "edge": 0, "not_max": 0, "impossible": 0}
    for job, expected in zip(jobs, google):
        examples, _ = read_squad_examples(job["file"], job["is_training"], job["version_2"])
        assert [as_google(example) for example in examples] == expected["examples"], job
        features = convert_examples_to_features(examples, vocabulary, max_seq_length, doc_stride, max_query_length,
                                                job["is_training"])  # fmt: skip
        rows = [feature_row(feature) for feature in features]
        assert len(rows) == len(expected["features"])
        for row, reference in zip(rows, expected["features"]):
            assert row == reference, f"feature {row[0]} differs from Google's"
        for feature in features:
            counts["windows>1"] += feature.doc_span_index > 0
            counts["not_max"] += not all(feature.token_is_max_context.values())
            if job["is_training"]:
                example = examples[feature.example_index]
                counts["impossible"] += example.is_impossible
                counts["cls"] += feature.start_position == 0 and not example.is_impossible
                doc = sorted(feature.token_to_orig_map)
                counts["edge"] += feature.start_position == doc[0] or feature.end_position == doc[-1]
    assert all(counts.values()), counts


def test_answer_start_not_matching_text_names_file_question_and_field(tmp_path):
    data = squad_data(paragraphs=1, fortunes_per_context=3, questions=2, version_2=False, training=True)
    answer = data["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]
    answer["answer_start"] += 1
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError) as caught:
        read_squad_examples(path, is_training=True)
    message = str(caught.value)
    assert str(path) in message and "p0q1" in message and "answers[0].answer_start" in message
    assert "\n" not in message


@pytest.mark.parametrize("version_2", [False, True])
def test_write_features_is_run_squads_feature_writer_file(google, version_2):
    """``finetune --task answer --write-features``: TensorFlow reads the file back with run_squad's own
    parsing (input_fn_builder's name_to_features and _decode_record) and gets the windows Google's
    convert_examples_to_features makes (unique ids, ids, mask, segments, start and end positions); every
    feature of every record (is_impossible too) equals what Google's FeatureWriter writes for them.
    (minibert writes the file in the ``google`` fixture, before the one TensorFlow run reads it.)"""
    _, google, written = google[("write", version_2)]
    assert written["code"] == 0
    assert written["out"].strip().startswith(f"{written['path']}: ")
    expected = [{"unique_ids": f[0], "input_ids": f[6], "input_mask": f[7], "segment_ids": f[8],
                 "start_positions": f[9], "end_positions": f[10]} for f in google["features"]]  # fmt: skip
    assert len(google["read_back"]) == len(expected) > len(google["examples"])  # several windows per question
    for row, (read, reference) in enumerate(zip(google["read_back"], expected)):
        assert read == reference, f"record {row} (unique id {reference['unique_ids']}) differs from Google's"
    ours, theirs = google["records"]
    assert ours == theirs, "the records differ from those Google's FeatureWriter writes"
    impossible = sum(record["is_impossible"][1] == [1] for record in ours)
    assert (impossible > 0) == version_2 and any(row["start_positions"] == 0 for row in expected)
