"""``minibert classify``, ``tag``, ``answer`` and ``rerank``: the library's answers, one JSON line per
input line (the line rule, blank lines included), atomic outputs, and one-line errors."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import transformers

import minibert
from helpers import pipe_holding
from helpers import run_minibert as run
from task_checkpoints import QA_REFERENCE, cross_encoder_dir, ner_model, same


def lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_classify_from_a_jsonl_file_with_pairs_to_a_file(make, tmp_path):
    directory = make("BertForSequenceClassification", scale=5.0, num_labels=3)
    source = tmp_path / "in.jsonl"
    records = [{"text": "a man sleeps", "text_pair": "a person rests"}, {"text": "", "text_pair": ""},
               {"text": "cats", "text_pair": "dogs"}]  # fmt: skip
    source.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    result = run("classify", "--model", str(directory), "--input", str(source), "--output", str(output), "--top-k",
                 "all")  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = lines(output.read_text(encoding="utf-8"))
    expected = minibert.classify(records, model=directory, top_k=None)
    assert [row["labels"] for row in rows] == expected and [row["text"] for row in rows] == ["a man sleeps", "", "cats"]


def test_classify_a_chunk_mixing_pairs_and_single_texts_classifies_each_line_as_itself(make, tmp_path):
    """A line without text_pair is a single text ([CLS] a [SEP]) whatever its neighbours hold, as
    transformers' pipeline does the same mixed list (it was encoded as the pair (a, ""))."""
    directory = make("BertForSequenceClassification", scale=5.0, num_labels=3)
    records = [{"text": "a man sleeps"}, {"text": "cats", "text_pair": "dogs"}, {"text": "a person rests"},
               {"text": "birds", "text_pair": ""}]  # an empty text_pair: no pair, as the pipeline tokenizes it
    source = tmp_path / "mixed.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    result = run("classify", "--model", str(directory), "--input", str(source), "--top-k", "all")
    assert result.returncode == 0, result.stderr
    theirs = transformers.pipeline("text-classification", model=str(directory))(records, top_k=None)
    rows = lines(result.stdout)
    assert [{k: v for k, v in row.items() if k != "labels"} for row in rows] == records
    same([row["labels"] for row in rows], theirs, "mixed chunk")


def test_classify_texts_refuses_long_ones_unless_truncate(make):
    directory = make("BertForSequenceClassification", scale=5.0, num_labels=3)
    refused = run("classify", "--model", str(directory), "word " * 200)
    assert refused.returncode == 1 and "more than the 128 this model takes" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 2  # "model DIR", then the one error line
    cut = run("classify", "--model", str(directory), "--truncate", "word " * 200, "short")
    assert cut.returncode == 0 and len(lines(cut.stdout)) == 2


def test_a_text_too_long_is_named_by_its_line_and_the_flag(make, tmp_path):
    """The line (not the input's place in its group, from 0) and --truncate (not truncation=True)."""
    directory = make("BertForSequenceClassification", scale=5.0, num_labels=3)
    source = tmp_path / "in.jsonl"
    records = [{"text": "a", "text_pair": "b"}, {"text": "short"}, {"text": "word " * 200}]
    source.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    refused = run("classify", "--model", str(directory), "--input", str(source))
    line = refused.stderr.strip().splitlines()[-1]
    assert refused.returncode == 1 and f"line 3 of {source} is 202 tokens long" in line, refused.stderr
    assert line.endswith("pass --truncate to cut it") and "truncation" not in line


def test_rerank_a_lone_dash_reads_the_documents_from_stdin(make, tmp_path):
    directory = cross_encoder_dir(make, tmp_path, "saved")
    documents = ["Berlin has about 3.9 million inhabitants.", "Cats sleep a lot."]
    given = run("rerank", "How many people live in Berlin?", *documents, "--model", str(directory))
    piped = run("rerank", "How many people live in Berlin?", "-", "--model", str(directory),
                stdin="\n".join(documents).encode())  # fmt: skip
    assert piped.returncode == 0 and lines(piped.stdout) == lines(given.stdout), piped.stderr
    assert [row["text"] for row in lines(piped.stdout)] != ["-"]


