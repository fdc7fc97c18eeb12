"""Write a hub-layout BERT checkpoint as Google released BERT: a TensorFlow 1 checkpoint
(``bert_model.ckpt.index`` + ``.data-00000-of-00001``), ``bert_config.json`` and ``vocab.txt``.

Needs TensorFlow (``pip install tensorflow-cpu``) and safetensors; it does not use minibert, so the
checkpoints it writes test minibert's reader and rename table from the outside. The names follow
transformers' ``convert_bert_pytorch_checkpoint_to_original_tf.py`` (the reverse of its TF → PyTorch
converter): ``layer.N`` → ``layer_N``, ``.`` → ``/``, ``LayerNorm/weight|bias`` → ``gamma|beta``,
``weight`` → ``kernel`` with dense kernels transposed to (in, out), and Google's head names
``cls/predictions/output_bias`` and ``cls/seq_relationship/output_weights|output_bias``.

    python scripts/make_tf_checkpoint.py HUB_DIR OUT_DIR [--adam] [--seed 0]

``--adam`` adds what a pre-training checkpoint carries besides the model: ``.../adam_m`` and
``.../adam_v`` for every variable, and ``global_step``. tests/data/uncased_L-2_H-32_A-2 was
written with this script from tests/data/tiny_hub (see tests/test_formats_tf_checkpoint.py).

    python scripts/make_tf_checkpoint.py --foreign tests/data

writes the two checkpoints minibert must refuse: a TF2 object-based one (``tf.train.Checkpoint``)
and a TF1 one of another model, each beside a copy of the tiny model's bert_config.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np


def google_name(hub_name: str) -> tuple[str, bool]:
    """(Google's variable name, whether to transpose) for a hub tensor name."""
    name = hub_name if hub_name.startswith(("bert.", "cls.")) else "bert." + hub_name
    special = {
        "cls.predictions.bias": "cls/predictions/output_bias",
        "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",
        "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
    }
    if name in special:
        return special[name], False
    transpose = name.endswith(".weight") and ("dense" in name or re.search(r"attention\.self\.(query|key|value)", name))
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
    for old, new in (("layer.", "layer_"), ("word_embeddings.weight", "word_embeddings"),
                     ("position_embeddings.weight", "position_embeddings"),
                     ("token_type_embeddings.weight", "token_type_embeddings"), (".", "/"),
                     ("LayerNorm/weight", "LayerNorm/gamma"), ("LayerNorm/bias", "LayerNorm/beta"),
                     ("weight", "kernel")):  # fmt: skip
        name = name.replace(old, new)
    return name, bool(transpose)


def write_foreign_checkpoints(data_dir: Path) -> None:
    """A TF2 object-based checkpoint and a TF1 checkpoint of a non-BERT model, for refusal tests."""
    import tensorflow as tf

    config = data_dir / "uncased_L-2_H-32_A-2" / "bert_config.json"
    (data_dir / "tf2_object_checkpoint").mkdir(exist_ok=True)
    checkpoint = tf.train.Checkpoint(dense=tf.Variable(np.ones((4, 3), np.float32)))
    checkpoint.write(str(data_dir / "tf2_object_checkpoint" / "bert_model.ckpt"))
    shutil.copyfile(config, data_dir / "tf2_object_checkpoint" / "bert_config.json")
    (data_dir / "not_bert").mkdir(exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf.compat.v1.Variable(np.ones((4, 3), np.float32), name="dense/kernel"),
                     tf.compat.v1.Variable(np.zeros(3, np.float32), name="dense/bias")]  # fmt: skip
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(data_dir / "not_bert" / "bert_model.ckpt"), write_meta_graph=False,
                       write_state=False)  # fmt: skip
    shutil.copyfile(config, data_dir / "not_bert" / "bert_config.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hub_dir", type=Path, help="a hub-layout directory (or, with --foreign, tests/data)")
    parser.add_argument("out_dir", type=Path, nargs="?")
    parser.add_argument("--adam", action="store_true", help="add adam_m/adam_v slots and global_step")
    parser.add_argument("--foreign", action="store_true", help="write the refusal fixtures into HUB_DIR")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    if args.foreign:
        write_foreign_checkpoints(args.hub_dir)
        return
    if args.out_dir is None:
        parser.error("OUT_DIR is required")
    from safetensors.numpy import load_file

    weights = args.hub_dir / "model.safetensors"
    state = load_file(str(weights))
    rng = np.random.default_rng(args.seed)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for hub_name in sorted(state):
            if hub_name.endswith(("position_ids", "token_type_ids")) or "predictions.decoder" in hub_name:
                continue
            name, transpose = google_name(hub_name)
            value = state[hub_name].T if transpose else state[hub_name]
            variables.append(tf.compat.v1.Variable(np.ascontiguousarray(value), name=name))
            if args.adam:
                for slot in ("adam_m", "adam_v"):
                    noise = rng.standard_normal(value.shape).astype(value.dtype)
                    variables.append(tf.compat.v1.Variable(noise, name=f"{name}/{slot}"))
        if args.adam:
            variables.append(tf.compat.v1.Variable(np.int64(1000000), name="global_step"))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(args.out_dir / "bert_model.ckpt"), write_meta_graph=False,
                       write_state=False)  # fmt: skip

    config = json.loads((args.hub_dir / "config.json").read_text())
    google_config = {
        key: config[key]
        for key in (
            "attention_probs_dropout_prob",
            "hidden_act",
            "hidden_dropout_prob",
            "hidden_size",
            "initializer_range",
            "intermediate_size",
            "max_position_embeddings",
            "num_attention_heads",
            "num_hidden_layers",
            "type_vocab_size",
            "vocab_size",
        )
    }  # fmt: skip  (what Google's bert_config.json holds: no model_type)
    (args.out_dir / "bert_config.json").write_text(json.dumps(google_config, indent=2, sort_keys=True) + "\n")
    shutil.copyfile(args.hub_dir / "vocab.txt", args.out_dir / "vocab.txt")
    print(f"wrote {len(variables)} variables to {args.out_dir / 'bert_model.ckpt'}")


if __name__ == "__main__":
    main()
