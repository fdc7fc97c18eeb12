"""Fine-tuning's inputs: the GLUE files read as Google's processors read them, and every feature
(input ids, mask, segment ids, label id) equal to Google's ``run_classifier.convert_single_example``
— compared with Google's own functions (bert-tensorflow 1.0.4, in the TensorFlow venv of
tf_reference.py) on real text: fortunes (Debian's fortunes-min) paired so that most pairs are longer
than the limit, which exercises ``_truncate_seq_pair`` on both sides."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from minibert.errors import DataError
from minibert.training.tasks.examples import ExampleFormat, check_labels, label_list, read_examples
from minibert.training.tasks.features import make_features, write_features
from minibert.training.tasks.head import load_tokenizer
from tf_reference import run_reference

FORTUNES = Path("/usr/share/games/fortunes/fortunes")
RUNNER = Path(__file__).parent / "tf_google_classifier_runner.py"


def fortunes(count: int) -> list[str]:
    """Real English text: the first ``count`` fortunes, each on one line (tabs and newlines → spaces)."""
    if not FORTUNES.exists():
        pytest.skip(f"{FORTUNES} (Debian's fortunes-min) is not installed")
    entries = FORTUNES.read_text(encoding="utf-8", errors="replace").split("\n%\n")
    return [" ".join(entry.split()) for entry in entries if entry.strip()][:count]


def write_glue_files(directory: Path, texts: list[str]) -> None:
    """MRPC, CoLA, MNLI and XNLI files in GLUE's layouts, made of the fortunes."""
    pairs = list(zip(texts[0::2], texts[1::2]))
    mrpc = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    mrpc += [f"{i % 2}\t{i}\t{i + 1}\t{a}\t{b}" for i, (a, b) in enumerate(pairs)]
    cola = [f"source\t{i % 2}\t\t{text}" for i, text in enumerate(texts)]
    nli = ["contradiction", "entailment", "neutral"]
    mnli = ["\t".join(["index"] + [f"c{k}" for k in range(1, 8)] + ["sentence1", "sentence2", "gold_label"])]
    mnli += ["\t".join([str(i)] + ["x"] * 7 + [a, b, nli[i % 3]]) for i, (a, b) in enumerate(pairs)]
    xnli = ["premise\thypo\tlabel"] + [f"{a}\t{b}\t{['contradictory', 'entailment', 'neutral'][i % 3]}"
                                       for i, (a, b) in enumerate(pairs)]  # fmt: skip
    for name, lines in (("mrpc", mrpc), ("cola", cola), ("mnli", mnli)):
        (directory / name).mkdir()
        (directory / name / "train.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "xnli" / "multinli").mkdir(parents=True)
    (directory / "xnli" / "multinli" / "multinli.train.zh.tsv").write_text("\n".join(xnli) + "\n", encoding="utf-8")


def google_features(request: dict) -> list[dict]:
    return run_reference(request, RUNNER)


@pytest.mark.parametrize("max_seq_length", [24])
def test_glue_features_equal_googles_convert_single_example(tmp_path, minilm_dir, max_seq_length):
    """MRPC, CoLA, MNLI and XNLI: the same examples (guid, texts, label), label list and features as
    Google's processors + convert_single_example, and ``--write-features``' TFRecord file parsed by
    TensorFlow with run_classifier's feature spec gives them too; over a quarter exceed the limit (checked)."""
    texts = fortunes(400)
    write_glue_files(tmp_path, texts)
    jobs = [("MrpcProcessor", "mrpc", tmp_path / "mrpc" / "train.tsv"),
            ("ColaProcessor", "cola", tmp_path / "cola" / "train.tsv"),
            ("MnliProcessor", "mnli", tmp_path / "mnli" / "train.tsv"),
            ("XnliProcessor", "xnli", tmp_path / "xnli" / "multinli" / "multinli.train.zh.tsv")]  # fmt: skip
    tokenizer = load_tokenizer(str(minilm_dir))
    for _, name, path in jobs:  # --write-features: read back by TensorFlow as run_classifier's input_fn reads it
        examples = read_examples(path, ExampleFormat(glue=name))
        labels = label_list(examples, ExampleFormat(glue=name))
        features = make_features(examples, tokenizer, max_seq_length, labels, str(path))
        write_features(features, str(tmp_path / f"{name}.tfrecord"))
    request = {"vocab": str(minilm_dir / "vocab.txt"), "do_lower_case": True, "max_seq_length": max_seq_length,
               "jobs": [{"processor": p, "data_dir": str(tmp_path / name), "set": "train",
                         "tfrecord": str(tmp_path / f"{name}.tfrecord")} for p, name, _ in jobs]}  # fmt: skip
    google = google_features(request)
    for (processor, name, path), reference in zip(jobs, google):
        form = ExampleFormat(glue=name)
        examples = read_examples(path, form)
        labels = label_list(examples, form)
        assert labels == reference["labels"], processor
        ours = [[e.guid, e.text_a, e.text_b, e.label] for e in examples]
        assert ours == reference["examples"], f"{processor}: the examples differ"
        features = make_features(examples, tokenizer, max_seq_length, labels, str(path))
        theirs = reference["features"]
        assert len(features) == len(theirs)
        for row, (ids, mask, segments, label) in enumerate(theirs):
            assert features.input_ids[row].tolist() == ids, f"{processor} example {row}: input ids differ"
            assert features.input_mask[row].tolist() == mask, f"{processor} example {row}: mask differs"
            assert features.segment_ids[row].tolist() == segments, f"{processor} example {row}: segments differ"
            assert int(features.label_ids[row]) == label
        assert reference["read_back"] == [[*row, 1] for row in theirs], f"{processor}: the TFRecord file differs"
        full = (features.input_mask.sum(1) == max_seq_length).mean()
        long_enough = processor == "ColaProcessor" or full > 0.25  # CoLA: single sentences, mostly short
        assert long_enough, f"{processor}: only {full:.0%} of the examples reach the limit; the test needs long ones"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# transformers' glue_processors (transformers 4.x, src/transformers/data/processors/glue.py), whose
# column numbers are written here as that file has them: (file lines, expected (text_a, text_b, label)).
TRANSFORMERS_LAYOUTS = {
    "sst-2": ("sentence\tlabel\nit is good\t1\n", [("it is good", None, "1")]),
    "sts-b": ("\t".join(f"h{k}" for k in range(10)) + "\n0\ta\tb\tc\td\te\tf\tone\ttwo\t3.8\n",
              [("one", "two", "3.8")]),
    "qqp": ("id\tqid1\tqid2\tq1\tq2\tis_duplicate\n1\t1\t2\tWhy?\tHow?\t0\nshort\tline\n", [("Why?", "How?", "0")]),
    "qnli": ("index\tquestion\tsentence\tlabel\n7\tWho?\tHe did.\tentailment\n", [("Who?", "He did.", "entailment")]),
    "rte": ("index\ts1\ts2\tlabel\n7\tA cat.\tAn animal.\tentailment\n", [("A cat.", "An animal.", "entailment")]),
    "wnli": ("index\ts1\ts2\tlabel\n7\tIt fell.\tThe cup fell.\t1\n", [("It fell.", "The cup fell.", "1")]),
}  # fmt: skip


@pytest.mark.parametrize("task", sorted(TRANSFORMERS_LAYOUTS))
def test_transformers_glue_layouts(tmp_path, task):
    """The other GLUE tasks' columns, header and short-line rule (QQP skips them) as transformers reads them."""
    text, expected = TRANSFORMERS_LAYOUTS[task]
    examples = read_examples(write(tmp_path / "train.tsv", text), ExampleFormat(glue=task))
    assert [(e.text_a, e.text_b, e.label) for e in examples] == expected


def test_quotes_are_text_in_glue_files(tmp_path):
    """Google reads GLUE files with quotechar=None: a quote is a character of the text."""
    examples = read_examples(write(tmp_path / "train.tsv", 'h\th\th\th\th\n1\t1\t2\t"Yes," he said\tno\n'),
                             ExampleFormat(glue="mrpc"))  # fmt: skip
    assert examples[0].text_a == '"Yes," he said'


def test_generic_files_name_their_columns(tmp_path):
    rows = [("The film was long.", "It was short.", "no"), ('He said "fine"', "He agreed, mostly", "yes")]
    csv_file = write(tmp_path / "pairs.csv", "a,b,y\n" + "".join(f'"{a.replace(chr(34), 2 * chr(34))}","{b}",{y}\n'
                                                              for a, b, y in rows))  # fmt: skip
    jsonl = write(tmp_path / "pairs.jsonl", "".join(json.dumps({"a": a, "b": b, "y": y}) + "\n" for a, b, y in rows))
    tsv = write(tmp_path / "pairs.tsv", "a\tb\ty\n" + "".join(f"{a}\t{b}\t{y}\n" for a, b, y in rows))
    form = ExampleFormat(text_column="a", pair_column="b", label_column="y")
    for path in (csv_file, jsonl, tsv):
        examples = read_examples(path, form)
        assert [(e.text_a, e.text_b, e.label) for e in examples] == rows, path.name
        assert [e.line for e in examples] == ([1, 2] if path.suffix == ".jsonl" else [2, 3])  # after the header
        assert label_list(examples, form) == ["no", "yes"]
        assert label_list(examples, form, ["yes", "no"]) == ["yes", "no"]


@pytest.mark.parametrize(
    ("name", "text", "form", "message"),
    [
        ("empty.csv", "", ExampleFormat(), "is empty: it holds no examples"),
        ("header.csv", "text,label\n", ExampleFormat(), "holds no examples"),
        ("cols.csv", "sentence,label\nhi,a\n", ExampleFormat(), "line 1: no column 'text' (--text-column)"),
        ("short.csv", "text,label\nhi,a\nhello\n", ExampleFormat(), "line 3: the row has no field 'label'"),
        ("bad.jsonl", '{"text": "a", "label": "x"}\n[1]\n', ExampleFormat(), "line 2: not a JSON object"),
        ("field.jsonl", '{"text": "a"}\n', ExampleFormat(), "line 1: no field 'label' (--label-column)"),
        ("mrpc.tsv", "h\nonly\ttwo\n", ExampleFormat(glue="mrpc"), "line 2: MRPC lines have at least 5"),
        ("file.txt", "a\n", ExampleFormat(), "give a .csv, .tsv or .jsonl file"),
    ],
)
def test_bad_files_name_file_line_and_field(tmp_path, name, text, form, message):
    path = write(tmp_path / name, text)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        read_examples(path, form)
    assert str(path) in str(caught.value)


def test_a_dev_label_missing_from_train_is_named(tmp_path):
    dev = write(tmp_path / "dev.csv", "text,label\nfine,pos\nodd,meh\n")
    examples = read_examples(dev, ExampleFormat(set_type="dev"))
    with pytest.raises(DataError, match=r"--dev .*dev.csv, line 3: label 'meh' is not among the training labels"):
        check_labels(examples, ["neg", "pos"], dev, "--dev")


def test_jsonl_labels_that_are_equal_numbers_are_one_label(tmp_path):
    """JSON numbers are labels by value: 1, 1.0 and 1e0 were three classes ('1', '1.0', '1e0' by
    str()), while 1 and "1" were one. Equal numbers are one label now, spelled as the number."""
    path = tmp_path / "train.jsonl"
    labels = ["1", "1.0", "1e0", "2", "2.50", "-0.0"]  # as JSON writes them: numbers, not strings
    path.write_text("".join(f'{{"text": "t{i}", "label": {label}}}\n' for i, label in enumerate(labels)),
                    encoding="utf-8")  # fmt: skip
    examples = read_examples(path, ExampleFormat())
    assert [example.label for example in examples] == ["1", "1", "1", "2", "2.5", "0"]
    assert label_list(examples, ExampleFormat()) == ["0", "1", "2", "2.5"]


def test_jsonl_numbers_are_one_label_exactly_when_their_decimal_values_are_equal(tmp_path):
    """Past 2**53 equal numbers were two labels (1e20 → '1e+20', 100000000000000000000 → its digits),
    and a float's rounding made unequal ones one; past 28 digits Decimal.normalize() rounded
    (10**30 and 10**30 + 1 were both '1e+30'). The reference: the JSON texts' values as decimal.Decimal."""
    from decimal import Decimal

    spelled = ["1", "1.0", "1e0", "10E-1", "1e20", "100000000000000000000", "1.0e20", "100000000000000000001",
               "1e21", "1000000000000000000000", "9007199254740993", "9007199254740992.0", "0.1", "1e-1",
               "0.10000000000000001", "-0", "0.0", "2.5e-7", "0.00000025", "1e400", "1.5E+30",
               "1000000000000000000000000000000", "1000000000000000000000000000001", "1e30",
               "0.12345678901234567890123456789012", "0.12345678901234567890123456789011"]  # fmt: skip
    path = tmp_path / "train.jsonl"
    path.write_text("".join(f'{{"text": "t", "label": {text}}}\n' for text in spelled), encoding="utf-8")
    labels = [example.label for example in read_examples(path, ExampleFormat())]
    for (a, label_a), (b, label_b) in ((x, y) for x in zip(spelled, labels) for y in zip(spelled, labels)):
        assert (label_a == label_b) == (Decimal(a) == Decimal(b)), (a, label_a, b, label_b)
    assert labels[4] == labels[5] == "100000000000000000000" and labels[1] == labels[0] == "1"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_jsonl_nan_and_infinity_are_not_json(tmp_path, constant):
    """Python's json reads NaN and Infinity (they are not JSON, RFC 8259): a label "inf" became a
    class, a text "nan" a text; the line is refused, named."""
    for line in (f'{{"text": "b", "label": {constant}}}', f'{{"text": {constant}, "label": "x"}}'):
        path = write(tmp_path / "train.jsonl", '{"text": "a", "label": "x"}\n' + line + "\n")
        with pytest.raises(DataError, match=rf"train.jsonl, line 2: not a JSON object \({constant} is not JSON"):
            read_examples(path, ExampleFormat())


def test_a_score_is_a_decimal_number_as_pandas_reads_one(tmp_path):
    """--task regress: float() read '1_5' as 15.0 and '٣' as 3.0; pandas (and so datasets and
    run_glue) reads such a column as text. Each spelling a score exactly when pandas reads it as a number."""
    pandas = pytest.importorskip("pandas")
    from minibert.training.tasks.examples import Example
    from minibert.training.tasks.features import _score

    for text in ["1", "-2.5", "1.", ".5", "+1e-3", "1E5", "+.5e+2", "00012", "1_5", "٣", "１", "½", "0x10", "1e",
                 "1d5", "1.5.2", "--1", "e5"]:  # fmt: skip
        column = pandas.read_csv(write(tmp_path / "scores.csv", f"label\n{text}\n"))["label"]
        try:
            ours = _score(Example("train-1", "t", None, text, 2), "scores.csv")
        except DataError as error:
            assert f"scores.csv, line 2: the label {text!r} is not a number" in str(error)
            ours = None
        numeric = pandas.api.types.is_numeric_dtype(column)
        assert (ours is not None) == numeric, (text, ours, column.iloc[0])
        assert ours is None or ours == float(column.iloc[0]), text


@pytest.mark.parametrize("suffix", [".csv", ".tsv", "mrpc"])
def test_a_field_longer_than_csvs_default_limit_is_read_as_pandas_reads_it(tmp_path, suffix):
    """Python's csv refuses a field over 131,072 characters by default (raw: 'field larger than field
    limit'); pandas and datasets read it, and so does a .jsonl file: the same texts as pandas'."""
    import csv

    pandas = pytest.importorskip("pandas")
    long = "word " * 30_000
    if suffix == "mrpc":
        path = write(tmp_path / "train.tsv", f"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t2\t3\t{long}\tb\n")
        theirs = pandas.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE)["#1 String"].tolist()
    else:
        separator = "," if suffix == ".csv" else "\t"
        path = write(tmp_path / f"train{suffix}", f"text{separator}label\n{long}{separator}x\nb{separator}y\n")
        theirs = pandas.read_csv(path, sep=separator)["text"].tolist()
    examples = read_examples(path, ExampleFormat(glue="mrpc" if suffix == "mrpc" else None))
    assert [example.text_a for example in examples] == theirs and len(theirs[0]) == 150_000
    assert csv.field_size_limit() == 131_072  # put back


