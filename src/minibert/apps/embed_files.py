"""``minibert embed``: texts from arguments, a file or stdin, to JSON lines, ``.npy`` or ``.jsonl``.

The file rules (docs/cli.md): inputs are read as a stream, one text per line (the line rule);
outputs have exactly one row per input line, written atomically (a temporary file renamed into
place), or, with ``--resume``, committed in chunks that a later run continues (resumable.py).
Memory stays flat: ``CHUNK`` texts at a time.

The command's flags are here too (``add_parser``), with the embedding flags ``similarity`` shares
(``embedding_flags``: EmbedOptions' fields, its defaults).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from ..embedding.options import LAYER_COMBINES, LONG_TEXTS, POOLINGS, EmbedOptions
from ..errors import InputFileError
from ..formats import line_files
from ..formats.line_files import CHUNK, STDIN, check_output, count_records, json_line, printable, read_records
from .commands import CommandError, check_embedding_flags, embed_options, load_embedder, report_truncated
from .flag_types import DTYPE_HELP, DTYPES, output_name, positive_int, whole_number


def _pooling(value: str) -> list[str]:
    modes = value.split(",")
    unknown = [mode for mode in modes if mode not in POOLINGS]
    if unknown:
        choices = ", ".join(POOLINGS)
        raise argparse.ArgumentTypeError(f"unknown pooling {', '.join(unknown)}: choose from {choices}")
    return modes


def _layers(value: str):
    try:
        items = [int(item) for item in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an int or a comma-separated list such as -1,-2,-3,-4, got {value!r}"
        ) from None
    return items[0] if len(items) == 1 else items


def embedding_flags() -> argparse.ArgumentParser:
    """The flags of ``embed`` and ``similarity`` that become one EmbedOptions value (its defaults)."""
    defaults = EmbedOptions()
    embedding = argparse.ArgumentParser(add_help=False)
    embedding.add_argument(
        "--pooling",
        default=None,
        type=_pooling,
        help="mean, cls, max, mean_sqrt_len_tokens, weightedmean, lasttoken, pooler or mean_max, or several "
        "joined by commas (concatenated); default: the model's own recipe (a sentence-transformers model's "
        "pooling, Dense layers and normalization), else mean. A mode given here replaces the recipe",
    )
    prompt = embedding.add_mutually_exclusive_group()  # both: a usage error naming the two flags (exit 2)
    prompt.add_argument("--prompt-name", help="the model's prompt of this name before each text (e5: query)")
    prompt.add_argument("--prompt", help="this text before each text (not with --prompt-name)")
    embedding.add_argument("--layers", type=_layers, default=defaults.layers,
                           help="e.g. -1 (the default), or -1,-2,-3,-4 (the last four layers)")  # fmt: skip
    embedding.add_argument("--layer-combine", default=defaults.layer_combine, choices=LAYER_COMBINES,
                           help=f"how several --layers make one vector (default {defaults.layer_combine})")  # fmt: skip
    embedding.add_argument("--batch-size", type=positive_int, default=defaults.batch_size,
                           help=f"64-token texts per forward pass (default {defaults.batch_size})")  # fmt: skip
    embedding.add_argument(
        "--max-length", type=whole_number(3), default=None, help="tokens per text, at least 3 (default: the model's)"
    )
    embedding.add_argument("--long-text", default=defaults.long_text, choices=LONG_TEXTS,
                           help="texts longer than the model: cut (default) or pooled over windows")  # fmt: skip
    embedding.add_argument("--truncate-dim", type=positive_int, default=None, metavar="N",
                           help="keep the first N values of each vector (default: the model's own)")  # fmt: skip
    embedding.add_argument("--dtype", default="float32", choices=DTYPES, help=DTYPE_HELP)

    return embedding


def add_normalize_flag(parser) -> None:
    """--normalize / --no-normalize (embed, similarity): the recipe's normalization replaced."""
    parser.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                        help="unit-length vectors (default: as the model's recipe says)")  # fmt: skip


