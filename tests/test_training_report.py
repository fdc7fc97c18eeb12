"""What `minibert pretrain` says while it runs and when it ends (issue 44, item 7): to a file or a
pipe, a whole progress line every tenth of the run or 30 seconds (it used to say nothing); on a
terminal, one line rewritten in place; in both cases a closing summary naming where the checkpoint,
the metrics and the plot are, and the losses the run went from and to. And a batch larger than the
data (issue 45, item 7) is refused naming both numbers, or allowed with --allow-wrap, said once."""

from __future__ import annotations

import io
import json
import re

import pytest

from helpers import run_minibert
from minibert.training.run.report import Progress
from minibert.training.tasks import task_named
from random_instances import random_instances, write_instances

TINY = "tests/data/tiny_hub"


@pytest.fixture
def data(tmp_path):
    return write_instances(tmp_path / "data.tfrecord", random_instances(12, vocab_size=111, seq_len=16, seed=3))


def pretrain(data, run, *extra):
    return run_minibert("pretrain", "--data", str(data), "--init", TINY, "--output", str(run), "--batch-size", "4",
                        "--save-every", "100", *extra)  # fmt: skip


def test_pretrain_to_a_file_prints_progress_lines_and_a_summary_of_where_everything_is(tmp_path, data):
    run = tmp_path / "run"
    result = pretrain(data, run, "--steps", "3")  # stderr is not a terminal here
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    progress = [int(m.group(1)) for line in lines if (m := re.match(r"minibert: step (\d+)/3  loss \d", line))]
    assert progress == [1, 2, 3], lines
    assert "\r" not in result.stderr
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    summary = lines[len(progress) :]
    assert summary[0].startswith("minibert: pretrain done: 3 steps (to step 3) in "), summary
    assert f"loss {records[0]['loss']:.4g} → {records[-1]['loss']:.4g} (masked LM {records[-1]['mlm_loss']:.4g}" \
        in summary[0], summary  # fmt: skip
    assert summary[1] == f"minibert:   model    {run}/  (model.safetensors, config.json, vocab.txt; " \
        "training_state.pt: the finished run's step and settings)"  # fmt: skip
    assert summary[2] == f"minibert:   metrics  {run / 'metrics.jsonl'}"
    assert summary[3].startswith("minibert:   plot     ") and len(summary) == 4, summary
    if (run / "loss.png").exists():
        assert summary[3] == f"minibert:   plot     {run / 'loss.png'}"
    else:
        assert "pip install 'minibert[plot]'" in summary[3]


def test_to_a_file_a_line_comes_every_tenth_of_the_run_and_at_its_first_and_last_steps(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    progress = Progress(steps=410, done=5, enabled=None)
    for step in range(6, 411):
        progress.show(record(step, 3.0), elapsed=step / 10)  # a quick run: 41 s in all
    steps = [int(line.split()[2].split("/")[0]) for line in log.getvalue().splitlines()]
    assert steps == [6, *range(41, 411, 41)] and "\r" not in log.getvalue()
    assert all(re.search(r"min left$", line) for line in log.getvalue().splitlines())


def test_to_a_file_a_slow_run_says_where_it_is_at_least_every_30_seconds(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    progress = Progress(steps=100, done=0, enabled=None)
    for step in range(1, 101):
        progress.show(record(step, 3.0), elapsed=step * 12.0)  # 12 s a step: a line every 3 steps, and each tenth
    steps = [int(line.split()[2].split("/")[0]) for line in log.getvalue().splitlines()]
    assert steps[:5] == [1, 4, 7, 10, 13] and steps[-1] == 100
    assert all(later - earlier <= 3 for earlier, later in zip(steps, steps[1:]))


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def record(step: int, loss: float) -> dict:
    return {"step": step, "loss": loss, "mlm_loss": loss - 0.5, "nsp_loss": 0.5, "learning_rate": 1e-4,
            "tokens_per_second": 1000.0}  # fmt: skip


def test_on_a_terminal_the_line_is_rewritten_and_the_summary_follows_on_its_own_lines(tmp_path, monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    progress = Progress(steps=30, done=10, enabled=None)
    for step in range(11, 31):
        progress.show(record(step, 10.0 - step / 10), elapsed=step - 10.0)
    progress.summary(tmp_path, elapsed=120.0, picture=tmp_path / "loss.png", command="pretrain",
                     detail=task_named("pretraining").summary)
    text = terminal.getvalue()
    assert text.count("\r") == 20 and "\rstep 30/30  loss 7.0000" in text
    lines = text.split("\n")
    assert lines[1] == "minibert: pretrain done: 20 steps (to step 30) in 2.0 min, loss 8.9 → 7 (masked LM 6.5, " \
        "next sentence 0.5)"  # fmt: skip
    assert lines[4] == f"minibert:   plot     {tmp_path / 'loss.png'}"


def test_a_batch_larger_than_the_data_is_refused_naming_both_numbers(tmp_path, data):
    run = tmp_path / "run"
    result = pretrain(data, run, "--steps", "1", "--batch-size", "30")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "minibert: error: --batch-size 30 is larger than the 12 instances of --data: every batch would hold each "
        "instance up to 3 times; make more instances or a smaller batch, or pass --allow-wrap to train so"
    )
    assert not run.exists()


def test_allow_wrap_trains_with_a_batch_larger_than_the_data_and_says_so_once(tmp_path, data):
    result = pretrain(data, tmp_path / "run", "--steps", "2", "--batch-size", "16", "--allow-wrap")
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warned == ["minibert: warning: --batch-size 16 is larger than the 12 instances of --data: every batch "
                      "would hold each instance up to 2 times (--allow-wrap)"]  # fmt: skip
