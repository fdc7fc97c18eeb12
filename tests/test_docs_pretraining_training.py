"""docs/pretraining.md's lesson (its first section) runs as written, at small sizes: every fenced
bash, python and json block of the section, in order, in a fresh folder, chained as a user runs
them: Debian's fortunes → ``minibert vocab`` → ``minibert pretraining-data`` → ``minibert pretrain``
→ ``fill_mask`` and ``minibert plot``. Only the sizes change, through the commands' own flags (fewer steps, smaller
batches, 64-piece instances and the repo's tiny checkpoints for the released ones).

Two runs of it. Both run the blocks made only of ``minibert`` commands in this process
(``cli.main``, what the ``minibert`` script calls: a subprocess would spend seconds importing torch
for each, and bash adds nothing to a line of one command and its flags) and every other block in
bash. The default suite's reads two of the recipe's eighteen fortune files (the ``for`` loop's
list: about 1,700 instances instead of 15,532; 2,000 pieces, the config's vocab_size too) and leaves
out the torchrun block (two processes importing torch: half a minute; tests/test_training_pretrain_parallel.py
runs torchrun); the slow one runs the whole page as written: all eighteen files, 16,000 pieces,
and torchrun in bash.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import child_environment, run_minibert
from minibert.formats.tfrecord import read_examples

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "pretraining.md").read_text(encoding="utf-8")
FORTUNES = Path("/usr/share/games/fortunes")
SMALL_SIZES = [(r"--steps \d+", "--steps 2"), (r"--batch-size \d+", "--batch-size 4"),
               (r"--warmup-steps \d+", "--warmup-steps 1"), (r"--save-every \d+", "--save-every 1"),
               (r"--max-seq-length 128", "--max-seq-length 64")]  # the tiny checkpoints' positions  # fmt: skip
# The default suite's corpus: two of the files, and a vocabulary their merges fill (config.json's too).
FEW_FILES = [(r"for name in [^;]*;", "for name in fortunes wisdom;"), (r"--vocab-size 16000", "--vocab-size 2000"),
             (r'"vocab_size": 16000', '"vocab_size": 2000')]  # fmt: skip


def section_blocks() -> list[tuple[str, str]]:
    section = DOC.split("\n## The lesson: ", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(bash|python|json)\n(.*?)```", section, flags=re.S)


def small(block: str, checkpoints: dict[str, str], few_files: bool) -> str:
    for pattern, replacement in SMALL_SIZES + (FEW_FILES if few_files else []):
        block = re.sub(pattern, replacement, block, flags=re.S)
    for name, folder in checkpoints.items():
        block = block.replace(name, folder)
    return block


def tiny_checkpoints(directory: Path) -> dict[str, str]:
    """The released checkpoints of the page → copies of the repo's tiny ones (64 positions, vocab 111).
    Their vocab.txt lists some pieces twice ("a" ... "z" again after "[unused0]": the tests of Google's
    two load_vocab readers need that); pretraining-data refuses such a vocabulary, so in the copies
    each repeat is an unused slot of its own, at the same id."""
    copies = {}
    for name, source in (("google-bert/bert-base-uncased", "tiny_hub"), ("uncased_L-12_H-768_A-12",
                                                                        "uncased_L-2_H-32_A-2")):  # fmt: skip
        copy = shutil.copytree(ROOT / "tests" / "data" / source, directory / source)
        lines = (copy / "vocab.txt").read_text(encoding="utf-8").splitlines()
        seen = set()
        for index, piece in enumerate(lines):
            lines[index] = piece if piece not in seen else f"[unused{index}]"
            seen.add(piece)
        assert len(set(lines)) == len(lines) == 111
        (copy / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        copies[name] = str(copy)
    return copies


def only_minibert_commands(block: str) -> list[list[str]] | None:
    """The block's commands when each is a ``minibert`` command alone on its (continued) line."""
    lines = [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    return lines if all(argv[0] == "minibert" for argv in lines) else None


def run_bash(block: str) -> subprocess.CompletedProcess:
    """The block in bash, stopping at the first failure; ``minibert`` and ``torchrun`` of this Python."""
    torchrun = shutil.which("torchrun") or "torchrun"
    prelude = (f'minibert() {{ "{sys.executable}" -m minibert "$@"; }}\n'
               f'torchrun() {{ OMP_NUM_THREADS=1 "{torchrun}" "$@"; }}\nset -eo pipefail\n')  # fmt: skip
    environment = child_environment()
    return subprocess.run(["bash", "-c", prelude + block], env=environment, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def my_domain_text(path: Path) -> None:
    """The reader's own text for the continued pre-training example (one sentence per line, a blank
    line between documents): fortunes of another file than the recipe's."""
    fortunes = (FORTUNES / "goedel").read_text(encoding="utf-8", errors="replace").split("\n%\n")
    path.write_text("\n\n".join(fortune.strip("%\n") for fortune in fortunes) + "\n", encoding="utf-8")


@pytest.mark.skipif(not FORTUNES.exists(), reason="apt-get install fortunes")
@pytest.mark.parametrize("whole", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["two-files", "as-written"])
def test_section_3_runs_as_written(tmp_path, monkeypatch, capsys, whole):
    monkeypatch.chdir(tmp_path)
    my_domain_text(tmp_path / "my_domain.txt")
    checkpoints = tiny_checkpoints(tmp_path / "released")
    blocks = section_blocks()
    kinds = [kind for kind, _ in blocks]
    assert kinds.count("bash") >= 6 and kinds.count("python") >= 2 and kinds[0] == "bash", kinds
    ran = []
    for kind, block in blocks:
        if kind == "json":
            Path("small_config.json").write_text(small(block, checkpoints, few_files=not whole))
        elif kind == "python":
            exec(compile(block, "docs/pretraining.md", "exec"), {})  # noqa: S102  (our own docs)
        else:
            block = small(block, checkpoints, few_files=not whole)
            if block.startswith("torchrun") and not whole:
                continue  # two processes starting torch: half a minute (test_training_pretrain_parallel runs torchrun)
            in_process = only_minibert_commands(block)
            for argv in in_process or []:
                result = run_minibert(*argv[1:])
                assert result.returncode == 0, (argv, result.stderr[-2000:])
            if in_process is None:
                result = run_bash(block)
                assert result.returncode == 0, (block, result.stderr[-2000:])
            ran += re.findall(r"^(minibert \S+|torchrun)", block, flags=re.M)
        if kind == "bash" and len(ran) == 2:  # the data block: sections 1 and 2's commands made these
            vocab = (tmp_path / "fortunes" / "vocab.txt").read_text().splitlines()
            instances = list(read_examples(tmp_path / "fortunes" / "instances.tfrecord"))
            print(f"\n{len(vocab)} pieces, {len(instances)} instances")
            assert len(vocab) == (16000 if whole else 2000)
            assert len(instances) > (10_000 if whole else 1_000)
            assert instances[0]["input_ids"].shape == (64,)
    assert ran[:2] == ["minibert vocab", "minibert pretraining-data"], ran
    assert ran.count("minibert pretrain") == 4 and "minibert plot" in ran and ("torchrun" in ran) == whole, ran
    metrics = [json.loads(line) for line in (tmp_path / "fortunes" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in metrics] == [1, 2]  # the resumed run: each step once
    assert (tmp_path / "fortunes" / "run" / "loss.png").exists()
    for run in ("my-bert", "my-bert-from-tf", *["fortunes/run-2"] * whole):
        assert (tmp_path / run / "model.safetensors").exists(), run
    printed = capsys.readouterr().out
    assert printed.count("'token'") >= 6  # the fill_mask answers, before and after
