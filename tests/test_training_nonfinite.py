"""A diverging run stops at its first non-finite number and keeps its last good checkpoint (issue 45,
item 2). With `--learning-rate 1e30` the loss is NaN from step 2: the run used to go on, overwrite
its checkpoint with NaN weights, then fail reading its own metrics.jsonl (it wrote `null`). Now it
stops at that step with one line (the step, which number, the rate), the checkpoint on disk is byte
for byte what it was, `--resume` with a lower rate continues it, and `minibert plot` draws the NaN."""

from __future__ import annotations

import json
import math

import pytest

from helpers import run_minibert
from minibert.training.run.checkpoint import RunDirectory
from minibert.training.run.plot import read_metrics
from random_instances import random_instances, write_instances

TINY = "tests/data/tiny_hub"
CHECKPOINT_FILES = ("training_state.pt", "model.safetensors", "config.json")


def pretrain(data, run, *extra):
    return run_minibert("pretrain", "--data", str(data), "--init", TINY, "--output", str(run), "--steps", "6",
                        "--batch-size", "4", "--save-every", "3", "--warmup-steps", "0", *extra)  # fmt: skip


def test_a_nan_loss_stops_the_run_and_leaves_the_last_checkpoint_byte_identical_and_resumable(tmp_path):
    data = write_instances(tmp_path / "data.tfrecord", random_instances(12, vocab_size=111, seq_len=16, seed=3))
    run = tmp_path / "run"
    # --save-every 3: the last checkpoint before the NaN of step 2 is step 0's
    diverged = pretrain(data, run, "--learning-rate", "1e30")
    assert diverged.returncode == 1
    line = diverged.stderr.strip().splitlines()[-1]
    assert line.startswith("minibert: error: step 2: not a finite number (masked-LM loss nan"), line
    assert "at learning rate 8.33e+29 (--learning-rate 1e+30)" in line, line
    assert "keeps the checkpoint of step 0" in line, line
    # a tenth of the rate, and no more than pretrain's default 1e-4 (a tenth of 1e30 would diverge again)
    assert line.endswith("--resume") and "--learning-rate 0.0001" in line, line
    before = {name: (run / name).read_bytes() for name in CHECKPOINT_FILES}

    # the metrics hold the NaN step in a form the reader (and plot) accept
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert '"mlm_loss": NaN' in lines[-1], lines[-1]
    records = read_metrics(run)
    assert [record["step"] for record in records] == [1, 2] and math.isnan(records[-1]["loss"])
    pytest.importorskip("matplotlib")
    assert run_minibert("plot", str(run)).returncode == 0

    for name in CHECKPOINT_FILES:  # byte for byte as they were when the NaN came
        assert (run / name).read_bytes() == before[name], name
    resumed = pretrain(data, run, "--learning-rate", "1e-3", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming at step 0 with --learning-rate 0.001" in resumed.stderr
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]
    assert all(math.isfinite(record["loss"]) for record in read_metrics(run))


def test_a_resume_with_other_settings_than_the_rate_is_still_refused(tmp_path):
    data = write_instances(tmp_path / "data.tfrecord", random_instances(12, vocab_size=111, seq_len=16, seed=3))
    run = tmp_path / "run"
    assert pretrain(data, run, "--steps", "3").returncode == 0
    refused = pretrain(data, run, "--steps", "3", "--weight-decay", "0.5", "--resume")
    assert refused.returncode == 1 and "weight_decay" in refused.stderr, refused.stderr


def test_weights_that_are_not_finite_are_never_saved_over_a_checkpoint(tmp_path):
    import torch

    from minibert.errors import TrainingDivergedError
    from minibert.heads import BertForPreTraining
    from minibert.training.options import PretrainOptions
    from minibert.training.run.distributed import World
    from minibert.training.run.loop import Run, save
    from minibert.training.tasks import task_named

    model = BertForPreTraining.from_pretrained(TINY)
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight[3, 1] = math.inf
    folder = RunDirectory(tmp_path)
    folder.saved_step = 4
    options = PretrainOptions(data=["data.tfrecord"], output=str(tmp_path), steps=9, batch_size=4, init=str(TINY))
    run = Run(task_named("pretraining"), options, World(), folder, model=model)
    with pytest.raises(TrainingDivergedError, match="step 5: the weights hold NaN or infinite values.*step 4.*"
                                                    "--learning-rate 1e-05 --resume"):  # fmt: skip
        save(run, 5)
    assert not any(tmp_path.iterdir())


