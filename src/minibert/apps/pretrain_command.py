"""``minibert pretrain`` (BERT trained by Google's step, training/) and ``minibert plot RUN`` (its loss curve).

    minibert pretrain --data instances.tfrecord --config bert_config.json --vocab vocab.txt \\
        --output run --steps 300 --batch-size 32 --warmup-steps 30
    torchrun --nproc_per_node 2 -m minibert pretrain ...      # data parallel: the same flags
    minibert plot run                                         # run/loss.png

The training package is imported when the command runs, not when the parser is built.
"""

from __future__ import annotations

import argparse

from .flag_types import positive_int


def add_parser(commands) -> None:
    """Add ``pretrain`` and ``plot`` to the ``minibert`` command's subparsers."""
    pretrain = commands.add_parser("pretrain", help="pre-train BERT (masked LM + next sentence) by Google's step")
    pretrain.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    pretrain.add_argument("--data", nargs="+", required=True, metavar="FILE",
                          help="TFRecord files of instances (minibert pretraining-data; Google's script)")  # fmt: skip
    start = pretrain.add_mutually_exclusive_group(required=True)
    start.add_argument("--init", help="start from this checkpoint: a hub folder or id, Google's TF checkpoint, a run")
    start.add_argument("--config", help="start from random weights of this config.json (with --vocab)")
    pretrain.add_argument("--vocab", help="with --config: the vocab.txt of the instances' ids")
    pretrain.add_argument("--cased", action="store_true", help="with --config: the tokenizer keeps case")
    pretrain.add_argument("--output", required=True, help="the run directory (a hub-layout checkpoint at every save)")
    pretrain.add_argument("--steps", type=positive_int, required=True, help="updates to make")
    pretrain.add_argument(
        "--batch-size", type=positive_int, required=True, help="instances per update, over all processes"
    )
    pretrain.add_argument("--learning-rate", type=float, default=1e-4, help="the peak rate (default 1e-4)")
    pretrain.add_argument("--warmup-steps", type=int, default=0, help="linear warmup from 0 (default 0)")
    pretrain.add_argument("--weight-decay", type=float, default=0.01, help="default 0.01 (never LayerNorm or biases)")
    pretrain.add_argument("--max-grad-norm", type=float, default=1.0, help="global gradient norm clip (default 1.0)")
    pretrain.add_argument("--dropout", type=float, default=None, help="replace the config's dropout (0: exact runs)")
    pretrain.add_argument("--seed", type=int, default=12345, help="random weights and dropout (default 12345)")
    pretrain.add_argument(
        "--save-every", type=positive_int, default=1000, help="steps between checkpoints (default 1000)"
    )
    pretrain.add_argument("--accumulate", type=positive_int, default=1, help="micro-batches per update (default 1)")
    pretrain.add_argument("--resume", action="store_true", help="continue the run in --output from its last checkpoint")
    pretrain.add_argument(
        "--bf16", action="store_true", help="forward in bfloat16 autocast (faster with AMX; a warning where it is not)"
    )
    pretrain.add_argument("--allow-wrap", action="store_true",
                          help="allow a --batch-size larger than the data (each batch repeats instances)")  # fmt: skip
    pretrain.set_defaults(run=cmd_pretrain)

    plot = commands.add_parser("plot", help="draw a pretrain run's loss curve: RUN/loss.png (the plot extra)")
    plot.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    plot.add_argument("run_directory", metavar="RUN", help="a minibert pretrain run directory")
    plot.add_argument("--output", help="the PNG to write (default RUN/loss.png)")
    plot.set_defaults(run=cmd_plot)


def cmd_pretrain(args) -> None:
    from ..training import PretrainOptions, pretrain

    options = PretrainOptions(
        data=args.data, output=args.output, steps=args.steps, batch_size=args.batch_size, init=args.init,
        config=args.config, vocab=args.vocab, do_lower_case=not args.cased, learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps, weight_decay=args.weight_decay, max_grad_norm=args.max_grad_norm,
        dropout=args.dropout, seed=args.seed, save_every=args.save_every, accumulate=args.accumulate,
        resume=args.resume, bf16=args.bf16, allow_wrap=args.allow_wrap,
    )  # fmt: skip
    pretrain(options)


def cmd_plot(args) -> None:
    from ..errors import MinibertError

    try:
        from ..training.plot import plot_run

        print(plot_run(args.run_directory, args.output))
    except ImportError:
        raise MinibertError("minibert plot needs matplotlib: pip install 'minibert[plot]'") from None
