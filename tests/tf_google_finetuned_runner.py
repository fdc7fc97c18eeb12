"""Runs INSIDE the TensorFlow venv (tf_reference.py makes it): fine-tunes a tiny BERT with Google's own
run_classifier.py or run_squad.py graph (bert-tensorflow 1.0.4), saves the checkpoint as their
Estimator does, and computes the logits of that checkpoint for a few inputs.

    python tf_google_finetuned_runner.py REQUEST.json RESULT.json

REQUEST: {"script": "run_classifier" | "run_squad", "config": bert_config.json's fields, "num_labels": K,
"output_dir": dir, "seed": int, "learning_rate": float, "steps": int, "train": {"input_ids", "input_mask",
"segment_ids", "labels" | "start_positions", "end_positions"}, "eval": {"input_ids", "input_mask",
"segment_ids"}}. The graph is ``create_model`` of that script (is_training=True), its loss trained for
``steps`` steps with ``optimization.create_optimizer`` (AdamWeightDecayOptimizer: ``adam_m``/``adam_v``
slots, ``global_step``), saved with ``tf.train.Saver`` as ``output_dir/model.ckpt-STEPS`` (+ the
``checkpoint`` state file and the meta graph, as the Estimator writes them). Then a second graph,
``create_model`` with is_training=False, restores it and computes the logits of ``eval``.
RESULT: {"prefix", "variables": [[name, shape], ...] as tf.train.list_variables reads the checkpoint,
"head": {name: values} of the head's variables, "logits" (classifier: (B, K)) or "start_logits" and
"end_logits" (SQuAD: (B, T))}.

Two pieces of TensorFlow 1 that TensorFlow 2.21 no longer has are put back, each as TF 1.15 computed it:
``tf.contrib.layers.layer_norm`` (modeling.layer_norm: variables ``beta`` (zeros) and ``gamma`` (ones)
in scope ``LayerNorm``; ``tf.nn.moments`` over the last axis, then ``tf.nn.batch_normalization`` with
variance_epsilon 1e-12) and ``tf.layers.dense`` (the pooler: ``kernel``, ``bias`` in scope ``dense``,
matmul, bias_add, activation). Google's ``gelu`` (modeling.gelu) is the tanh approximation.
Only one of run_classifier and run_squad is imported per process: both define the same absl flags.
"""

import json
import os
import sys
import types

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

tf.disable_v2_behavior()


def layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None):
    """tf.contrib.layers.layer_norm (TF 1.15) for BERT's use: normalised over the last axis."""
    assert begin_norm_axis == -1 and begin_params_axis == -1
    with tf.variable_scope(scope, "LayerNorm", [inputs]):
        shape = inputs.shape[-1:]
        beta = tf.get_variable("beta", shape=shape, dtype=inputs.dtype, initializer=tf.zeros_initializer())
        gamma = tf.get_variable("gamma", shape=shape, dtype=inputs.dtype, initializer=tf.ones_initializer())
        mean, variance = tf.nn.moments(inputs, [inputs.shape.ndims - 1], keep_dims=True)
        return tf.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma, variance_epsilon=1e-12)


def dense(inputs, units, activation=None, kernel_initializer=None, name=None):
    """tf.layers.dense (TF 1.15) for a rank-2 input."""
    with tf.variable_scope(name, "dense"):
        kernel = tf.get_variable("kernel", [inputs.shape[-1], units], initializer=kernel_initializer)
        bias = tf.get_variable("bias", [units], initializer=tf.zeros_initializer())
        outputs = tf.nn.bias_add(tf.matmul(inputs, kernel), bias)
        return outputs if activation is None else activation(outputs)


contrib = types.ModuleType("tensorflow.contrib")
contrib.layers = types.ModuleType("tensorflow.contrib.layers")
contrib.layers.layer_norm = layer_norm
sys.modules["tensorflow.contrib"] = contrib
sys.modules["tensorflow.contrib.layers"] = contrib.layers

from absl import flags  # noqa: E402
from bert import modeling, optimization  # noqa: E402