def test_tag_keeps_one_row_per_line_blank_lines_included(make, tmp_path):
    directory = ner_model(make)
    source = tmp_path / "in.txt"
    source.write_text("Ada Lovelace in London\n\nCharles Babbage\r\nlast line without newline", encoding="utf-8")
    result = run("tag", "--model", str(directory), "--input", str(source), "--aggregation", "first")
    assert result.returncode == 0, result.stderr
    rows = lines(result.stdout)
    texts = ["Ada Lovelace in London", "", "Charles Babbage", "last line without newline"]
    assert [row["text"] for row in rows] == texts
    assert [row["entities"] for row in rows] == minibert.tag(texts, model=directory, aggregation_strategy="first")


def test_answer_from_arguments_and_from_jsonl(tmp_path):
    result = run("answer", "--model", str(QA_REFERENCE), "--question", "Where was Ada born?", "--context",
                 "Ada Lovelace was born in London in 1815.", "--top-k", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = minibert.answer("Where was Ada born?", "Ada Lovelace was born in London in 1815.", model=QA_REFERENCE,
                               top_k=2)  # fmt: skip
    assert lines(result.stdout) == [{"question": "Where was Ada born?", "answers": expected}]
    source = tmp_path / "qa.jsonl"
    source.write_text('{"question": "Who?", "context": "Babbage."}\n{"question": "Who?"}\n', encoding="utf-8")
    bad = run("answer", "--model", str(QA_REFERENCE), "--input", str(source))
    assert bad.returncode == 1 and 'qa.jsonl:2: expected an object with "question", "context" strings' in bad.stderr
    text_file = tmp_path / "qa.txt"
    text_file.write_text("Who?\n", encoding="utf-8")
    assert "read as plain text, one text per line, because its name does not end in .jsonl; this command needs " \
           "JSON lines with question, context" in run("answer", "--model", str(QA_REFERENCE), "--input",
                                                      str(text_file)).stderr  # fmt: skip


def test_answer_reads_json_lines_from_stdin_a_pipe_and_any_case_of_jsonl(tmp_path):
    # `answer --help` offered "- for stdin", but stdin and <(cat q.jsonl) were read as plain text and
    # refused as "not .jsonl lines"; Q.JSONL was too (the suffix was matched in lower case only)
    data = b'{"question": "Who?", "context": "Babbage."}\n{"question": "Where?", "context": "In London."}\n'
    (tmp_path / "Q.JSONL").write_bytes(data)
    # The command runs both lines as one batch (padded to the longer), the library each alone: a GEMM of
    # another shape may sum in another order, so the scores agree to fp32's rounding, not bit for bit
    # (0.43874070 against 0.43874079 on one CI machine); the answers and their spans exactly.
    expected = [{"question": q, "answers": [minibert.answer(q, c, model=QA_REFERENCE)]}
                for q, c in [("Who?", "Babbage."), ("Where?", "In London.")]]  # fmt: skip
    from_stdin = run("answer", "--model", str(QA_REFERENCE), "--input", "-", stdin=data)
    assert from_stdin.returncode == 0, from_stdin.stderr
    same(lines(from_stdin.stdout), expected, "stdin")
    upper = run("answer", "--model", str(QA_REFERENCE), "--input", str(tmp_path / "Q.JSONL"))
    assert upper.returncode == 0 and lines(upper.stdout) == lines(from_stdin.stdout), upper.stderr
    with pipe_holding(data) as path:
        piped = run("answer", "--model", str(QA_REFERENCE), "--input", path)
    assert piped.returncode == 0 and lines(piped.stdout) == lines(from_stdin.stdout), piped.stderr


def test_a_question_that_fills_max_seq_len_is_named_not_the_stride(tmp_path):
    """A question as long as --max-seq-len leaves the context no room: the line says so, naming the
    question (and its line) and --max-seq-len; it blamed stride=2, a value derived from the default
    that the user never gave. The library's error says the same with the parameter's name."""
    result = run("answer", "--model", str(QA_REFERENCE), "--question", "C C C C C C", "--context", "C C O",
                 "--max-seq-len", "5")  # fmt: skip
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode == 1 and len(errors) == 1 and "stride" not in result.stderr, result.stderr
    line = errors[0]
    assert "the question is 6 pieces: with [CLS] and two [SEP] it leaves no room for the context in " \
           "--max-seq-len 5" in line  # fmt: skip
    source = tmp_path / "qa.jsonl"
    source.write_text('{"question": "Who?", "context": "Babbage."}\n{"question": "C C C C", "context": "C"}\n')
    result = run("answer", "--model", str(QA_REFERENCE), "--input", str(source), "--max-seq-len", "7")
    assert result.returncode == 1 and f"the question on line 2 of {source} is 4 pieces" in result.stderr
    with pytest.raises(ValueError, match="question 0 is 6 pieces: .* no room for the context in max_seq_len=9"):
        minibert.answer("C C C C C C", "C C O", model=QA_REFERENCE, max_seq_len=9)
    with pytest.raises(ValueError, match="leaves 1 pieces for the context in max_seq_len=9, not more than "
                                         r"doc_stride=4 \(the default"):  # fmt: skip
        minibert.answer("C C C C C", "C C O", model=QA_REFERENCE, max_seq_len=9)
    result = run("answer", "--model", str(QA_REFERENCE), "--question", "C C C C C", "--context", "C C O",
                 "--max-seq-len", "9", "--doc-stride", "1")  # fmt: skip
    assert result.returncode == 1 and "1 pieces for the context in --max-seq-len 9, not more than --doc-stride 1;" \
        in result.stderr  # fmt: skip
    assert "answer" in minibert.answer("C C C C C", "C C O", model=QA_REFERENCE, max_seq_len=9, doc_stride=0)
    # at the model's own 128 positions, a larger max_seq_len is no advice (it is refused): shorten the question
    with pytest.raises(ValueError, match=r"no room for the context in max_seq_len=128; shorten the question \(this "
                                         r"model reads at most 128 tokens\)$"):  # fmt: skip
        minibert.answer("C " * 130, "C C O", model=QA_REFERENCE)
    result = run("answer", "--model", str(QA_REFERENCE), "--question", "C " * 130, "--context", "C C O")
    assert result.returncode == 1 and result.stderr.strip().endswith(
        "--max-seq-len 128; shorten the question (this model reads at most 128 tokens)"), result.stderr


def test_an_empty_question_or_context_is_named_by_its_line_before_the_model_loads(tmp_path):
    records = [{"question": "Who?", "context": "Babbage."}] * 5 + [{"question": "Who?", "context": " "}]
    source = tmp_path / "qa.jsonl"
    source.write_text("\n".join(json.dumps(record) for record in records) + "\n", encoding="utf-8")
    result = run("answer", "--model", str(QA_REFERENCE), "--input", str(source))
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        f"minibert: error: the context on line 6 of {source} is empty: a question and its context must hold text"]
    result = run("answer", "--model", str(QA_REFERENCE), "--question", "", "--context", "Babbage.")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "minibert: error: --question is empty: a question and its context must hold text"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["answer", "--question", "q", "--context", "I live", "--max-seq-len", "500"],
         "--max-seq-len must be an int from 4 to 128 (the model's max_position_embeddings), got 500"),
        (["answer", "--question", "q", "--context", "I live", "--doc-stride", "200"],
         "--doc-stride must be at most the window's 128 tokens, got 200"),
        (["answer", "--question", "q", "--context", "I live", "--max-seq-len", "100", "--doc-stride", "101"],
         "--doc-stride must be at most the window's 100 tokens (--max-seq-len), got 101"),  # before the model loads
        (["tag", "a", "--stride", "200"], "--stride must be an int from 0 to 125 (the window is 128 tokens), got 200"),
        (["tag", "a", "--aggregation", "none", "--stride", "5"],
         "--stride reads a text in windows, whose pieces only an --aggregation other than none can join: choose one"),
        (["rerank", "q", "a", "--max-length", "500"], "--max-length must be an int from 3 to 128 (the model's "
                                                      "positions), got 500"),
    ],
)  # fmt: skip
def test_a_flag_out_of_the_models_range_is_named_as_the_flag(argv, message, make, tmp_path):
    """The messages named the Python parameters (max_seq_len, stride=, max_length) and exited 1."""
    model = {"answer": lambda: QA_REFERENCE, "tag": lambda: ner_model(make),
             "rerank": lambda: cross_encoder_dir(make, tmp_path, "saved")}[argv[0]]()  # fmt: skip
    result = run(*argv, "--model", str(model))
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode == 2 and errors == [f"minibert: error: {message}"], result.stderr


