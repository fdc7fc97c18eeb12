"""``minibert pretraining-data``: Google's create_pretraining_data.py as a command.

    minibert pretraining-data --input corpus.txt --vocab vocab.txt --output train.tfrecord
    minibert pretraining-data --input a.txt b.txt --vocab vocab.txt --output s0.tfrecord,s1.tfrecord \\
        --max-seq-length 512 --whole-word-mask

The parser and the command; the work is in minibert.training (imported when the command runs, so
``import minibert`` and the other commands never load it).
"""

from __future__ import annotations

import argparse
import sys


def add_parser(commands) -> None:
    """Add ``pretraining-data`` to the ``minibert`` command's subparsers."""
    command = commands.add_parser(
        "pretraining-data",
        help="masked-LM / next-sentence instances from text, as Google's create_pretraining_data.py",
        description="Cut text (one sentence per line, a blank line between documents) into BERT's pre-training "
        "instances and write them as TFRecords: the instances Google's create_pretraining_data.py makes for the "
        "same text, vocabulary, flags and seed. All documents are held in memory (as in Google's script): for a "
        "big corpus run one process per input shard.",
    )
    command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    command.add_argument("--input", nargs="+", required=True, metavar="FILE", help="text files, read in order")
    command.add_argument("--vocab", required=True, help="the vocab.txt the model will be trained with")
    command.add_argument("--output", required=True, help="the TFRecord file, or several joined by commas "
                                                         "(instances go round-robin over them)")  # fmt: skip
    command.add_argument("--format", default="tfrecord", choices=["tfrecord"], help="the output format (tfrecord)")
    command.add_argument("--max-seq-length", type=int, default=128, help="pieces per instance (default 128)")
    command.add_argument("--max-predictions-per-seq", type=int, default=20,
                         help="masked pieces per instance, at most (default 20)")  # fmt: skip
    command.add_argument("--masked-lm-prob", type=float, default=0.15, help="share of pieces masked (default 0.15)")
    command.add_argument("--short-seq-prob", type=float, default=0.1,
                         help="how often a shorter target length is drawn (default 0.1)")  # fmt: skip
    command.add_argument("--dupe-factor", type=int, default=10,
                         help="passes over the corpus, each with other masks (default 10)")  # fmt: skip
    command.add_argument("--random-seed", type=int, default=12345, help="the seed of all draws (default 12345)")
    command.add_argument("--whole-word-mask", action="store_true", help="mask all pieces of a word together")
    command.add_argument("--cased", action="store_true", help="keep case and accents (default: lowercase, "
                                                              "as Google's --do_lower_case=True)")  # fmt: skip
    command.add_argument("--preserve-unused-tokens", action="store_true",
                         help="keep a word that is exactly a vocabulary entry [unused<N>] as one piece "
                              "(Google's --preserve_unused_tokens)")  # fmt: skip
    command.add_argument("--invalid-utf8", choices=["error", "ignore"], default="error",
                         help="bytes that are not UTF-8: stop naming the file and line (default), or drop "
                              "them as Google's convert_to_unicode does")  # fmt: skip
    command.set_defaults(run=cmd_pretraining_data)


def cmd_pretraining_data(args) -> None:
    from ..errors import DataError
    from ..training.create import create_pretraining_data
    from ..training.options import InstanceOptions

    outputs = args.output.split(",")
    if any(not output for output in outputs):
        raise DataError(f"--output {args.output!r} has an empty file name")
    options = InstanceOptions(
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
        masked_lm_prob=args.masked_lm_prob,
        short_seq_prob=args.short_seq_prob,
        dupe_factor=args.dupe_factor,
        whole_word_mask=args.whole_word_mask,
    )
    summary = create_pretraining_data(args.input, args.vocab, outputs, options, args.random_seed,
                                      do_lower_case=not args.cased, invalid_utf8=args.invalid_utf8,
                                      preserve_unused_tokens=args.preserve_unused_tokens)  # fmt: skip
    where = outputs[0] if len(outputs) == 1 else f"{len(outputs)} files ({', '.join(map(str, summary.per_file))})"
    print(f"minibert: {summary.instances:,} instances from {summary.documents:,} documents "
          f"({summary.sentences:,} sentences) written to {where}", file=sys.stderr)  # fmt: skip