class TensorFlowWithLayers(types.ModuleType):
    """tf.compat.v1 as modeling.py sees it, with ``layers.dense`` put back."""

    layers = types.SimpleNamespace(dense=dense)

    def __getattr__(self, name):
        return getattr(tf, name)


modeling.tf = TensorFlowWithLayers("tensorflow.compat.v1")


def placeholders(batch, length):
    return [tf.placeholder(tf.int32, [batch, length], name=name) for name in ("input_ids", "input_mask", "segment_ids")]


def feed(inputs, tensors):
    return {
        tensor: np.array(inputs[name], np.int32)
        for tensor, name in zip(tensors, ("input_ids", "input_mask", "segment_ids"))
    }


def build(script, request, is_training, inputs):
    """(loss or None, {name: output}) of the script's create_model on placeholders shaped like ``inputs``."""
    config = modeling.BertConfig.from_dict(request["config"])
    batch, length = np.array(inputs["input_ids"]).shape
    ids, mask, segments = placeholders(batch, length)
    if script.__name__.endswith("run_classifier"):
        labels = tf.placeholder(tf.int32, [batch], name="labels")
        loss, _, logits, _ = script.create_model(
            config, is_training, ids, mask, segments, labels, request["num_labels"], False
        )
        return loss, {"logits": logits}, [ids, mask, segments, labels]
    start_logits, end_logits = script.create_model(config, is_training, ids, mask, segments, False)
    starts = tf.placeholder(tf.int32, [batch], name="start_positions")
    ends = tf.placeholder(tf.int32, [batch], name="end_positions")

    def compute_loss(logits, positions):  # run_squad.model_fn_builder's, as it is written there
        one_hot_positions = tf.one_hot(positions, depth=length, dtype=tf.float32)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        return -tf.reduce_mean(tf.reduce_sum(one_hot_positions * log_probs, axis=-1))

    loss = (compute_loss(start_logits, starts) + compute_loss(end_logits, ends)) / 2.0
    return loss, {"start_logits": start_logits, "end_logits": end_logits}, [ids, mask, segments, starts, ends]


def train_and_save(script, request):
    train = request["train"]
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(request["seed"])
        loss, _, tensors = build(script, request, True, train)
        train_op = optimization.create_optimizer(loss, request["learning_rate"], request["steps"], 0, False)
        saver = tf.train.Saver()
        targets = ["labels"] if len(tensors) == 4 else ["start_positions", "end_positions"]
        feeds = feed(train, tensors[:3])
        feeds.update({tensor: np.array(train[name], np.int32) for tensor, name in zip(tensors[3:], targets)})
        with tf.Session(graph=graph) as session:
            session.run(tf.global_variables_initializer())
            for _ in range(request["steps"]):
                session.run(train_op, feeds)
            step = session.run(tf.train.get_global_step())
            return saver.save(session, os.path.join(request["output_dir"], "model.ckpt"), global_step=step)


def evaluate(script, request, prefix):
    graph = tf.Graph()
    with graph.as_default():
        _, outputs, tensors = build(script, request, False, request["eval"])
        with tf.Session(graph=graph) as session:
            tf.train.Saver().restore(session, prefix)  # the model's variables only: no optimizer in this graph
            values = session.run(outputs, feed(request["eval"], tensors[:3]))
    return {name: value.tolist() for name, value in values.items()}


def main(request_path, result_path):
    request = json.loads(open(request_path, encoding="utf-8").read())
    if request["script"] == "run_classifier":
        from bert import run_classifier as script

        head = ["output_weights", "output_bias"]
    else:
        from bert import run_squad as script

        head = ["cls/squad/output_weights", "cls/squad/output_bias"]
    flags.FLAGS([request["script"]])
    prefix = train_and_save(script, request)
    result = {
        "prefix": prefix,
        "variables": [[name, list(shape)] for name, shape in tf.train.list_variables(prefix)],
        "head": {name: tf.train.load_variable(prefix, name).tolist() for name in head},
    }
    result.update(evaluate(script, request, prefix))
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
