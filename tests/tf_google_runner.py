"""Runs INSIDE the TensorFlow venv (tf_reference.py starts it): Google's code and TensorFlow's reader.

    python tf_google_runner.py REQUEST.json RESULT.json

TensorFlow takes seconds to import, so one process runs many jobs. The request names the one
version of Google's script the process imports ("script": google-research/bert's file as a path,
or null for bert-tensorflow 1.0.4's module: both define the same absl flags, so not both), and the
jobs, each a dict with a "mode":
- "create": Google's ``main`` with "flags" (parsed afresh, defaults reset), then its output files
  read back; also "read_paths", other TFRecord files, read the same way; with "arrays_dir", each
  file's features are written there as an .npz of arrays (one row an instance) and the result
  names the files: a sweep's millions of ids cost seconds to send as JSON; with "wait_for", the
  "read_paths" are read once that file exists (the test makes them while Google's script runs);
- "read": TFRecord files read with tf.data.TFRecordDataset (CRCs checked) and
  tf.io.parse_single_example (run_pretraining.py's feature spec);
- "read_each": whether TensorFlow reads each of "paths" or refuses it, and what it says;
- "tokenize": FullTokenizer's pieces of each of "lines" (and BasicTokenizer's words: "words"),
  with "preserve_unused_tokens" if the job says so;
- "calls": Google's functions called directly, each with its own random.Random(seed); each result
  comes with the rng's next random() after the call, which shows the same numbers were drawn.
The result: one dict per job.
"""

import importlib
import importlib.util
import json
import os
import random
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def feature_spec(max_seq_length, max_predictions):
    import tensorflow as tf

    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def read_records(paths, max_seq_length, max_predictions):
    import tensorflow as tf

    spec = feature_spec(max_seq_length, max_predictions)
    files = []
    for path in paths:
        examples = []
        dataset = tf.data.TFRecordDataset([path]).map(lambda record: tf.io.parse_single_example(record, spec))
        for batch in dataset.batch(4096):
            columns = {name: batch[name].numpy().tolist() for name in spec}
            examples += [{name: columns[name][row] for name in spec} for row in range(len(columns["input_ids"]))]
        files.append(examples)
    return files


def save_arrays(paths, max_seq_length, max_predictions, prefix):
    """Each file's features, read as read_records reads them, saved as PREFIX{index}.npz: one array
    per feature, a row per instance, in order. Returns the .npz paths."""
    import numpy as np
    import tensorflow as tf

    spec = feature_spec(max_seq_length, max_predictions)
    saved = []
    for index, path in enumerate(paths):
        dataset = tf.data.TFRecordDataset([path]).map(lambda record: tf.io.parse_single_example(record, spec))
        batches = [{name: batch[name].numpy() for name in spec} for batch in dataset.batch(4096)]
        columns = {name: np.concatenate([batch[name] for batch in batches]) if batches
                   else np.zeros((0, *spec[name].shape), spec[name].dtype.as_numpy_dtype) for name in spec}  # fmt: skip
        saved.append(f"{prefix}{index}.npz")
        np.savez(saved[-1], **columns)
    return saved


def read_outcome(path):
    import tensorflow as tf

    try:
        return f"read {sum(1 for _ in tf.data.TFRecordDataset([path]))} records"
    except Exception as error:  # noqa: BLE001 - what TensorFlow says is the result
        return f"refused: {type(error).__name__}: {str(error).splitlines()[0]}"


