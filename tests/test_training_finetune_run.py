"""``minibert finetune``'s run folder and command: a classifier transformers and minibert load with
the same logits, ``minibert classify`` uses, resumable bit for bit after SIGKILL; and its refusals
of bad input (one line on stderr, exit 1, nothing written)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import minibert
from helpers import child_environment, sigkill_once_metrics_hold
from minibert.apps.cli import main
from tiny_hub import TINY  # dropout 0.1 in its config: every step draws random numbers

WORDS = "the machine drank water bank river money vault paris love thirsty engineer".split()


def write_examples(path: Path, count: int, seed: int = 0) -> Path:
    """A CSV of ``count`` texts of the tiny vocabulary's words, labelled by whether 'water' or 'river' is in them.
    Every draw is from ``seed``'s generator: a text's length once came from torch's global one, so the
    file depended on the tests run before in the process (6 texts of one label, refused, in one order)."""
    generator = torch.Generator().manual_seed(seed)
    lines = ["text,label"]
    for _ in range(count):
        length = int(torch.randint(2, 9, (), generator=generator))
        words = [WORDS[int(i)] for i in torch.randint(len(WORDS), (length,), generator=generator)]
        lines.append(f"{' '.join(words)},{'wet' if {'water', 'river'} & set(words) else 'dry'}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def flags(train: Path, output: Path, *extra: str) -> list[str]:
    """A tiny run's flags; a sweep's (``--learning-rates`` in ``extra``) without ``--learning-rate``,
    which a sweep refuses beside them."""
    rate = [] if "--learning-rates" in extra else ["--learning-rate", "1e-3"]
    return ["finetune", "--model", str(TINY), "--train", str(train), "--output", str(output), "--batch-size", "4",
            *rate, "--max-seq-length", "16", *extra]  # fmt: skip


def test_the_run_folder_is_a_classifier_transformers_loads_with_the_same_logits(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    train, dev = write_examples(tmp_path / "train.csv", 24), write_examples(tmp_path / "dev.csv", 12, seed=1)
    run = tmp_path / "run"
    assert main(flags(train, run, "--dev", str(dev), "--epochs", "2")) == 0
    captured = capsys.readouterr()
    assert "a new classifier (2 labels: dry, wet), initialised as Google's: truncated normal 0.02" in captured.err
    assert captured.out.strip() == str(run)
    config = json.loads((run / "config.json").read_text())
    assert config["id2label"] == {"0": "dry", "1": "wet"} and config["label2id"] == {"dry": 0, "wet": 1}
    note = json.loads((run / "finetune.json").read_text())
    assert note["head"] == "new" and note["steps"] == 12 and note["warmup_steps"] == 1
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 13))
    assert [r["step"] for r in records if "dev_accuracy" in r] == [6, 12], "dev at each epoch's end"
    best = json.loads((run / "best" / "best.json").read_text())
    assert best["dev_accuracy"] == max(r["dev_accuracy"] for r in records if "dev_accuracy" in r)

    texts = ["the river bank", "money in the vault", "love"]
    ours = minibert.BertForSequenceClassification.from_pretrained(run)
    theirs = transformers.BertForSequenceClassification.from_pretrained(run, attn_implementation="eager").eval()
    batch = minibert.BertTokenizer.from_pretrained(run)(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        difference = (ours(**batch).logits - theirs(**batch).logits).abs().max().item()
    assert difference < 1e-5, f"logits max |Δ| {difference:.2e}"  # fp32 sums in another order, |logits| ~ 1
    from minibert.tasks import classify

    assert [result["label"] for result in classify(texts, model=str(run))] == [
        theirs.config.id2label[int(i)] for i in theirs(**batch).logits.argmax(-1)
    ]


def test_a_run_from_a_bfloat16_checkpoint_says_float32_as_it_saves_it(tmp_path, capsys):
    """The model is loaded and trained in float32: config.json said the source's "bfloat16", so
    transformers' default load (dtype="auto") read the run's float32 weights in bfloat16."""
    import shutil

    transformers = pytest.importorskip("transformers")
    source = tmp_path / "bf16"
    transformers.AutoModel.from_pretrained(str(TINY), dtype=torch.bfloat16).save_pretrained(source)
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(TINY / name, source)
    run = tmp_path / "run"
    argv = flags(write_examples(tmp_path / "train.csv", 8), run, "--epochs", "1")
    assert main([*argv[:2], str(source), *argv[3:]]) == 0
    capsys.readouterr()
    assert json.loads((run / "config.json").read_text())["dtype"] == "float32"
    ours = minibert.BertForSequenceClassification.from_pretrained(run)
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(run, attn_implementation="eager").eval()
    assert theirs.dtype == torch.float32
    batch = minibert.BertTokenizer.from_pretrained(run)(["the river bank", "love"], padding=True, return_tensors="pt")
    with torch.no_grad():
        difference = (ours(**batch).logits - theirs(**batch).logits).abs().max().item()
    assert difference < 1e-5, f"logits max |Δ| {difference:.2e}"

def test_a_head_of_the_task_continues_and_one_that_does_not_fit_is_refused(tmp_path, capsys):
    train = write_examples(tmp_path / "train.csv", 8)
    first = tmp_path / "first"
    assert main(flags(train, first, "--epochs", "1")) == 0
    assert main(flags(train, tmp_path / "second", "--epochs", "1", "--model", str(first))) == 0
    assert "continuing --model's classifier (2 labels: dry, wet)" in capsys.readouterr().err
    three = tmp_path / "three.csv"
    three.write_text("text,label\nthe water,wet\nthe bank,dry\nparis,city\nlove,dry\n", encoding="utf-8")
    assert main(flags(three, tmp_path / "third", "--epochs", "1", "--model", str(first))) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has a classifier with 2 outputs (dry, wet); the task needs 3" in err
    assert not (tmp_path / "third").exists()



def test_a_head_of_another_kind_is_refused_naming_both(tmp_path, capsys):
    """A sentence classifier's head (on the pooled [CLS] vector, a softmax) was "continued" by a tag
    run, a multilabel run (a sigmoid per label) and a regression; a token classifier's by a classify
    run. As transformers, the kind is config.json's architectures and problem_type."""
    train = write_examples(tmp_path / "train.csv", 8)
    first = tmp_path / "first"
    assert main(flags(train, first, "--epochs", "1")) == 0
    conll = tmp_path / "train.txt"
    conll.write_text("the wet\nbank dry\n\nparis dry\nwater wet\n\n" * 4, encoding="utf-8")
    capsys.readouterr()
    tag = ["--task", "tag", "--model", str(first), "--train", str(conll)]
    for extra, trains in ((tag, "a token classifier"), (["--task", "multilabel", "--model", str(first)],
                                                         "a multi-label sentence classifier")):  # fmt: skip
        assert main(flags(train, tmp_path / "refused", "--epochs", "1", *extra)) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--model {first}'s classifier is a sentence classifier (one label per " \
            f"text, a softmax); the task trains {trains}" in err, err
        assert not (tmp_path / "refused").exists()
    tagger = tmp_path / "tagger"
    assert main(flags(train, tagger, "--epochs", "1", "--task", "tag", "--train", str(conll))) == 0
    assert json.loads((tagger / "config.json").read_text())["architectures"] == ["BertForTokenClassification"]
    capsys.readouterr()
    assert main(flags(train, tmp_path / "refused", "--epochs", "1", "--model", str(tagger))) == 1
    assert "classifier is a token classifier (a label per word); the task trains a sentence classifier" in \
        capsys.readouterr().err


