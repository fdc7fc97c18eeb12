"""``minibert finetune``: a checkpoint fine-tuned on labelled examples by Google's step (training/finetune/).

    minibert finetune --model all-MiniLM-L6-v2 --train train.csv --dev dev.csv --output run \\
        --text-column sentence --label-column language --epochs 1 --batch-size 16
    minibert finetune --glue mrpc --model bert-base-uncased --train MRPC/train.tsv --dev MRPC/dev.tsv --output mrpc
    torchrun --nproc_per_node 2 -m minibert finetune ...      # data parallel: the same flags
    minibert plot run                                         # run/loss.png
    minibert classify --model run "a text"                    # the run folder is a classifier

The training room is imported when the command runs, not when the parser is built.
"""

from __future__ import annotations

import argparse

from .flag_types import positive_int


def add_parser(commands) -> None:
    """Add ``finetune`` to the ``minibert`` command's subparsers."""
    finetune = commands.add_parser("finetune", help="fine-tune a checkpoint on labelled examples (Google's step)")
    finetune.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    finetune.add_argument("--task", default="classify", choices=("classify", "regress", "multilabel", "tag", "answer"),
                          help="classify: one label per text or pair (default); regress: a score; multilabel: "
                          "any number of labels per text; tag: a label per word (CoNLL files); answer: "
                          "a span of the context (SQuAD JSON files)")  # fmt: skip
    finetune.add_argument("--version-2-with-negative", action="store_true",
                          help="answer: SQuAD v2.0 files (questions may be is_impossible)")
    finetune.add_argument("--doc-stride", type=positive_int, default=128,
                          help="answer: pieces between the starts of a long context's windows (default 128)")
    finetune.add_argument("--max-query-length", type=positive_int, default=64,
                          help="answer: the question's pieces kept (default 64)")
    finetune.add_argument("--null-score-diff-threshold", type=float, default=0.0,
                          help="answer, v2.0: predict no answer when null score − best score exceeds this (default 0)")
    finetune.add_argument("--model", required=True, help="a hub folder or id, Google's TF checkpoint, a pretrain run")
    finetune.add_argument("--train", required=True, help="labelled examples: a GLUE file (--glue), .csv, .tsv, .jsonl")
    finetune.add_argument("--dev", help="examples evaluated at each epoch's end with the task's metric")
    finetune.add_argument("--output", help="the run folder (a hub-layout checkpoint with the head)")
    finetune.add_argument("--write-features", metavar="FILE.tfrecord",
                          help="write --train's features in Google's TFRecord layout, then stop")  # fmt: skip
    finetune.add_argument("--glue", help="read --train/--dev as this GLUE task's files (mrpc, cola, mnli, xnli, "
                          "xnli-dev, sst-2, sts-b, qqp, qnli, rte, wnli)")  # fmt: skip
    finetune.add_argument("--text-column", default="text", help="a generic file's text column (default text)")
    finetune.add_argument("--pair-column", help="a generic file's second text (pairs), if any")
    finetune.add_argument("--label-column", default="label", help="a generic file's label column (default label)")
    finetune.add_argument("--labels", help="the labels in id order, comma-separated (default: the GLUE task's, or "
                          "the training file's, sorted)")  # fmt: skip
    finetune.add_argument("--label-separator", default="|",
                          help="multilabel: what joins a text's labels in its label field (default |)")  # fmt: skip
    finetune.add_argument("--label-all-pieces", action="store_true",
                          help="tag: every piece of a word carries its tag (default: the first piece)")  # fmt: skip
    finetune.add_argument("--epochs", type=float, default=3.0, help="passes over --train (default 3; may be 0.5)")
    finetune.add_argument("--batch-size", type=positive_int, default=32, help="examples per update (default 32)")
    finetune.add_argument("--learning-rate", type=float, default=2e-5, help="the peak rate (default 2e-5)")
    finetune.add_argument("--warmup-proportion", type=float, default=0.1,
                          help="the share of the steps warming up from 0 (default 0.1)")  # fmt: skip
    finetune.add_argument("--max-seq-length", type=positive_int, default=128, help="pieces per example (default 128)")
    finetune.add_argument("--weight-decay", type=float, default=0.01, help="default 0.01 (never LayerNorm or biases)")
    finetune.add_argument("--max-grad-norm", type=float, default=1.0, help="global gradient norm clip (default 1.0)")
    finetune.add_argument("--dropout", type=float, default=None, help="replace every dropout probability (0: exact)")
    finetune.add_argument("--seed", type=int, default=12345, help="the new head, the order, dropout (default 12345)")
    finetune.add_argument("--eval-every", type=positive_int, help="also evaluate --dev every this many steps")
    finetune.add_argument("--save-every", type=positive_int, help="also checkpoint every this many steps")
    finetune.add_argument("--seeds", type=positive_int, help="a sweep: this many seeds (--seed, --seed + 1, ...) "
                          "per learning rate, each its own run in --output, and a table of dev figures")  # fmt: skip
    finetune.add_argument("--learning-rates", help="a sweep: these peak rates, comma-separated (e.g. 2e-5,3e-5,5e-5)")
    finetune.add_argument("--resume", action="store_true", help="continue the run in --output from its checkpoint")
    finetune.set_defaults(run=cmd_finetune)


def cmd_finetune(args) -> None:
    from ..training.finetune import FinetuneOptions, finetune, write_training_features
    from .commands import CommandError

    if (args.output is None) == (args.write_features is None):
        raise CommandError("give --output (to fine-tune) or --write-features FILE.tfrecord (to write the features)")
    labels = tuple(label.strip() for label in args.labels.split(",")) if args.labels else None
    options = FinetuneOptions(
        model=args.model, train=args.train, output=args.output or "", task=args.task, dev=args.dev, glue=args.glue,
        text_column=args.text_column, pair_column=args.pair_column, label_column=args.label_column, labels=labels,
        label_all_pieces=args.label_all_pieces, label_separator=args.label_separator,
        epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
        warmup_proportion=args.warmup_proportion, max_seq_length=args.max_seq_length,
        weight_decay=args.weight_decay, max_grad_norm=args.max_grad_norm, dropout=args.dropout, seed=args.seed,
        eval_every=args.eval_every, save_every=args.save_every, resume=args.resume,
        version_2_with_negative=args.version_2_with_negative, doc_stride=args.doc_stride,
        max_query_length=args.max_query_length, null_score_diff_threshold=args.null_score_diff_threshold,
    )  # fmt: skip
    if args.write_features:
        count = write_training_features(options, args.write_features)
        print(f"{args.write_features}: {count} examples")
        return
    if args.seeds or args.learning_rates:
        from ..training.finetune.sweep import sweep

        try:
            rates = [float(rate) for rate in (args.learning_rates or str(args.learning_rate)).split(",")]
        except ValueError:
            raise CommandError(f"--learning-rates {args.learning_rates!r}: numbers joined by commas") from None
        root = sweep(options, args.seeds or 1, rates)
        print((root / "sweep.md").read_text(encoding="utf-8"), end="")
        return
    print(finetune(options))
