"""``minibert vocab``: learn a WordPiece vocabulary from text files (tokenizer/wordpiece_trainer.py).

    minibert vocab --input corpus.txt --output my-bert --vocab-size 30000
    minibert vocab --input a.txt b.txt --output my-cased-bert --cased --min-frequency 5

DIR gets ``vocab.txt`` and ``tokenizer_config.json``: ``BertTokenizer.from_pretrained(DIR)`` and
transformers' ``AutoTokenizer.from_pretrained(DIR)`` load it. The defaults are those of
``tokenizers``' ``BertWordPieceTokenizer.train``.
"""

from __future__ import annotations

import argparse
import sys
import time

DEFAULT_SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # = wordpiece_trainer's (a test checks)
FRAMING_TOKENS = ("[UNK]", "[CLS]", "[SEP]")  # what a BERT tokenizer cannot load without


def add_parser(commands) -> None:
    """Add the ``vocab`` command to the ``minibert`` parser's sub-commands."""
    vocab = commands.add_parser(
        "vocab", help="learn a WordPiece vocabulary from text files (as tokenizers' BertWordPieceTokenizer.train)"
    )
    vocab.add_argument("--input", nargs="+", required=True, metavar="FILE", help="UTF-8 text files")
    vocab.add_argument("--output", required=True, metavar="DIR",
                       help="an existing directory: gets vocab.txt and tokenizer_config.json")  # fmt: skip
    vocab.add_argument("--vocab-size", type=_at_least(1), default=30_000, metavar="N",
                       help="pieces in the vocabulary, special tokens included (default 30000)")  # fmt: skip
    vocab.add_argument("--min-frequency", type=_at_least(0), default=2, metavar="N",
                       help="stop merging when the most frequent pair occurs fewer times (default 2)")  # fmt: skip
    vocab.add_argument("--limit-alphabet", type=_at_least(0), default=1000, metavar="N",
                       help="keep only the N most frequent characters (default 1000)")  # fmt: skip
    vocab.add_argument("--cased", action="store_true", help="keep case and accents (default: lowercase, strip accents)")
    vocab.add_argument("--special-tokens", nargs="+", default=DEFAULT_SPECIAL_TOKENS, metavar="TOKEN",
                       help="the first ids, in this order (default: [PAD] [UNK] [CLS] [SEP] [MASK])")  # fmt: skip
    vocab.set_defaults(run=cmd_vocab)


def _at_least(low: int):
    def parse(value: str) -> int:
        number = int(value) if value.isdigit() else -1
        if number < low:
            raise argparse.ArgumentTypeError(f"must be an integer of at least {low}, got {value}")
        return number

    return parse


def cmd_vocab(args) -> None:
    from pathlib import Path

    from ..tokenizer.wordpiece_trainer import save_vocabulary, train_wordpiece

    missing = [token for token in FRAMING_TOKENS if token not in args.special_tokens]
    if missing:
        raise ValueError(f"--special-tokens must include {' '.join(missing)}: a BERT tokenizer frames every text "
                         "with them")  # fmt: skip
    output = Path(args.output)
    if not output.is_dir():  # checked before the work, not after
        kind = "is not a directory" if output.exists() else "does not exist"
        raise FileNotFoundError(f"output directory {output} {kind}: create it first")
    progress = _ProgressLine() if sys.stderr.isatty() else None
    try:
        pieces = train_wordpiece(args.input, args.vocab_size, min_frequency=args.min_frequency,
                                 limit_alphabet=args.limit_alphabet, lowercase=not args.cased,
                                 special_tokens=args.special_tokens, progress=progress)  # fmt: skip
    finally:
        if progress is not None:
            progress.close()
    vocab_file, config_file = save_vocabulary(output, pieces, lowercase=not args.cased)
    print(f"{len(pieces):,} pieces: {vocab_file}, {config_file}")


class _ProgressLine:
    """One line on stderr, rewritten in place at most every half second (only on a terminal)."""

    def __init__(self):
        self._last = 0.0
        self._shown = False

    def __call__(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last >= 0.5:
            self._last = now
            self._shown = True
            print(f"\rminibert vocab: {message}\033[K", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._shown:
            print(file=sys.stderr)
