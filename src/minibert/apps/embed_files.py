"""``minibert embed``: texts from arguments, a file or stdin, to JSON lines, ``.npy`` or ``.jsonl``.

The file rules (docs/cli.md): inputs are read as a stream, one text per line (the line rule);
outputs have exactly one row per input line, written atomically (a temporary file renamed into
place), or, with ``--resume``, committed in chunks that a later run continues (resumable.py).
Memory stays flat: ``CHUNK`` texts at a time.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

from ..errors import InputFileError
from ..formats.line_files import CHUNK, check_output, count_records, json_line, read_records, spooled_stdin
from .commands import CommandError, embed_options, load_embedder, report_truncated


def cmd_embed(args) -> None:
    if args.texts == ["-"] and not args.input:
        args.texts, args.input = [], "-"
    if args.texts and args.input:
        raise CommandError("give texts as arguments or --input FILE, not both")
    if not args.texts and not args.input:
        raise CommandError("nothing to embed: give texts as arguments or --input FILE (- for stdin)")
    output = Path(args.output) if args.output else None
    if output is not None and output.suffix not in (".npy", ".jsonl"):
        raise CommandError(f"--output must end in .npy or .jsonl, got {output.name}")
    if args.resume and (output is None or not args.input):
        raise CommandError("--resume needs --input FILE and --output FILE")
    if args.input == "-" and args.resume:
        raise CommandError("--resume needs an input file it can read again, not stdin")
    if not isinstance(args.commit_every, int) or args.commit_every < 1:
        raise CommandError(f"--commit-every must be a positive number of texts, got {args.commit_every}")
    if output is not None:
        check_output(output, Path(args.input) if args.input and args.input != "-" else None)
    if args.input != "-":
        return _embed(args, output)
    with spooled_stdin() as args.input:
        return _embed(args, output)


def _embed(args, output: Path | None) -> None:
    import numpy as np

    count = count_records(Path(args.input)) if args.input else len(args.texts)
    embedder = load_embedder(args)
    options = embed_options(args)
    dim = embedder.dimension(options)
    progress = _Progress(count, args.progress)
    truncated = {"texts": 0, "max_length": embedder.max_length}

    def chunks(skip: int = 0) -> Iterator[tuple[list[str], np.ndarray]]:
        texts = (record["text"] for record in read_records(Path(args.input))) if args.input else iter(args.texts)
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
        return

    def encode(chunk, vectors) -> bytes:
        if output.suffix == ".npy":
            return np.ascontiguousarray(vectors, dtype=np.float32).tobytes()
        lines = (json_line({"text": t, "embedding": v.tolist()}) + "\n" for t, v in zip(chunk, vectors))
        return "".join(lines).encode("utf-8")

    header = b""
    if output.suffix == ".npy":
        header = _npy_header((count, dim))
    if args.resume:
        _embed_resumably(args, output, embedder, options, dim, count, header, chunks, encode, progress)
    else:
        from ..formats.atomic_files import atomic_output
        from .resumable import ResumableOutput

        if ResumableOutput(output, {}).has_state():
            raise InputFileError(
                f"{output} has an unfinished --resume run: add --resume to continue it, or delete "
                f".{output.name}.resume.json and .{output.name}.partial"
            )
        with atomic_output(output) as handle:
            handle.write(header)
            written = 0
            for chunk, vectors in chunks():
                handle.write(encode(chunk, vectors))
                written += len(chunk)
            _check_all_texts_read(args, count, written)
    progress.close()
    print(f"minibert: wrote {count} embeddings of dimension {dim} to {output}", file=sys.stderr)


def _embed_resumably(args, output, embedder, options, dim, count, header, chunks, encode, progress) -> None:
    """Write ``output`` in committed chunks (see resumable.py), continuing an earlier run."""
    from ..weights import find_checkpoint
    from .resumable import ResumableOutput, ResumeError, file_digest

    model = embedder.model.name_or_path  # what was loaded (the bundled model when the default is unreachable)
    _, weights_file = find_checkpoint(model)
    weights = Path(weights_file).stat()
    fingerprint = {
        "input": f"sha256:{file_digest(Path(args.input))} ({count} texts)",  # its content, wherever it is
        "model": f"{model} ({weights.st_size} bytes, modified {weights.st_mtime_ns})",
        "options": json.dumps(
            {**options.as_dict(), "dtype": args.dtype, "commit_every": args.commit_every}, sort_keys=True
        ),
        "output format": f"{output.suffix}, dimension {dim}",
    }
    npy = output.suffix == ".npy"  # float32 rows of one size; .jsonl: one line per text
    resumable = ResumableOutput(output, fingerprint, row_size=4 * dim if npy else None, lines=not npy, total=count)
    try:
        try:
            done = resumable.start(header)  # the header is written (and committed) once, by a fresh start
        except ResumeError as error:
            raise InputFileError(str(error)) from None
        if done:
            print(f"minibert: resuming after {done} of {count} texts", file=sys.stderr)
        progress.start(done)
        written = done
        for chunk, vectors in chunks(skip=done):
            resumable.write(encode(chunk, vectors))
            written += len(chunk)
            resumable.commit(written)
        _check_all_texts_read(args, count, written)
        resumable.finish()
    finally:
        resumable.close()


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

        self.total, self.clock = total, time.monotonic
        self.show = wanted if wanted is not None else (sys.stderr.isatty() and total > CHUNK)
        self.start(0)

    def start(self, done: int) -> None:
        self.first, self.began = done, self.clock()

    def update(self, done: int) -> None:
        if not self.show:
            return
        elapsed = max(self.clock() - self.began, 1e-9)
        rate = (done - self.first) / elapsed
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

    shown = text if len(text) <= 70 else text[:67] + "..."
    first = ", ".join(f"{value:.4f}" for value in vector[:6])
    return f"[{number}] {shown}\n    {len(vector)} dimensions, norm {float(np.linalg.norm(vector)):.4f}: [{first}, ...]"


def _rounded(vector) -> list[float]:
    """Six decimals for the terminal. round(-4e-7, 6) is -0.0, a sign the rounding made up: adding
    0.0 turns it into 0.0 (an exact -0.0 from the model stays in the .npy and .jsonl outputs)."""
    return [round(float(value), 6) + 0.0 for value in vector]
