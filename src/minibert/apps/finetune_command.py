"""``minibert finetune``: a checkpoint fine-tuned on labelled examples by Google's step (training/).

    minibert finetune --model all-MiniLM-L6-v2 --train train.csv --dev dev.csv --output run \\
        --text-column sentence --label-column language --epochs 1 --batch-size 16
    minibert finetune --glue mrpc --model bert-base-uncased --train MRPC/train.tsv --dev MRPC/dev.tsv --output mrpc
    torchrun --nproc_per_node 2 -m minibert finetune ...      # data parallel: the same flags
    minibert finetune ... --seeds 5 --learning-rates 2e-5,3e-5,5e-5 [--ray [ADDRESS]]  # a sweep
    minibert plot run                                         # run/loss.png
    minibert classify --model run "a text"                    # the run folder is a classifier

The training room is imported when the command runs, not when the parser is built.
"""

from __future__ import annotations

from ..limits import limits_of
from .flag_types import add_flags, number_list, positive_int, values_of


def add_parser(commands, parents: list) -> None:
    """Add ``finetune`` to the ``minibert`` command's subparsers; ``parents``: the process flags
    every command takes (--debug) and --gemm. Its flags are FinetuneOptions' fields, and the sweep's and
    --write-features' own."""
    from ..limits import output_name
    from ..training.options import FinetuneOptions  # no torch: the fields, defaults, limits, help

    finetune = commands.add_parser("finetune", parents=parents,
                                   help="fine-tune a checkpoint on labelled examples (Google's step)")  # fmt: skip
    add_flags(finetune, FinetuneOptions)
    finetune.add_argument("--write-features", metavar="FILE.tfrecord", type=output_name,
                          help="write --train's features in Google's TFRecord layout (run_classifier.py's; "
                          "run_squad.py's for --task answer), then stop")  # fmt: skip
    finetune.add_argument("--seeds", type=positive_int, help="a sweep: this many seeds (--seed, --seed + 1, ...) "
                          "per learning rate, each its own run in --output, and a table of dev figures")  # fmt: skip
    rate = FinetuneOptions.__dataclass_fields__["learning_rate"]
    finetune.add_argument("--learning-rates", type=number_list(limits_of(rate), "each rate"), help="a sweep: "
                          "these peak rates, comma-separated (e.g. 2e-5,3e-5,5e-5), each once")  # fmt: skip
    finetune.add_argument("--ray", nargs="?", const="", metavar="ADDRESS", help="a sweep's trials as Ray Tune trials, "
                          "several at once: on a local Ray (or the cluster $RAY_ADDRESS names), or the cluster at "
                          "ADDRESS (the ray extra)")  # fmt: skip
    finetune.add_argument("--json", action="store_true", help="print the result as JSON (the folder, the steps, the "
                          "last metrics line, the best dev figure) instead of the folder's name; with a sweep, "
                          "sweep.json's record (every trial, each rate's summary, the best trial) and the folder, "
                          "instead of the table")  # fmt: skip
    finetune.set_defaults(run=cmd_finetune)


def cmd_finetune(args) -> None:
    from ..loading.devices import resolve_device
    from ..training import FinetuneOptions, finetune, write_training_features
    from .commands import CommandError, gemm_of

    if args.output is not None and args.write_features is not None:
        raise CommandError("--output and --write-features exclude each other: --write-features writes the features "
                           "and stops, --output fine-tunes; give one")  # fmt: skip
    if args.output is None and args.write_features is None:
        raise CommandError("give --output (to fine-tune) or --write-features FILE.tfrecord (to write the features)")
    sweeps = args.seeds is not None or args.learning_rates is not None
    if args.ray is not None and not sweeps:
        raise CommandError("--ray runs a sweep's trials: give --seeds and/or --learning-rates")
    options = FinetuneOptions(**{**values_of(args, FinetuneOptions), "output": args.output or ""}, gemm=gemm_of(args))
    # a flag the task or --write-features does not read: the library's FlagConflictError, exit 2 (cli.py)
    options.refuse_unread_flags(writing_features=args.write_features is not None)
    if args.write_features:
        run_flags = {"--seeds": args.seeds, "--learning-rates": args.learning_rates, "--ray": args.ray,
                     "--json": args.json or None}  # fmt: skip
        unread = [flag for flag, value in run_flags.items() if value is not None]
        if unread:
            raise CommandError(f"--write-features does not read {unread[0]}: it writes --train's features and stops "
                               f"({unread[0]} is for a run: give --output)")  # fmt: skip
        count = write_training_features(options, args.write_features)
        print(f"{args.write_features}: {count} records")
        return
    resolve_device(options.device, flags=True)  # a GPU that is not there, said as the command says it (--device)
    if sweeps:  # stdout: the table, or with --json sweep.json's record and the folder on one line
        from ..training.sweep import sweep, sweep_json

        root = sweep(options, args.seeds or 1, args.learning_rates or [args.learning_rate], args.ray)
        if args.json:
            print(sweep_json(root))
        else:
            print((root / "sweep.md").read_text(encoding="utf-8"), end="")
        return
    folder = finetune(options)
    if args.json:
        from ..training.run.report import result_json

        print(result_json(folder))
    else:
        print(folder)
