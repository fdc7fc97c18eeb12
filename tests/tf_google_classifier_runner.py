"""Runs INSIDE the TensorFlow venv (tf_reference.py makes it): Google's run_classifier.py processors
and convert_single_example (bert-tensorflow 1.0.4) on files the test wrote.

    python tf_google_classifier_runner.py REQUEST.json RESULT.json

REQUEST: {"vocab": path, "do_lower_case": bool, "max_seq_length": int, "jobs": [{"processor":
"MrpcProcessor", "data_dir": dir, "set": "train" | "dev"}, ...]}. RESULT: per job, the labels,
the examples (guid, text_a, text_b, label) and their features.

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
        results.append({
            "labels": labels,
            "examples": [[e.guid, e.text_a, e.text_b, e.label] for e in examples],
            "features": [[f.input_ids, f.input_mask, f.segment_ids, f.label_id] for f in features],
        })
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump(results, handle)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
