"""Per-layer comparison of minibert with transformers for any BERT checkpoint.

    python scripts/compare_hf.py                                  # the bundled all-MiniLM-L6-v2
    python scripts/compare_hf.py --model google-bert/bert-base-uncased
    python scripts/compare_hf.py --model ./my-bert --text "Some text." --text "Another."

Prints the max |Δ| of the embeddings, every layer, the pooler, every attention map, and the
logits of the checkpoint's heads (masked-LM, next-sentence, a classifier, QA, multiple choice).
Exits 1 above --tolerance, or on a NaN.
"""

from __future__ import annotations

import argparse
import sys

from needs import default_model

from minibert.apps.verify import compare_with_transformers, format_table, verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="hub id or local directory (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--text", action="append", help="a text to compare on (repeatable)")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args()
    model = args.model or default_model()
    rows = compare_with_transformers(model, args.text)
    print(f"minibert vs transformers on {model}\n")
    print(format_table(rows, args.tolerance))
    summary, failure = verdict(rows, args.tolerance)  # a NaN fails too
    print(f"\n{summary}")
    return 0 if failure is None else 1


if __name__ == "__main__":
    sys.exit(main())
