"""Fine-tune BERT to tell which language a sentence is in: docs/finetuning.md's lesson from Python.

The same run as the lesson's ``minibert finetune`` command, through its Python API
(``minibert.training``: ``FinetuneOptions``, ``finetune``): scripts/language_examples.py
writes Django's translated admin messages to ``OUTPUT-data/train.csv`` and ``dev.csv``, then every
weight of all-MiniLM-L6-v2 (or ``--model``) trains under a new classifier by Google's step, and
the dev accuracy is printed. Needs django (the dev extra installs it).

    python scripts/finetune_classifier.py --output languages-run
    minibert classify --model languages-run "Ce champ est obligatoire."
    minibert plot languages-run                      # languages-run/loss.png

scripts/classify_frozen.py trains a classifier on frozen features instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> None:
    import language_examples
    from needs import default_model

    from minibert.training import FinetuneOptions, finetune

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a BERT directory or hub id (default: the bundled MiniLM)")
    parser.add_argument("--output", default="languages-run", help="the run folder (new); its data beside it")
    parser.add_argument("--per-language", type=int, default=150, help="sentences per language")
    parser.add_argument("--epochs", type=float, default=1.0)
    args = parser.parse_args(argv)
    data = f"{args.output}-data"
    language_examples.main(["--output", data, "--per-language", str(args.per_language)])
    options = FinetuneOptions(model=args.model or default_model(), train=f"{data}/train.csv", dev=f"{data}/dev.csv",
                              output=args.output, text_column="sentence", label_column="language",
                              epochs=args.epochs, batch_size=16, learning_rate=1e-4, max_seq_length=64)  # fmt: skip
    run = finetune(options)
    last = json.loads((run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    print(f"{run}: dev accuracy {last['dev_accuracy']:.3f} after {last['step']} steps (chance {1 / 6:.3f})")


if __name__ == "__main__":
    main()
