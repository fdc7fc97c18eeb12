"""``minibert vocab``: learn a WordPiece vocabulary from text files (tokenizer/wordpiece_trainer.py).

    minibert vocab --input corpus.txt --output my-bert --vocab-size 30000
    minibert vocab --input a.txt b.txt --output my-cased-bert --cased --min-frequency 5

DIR gets ``vocab.txt`` and ``tokenizer_config.json``: ``BertTokenizer.from_pretrained(DIR)`` and
transformers' ``AutoTokenizer.from_pretrained(DIR)`` load it. One line on stderr says what was
written; stdout is not used. The defaults are those of
``tokenizers``' ``BertWordPieceTokenizer.train``.
"""

from __future__ import annotations

import os
import sys
import time

from .flag_types import output_name, positive_int, whole_number

FRAMING_TOKENS = ("[UNK]", "[CLS]", "[SEP]")  # what a BERT tokenizer cannot load without


def add_parser(commands, parents: list) -> None:
    """Add the ``vocab`` command to the ``minibert`` parser's sub-commands; ``parents``: the process
    flags every command takes (--debug)."""
    vocab = commands.add_parser(
        "vocab",
        parents=parents,
        help="learn a WordPiece vocabulary from text files (as tokenizers' BertWordPieceTokenizer.train)",
    )
    # action="extend": `--input a.txt --input b.txt` reads both (argparse's default keeps the last list only)
    vocab.add_argument("--input", nargs="+", action="extend", required=True, metavar="FILE",
                       help="UTF-8 text files (all of them, also where --input is given again)")  # fmt: skip
    vocab.add_argument("--output", required=True, metavar="DIR", type=output_name,
                       help="an existing directory: gets vocab.txt and tokenizer_config.json")  # fmt: skip
    vocab.add_argument("--vocab-size", type=positive_int, default=30_000, metavar="N",
                       help="pieces in the vocabulary, special tokens included (default 30000)")  # fmt: skip
    vocab.add_argument("--min-frequency", type=whole_number(0), default=2, metavar="N",
                       help="stop merging when the most frequent pair occurs fewer times (default 2)")  # fmt: skip
    vocab.add_argument("--limit-alphabet", type=whole_number(0), default=1000, metavar="N",
                       help="keep only the N most frequent characters (default 1000)")  # fmt: skip
    vocab.add_argument("--cased", action="store_true", help="keep case and accents (default: lowercase, strip accents)")
    # (The default is the trainer's DEFAULT_SPECIAL_TOKENS, read when the command runs: importing the
    # tokenizer to build the parser would slow every command. tests/test_tokenizer_wordpiece_trainer.py
    # checks this help.)
    vocab.add_argument("--special-tokens", nargs="+", action="extend", default=None, metavar="TOKEN",
                       help="the first ids, in this order (default: [PAD] [UNK] [CLS] [SEP] [MASK]); each is "
                            "saved as a special token, never split (as tokenizers' trainer adds them); a role "
                            "([PAD], [MASK]) left out is saved as none, so that no library adds it")  # fmt: skip
    vocab.set_defaults(run=cmd_vocab)


def cmd_vocab(args) -> None:
    from pathlib import Path

    from ..errors import InputFileError
    from ..formats.atomic_files import refuse_what_is_not_a_file
    from ..formats.line_files import same_file
    from ..tokenizer.wordpiece_trainer import (
        DEFAULT_SPECIAL_TOKENS,
        VOCABULARY_FILES,
        check_vocabulary_folder,
        save_vocabulary,
        train_wordpiece,
    )

    special_tokens = list(DEFAULT_SPECIAL_TOKENS if args.special_tokens is None else args.special_tokens)
    _check_flags(args.vocab_size, special_tokens)
    output = Path(args.output)
    check_vocabulary_folder(output)  # before the work, not after (save_vocabulary checks it so too)
    for name in VOCABULARY_FILES:  # what the learning will write, checked before it
        written = output / name
        refuse_what_is_not_a_file(written)
        for source in args.input:
            if same_file(Path(source), written):
                also = "" if os.fspath(source) == os.fspath(written) else f" (as {written})"
                raise InputFileError(f"--output {output} would overwrite the input file {source}{also}: move the "
                                     "text out of that directory, or write the vocabulary elsewhere")  # fmt: skip
    progress = _ProgressLine() if sys.stderr.isatty() else None
    try:
        pieces = train_wordpiece(args.input, args.vocab_size, min_frequency=args.min_frequency,
                                 limit_alphabet=args.limit_alphabet, lowercase=not args.cased,
                                 special_tokens=special_tokens, progress=progress)  # fmt: skip
    finally:
        if progress is not None:
            progress.close()
    vocab_file, config_file = save_vocabulary(output, pieces, lowercase=not args.cased, special_tokens=special_tokens)
    # On stderr, as pretraining-data says its summary: the results are the files, so a closed stdout
    # (`>&-`) or a full one (`> /dev/full`) must not turn a run that wrote them into a failure.
    print(f"minibert: {len(pieces):,} pieces: {vocab_file}, {config_file}", file=sys.stderr)


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


def _check_flags(vocab_size: int, special_tokens: list[str]) -> None:
    """The flags' values that no corpus changes, refused as usage errors naming the flag (exit 2);
    the trainer's own checks would say them in its keywords' names (exit 1)."""
    from .commands import CommandError

    missing = [token for token in FRAMING_TOKENS if token not in special_tokens]
    if missing:
        raise CommandError(f"--special-tokens must include {' '.join(missing)}: a BERT tokenizer frames every text "
                           "with them")  # fmt: skip
    for token in special_tokens:
        if not token or token != "".join(token.split()):
            raise CommandError(f"--special-tokens: each must be a non-empty string without whitespace, got {token!r}")
    if len(set(special_tokens)) > vocab_size:
        raise CommandError(f"--vocab-size {vocab_size:,} is below the {len(set(special_tokens))} special tokens "
                           "(--special-tokens), which come first in every vocabulary")  # fmt: skip