def load_google(script):
    if not script:
        return importlib.import_module("bert.create_pretraining_data")
    spec = importlib.util.spec_from_file_location("google_create_pretraining_data", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def create(google, job):
    flags = job["flags"]
    google.FLAGS.unparse_flags()
    google.FLAGS(["x"] + [f"--{name}={value}" for name, value in flags.items()])
    result = {"error": None}
    try:
        google.main(None)
    except Exception as error:  # noqa: BLE001 - reported to the test, which decides
        result["error"] = f"{type(error).__name__}: {error}"
        return result
    length, predictions = flags["max_seq_length"], flags["max_predictions_per_seq"]
    if job.get("arrays_dir"):
        prefix = os.path.join(job["arrays_dir"], "")
        result["instances"] = save_arrays(flags["output_file"].split(","), length, predictions, prefix + "google")
        wait_for(job.get("wait_for"))
        if job.get("read_paths"):
            result["read"] = save_arrays(job["read_paths"], length, predictions, prefix + "read")
        return result
    result["instances"] = read_records(flags["output_file"].split(","), length, predictions)
    wait_for(job.get("wait_for"))
    if job.get("read_paths"):
        result["read"] = read_records(job["read_paths"], length, predictions)
    return result


def wait_for(path, seconds=1800):
    deadline = time.monotonic() + seconds
    while path and not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {seconds} s")
        time.sleep(0.05)


def call(google, job):
    google.FLAGS.unparse_flags()
    google.FLAGS(["x"])
    results = []
    for item in job["calls"]:
        if hasattr(google.FLAGS, "do_whole_word_mask"):
            google.FLAGS.do_whole_word_mask = item.get("whole_word_mask", False)
        rng = random.Random(item["seed"])
        args = item["args"]
        if item["function"] == "create_masked_lm_predictions":
            tokens, positions, labels = google.create_masked_lm_predictions(
                args["tokens"], args["masked_lm_prob"], args["max_predictions"], args["vocab_words"], rng
            )
            value = {"tokens": tokens, "positions": positions, "labels": labels}
        elif item["function"] == "truncate_seq_pair":
            tokens_a, tokens_b = list(args["tokens_a"]), list(args["tokens_b"])
            google.truncate_seq_pair(tokens_a, tokens_b, args["max_num_tokens"], rng)
            value = {"tokens_a": tokens_a, "tokens_b": tokens_b}
        elif item["function"] == "create_instances_from_document":
            instances = google.create_instances_from_document(
                args["all_documents"],
                args["document_index"],
                args["max_seq_length"],
                args["short_seq_prob"],
                args["masked_lm_prob"],
                args["max_predictions"],
                args["vocab_words"],
                rng,
            )
            value = [
                {
                    "tokens": i.tokens,
                    "segment_ids": i.segment_ids,
                    "positions": i.masked_lm_positions,
                    "labels": i.masked_lm_labels,
                    "is_random_next": i.is_random_next,
                }
                for i in instances
            ]
        else:
            raise ValueError(item["function"])
        results.append({"value": value, "next_draw": rng.random()})
    return {"results": results}


def tokenize(job):
    from bert import tokenization

    tokenization.FLAGS(["x"])  # its absl flags (preserve_unused_tokens) must be parsed first
    tokenization.FLAGS.preserve_unused_tokens = job.get("preserve_unused_tokens", False)
    tokenizer = tokenization.FullTokenizer(job["vocab_file"], do_lower_case=job["do_lower_case"])
    words = [tokenizer.basic_tokenizer.tokenize(line) for line in job["lines"]]
    # FullTokenizer.tokenize runs as written, its BasicTokenizer.tokenize(line) answered from the
    # words above (the same function of the same line) instead of tokenizing each line twice.
    by_line, basic = dict(zip(job["lines"], words)), tokenizer.basic_tokenizer.tokenize
    tokenizer.basic_tokenizer.tokenize = lambda text: by_line[text] if text in by_line else basic(text)
    return {"pieces": [tokenizer.tokenize(line) for line in job["lines"]], "words": words}


def main():
    with open(sys.argv[1]) as handle:
        request = json.load(handle)
    google = load_google(request.get("script"))
    results = []
    for job in request["jobs"]:
        if job["mode"] == "create":
            results.append(create(google, job))
        elif job["mode"] == "read":
            results.append({"instances": read_records(job["paths"], job["max_seq_length"], job["max_predictions"])})
        elif job["mode"] == "read_each":  # each file on its own: what TensorFlow says of it
            results.append({"outcomes": [read_outcome(path) for path in job["paths"]]})
        elif job["mode"] == "tokenize":
            results.append(tokenize(job))
        elif job["mode"] == "calls":
            results.append(call(google, job))
        else:
            raise ValueError(job["mode"])
    with open(sys.argv[2], "w") as handle:
        json.dump(results, handle)


if __name__ == "__main__":
    main()
