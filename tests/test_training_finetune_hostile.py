"""``minibert finetune`` attacked as a hostile user would (issue 45's own hostile pass): malformed
GLUE/CSV/TSV/JSONL/CoNLL files, flags at and past their limits, models and run folders that are not
what they should be. Each case: ONE line on stderr naming the file, line, field, flag or limit; a
non-zero exit (2 only for usage errors, as argparse's: a flag outside its limits is one, refused by
the flag parser, training/options.py); nothing written or overwritten. Run in this
process (helpers.run_minibert): the whole list takes seconds."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from test_training_finetune_run import TINY, flags, write_examples

from helpers import run_minibert

GOOD = "text,label\nthe water,wet\nthe bank,dry\nriver love,wet\nthe vault,dry\n"


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` and its SHA-256 (nothing overwritten: the same afterwards)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"

# (case, what the train file holds (or None: the good one), extra flags, exit code, what the line names)
CASES = [
    ("csv-too-many-columns", "text,label\nthe water,wet,extra\n", [], 1, "{train}, line 2"),
    ("csv-too-few-columns", "text,label\nthe water\nthe bank,dry\n", [], 1, "{train}, line 2"),
    ("utf16-with-bom", "text,label\nthe water,wet\n".encode("utf-16"), [], 1, "{train}"),
    ("utf16-without-bom", "text,label\nthe water,wet\nthe bank,dry\n".encode("utf-16-le"), [], 1,
     "{train} is not text: 50% of its bytes"),
    ("binary", bytes(range(32)) * 64, [], 1, "{train} is not text"),
    ("not-utf8", b"text,label\nthe w\xe9ter,wet\nthe bank,dry\n", [], 1, "{train}, line 2: not UTF-8"),
    ("empty-label", "text,label\nthe water,\nthe bank,dry\n", [], 1,
     "--train {train}, line 2: the label field is empty"),
    ("empty-regress-label", "text,label\nthe water,\nthe bank,2\n", ["--task", "regress"], 1,
     "{train}, line 2: the label '' is not a number"),
    ("labels-empty-entry", None, ["--labels", "wet,,dry"], 2, "--labels: must name each label once"),
    ("header-only", "text,label\n", [], 1, "{train}"),
    ("jsonl-broken", '{"text": "the water", "label": "wet"}\n{"text": \n', ["--suffix", ".jsonl"], 1,
     "{train}, line 2: not a JSON object"),
    ("jsonl-list", '["the water", "wet"]\n', ["--suffix", ".jsonl"], 1, "{train}, line 1: not a JSON object"),
    ("jsonl-null-label", '{"text": "the water", "label": null}\n', ["--suffix", ".jsonl"], 1,
     "{train}, line 1: field 'label'"),
    ("tsv-wrong-columns", "text\tlabel\nthe water\n", ["--suffix", ".tsv"], 1, "{train}, line 2"),
    ("glue-mrpc-short-line", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t2\t3\tthe water\n",
     ["--suffix", ".tsv", "--glue", "mrpc"], 1, "{train}, line 2: MRPC lines have at least 5"),
    ("glue-mrpc-lone-carriage-return", MRPC_HEADER + "1\t2\t3\tthe wa\rter\tthe bank\n",
     ["--suffix", ".tsv", "--glue", "mrpc"], 1, "{train}, line 2: new-line character seen in unquoted field"),
    ("glue-xnli-dev-no-chinese", "language\tgold_label\t2\t3\t4\t5\tsentence1\tsentence2\n"
     "de\tneutral\t\t\t\t\tdas Wasser\tdie Bank\n", ["--suffix", ".tsv", "--glue", "xnli-dev"], 1,
     "{train} holds no examples in 'zh', the only language --glue xnli-dev keeps (its rows are in 'de')"),
    ("csv-extra-field-spanning-lines", 'text,label\nfine,pos\n"t\nu",1,"e\nf"\n', [], 1,
     "{train}, lines 3-5 (one row: a quoted field spans them): the row has 3 fields"),
    ("tsv-unclosed-quote", 'text\tlabel\nthe water\twet\n"the bank\tdry\nriver\twet\n', ["--suffix", ".tsv"], 1,
     "{train}, lines 3-4 (one row: a quoted field spans them): the row has no field 'label'"),
    ("conll-no-tag", "EU B-ORG\nrejects\n", ["--suffix", ".conll", "--task", "tag"], 1, "{train}, line 2"),
    ("conll-utf16", "EU B-ORG\nrejects O\n".encode("utf-16-le"), ["--suffix", ".conll", "--task", "tag"], 1,
     "{train} is not text"),
    # one tag only: the softmax is 1 whatever the input, the loss 0, nothing learned (as classify's one label)
    ("conll-one-tag", "the O\ncat O\n\nparis O\n", ["--suffix", ".conll", "--task", "tag"], 1,
     "--train {train} holds one label only ('O'): a classifier needs at least two"),
    ("tag-jsonl", '{"tokens": ["the", "cat"], "ner_tags": [1, 0]}\n', ["--suffix", ".jsonl", "--task", "tag"], 1,
     "{train}: --task tag reads CoNLL files (a word and its tag per line"),
    # Python's float() reads digit groups and any script's digits; a score is ASCII digits, as pandas reads one
    ("regress-digit-groups", "text,label\nthe water,1_5\nthe bank,2\n", ["--task", "regress"], 1,
     "{train}, line 2: the label '1_5' is not a number"),
    ("regress-arabic-digit", "text,label\nthe water,2\nthe bank,\u0663\n", ["--task", "regress"], 1,
     "{train}, line 3: the label '\u0663' is not a number"),
    ("jsonl-infinity-label", '{"text": "the water", "label": 1}\n{"text": "the bank", "label": Infinity}\n',
     ["--suffix", ".jsonl"], 1, "{train}, line 2: not a JSON object (Infinity is not JSON"),
    # a flag the task does not read: a usage error naming it, not a setting dropped (docs/cli.md)
    ("classify-label-all-pieces", None, ["--label-all-pieces"], 2,
     "--task classify does not read --label-all-pieces, which is for --task tag"),
    ("classify-doc-stride", None, ["--doc-stride", "7"], 2, "--task classify does not read --doc-stride"),
    ("classify-label-separator", None, ["--label-separator", ";"], 2,
     "--task classify does not read --label-separator, which is for --task multilabel"),
    ("tag-label-column", "EU B-ORG\nrejects O\n", ["--suffix", ".conll", "--task", "tag", "--label-column", "t"], 2,
     "--task tag does not read --label-column, which is for --task classify, regress, multilabel"),
    ("tag-version-2", "EU B-ORG\nrejects O\n", ["--suffix", ".conll", "--task", "tag", "--version-2-with-negative"],
     2, "--task tag does not read --version-2-with-negative, which is for --task answer"),
    ("tag-glue", "EU B-ORG\nrejects O\n", ["--suffix", ".conll", "--task", "tag", "--glue", "mrpc"], 2,
     "--task tag does not read --glue, which is for --task classify, regress"),
    ("regress-labels", None, ["--task", "regress", "--labels", "wet,dry"], 2,
     "--task regress does not read --labels"),
    ("glue-mrpc-columns", MRPC_HEADER + "1\t2\t3\tthe water\tthe bank\n",
     ["--suffix", ".tsv", "--glue", "mrpc", "--pair-column", "b"], 2,
     "--glue mrpc does not read --pair-column: GLUE files are read by column number"),
    # --glue and --task that contradict each other: a usage error as pretrain's FlagConflictError (exit 2)
    ("glue-sts-b-classify", None, ["--glue", "sts-b"], 2, "--glue sts-b is a regress task: give --task regress"),
    ("multilabel-empty-separator", None, ["--task", "multilabel", "--label-separator", ""], 1,
     "--label-separator is empty"),
    ("labels-twice", None, ["--labels", "wet,dry,wet"], 2, "--labels: must name each label once"),
    ("csv-label-column-twice", "text,label,label\nthe water,wet,dry\nthe bank,dry,wet\n", [], 1,
     "{train}, line 1: the header names 'label' more than once"),
    ("csv-text-column-twice", "text,text,label\nthe water,the bank,wet\n", [], 1,
     "{train}, line 1: the header names 'text' more than once"),
    ("jsonl-label-key-twice", '{"text": "the water", "label": "wet", "label": "dry"}\n', ["--suffix", ".jsonl"], 1,
     "{train}, line 1: not a JSON object (the key 'label' is given twice)"),
    ("one-label-only", "text,label\nthe water,wet\nthe river,wet\nriver love,wet\nthe rain,wet\n", [], 1,
     "--train {train} holds one label only ('wet'): a classifier needs at least two"),
    ("labels-one-given", "text,label\nthe water,wet\nthe river,wet\nriver love,wet\nthe rain,wet\n",
     ["--labels", "wet"], 1, "--labels names one label only ('wet')"),
    ("multilabel-one-label-only", "text,label\nthe water,wet\nthe river,wet\nriver love,\nthe rain,wet\n",
     ["--task", "multilabel"], 1, "holds one label only ('wet')"),
    ("labels-missing-one", None, ["--labels", "wet"], 1, "label 'dry' is not among"),
    ("max-seq-length-2", None, ["--max-seq-length", "2"], 2, "--max-seq-length: must be a whole number from 3"),
    ("max-seq-length-0", None, ["--max-seq-length", "0"], 2, "--max-seq-length"),
    ("max-seq-length-100000", None, ["--max-seq-length", "100000"], 1, "--max-seq-length 100000"),
    ("batch-larger-than-data", None, ["--batch-size", "64"], 1, "--batch-size"),
    ("eval-every-0", None, ["--eval-every", "0"], 2, "--eval-every"),
    ("save-every-0", None, ["--save-every", "0"], 2, "--save-every"),
    ("seed-huge", None, ["--seed", "100000000000000000000"], 2, "--seed"),
    ("seed-negative", None, ["--seed", "-1"], 2, "--seed"),
    ("dropout-1.5", None, ["--dropout", "1.5"], 2, "--dropout"),
    ("warmup-2", None, ["--warmup-proportion", "2"], 2, "--warmup-proportion"),
    ("warmup-nan", None, ["--warmup-proportion", "nan"], 2, "--warmup-proportion"),
    ("learning-rate-nan", None, ["--learning-rate", "nan"], 2, "--learning-rate"),
    ("learning-rate-negative", None, ["--learning-rate", "-1"], 2, "--learning-rate"),
    ("epochs-inf", None, ["--epochs", "inf"], 2, "--epochs"),
    ("max-grad-norm-0", None, ["--max-grad-norm", "0"], 2, "--max-grad-norm"),
    ("weight-decay-nan", None, ["--weight-decay", "nan"], 2, "--weight-decay"),
    ("text-column-missing", None, ["--text-column", "sentence"], 1, "{train}, line 1: no column 'sentence'"),
    ("pair-column-missing", None, ["--pair-column", "second"], 1, "{train}, line 1: no column 'second'"),
    ("model-is-a-file", None, ["--model", "{train}"], 1, "{train}"),
    ("model-missing", None, ["--model", "{tmp}/nowhere"], 1, "nowhere"),
    ("output-is-a-file", None, ["--output", "{train}"], 1, "--output {train} exists and is not a directory"),
    ("train-is-a-folder", None, ["--train", "{tmp}"], 1, "{tmp} is not a file"),
    ("learning-rates-word", None, ["--learning-rates", "fast", "--dev", "{train}"], 2, "--learning-rates"),
    ("dev-is-missing", None, ["--dev", "{tmp}/dev.csv"], 1, "{tmp}/dev.csv does not exist"),
    # a sweep's values: each rate checked by the flag's parser, every trial's before the first runs (issue 53, item 7)
    ("learning-rates-inf", None, ["--learning-rates", "1e-4,inf", "--dev", "{train}"], 2,
     "argument --learning-rates: each rate must be a number above 0, got inf (in '1e-4,inf')"),
    ("learning-rates-1e400", None, ["--learning-rates", "2e-5,1e400", "--dev", "{train}"], 2,
     "each rate must be a number above 0, got 1e400"),
    ("seeds-past-the-last-seed", None, ["--seed", str(2**63 - 2), "--seeds", "3", "--dev", "{train}"], 1,
     f"the sweep's trial (learning rate 0.001, seed {2**63}): --seed must be a whole number from 0 to"),
    # a sweep's rates are usage errors naming the value, before any trial (a repeated rate once ran a
    # whole trial and then failed on the second's folder; -1 and nan said "numbers above 0" with exit 1;
    # an empty list ran no sweep at the default rate)
    ("learning-rates-twice", None, ["--learning-rates", "1e-3,1e-3", "--dev", "{train}"], 2,
     "argument --learning-rates: 1e-3 is given 2 times: give each once"),
    ("learning-rates-one-number-twice", None, ["--learning-rates", "1e-3,0.001", "--dev", "{train}"], 2,
     "1e-3 and 0.001 are the same number: give each once"),
    ("learning-rates-one-folder", None, ["--learning-rates", "1e-5,1.0000001e-5", "--dev", "{train}"], 2,
     "1e-5 and 1.0000001e-5 print alike (1e-05, as a sweep names its trial folders)"),
    ("learning-rates-negative", None, ["--learning-rates", "1e-3,-1", "--dev", "{train}"], 2,
     "each rate must be a number above 0, got -1 (in '1e-3,-1')"),
    ("learning-rates-nan", None, ["--learning-rates", "1e-3,nan", "--dev", "{train}"], 2,
     "each rate must be a number above 0, got nan"),
    ("learning-rates-zero", None, ["--learning-rates", "0", "--dev", "{train}"], 2,
     "each rate must be a number above 0, got 0"),
    ("learning-rates-empty", None, ["--learning-rates", "", "--dev", "{train}"], 2,
     "argument --learning-rates: names no value: give one or more, joined by commas"),
    # --learning-rate (1e-3 in these flags) beside --learning-rates was dropped without a word: refused
    ("learning-rate-and-rates", None, ["--learning-rates", "2e-3,3e-3", "--dev", "{train}"], 2,
     "--learning-rate 0.001 and --learning-rates 0.002,0.003: a sweep trains at --learning-rates' rates alone: "
     "give one of the two"),
    # JSON-lines labels: a number is a label by its value; numbers and strings of numbers are not mixed
    ("jsonl-number-and-string-label", '{"text": "the water", "label": 1}\n{"text": "the bank", "label": "1.0"}\n'
     '{"text": "the vault", "label": 2}\n', ["--suffix", ".jsonl"], 1,
     "--train {train}, line 2: the label '1.0' is a string of a number, line 1's label a JSON number (1)"),
]


def squad(change=None, **question) -> str:
    """A one-question SQuAD training file, with ``question``'s fields replaced and ``change(data)`` applied."""
    import json

    qa = {"id": "q1", "question": "What is wet?", "answers": [{"text": "water", "answer_start": 4}], **question}
    data = {"data": [{"title": "t", "paragraphs": [{"context": "The water is wet.", "qas": [qa]}]}]}
    if change is not None:
        change(data)
    return json.dumps(data)


