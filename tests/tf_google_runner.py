"""Runs INSIDE the TensorFlow venv (tf_reference.py starts it): Google's code and TensorFlow's reader.

    python tf_google_runner.py REQUEST.json RESULT.json

The request's "mode":
- "create": run Google's create_pretraining_data.py (bert-tensorflow 1.0.4's module, or, with
  "script", google-research/bert's file given as a path) with "flags", then read its output files;
- "read": read TFRecord files with tf.data.TFRecordDataset (CRCs checked) and
  tf.io.parse_single_example (run_pretraining.py's feature spec);
- "tokenize": FullTokenizer's pieces of each of "lines";
- "calls": Google's functions called directly (google-research/bert's file, "script"), each with
  its own random.Random(seed); each result comes with the rng's next random() after the call, which
  shows that the same random numbers were drawn.
"create" may also read "read_paths" (other TFRecord files) in the same run.
"""

import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def read_records(paths, max_seq_length, max_predictions):
    import tensorflow as tf

    spec = {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    files = []
    for path in paths:
        examples = []
        for record in tf.data.TFRecordDataset([path]):
            parsed = tf.io.parse_single_example(record, spec)
            examples.append({name: parsed[name].numpy().tolist() for name in spec})
        files.append(examples)
    return files


def run_calls(script, calls):
    import importlib.util
    import random

    spec = importlib.util.spec_from_file_location("google_create_pretraining_data", script)
    google = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(google)
    google.FLAGS(["x"])
    results = []
    for call in calls:
        google.FLAGS.do_whole_word_mask = call.get("whole_word_mask", False)
        rng = random.Random(call["seed"])
        args = call["args"]
        if call["function"] == "create_masked_lm_predictions":
            tokens, positions, labels = google.create_masked_lm_predictions(
                args["tokens"], args["masked_lm_prob"], args["max_predictions"], args["vocab_words"], rng)
            value = {"tokens": tokens, "positions": positions, "labels": labels}
        elif call["function"] == "truncate_seq_pair":
            tokens_a, tokens_b = list(args["tokens_a"]), list(args["tokens_b"])
            google.truncate_seq_pair(tokens_a, tokens_b, args["max_num_tokens"], rng)
            value = {"tokens_a": tokens_a, "tokens_b": tokens_b}
        elif call["function"] == "create_instances_from_document":
            instances = google.create_instances_from_document(
                args["all_documents"], args["document_index"], args["max_seq_length"], args["short_seq_prob"],
                args["masked_lm_prob"], args["max_predictions"], args["vocab_words"], rng)
            value = [{"tokens": i.tokens, "segment_ids": i.segment_ids, "positions": i.masked_lm_positions,
                      "labels": i.masked_lm_labels, "is_random_next": i.is_random_next} for i in instances]
        else:
            raise ValueError(call["function"])
        results.append({"value": value, "next_draw": rng.random()})
    return results


def main():
    with open(sys.argv[1]) as handle:
        request = json.load(handle)
    result = {}
    if request["mode"] == "create":
        flags = [f"--{name}={value}" for name, value in request["flags"].items()]
        command = [sys.executable, request["script"]] if request.get("script") else [
            sys.executable, "-m", "bert.create_pretraining_data"]
        run = subprocess.run(command + flags, capture_output=True, text=True, cwd=request.get("cwd"))
        result["returncode"] = run.returncode
        result["stderr_tail"] = run.stderr[-3000:]
        if run.returncode == 0:
            paths = request["flags"]["output_file"].split(",")
            result["instances"] = read_records(paths, request["flags"]["max_seq_length"],
                                               request["flags"]["max_predictions_per_seq"])
        if request.get("read_paths"):
            result["read"] = read_records(request["read_paths"], request["flags"]["max_seq_length"],
                                          request["flags"]["max_predictions_per_seq"])
    elif request["mode"] == "read":
        result["instances"] = read_records(request["paths"], request["max_seq_length"], request["max_predictions"])
    elif request["mode"] == "tokenize":
        from bert import tokenization

        tokenization.FLAGS(["x"])  # its absl flags (preserve_unused_tokens) must be parsed first
        tokenizer = tokenization.FullTokenizer(request["vocab_file"], do_lower_case=request["do_lower_case"])
        result["pieces"] = [tokenizer.tokenize(line) for line in request["lines"]]
    elif request["mode"] == "calls":
        result["results"] = run_calls(request["script"], request["calls"])
    with open(sys.argv[2], "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
