"""Real labelled text, offline: which language is a sentence in? Writes train.csv and dev.csv.

The sentences are Django's admin messages as its translators wrote them (French, German, Spanish,
Italian, Portuguese, Dutch; the same corpus as scripts/classify_frozen.py), one per row with its
language: columns ``sentence`` and ``language``, ready for ``minibert finetune``. This script made
the set minibert ships for the fine-tuning lesson (``minibert example-data languages``), from
Django 5.2.19's catalogues:

    python scripts/language_examples.py --output src/minibert/bundled/examples/languages --per-language 150

Four fifths of each language's sentences train, one fifth is the dev set. Needs django (the dev
extra installs it) and the clone's tests/ folder; the lesson itself needs neither.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from classify_frozen import LANGUAGES, load_dataset  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, help="the folder for train.csv and dev.csv")
    parser.add_argument("--per-language", type=int, default=150, help="sentences per language (default 150)")
    parser.add_argument("--languages", default=",".join(LANGUAGES), help="a subset, e.g. fr,de,nl")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    texts, labels = load_dataset(args.per_language, seed=args.seed)
    chosen = args.languages.split(",")
    rows = [(text, LANGUAGES[label]) for text, label in zip(texts, labels)
            if LANGUAGES[label] in chosen and "Project-Id-Version" not in text]  # fmt: skip
    random.Random(args.seed).shuffle(rows)
    cut = len(rows) * 4 // 5
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    for name, part in (("train.csv", rows[:cut]), ("dev.csv", rows[cut:])):
        with open(output / name, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["sentence", "language"])
            writer.writerows(part)
    print(f"{output / 'train.csv'}: {cut} sentences; {output / 'dev.csv'}: {len(rows) - cut} ({', '.join(chosen)})")


if __name__ == "__main__":
    main()