ANSWER = ["--suffix", ".json", "--task", "answer"]
HOSTILE_READS = [  # issue 53, item 4: SQuAD's types and fields, named by place and question id
    ("squad-context-a-number", squad(lambda d: d["data"][0]["paragraphs"][0].update(context=7)), ANSWER, 1,
     "{train}: data[0].paragraphs[0]: 'context' must be a string, got number"),
    ("squad-qas-an-object", squad(lambda d: d["data"][0]["paragraphs"][0].update(qas={"id": "q1"})), ANSWER, 1,
     "{train}: data[0].paragraphs[0]: 'qas' must be a list, got object"),
    ("squad-answers-a-string", squad(answers="water"), ANSWER, 1,
     "data[0].paragraphs[0].qas[0] (question 'q1'): 'answers' must be a list, got string"),
    ("squad-no-paragraphs", squad(lambda d: d["data"][0].pop("paragraphs")), ANSWER, 1,
     "{train}: data[0]: no field 'paragraphs'"),
    ("squad-no-id", squad(lambda d: d["data"][0]["paragraphs"][0]["qas"][0].pop("id")), ANSWER, 1,
     "data[0].paragraphs[0].qas[0]: no field 'id'"),
    ("squad-no-question", squad(lambda d: d["data"][0]["paragraphs"][0]["qas"][0].pop("question")), ANSWER, 1,
     "(question 'q1'): no field 'question'"),
    ("squad-top-level-list", "[]", ANSWER, 1, "{train}: the file: must be a JSON object with a 'data' list"),
    ("squad-article-a-string", '{"data": ["an article"]}', ANSWER, 1,
     "{train}: data[0]: must be an object, got string"),
    ("squad-empty-answer", squad(answers=[{"text": "", "answer_start": 0}]), ANSWER, 1,
     "qas[0].answers[0] (question 'q1'): the answer's text is empty"),
    ("squad-blank-answer", squad(answers=[{"text": " ", "answer_start": 3}]), ANSWER, 1,
     "qas[0].answers[0] (question 'q1'): the answer's text is blank"),
    ("squad-start-a-string", squad(answers=[{"text": "water", "answer_start": "4"}]), ANSWER, 1,
     "answers[0] (question 'q1'): 'answer_start' must be a number, got string"),
    ("squad-start-true", squad(answers=[{"text": "water", "answer_start": True}]), ANSWER, 1,
     "answers[0] (question 'q1'): 'answer_start' must be a number, got true or false"),
    ("squad-start-negative", squad(answers=[{"text": "water", "answer_start": -13}]), ANSWER, 1,
     "answers[0] (question 'q1'): answer_start must be a character position (0 or more), got -13"),
    ("squad-start-4.5", squad(answers=[{"text": "water", "answer_start": 4.5}]), ANSWER, 1,
     "got 4.5"),
    ("squad-impossible-a-string", squad(is_impossible="false"), [*ANSWER, "--version-2-with-negative"], 1,
     "(question 'q1'): 'is_impossible' must be a true or false, got string"),
    ("squad-v2-no-impossible", squad(), [*ANSWER, "--version-2-with-negative"], 1,
     "(question 'q1'): no field 'is_impossible'"),
    ("squad-duplicate-id", squad(lambda d: d["data"][0]["paragraphs"][0]["qas"].append(
        {"id": "q1", "question": "Is it?", "answers": [{"text": "wet", "answer_start": 13}]})), ANSWER, 1,
     "data[0].paragraphs[0].qas[1] (question 'q1'): the id is also the id of data[0].paragraphs[0].qas[0]"),
    # review r16 (squad): nested past any SQuAD file (a bare RecursionError); a question leaving no room for its
    # context (finetune hung, its memory growing); a file whose only context gives no word piece (numpy's reshape)
    ("squad-nested-100000-deep", "[" * 100_000 + "]" * 100_000, ANSWER, 1,
     "{train}: not a SQuAD JSON file: nested deeper than 64 levels"),
    ("squad-question-fills-the-window", squad(question="what is the name of the thing that the cat sat on"),
     [*ANSWER, "--max-seq-length", "15"], 1,
     "{train}: question 'q1' is 12 pieces, 12 kept (--max-query-length 64): with [CLS] and two [SEP] it leaves no "
     "room for the context in --max-seq-length 15; pass a --max-seq-length of at least 16 or a --max-query-length "
     "of at most 11"),
    ("squad-zero-width-context", squad(lambda d: d["data"][0]["paragraphs"][0].update(context="\u200b"),
                                       answers=[{"text": "\u200b", "answer_start": 0}]), ANSWER, 1,
     "{train}: the file gives no windows: none of its questions (1) has a context with a word piece"),
    ("squad-no-questions", '{"data": []}', ANSWER, 1, "{train}: the file gives no windows: it has no questions"),
    # review r18: v1.1 predicts no "no answer": its threshold was accepted, unread; "-1e-3" "expected one argument"
    ("squad-v1-null-threshold", squad(), [*ANSWER, "--null-score-diff-threshold", "5"], 2,
     "--null-score-diff-threshold is read with --version-2-with-negative only: it decides when a SQuAD v2.0 "
     "question gets no answer, and a v1.1 run always answers"),
    ("squad-v1-null-threshold-exponent", squad(), [*ANSWER, "--null-score-diff-threshold", "-1e-3"], 2,
     "--null-score-diff-threshold is read with --version-2-with-negative only"),
    ("squad-one-question-in-windows", squad(lambda d: d["data"][0]["paragraphs"][0].update(
        context="The water is wet. " * 20)), ANSWER, 1,  # (its 12 windows were counted as the examples)
     "--train {train} has 1 examples: 3 epoch(s) of --batch-size 4 make no full step"),
    # numbers checked in float32, the dtype they are trained in
    ("regress-1e308", "text,label\nthe water,1e308\nthe bank,2\n", ["--task", "regress"], 1,
     "{train}, line 2: the label '1e308' is too large"),
    ("regress-1e20", "text,label\nthe water,2\nthe bank,-1e20\n", ["--task", "regress"], 1,
     "{train}, line 3: the label '-1e20' is too large"),
    # labels with commas, and many labels
    ("labels-quoted-comma", None, ["--labels", 'wet,"dry,damp"'], 1,
     "label 'dry' is not among the training labels ('wet', 'dry,damp')"),
    ("labels-stray-quote", None, ["--labels", 'wet,"dry'], 2, "quote a label that holds a comma"),
    ("labels-5000", None, ["--labels", ",".join(f"l{n}" for n in range(5000))], 1,
     "training labels (l0, l1, l2, l3, l4, l5, l6, l7, l8, l9, l10, l11, ... and 4,988 more (5,000 labels))"),
    ("csv-long-line-after-short-ones", "text,label\n" + "the water,wet\n" * 20_000 + "w" * (9 << 20) + ",dry\n",
     [], 1, "{train} is not text: line 20,002 (from byte offset 280,011) has no line break in 8 MiB"),
]
CASES += HOSTILE_READS


