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
import signal
from pathlib import Path

import pytest

from minibert.apps.cli import main
from minibert.errors import DataError
from minibert.training.tasks.head import load_tokenizer
from minibert.training.tasks.squad_examples import read_squad_examples
from minibert.training.tasks.squad_features import convert_examples_to_features, doc_spans, word_pieces
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
    for key, data, sizes in edge_files():  # contexts of no piece; a question leaving the context 1 piece
        path = directory / f"{'-'.join(map(str, key))}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        jobs[key] = {"file": str(path), "is_training": key[2], "version_2": key[1], **sizes}
    request = {"vocab": str(minilm_dir / "vocab.txt"), "do_lower_case": True, **WRITE_FEATURES,
               "jobs": list(jobs.values())}  # fmt: skip
    answers = dict(zip(jobs, google_squad(request)))
    return {key: (jobs.get(key), answers.get(key), extra.get(key)) for key in jobs.keys() | extra.keys()}


NO_PIECES = [  # an empty context (v2.0: an impossible question), a context of a zero-width space (and its answer)
    {"context": "", "qas": [{"id": "empty", "question": "what?", "answers": [], "is_impossible": True}]},
    {"context": "\u200b", "qas": [{"id": "zero-width", "question": "what?", "is_impossible": False,
                                   "answers": [{"text": "\u200b", "answer_start": 0}]}]},
]  # fmt: skip
ROOM_1 = {"max_seq_length": 20, "doc_stride": 8, "max_query_length": 16}  # 16 kept + 3: windows of 1 piece


def edge_files() -> list[tuple[tuple, dict, dict]]:
    """((name, version_2, training), the file's JSON, sizes): questions whose contexts give no piece among
    others, and questions (longer than 16 pieces) that leave their contexts 1 piece per window."""
    files = []
    for version_2, training in ((True, True), (True, False), (False, True), (False, False)):
        data = squad_data(paragraphs=2, fortunes_per_context=2, questions=3, version_2=version_2, training=training)
        no_pieces = NO_PIECES if version_2 else NO_PIECES[1:]  # (a v1.1 question needs an answer: not on "")
        data["data"].append({"title": "no pieces", "paragraphs": no_pieces})
        files.append((("no-pieces", version_2, training), data, WRITE_FEATURES))
    room = squad_data(paragraphs=1, fortunes_per_context=1, questions=3, version_2=False, training=True)
    files.append((("room-1", False, True), room, ROOM_1))
    return files


def test_contexts_without_pieces_and_windows_of_one_piece_equal_googles(google, minilm_dir):
    """A context with no piece (empty, or a zero-width space) gets no window, as in Google's code (its
    question is still read); a question keeping 16 pieces in max_seq_length 20 leaves 1 piece per
    window, and the windows are Google's."""
    tokenizer = load_tokenizer(str(minilm_dir))
    for key, _, sizes in edge_files():
        job, expected, _ = google[key]
        examples, _ = read_squad_examples(job["file"], job["is_training"], job["version_2"])
        assert [as_google(example) for example in examples] == expected["examples"], key
        features = convert_examples_to_features(examples, tokenizer, is_training=job["is_training"], **sizes)
        assert [feature_row(feature) for feature in features] == expected["features"], key
        windowed = {examples[feature.example_index].qas_id for feature in features}
        if key[0] == "no-pieces":
            no_pieces = {"empty", "zero-width"} & {example.qas_id for example in examples}
            assert no_pieces and not no_pieces & windowed and len(windowed) == len(examples) - len(no_pieces), key
        else:
            one_piece = [feature for feature in features if feature.tokens.index("[SEP]") == 17]  # 16 kept
            assert len(one_piece) > 10 and all(len(f.token_to_orig_map) == 1 for f in one_piece), key


def test_a_question_leaving_no_room_for_its_context_is_refused_naming_it(minilm_dir, tmp_path):
    """Google's window loop never moves on when a question's kept pieces leave the context no room
    (max_seq_length − min(pieces, max_query_length) − 3 < 1: finetune hung, its memory growing): a
    DataError naming the file, the question, its pieces and both limits, before any window; the
    window loop itself refuses a window of no piece."""
    tokenizer = load_tokenizer(str(minilm_dir))
    data = squad_data(paragraphs=1, fortunes_per_context=1, questions=2, version_2=False, training=True)
    data["data"][0]["paragraphs"][0]["qas"][1]["question"] = "what is the name of the thing that the cat sat on"
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    examples, _ = read_squad_examples(path, is_training=True)
    assert len(word_pieces(tokenizer, examples[1].question_text)) == 12
    convert_examples_to_features(examples[1:], tokenizer, max_seq_length=16, max_query_length=12)  # 1 piece left
    convert_examples_to_features(examples[1:], tokenizer, max_seq_length=15, max_query_length=11)  # 11 kept: 1 left
    with pytest.raises(DataError) as caught, alarm_after(5):
        convert_examples_to_features(examples, tokenizer, max_seq_length=15, max_query_length=64, source="dev.json")
    assert str(caught.value) == (
        "dev.json: question 'p0q1' is 12 pieces, 12 kept (--max-query-length 64): with [CLS] and two [SEP] it "
        "leaves no room for the context in --max-seq-length 15; pass a --max-seq-length of at least 16 or a "
        "--max-query-length of at most 11")
    for max_pieces, doc_stride in ((0, 128), (-1, 128), (5, 0)):  # (these looped forever, -1 backwards, growing)
        with pytest.raises(ValueError, match="a window needs at least 1 piece and a stride of at least 1"), \
                alarm_after(3):
            doc_spans(10, max_pieces, doc_stride)


@contextlib.contextmanager
def alarm_after(seconds: int):
    """A TimeoutError after ``seconds`` (a loop that never ends fails the test instead of hanging it)."""
    def timed_out(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, timed_out)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("max_seq_length,doc_stride,max_query_length", SIZES)
def test_squad_features_equal_googles(google, minilm_dir, max_seq_length, doc_stride, max_query_length):
    """v1.1 and v2.0, training and evaluation: the same examples and every feature field as Google's;
    checked to exercise what matters: several windows per example, answers outside a window ([CLS]),
    answers on a window's first or last piece, pieces not in their best window, questions truncated."""
    tokenizer = load_tokenizer(str(minilm_dir))
    runs = [google[(max_seq_length, version_2, training)] for version_2 in (False, True) for training in (True, False)]
    jobs, google = [job for job, _, _ in runs], [answer for _, answer, _ in runs]
    counts = {"windows>1": 0, "cls": 0, "edge": 0, "not_max": 0, "impossible": 0}
    for job, expected in zip(jobs, google):
        examples, _ = read_squad_examples(job["file"], job["is_training"], job["version_2"])
        assert [as_google(example) for example in examples] == expected["examples"], job
        features = convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
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
