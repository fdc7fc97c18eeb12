"""The commands' input and output files, one row per line: texts in ``.txt``, objects in ``.jsonl``.

``minibert embed``, ``classify``, ``tag``, ``answer`` and ``rerank`` read their texts here and write
their JSON lines here; this is the one home of the rules they share (docs/cli.md):

* *The line rule*: a line ends at "\\n" (a "\\r\\n" ending loses its "\\r" too); a bare "\\r" inside
  a line is text, not a break; a last line without "\\n" counts; a blank line is the empty text, in
  ``.txt`` and ``.jsonl`` alike (a ``.jsonl`` line that needs several fields, ``answer``'s question
  and context, is refused blank). So an output has exactly one row per input line. A UTF-8 byte-order
  mark at the start of a file (or stdin) is dropped, as Python's ``utf-8-sig`` codec drops it.
* A ``.txt`` line is one text: the record ``{fields[0]: line}``. A ``.jsonl`` line is one object
  whose ``fields`` are strings (``optional`` fields, when present, too): the record is those fields
  first, then the line's other keys as they are (an ``"id"``), for a command to copy or leave.
* A key that is not read but names another text is refused (``unread_text``): a pair's second text
  under another name (``"pair"``, ``"text_b"``, ``"sentence2"``, ``"hypothesis"``, ...) or a near miss
  of a field that is read (``"text_pairs"``, ``"Text_Pair"``, ``"txt_pair"``). Left out, the line
  would be read as one text, and a pair classifier's answer would be another input's.
* Every problem is an ``InputFileError`` naming the file (and the line): missing, not a file, not
  UTF-8, malformed JSON, a missing or mistyped field, a text under a key not read, no line at all.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "in.jsonl"
>>> _ = path.write_text('{"id": 7, "text": "a"}\\n\\n{"text": "b", "text_pair": "c"}', encoding="utf-8")
>>> list(read_records(path, ("text",), optional=("text_pair",)))
[{'text': 'a', 'id': 7}, {'text': ''}, {'text': 'b', 'text_pair': 'c'}]
>>> json_line({"text": "naïve", "score": 0.5})
'{"text": "naïve", "score": 0.5}'
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from ..errors import InputFileError, NotTextError
from .json_files import dumps_finite, parse_json
from .plain_text import BLOCK_BYTES, read_text_lines

CHUNK = 2048  # lines a command handles at a time (embedded, answered, written): memory follows the chunk


STDIN = "-"  # the name that reads standard input, as the commands' --input - and a lone - argument
JSON_LINES = ".jsonl"  # the one suffix read as JSON lines, in any case (DOCS.JSONL too)
# Structured files the commands do not read: each line of one would be taken as a text (a CSV header
# classified, a JSON line embedded as it is), so they are refused by their name (input_name_problem).
OTHER_FORMATS = (".json", ".ndjson", ".jsonlines", ".csv", ".tsv", ".parquet", ".npy", ".npz", ".xlsx", ".xml",
                 ".html", ".pdf", ".gz", ".zip")  # fmt: skip
ACCEPTED = ".txt (one text per line), .jsonl (one JSON object per line) or - for stdin"


def name_suffix(path: Path | str) -> str:
    """The suffix a file's name ends in, as the commands read it: ``Path.suffix``, but for a name that
    is only a suffix too (``.jsonl``: ``"$DIR/$SPLIT.jsonl"`` with SPLIT unset), where ``Path.suffix``
    is "" and such a file was read as plain text, each JSON line taken as a text.

    >>> name_suffix("dir/.jsonl"), name_suffix("a.b.NPY"), name_suffix("texts"), name_suffix("-")
    ('.jsonl', '.NPY', '', '')
    """
    name = Path(path).name
    dot = name.rfind(".")
    return name[dot:] if 0 <= dot < len(name) - 1 else ""  # ("x." and ".." end in no suffix, as for Path)


def is_json_lines(path: Path | str) -> bool:
    """Whether a file's name says JSON lines: it ends in .jsonl, in any case (``.jsonl`` alone too)."""
    return name_suffix(path).lower() == JSON_LINES


