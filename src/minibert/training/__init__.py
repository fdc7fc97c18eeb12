"""Making a BERT (the paper's section 3.1): the pre-training data as Google's
``create_pretraining_data.py`` cuts it, and the training loop with Google's own step.

BERT was pre-trained on pairs of text segments ``[CLS] A [SEP] B [SEP]`` with two tasks: predict
the pieces hidden behind ``[MASK]`` (masked LM) and tell whether B followed A in the document or
was drawn from another one (next-sentence prediction). The data, the same instances Google's
script makes for the same text, vocabulary, flags and seed:

    vocabulary.py   vocab.txt and the tokenizer set up as Google's FullTokenizer
    documents.py    input files → documents → sentences → piece ids (Google's line rules)
    options.py      InstanceOptions: the script's flags as one checked value
    instances.py    documents → instances: segments A and B, random next, truncation
    masking.py      the masked-LM predictions: 80% [MASK], 10% kept, 10% a random piece
    records.py      instances → padded features → TFRecord files, round-robin over shards
    create.py       create_pretraining_data: the whole script as one function

The training, Google's ``run_pretraining.py`` step written out:

    data.py         the TFRecord instances read and checked, batch k = instances kB … kB+B-1
    step.py         losses, AdamWeightDecay, the learning-rate schedule, global-norm clipping
    loop.py         PretrainOptions and pretrain(): the loop, top-down
    checkpoint.py   the run directory and the training state (resume bit for bit)
    arithmetic.py   the threads and GEMM backend the steps were computed with (a resume follows them)
    distributed.py  torchrun: each process its share of every batch, gradients all-reduced
    precision.py    --bf16: whether bf16 autocast is faster than float32 on this CPU (measured, cached)
    plot.py         the loss curve

``import minibert`` does not import this package; the ``minibert pretraining-data`` and ``minibert
pretrain`` commands do.
"""

__all__ = ["PretrainOptions", "pretrain"]


def __getattr__(name: str):
    if name in __all__:  # the loop only when asked for: pretraining-data needs none of it
        from . import loop

        return getattr(loop, name)
    raise AttributeError(f"module 'minibert.training' has no attribute {name!r}")