def test_jsonl_labels_given_as_numbers_and_as_strings_of_numbers_are_refused(tmp_path):
    """1 on one line and "1.0" on another would be two classes by spelling: refused, naming both
    lines. Strings that are not numbers may sit beside numbers; a regression reads every label as a
    score, however it is written."""
    from minibert.training.tasks.examples import check_label_kinds

    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": "other"}\n{"text": "c", "label": " 1.0"}\n',
                    encoding="utf-8")  # fmt: skip
    examples = read_examples(path, ExampleFormat())
    with pytest.raises(DataError, match=rf"^--train {path}, line 3: the label '1.0' is a string of a number, line 1's "
                                        r"label a JSON number \(1\)"):  # fmt: skip
        check_label_kinds(examples, path, "--train")
    check_label_kinds(examples[:2], path, "--train")  # a number and a word: no spelling to confuse
    multilabel = [*examples[:1], replace(examples[1], label="2|x")]  # (multilabel: each label of the field)
    with pytest.raises(DataError, match="line 2: the label '2|x' is a string of a number"):
        check_label_kinds(multilabel, path, "--train", "|")


@pytest.mark.parametrize("case", ["csv integers", "jsonl integers", "csv decimals", "tsv words and numbers"])
def test_number_labels_take_the_ids_run_glue_gives_them(tmp_path, case):
    """run_glue's label_list: the label column as ``datasets`` reads it (pandas for a CSV/TSV: numbers
    when every value is one), its unique values sorted. 12 integer classes: class 2 is id 2 (sorted as
    strings, "10" and "11" came before "2": id 4), and every example's id is run_glue's."""
    pandas = pytest.importorskip("pandas")
    values = {"csv integers": [str(i % 12) for i in range(24)], "jsonl integers": [i % 12 for i in range(24)],
              "csv decimals": ["-1", "0.5", "10", "2", "-0.25", "1e-1"] * 2,
              "tsv words and numbers": ["10", "2", "b", "1"] * 3}[case]  # fmt: skip
    suffix = {"csv": ".csv", "jsonl": ".jsonl", "tsv": ".tsv"}[case.split()[0]]
    path = tmp_path / f"train{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps({"text": f"t {i}", "label": v}) + "\n" for i, v in enumerate(values)))
        column = pandas.read_json(path, lines=True)["label"]
    else:
        separator = "," if suffix == ".csv" else "\t"
        write(path, f"text{separator}label\n" + "".join(f"t {i}{separator}{v}\n" for i, v in enumerate(values)))
        column = pandas.read_csv(path, sep=separator)["label"]
    reference = sorted(column.unique())  # run_glue: label_list = raw_datasets["train"].unique("label"); .sort()
    examples = read_examples(path, ExampleFormat())
    labels = label_list(examples, ExampleFormat())
    assert [labels.index(e.label) for e in examples] == [reference.index(value) for value in column]
    if case.endswith("integers"):
        assert labels == [str(i) for i in range(12)]
