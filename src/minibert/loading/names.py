"""THE rename table: one row per BERT tensor, naming it as the hub, Google's TensorFlow and minibert do.

Checkpoints on the hub name tensors after transformers' module tree, and come in several dialects:

* Google's own repositories (google-bert/bert-base-uncased): a ``bert.`` prefix, the legacy
  ``LayerNorm.gamma`` / ``LayerNorm.beta`` names, and the pre-training heads under ``cls.``;
  the masked-LM decoder weight is tied to the word embeddings and usually absent.
* newer exports (sentence-transformers models such as all-MiniLM-L6-v2): no prefix,
  ``weight`` / ``bias``, and an ``embeddings.position_ids`` buffer.
* Google's TensorFlow checkpoints (the zips BERT was released as): ``bert/`` and slashes,
  ``kernel`` stored (in, out), ``gamma`` / ``beta``.

``RENAMES`` below is the one table from checkpoint names to minibert names; loading reads it
forwards (``checkpoint_to_minibert``), saving backwards (``minibert_to_checkpoint``), and
transformers_names.py answers transformers' module names with it:

    >>> checkpoint_to_minibert("bert.encoder.layer.3.attention.output.LayerNorm.gamma")
    'layers.3.attention_norm.weight'
    >>> checkpoint_to_minibert("bert/encoder/layer_3/attention/output/LayerNorm/gamma")
    'layers.3.attention_norm.weight'
    >>> minibert_to_checkpoint("layers.3.attention_norm.weight")
    'encoder.layer.3.attention.output.LayerNorm.weight'
"""

from __future__ import annotations

import re

# The rename table. Columns: the hub's name (PyTorch/safetensors checkpoints, after dropping the
# "bert." prefix and gamma/beta), Google's TensorFlow name (after dropping "bert/"), minibert's name.
# {n} = layer number. A row ending in "." is a prefix: the hub's and minibert's leaf (weight, bias)
# follows it; TensorFlow's leaves are named differently (see TF_LEAVES).
RENAMES: list[tuple[str, str, str]] = [
    ("embeddings.word_embeddings.", "embeddings/word_embeddings", "embeddings.word_embeddings."),
    ("embeddings.position_embeddings.", "embeddings/position_embeddings", "embeddings.position_embeddings."),
    ("embeddings.token_type_embeddings.", "embeddings/token_type_embeddings", "embeddings.token_type_embeddings."),
    ("embeddings.LayerNorm.", "embeddings/LayerNorm/", "embeddings.layer_norm."),
    ("encoder.layer.{n}.attention.self.query.", "encoder/layer_{n}/attention/self/query/",
     "layers.{n}.attention.query."),
    ("encoder.layer.{n}.attention.self.key.", "encoder/layer_{n}/attention/self/key/", "layers.{n}.attention.key."),
    ("encoder.layer.{n}.attention.self.value.", "encoder/layer_{n}/attention/self/value/",
     "layers.{n}.attention.value."),
    ("encoder.layer.{n}.attention.output.dense.", "encoder/layer_{n}/attention/output/dense/",
     "layers.{n}.attention.output."),
    ("encoder.layer.{n}.attention.output.LayerNorm.", "encoder/layer_{n}/attention/output/LayerNorm/",
     "layers.{n}.attention_norm."),
    ("encoder.layer.{n}.intermediate.dense.", "encoder/layer_{n}/intermediate/dense/",
     "layers.{n}.feed_forward.intermediate."),
    ("encoder.layer.{n}.output.dense.", "encoder/layer_{n}/output/dense/", "layers.{n}.feed_forward.output."),
    ("encoder.layer.{n}.output.LayerNorm.", "encoder/layer_{n}/output/LayerNorm/", "layers.{n}.output_norm."),
    ("pooler.dense.", "pooler/dense/", "pooler.dense."),
    # the heads (heads.py); BertModel ignores them. Google's run_classifier.py named its classifier
    # output_weights/output_bias at the top level, run_squad.py cls/squad/output_weights/bias.
    ("cls.predictions.transform.dense.", "cls/predictions/transform/dense/", "mlm_head.transform."),
    ("cls.predictions.transform.LayerNorm.", "cls/predictions/transform/LayerNorm/", "mlm_head.layer_norm."),
    ("cls.predictions.bias", "cls/predictions/output_bias", "mlm_head.bias"),
    ("cls.seq_relationship.", "cls/seq_relationship/output_", "nsp_head."),
    ("classifier.", "output_", "classifier."),
    ("qa_outputs.", "cls/squad/output_", "qa_outputs."),
]  # fmt: skip

# TensorFlow's leaf names → the hub's. A dense "kernel" is stored (in, out): PyTorch's Linear wants
# (out, in), so kernels are transposed; the NSP head's "output_weights" is already (2, H). An
# embedding table has no leaf ("").
TF_LEAVES = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias", "weights": "weight", "": "weight"}