def add_parser(commands, parents: list) -> None:
    """Add ``embed`` to the ``minibert`` command's subparsers; ``parents``: the model's flags and
    embedding_flags()."""
    embed = commands.add_parser(
        "embed",
        parents=parents,
        help="sentence embeddings",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        '  minibert embed "a text" "another"                 a summary on a terminal, JSON lines when piped\n'
        "  minibert embed --input texts.txt --output vectors.npy\n"
        "  minibert embed --input docs.jsonl --output vectors.jsonl --long-text window\n"
        '  minibert embed "how do pods restart?" --prompt "query: " --model intfloat/e5-small-v2',
    )
    embed.add_argument("texts", nargs="*", help="texts to embed; a single - reads texts from stdin, one per line")
    embed.add_argument("--input", help="a .txt file (one text per line), a .jsonl file (a 'text' field per line), "
                                       "or - for stdin (one text per line)")  # fmt: skip
    embed.add_argument(
        "--output",
        type=output_name,
        help="write .npy or .jsonl (default: print; .jsonl keeps float32's full precision)",
    )
    embed.add_argument(
        "--json",
        action="store_true",
        help="print JSON lines even on a terminal (default there: a readable summary per text)",
    )
    add_normalize_flag(embed)
    embed.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="texts done / total and an ETA on stderr (default: on a terminal, for long inputs)",
    )
    embed.add_argument(
        "--resume",
        action="store_true",
        help="commit progress beside --output; started again with the same arguments after a "
        "kill, the run continues where it stopped",
    )
    embed.add_argument(
        "--commit-every",
        type=positive_int,
        default=CHUNK,
        metavar="N",
        help=f"texts embedded, written (and committed with --resume) at a time (default {CHUNK})",
    )
    embed.set_defaults(run=cmd_embed)


def cmd_embed(args) -> None:
    if args.texts == ["-"] and not args.input:
        args.texts, args.input = [], "-"
    if args.texts and args.input:
        raise CommandError("give texts as arguments or --input FILE, not both")
    if not args.texts and not args.input:
        raise CommandError("nothing to embed: give texts as arguments or --input FILE (- for stdin)")
    output = Path(args.output) if args.output else None
    if args.input and line_files.input_name_problem(args.input):
        raise CommandError(line_files.input_name_problem(args.input))
    if output is not None and line_files.name_suffix(output).lower() not in (".npy", ".jsonl"):
        raise CommandError(f"--output must end in .npy or .jsonl, got {output.name}")
    if args.resume and (output is None or not args.input):
        raise CommandError("--resume needs --input FILE and --output FILE")
    if args.input and args.resume and line_files.is_stream(args.input):
        where = "stdin" if args.input == STDIN else f"{args.input}, a pipe"
        raise CommandError(f"--resume needs an input file it can read again, not {where}")
    if not isinstance(args.commit_every, int) or args.commit_every < 1:
        raise CommandError(f"--commit-every must be a positive number of texts, got {args.commit_every}")
    if output is not None:
        check_output(output, Path(args.input) if args.input and args.input != STDIN else None)
        if not args.resume:
            _refuse_an_unfinished_resume(output)
    _embed(args, output)


def _refuse_an_unfinished_resume(output: Path) -> None:
    """A plain run would clobber an unfinished --resume run's output: refused before the model loads."""
    from .resumable import ResumableOutput

    unfinished = ResumableOutput(output, {})
    if unfinished.has_state() and unfinished.finished_leftovers():  # killed as it finished: nothing unfinished
        unfinished.remove_leftovers()
    elif unfinished.has_state():
        raise InputFileError(
            f"{output} has an unfinished --resume run: add --resume to continue it, or delete "
            f"{_beside(output, unfinished.state_path)}, {_beside(output, unfinished.partial)} and "
            f"{_beside(output, unfinished.lock_path)}"
        )
    else:  # its state deleted by hand (as the refusal above says): the lock that no run holds goes too
        unfinished.remove_unheld_lock()


