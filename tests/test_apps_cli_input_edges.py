"""The commands' input files at their edges (review r23): a UTF-8 byte-order mark, a .jsonl line
without the key read (or with it of another type), a file changed between rerank's two reads, and an
output name longer than the file system takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_tasks import make  # noqa: F401  (the fixture)

from helpers import run_minibert as run

MODEL = Path(__file__).parent / "data" / "tiny_hub"  # a random 2-layer BERT, hidden size 32
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
def test_rerank_refuses_a_file_changed_between_its_two_reads(make, tmp_path, monkeypatch, change):  # noqa: F811
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


@pytest.mark.parametrize("command", ["embed", "classify", "rerank"])
def test_an_output_name_too_long_is_cannot_write_it(tmp_path, command):
    """docs/cli.md: `cannot write OUT: File name too long`, before any work. Before: Python 3.11's
    Path.is_dir raised first, and the line said only "OUT: File name too long"."""
    source = tmp_path / "in.txt"
    source.write_text("a\n", encoding="utf-8")
    output = tmp_path / ("v" * 256 + ".jsonl")
    query = ["q"] if command == "rerank" else []
    model = str(tmp_path / "no-model")
    result = run(command, *query, "--model", model, "--input", str(source), "--output", str(output))
    assert result.returncode == 1
    assert result.stderr.strip() == f"minibert: error: cannot write {output}: File name too long", result.stderr