@pytest.mark.parametrize(("case", "content", "extra", "code", "named"), CASES, ids=[case[0] for case in CASES])
def test_hostile_input_one_line_exit_code_nothing_written(tmp_path, case, content, extra, code, named):
    extra = [word.replace("{tmp}", str(tmp_path)) for word in extra]
    suffix = ".csv"
    if "--suffix" in extra:
        suffix = extra[extra.index("--suffix") + 1]
        del extra[extra.index("--suffix") : extra.index("--suffix") + 2]
    train = write(tmp_path / f"train{suffix}", GOOD if content is None else content)
    extra = [word.replace("{train}", str(train)) for word in extra]
    run = tmp_path / "run"
    argv = flags(train, run)
    for flag in ("--model", "--output", "--train"):  # a case may replace these
        if flag in extra:
            at = extra.index(flag)
            argv[argv.index(flag) + 1] = extra[at + 1]
            del extra[at : at + 2]
    before = snapshot(tmp_path)
    result = run_minibert(*argv, *extra)
    assert result.returncode == code, result.stderr
    # one line on stderr, the error (what a model loaded before it said is not said)
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and result.stderr.splitlines() == errors, result.stderr
    named = named.replace("{train}", str(train)).replace("{tmp}", str(tmp_path))
    assert named in errors[0], errors[0]
    assert snapshot(tmp_path) == before and not run.exists()