def test_resume_after_sigkill_ends_with_identical_weights(tmp_path, monkeypatch):
    """Dropout on (the tiny config's 0.1): the resumed run must restore the random-number state too.
    The GEMM backend is named: the three processes must not each measure (and maybe pick) another."""
    monkeypatch.setenv("MINIBERT_GEMM", "mkl")
    train = write_examples(tmp_path / "train.csv", 16)
    extra = ("--epochs", "2", "--save-every", "2")
    assert main(flags(train, tmp_path / "whole", *extra)) == 0
    broken = tmp_path / "broken"
    metrics = broken / "metrics.jsonl"  # killed with 3 lines: past the checkpoint of step 2
    sigkill_once_metrics_hold([sys.executable, "-m", "minibert", *flags(train, broken, *extra)], metrics, 3,
                              child_environment())  # fmt: skip
    assert main(flags(train, broken, *extra, "--resume")) == 0
    whole, resumed = load_file(tmp_path / "whole" / "model.safetensors"), load_file(broken / "model.safetensors")
    worst = max((whole[name] - resumed[name]).abs().max().item() for name in whole)
    assert worst == 0.0, f"max |Δ| {worst}"
    lines = [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    assert lines == list(range(1, 9))


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("dev-label", "--dev {dev}, line 3: label 'soggy' is not among the training labels (dry, wet)"),
        ("empty", "{train} is empty: it holds no examples"),
        ("column", "{train}, line 1: no column 'sentence' (--text-column)"),
        ("no-vocab", "has no usable vocabulary (vocab.txt)"),
        ("existing", "already holds a run: pass --resume to continue it"),
    ],
)
def test_bad_input_one_line_exit_1_nothing_written(tmp_path, capsys, case, message):
    train, dev, run = write_examples(tmp_path / "train.csv", 8), tmp_path / "dev.csv", tmp_path / "run"
    dev.write_text("text,label\nthe water,wet\nthe bank,soggy\n", encoding="utf-8")
    extra: list[str] = ["--dev", str(dev)] if case == "dev-label" else []
    model = TINY
    if case == "empty":
        train.write_text("", encoding="utf-8")
    if case == "column":
        extra = ["--text-column", "sentence"]
    if case == "no-vocab":
        model = tmp_path / "model"
        model.mkdir()
        for name in ("config.json", "model.safetensors"):
            (model / name).write_bytes((TINY / name).read_bytes())
    if case == "existing":
        run.mkdir()
        (run / "training_state.pt").write_text("kept\n")  # a run is its training state
    argv = flags(train, run, *extra)
    argv[argv.index("--model") + 1] = str(model)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("minibert: error: "), err
    assert message.format(train=train, dev=dev) in err
    if case == "existing":
        assert (run / "training_state.pt").read_text() == "kept\n" and len(list(run.iterdir())) == 1
    else:
        assert not run.exists()


