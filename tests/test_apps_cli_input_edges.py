"""The commands' input files at their edges (review r23): a UTF-8 byte-order mark, a .jsonl line
without the key read (or with it of another type), a file changed between rerank's two reads, and an
output name longer than the file system takes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import run_minibert as run
from tiny_hub import TINY as MODEL  # a random 2-layer BERT, hidden size 32

BOM = b"\xef\xbb\xbf"


def _embedded(source: Path, tmp_path: Path, name: str) -> list[dict]:
    output = tmp_path / f"{name}_vectors.jsonl"
    result = run("embed", "--model", str(MODEL), "--input", str(source), "--output", str(output))
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("suffix", [".txt", ".jsonl"])
def test_a_byte_order_mark_at_the_start_is_dropped_as_utf_8_sig_drops_it(tmp_path, suffix):
    """Before: a .txt kept it in the first text ('\\ufeffhello', so a join on the text failed) and a
    .jsonl was refused with Python's "decode using utf-8-sig"."""
    lines = ["hello", "a \ufeff inside a line is kept", "world"]
    body = "".join((json.dumps({"text": line}) if suffix == ".jsonl" else line) + "\n" for line in lines)
    with_bom, without = tmp_path / f"bom{suffix}", tmp_path / f"plain{suffix}"
    with_bom.write_bytes(BOM + body.encode("utf-8"))
    without.write_bytes(body.encode("utf-8"))
    decoded = with_bom.read_bytes().decode("utf-8-sig").splitlines()  # the reference: Python's codec
    expected = [json.loads(line)["text"] for line in decoded] if suffix == ".jsonl" else decoded
    rows = _embedded(with_bom, tmp_path, "bom")
    assert [row["text"] for row in rows] == expected == lines
    assert rows == _embedded(without, tmp_path, "plain")  # the same texts, the same vectors


def test_a_byte_order_mark_on_stdin_is_dropped(tmp_path):
    result = run("embed", "--model", str(MODEL), "--input", "-", "--json", stdin=BOM + b"hello\nworld\n")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["text"] for line in result.stdout.splitlines()] == ["hello", "world"]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('{"Text": "a", "id": 1}', 'the line has no "text" (its keys: "Text", "id"); "Text" is spelled like "text": '
                                   "rename it"),  # fmt: skip
        ('{"sentence": "a"}', 'the line has no "text" (its keys: "sentence")'),
        ("{}", 'the line has no "text" (it is an empty object)'),
        ('{"text": 5}', '"text" is a number, not a string'),
        ('{"text": null}', '"text" is null, not a string'),
        ("[1, 2]", "the line is an array"),
    ],
)
def test_a_line_without_the_key_read_says_what_it_holds(tmp_path, line, said):
    """Before: every one of these was "expected an object with a "text" string", whatever the line held."""
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "fine"}\n' + line + "\n", encoding="utf-8")
    result = run("embed", "--model", str(MODEL), "--input", str(source))
    assert result.returncode == 1
    assert result.stderr.strip() == f'minibert: error: {source}:2: expected an object with a "text" string; {said}'


@pytest.mark.parametrize("change", ["reversed", "one line more", "one line less", "unchanged"])
def test_rerank_refuses_a_file_changed_between_its_two_reads(make, tmp_path, monkeypatch, change):
    """rerank scores every line, then reads the file again to write each score beside its text.
    Before: a file replaced in between (same count) got its scores beside other texts, rc 0; one
    that grew ended in "internal error: IndexError"."""
    from minibert.tasks import CrossEncoder

    directory = make("BertForSequenceClassification", scale=5.0, max_length=128, num_labels=1)
    texts = [f"document {n} about {'cats' if n % 3 else 'dogs'}" for n in range(12)]
    source, output = tmp_path / "docs.txt", tmp_path / "ranked.jsonl"
    source.write_text("".join(text + "\n" for text in texts), encoding="utf-8")
    edited = {"reversed": texts[::-1], "one line more": [*texts, "one more"], "one line less": texts[:-1],
              "unchanged": texts}[change]  # fmt: skip
    real = CrossEncoder.predict

    def predict(self, *args, **kwargs):  # the file is edited while the model scores it
        scores = real(self, *args, **kwargs)
        source.write_text("".join(text + "\n" for text in edited), encoding="utf-8")
        return scores

    monkeypatch.setattr(CrossEncoder, "predict", predict)
    result = run("rerank", "cats", "--model", str(directory), "--input", str(source), "--output", str(output))
    if change == "unchanged":  # the control: the same texts read twice
        assert result.returncode == 0, result.stderr
        assert [json.loads(line)["text"] for line in output.read_text().splitlines()] == texts
        return
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"minibert: error: {source} changed while it was read"), result.stderr
    assert not output.exists()  # nothing written


