"""``minibert pretrain`` (BERT trained by Google's step, training/) and ``minibert plot RUN`` (its loss curve).

    minibert pretrain --data instances.tfrecord --config bert_config.json --vocab vocab.txt \\
        --output run --steps 300 --batch-size 32 --warmup-steps 30
    torchrun --nproc_per_node 2 -m minibert pretrain ...      # data parallel: the same flags
    minibert plot run                                         # run/loss.png

The training room is imported when the command runs, not when the parser is built.
"""

from __future__ import annotations

from .flag_types import add_flags, output_name, values_of


def add_parser(commands, parents: list, trains: list) -> None:
    """Add ``pretrain`` and ``plot`` to the ``minibert`` command's subparsers; ``parents``: the
    process flags every command takes (--debug), ``trains``: those and --gemm (pretrain's).
    ``pretrain``'s other flags are PretrainOptions' fields."""
    from ..training.options import PretrainOptions  # no torch: the fields, their defaults, limits and help

    pretrain = commands.add_parser("pretrain", parents=trains,
                                   help="pre-train BERT (masked LM + next sentence) by Google's step")  # fmt: skip
    start = pretrain.add_mutually_exclusive_group(required=True)
    add_flags(pretrain, PretrainOptions, groups={"init": start, "config": start})
    pretrain.add_argument("--json", action="store_true", help="print the result as JSON when the run ends (the "
                          "folder, the steps, the last metrics line)")  # fmt: skip
    pretrain.set_defaults(run=cmd_pretrain)

    plot = commands.add_parser("plot", parents=parents, help="draw a run's loss curve (and dev figures): "
                               "RUN/loss.png (the plot extra)")  # fmt: skip
    plot.add_argument("run_directory", metavar="RUN", help="the folder of a minibert pretrain or finetune run")
    plot.add_argument("--output", type=output_name,
                      help="the PNG to write, a name ending in .png (default RUN/loss.png)")  # fmt: skip
    plot.set_defaults(run=cmd_plot)


def cmd_pretrain(args) -> None:
    from ..loading.devices import resolve_device
    from ..training import pretrain
    from ..training.options import PretrainOptions
    from .commands import gemm_of

    # flags that contradict each other (--bf16 and --precision fp16 here, the others as the run starts)
    # are the library's FlagConflictError: exit 2, a usage error (cli.py)
    options = PretrainOptions(**values_of(args, PretrainOptions), gemm=gemm_of(args))
    resolve_device(options.device, flags=True)  # a GPU that is not there, said as the command says it (--device)
    folder = pretrain(options)
    if args.json:
        from ..training.run.report import result_json

        print(result_json(folder))


def cmd_plot(args) -> None:
    from ..errors import MinibertError
    from ..training.run.plot import png_name_problem  # (no matplotlib: that is plot_run's to import)
    from .commands import CommandError

    if args.output is not None and png_name_problem(args.output):
        raise CommandError(f"--output {png_name_problem(args.output)}")  # a usage error, before any work
    try:
        from ..training.run.plot import plot_run

        print(plot_run(args.run_directory, args.output))
    except ImportError:
        raise MinibertError("minibert plot needs matplotlib: pip install 'minibert[plot]'") from None