def test_a_doc_stride_past_the_room_with_a_short_context_answers_as_the_pipeline(tmp_path):
    """transformers 4.57.1 answers it (the context needs no second window); minibert refused it with
    the tokenizer's stride=/max_length= message and a room (125) the question's own message put at 124."""
    result = run("answer", "--model", str(QA_REFERENCE), "--question", "Where was Ada born?", "--context",
                 "Ada Lovelace was born in London in 1815.", "--doc-stride", "126")  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = minibert.answer("Where was Ada born?", "Ada Lovelace was born in London in 1815.", model=QA_REFERENCE,
                               doc_stride=126)  # fmt: skip
    assert lines(result.stdout) == [{"question": "Where was Ada born?", "answers": [expected]}]


def test_tag_names_the_line_of_a_cut_text_and_the_flag(make, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("Ada Lovelace\n" + "word " * 200 + "\n", encoding="utf-8")
    result = run("tag", "--model", str(ner_model(make)), "--input", str(source))
    warned = [line for line in result.stderr.splitlines() if "warning" in line]
    assert result.returncode == 0 and len(warned) == 1, result.stderr
    assert warned[0].startswith(f"minibert: warning: line 2 of {source} is 202 pieces long") and "--stride" in warned[0]
    assert "stride=" not in warned[0] and "aggregation_strategy" not in warned[0]


def test_rerank_writes_every_document_in_input_order_with_its_rank(make, tmp_path):
    directory = cross_encoder_dir(make, tmp_path, "saved")
    documents = ["Berlin has about 3.9 million inhabitants.", "Cats sleep a lot.", "", "Berlin"]
    source = tmp_path / "docs.txt"
    source.write_text("\n".join(documents) + "\n", encoding="utf-8")
    output = tmp_path / "ranked.jsonl"
    query = "How many people live in Berlin?"
    result = run("rerank", query, "--model", str(directory), "--input", str(source), "--output", str(output))
    assert result.returncode == 0, result.stderr
    rows = lines(output.read_text(encoding="utf-8"))
    assert [row["index"] for row in rows] == [0, 1, 2, 3] and [row["text"] for row in rows] == documents
    expected = minibert.CrossEncoder(directory).rank(query, documents)
    assert [rows[e["corpus_id"]]["rank"] for e in expected] == [1, 2, 3, 4]
    assert max(abs(rows[e["corpus_id"]]["score"] - e["score"]) for e in expected) <= 1e-6
    printed = run("rerank", query, *documents, "--model", str(directory), "--top-n", "2")
    assert [row["index"] for row in lines(printed.stdout)] == [e["corpus_id"] for e in expected[:2]]


def test_classify_with_a_token_classifier_names_only_the_class_that_loads_it(make, tmp_path):
    """A token classifier has no pooler: the advice is BertForTokenClassification alone, never the
    class the message has just said cannot load it (nor BertForMultipleChoice, which reads the pooler).
    Its config.json's architectures says so first, with the command that reads it."""
    result = run("classify", "--model", str(ner_model(make)), "a text")
    line = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and "architectures names BertForTokenClassification, a token" in line, result.stderr
    assert line.endswith("read it with tag (minibert tag)") and "MultipleChoice" not in line, line
    unnamed = tmp_path / "unnamed"  # no architectures: the tensors alone tell
    shutil.copytree(ner_model(make), unnamed)
    config = json.loads((unnamed / "config.json").read_text(encoding="utf-8"))
    (unnamed / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "architectures"}))
    result = run("classify", "--model", str(unnamed), "a text")
    line = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and "has no tensors for the pooler" in line, result.stderr
    assert "load it with BertForTokenClassification;" in line and "MultipleChoice" not in line, line


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
def test_labels_of_another_count_than_the_head_are_refused_naming_both(make, tmp_path, weights):
    """--labels a,b for a three-output head whose config.json names its three labels: an error naming
    both counts, in classify and convert (they were replaced by LABEL_0 ... LABEL_2 with a warning
    that blamed config.json, and convert wrote num_labels 3 beside a two-label id2label)."""
    import shutil

    from safetensors.torch import load_file

    names = {0: "x", 1: "y", 2: "z"}
    made = make("BertForSequenceClassification", scale=5.0, id2label=names, label2id={v: k for k, v in names.items()})
    directory = tmp_path / "classifier"
    shutil.copytree(made, directory)
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    config["num_labels"] = 3  # as transformers 2-4 wrote it (rxnfp's classifier), beside id2label
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if weights == "pytorch_model.bin":  # no index to read the head's shape from
        import torch

        torch.save(load_file(directory / "model.safetensors"), directory / weights)
        (directory / "model.safetensors").unlink()
    classified = run("classify", "--model", str(directory), "a text", "--labels", "a,b")
    assert classified.returncode == 1 and "has 3 outputs" in classified.stderr, classified.stderr
    assert "the labels given are 2 (a, b)" in classified.stderr and "config.json" not in classified.stderr
    assert len(classified.stderr.strip().splitlines()) == 1, classified.stderr
    converted = run("convert", str(directory), str(tmp_path / "converted"), "--labels", "a,b")
    assert converted.returncode == 1 and "has 3 outputs" in converted.stderr and "(a, b)" in converted.stderr
    assert not (tmp_path / "converted").exists()
    for dtype in ("auto", "fastest", "float32"):  # (the model loaded with --dtype for --labels: not asked again)
        named = run("classify", "--model", str(directory), "a text", "--labels", "a,b,c", "--dtype", dtype)
        assert named.returncode == 0 and '"label": "' in named.stdout, (dtype, named.stderr)
    named = run("classify", "--model", str(directory), "a text", "--labels", "p,q,r", "--top-k", "all")
    assert named.returncode == 0 and {entry["label"] for entry in lines(named.stdout)[0]["labels"]} == {"p", "q", "r"}


