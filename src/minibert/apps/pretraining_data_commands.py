"""``minibert pretraining-data``: Google's create_pretraining_data.py as a command.

    minibert pretraining-data --input corpus.txt --vocab vocab.txt --output train.tfrecord
    minibert pretraining-data --input a.txt b.txt --vocab vocab.txt --output s0.tfrecord,s1.tfrecord \\
        --max-seq-length 512 --whole-word-mask

The parser and the command; the work is in minibert.training (imported when the command runs, so
``import minibert`` and the other commands never load it).
"""

from __future__ import annotations

import sys

from .flag_types import add_flags, output_names, values_of, whole_number


def add_parser(commands, parents: list) -> None:
    """Add ``pretraining-data`` to the ``minibert`` command's subparsers; ``parents``: the process
    flags every command takes (--debug). The instance flags are InstanceOptions' fields."""
    from ..training.pretraining_data.documents import INVALID_UTF8  # no torch
    from ..training.pretraining_data.options import DEFAULT_SEED, InstanceOptions  # no torch

    command = commands.add_parser(
        "pretraining-data",
        parents=parents,
        help="masked-LM / next-sentence instances from text, as Google's create_pretraining_data.py",
        description="Cut text (one sentence per line, a blank line between documents) into BERT's pre-training "
        "instances and write them as TFRecords: the instances Google's create_pretraining_data.py makes for the "
        "same text, vocabulary, flags and seed. All documents are held in memory (as in Google's script): for a "
        "big corpus run one process per input shard.",
    )
    command.add_argument("--input", nargs="+", action="extend", required=True, metavar="FILE",
                         help="text files, read in order (--input given again adds its files)")  # fmt: skip
    command.add_argument("--vocab", required=True, help="the vocab.txt the model will be trained with")
    command.add_argument("--output", required=True, type=output_names, help="the TFRecord file, or several joined "
                         "by commas (instances go round-robin over them)")  # fmt: skip
    command.add_argument("--format", default="tfrecord", choices=["tfrecord"], help="the output format (tfrecord)")
    add_flags(command, InstanceOptions)
    command.add_argument("--random-seed", type=whole_number(None), default=DEFAULT_SEED,
                         help=f"the seed of all draws (default {DEFAULT_SEED})")  # fmt: skip
    command.add_argument("--cased", action="store_true", help="keep case and accents (default: lowercase, "
                                                              "as Google's --do_lower_case=True)")  # fmt: skip
    command.add_argument("--preserve-unused-tokens", action="store_true",
                         help="keep a word that is exactly a vocabulary entry [unused<N>] as one piece "
                              "(Google's --preserve_unused_tokens)")  # fmt: skip
    command.add_argument("--invalid-utf8", choices=INVALID_UTF8, default="error",
                         help="bytes that are not UTF-8: stop naming the file and line (default), or drop "
                              "them as Google's convert_to_unicode does")  # fmt: skip
    command.set_defaults(run=cmd_pretraining_data)


def cmd_pretraining_data(args) -> None:
    from ..training.pretraining_data.create import create_pretraining_data
    from ..training.pretraining_data.options import GOOGLE_PREDICTIONS, InstanceOptions
    from .commands import CommandError

    outputs = args.output.split(",")  # (none empty: the flag's type, output_names)
    most = InstanceOptions.most_predictions(args.max_seq_length)  # (checked here too, to name the flags)
    if args.max_predictions_per_seq > most:
        raise CommandError(f"--max-predictions-per-seq {args.max_predictions_per_seq} is more than {most}, the larger "
                           f"of --max-seq-length ({args.max_seq_length}) and Google's default {GOOGLE_PREDICTIONS}: "
                           "an instance has fewer pieces than --max-seq-length to predict")  # fmt: skip
    options = InstanceOptions(**values_of(args, InstanceOptions))
    summary = create_pretraining_data(args.input, args.vocab, outputs, options, args.random_seed,
                                      do_lower_case=not args.cased, invalid_utf8=args.invalid_utf8,
                                      preserve_unused_tokens=args.preserve_unused_tokens)  # fmt: skip
    where = outputs[0] if len(outputs) == 1 else f"{len(outputs)} files ({', '.join(map(str, summary.per_file))})"
    print(f"minibert: {summary.instances:,} instances from {summary.documents:,} documents "
          f"({summary.sentences:,} sentences) written to {where}", file=sys.stderr)  # fmt: skip