def test_a_byte_order_mark_and_crlf_lines_are_read_as_the_same_examples(tmp_path):
    """Excel's "CSV UTF-8" starts with a BOM and ends lines with CRLF: the same examples as without."""
    from minibert.training.tasks.examples import ExampleFormat, read_examples

    plain = read_examples(write(tmp_path / "plain.csv", GOOD), ExampleFormat())
    excel = read_examples(write(tmp_path / "excel.csv", "\ufeff" + GOOD.replace("\n", "\r\n")), ExampleFormat())
    assert [(e.text_a, e.label) for e in excel] == [(e.text_a, e.label) for e in plain] and len(plain) == 4
    jsonl = '\ufeff{"text": "the water", "label": "wet"}\r\n{"text": "the bank", "label": "dry"}\r\n'
    assert [e.label for e in read_examples(write(tmp_path / "t.jsonl", jsonl), ExampleFormat())] == ["wet", "dry"]


def test_a_file_named_only_by_its_suffix_is_read_by_it(tmp_path):
    """``--train "$DIR/$SPLIT.jsonl"`` with SPLIT unset names ``.jsonl``, whose Path.suffix is "": it was
    refused as a file of no known suffix (and a CoNLL check missed ``.csv``); its name's suffix decides."""
    from minibert.errors import DataError
    from minibert.training.tasks.examples import ExampleFormat, read_examples
    from minibert.training.tasks.tag import read_conll

    (tmp_path / "jsonl").mkdir()
    jsonl = '{"text": "the water", "label": "wet"}\n{"text": "the bank", "label": "dry"}\n'
    assert [e.label for e in read_examples(write(tmp_path / "jsonl" / ".jsonl", jsonl), ExampleFormat())] == \
        ["wet", "dry"]  # fmt: skip
    assert len(read_examples(write(tmp_path / ".csv", GOOD), ExampleFormat())) == 4
    with pytest.raises(DataError, match=r"reads CoNLL files .* not \.csv files"):
        read_conll(tmp_path / ".csv")


