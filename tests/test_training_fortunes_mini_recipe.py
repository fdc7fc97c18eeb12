"""The bundled English model ``minibert/fortunes-mini`` is what its recipe makes.

The recipe is the bash block of docs/pretraining.md §4 (Debian's fortunes → ``minibert vocab`` →
``minibert pretraining-data`` → ``minibert pretrain`` → scripts/bundle_run.py). This test runs
that block as written, in a fresh folder, and compares the ``training.json`` it makes with the one
shipped beside the weights (src/minibert/bundled/fortunes-mini/):

- the text, the vocabulary and the instances: the same bytes (SHA-256). They are made by pure
  Python from the same package files; a different version of Debian's ``fortunes`` is reported as
  such;
- the first step's losses: the same random weights (seed 12345) and the same batch, computed in
  float32 — equal up to float32 rounding, which a different CPU's matrix kernels change by ~1e-6
  relative at these magnitudes (losses of ~9 nats summed over ~320 positions); the bound is 1e-4;
- the end of the run: on a machine like the one that made it (CPU, its flags, threads, torch), the
  float32 and bfloat16 weights are the same bytes (every step is deterministic; the resume tests
  show it). Elsewhere the 2,000 steps' float rounding leads to another trajectory of the same
  training, so only the loss is compared: the mean MLM loss of the last 100 steps within
  4·√2·σ/√100 of the shipped one, σ the shipped run's spread of that loss over those steps (two
  means of 100 noisy steps, each with standard error σ/10, their difference within 4 standard
  errors);
- the model it made guesses like the shipped one: for a few probes, the shipped model's best piece
  is among the remade model's five best.

It takes the recipe's time (~15 minutes on 2 cores): slow.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest

import minibert
from helpers import child_environment

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "src" / "minibert" / "bundled" / "fortunes-mini"
FORTUNES = Path("/usr/share/games/fortunes")
PROBES = ["i love [MASK].", "what is [MASK] meaning of life?", "i want [MASK] go home."]


def recipe_block() -> str:
    """The bash block of docs/pretraining.md §4, as a user copies it."""
    page = (ROOT / "docs" / "pretraining.md").read_text(encoding="utf-8")
    section = page.split("\n## 4.", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)


def test_the_recipe_block_names_the_bundled_models_settings():
    """Fast: the doc's recipe and the shipped training.json agree on every setting (a doc edited
    without re-training, or a model re-trained without the doc, fails here)."""
    block = recipe_block().replace("\\\n", " ")
    shipped = json.loads((BUNDLED / "training.json").read_text(encoding="utf-8"))
    settings = shipped["settings"]
    flags = {"--steps": settings["steps"], "--batch-size": settings["batch_size"],
             "--learning-rate": settings["learning_rate"], "--warmup-steps": settings["warmup_steps"]}  # fmt: skip
    for flag, value in flags.items():
        written = re.search(rf"{flag} (\S+)", block)
        assert written and float(written.group(1)) == float(value), (flag, value)
    config = json.loads(re.search(r"echo '(\{.*?\})' > config.json", block, flags=re.S).group(1))
    assert {key: shipped["config"][key] for key in config} == config


@pytest.mark.long  # 2,500 steps: 11 minutes on an AVX-512 Xeon, several times that on an AVX2-only EPYC
def test_the_recipe_makes_the_bundled_model(tmp_path):
    if not FORTUNES.is_dir():
        pytest.fail("the recipe's text is Debian's fortunes: apt-get install fortunes")
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")
    environment = child_environment()
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", recipe_block()], cwd=tmp_path, env=environment,
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    made_folder = next(tmp_path.glob("*/fortunes-mini"))
    made = json.loads((made_folder / "training.json").read_text(encoding="utf-8"))
    shipped = json.loads((BUNDLED / "training.json").read_text(encoding="utf-8"))
    print(f"\nrecipe: {made['metrics']['seconds']:.0f} s of steps on {made['machine']['cpu']} "
          f"(shipped: {shipped['metrics']['seconds']:.0f} s on {shipped['machine']['cpu']})")  # fmt: skip

    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "fortunes"], capture_output=True, text=True)
    assert made["sha256"]["text"] == shipped["sha256"]["text"], (
        f"the fortunes text differs from the recipe's: Debian's fortunes is {version.stdout!r} here"
    )
    for name in ("vocab.txt", "instances"):
        assert made["sha256"][name] == shipped["sha256"][name], name

    for name, value in shipped["metrics"]["first_step"].items():
        assert math.isclose(made["metrics"]["first_step"][name], value, rel_tol=1e-4, abs_tol=1e-6), name

    if made["machine"] == shipped["machine"]:
        assert made["sha256"]["float32 weights"] == shipped["sha256"]["float32 weights"]
        assert made["sha256"]["bfloat16 weights"] == shipped["sha256"]["bfloat16 weights"]
    sigma = shipped["metrics"]["last_100_steps_mlm_loss_stdev"]
    made_loss = made["metrics"]["last_100_steps"]["mlm_loss"]
    shipped_loss = shipped["metrics"]["last_100_steps"]["mlm_loss"]
    print(f"mean MLM loss of the last 100 steps: {made_loss:.4f} (shipped {shipped_loss:.4f}, σ {sigma:.3f})")
    assert abs(made_loss - shipped_loss) <= 4 * math.sqrt(2) * sigma / 10

    for probe in PROBES:  # the shipped model's best guess is among the remade one's five best
        made_best = [answer["token_str"] for answer in minibert.fill_mask(probe, model=str(made_folder))]
        shipped_best = minibert.fill_mask(probe, model=str(BUNDLED))[0]["token_str"]
        assert shipped_best in made_best, (probe, made_best, shipped_best)
