"""Runs INSIDE the TensorFlow venv (tf_reference.py makes it): Google's run_squad.py (bert-tensorflow
1.0.4) read_squad_examples, convert_examples_to_features and write_predictions on files the test wrote.

    python tf_google_squad_runner.py REQUEST.json RESULT.json

REQUEST: {"vocab": path, "do_lower_case": bool, "max_seq_length": int, "doc_stride": int,
"max_query_length": int, "jobs": [{"file": path, "is_training": bool, "version_2": bool, "logits":
optional {unique_id: [start_logits, end_logits]}, "null_score_diff_threshold": float, "output_dir":
path, "tfrecord": optional path, and optionally its own "max_seq_length", "doc_stride",
"max_query_length" (the request's otherwise: one run, one TensorFlow import, for jobs of several
sizes)}]}. RESULT: per job, the examples and the features (every field); when logits are given, the
files write_predictions wrote (predictions, nbest, null odds); when a tfrecord (minibert's
--write-features file) is given, its records read back as run_squad's input_fn reads them ("read_back"),
and every feature of its records and of the file Google's FeatureWriter writes for the same features
("records": [minibert's, Google's]).

As in tf_google_classifier_runner.py, modeling.py's ``tensorflow.contrib`` import gets an empty stand-in.
"""

import collections
import json
import os
import sys
import types

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
contrib = types.ModuleType("tensorflow.contrib")
contrib.layers = types.ModuleType("tensorflow.contrib.layers")
sys.modules["tensorflow.contrib"] = contrib

import tensorflow.compat.v1 as tf  # noqa: E402
from absl import flags  # noqa: E402
from bert import run_squad, tokenization  # noqa: E402

flags.FLAGS(["tf_google_squad_runner"])
RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])


def run_job(job, request, tokenizer):
    flags.FLAGS.version_2_with_negative = job["version_2"]
    flags.FLAGS.null_score_diff_threshold = job.get("null_score_diff_threshold", 0.0)
    examples = run_squad.read_squad_examples(job["file"], is_training=job["is_training"])
    features = []
    max_seq_length, doc_stride, max_query_length = (job.get(name, request[name]) for name in
                                                    ("max_seq_length", "doc_stride", "max_query_length"))
    run_squad.convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                                           job["is_training"], features.append)
    result = {
        "examples": [[e.qas_id, e.question_text, e.doc_tokens, e.orig_answer_text, e.start_position,
                      e.end_position, e.is_impossible] for e in examples],
        "features": [[f.unique_id, f.example_index, f.doc_span_index, f.tokens,
                      sorted(f.token_to_orig_map.items()), sorted(f.token_is_max_context.items()),
                      f.input_ids, f.input_mask, f.segment_ids, f.start_position, f.end_position]
                     for f in features],
    }
    if job.get("tfrecord"):  # minibert's --write-features file
        result["read_back"] = read_as_run_squad(job["tfrecord"], max_seq_length, job["is_training"])
        written = os.path.join(os.path.dirname(job["tfrecord"]), "google-" + os.path.basename(job["tfrecord"]))
        writer = run_squad.FeatureWriter(written, is_training=job["is_training"])
        for feature in features:
            writer.process_feature(feature)
        writer.close()
        result["records"] = [every_feature(job["tfrecord"]), every_feature(written)]
    if job.get("logits"):
        results = [RawResult(int(k), v[0], v[1]) for k, v in job["logits"].items()]
        out = job["output_dir"]
        names = [os.path.join(out, name) for name in ("predictions.json", "nbest_predictions.json", "null_odds.json")]
        run_squad.write_predictions(examples, features, results, 20, 30, request["do_lower_case"], *names)
        result["written"] = {os.path.basename(name): open(name, encoding="utf-8").read()
                             for name in names if os.path.exists(name)}
    return result


def read_as_run_squad(path, seq_length, is_training):
    """The file read as run_squad's input_fn reads it: input_fn_builder's own name_to_features and
    _decode_record (taken from its closure), in the file's order (no repeat, no shuffle)."""
    input_fn = run_squad.input_fn_builder(path, seq_length, is_training, drop_remainder=False)
    closure = dict(zip(input_fn.__code__.co_freevars, (cell.cell_contents for cell in input_fn.__closure__)))
    name_to_features, decode = closure["name_to_features"], closure["_decode_record"]
    rows = []
    for record in tf.data.TFRecordDataset([path]):
        example = decode(record, name_to_features)
        rows.append({name: example[name].numpy().tolist() for name in name_to_features})
    return rows


def every_feature(path):
    """Every record as {feature name: [kind, values]}: what a tf.train.Example holds, all of it."""
    rows = []
    for record in tf.data.TFRecordDataset([path]):
        example = tf.train.Example.FromString(record.numpy())
        rows.append({name: [feature.WhichOneof("kind"), list(getattr(feature, feature.WhichOneof("kind")).value)]
                     for name, feature in example.features.feature.items()})
    return rows


def main(request_path, result_path):
    request = json.loads(open(request_path, encoding="utf-8").read())
    tokenizer = tokenization.FullTokenizer(request["vocab"], do_lower_case=request["do_lower_case"])
    results = [run_job(job, request, tokenizer) for job in request["jobs"]]
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump(results, handle)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
