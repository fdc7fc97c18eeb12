"""Fine-tune BERT to tell which language a sentence is in: docs/finetuning.md's lesson from Python.

The same run as the lesson's ``minibert finetune`` command, through its Python API
(``minibert.training``: ``FinetuneOptions``, ``finetune``): the lesson's data, Django's translated
admin messages as minibert ships them (``minibert example-data languages``), goes to
``OUTPUT-data/train.csv`` and ``dev.csv``, then every weight of all-MiniLM-L6-v2 (or ``--model``)
trains under a new classifier by Google's step, and the dev accuracy is printed.

    python scripts/finetune_classifier.py --output languages-run
    minibert classify --model languages-run "Ce champ est obligatoire."
    minibert plot languages-run                      # languages-run/loss.png

scripts/classify_frozen.py trains a classifier on frozen features instead.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> None:
    from needs import default_model

    from minibert.apps.example_data_command import write_example_data
    from minibert.training import FinetuneOptions, finetune

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a BERT directory or hub id (default: the bundled MiniLM)")
    parser.add_argument("--output", default="languages-run", help="the run folder (new); its data beside it")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--per-language", type=int, help="train on the first N×4/5 sentences of each language and "
                        "check on N/5 (default: all the lesson's, about 114 and 29)")  # fmt: skip
    args = parser.parse_args(argv)
    data = Path(f"{args.output}-data")
    write_example_data("languages", data)
    if args.per_language:
        cut_lesson(data, args.per_language)
    options = FinetuneOptions(model=args.model or default_model(), train=f"{data}/train.csv", dev=f"{data}/dev.csv",
                              output=args.output, text_column="sentence", label_column="language",
                              epochs=args.epochs, batch_size=16, learning_rate=1e-4, max_seq_length=64)  # fmt: skip
    run = finetune(options)
    last = json.loads((run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    print(f"{run}: dev accuracy {last['dev_accuracy']:.3f} after {last['step']} steps (chance {1 / 6:.3f})")


def cut_lesson(data: Path, per_language: int, languages: list[str] | None = None) -> Path:
    """Cut the lesson's train.csv and dev.csv in ``data`` (header, then rows of sentence,language) to
    the first ``per_language`` × 4/5 training and × 1/5 dev sentences of each language (of
    ``languages`` only, when given), in the files' order."""
    for name, share in (("train.csv", per_language * 4 // 5), ("dev.csv", per_language // 5)):
        with (data / name).open(encoding="utf-8", newline="") as handle:
            header, *rows = list(csv.reader(handle))
        kept, counts = [], Counter()
        for row in rows:
            if (languages is None or row[1] in languages) and counts[row[1]] < share:
                kept.append(row)
                counts[row[1]] += 1
        with (data / name).open("w", encoding="utf-8", newline="") as handle:
            csv.writer(handle).writerows([header, *kept])
    return data


if __name__ == "__main__":
    main()