@pytest.mark.parametrize("flag, value", [("--epochs", "0"), ("--max-seq-length", "2"), ("--dropout", "1"),
                                         ("--warmup-proportion", "2"), ("--seed", "-1"), ("--batch-size", "²")])
def test_a_flag_outside_its_limits_is_a_usage_error_naming_them(tmp_path, capsys, flag, value):
    """The flags come from FinetuneOptions' fields: one parser names the flag and its limits; exit 2."""
    train, run = write_examples(tmp_path / "train.csv", 8), tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        main([*flags(train, run), flag, value])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be a" in err and value in err, err
    assert not run.exists()


def test_write_features_writes_googles_layout_and_stops(tmp_path, capsys):
    """--write-features: the training features as TFRecord (TensorFlow's own reading of them is
    checked in test_training_finetune_features.py); neither it nor --output is a usage error."""
    from minibert.formats.tfrecord import read_examples

    train, path = write_examples(tmp_path / "train.csv", 6), tmp_path / "train.tfrecord"
    argv = flags(train, tmp_path / "run")
    argv[argv.index("--output") : argv.index("--output") + 2] = ["--write-features", str(path)]
    del argv[argv.index("--batch-size") : argv.index("--learning-rate") + 2]  # (a run's: refused)
    assert main(argv) == 0
    records = list(read_examples(path))
    assert len(records) == 6 and not (tmp_path / "run").exists()
    assert sorted(records[0]) == ["input_ids", "input_mask", "is_real_example", "label_ids", "segment_ids"]
    assert len(records[0]["input_ids"]) == 16 and records[0]["input_ids"][0] == 2  # [CLS]
    capsys.readouterr()
    del argv[argv.index("--write-features") : argv.index("--write-features") + 2]
    assert main(argv) == 2
    assert "give --output (to fine-tune) or --write-features" in capsys.readouterr().err
    assert main(argv + ["--output", str(tmp_path / "run"), "--write-features", str(path)]) == 2
    assert "--output and --write-features exclude each other" in capsys.readouterr().err  # (not "give one of")