def input_name_problem(path: Path | str) -> str | None:
    """Why ``--input path`` is refused by its name (a suffix of another structured format), or None.

    >>> print(input_name_problem("pairs.csv"))  # doctest: +NORMALIZE_WHITESPACE
    --input pairs.csv: a .csv file is not read by this command: give .txt (one text per line),
    .jsonl (one JSON object per line) or - for stdin
    >>> input_name_problem("DOCS.JSONL") is None
    True
    """
    suffix = name_suffix(path).lower()
    if str(path) == STDIN or suffix not in OTHER_FORMATS:
        return None
    return f"--input {path}: a {suffix} file is not read by this command: give {ACCEPTED}"


def read_records(path: Path | str, fields: tuple[str, ...] = ("text",),
                 optional: tuple[str, ...] = ()) -> Iterator[dict]:  # fmt: skip
    """One dict per line of ``path`` (``STDIN``: standard input), streamed: memory follows one block
    of the file, never all of it. A ``.txt`` file (and stdin) gives ``{fields[0]: line}``; a ``.jsonl``
    file (any case) one object per line. A record of several fields (``minibert answer``'s question
    and context) is read as JSON lines from stdin and from a pipe without a suffix too (``<(cmd)``,
    ``/dev/stdin``); a file named otherwise is refused, naming why it was read as text. A blank
    ``.jsonl`` line is ``{fields[0]: ""}`` (and refused when several fields are needed). The bytes
    are checked as text as they are read (``plain_text.TextCheck``: not mostly NUL or control bytes, a
    line break within 8 MiB), each line as UTF-8."""
    stdin = str(path) == STDIN
    streamed = stdin or is_stream(path)  # a pipe is read once, as it comes, as stdin is
    name = "stdin" if stdin else Path(path)
    several = len(fields) > 1  # only JSON lines can hold them
    jsonl = is_json_lines(path) or (several and streamed and not name_suffix(path))
    if not jsonl and several:
        raise InputFileError(f"{name} is read as plain text, one text per line, because its name does not end in "
                             f".jsonl; this command needs JSON lines with {', '.join(fields)} fields")  # fmt: skip
    try:
        if stdin and sys.stdin is None:  # (started with stdin closed: `<&-`)
            raise InputFileError("stdin is closed: give the texts as arguments or --input FILE, or pipe them in")
        lines = read_text_lines(name, sys.stdin.buffer) if stdin else read_text_lines(path)
        offset = 0
        for number, raw in enumerate(lines, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                where = f"line {number:,}, byte {offset + error.start:,}"
                raise InputFileError(f"{name} is not UTF-8 text ({where})") from None
            offset += len(raw)
            line = line.removesuffix("\n").removesuffix("\r").removeprefix("\ufeff" if number == 1 else "")  # (BOM)
            yield _record(line, fields, optional, f"{name}:{number}") if jsonl else {fields[0]: line}
        if streamed and offset == 0:  # a file is refused empty by count_records, before any work
            raise InputFileError(f"{name} is empty: no line, nothing to do")
    except NotTextError as error:
        raise InputFileError(str(error)) from None
    except IsADirectoryError:
        raise InputFileError(f"input file {path} is a directory") from None
    except FileNotFoundError:
        raise InputFileError(f"input file not found: {path}") from None


def is_stream(path: Path | str) -> bool:
    """Whether ``path`` is stdin or a pipe that can be read only once (``<(cmd)``, ``/dev/stdin`` on
    a pipe, a named FIFO): not a regular file, a directory or a missing path. A stream is read as
    stdin is (``stream_records``), never counted first and then read again: a second read of a pipe
    finds it empty, and a second open of a FIFO waits for a writer forever."""
    import stat

    if str(path) == STDIN:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def stream_records(source: Path | str = STDIN, fields: tuple[str, ...] = ("text",),
                   optional: tuple[str, ...] = ()) -> Iterator[dict]:  # fmt: skip
    """``read_records(source)`` of stdin or a pipe (``is_stream``) with its first ``CHUNK`` lines (or
    first MiB) already read and checked: call it before loading a model, so that a stream that is
    empty, not text or not UTF-8 is refused before the wait, as a file is by ``count_records``; the
    rest is checked as it streams."""
    import itertools

    records = read_records(source, fields, optional)
    first, size = [], 0
    for record in records:  # read_records raises on an empty stream
        first.append(record)
        size += sum(len(value) for value in record.values() if isinstance(value, str)) + 1
        if len(first) == CHUNK or size >= BLOCK_BYTES:
            break
    return itertools.chain(first, records)


def _record(line: str, fields: tuple[str, ...], optional: tuple[str, ...], where: str) -> dict:
    """One .jsonl line as a record (``where`` is "file:line" for the error message)."""
    wanted = f'a "{fields[0]}" string' if len(fields) == 1 else ", ".join(f'"{name}"' for name in fields) + " strings"
    if not line.strip():
        if len(fields) > 1:
            raise InputFileError(f"{where}: a blank line, expected an object with {wanted}")
        return {fields[0]: ""}
    try:
        record = parse_json(line, strict=True, unique_keys=True)  # (written back as read: JSON, each key once)
    except ValueError as error:
        raise InputFileError(f"{where}: not valid JSON ({str(error)[:80]})") from None
    if not isinstance(record, dict) or not all(isinstance(record.get(name), str) for name in fields):
        raise InputFileError(f"{where}: expected an object with {wanted}; {_what_is_there(record, fields)}")
    wrong = [name for name in optional if name in record and not isinstance(record[name], str)]
    if wrong:
        raise InputFileError(f"{where}: {', '.join(wrong)} must be a string")
    read = (*fields, *optional)
    for key in record:
        problem = None if key in read else unread_text(key, read)
        if problem:
            names = ", ".join(f'"{name}"' for name in read)
            raise InputFileError(f"{where}: the key \"{key}\" {problem}, and is not read (this command reads {names}): "
                                 "the line would be taken without it; rename the key or remove it")  # fmt: skip
    kept = {name: record[name] for name in read if name in record}
    return {**kept, **{key: value for key, value in record.items() if key not in kept}}



def _what_is_there(record, fields: tuple[str, ...]) -> str:
    """What a .jsonl line holds instead of its string ``fields``, for the refusal: what it is (not an
    object), or the field that is missing (with the line's keys, and one spelled like it) or not a string.

    >>> _what_is_there({"Text": "a", "id": 1}, ("text",))
    'the line has no "text" (its keys: "Text", "id"); "Text" is spelled like "text": rename it'
    >>> _what_is_there({"text": 5}, ("text",)), _what_is_there([1, 2], ("text",))
    ('"text" is a number, not a string', 'the line is an array')
    """
    if not isinstance(record, dict):
        return f"the line is {_kind(record)}"
    for name in fields:
        if name in record and not isinstance(record[name], str):
            return f'"{name}" is {_kind(record[name])}, not a string'
        if name not in record:
            keys = ", ".join(json.dumps(key[:40], ensure_ascii=False) for key in list(record)[:8])
            keys += ", ..." if len(record) > 8 else ""
            near = [key for key in record if (unread_text(key, (name,)) or "").startswith("is spelled like")]
            hint = f'; "{near[0]}" is spelled like "{name}": rename it' if near else ""
            return f'the line has no "{name}" ({f"its keys: {keys}" if keys else "it is an empty object"}){hint}'
    return "it has them"  # (not reached: the caller found one missing or not a string)


def _kind(value) -> str:
    """A JSON value's kind in words: "a number", "an array", "null", ..."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    kinds = ((str, "a string"), ((int, float), "a number"), (list, "an array"), (dict, "an object"))
    return next(kind for types, kind in kinds if isinstance(value, types))

# Keys that name a text of a pair in the pair data a .jsonl line comes from, written as _spelled writes
# them: transformers' text_pair and its tokenizers' pair, Google's text_a/text_b, GLUE's columns
# (sentence1/2, question1/2, question/sentence, premise/hypothesis), sentence-transformers' pairs and
# triplets (sentence1/2, query, anchor/positive/negative), MS MARCO's query/passage; and other spellings.
PAIR_KEYS = frozenset({"textpair", "pair", "texta", "textb", "text1", "text2", "second", "secondtext", "sentence",
                       "sentence1", "sentence2", "sentencea", "sentenceb", "question", "question1", "question2",
                       "premise", "hypothesis", "query", "passage", "anchor", "positive", "negative"})  # fmt: skip


def unread_text(key: str, read: tuple[str, ...]) -> str | None:
    """Why a .jsonl key that a command does not read (``read``: the keys it does) must not be left
    out, or None for a key that is only extra (an "id", a gold "label"): it names a text of a pair
    (``PAIR_KEYS``), or it is a near miss of a key read, one letter or case or separator away.

    >>> unread_text("sentence2", ("text", "text_pair")), unread_text("txt_pair", ("text", "text_pair"))
    ('names a text of a pair', 'is spelled like "text_pair"')
    >>> unread_text("text_pair", ("text",)), unread_text("id", ("text", "text_pair"))
    ('names a text of a pair', None)
    """
    spelled = _spelled(key)
    near = [name for name in read if _spelled(name) == spelled] or [
        name for name in read if spelled not in PAIR_KEYS and _one_edit(spelled, _spelled(name))
    ]  # "Text_Pair" is spelled like text_pair, "text_b" (one letter from "text") names a pair's text
    if near:
        return f'is spelled like "{near[0]}"'
    return "names a text of a pair" if spelled in PAIR_KEYS else None


def _spelled(key: str) -> str:
    """A key as written without case and separators: "Text_Pair", "text-pair" and "textpair" alike."""
    return "".join(character for character in key.casefold() if character not in "_- .")


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` is ``b`` or one edit from it: a letter added, dropped or changed, or two
    neighbours swapped ("text_piar")."""
    if abs(len(a) - len(b)) > 1:
        return False
    start = next((n for n, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    a, b = a[start:], b[start:]  # both from their first difference
    return a[1:] == b[1:] or a[1:] == b or a == b[1:] or (a[:2] == b[1::-1] and a[2:] == b[2:])


def count_records(path: Path, fields: tuple[str, ...] = ("text",), optional: tuple[str, ...] = (),
                  check=None) -> int:  # fmt: skip
    """Read the whole file once, checking every line: its number of records, before any work starts.
    A file without a single line is refused (there is nothing to do). ``check(record, line)``, when
    given, is a command's own rule for a line (``minibert answer``: a question that is not empty)."""
    path = Path(path)
    if not path.exists():
        raise InputFileError(f"input file not found: {path}")
    count = 0
    for count, record in enumerate(read_records(path, fields, optional), start=1):
        if check is not None:
            check(record, count)
    if count == 0:
        raise InputFileError(f"input file {path} is empty: no line, nothing to do")
    return count


def _digest(record: dict) -> bytes:
    """16 bytes that tell one record from another (a 30,000-line file: half a megabyte of them)."""
    return hashlib.blake2b(json.dumps(record, sort_keys=True).encode(), digest_size=16).digest()


def digesting(records: Iterator[dict], digests: list) -> Iterator[dict]:
    """The records, each one's digest appended to ``digests`` as it passes (for ``as_first_read``)."""
    for record in records:
        digests.append(_digest(record))
        yield record


def as_first_read(records: Iterator[dict], digests: list, path: Path) -> Iterator[dict]:
    """The records of a file read a second time (rerank writes each score beside its text read again),
    each checked against its digest from the first read: a file replaced or edited in between would
    put each score beside another text, and one that grew past the scores would fail at the end; either
    is refused, naming the file, before anything is written (the output is written atomically)."""
    count = 0
    for count, record in enumerate(records, start=1):
        if count > len(digests) or _digest(record) != digests[count - 1]:
            raise InputFileError(f"{path} changed while it was read: line {count:,} is not the line scored "
                                 f"({len(digests):,} lines were scored); run the command again on a file that "
                                 "stays as it is")  # fmt: skip
        yield record
    if count != len(digests):
        raise InputFileError(f"{path} changed while it was read: {len(digests):,} lines were scored, {count:,} "
                             "read again; run the command again on a file that stays as it is")  # fmt: skip


def json_line(record: dict) -> str:
    """One JSON line, UTF-8 where it can be; a text with lone surrogates (undecodable bytes of a
    command-line argument) is written with \\u escapes instead, so every text can be written."""
    line = dumps_finite(record, ensure_ascii=False)  # (NaN or infinity: a ValueError naming the field)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = dumps_finite(record, ensure_ascii=True)
    return line


def printable(text: str, encoding: str | None = None) -> str:
    """``text`` as stdout can print it (``encoding``: stdout's): a character that the encoding cannot
    write, such as a lone surrogate from an undecodable argument, becomes a backslash escape
    (``\\udce9``), as ``json_line`` writes it, instead of an error halfway through the output.

    >>> printable("caf\\udce9", "utf-8")
    'caf\\\\udce9'
    """
    encoding = encoding or getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # an encoding Python does not know: left to the stream
        pass
    return text


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (symlinks, hard links, ./ and ../ included)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


@contextlib.contextmanager
def json_lines_output(output: Path | None) -> Iterator[JsonLines]:
    """Rows written as JSON lines, one ``write(row)`` at a time: printed (``output`` None), or to
    ``output`` atomically (a temporary file renamed into place when the block ends without an
    error, so a failed run leaves no partial file).

    >>> with json_lines_output(None) as lines:
    ...     lines.write({"text": "a", "score": 1.0})
    {"text": "a", "score": 1.0}
    >>> lines.count
    1
    """
    from .atomic_files import atomic_output

    if output is None:
        yield JsonLines(lambda line: print(line))
        return
    with atomic_output(output) as handle:
        yield JsonLines(lambda line: handle.write((line + "\n").encode("utf-8")))


class JsonLines:
    """Where ``json_lines_output`` writes: ``write(row)`` one JSON line; ``count`` lines so far."""

    def __init__(self, put):
        self.put, self.count = put, 0

    def write(self, row: dict) -> None:
        self.put(json_line(row))
        self.count += 1


def check_output(output: Path, source: Path | None) -> None:
    """Refuse, before anything is read or loaded, an output whose directory does not exist (or is a
    file), that is a directory itself or another thing that is not a regular file (a FIFO, a
    device), or that names the input file (directly, through "..", a symbolic link or a hard link)."""
    from .atomic_files import refuse_what_is_not_a_file, why_not_a_folder

    folder = output.parent if str(output.parent) else Path(".")
    reason = why_not_a_folder(folder)
    if reason:
        raise InputFileError(f"--output {output}: the output directory {folder} {reason}")
    try:
        is_dir = output.is_dir()
    except OSError:  # a name too long (Python 3.11's is_dir raises): "cannot write OUT: File name too long" below
        is_dir = False
    if is_dir:  # found before the work, not at the rename after it
        raise InputFileError(f"--output {output} is a directory: give the name of a file to write")
    refuse_what_is_not_a_file(output)  # a FIFO, a device: the rename after the work would replace it
    if source is not None and same_file(source, output):
        raise InputFileError(f"--output {output} is the input file {source}: writing it would destroy the input")