def test_a_squad_file_with_a_byte_order_mark_is_read_as_without(tmp_path):
    """Notepad saves JSON with a UTF-8 byte-order mark: read as the other readers read it (json.loads
    refused it: 'Unexpected UTF-8 BOM'); a missing file is said to be missing, not 'not SQuAD JSON'."""
    from minibert.errors import DataError
    from minibert.training.tasks.squad_examples import read_squad_examples

    plain, _ = read_squad_examples(write(tmp_path / "plain.json", squad()), is_training=True)
    marked, _ = read_squad_examples(write(tmp_path / "bom.json", "\ufeff" + squad()), is_training=True)
    assert [(e.qas_id, e.question_text, e.orig_answer_text) for e in marked] == \
        [(e.qas_id, e.question_text, e.orig_answer_text) for e in plain] == [("q1", "What is wet?", "water")]
    with pytest.raises(DataError, match="missing.json does not exist"):
        read_squad_examples(tmp_path / "missing.json", is_training=True)
    # SQuAD's own files are one line of JSON (train-v1.1.json: 30 MB): past a text file's 8 MiB line limit
    import json

    paragraph = json.loads(squad())["data"][0]["paragraphs"][0]
    articles = [{"title": "t", "paragraphs": [{**paragraph, "qas": [{**paragraph["qas"][0], "id": f"q{n}"}]}]}
                for n in range(60_000)]  # fmt: skip
    big = write(tmp_path / "one-line.json", json.dumps({"data": articles}))
    assert big.stat().st_size > 8 << 20 and b"\n" not in big.read_bytes()
    assert len(read_squad_examples(big, is_training=False)[0]) == 60_000