@pytest.mark.parametrize("command", ["classify", "tag", "rerank"])
def test_a_pipe_as_input_gives_a_row_per_line(command, make, tmp_path):
    """--input <(cmd): every line answered, as from the file (the pipe was read to its end to check
    it, then read again, empty: exit 0 with zero rows)."""
    made = {"classify": lambda: make("BertForSequenceClassification", scale=5.0, num_labels=3),
            "tag": lambda: ner_model(make), "rerank": lambda: cross_encoder_dir(make, tmp_path, "saved")}  # fmt: skip
    directory = made[command]()
    query = ["a query"] if command == "rerank" else []
    source = tmp_path / "in.txt"
    source.write_text("Ada Lovelace in London\n\nCharles Babbage\n", encoding="utf-8")
    from_file = run(command, *query, "--model", str(directory), "--input", str(source))
    assert from_file.returncode == 0 and len(lines(from_file.stdout)) == 3, from_file.stderr
    with pipe_holding(source.read_bytes()) as path:
        piped = run(command, *query, "--model", str(directory), "--input", path)
    assert piped.returncode == 0, piped.stderr
    assert lines(piped.stdout) == lines(from_file.stdout)


@pytest.mark.parametrize(
    "arguments, code, words",
    [
        (["tag", "a"], 2, "tag needs --model DIR"),
        (["classify", "--model", "M", "a", "--input", "f.txt"], 2, "not both"),
        (["classify", "--model", "M"], 2, "nothing to do"),
        (["classify", "--model", "M", "a", "--output", "x.npy"], 2, "--output must end in .jsonl"),
        (["classify", "--model", "M", "--top-k", "0", "a"], 2, "must be a whole number of at least 1 or all, got 0"),
        (["answer", "--model", "M", "--question", "q"], 2, "give --question and --context together"),
        # a structured file that is not JSON lines: each of its lines was classified as a text, header row too
        (["classify", "--model", "M", "--input", "dev.tsv"], 2, "a .tsv file is not read by this command: give .txt"),
        (["answer", "--model", "M", "--input", "q.ndjson"], 2, "a .ndjson file is not read"),
        (["tag", "--model", "M", "--input", "T.CSV"], 2, "a .csv file is not read"),
        (["rerank", "--model", "M", "q", "--input", "d.json"], 2, "a .json file is not read"),
    ],
)  # fmt: skip
def test_task_command_usage_errors_are_one_line(arguments, code, words):
    result = run(*arguments)
    assert result.returncode == code and words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize(
    "command, key, reads",
    [("classify", "pair", '"text", "text_pair"'), ("classify", "text_b", '"text", "text_pair"'),
     ("classify", "sentence2", '"text", "text_pair"'), ("classify", "sentence_b", '"text", "text_pair"'),
     ("classify", "hypothesis", '"text", "text_pair"'), ("classify", "txt_pair", '"text", "text_pair"'),
     ("classify", "Text_Pair", '"text", "text_pair"'), ("classify", "text_pairs", '"text", "text_pair"'),
     ("tag", "text_pair", '"text"'), ("rerank", "query", '"text"'), ("embed", "text_pair", '"text"')],
)  # fmt: skip
def test_a_jsonl_key_naming_a_text_that_is_not_read_is_refused_naming_the_line(command, key, reads, tmp_path):
    """{"text": a, "pair": b} was classified as the one text a (exit 0): a pair classifier's answer to
    another input. A key that names a pair's text (or is a near miss of a key read) is refused, naming
    the file, the line, the key and the keys the command reads, before the model loads."""
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"text": "A man sleeps."}) + "\n" + json.dumps({"text": "A man sleeps.", key: "A "
                      "person rests.", "id": 2}) + "\n", encoding="utf-8")  # fmt: skip
    query = ["a query"] if command == "rerank" else []
    (tmp_path / "model").mkdir()  # a folder without a model: the line is refused before it is read
    result = run(command, *query, "--model", str(tmp_path / "model"), "--input", str(source))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert f'{source}:2: the key "{key}" ' in result.stderr and f"this command reads {reads})" in result.stderr


