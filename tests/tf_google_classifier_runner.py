"""Runs INSIDE the TensorFlow venv (tf_reference.py makes it): Google's run_classifier.py processors
and convert_single_example (bert-tensorflow 1.0.4) on files the test wrote.

    python tf_google_classifier_runner.py REQUEST.json RESULT.json

REQUEST: {"vocab": path, "do_lower_case": bool, "max_seq_length": int, "jobs": [{"processor":
"MrpcProcessor", "data_dir": dir, "set": "train" | "dev", "tfrecord": optional path}, ...]}.
RESULT: per job, the labels, the examples (guid, text_a, text_b, label) and their features, and the
TFRecord file read back as run_classifier's input_fn parses it.

bert-tensorflow's modeling.py imports ``tensorflow.contrib`` (TensorFlow 1) for its layer norm;
the processors and features do not use it, so an empty stand-in module is put in its place.
"""

import json
import os
import sys
import types

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
contrib = types.ModuleType("tensorflow.contrib")
contrib.layers = types.ModuleType("tensorflow.contrib.layers")
sys.modules["tensorflow.contrib"] = contrib

from absl import flags  # noqa: E402
from bert import run_classifier, tokenization  # noqa: E402

flags.FLAGS(["tf_google_classifier_runner"])  # tokenization.py reads --preserve_unused_tokens (default False)


def read_records(path, seq_length):
    """file_based_input_fn_builder's name_to_features and _decode_record (the int64 → int32 cast)."""
    import tensorflow as tf

    spec = {
        "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "label_ids": tf.io.FixedLenFeature([], tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }
    rows = []
    for record in tf.data.TFRecordDataset([path]):
        example = tf.io.parse_single_example(record, spec)
        row = [example[name].numpy().tolist() for name in ("input_ids", "input_mask", "segment_ids", "label_ids")]
        rows.append(row + [int(example["is_real_example"].numpy())])
    return rows


def main(request_path, result_path):
    request = json.loads(open(request_path, encoding="utf-8").read())
    tokenizer = tokenization.FullTokenizer(request["vocab"], do_lower_case=request["do_lower_case"])
    results = []
    for job in request["jobs"]:
        processor = getattr(run_classifier, job["processor"])()
        read = processor.get_train_examples if job["set"] == "train" else processor.get_dev_examples
        examples = read(job["data_dir"])
        labels = processor.get_labels()
        features = [run_classifier.convert_single_example(index, example, labels, request["max_seq_length"], tokenizer)
                    for index, example in enumerate(examples)]
        read_back = None
        if job.get("tfrecord"):  # minibert's --write-features file, read as run_classifier's input_fn reads it
            read_back = read_records(job["tfrecord"], request["max_seq_length"])
        results.append({
            "read_back": read_back,
            "labels": labels,
            "examples": [[e.guid, e.text_a, e.text_b, e.label] for e in examples],
            "features": [[f.input_ids, f.input_mask, f.segment_ids, f.label_id] for f in features],
        })
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump(results, handle)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