def test_metrics_written_with_null_by_older_runs_are_read_as_missing_numbers(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": null, "mlm_loss": null, "nsp_loss": 0.5}\n')
    assert read_metrics(tmp_path)[0]["step"] == 1


# ------------------------------------------------------------------ the guard attacked

PRETRAINING_WATCHED = {"mlm_loss": "masked-LM loss", "nsp_loss": "next-sentence loss", "gradient_norm": "gradient norm"}
GOOD = {"step": 7, "loss": 3.0, "mlm_loss": 2.5, "nsp_loss": 0.5, "learning_rate": 1e-4, "gradient_norm": 1.0}


@pytest.mark.parametrize(
    "changes, said",
    [
        ({"mlm_loss": math.nan}, "masked-LM loss nan"),
        ({"nsp_loss": math.inf}, "next-sentence loss inf"),
        ({"mlm_loss": -math.inf}, "masked-LM loss -inf"),
        ({"gradient_norm": math.nan}, "gradient norm nan"),  # finite losses, a NaN gradient
        ({"gradient_norm": math.inf}, "gradient norm inf"),
        ({"mlm_loss": math.nan, "gradient_norm": math.inf}, "masked-LM loss nan, gradient norm inf"),
    ],
)
def test_every_non_finite_number_watched_stops_the_run_naming_it(tmp_path, changes, said):
    from minibert.errors import TrainingDivergedError
    from minibert.training.run.report import check_finite

    expected = f"^step 7: not a finite number \\({said}\\) at learning rate 0.0001"
    with pytest.raises(TrainingDivergedError, match=expected):
        check_finite({**GOOD, **changes}, 1e-4, tmp_path, 5, "minibert pretrain ... --resume", PRETRAINING_WATCHED)


@pytest.mark.parametrize("changes", [{}, {"mlm_loss": 3e38, "loss": 3e38}, {"gradient_norm": 1e30}, {"nsp_loss": 0.0}])
def test_large_but_finite_numbers_go_on(tmp_path, changes):
    from minibert.training.run.report import check_finite

    check_finite({**GOOD, **changes}, 1e-4, tmp_path, 5, "", PRETRAINING_WATCHED)


def test_the_resume_command_quotes_paths_and_gives_the_flags_that_differ():
    import shlex

    from minibert.training import PretrainOptions
    from minibert.training.run.report import resume_command

    options = PretrainOptions(data=["my data/a.tfrecord", "b.tfrecord"], output="run 1", steps=10, batch_size=4,
                              config="c.json", vocab="v.txt", do_lower_case=False, learning_rate=1e-3,
                              bf16=True)  # fmt: skip
    command = resume_command(options, learning_rate=1e-5)
    assert shlex.split(command) == ["minibert", "pretrain", "--data", "my data/a.tfrecord", "b.tfrecord", "--output",
                                    "run 1", "--steps", "10", "--batch-size", "4", "--config", "c.json", "--vocab",
                                    "v.txt", "--cased", "--learning-rate", "1e-05", "--resume", "--precision",
                                    "bf16"]  # fmt: skip (--bf16 is --precision bf16 from the start)
    assert resume_command(options, processes=2).startswith("torchrun --nproc_per_node 2 -m minibert pretrain ")


@pytest.mark.parametrize(
    "changes, said",
    [({"loss": math.nan}, "loss nan"), ({"loss": math.inf}, "loss inf"), ({"gradient_norm": -math.inf},
     "gradient norm -inf"), ({"loss": math.nan, "gradient_norm": math.nan}, "loss nan, gradient norm nan")],
)  # fmt: skip
def test_finetune_watches_its_loss_and_gradient_norm(tmp_path, changes, said):
    """finetune's record has one loss (no masked-LM/next-sentence parts): the same check, its figures."""
    from minibert.errors import TrainingDivergedError
    from minibert.training.run.report import check_finite
    from minibert.training.tasks import task_named

    WATCHED_FINETUNE = task_named("classify").watched

    record = {"step": 3, "loss": 0.7, "learning_rate": 2e-5, "gradient_norm": 1.5, **changes}
    expected = f"^step 3: not a finite number \\({said}\\) at learning rate 2e-05"
    with pytest.raises(TrainingDivergedError, match=expected):
        check_finite(record, 2e-5, tmp_path, 2, "minibert finetune ... --resume", WATCHED_FINETUNE)
    check_finite({**record, **{key: 1e30 for key in changes}}, 2e-5, tmp_path, 2, "", WATCHED_FINETUNE)


def test_the_finetune_resume_command_gives_its_labels_and_task_and_quotes_paths():
    import shlex

    from minibert.training import FinetuneOptions
    from minibert.training.run.report import resume_command

    options = FinetuneOptions(model="my model", train="t.tsv", output="run 1", task="classify", glue="mrpc",
                              labels=("0", "1"), epochs=2.0, learning_rate=3e-5)  # fmt: skip
    command = shlex.split(resume_command(options, 1, "finetune", learning_rate=3e-6))
    assert command == ["minibert", "finetune", "--model", "my model", "--train", "t.tsv", "--output", "run 1",
                       "--glue", "mrpc", "--labels", "0,1", "--epochs", "2.0", "--learning-rate", "3e-06",
                       "--resume"]  # fmt: skip
    assert resume_command(options, 2, "finetune").startswith("torchrun --nproc_per_node 2 -m minibert finetune ")


@pytest.mark.parametrize("labels", [("dry", "wet, very"), ('say "hi"', "bye"), ("-1", "1"), ("0", "1")])
@pytest.mark.parametrize("processes", [1, 2])
def test_the_printed_resume_command_parses_back_to_the_same_run(labels, processes):
    """The command printed on a stop, a divergence or a sweep's stop is run as printed: the CLI's own
    parser reads it back to the same options. Labels holding a comma were joined without quotes
    (`--labels 'dry,wet, very'`: three labels, refused by the run); a value starting with "-" would
    be read as a flag (`--labels -1,1`)."""
    import dataclasses
    import shlex

    from minibert.apps.cli import build_parser
    from minibert.apps.flag_types import values_of
    from minibert.training import FinetuneOptions
    from minibert.training.run.report import resume_command

    options = FinetuneOptions(model="my model", train="t t.csv", dev="d.csv", output="run 1", labels=labels,
                              epochs=2.0, eval_every=3, null_score_diff_threshold=-1.5)  # fmt: skip
    words = shlex.split(resume_command(options, processes, "finetune", learning_rate=2e-6))
    words = words[words.index("minibert") + 1 :]  # (torchrun's own flags before it)
    args = build_parser().parse_args(words)
    assert args.labels == labels
    back = FinetuneOptions(**values_of(args, FinetuneOptions))
    assert back == dataclasses.replace(options, resume=True, learning_rate=2e-6)