def test_a_jsonl_lines_other_keys_come_back_in_its_row(make, tmp_path):
    """An "id" (any key the command does not read and that names no text) was dropped from the row,
    so a row could be joined to its input only by its line. It comes back after the command's own keys,
    as it was; a key the row holds itself (a gold "labels", SQuAD's "answers") keeps the command's
    value, said once on stderr."""
    classifier = make("BertForSequenceClassification", scale=5.0, num_labels=3)
    records = [{"id": 7, "text": "a man sleeps", "text_pair": "a person rests", "label": "entailment"},
               {"text": "cats", "labels": ["gold"], "id": 8, "meta": {"source": [1, None]}},
               {"text": "dogs", "labels": "gold"}]  # fmt: skip
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    result = run("classify", "--model", str(classifier), "--input", str(source))
    assert result.returncode == 0, result.stderr
    found = minibert.classify([{"text": "a man sleeps", "text_pair": "a person rests"}], model=classifier)
    found += minibert.classify(["cats", "dogs"], model=classifier)  # batched otherwise: scores to fp32's rounding
    same(lines(result.stdout), [
        {"text": "a man sleeps", "text_pair": "a person rests", "labels": [found[0]], "id": 7, "label": "entailment"},
        {"text": "cats", "labels": [found[1]], "id": 8, "meta": {"source": [1, None]}},
        {"text": "dogs", "labels": [found[2]]}], "classify")  # fmt: skip
    notes = [line for line in result.stderr.splitlines() if "note" in line]
    assert notes == ['minibert: note: the input\'s "labels" is not copied to the output: its rows hold this '
                     'command\'s own "labels"']  # fmt: skip
    source.write_text('{"text": "Ada Lovelace in London", "id": "d1"}\n', encoding="utf-8")
    tagged = run("tag", "--model", str(ner_model(make)), "--input", str(source))
    assert tagged.returncode == 0, tagged.stderr
    entities = minibert.tag("Ada Lovelace in London", model=ner_model(make), aggregation_strategy="simple")
    assert lines(tagged.stdout) == [{"text": "Ada Lovelace in London", "entities": entities, "id": "d1"}]
    squad = {"id": "56be", "title": "Ada", "context": "Ada was born in London.", "question": "Where was Ada born?",
             "answers": {"text": ["London"], "answer_start": [16]}}  # a SQuAD line, its gold answers included
    source.write_text(json.dumps(squad) + "\n", encoding="utf-8")
    answered = run("answer", "--model", str(QA_REFERENCE), "--input", str(source))
    assert answered.returncode == 0, answered.stderr
    expected = minibert.answer(squad["question"], squad["context"], model=QA_REFERENCE)
    assert lines(answered.stdout) == [{"question": squad["question"], "answers": [expected], "id": "56be",
                                       "title": "Ada"}]  # fmt: skip
    assert 'the input\'s "answers" is not copied' in answered.stderr