def test_write_features_refuses_the_flags_of_a_run_and_needs_no_full_step(tmp_path, capsys):
    """--write-features writes every training example, whatever the batches: the default --batch-size
    32 refused a 6-row file ("make no full step"); --dev, --epochs, --learning-rate, --seed (a run's)
    were dropped unsaid: each a usage error now, naming it."""
    train, path = write_examples(tmp_path / "train.csv", 6), tmp_path / "train.tfrecord"
    argv = ["finetune", "--model", str(TINY), "--train", str(train), "--max-seq-length", "16", "--write-features",
            str(path)]  # fmt: skip
    assert main(argv) == 0 and "train.tfrecord: 6 records" in capsys.readouterr().out
    path.unlink()
    for extra in (["--dev", str(train)], ["--epochs", "7"], ["--batch-size", "2"], ["--learning-rate", "5"],
                  ["--seed", "3"], ["--eval-every", "3"], ["--json"], ["--seeds", "2"]):  # fmt: skip
        assert main([*argv, *extra]) == 2
        err = capsys.readouterr().err
        assert f"--write-features does not read {extra[0]}: it writes --train's features and stops" in err, err
        assert not path.exists()


def test_a_sweep_runs_every_seed_and_rate_and_writes_the_table(tmp_path, capsys):
    train, dev = write_examples(tmp_path / "train.csv", 8), write_examples(tmp_path / "dev.csv", 6, seed=1)
    sweep = tmp_path / "sweep"
    argv = flags(train, sweep, "--dev", str(dev), "--epochs", "1", "--seeds", "2", "--learning-rates", "1e-3,1e-4")
    assert main(argv) == 0
    table = capsys.readouterr().out
    result = json.loads((sweep / "sweep.json").read_text())
    assert [(t["learning_rate"], t["seed"]) for t in result["trials"]] == [(1e-3, 12345), (1e-3, 12346),
                                                                           (1e-4, 12345), (1e-4, 12346)]  # fmt: skip
    for trial in result["trials"]:  # each trial's figure is its own run's best dev accuracy
        records = [json.loads(line) for line in (sweep / trial["run"] / "metrics.jsonl").read_text().splitlines()]
        assert trial["dev_accuracy"] == max(r["dev_accuracy"] for r in records if "dev_accuracy" in r)
    import statistics

    for summary in result["learning_rates"]:
        values = [t["dev_accuracy"] for t in result["trials"] if t["learning_rate"] == summary["learning_rate"]]
        assert summary["mean"] == statistics.fmean(values) and summary["std"] == statistics.stdev(values)
    assert "| learning rate | n | mean | std | best (dev accuracy) |" in table
    assert main(argv) == 1 and "already holds a sweep" in capsys.readouterr().err


def test_a_sweep_with_json_prints_its_record_as_one_line_of_json(tmp_path, capsys):
    """Issue r21 reports, items 1 and 2: --json with a sweep was ignored, stdout was sweep.md's
    Markdown (json.loads failed); and one seed per rate gave "std 0.0000". Now stdout is sweep.json's
    record with the folder, the best trial among them, and one figure's std is null (statistics.stdev
    refuses one value: it is undefined, not 0), the table's "n/a (1 trial)"."""
    import statistics

    train, dev = write_examples(tmp_path / "train.csv", 8), write_examples(tmp_path / "dev.csv", 6, seed=1)
    sweep = tmp_path / "sweep"
    argv = flags(train, sweep, "--dev", str(dev), "--epochs", "1", "--seeds", "1", "--learning-rates", "1e-3,1e-4",
                 "--json")  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1
    result = json.loads(out)
    assert result == {"output": str(sweep), **json.loads((sweep / "sweep.json").read_text())}
    assert [(t["learning_rate"], t["seed"]) for t in result["trials"]] == [(1e-3, 12345), (1e-4, 12345)]
    assert result["best"] == max(result["trials"], key=lambda trial: trial["dev_accuracy"])
    with pytest.raises(statistics.StatisticsError):
        statistics.stdev([result["trials"][0]["dev_accuracy"]])
    for summary, trial in zip(result["learning_rates"], result["trials"]):
        assert summary == {"learning_rate": trial["learning_rate"], "n": 1, "trials": 1, "mean": trial["dev_accuracy"],
                           "std": None, "best": trial["dev_accuracy"]}  # fmt: skip
        assert f"| {trial['learning_rate']:g} | 1 | {trial['dev_accuracy']:.4f} | n/a (1 trial) |" in \
            (sweep / "sweep.md").read_text()  # fmt: skip