@pytest.fixture
def finished_run(tmp_path) -> tuple[list[str], Path]:
    train, run = write_examples(tmp_path / "train.csv", 8), tmp_path / "run"
    argv = flags(train, run, "--epochs", "1")
    assert run_minibert(*argv).returncode == 0
    return argv, run


def refused(argv: list[str], run: Path, named: str) -> None:
    """Exit 1, ONE line on stderr (not the notices of the model loaded before the refusal), naming
    ``named``, and the run left byte for byte."""
    before = snapshot(run)
    result = run_minibert(*argv)
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "error:" in lines[0] and named in lines[0], result.stderr
    assert snapshot(run) == before


def test_resume_with_other_data_is_refused_and_nothing_overwritten(tmp_path, finished_run):
    argv, run = finished_run
    other = write_examples(tmp_path / "other.csv", 8, seed=5)
    moved = [*argv, "--resume"]
    moved[moved.index("--train") + 1] = str(other)
    refused(moved, run, "the run was made with train (--train) = ")  # another file
    write_examples(tmp_path / "train.csv", 8, seed=5)  # the same file, other examples
    refused([*argv, "--resume"], run, f"the run was trained on other data: --train {tmp_path / 'train.csv'} is "
            "not what it was")  # fmt: skip


def test_resume_with_another_dev_set_is_refused_naming_it_and_how(tmp_path):
    """The run's dev figures and best/ were measured on its --dev: a resume on another dev file (the
    same name, other rows) once went on and mixed two dev sets' figures in metrics.jsonl and best/."""
    train, dev, run = write_examples(tmp_path / "train.csv", 8), tmp_path / "dev.csv", tmp_path / "run"
    write_examples(dev, 6, seed=1)
    argv = [*flags(train, run, "--epochs", "1", "--dev", str(dev)), "--resume"]
    assert run_minibert(*argv[:-1]).returncode == 0
    assert run_minibert(*argv).returncode == 0  # the same dev file: a finished run, nothing to do
    write_examples(dev, 7, seed=1)  # one row more
    refused(argv, run, f"--dev {dev} is not the dev set the run was evaluated on: it now makes 7 examples, the "
            "run's made 6 (the SHA-256 of its features differs)")  # fmt: skip
    write_examples(dev, 6, seed=2)  # as many rows, others
    refused(argv, run, f"--dev {dev} is not the dev set the run was evaluated on: it makes as many examples as the "
            "run's, 6, with other texts or labels")  # fmt: skip


def test_a_training_state_from_before_dev_fingerprints_still_resumes(tmp_path):
    """A state written before the dev set was fingerprinted has no ``dev_data``: it is read (its dev
    file cannot be checked), not refused as "missing"."""
    import hashlib as sha
    import io

    import torch

    from minibert.training.run.checkpoint import TrainingState

    train, dev, run = write_examples(tmp_path / "train.csv", 8), write_examples(tmp_path / "dev.csv", 6), tmp_path / "r"
    argv = flags(train, run, "--epochs", "1", "--dev", str(dev))
    assert run_minibert(*argv).returncode == 0
    state = TrainingState.from_file(run / "training_state.pt")
    buffer = io.BytesIO()
    torch.save({"format": 1, **{k: v for k, v in state.__dict__.items() if k != "dev_data"}}, buffer)
    (run / "training_state.pt").write_bytes(buffer.getvalue() + sha.sha256(buffer.getvalue()).digest())
    assert TrainingState.from_file(run / "training_state.pt").dev_data is None
    resumed = run_minibert(*argv, "--resume")
    assert resumed.returncode == 0 and "holds a finished run" in resumed.stderr, resumed.stderr


def test_a_squad_dev_set_with_other_gold_answers_has_another_fingerprint():
    """A SQuAD dev file's windows carry no answer (their label ids are 0): its gold answers are part
    of what a resume compares, or another answer key would be scored against the same windows."""
    import numpy as np

    from minibert.training.tasks import task_named
    from minibert.training.tasks.answer import SquadFeatures
    from minibert.training.tasks.squad_examples import SquadExample
    from minibert.training.tasks.task import TrainingData

    def described(answer: str) -> dict:
        arrays = [np.zeros((1, 8), dtype=np.int64) for _ in range(3)]
        example = SquadExample("q1", "What is wet?", ["The", "water"], gold_answers=[answer])
        dev = SquadFeatures(*arrays, np.zeros((1, 2), dtype=np.int64), examples=[example])
        return task_named("answer").dev_fingerprint(TrainingData(None, None, 1, 0, None, dev=dev))

    assert described("water")["fingerprint"] != described("The water")["fingerprint"]
    assert described("water") == described("water") and described("water")["examples"] == 1


def test_a_full_disk_at_the_first_checkpoint_is_one_line(tmp_path, monkeypatch):
    """The model's loading notices (fresh head, ignored tensors) were said before the error: three
    lines for a full disk; they are held until the run has set up."""
    import errno
    import os

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    train, run = write_examples(tmp_path / "train.csv", 8), tmp_path / "run"
    monkeypatch.setattr(os, "fsync", full)
    result = run_minibert(*flags(train, run, "--epochs", "1"))
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [f"minibert: error: cannot write {run / 'training_state.pt'}: No space "
                                          "left on device"]  # fmt: skip


