"""What ``minibert finetune`` tells when stderr is a file (a log, a notebook, a job): progress lines
with the time left, each evaluation's dev figures, and at the end the best dev figure, its step and
its folder; stdout stays the folder's name, or JSON with ``--json``. A run without ``--dev`` says at
its start that it keeps no best/, and ``RUN/best`` is then named as missing for that reason (not as
a hub model out of reach). A finished or refused run leaves no lock file; a resumed one says what
it resumed, not what its first start did (issue 51)."""

from __future__ import annotations

import csv
import json
import re

import pytest
from test_training_finetune_run import TINY, flags, write_examples

from helpers import run_minibert
from minibert.training.run.lock import LOCK_FILE


def test_a_run_to_a_log_file_reports_progress_dev_figures_and_the_best(tmp_path):
    train, dev = write_examples(tmp_path / "train.csv", 24), write_examples(tmp_path / "dev.csv", 12, seed=1)
    run = tmp_path / "run"
    done = run_minibert(*flags(train, run, "--dev", str(dev), "--epochs", "2", "--json"))  # stderr: a pipe
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    progress = [line for line in lines if re.match(r"minibert: step \d+/12  loss \S+  rate \S+  .* min left$", line)]
    assert len(progress) >= 3 and progress[0].startswith("minibert: step 1/12"), lines
    assert progress[-1].startswith("minibert: step 12/12"), lines
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evaluated = [record for record in records if "dev_accuracy" in record]
    dev_lines = [line for line in lines if re.match(r"minibert: step \d+/12  dev accuracy ", line)]
    assert [int(line.split()[2].split("/")[0]) for line in dev_lines] == [record["step"] for record in evaluated]
    for line, record in zip(dev_lines, evaluated):
        assert f"dev accuracy {record['dev_accuracy']:.4g}" in line, (line, record)
    best = max(evaluated, key=lambda record: record["dev_accuracy"])  # (the first of equals: a later one is not better)
    best = next(record for record in evaluated if record["dev_accuracy"] == best["dev_accuracy"])
    assert lines[-1] == (f"minibert:   best     dev accuracy {best['dev_accuracy']:.4g} at step {best['step']}: "
                         f"{run / 'best'}/")  # fmt: skip
    answer = json.loads(done.stdout)
    assert answer["output"] == str(run) and answer["steps"] == 12 and answer["last"] == records[-1]
    assert answer["best"] == {"step": best["step"], "dev_accuracy": best["dev_accuracy"], "folder": str(run / "best")}
    assert not (run / LOCK_FILE).exists(), "a finished run leaves no lock file"


def test_a_run_without_dev_says_it_keeps_no_best_and_run_best_is_named_so(tmp_path, monkeypatch):
    train = write_examples(tmp_path / "train.csv", 16)
    run = tmp_path / "run"
    done = run_minibert(*flags(train, run))
    assert done.returncode == 0, done.stderr
    assert f"finetune: no --dev: the run is not evaluated and keeps no {run}/best/" in done.stderr
    last = done.stderr.splitlines()[-1]
    assert last == f"minibert:   best     none: no --dev, so no {run / 'best'}/ (the model is {run}/)"
    assert done.stdout.strip() == str(run)
    monkeypatch.chdir(tmp_path)
    classify = run_minibert("classify", "--model", "run/best", "the river")
    assert classify.returncode == 1
    assert classify.stderr.strip().splitlines() == [
        "minibert: error: 'run/best' does not exist: the run in 'run' keeps no best/, because it was made without "
        "--dev (or has not been evaluated yet); its model is the run folder itself: 'run'"]  # fmt: skip
    assert run_minibert("classify", "--model", "run", "the river").returncode == 0