# Every command that writes, with its output named OUT (a file or a folder): the other files named
# need not exist, since the name is checked before any work (the model is not loaded, the input not read).
WRITERS = {
    "embed": ["embed", "--model", "NO_MODEL", "--input", "IN", "--output", "OUT.jsonl"],
    "classify": ["classify", "--model", "NO_MODEL", "--input", "IN", "--output", "OUT.jsonl"],
    "tag": ["tag", "--model", "NO_MODEL", "--input", "IN", "--output", "OUT.jsonl"],
    "answer": ["answer", "--model", "NO_MODEL", "--input", "IN", "--output", "OUT.jsonl"],
    "rerank": ["rerank", "q", "--model", "NO_MODEL", "--input", "IN", "--output", "OUT.jsonl"],
    "explore": ["explore", "hello", "--model", "NO_MODEL", "--output", "OUT.html"],
    "convert": ["convert", "NO_MODEL", "OUT"],
    "vocab": ["vocab", "--input", "IN", "--output", "OUT"],
    "example-data": ["example-data", "mrpc", "--output", "OUT"],
    "finetune": ["finetune", "--model", "NO_MODEL", "--train", "IN", "--output", "OUT"],
    "finetune --write-features": ["finetune", "--model", "NO_MODEL", "--train", "IN", "--write-features",
                                  "OUT.tfrecord"],  # fmt: skip
    "pretrain": ["pretrain", "--data", "IN", "--config", "IN", "--output", "OUT", "--steps", "1", "--batch-size", "1"],
    "pretraining-data": ["pretraining-data", "--input", "IN", "--vocab", "IN", "--output", "SHORT,OUT.tfrecord"],
    "plot": ["plot", "NO_RUN", "--output", "OUT.png"],
}


@pytest.mark.parametrize("length", ["a name over 255 bytes", "a path over PATH_MAX"])
@pytest.mark.parametrize("writer", WRITERS)
def test_an_output_name_too_long_is_cannot_write_it(tmp_path, writer, length):
    """docs/cli.md: `cannot write OUT: File name too long`, before any work, for a file or a folder,
    whatever the command. Before: embed and the tasks said it (Python 3.11's Path.is_dir had raised
    first, the line said only "OUT: File name too long"); convert, explore, example-data, finetune
    and pretrain still said that, and vocab "output directory OUT cannot be read (File name too
    long)". A path too long as a whole (each part fits, PATH_MAX does not) is the same error."""
    source = tmp_path / "in.txt"
    source.write_text("a\n", encoding="utf-8")
    if length == "a name over 255 bytes":
        out = str(tmp_path / ("v" * 256))
    else:
        out = str(tmp_path / "/".join(["d" * 200] * (os.pathconf(tmp_path, "PC_PATH_MAX") // 200 + 1)))
    arguments = [argument.replace("OUT", out).replace("SHORT", str(tmp_path / "a.tfrecord"))
                 for argument in WRITERS[writer]]  # fmt: skip
    arguments = [{"IN": str(source), "NO_MODEL": str(tmp_path / "no-model"),
                  "NO_RUN": str(tmp_path / "no-run")}.get(argument, argument) for argument in arguments]  # fmt: skip
    written = next(argument for argument in arguments if out in argument).split(",")[-1]
    result = run(*arguments)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip() == f"minibert: error: cannot write {written}: File name too long", result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt"]  # nothing written
