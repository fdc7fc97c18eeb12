"""``minibert classify``, ``tag``, ``answer`` and ``rerank``: the tasks of minibert.tasks on texts
from arguments, a file or stdin, written as JSON lines.

The file rules are ``embed``'s (docs/cli.md): a ``.txt`` input has one text per line (the line
rule: split on "\\n" only, a blank line is the empty text), a ``.jsonl`` input one object per line
(``text``, and ``text_pair`` for classify; ``question`` and ``context`` for answer); the output
has exactly one JSON line per input line, in input order, written atomically (a temporary file
renamed into place) with ``--output FILE.jsonl``, else printed. Work goes ``CHUNK`` lines at a
time, so memory follows the chunk, not the file (rerank keeps one score per document).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from pathlib import Path

from ..formats.line_files import CHUNK, check_output, count_records, json_lines_output, read_records, spooled_stdin
from .commands import CommandError, gemm_of, load_model


def _rows_in_chunks(records: Iterator[dict]) -> Iterator[list[dict]]:
    while chunk := [record for _, record in zip(range(CHUNK), records)]:
        yield chunk


def _run(args, fields: tuple[str, ...], optional: tuple[str, ...], from_arguments, load, answer, finish=None) -> None:
    """Check the arguments and the files (every input line, before the model loads), then load the
    model (``load(name)``), and write the rows that ``answer(model, chunk of records)`` gives."""
    given = from_arguments()
    if given and args.input:
        raise CommandError("give texts as arguments or --input FILE, not both")
    if not given and not args.input:
        raise CommandError("nothing to do: give texts as arguments or --input FILE (- for stdin)")
    if not args.model:
        raise CommandError(f"{args.command} needs --model DIR (or a hub id) of a checkpoint with its head")
    output = Path(args.output) if args.output else None
    if output is not None and output.suffix != ".jsonl":
        raise CommandError(f"--output must end in .jsonl, got {output.name}")
    if args.input == "-":
        with spooled_stdin() as path:
            return _answer_file(args, path, output, fields, optional, load, answer, finish)
    if args.input:
        return _answer_file(args, Path(args.input), output, fields, optional, load, answer, finish)
    if output is not None:
        check_output(output, None)
    _write(iter(given), output, functools.partial(answer, load_model(args, load)), finish)


def _answer_file(args, path: Path, output, fields, optional, load, answer, finish) -> None:
    if output is not None:
        check_output(output, path)
    count_records(path, fields, optional)  # every line checked before the model loads
    _write(read_records(path, fields, optional), output, functools.partial(answer, load_model(args, load)), finish)


def _write(records: Iterator[dict], output: Path | None, answer_chunk, finish) -> None:
    """Answer the records a chunk at a time and write each chunk's rows (``finish``: rows that need
    all of the input first, as rerank's ranks)."""
    with json_lines_output(output) as lines:
        if finish is None:
            for chunk in _rows_in_chunks(records):
                for row in answer_chunk(chunk):
                    lines.write(row)
        else:
            rows = [row for chunk in _rows_in_chunks(records) for row in answer_chunk(chunk)]
            for row in finish(rows, output is None):
                lines.write(row)
    if output is not None:
        print(f"minibert: wrote {lines.count} rows to {output}", file=sys.stderr)


def cmd_classify(args) -> None:
    from ..heads import BertForSequenceClassification
    from ..tasks import classify, load_for_task

    top_k = None if args.top_k == "all" else int(args.top_k)

    def answer(loaded, chunk: list[dict]) -> list[dict]:
        if any("text_pair" in record for record in chunk):
            inputs = [{"text": r["text"], "text_pair": r.get("text_pair", "")} for r in chunk]
        else:
            inputs = [record["text"] for record in chunk]
        labels = classify(inputs, model=loaded, top_k=top_k, function_to_apply=args.function,
                          truncation=args.truncate, batch_size=args.batch_size)  # fmt: skip
        return [{**record, "labels": found} for record, found in zip(chunk, labels)]

    def load(name):
        if args.labels:  # the user's names for the head's outputs (weights.py refuses a count that does not fit)
            name = BertForSequenceClassification.from_pretrained(name, gemm=gemm_of(args), dtype=args.dtype,
                                                                 id2label=dict(enumerate(args.labels)))  # fmt: skip
        return load_for_task(name, BertForSequenceClassification, gemm=gemm_of(args), dtype=args.dtype)

    _run(args, ("text",), ("text_pair",), lambda: [{"text": text} for text in args.texts], load, answer)


def cmd_tag(args) -> None:
    from ..heads import BertForTokenClassification
    from ..tasks import load_for_task, tag

    def answer(loaded, chunk: list[dict]) -> list[dict]:
        found = tag([record["text"] for record in chunk], model=loaded, aggregation_strategy=args.aggregation,
                    stride=args.stride, batch_size=args.batch_size)  # fmt: skip
        return [{"text": record["text"], "entities": entities} for record, entities in zip(chunk, found)]

    _run(args, ("text",), (), lambda: [{"text": text} for text in args.texts],
         lambda name: load_for_task(name, BertForTokenClassification, gemm=gemm_of(args),
                                    dtype=args.dtype), answer)  # fmt: skip


def cmd_answer(args) -> None:
    from ..heads import BertForQuestionAnswering
    from ..tasks import answer, load_for_task

    if (args.question is None) != (args.context is None):
        raise CommandError("give --question and --context together (or --input FILE.jsonl)")

    def answer_chunk(loaded, chunk: list[dict]) -> list[dict]:
        found = answer([r["question"] for r in chunk], [r["context"] for r in chunk], model=loaded,
                       top_k=args.top_k, doc_stride=args.doc_stride, max_answer_len=args.max_answer_len,
                       max_seq_len=args.max_seq_len, handle_impossible_answer=args.impossible,
                       batch_size=args.batch_size)  # fmt: skip
        return [{"question": r["question"], "answers": a if isinstance(a, list) else [a]} for r, a in zip(chunk, found)]

    def from_arguments():
        return [] if args.question is None else [{"question": args.question, "context": args.context}]

    _run(args, ("question", "context"), (), from_arguments,
         lambda name: load_for_task(name, BertForQuestionAnswering, gemm=gemm_of(args),
                                    dtype=args.dtype), answer_chunk)  # fmt: skip


def cmd_rerank(args) -> None:
    from ..tasks import CrossEncoder

    def load(name: str):
        ranker = CrossEncoder(name, max_length=args.max_length, gemm=gemm_of(args), dtype=args.dtype)
        if ranker.num_labels != 1:
            raise ValueError(f"{args.model}: rerank needs a model with one output (a relevance score); "
                             f"it has {ranker.num_labels} labels")  # fmt: skip
        return ranker

    def answer(ranker, chunk: list[dict]) -> list[dict]:
        pairs = [[args.query, record["text"]] for record in chunk]
        found = ranker.predict(pairs, batch_size=args.batch_size)
        return [{"score": float(score), "text": record["text"]} for record, score in zip(chunk, found)]

    def ranked(rows: list[dict], printing: bool) -> list[dict]:
        """Each row gets its index and rank (1 = most relevant); a file keeps the input order, the
        terminal gets the best --top-n first."""
        order = sorted(range(len(rows)), key=lambda n: rows[n]["score"], reverse=True)
        for rank, index in enumerate(order, start=1):
            rows[index] = {"index": index, "rank": rank, **rows[index]}
        return [rows[index] for index in order[: args.top_n]] if printing else rows

    _run(args, ("text",), (), lambda: [{"text": text} for text in args.documents], load, answer, ranked)