def test_rerank_jsonl_rows_carry_other_keys_and_hold_one_score_per_document(make, tmp_path):
    directory = cross_encoder_dir(make, tmp_path, "saved")
    documents = ["Berlin has about 3.9 million inhabitants.", "Cats sleep a lot.", "", "Berlin"]
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": f"d{n}", "text": text, "score": 0.5}) + "\n"
                              for n, text in enumerate(documents)), encoding="utf-8")  # fmt: skip
    query = "How many people live in Berlin?"
    expected = minibert.CrossEncoder(directory).rank(query, documents)
    rows = lines(run("rerank", query, "--model", str(directory), "--input", str(source), "--output",
                     str(tmp_path / "out.jsonl")) and (tmp_path / "out.jsonl").read_text(encoding="utf-8"))  # fmt: skip
    assert [list(row) for row in rows] == [["index", "rank", "score", "text", "id"]] * 4
    assert [row["id"] for row in rows] == ["d0", "d1", "d2", "d3"] and [row["text"] for row in rows] == documents
    assert max(abs(rows[e["corpus_id"]]["score"] - e["score"]) for e in expected) <= 1e-6
    printed = run("rerank", query, "--model", str(directory), "--input", str(source), "--top-n", "2")
    assert [row["id"] for row in lines(printed.stdout)] == [f"d{e['corpus_id']}" for e in expected[:2]]
    piped = run("rerank", query, "--model", str(directory), "--input", "-", stdin="\n".join(documents).encode())
    assert [row["text"] for row in lines(piped.stdout)] == [documents[e["corpus_id"]] for e in expected]