def _embed(args, output: Path | None) -> None:
    """Embed and write. A file is read twice: counted and checked before the model loads, then
    embedded; stdin or a pipe once, as a stream (``count`` None: a bad line stops the command where
    it is, and an --output file is then not written)."""
    import numpy as np

    stdin = line_files.stream_records(args.input) if args.input and line_files.is_stream(args.input) else None
    count = None if stdin else count_records(Path(args.input)) if args.input else len(args.texts)
    from ..loading.files_read import recording

    with recording() as model_files:  # every file the model is read from: a resumable run's "model"
        embedder = load_embedder(args)
    options = embed_options(args)
    check_embedding_flags(embedder, options, args)  # before any text is read
    dim = embedder.dimension(options)
    progress = _Progress(count, args.progress)
    truncated = {"texts": 0, "max_length": embedder.max_length}

    def chunks(skip: int = 0) -> Iterator[tuple[list[str], np.ndarray]]:
        records = stdin or (read_records(Path(args.input)) if args.input else ({"text": t} for t in args.texts))
        texts = (record["text"] for record in records)
        for _ in zip(range(skip), texts):  # texts an earlier run committed
            pass
        done = skip
        while True:
            chunk = [text for _, text in zip(range(args.commit_every), texts)]
            if not chunk:
                break
            result = embedder.embed_with_report(chunk, options, progress=False)
            truncated.update(texts=truncated["texts"] + result.truncated, max_length=result.max_length)
            done += len(chunk)
            progress.update(done)
            yield chunk, result.vectors
        report_truncated(truncated["texts"], done - skip, truncated["max_length"])

    if output is None:
        readable = sys.stdout.isatty() and not getattr(args, "json", False)
        number = 0
        for chunk, vectors in chunks():
            for text, vector in zip(chunk, vectors):
                print(
                    _summary(number, text, vector)
                    if readable
                    else json_line({"text": text, "embedding": _rounded(vector)})
                )
                number += 1
            sys.stdout.flush()  # a chunk's rows reach a pipe as they are made
        return

    npy = line_files.name_suffix(output).lower() == ".npy"  # else .jsonl (cmd_embed refused any other name)

    def encode(chunk, vectors) -> bytes:
        if npy:
            return np.ascontiguousarray(vectors, dtype=np.float32).tobytes()
        lines = (json_line({"text": t, "embedding": v.tolist()}) + "\n" for t, v in zip(chunk, vectors))
        return "".join(lines).encode("utf-8")

    header = b""
    if npy:  # for stdin, the count is written over the header at the end (the same size)
        header = _npy_header((count or 0, dim))
    if args.resume:
        from .run_fingerprint import run_fingerprint

        fingerprint = run_fingerprint(args, output, embedder, model_files, options, dim, count)
        _embed_resumably(args, output, fingerprint, dim, count, header, chunks, encode, progress)
        written = count  # a resumable input is a file: counted first, and every text checked as written
    else:
        from ..formats.atomic_files import atomic_output

        with atomic_output(output) as handle:
            handle.write(header)
            written = 0
            for chunk, vectors in chunks():
                handle.write(encode(chunk, vectors))
                written += len(chunk)
            if count is None:
                _count_read_from_stdin(handle, header, written, dim)
            else:
                _check_all_texts_read(args, count, written)
    progress.close()
    print(f"minibert: wrote {written} embeddings of dimension {dim} to {output}", file=sys.stderr)


def _embed_resumably(args, output, fingerprint, dim, count, header, chunks, encode, progress) -> None:
    """Write ``output`` in committed chunks (see resumable.py), continuing an earlier run whose
    ``fingerprint`` (run_fingerprint.py) is this one's. Stopped (Ctrl-C, a signal), the one line says
    what is committed and that the same command continues it."""
    from .resumable import ResumableOutput, ResumeError

    npy = line_files.name_suffix(output).lower() == ".npy"  # float32 rows of one size; .jsonl: one line per text
    resumable = ResumableOutput(output, fingerprint, row_size=4 * dim if npy else None, lines=not npy, total=count)
    try:
        try:
            done = resumable.start(header)  # the header is written (and committed) once, by a fresh start
        except ResumeError as error:
            raise InputFileError(str(error)) from None
        if resumable.finished:  # killed as it finished: the output was complete
            print(f"minibert: {output} was complete (its run was stopped as it finished)", file=sys.stderr)
        elif done:
            print(f"minibert: resuming after {done} of {count} texts", file=sys.stderr)
        progress.start(done)
        written = done
        for chunk, vectors in chunks(skip=done):
            resumable.write(encode(chunk, vectors))
            written += len(chunk)
            resumable.commit(written)
        _check_all_texts_read(args, count, written)
        resumable.finish()
    except BaseException as stop:
        if not isinstance(stop, Exception) and resumable.finished:  # Ctrl-C, SIGTERM
            stop.on_disk = f"the output {output} is complete"
        elif not isinstance(stop, Exception) and resumable.committed is not None:
            where = _beside(output, resumable.partial)
            done = f"{resumable.committed} of {count} texts are committed in {where}"
            stop.on_disk = f"{done}; run the same command again to continue"
        raise
    finally:
        resumable.close()