def test_a_rates_figures_say_over_how_many_trials_they_are(tmp_path):
    """Issue r21 reports, item 2: with 2 of 3 trials diverged, the table said "mean 0.8000, std
    0.0000" of the one survivor, unsaid. The std of one figure is None (null), the n column says
    "1 of 3 (2 diverged)"; two figures have the sample std (n - 1), statistics.stdev's."""
    import statistics

    from minibert.training.sweep import summarize, table

    trials = [{"learning_rate": 1e-3, "seed": 1, "run": "a", "dev_f1": 0.8},
              {"learning_rate": 1e-3, "seed": 2, "run": "b", "dev_f1": None, "diverged": "step 2: not finite"},
              {"learning_rate": 1e-3, "seed": 3, "run": "c", "dev_f1": None, "undefined": True},
              {"learning_rate": 1e-5, "seed": 1, "run": "d", "dev_f1": 0.5},
              {"learning_rate": 1e-5, "seed": 2, "run": "e", "dev_f1": 0.7}]  # fmt: skip
    summary = [summarize(rate, [t["dev_f1"] for t in trials if t["learning_rate"] == rate]) for rate in (1e-3, 1e-5)]
    assert summary[0] == {"learning_rate": 1e-3, "n": 1, "trials": 3, "mean": 0.8, "std": None, "best": 0.8}
    assert summary[1]["n"] == 2 and summary[1]["std"] == statistics.stdev([0.5, 0.7])
    shown = table("f1", trials, summary)
    assert "| 0.001 | 1 of 3 (1 diverged, 1 undefined) | 0.8000 | n/a (1 trial) | 0.8000 |" in shown, shown
    assert f"| 1e-05 | 2 | 0.6000 | {statistics.stdev([0.5, 0.7]):.4f} | 0.7000 |" in shown, shown


def test_a_head_whose_config_names_no_labels_takes_the_tasks(tmp_path, capsys):
    """As Google's run_classifier.py checkpoints (bert_config.json has no labels): the head continues
    with the task's labels in their stated order; a head of another size is refused."""
    train = write_examples(tmp_path / "train.csv", 8)
    first = tmp_path / "first"
    assert main(flags(train, first, "--epochs", "1")) == 0
    config = json.loads((first / "config.json").read_text())
    for field in ("id2label", "label2id"):
        config.pop(field)
    (first / "config.json").write_text(json.dumps(config))
    second = tmp_path / "second"
    assert main(flags(train, second, "--epochs", "1", "--model", str(first), "--labels", "wet,dry")) == 0
    assert "continuing --model's classifier (2 labels: wet, dry)" in capsys.readouterr().err
    assert json.loads((second / "config.json").read_text())["id2label"] == {"0": "wet", "1": "dry"}
    three = tmp_path / "three.csv"
    three.write_text("text,label\nthe water,wet\nthe bank,dry\nparis,city\nlove,dry\n", encoding="utf-8")
    assert main(flags(three, tmp_path / "third", "--epochs", "1", "--model", str(first))) == 1
    assert "has a classifier with 2 outputs; the task needs 3" in capsys.readouterr().err


def test_transformers_placeholder_label_names_are_no_names(tmp_path, capsys):
    """A classifier transformers saved without label names (it writes LABEL_0, LABEL_1, LABEL_2, and its
    run_glue reads them as none: label2id == PretrainedConfig(num_labels=3).label2id) continues with
    the task's labels 0, 1, 2, as one whose config names none."""
    transformers = pytest.importorskip("transformers")
    start = tmp_path / "start"
    transformers.BertForSequenceClassification.from_pretrained(TINY, num_labels=3).save_pretrained(start)
    for name in ("vocab.txt", "tokenizer_config.json"):
        (start / name).write_bytes((TINY / name).read_bytes())
    saved = transformers.AutoConfig.from_pretrained(start)
    assert saved.label2id == transformers.PretrainedConfig(num_labels=3).label2id  # the names run_glue ignores
    train = tmp_path / "train.csv"
    train.write_text("text,label\nthe water,0\nthe bank,1\nparis,2\nlove,1\n", encoding="utf-8")
    run = tmp_path / "run"
    assert main(flags(train, run, "--epochs", "1", "--model", str(start))) == 0
    assert "continuing --model's classifier (3 labels: 0, 1, 2)" in capsys.readouterr().err
    assert json.loads((run / "config.json").read_text())["id2label"] == {"0": "0", "1": "1", "2": "2"}