# Tensors that checkpoints carry but minibert does not need: buffers it recomputes, and the
# masked-LM decoder, whose weight is the word embedding matrix and whose bias is cls.predictions.bias.
IGNORED_TENSORS = re.compile(
    r"^(embeddings\.position_ids|embeddings\.token_type_ids|cls\.predictions\.decoder\.(weight|bias))$"
)
# Each head's minibert prefix, and how a message names it (with the hub's names).
HEADS = {
    "mlm_head.": "the masked-LM head (cls.predictions.*)",
    "nsp_head.": "the next-sentence head (cls.seq_relationship.*)",
    "classifier.": "a classifier (classifier.*)",
    "qa_outputs.": "a question-answering head (qa_outputs.*)",
}
HEAD_PREFIXES = tuple(HEADS)
# The same heads as Google's TensorFlow checkpoints name them (run_pretraining.py, run_classifier.py, run_squad.py).
GOOGLE_HEADS = {
    "mlm_head.": "the masked-LM head (cls/predictions/*)",
    "nsp_head.": "the next-sentence head (cls/seq_relationship/*)",
    "classifier.": "run_classifier.py's classifier (output_weights, output_bias)",
    "qa_outputs.": "run_squad.py's question-answering head (cls/squad/output_*)",
}
TASK_HEADS = ("classifier.", "qa_outputs.")  # the fine-tuned ones: BertModel says it leaves them out
# A task head's weight as the hub and Google's scripts name it: how a checkpoint shows it has one.
CLASSIFIER_WEIGHTS = ("classifier.weight", "output_weights")  # the hub's; run_classifier.py's
ANSWER_WEIGHTS = ("qa_outputs.weight", "cls/squad/output_weights")  # the hub's; run_squad.py's
# The pooler is the encoder's, but classes without a use for it (BertForMaskedLM, token
# classification, QA) are built without it, as in transformers: it is loaded and reported like a head.
POOLER, POOLER_NAME = "pooler.", "the pooler (bert.pooler.*)"


def _compile(pattern: str) -> re.Pattern:
    return re.compile("^" + re.escape(pattern).replace(r"\{n\}", r"(?P<n>\d+)"))


_FORWARD = [(_compile(hub), ours) for hub, _, ours in RENAMES]
_BACKWARD = [(_compile(ours), hub) for hub, _, ours in RENAMES]
_FROM_TF = [(_compile(tf), ours) for _, tf, ours in RENAMES]
_TO_TF = [(_compile(ours), tf) for _, tf, ours in RENAMES]


def _first_rename(table, name: str) -> tuple[str, str] | None:
    """(renamed head, the rest of the name) by the first row of ``table`` that matches."""
    for pattern, replacement in table:
        match = pattern.match(name)
        if match:
            head = replacement.replace("{n}", match.group("n")) if "n" in match.groupdict() else replacement
            return head, name[match.end() :]
    return None


def checkpoint_to_minibert(name: str) -> str | None:
    """A checkpoint's tensor name → minibert's (None for a name the table does not know):
    ``bert.encoder.layer.3.attention.output.LayerNorm.gamma`` → ``layers.3.attention_norm.weight``, and
    Google's TensorFlow ``bert/encoder/layer_3/attention/output/LayerNorm/gamma`` → the same."""
    if "/" in name or name in ("output_weights", "output_bias"):  # Google's TF names (run_classifier's top level)
        renamed = _first_rename(_FROM_TF, name.removeprefix("bert/"))
        if renamed is None:
            return None
        head, leaf = renamed
        if not head.endswith("."):
            return head if leaf == "" else None
        leaf = leaf.removeprefix("/")
        return head + TF_LEAVES[leaf] if leaf in TF_LEAVES else None
    name = name.removeprefix("bert.")
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
    name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
    renamed = _first_rename(_FORWARD, name)
    return None if renamed is None else renamed[0] + renamed[1]


def minibert_to_checkpoint(name: str) -> str:
    """The inverse, to the hub's names: ``layers.3.attention_norm.weight`` →
    ``encoder.layer.3.attention.output.LayerNorm.weight``."""
    renamed = _first_rename(_BACKWARD, name)
    if renamed is None:
        raise KeyError(f"no checkpoint name for {name}")
    return renamed[0] + renamed[1]


def minibert_to_tf(name: str) -> str:
    """minibert's name → Google's TensorFlow name, as ``tf.train.list_variables`` shows it:
    ``layers.3.attention_norm.weight`` → ``bert/encoder/layer_3/attention/output/LayerNorm/gamma``,
    ``classifier.weight`` → ``output_weights`` (run_classifier.py's).

    >>> minibert_to_tf("layers.0.feed_forward.output.bias"), minibert_to_tf("embeddings.word_embeddings.weight")
    ('bert/encoder/layer_0/output/dense/bias', 'bert/embeddings/word_embeddings')
    """
    renamed = _first_rename(_TO_TF, name)
    if renamed is None:
        raise KeyError(f"no TensorFlow name for {name}")
    head, leaf = renamed
    if head.endswith("/"):  # a dense layer's kernel and bias, a LayerNorm's gamma and beta
        norm = "LayerNorm" in head
        leaf = {"weight": "gamma" if norm else "kernel", "bias": "beta" if norm else "bias"}.get(leaf, leaf)
    elif head.endswith("_"):  # output_weights, output_bias (the classifier, NSP and SQuAD heads)
        leaf = {"weight": "weights"}.get(leaf, leaf)
    elif leaf == "weight":  # an embedding table: no leaf
        leaf = ""
    return ("bert/" if head.startswith(("embeddings", "encoder", "pooler")) else "") + head + leaf