def _count_read_from_stdin(handle, header: bytes, written: int, dim: int) -> None:
    """stdin's texts are counted as they are read: their count goes into the .npy header."""
    if header:
        counted = _npy_header((written, dim))
        assert len(counted) == len(header), "numpy pads a header to 64 bytes: a longer count fits in the same size"
        handle.seek(0)
        handle.write(counted)


def _check_all_texts_read(args, count: int, written: int) -> None:
    if written != count:
        raise InputFileError(f"{args.input} changed while it was read ({count} texts counted, {written} read)")


def _npy_header(shape: tuple[int, int]) -> bytes:
    import io

    import numpy as np

    buffer = io.BytesIO()
    descr = np.lib.format.dtype_to_descr(np.dtype(np.float32))
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


class _Progress:
    """'embedded 4,096 / 100,000 texts (4.1%), 310 texts/s, ETA 5m 3s' on stderr after each chunk:
    on request (--progress), or by default when stderr is a terminal and there is more than one chunk."""

    def __init__(self, total: int, wanted: bool | None):
        import time

        self.total, self.clock = total, time.monotonic  # total None: stdin, counted as it is read
        self.show = wanted if wanted is not None else (sys.stderr.isatty() and (total or 0) > CHUNK)
        self.start(0)

    def start(self, done: int) -> None:
        self.first, self.began = done, self.clock()

    def update(self, done: int) -> None:
        if not self.show:
            return
        elapsed = max(self.clock() - self.began, 1e-9)
        rate = (done - self.first) / elapsed
        if self.total is None:
            line = f"minibert: embedded {done:,} texts, {rate:,.0f} texts/s"
        else:
            left = (self.total - done) / rate if rate > 0 else float("inf")
            eta = "?" if left == float("inf") else f"{int(left // 60)}m {int(left % 60)}s"
            line = (f"minibert: embedded {done:,} / {self.total:,} texts ({100 * done / max(self.total, 1):.1f}%), "
                    f"{rate:,.0f} texts/s, ETA {eta}")  # fmt: skip
        print(("\r" + line) if sys.stderr.isatty() else line, end="" if sys.stderr.isatty() else "\n",
              file=sys.stderr, flush=True)  # fmt: skip

    def close(self) -> None:
        if self.show and sys.stderr.isatty():
            print(file=sys.stderr)


def _summary(number: int, text: str, vector) -> str:
    """For a person at a terminal: the text, the vector's size and norm, its first values (JSON
    lines, with every value, when piped or with --json)."""
    import numpy as np

    shown = printable(text if len(text) <= 70 else text[:67] + "...")  # an undecodable argument's bytes as escapes
    first = ", ".join(f"{value:.4f}" for value in vector[:6])
    return f"[{number}] {shown}\n    {len(vector)} dimensions, norm {float(np.linalg.norm(vector)):.4f}: [{first}, ...]"


def _rounded(vector) -> list[float]:
    """Six decimals for the terminal. round(-4e-7, 6) is -0.0, a sign the rounding made up: adding
    0.0 turns it into 0.0 (an exact -0.0 from the model stays in the .npy and .jsonl outputs)."""
    return [round(float(value), 6) + 0.0 for value in vector]


def _beside(output, path: Path) -> str:
    """``path`` (a resumable run's state or partial file) as the user finds it: its bare name where it
    sits beside ``output``, its whole path where ``output`` is a link and it sits beside the target."""
    return path.name if path.parent == Path(output).parent else str(path)