def test_a_sweep_in_python_refuses_one_trial_twice_before_the_first(tmp_path):
    from minibert.errors import DataError
    from minibert.training import FinetuneOptions
    from minibert.training.sweep import sweep

    train = write(tmp_path / "train.csv", GOOD)
    options = FinetuneOptions(model=str(TINY), train=str(train), dev=str(train), output=str(tmp_path / "sweep"),
                              batch_size=2, max_seq_length=16)  # fmt: skip
    for rates, said in (([1e-3, 1e-3], "0.001 and 0.001: one trial folder (lr0.001-seed12345)"),
                        ([], "--learning-rates names no rate"), ([1e-3, -1.0], "got -1.0")):  # fmt: skip
        with pytest.raises(DataError, match=re.escape(said)):
            sweep(options, 1, rates)
        assert not (tmp_path / "sweep").exists()


def test_a_training_state_cut_short_by_a_kill_is_named_on_resume(finished_run):
    argv, run = finished_run
    state = run / "training_state.pt"
    state.write_bytes(state.read_bytes()[:1000])
    refused([*argv, "--resume"], run, f"training state {state} is truncated or was altered")


def test_resume_without_a_run_is_named(tmp_path):
    train = write_examples(tmp_path / "train.csv", 8)
    result = run_minibert(*flags(train, tmp_path / "run", "--resume"))
    assert result.returncode == 1 and "nothing to resume" in result.stderr.strip().splitlines()[-1], result.stderr


def test_a_model_with_masked_lm_heads_only_gets_a_new_classifier(tmp_path):
    """tiny_hub holds BertForPreTraining's heads and no classifier: not an error, a new head, said once."""
    train = write_examples(tmp_path / "train.csv", 8)
    result = run_minibert(*flags(train, tmp_path / "run", "--epochs", "1"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("finetune: a new classifier (2 labels: dry, wet)") == 1
    assert str(TINY) in result.stderr  # the heads it had no place for are named, not hidden


def test_a_sweep_that_would_fill_the_disk_is_refused_before_its_first_trial(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    train = write(tmp_path / "train.csv", GOOD)
    run = tmp_path / "run"
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 10**6, 10**6))  # 1 MB free
    before = snapshot(tmp_path)
    result = run_minibert(*flags(train, run), "--dev", str(train), "--seeds", "40")
    assert result.returncode == 1, result.stderr
    assert "a sweep of 40 trials needs about" in result.stderr and "0.0 GB free" in result.stderr
    assert "83 copies of the model's weights: 2 for each finished trial, 5 for the one running" in result.stderr
    assert snapshot(tmp_path) == before and not run.exists()


def test_squad_numbers_as_json_writers_write_them_are_read(tmp_path):
    """answer_start 0.0 (pandas writes whole numbers as floats) is the character position 0, once
    called "not a number"; a numeric id is the id as text."""
    from minibert.training.tasks.squad_examples import read_squad_examples

    path = write(tmp_path / "train.json", squad(id=7, answers=[{"text": "The water", "answer_start": 0.0}]))
    (example,), skipped = read_squad_examples(path, is_training=True)
    found = (example.qas_id, example.orig_answer_text, example.start_position, example.end_position)
    assert found == ("7", "The water", 0, 1)
    assert skipped == 0


def test_a_dev_file_with_one_id_twice_is_refused(tmp_path):
    """Two dev questions with one id once kept one prediction and scored 100.0 over 1."""
    from minibert.errors import DataError
    from minibert.training.tasks.squad_examples import read_squad_examples

    def second_paragraph(data):
        data["data"].append({"title": "u", "paragraphs": [{"context": "Fire is hot.", "qas": [
            {"id": "q1", "question": "What is hot?", "answers": [{"text": "Fire", "answer_start": 0}]}]}]})

    path = write(tmp_path / "dev.json", squad(second_paragraph))
    with pytest.raises(DataError, match=r"dev.json: data\[1\].paragraphs\[0\].qas\[0\] \(question 'q1'\): the id is "
                                        r"also the id of data\[0\].paragraphs\[0\].qas\[0\]"):  # fmt: skip
        read_squad_examples(path, is_training=False)


def test_resume_compares_paths_as_files_not_strings(tmp_path, monkeypatch):
    """The run's --train given again as an absolute path, through "..", or through a symbolic link
    is the same file (once refused as "made with train = 'train.csv'"); another file still is not."""
    monkeypatch.chdir(tmp_path)
    write_examples(tmp_path / "train.csv", 8)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.csv").symlink_to(tmp_path / "train.csv")
    argv = flags(Path("train.csv"), Path("run"), "--epochs", "1", "--save-every", "1")
    assert run_minibert(*argv).returncode == 0
    state = tmp_path / "run" / "training_state.pt"
    for same in (tmp_path / "train.csv", Path("sub/../train.csv"), tmp_path / "link.csv"):
        again = [*argv, "--resume"]
        again[again.index("--train") + 1] = str(same)
        before = state.read_bytes()
        result = run_minibert(*again)
        assert result.returncode == 0, (same, result.stderr)
        assert state.read_bytes() == before  # a finished run: nothing to do, nothing rewritten
    other = write_examples(tmp_path / "other.csv", 8)  # the same examples, another file: refused by name
    moved = [*argv, "--resume"]
    moved[moved.index("--train") + 1] = str(other)
    refused(moved, tmp_path / "run", "the run was made with train (--train) = 'train.csv'")


def test_resume_into_a_run_of_the_other_command_names_the_command(tmp_path):
    """finetune --resume on a pretrain run once said "made with model = None"; each command now
    names the one that made the run."""
    from random_instances import random_instances, write_instances

    data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=3))
    pretrained = tmp_path / "pretrained"
    made = run_minibert("pretrain", "--data", str(data), "--output", str(pretrained), "--steps", "1",
                        "--batch-size", "4", "--init", str(TINY))  # fmt: skip
    assert made.returncode == 0, made.stderr
    train = write_examples(tmp_path / "train.csv", 8)
    refused([*flags(train, pretrained, "--epochs", "1"), "--resume"], pretrained,
            "the run was made by minibert pretrain, not finetune: continue it with minibert pretrain ... --resume")
    finetuned = tmp_path / "finetuned"
    assert run_minibert(*flags(train, finetuned, "--epochs", "1")).returncode == 0
    refused(["pretrain", "--data", str(data), "--output", str(finetuned), "--steps", "1", "--batch-size", "4",
             "--init", str(TINY), "--resume"], finetuned, "the run was made by minibert finetune, not pretrain")


