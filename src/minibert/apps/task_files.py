"""``minibert classify``, ``tag``, ``answer`` and ``rerank``: the tasks of minibert.tasks on texts
from arguments, a file or stdin, written as JSON lines.

The file rules are ``embed``'s (docs/cli.md): a ``.txt`` input has one text per line (the line
rule: split on "\\n" only, a blank line is the empty text), a ``.jsonl`` input one object per line
(``text``, and ``text_pair`` for classify; ``question`` and ``context`` for answer); the output
has exactly one JSON line per input line, in input order, written atomically (a temporary file
renamed into place) with ``--output FILE.jsonl``, else printed. A ``.jsonl`` line's other keys (an
``"id"``) come back in its row, after the command's own keys (``_carried``); a key that names a text
the command does not read is refused (``line_files.unread_text``). Work goes ``CHUNK`` lines at a
time, so memory follows the chunk, not the file: rerank keeps one score per document, reads a file's
texts again to write its rows, and holds only the texts of stdin (read once) and of the rows it
prints best first. The four commands' flags are made here too (``add_parser``).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

from ..errors import TaskArgumentError
from ..formats import line_files
from ..formats.line_files import CHUNK, STDIN, check_output, count_records, json_lines_output, read_records
from ..task_choices import AGGREGATIONS, FUNCTIONS
from .commands import CommandError, device_of, flag_error, gemm_of, load_model
from .flag_types import DTYPE_HELP, DTYPES, label_list, model_name, output_name, positive_int, whole_number


def add_parser(commands, parents: list) -> None:
    """Add classify, tag, answer and rerank to the ``minibert`` command's subparsers: a model with
    the task's head, texts in, JSON lines out; ``parents``: the model's flags (--debug, --gemm)."""
    files = argparse.ArgumentParser(add_help=False, parents=parents)
    files.add_argument("--model", type=model_name,
                       help="hub id or local directory of a checkpoint with the task's head (required)")
    files.add_argument("--input", help="a .txt file (one text per line), a .jsonl file (one object per line), or - "
                                       "for stdin (one text per line; answer: JSON lines)")  # fmt: skip
    files.add_argument("--output", type=output_name, help="write JSON lines to this .jsonl file, one per input "
                       "line, atomically (default: print them)")  # fmt: skip
    files.add_argument("--batch-size", type=positive_int, default=32, help="sequences per forward pass (default 32)")
    files.add_argument("--dtype", default="float32", choices=DTYPES, help=DTYPE_HELP)

    classify = commands.add_parser("classify", parents=[files], help="labels and scores of a text classifier")
    classify.add_argument("texts", nargs="*", help="texts to classify (or --input; .jsonl lines may add "
                          "text_pair); a lone - reads stdin")  # fmt: skip
    classify.add_argument("--top-k", default="1", type=_top_k, help="labels per text, best first: a number or all "
                                                                    "(default 1)")  # fmt: skip
    classify.add_argument(
        "--function",
        choices=FUNCTIONS,
        default=None,
        help="scores from the logits (default: as transformers' pipeline chooses by the model)",
    )
    classify.add_argument("--truncate", action="store_true", help="cut texts longer than the model (default: refuse)")
    classify.add_argument("--labels", type=label_list, help="the classifier's labels in id order, comma-separated "
                          "(for a checkpoint whose config names none: Google's run_classifier.py)")
    classify.set_defaults(run=cmd_classify)

    tag = commands.add_parser("tag", parents=[files], help="entities of a token classifier (NER), with offsets")
    tag.add_argument("texts", nargs="*", help="texts to tag (or --input); a lone - reads stdin")
    tag.add_argument("--aggregation", default="simple", choices=AGGREGATIONS,
                     help="pieces → words → entities, as transformers' pipeline (default simple)")  # fmt: skip
    tag.add_argument(
        "--stride",
        type=whole_number(0),
        default=None,
        help="read long texts in windows sharing this many tokens (default: cut at the model's length)",
    )
    tag.set_defaults(run=cmd_tag)

    answer = commands.add_parser("answer", parents=[files], help="extractive question answering over a context")
    answer.add_argument("--question", help="the question (with --context; or --input FILE.jsonl)")
    answer.add_argument("--context", help="the text to find the answer in")
    answer.add_argument("--top-k", type=positive_int, default=1, help="answers per question (default 1)")
    answer.add_argument(
        "--doc-stride",
        type=whole_number(0),
        default=None,
        help="tokens shared by a long context's windows (default half the window, at most 128)",
    )
    answer.add_argument(
        "--max-answer-len", type=positive_int, default=15, help="tokens in an answer at most (default 15)"
    )
    answer.add_argument("--max-seq-len", type=whole_number(4), default=None,
                        help="tokens per window, at least 4 (default the model's length, at most 384)")  # fmt: skip
    answer.add_argument("--impossible", action="store_true", help='"no answer" (an empty answer) may win')
    answer.set_defaults(run=cmd_answer)

    rerank = commands.add_parser("rerank", parents=[files], help="documents by relevance to a query (a cross-encoder)")
    rerank.add_argument("query", nargs="?", help="the query")  # (optional to argparse: its own line says it is not)
    rerank.add_argument("documents", nargs="*", help="documents (or --input, one per line); a lone - reads stdin")
    rerank.add_argument(
        "--top-n", type=positive_int, default=None, help="print only the best N (the file gets every row)"
    )
    rerank.add_argument("--max-length", type=whole_number(3), default=None,
                        help="tokens per pair, at least 3 (default: the model's)")  # fmt: skip
    rerank.set_defaults(run=cmd_rerank)


def _top_k(value: str) -> str:
    """A positive whole number (positive_int's rule), or all."""
    if value == "all":
        return value
    try:
        return str(positive_int(value))
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(str(error).replace(", got", " or all, got")) from None


def _input_line(args, place: int) -> str:
    """'line N of FILE' (or of stdin): an --input line named in a message."""
    return f"line {place:,} of {'stdin' if args.input == STDIN else args.input}"


def _rows_in_chunks(records: Iterator[dict]) -> Iterator[list[dict]]:
    while chunk := [record for _, record in zip(range(CHUNK), records)]:
        yield chunk


WHAT_TO_GIVE = {"answer": "--question and --context", "rerank": "documents after the query"}  # (the others: texts)


def _checked(records: Iterator[dict], check) -> Iterator[dict]:
    """The records, each passed to ``check(record, place)`` (its line, from 1) as it is read."""
    for place, record in enumerate(records, start=1):
        if check is not None:
            check(record, place)
        yield record


def _run(args, fields: tuple[str, ...], optional: tuple[str, ...], from_arguments, load, answer, finish=None,
         check=None) -> None:  # fmt: skip
    """Check the arguments and the files (every input line, before the model loads; ``check(record,
    place)``: the command's own rule for a line), then load the model (``load(name)``), and write the
    rows that ``answer(model, chunk of records)`` gives."""

    if getattr(args, "texts", None) == [STDIN] and not args.input:  # a lone - reads stdin, as embed's does
        args.texts, args.input = [], STDIN
    if args.command == "rerank" and args.query is None:  # (argparse said "required: query, documents")
        raise CommandError("rerank needs a query: minibert rerank QUERY DOCUMENT ... (or QUERY --input FILE)")
    given, texts = list(_checked(from_arguments(), check)), WHAT_TO_GIVE.get(args.command, "texts as arguments")
    if given and args.input:
        raise CommandError(f"give {texts} or --input FILE, not both")
    if not given and not args.input:
        raise CommandError(f"nothing to do: give {texts} or --input FILE (- for stdin)")
    if not args.model:
        raise CommandError(f"{args.command} needs --model DIR (or a hub id) of a checkpoint with its head")
    output = Path(args.output) if args.output else None
    if args.input and line_files.input_name_problem(args.input):
        raise CommandError(line_files.input_name_problem(args.input))
    if output is not None and not line_files.is_json_lines(output):
        raise CommandError(f"--output must end in .jsonl, got {output.name}")
    if args.input and line_files.is_stream(args.input):  # stdin or a pipe, read once as it comes: a bad line
        if output is not None:  # stops the command there (an --output is not written)
            check_output(output, None if args.input == STDIN else Path(args.input))
        records = line_files.stream_records(args.input, fields, optional)  # the first block checked before loading
        records = _checked(records, check)  # (the command's own rule, as the lines stream)
        kept = []  # read once: what finish reads again is held (only when there is a finish)
        records = records if finish is None else _keeping(records, kept)
        return _write(records, output, functools.partial(answer, load_model(args, load)), finish, lambda: iter(kept))
    if args.input:
        return _answer_file(args, Path(args.input), output, fields, optional, load, answer, finish, check)
    if output is not None:
        check_output(output, None)
    _write(iter(given), output, functools.partial(answer, load_model(args, load)), finish, lambda: iter(given))


def _answer_file(args, path: Path, output, fields, optional, load, answer, finish, check) -> None:
    if output is not None:
        check_output(output, path)
    count_records(path, fields, optional, check)  # every line checked before the model loads
    digests = []  # with a finish (rerank), one digest per record answered: the second read must match them
    first = read_records(path, fields, optional)
    first = first if finish is None else line_files.digesting(first, digests)
    _write(first, output, functools.partial(answer, load_model(args, load)), finish,
           lambda: line_files.as_first_read(read_records(path, fields, optional), digests, path))  # fmt: skip


def _keeping(records: Iterator[dict], kept: list) -> Iterator[dict]:
    for record in records:
        kept.append(record)
        yield record


def _write(records: Iterator[dict], output: Path | None, answer_chunk, finish, again) -> None:
    """Answer the records a chunk at a time and write each chunk's rows; or, with ``finish`` (rows
    that need all of the input first, as rerank's ranks), keep the answers, and write the rows that
    ``finish(answers, printing, records)`` makes of them and of the records read ``again()``."""
    with json_lines_output(output) as lines:
        if finish is None:
            for chunk in _rows_in_chunks(records):
                for row in answer_chunk(chunk):
                    lines.write(row)
                if output is None:
                    sys.stdout.flush()  # a chunk's rows reach a pipe as they are made
        else:
            answers = [found for chunk in _rows_in_chunks(records) for found in answer_chunk(chunk)]
            for row in finish(answers, output is None, again()):
                lines.write(row)
    if output is not None:
        print(f"minibert: wrote {lines.count} rows to {output}", file=sys.stderr)


def _carried(row: dict, record: dict, read: tuple[str, ...], noted: set) -> dict:
    """``row`` (the command's answer to a line), then the line's keys the command does not read
    (``read``), as they are: an "id" comes back beside its answer. A key the row already holds (a
    gold "labels", SQuAD's "answers") keeps the row's value; the input's is not copied, and a note on
    stderr says so once per key (``noted``: the keys said so far)."""
    for key, value in record.items():
        if key in read:
            continue
        if key not in row:
            row[key] = value
        elif key not in noted:
            noted.add(key)
            print(f"minibert: note: the input's \"{key}\" is not copied to the output: its rows hold this command's "
                  f"own \"{key}\"", file=sys.stderr)  # fmt: skip
    return row


def cmd_classify(args) -> None:
    from ..errors import InputFileError
    from ..heads import BertForSequenceClassification
    from ..tasks import classify, load_for_task
    from ..tasks.loading import TooLongError

    top_k = None if args.top_k == "all" else int(args.top_k)
    pair, noted = ("text", "text_pair"), set()  # the keys read; the keys _carried has said it does not copy
    done = [0]  # the lines of the chunks before this one: a text too long is named by its line

    def answer(loaded, chunk: list[dict]) -> list[dict]:
        """Each line as itself, as transformers' pipeline does a mixed list: the lines with a
        text_pair classified as pairs, the others as single texts, each group in one call."""
        labels = [None] * len(chunk)
        for paired in (False, True):
            numbers = [n for n, record in enumerate(chunk) if ("text_pair" in record) == paired]
            if not numbers:
                continue
            inputs = [{key: chunk[n][key] for key in pair} if paired else chunk[n]["text"] for n in numbers]
            try:
                found = classify(inputs, model=loaded, top_k=top_k, function_to_apply=args.function,
                                 truncation=args.truncate, batch_size=args.batch_size)  # fmt: skip
            except TooLongError as error:
                place = done[0] + numbers[error.number] + 1
                where = _input_line(args, place) if args.input else f"text {place}"
                raise InputFileError(f"{where} is {error.length} tokens long, more than the {error.limit} this "
                                     "model takes; pass --truncate to cut it") from None  # fmt: skip
            for n, labels_found in zip(numbers, found):
                labels[n] = labels_found
        done[0] += len(chunk)
        return [_carried({**{key: record[key] for key in pair if key in record}, "labels": found}, record, pair, noted)
                for record, found in zip(chunk, labels)]  # fmt: skip

    def load(name):
        if args.labels:  # the user's names for the head's outputs (head_labels.py refuses a count that does not fit)
            name = BertForSequenceClassification.from_pretrained(name, gemm=gemm_of(args), dtype=args.dtype,
                                                                 device=device_of(args),
                                                                 id2label=dict(enumerate(args.labels)))  # fmt: skip
        return load_for_task(name, BertForSequenceClassification, gemm=gemm_of(args), device=device_of(args),
                             dtype=None if args.labels else args.dtype)  # (loaded with it above: its own kept)

    _run(args, pair[:1], pair[1:], lambda: [{"text": text} for text in args.texts], load, answer)


def cmd_tag(args) -> None:
    import warnings

    from ..heads import BertForTokenClassification
    from ..tasks import load_for_task, tag
    from ..tasks.tag import TextCutWarning

    if args.stride is not None and args.aggregation == "none":
        raise CommandError("--stride reads a text in windows, whose pieces only an --aggregation other than none can "
                           "join: choose one")  # fmt: skip
    done, noted = [0], set()  # the lines of the chunks before this one: a text cut is named by its line

    def answer(loaded, chunk: list[dict]) -> list[dict]:
        with warnings.catch_warnings(record=True) as caught:
            try:
                found = tag([record["text"] for record in chunk], model=loaded, aggregation_strategy=args.aggregation,
                            stride=args.stride, batch_size=args.batch_size)  # fmt: skip
            except TaskArgumentError as error:
                raise flag_error(error) from None
        for warning in caught:  # the library's warnings, said again, a cut text's of its line and --stride
            if isinstance(warning.message, TextCutWarning):
                cut, place = warning.message, done[0] + warning.message.number + 1
                where = _input_line(args, place) if args.input else f"text {place}"
                cut_pieces = f"{'last' if cut.lost == 'end' else 'first'} {cut.pieces - cut.limit} pieces"
                print(f"minibert: warning: {where} is {cut.pieces} pieces long (with [CLS] and [SEP]), more than the "
                      f"{cut.limit} this model takes: its {cut_pieces} are not tagged; --stride N reads a long text in "
                      "windows", file=sys.stderr)  # fmt: skip
            else:
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        done[0] += len(chunk)
        return [_carried({"text": record["text"], "entities": entities}, record, ("text",), noted)
                for record, entities in zip(chunk, found)]  # fmt: skip

    _run(args, ("text",), (), lambda: [{"text": text} for text in args.texts],
         lambda name: load_for_task(name, BertForTokenClassification, gemm=gemm_of(args),
                                    dtype=args.dtype, device=device_of(args)), answer)  # fmt: skip


def cmd_answer(args) -> None:
    from ..errors import InputFileError
    from ..heads import BertForQuestionAnswering
    from ..tasks import answer, load_for_task
    from ..tasks.answer import QuestionTooLongError

    if (args.question is None) != (args.context is None):
        raise CommandError("give --question and --context together (or --input FILE.jsonl)")

    if args.doc_stride is not None and args.max_seq_len is not None and args.doc_stride > args.max_seq_len:
        raise CommandError(f"--doc-stride must be at most the window's {args.max_seq_len} tokens (--max-seq-len), "
                           f"got {args.doc_stride}")  # fmt: skip
    done, noted = [0], set()  # the lines of the chunks before this one: a question too long is named by its line

    def not_empty(record: dict, place: int) -> None:
        """A question and its context hold text: checked on every line before the model loads."""
        for field in ("question", "context"):
            if not record[field].strip():
                if not args.input:
                    raise CommandError(f"--{field} is empty: a question and its context must hold text")
                raise InputFileError(f"the {field} on {_input_line(args, place)} is empty: a question and its "
                                     "context must hold text")  # fmt: skip

    def answer_chunk(loaded, chunk: list[dict]) -> list[dict]:
        try:
            found = answer([r["question"] for r in chunk], [r["context"] for r in chunk], model=loaded,
                           top_k=args.top_k, doc_stride=args.doc_stride, max_answer_len=args.max_answer_len,
                           max_seq_len=args.max_seq_len, handle_impossible_answer=args.impossible,
                           batch_size=args.batch_size)  # fmt: skip
        except TaskArgumentError as error:
            raise flag_error(error) from None
        except QuestionTooLongError as error:
            place = done[0] + error.number + 1
            where = f"the question on {_input_line(args, place)}" if args.input else "the question"
            said = f"{where} is {error.pieces} pieces: with [CLS] and two [SEP] it leaves "
            if error.doc_stride is None:
                raise InputFileError(said + f"no room for the context in --max-seq-len {error.max_seq_len}; "
                                     + error.advice("a larger --max-seq-len", passed="give")) from None
            default = "" if error.stride_given else " (the default: half the window, at most 128)"
            raise InputFileError(said + f"{error.room} pieces for the context in --max-seq-len {error.max_seq_len}, "
                                 f"not more than --doc-stride {error.doc_stride}{default}; "
                                 + error.advice("a larger --max-seq-len or a smaller --doc-stride",
                                                "a smaller --doc-stride", "give")) from None
        done[0] += len(chunk)
        return [_carried({"question": r["question"], "answers": a if isinstance(a, list) else [a]}, r,
                         ("question", "context"), noted) for r, a in zip(chunk, found)]  # fmt: skip

    def from_arguments():
        return [] if args.question is None else [{"question": args.question, "context": args.context}]

    _run(args, ("question", "context"), (), from_arguments,
         lambda name: load_for_task(name, BertForQuestionAnswering, gemm=gemm_of(args), dtype=args.dtype,
                                    device=device_of(args)), answer_chunk, check=not_empty)  # fmt: skip


def cmd_rerank(args) -> None:
    from ..tasks import CrossEncoder

    def load(name: str):
        try:
            ranker = CrossEncoder(name, max_length=args.max_length, gemm=gemm_of(args), dtype=args.dtype,
                                  device=device_of(args))  # fmt: skip
        except TaskArgumentError as error:
            raise flag_error(error) from None
        if ranker.num_labels != 1:
            raise ValueError(f"{args.model}: rerank needs a model with one output (a relevance score); "
                             f"it has {ranker.num_labels} labels")  # fmt: skip
        return ranker

    def answer(ranker, chunk: list[dict]) -> list[float]:
        found = ranker.predict([[args.query, record["text"]] for record in chunk], batch_size=args.batch_size)
        return [float(score) for score in found]  # one score per document: the texts are read again to write

    noted = set()

    def ranked(scores: list[float], printing: bool, records: Iterator[dict]) -> Iterator[dict]:
        """Each document's row: its index, rank (1 = most relevant), score, text and other keys; a
        file gets every row in input order, the terminal the best --top-n first (only those held)."""
        order = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
        ranks = [0] * len(scores)
        for rank, index in enumerate(order, start=1):
            ranks[index] = rank
        shown = set(order[: args.top_n]) if printing else None
        rows = (_carried({"index": index, "rank": ranks[index], "score": scores[index], "text": record["text"]},
                         record, ("text",), noted)
                for index, record in enumerate(records) if shown is None or index in shown)  # fmt: skip
        if not printing:
            yield from rows
            return
        held = {row["index"]: row for row in rows}
        yield from (held[index] for index in order[: args.top_n])

    if args.documents == [STDIN] and not args.input:  # a lone - reads the documents from stdin, as the others do
        args.documents, args.input = [], STDIN
    _run(args, ("text",), (), lambda: [{"text": text} for text in args.documents], load, answer, ranked)