def test_rerank_holds_one_score_per_document_not_its_text(tmp_path, monkeypatch):
    """The module said rerank "keeps one score per document", but it held every row, text included,
    until the ranks were known (about 1,300 bytes more per document of 1,000 characters). A file's
    texts are now read again to write its rows: what grows with the file is a score and a rank per
    document (under 100 bytes). Peaks, by tracemalloc, with a stub ranker, of 4,000 and 20,000 such
    documents: the growth per document stays under 300 bytes, a quarter of one text."""
    import tracemalloc

    import numpy as np

    import minibert.tasks
    from minibert.apps.cli import main

    class Ranker:
        num_labels = 1

        def __init__(self, *args, **kwargs):
            pass

        def predict(self, pairs, batch_size=32):
            return np.array([-int(text[:5]) for _, text in pairs], dtype=np.float32)  # the first document best

    monkeypatch.setattr(minibert.tasks, "CrossEncoder", Ranker)
    output = tmp_path / "ranked.jsonl"

    def peak(documents: int) -> int:
        source = tmp_path / f"docs-{documents}.txt"
        source.write_text("".join(f"{number:05d}" + "x" * 995 + "\n" for number in range(documents)), encoding="utf-8")
        tracemalloc.start()
        try:
            assert main(["rerank", "q", "--model", str(tmp_path), "--input", str(source), "--output", str(output)]) == 0
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    peak(10)  # the modules a first run imports are not the documents' memory
    per_document = (peak(20_000) - peak(4_000)) / 16_000
    assert per_document < 300, f"rerank held {per_document:,.0f} bytes more per document"
    with output.open(encoding="utf-8") as handle:
        first = json.loads(handle.readline())
    assert first["index"] == 0 and first["text"].startswith("00000") and first["rank"] == 1