@pytest.mark.parametrize("call", ["check", "refuse_unread_flags"])
def test_finetunes_flag_conflicts_are_flag_conflict_errors_as_pretrains(call):
    """A --batch-size that does not split into the processes, or a flag the task does not read, is the
    library's FlagConflictError (a DataError), which the command line says as a usage error (exit 2),
    as pretrain's: no second check in the command turns a DataError into one."""
    from minibert.errors import FlagConflictError
    from minibert.training import FinetuneOptions

    if call == "check":
        options = FinetuneOptions(model="m", train="t.csv", output="run", batch_size=4)
        with pytest.raises(FlagConflictError, match="^--batch-size 4 does not split into 3 processes: make it a "):
            options.check(3)
    else:
        options = FinetuneOptions(model="m", train="t.csv", output="run", doc_stride=7)
        with pytest.raises(FlagConflictError, match="^--task classify does not read --doc-stride"):
            options.refuse_unread_flags()


@pytest.mark.parametrize(
    "columns, says",
    [({"text_column": "language", "label_column": "language"}, "--text-column and --label-column"),
     ({"pair_column": "text"}, "--text-column and --pair-column"),
     ({"pair_column": "label"}, "--pair-column and --label-column")],
)  # fmt: skip
def test_two_column_flags_naming_one_column_are_a_conflict(columns, says, tmp_path):
    """--text-column language --label-column language trained a classifier on its own answer (exit 0,
    a whole run); --pair-column text framed [CLS] A [SEP] A [SEP]. Now a usage error naming both flags."""
    from minibert.errors import FlagConflictError
    from minibert.training import FinetuneOptions

    options = FinetuneOptions(model="m", train="t.csv", output="run", **columns)
    with pytest.raises(FlagConflictError, match=f"^{says} both name the column"):
        options.check(1)
    train = tmp_path / "train.csv"
    train.write_text("text,label,language\nhello world,pos,en\nbad day,neg,en\n", encoding="utf-8")
    flags = [f"--{name.replace('_', '-')}" for name in columns]
    argv = [arg for name, value in columns.items() for arg in (f"--{name.replace('_', '-')}", value)]
    result = run_minibert("finetune", "--model", str(TINY), "--train", str(train), "--output", str(tmp_path / "run"),
                          *argv)  # fmt: skip
    assert result.returncode == 2 and all(flag in result.stderr for flag in flags), result.stderr
    assert not (tmp_path / "run").exists()


def test_options_made_in_python_take_paths_and_refuse_what_the_flags_refuse(tmp_path, monkeypatch):
    """FinetuneOptions(train=Path(...)) ran until finetune.json (a Path is no JSON), after the state was
    written: the folder then refused a new run and a resume alike. labels="0,1" trained a third label
    ","; labels=[0, 1] was "an empty label"; output="" wrote the run into the current folder. Each is
    what the command line makes of its flags now, or a DataError naming the flag, before anything is
    written. On the command line an empty --train or --dev is a usage error, as an empty --output is."""
    from minibert.errors import DataError
    from minibert.training import FinetuneOptions, finetune

    monkeypatch.chdir(tmp_path)
    train = write_examples(tmp_path / "train.csv", 16)
    options = FinetuneOptions(model=TINY, train=Path(train.name), output=tmp_path / "run", epochs=1, batch_size=8,
                              max_seq_length=16, labels="wet,dry")  # fmt: skip
    assert (options.model, options.train, options.labels) == (str(TINY), "train.csv", ("wet", "dry"))
    assert finetune(options) == tmp_path / "run"
    assert FinetuneOptions(model="m", train="t.csv", output="o", labels=["b", "a"]).labels == ("b", "a")
    refused = [(dict(labels=[0, 1]), "--labels must be the label names as text, in id order"),
               (dict(labels={"a", "b"}), "--labels must be the label names as text, .*got set"),
               (dict(dev=" "), "--dev is empty: name the file"), (dict(train=b"t.csv"), "--train must be a path")]
    for given, says in refused:
        with pytest.raises(DataError, match=says):
            FinetuneOptions(**{"model": "m", "train": "t.csv", "output": "o", **given})
    with pytest.raises(DataError, match="--output is empty: name the folder to write"):  # (--write-features: none)
        finetune(FinetuneOptions(model=TINY, train=str(train), output=""))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run", "train.csv"]
    for flag in ("--train", "--dev"):
        result = run_minibert(*flags(train, tmp_path / "run2"), flag, "")  # (the last --train is the one read)
        assert result.returncode == 2 and f"argument {flag}: is empty: name the file to read" in result.stderr