def test_a_resumed_run_says_what_it_resumed_and_not_that_its_head_is_new(tmp_path):
    train = write_examples(tmp_path / "train.csv", 16)
    run = tmp_path / "run"
    first = run_minibert(*flags(train, run, "--epochs", "1"))
    assert first.returncode == 0 and "starts 2 tensors from fresh weights" in first.stderr, first.stderr
    resumed = run_minibert(*flags(train, run, "--epochs", "1", "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert "from fresh weights" not in resumed.stderr and "a new classifier" not in resumed.stderr, resumed.stderr
    assert f"minibert: {run} holds a finished run (step 4 of 4): nothing to resume" in resumed.stderr, resumed.stderr
    kept = tmp_path / "kept"  # a finished run that kept its whole state: its last step's checkpoint, said so
    assert run_minibert(*flags(train, kept, "--epochs", "1", "--keep-state")).returncode == 0
    resumed = run_minibert(*flags(train, kept, "--epochs", "1", "--keep-state", "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert "from fresh weights" not in resumed.stderr and "a new classifier" not in resumed.stderr, resumed.stderr
    assert f"minibert: {kept} holds the checkpoint of its last step (step 4 of 4): no step left to train" in \
        resumed.stderr, resumed.stderr  # fmt: skip


def test_an_undefined_dev_figure_is_null_undefined_and_never_the_best(tmp_path, monkeypatch):
    """A dev Spearman that is 0/0 (here one dev row: constant gold scores) was recorded and said as 0
    and picked best/. It is null in metrics.jsonl, "undefined" on the dev line, never the best: with
    a defined figure at another evaluation, best/ is that one's; undefined at every evaluation, the
    run keeps no best/ and says why; a sweep's table says "undefined" for such a trial."""
    from minibert.training.tasks import regress

    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    train.write_text("text,label\nthe water,1.0\nthe bank,2.0\nriver love,3.0\nthe vault,0.5\n", encoding="utf-8")
    dev.write_text("text,label\nthe water,1.0\n", encoding="utf-8")
    run = tmp_path / "run"
    argv = [*flags(train, run, "--task", "regress", "--dev", str(dev), "--batch-size", "2", "--epochs", "2")]
    done = run_minibert(*argv, "--json")
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evaluated = [record for record in records if "dev_spearman" in record]
    assert [record["step"] for record in evaluated] == [2, 4]
    assert all(record["dev_spearman"] is None and record["dev_pearson"] is None for record in evaluated), evaluated
    assert "minibert: step 2/4  dev spearman undefined  dev pearson undefined" in done.stderr.splitlines()
    assert not (run / "best").exists() and json.loads(done.stdout)["best"] is None
    assert done.stderr.splitlines()[-1] == (f"minibert:   best     none: dev spearman was undefined at every "
                                            f"evaluation (see metrics.jsonl), so no {run / 'best'}/ (the model is "
                                            f"{run}/)")  # fmt: skip

    sweep = run_minibert(*[word if word != str(run) else str(tmp_path / "sweep") for word in argv],
                         "--learning-rates", "1e-3")  # fmt: skip
    assert sweep.returncode == 0, sweep.stderr
    assert "| 0.001 | 12345 | undefined |" in sweep.stdout, sweep.stdout
    assert "| 0.001 | 0 of 1 (1 undefined) | undefined | undefined | undefined |" in sweep.stdout, sweep.stdout

    calls = []  # defined at the first evaluation (step 2), undefined at the second (step 4): best/ is step 2's

    def first_defined(gold, scores):
        calls.append(1)
        return 0.5 if len(calls) == 1 else float("nan")

    monkeypatch.setattr(regress, "spearman", first_defined)
    mixed = tmp_path / "mixed"
    done = run_minibert(*[word if word != str(run) else str(mixed) for word in argv])
    assert done.returncode == 0, done.stderr
    assert json.loads((mixed / "best" / "best.json").read_text()) == {"step": 2, "dev_spearman": 0.5}
    assert done.stderr.splitlines()[-1] == f"minibert:   best     dev spearman 0.5 at step 2: {mixed / 'best'}/"


def test_classify_with_a_model_without_a_classifier_advises_a_command_not_a_python_argument(minilm_dir):
    done = run_minibert("classify", "--model", str(minilm_dir), "a text")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no tensors for a classifier" in lines[0], lines
    assert "new_heads" not in lines[0] and f"minibert finetune --model {minilm_dir} --train FILE" in lines[0], lines


def test_a_resumed_run_reports_the_best_that_best_holds_and_keeps_its_eval_every(tmp_path, monkeypatch):
    """best/ is not cut back to the checkpoint: a run stopped after an evaluation that made best/
    (step 3, the checkpoint being step 2's) used to rebuild its best from the metrics lines kept
    (step 1's) and, resumed, said "best ... at step 1: best/" while best/ held step 3 (and --json
    said step 3). The best is now read from best/best.json; and a resume that changes --eval-every
    (the evaluations best/ is chosen from) is refused, as the other settings are."""
    from minibert.training.run import loop
    from minibert.training.tasks import regress

    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    train.write_text("text,label\nthe water,1.0\nthe bank,2.0\nriver love,3.0\nthe vault,0.5\n", encoding="utf-8")
    dev.write_text("text,label\nthe water,1.0\nthe bank,2.0\nriver love,3.0\n", encoding="utf-8")
    run = tmp_path / "run"
    argv = flags(train, run, "--task", "regress", "--dev", str(dev), "--batch-size", "2", "--epochs", "2",
                 "--save-every", "2")  # fmt: skip
    figures = iter([0.5, 0.1, 0.9])  # steps 1, 2, 3: step 3's is the best, after the checkpoint of step 2
    monkeypatch.setattr(regress, "spearman", lambda gold, scores: next(figures, 0.2))
    said = loop.report_dev

    def stopped_after_step_3(step, *args):
        said(step, *args)
        if step == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(loop, "report_dev", stopped_after_step_3)
    stopped = run_minibert(*argv, "--eval-every", "1")
    assert stopped.returncode == 130 and "holds the checkpoint of step 2 of 4" in stopped.stderr, stopped.stderr
    assert json.loads((run / "best" / "best.json").read_text()) == {"step": 3, "dev_spearman": 0.9}
    monkeypatch.setattr(loop, "report_dev", said)

    # resumed at a lower rate (which a resume may change): its evaluations (0.2) are not better than best/'s
    resumed = run_minibert(*argv, "--eval-every", "1", "--resume", "--learning-rate", "1e-4", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run / "best" / "best.json").read_text()) == {"step": 3, "dev_spearman": 0.9}
    assert resumed.stderr.splitlines()[-1] == f"minibert:   best     dev spearman 0.9 at step 3: {run / 'best'}/"
    assert json.loads(resumed.stdout)["best"] == {"step": 3, "dev_spearman": 0.9, "folder": str(run / "best")}
    # finetune.json kept the starting rate as "the options" of a run that went on at another
    note = json.loads((run / "finetune.json").read_text())
    assert note["options"]["learning_rate"] == 1e-4
    assert note["learning_rates"] == [{"from_step": 1, "learning_rate": 1e-3}, {"from_step": 3, "learning_rate": 1e-4}]
    assert [json.loads(line)["learning_rate"] for line in (run / "metrics.jsonl").read_text().splitlines()][2:] \
        == pytest.approx([1e-4 * (1 - step / 4) for step in (2, 3)])  # fmt: skip

    refused = run_minibert(*argv, "--learning-rate", "1e-4", "--resume")  # --eval-every left out
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith("the run was made with eval_every (--eval-every) = 1, this command gives "
                                           "None; resume "
                                           "with the run's settings"), refused.stderr  # fmt: skip


def test_tokens_per_second_counts_the_real_tokens_of_each_batch(tmp_path):
    """metrics.jsonl's tokens_per_second × seconds is each step's real tokens — the pieces transformers'
    tokenizer gives its rows (order.jsonl), [CLS] and [SEP] included — the same at --max-seq-length 16
    and 64 for texts that fit both (it was batch × --max-seq-length: 4× the figure at 64 for the same work)."""
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.BertTokenizer.from_pretrained(TINY)
    train = write_examples(tmp_path / "train.csv", 24)
    with open(train, newline="", encoding="utf-8") as handle:
        texts = [row["text"] for row in csv.DictReader(handle)]
    lengths = [len(tokenizer(text)["input_ids"]) for text in texts]
    assert max(lengths) <= 16
    for limit in ("16", "64"):
        run = tmp_path / f"run{limit}"
        done = run_minibert(*flags(train, run, "--epochs", "1", "--max-seq-length", limit))
        assert done.returncode == 0, done.stderr
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        rows = [json.loads(line)["examples"] for line in (run / "order.jsonl").read_text().splitlines()]
        counted = [record["tokens_per_second"] * record["seconds"] for record in records]
        real = [sum(lengths[row] for row in step) for step in rows]
        assert counted == pytest.approx(real, rel=1e-12), limit  # (x / s · s: a rounding or two of float64)


def test_json_reads_the_metrics_files_last_line_from_its_end(tmp_path):
    """Issue r21 reports, item 8: --json's result read the whole metrics.jsonl for its last line
    (178 MB at 200,000 steps, ~0.9 GB at BERT's million). It now reads back from the end: the memory
    is the same for a file of 16 MB as for one line (under 1 MB). A line cut short by a kill is passed over."""
    import tracemalloc

    from minibert.training.run.report import result_of

    record = {"step": 0, "epoch": 0.5, "loss": 0.25, "mlm_loss": 0.1, "nsp_loss": 0.15, "learning_rate": 1e-4,
              "gradient_norm": 1.0, "tokens_per_second": 1234.5, "seconds": 0.5,
              "examples_per_second": 64.0}  # fmt: skip
    with open(tmp_path / "metrics.jsonl", "w") as handle:
        for step in range(1, 80_001):
            handle.write(json.dumps({**record, "step": step}) + "\n")
    assert (tmp_path / "metrics.jsonl").stat().st_size > 15_000_000
    tracemalloc.start()
    result = result_of(tmp_path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert result["steps"] == 80_000 and result["last"] == {**record, "step": 80_000}
    assert peak < 1_000_000, f"{peak / 1e6:.1f} MB to read the last line"
    with open(tmp_path / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 80001, "lo')  # a kill while the line was written
    assert result_of(tmp_path) == result


def test_a_resume_drops_the_metrics_past_its_checkpoint_line_by_line(tmp_path):
    """--resume's cut of metrics.jsonl (lines past the checkpoint's step, a line cut short) read the
    whole file and held every kept line (~2× the file: ~0.9 GB at a million steps); it copies line by line."""
    import tracemalloc

    from minibert.training.run.checkpoint import RunDirectory

    with open(tmp_path / "metrics.jsonl", "w") as handle:
        for step in range(1, 80_001):
            handle.write(json.dumps({"step": step, "loss": 0.25, "learning_rate": 1e-4, "seconds": 0.5}) + "\n")
        handle.write('{"step": 80001, "lo')  # the killed process's last line, cut short
    tracemalloc.start()
    RunDirectory(tmp_path).keep_metrics_up_to(79_990)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == list(range(1, 79_991))
    assert peak < 1_000_000, f"{peak / 1e6:.1f} MB to cut the metrics"
