"""``minibert finetune --task answer``'s run folder and command: a BertForQuestionAnswering that
transformers and minibert load with the same logits and ``minibert answer`` uses; dev exact match and
F1 in metrics.jsonl with Google's prediction files; resumable bit for bit after SIGKILL; and SQuAD
files' bad input refused in one line. (torchrun: tests/test_training_finetune_parallel.py.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import minibert
from helpers import child_environment, sigkill_once_metrics_hold
from minibert.apps.cli import main
from squad_files import squad_data, write_squad
from tiny_hub import TINY  # dropout 0.1 in its config: every step draws random numbers


def flags(train: Path, output: Path, *extra: str) -> list[str]:
    return ["finetune", "--task", "answer", "--model", str(TINY), "--train", str(train), "--output", str(output),
            "--batch-size", "4", "--learning-rate", "1e-3", "--max-seq-length", "48", "--doc-stride", "16",
            "--max-query-length", "12", *extra]  # fmt: skip


@pytest.mark.parametrize("version_2", [False, True])
def test_the_run_folder_is_a_question_answerer_transformers_loads_with_the_same_logits(tmp_path, capsys, version_2):
    transformers = pytest.importorskip("transformers")
    sizes = {"paragraphs": 2, "fortunes_per_context": 3, "questions": 4, "version_2": version_2}
    train = write_squad(tmp_path / "train.json", training=True, **sizes)
    dev = write_squad(tmp_path / "dev.json", training=False, seed=1, **sizes)
    run = tmp_path / "run"
    extra = ["--version-2-with-negative"] if version_2 else []
    assert main(flags(train, run, "--dev", str(dev), "--epochs", "1", *extra)) == 0
    captured = capsys.readouterr()
    assert "a new classifier (answers: a start and an end score per piece" in captured.err
    assert captured.out.strip() == str(run)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2 and {"dev_exact_match", "dev_f1"} <= set(records[-1])  # int(8 questions / 4) steps
    predictions = json.loads((run / "predictions.json").read_text())
    assert sorted(predictions) == sorted(f"p{p}q{q}" for p in range(2) for q in range(4))
    assert (run / "nbest_predictions.json").exists() and (run / "null_odds.json").exists() == version_2
    assert json.loads((run / "best" / "best.json").read_text())["dev_f1"] == records[-1]["dev_f1"]

    question, context = "who drank the water?", "the machine drank water by the river bank"
    ours = minibert.BertForQuestionAnswering.from_pretrained(run)
    theirs = transformers.BertForQuestionAnswering.from_pretrained(run, attn_implementation="eager").eval()
    batch = minibert.BertTokenizer.from_pretrained(run)([question], [context], return_tensors="pt")
    with torch.no_grad():
        mine, reference = ours(**batch), theirs(**batch)
    for name in ("start_logits", "end_logits"):
        difference = (getattr(mine, name) - getattr(reference, name)).abs().max().item()
        assert difference < 1e-5, f"{name} max |Δ| {difference:.2e}"  # fp32 sums in another order, |logits| ~ 1
    assert main(["answer", "--model", str(run), "--question", question, "--context", context]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[0])
    assert result["answers"][0]["answer"] in context


def test_resume_after_sigkill_ends_with_identical_weights(tmp_path, monkeypatch):
    """A v2.0 run with dev evaluations, SIGKILLed past its checkpoint of step 2 and resumed, ends with
    the weights, dev figures and prediction files of a run never stopped (max |Δ| = 0): dropout is on,
    so the random-number state must come back too. The GEMM backend is named: the three processes
    must not each measure (and maybe pick) another."""
    monkeypatch.setenv("MINIBERT_GEMM", "mkl")
    sizes = {"paragraphs": 2, "fortunes_per_context": 3, "questions": 6, "version_2": True}
    train = write_squad(tmp_path / "train.json", training=True, **sizes)
    dev = write_squad(tmp_path / "dev.json", training=False, seed=1, **sizes)
    extra = ("--dev", str(dev), "--version-2-with-negative", "--epochs", "3", "--save-every", "2",
             "--eval-every", "4")  # fmt: skip
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert main(flags(train, whole, *extra)) == 0
    environment = child_environment()
    sigkill_once_metrics_hold([sys.executable, "-m", "minibert", *flags(train, broken, *extra)],
                              broken / "metrics.jsonl", 3, environment)  # fmt: skip
    assert main(flags(train, broken, *extra, "--resume")) == 0
    ours, reference = load_file(broken / "model.safetensors"), load_file(whole / "model.safetensors")
    worst = max((ours[name] - reference[name]).abs().max().item() for name in reference)
    assert worst == 0.0, f"max |Δ| {worst}"
    records = [json.loads(line) for line in (broken / "metrics.jsonl").read_text().splitlines()]
    unbroken = [json.loads(line) for line in (whole / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 10))  # int(12 questions / 4 × 3 epochs)
    dev_figures = [[(k, v) for k, v in r.items() if k.startswith(("dev_", "loss"))] for r in records]
    assert dev_figures == [[(k, v) for k, v in r.items() if k.startswith(("dev_", "loss"))] for r in unbroken]
    for name in ("predictions.json", "nbest_predictions.json", "null_odds.json", "best/best.json"):
        assert (broken / name).read_bytes() == (whole / name).read_bytes(), name


def test_an_answer_start_that_does_not_match_its_text_is_refused_in_one_line(tmp_path, capsys):
    data = squad_data(paragraphs=1, fortunes_per_context=3, questions=3, version_2=False, training=True)
    data["data"][0]["paragraphs"][0]["qas"][2]["answers"][0]["answer_start"] -= 2
    train = tmp_path / "train.json"
    train.write_text(json.dumps(data), encoding="utf-8")
    assert main(flags(train, tmp_path / "run", "--epochs", "1")) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(train) in err and "qas[2] (question 'p0q2')" in err
    assert "answers[0].answer_start" in err and not (tmp_path / "run").exists()


def test_v1_1_dev_question_without_answers_is_refused_in_one_line(tmp_path, capsys):
    """Such a question was scored as a wrong answer (dev F1 33.3 for the one gradable question
    answered right), the figures written and best/ picked from them: the official evaluate-v1.1.py
    cannot score it. The dev file is refused before training, naming the file, the place and the id."""
    train = write_squad(tmp_path / "train.json", paragraphs=1, fortunes_per_context=3, questions=2, version_2=False,
                        training=True)  # fmt: skip
    data = squad_data(paragraphs=1, fortunes_per_context=3, questions=3, version_2=False, training=False)
    data["data"][0]["paragraphs"][0]["qas"][2]["answers"] = []
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps(data), encoding="utf-8")
    assert main(flags(train, tmp_path / "run", "--dev", str(dev), "--epochs", "1")) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not (tmp_path / "run").exists()
    assert f"{dev}: data[0].paragraphs[0].qas[2] (question 'p0q2'): a SQuAD v1.1 dev question needs at least 1 " \
           "answer to be scored, this one has none (field 'answers')" in err and "--version-2-with-negative" in err


def test_v2_dev_question_on_an_empty_context_is_answered_the_empty_answer(tmp_path):
    """A context of no word piece gives its question no window (as Google's convert_examples_to_features);
    the dev evaluation crashed on it after training ("internal error: IndexError"). It is answered ""
    (right: the question is impossible), with no null odds, and scored."""
    sizes = {"paragraphs": 2, "fortunes_per_context": 3, "questions": 2, "version_2": True}
    train = write_squad(tmp_path / "train.json", training=True, **sizes)
    data = squad_data(training=False, seed=1, **sizes)
    data["data"].append({"title": "empty", "paragraphs": [
        {"context": "", "qas": [{"id": "empty", "question": "what?", "answers": [], "is_impossible": True}]}]})
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps(data), encoding="utf-8")
    run = tmp_path / "run"
    assert main(flags(train, run, "--dev", str(dev), "--epochs", "1", "--version-2-with-negative")) == 0
    predictions = json.loads((run / "predictions.json").read_text())
    assert predictions["empty"] == "" and len(predictions) == 5
    assert "empty" not in json.loads((run / "null_odds.json").read_text())
    assert json.loads((run / "nbest_predictions.json").read_text())["empty"] == [
        {"text": "", "probability": 1.0, "start_logit": 0.0, "end_logit": 0.0}]


@pytest.mark.parametrize("outputs", [2, 3, 6])
def test_a_classifier_of_any_size_starts_a_question_answerer(tmp_path, capsys, outputs):
    """An NLI classifier (3 labels), a 6-language one: run_squad makes its own [2, H] head on any
    checkpoint, so --task answer draws a new qa_outputs whatever num_labels the config says (once a
    false error for anything but 2), and the run's config is a question answerer's (no classifier
    problem_type). transformers loads it as one; a qa_outputs of another shape is refused, naming --model."""
    transformers = pytest.importorskip("transformers")
    start = tmp_path / "classifier"
    head = transformers.BertForSequenceClassification.from_pretrained(TINY, num_labels=outputs,
                                                                      problem_type="single_label_classification")
    head.save_pretrained(start)
    for name in ("vocab.txt", "tokenizer_config.json"):
        (start / name).write_bytes((TINY / name).read_bytes())
    train = write_squad(tmp_path / "train.json", training=True, paragraphs=1, fortunes_per_context=2, questions=4,
                        version_2=False)  # fmt: skip
    run = tmp_path / "run"
    argv = flags(train, run, "--epochs", "1")
    argv[argv.index(str(TINY))] = str(start)
    capsys.readouterr()
    assert main(argv) == 0
    assert "qa_outputs" in capsys.readouterr().err  # a new head, announced
    config = json.loads((run / "config.json").read_text())
    assert config["architectures"] == ["BertForQuestionAnswering"] and config.get("problem_type") is None
    assert "id2label" not in config
    assert transformers.BertForQuestionAnswering.from_pretrained(run).qa_outputs.out_features == 2
    capsys.readouterr()  # (transformers' loading bar)

    odd = tmp_path / "odd"
    state = load_file(run / "model.safetensors")
    state["qa_outputs.weight"], state["qa_outputs.bias"] = state["qa_outputs.weight"][:1], state["qa_outputs.bias"][:1]
    odd.mkdir()
    save_file(state, odd / "model.safetensors", metadata={"format": "pt"})
    for name in ("config.json", "vocab.txt", "tokenizer_config.json"):
        (odd / name).write_bytes((run / name).read_bytes())
    argv = flags(train, tmp_path / "run2", "--epochs", "1")
    argv[argv.index(str(TINY))] = str(odd)
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--model {odd} has a question-answering head (qa_outputs.weight) of 1 outputs" in err[0]
    assert not (tmp_path / "run2").exists()


def test_a_v1_1_run_records_no_threshold_and_resumes_one_that_did(tmp_path, capsys):
    """The threshold is no setting of a v1.1 run (no step reads it): not in its resume settings, and a
    run made when every run recorded it (0, or a value accepted and never read) resumes."""
    from minibert.training.run.checkpoint import TrainingState

    train = write_squad(tmp_path / "train.json", training=True, paragraphs=1, fortunes_per_context=2, questions=4,
                        version_2=False)  # fmt: skip
    run = tmp_path / "run"
    assert main(flags(train, run, "--epochs", "1")) == 0
    path = run / "training_state.pt"
    state = TrainingState.from_file(path)
    assert "null_score_diff_threshold" not in state.settings
    for recorded in (0.0, 5.0):  # as runs made before this recorded it
        state.settings["null_score_diff_threshold"] = recorded
        path.write_bytes(state.to_bytes())
        capsys.readouterr()
        assert main(flags(train, run, "--epochs", "1", "--resume")) == 0
        assert "holds a finished run" in capsys.readouterr().err