def test_a_blank_jsonl_line_is_refused_by_answer_as_docs_cli_says(tmp_path):
    """docs/cli.md said a blank line is the empty text "in .txt and .jsonl alike", for every command;
    answer refuses one (its lines need a question and a context), naming the line, and the page says so."""
    from pathlib import Path

    source = tmp_path / "q.jsonl"
    source.write_text('{"question": "Who?", "context": "Babbage."}\n\n', encoding="utf-8")
    result = run("answer", "--model", str(QA_REFERENCE), "--input", str(source))
    assert result.returncode == 1 and f'{source}:2: a blank line, expected an object with "question", "context" ' \
        "strings" in result.stderr  # fmt: skip
    page = " ".join((Path(__file__).parents[1] / "docs" / "cli.md").read_text(encoding="utf-8").split())
    assert "alike (but for `answer`, whose `.jsonl` lines need a question and a context: a blank line there is " \
           "refused, naming it" in page  # fmt: skip


def test_a_command_with_nothing_to_do_names_what_it_takes():
    """`answer` with no question said "give texts as arguments", which answer refuses as unrecognized;
    `rerank --input docs.txt` with the query forgotten said "required: query, documents" (the documents
    were given). Each usage line now names what the command takes."""
    cases = [(["answer"], "nothing to do: give --question and --context or --input FILE (- for stdin)"),
             (["answer", "--question", "a", "--context", "b", "--input", "x.jsonl"],
              "give --question and --context or --input FILE, not both"),
             (["rerank", "--input", os.devnull], "rerank needs a query: minibert rerank QUERY DOCUMENT ... (or QUERY "
                                                 "--input FILE)"),
             (["rerank", "the query"], "nothing to do: give documents after the query or --input FILE (- for stdin)"),
             (["classify"], "nothing to do: give texts as arguments or --input FILE (- for stdin)")]  # fmt: skip
    for args, said in cases:
        result = run(*args, "--model", str(QA_REFERENCE))
        assert result.returncode == 2 and result.stderr.strip() == f"minibert: error: {said}", (args, result.stderr)
