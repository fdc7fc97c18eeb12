"""A `minibert pretrain` run → the bundled model's folder: the last step of minibert/fortunes-mini's
recipe (docs/pretraining.md §4).

    python scripts/bundle_run.py RUN --text TEXT --data INSTANCES    # into src/minibert/bundled/fortunes-mini/
    python scripts/bundle_run.py RUN --text TEXT --data INSTANCES --output DIR

Writes five of the folder's six files (its README.md, with the licence, is kept):

* ``config.json`` and ``vocab.txt``, copied as they are;
* ``model.safetensors`` with the same tensor names, every floating-point tensor rounded to bfloat16
  (half the bytes; minibert loads it into float32, transformers 5 as bfloat16 unless dtype=float32);
* ``tokenizer_config.json`` with ``model_max_length`` set to the model's positions (a run writes
  512, BERT's usual; the toy has 64, so ``fill_mask``'s truncation cuts a text where the model can
  take it);
* ``training.json``, the record of how it was made, which tests/test_training_fortunes_mini_recipe.py compares
  a new run of the recipe with: the SHA-256 of the text, of ``vocab.txt``, of the instances and of
  the run's float32 and the folder's bfloat16 weights; the run's settings (training_state.pt); the
  first step's figures and the means of the last 100 steps (metrics.jsonl); the seconds the steps
  took; the machine (CPU, its flags, threads, torch).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "src" / "minibert" / "bundled" / "fortunes-mini"
COPIED = ("config.json", "vocab.txt")
sys.path.insert(0, str(ROOT / "src"))  # this checkout's minibert, as the recipe runs it

FIGURES = ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy")
LAST = 100  # the steps whose means summarise the end of the run


def bundle(run: Path, output: Path) -> None:
    for name in (*COPIED, "model.safetensors", "tokenizer_config.json"):
        if not (run / name).is_file():
            raise SystemExit(f"bundle_run.py: {run} has no {name}: pass a `minibert pretrain` run directory")
    output.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        shutil.copyfile(run / name, output / name)
    with safe_open(run / "model.safetensors", "pt") as weights:
        metadata = weights.metadata()
    state = load_file(run / "model.safetensors")
    halved = {name: tensor.to(torch.bfloat16) if tensor.is_floating_point() else tensor
              for name, tensor in state.items()}  # fmt: skip
    save_file(halved, output / "model.safetensors", metadata=metadata)
    (output / "model.safetensors").chmod(0o644)  # package data: readable by every user
    positions = json.loads((run / "config.json").read_text())["max_position_embeddings"]
    settings = json.loads((run / "tokenizer_config.json").read_text())
    settings["model_max_length"] = positions
    (output / "tokenizer_config.json").write_text(json.dumps(settings, indent=2) + "\n")
    size = (output / "model.safetensors").stat().st_size / 1e6
    print(f"wrote {output}: {', '.join(sorted(p.name for p in output.iterdir()))} (weights {size:.1f} MB in bf16)")


def machine() -> dict:
    from minibert.speed.cpu import cpu_flags, cpu_name

    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16")
    return {"cpu": cpu_name(), "flags": [flag for flag in wanted if flag in cpu_flags()],
            "threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version()}  # fmt: skip


def summary(metrics_file: Path) -> dict:
    """The first step's figures, the means (and the MLM loss's spread) of the last ``LAST`` steps."""
    records = [json.loads(line) for line in metrics_file.read_text(encoding="utf-8").splitlines()]
    last = records[-LAST:]
    return {
        "steps": len(records),
        "first_step": {name: records[0][name] for name in FIGURES},
        f"last_{LAST}_steps": {name: statistics.fmean(record[name] for record in last) for name in FIGURES},
        f"last_{LAST}_steps_mlm_loss_stdev": statistics.stdev(record["mlm_loss"] for record in last),
        "seconds": sum(record["seconds"] for record in records),
    }


def write_record(run: Path, output: Path, text: Path, data: Path) -> None:
    """``training.json``: how the folder's weights were made (see the module's docstring)."""
    from minibert.apps.resumable import file_digest as sha256

    state = torch.load(run / "training_state.pt", map_location="cpu", weights_only=False)
    record = {
        "sha256": {"text": sha256(text), "vocab.txt": sha256(run / "vocab.txt"), "instances": sha256(data),
                   "float32 weights": sha256(run / "model.safetensors"),
                   "bfloat16 weights": sha256(output / "model.safetensors")},
        "settings": state["settings"],
        "config": json.loads((run / "config.json").read_text(encoding="utf-8")),
        "metrics": summary(run / "metrics.jsonl"),
        "machine": machine(),
    }  # fmt: skip
    (output / "training.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="the run directory of `minibert pretrain`")
    parser.add_argument("--text", type=Path, required=True, help="the text the vocabulary and instances came from")
    parser.add_argument("--data", type=Path, required=True, help="the instances (TFRecord) the run trained on")
    parser.add_argument("--output", type=Path, default=BUNDLE, help=f"default {BUNDLE}")
    args = parser.parse_args()
    bundle(args.run, args.output)
    write_record(args.run, args.output, args.text, args.data)


if __name__ == "__main__":
    main()
