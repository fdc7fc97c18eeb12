"""``minibert explore``: one text through one model, written as a page that shows every head,
every layer's guesses and how the hidden states compare (the explorer room, explorer/).

    minibert explore "Paris is the [MASK] of France." --model bert-base-uncased --output paris.html
    minibert explore "The river bank." "The bank account." --model DIR --output bank.html --open

The explorer is imported when the command runs, not when the parser is built.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import webbrowser
from pathlib import Path

from .commands import CommandError, CommandFailed, device_of, flag_error
from .flag_types import output_name, whole_number

# [CLS] A [SEP] with one piece of A; a pair: [CLS] A [SEP] B [SEP] with one piece of each (the same as
# explorer/data.py's, which explore() checks; that module imports torch, so not imported to build the parser).
SHORTEST = {"text": 3, "pair": 5}
# The most guesses a page keeps per position and layer: explorer/data.py's MAX_TOP_K (the page grows with them).
MAX_TOP_K = 100


def attention_bits(text: str) -> int:
    """An argparse type for --attention-bits: 8 or 16 (what explore() takes).

    >>> attention_bits("12")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be 8 or 16, got 12
    """
    if text.strip() not in ("8", "16"):
        raise argparse.ArgumentTypeError(f"must be 8 or 16, got {text}")
    return int(text)


def add_parser(commands, parents: list) -> None:
    explore = commands.add_parser(
        "explore",
        parents=parents,
        help="an offline HTML page of what BERT computes for a text: every head, every layer's guesses",
        description="Write one self-contained HTML page (no network needed to open it) showing the tokens, every "
        "attention head, what each head attends to, the masked-LM head's guesses at every layer (logit lens) "
        "and the hidden states' similarities.",
    )
    explore.add_argument("text", help="the text to explore (put [MASK] where the model should guess)")
    explore.add_argument("pair", nargs="?", help="a second text (sentence B of a pair)")
    explore.add_argument("--output", "-o", required=True, type=output_name,
                         help="the page to write (.html); replaced atomically")  # fmt: skip
    explore.add_argument("--top-k", type=whole_number(1, MAX_TOP_K), default=5,
                         help=f"guesses per position and layer, 1 to {MAX_TOP_K}: the page keeps them all, at every "
                              "position and layer (default 5)")  # fmt: skip
    explore.add_argument("--max-length", type=whole_number(SHORTEST["text"]), default=None,
                         help=f"tokens at most, {SHORTEST['text']} or more ({SHORTEST['pair']} or more for a pair; "
                              "default: the model's positions)")  # fmt: skip
    explore.add_argument("--truncate", action="store_true",
                         help="cut a text longer than --max-length or the model (default: refuse it)")  # fmt: skip
    explore.add_argument("--cased", action="store_true", help="do not lower-case the text (default: as the model's "
                                                              "tokenizer config says)")  # fmt: skip
    explore.add_argument("--whitespace-words", action="store_true",
                         help="words are what whitespace separates, read as typed: no punctuation splitting, and "
                              "no lower-casing or accent stripping either, as in transformers (so it implies "
                              "--cased; e.g. SMILES pre-split as rxnfp's tokenizer splits them)")  # fmt: skip
    explore.add_argument("--attention-bits", type=attention_bits, default=None,
                         help="bits per stored attention weight (default: 16 on small pages, 8 on big)")  # fmt: skip
    explore.add_argument("--open", action="store_true", help="open the page in the web browser when written")
    explore.set_defaults(run=cmd_explore)


def cmd_explore(args) -> None:
    from ..errors import ExplorerInputError, ModelNotFoundError
    from ..formats.atomic_files import atomic_output, refuse_what_is_not_a_file, why_not_a_folder
    from ..loading.hub import BUNDLED_WITH_HEADS, DEFAULT_MODEL, looks_like_a_path
    from ..tasks.fill_mask_and_next_sentence import BUNDLED_FALLBACK_NOTE

    output = Path(args.output)
    reason = why_not_a_folder(output.parent)
    if reason:  # before any model is loaded: nothing is written
        raise FileNotFoundError(f"the output directory {output.parent} {reason} (for --output {output})")
    if output.is_dir():
        raise IsADirectoryError(f"--output {output} is a directory: name the page's file, e.g. {output}/page.html")
    if output.suffix.lower() not in (".html", ".htm"):  # (page.json would be a page, not the page's JSON)
        raise CommandError(f"--output must end in .html (the page is HTML), got {output.name}")
    refuse_what_is_not_a_file(output)
    for name, text in (("text", args.text), ("pair", args.pair)):
        if text is not None and not text.strip():
            raise ExplorerInputError(f"the {name} is empty: there is nothing to explore")
    if args.pair is not None and args.max_length is not None and args.max_length < SHORTEST["pair"]:
        raise CommandError(f"--max-length {args.max_length} cannot hold a pair: [CLS] A [SEP] B [SEP] with one piece "
                           f"of each needs {SHORTEST['pair']} or more")  # fmt: skip
    if args.model and looks_like_a_path(args.model) and not os.path.exists(args.model):
        raise ModelNotFoundError(f"--model {args.model}: no such directory")
    device_of(args)  # a GPU that is not there: one line, before anything is loaded
    logging.getLogger("minibert").setLevel(logging.WARNING)  # a refused input is one line, not the loader's notes
    # The page's temporary file first: a folder that takes no file is said before the model runs.
    with atomic_output(output) as handle:
        try:
            page = _explore(args, args.model or DEFAULT_MODEL)
        except ModelNotFoundError as error:
            if args.model or error.refused:  # a hub that answered no (HF_TOKEN refused) is not one out of reach
                raise
            try:
                page = _explore(args, BUNDLED_WITH_HEADS)
            except (ExplorerInputError, CommandError) as error:  # one line: the refusal, and which model refused it
                kind = CommandError if isinstance(error, CommandError) else ExplorerInputError  # (exit 2 stays 2)
                raise kind(f"{error} (the model: the bundled {BUNDLED_WITH_HEADS}, as "
                           f"{DEFAULT_MODEL} is not reachable)") from error  # fmt: skip
            print(f"minibert: {BUNDLED_FALLBACK_NOTE}", file=sys.stderr)  # the run goes on: said once, here
        if page.data.cut is not None:  # which text lost which end, to what limit, and any [MASK] lost
            print(f"minibert: warning: {page.data.cut.describe('--max-length')} (--truncate)", file=sys.stderr)
        handle.write(page.html().encode("utf-8"))
    print(f"minibert: wrote {output} ({file_size(output.stat().st_size)}): {page!r}", file=sys.stderr)
    if args.open:
        webbrowser.open(output.resolve().as_uri())


def _explore(args, model: str):
    from ..errors import TaskArgumentError
    from ..explorer import explore

    tokenizer = None
    if args.cased or args.whitespace_words:
        tokenizer = _with_options(model, cased=args.cased, whitespace_words=args.whitespace_words)
    try:
        page = explore(model, args.text, args.pair, top_k=args.top_k, max_length=args.max_length,
                       truncate=args.truncate, tokenizer=tokenizer, attention_bits=args.attention_bits,
                       device=device_of(args))  # fmt: skip
    except TaskArgumentError as error:  # --max-length past the model's positions, --top-k past its vocabulary
        raise flag_error(error) from None
    typed = _words_it_would_lower(tokenizer, args.text, args.pair) if args.whitespace_words and not args.cased else []
    if typed:  # said once the page is made, of the model that made it
        shown = ", ".join(repr(word) for word in typed[:3]) + (", ..." if len(typed) > 3 else "")
        print(f"minibert: warning: --whitespace-words also skips lower-casing and accent stripping (as transformers "
              f"does), which this model's tokenizer config asks for: {shown} reach its vocabulary as typed",
              file=sys.stderr)  # fmt: skip
    return page


def _words_it_would_lower(tokenizer, *texts: str | None) -> list[str]:
    """The whitespace-separated words of ``texts`` that the tokenizer's config would lower-case or
    strip of accents (``do_lower_case``, ``strip_accents``): --whitespace-words skips that stage,
    as transformers' ``do_basic_tokenize=False`` does, so on an uncased model they are read as typed
    (often [UNK]). Its added and special tokens ([MASK]) are cut out first: they are never lowered."""
    import re

    from ..tokenizer.algorithm import strip_accents

    lower = tokenizer.do_lower_case
    strip = lower if tokenizer.strip_accents is None else tokenizer.strip_accents
    if not (lower or strip):
        return []
    kept = {*tokenizer.added.tokens, *tokenizer.all_special_tokens}  # (a vocab.txt's [MASK] is no added token)
    added = "|".join(re.escape(content) for content in sorted(kept, key=len, reverse=True))
    words = [word for text in texts if text for part in (re.split(added, text) if added else [text])
             for word in part.split()]  # fmt: skip

    def as_the_config_reads(word: str) -> str:
        word = word.lower() if lower else word
        return strip_accents(word) if strip else word

    return list(dict.fromkeys(word for word in words if as_the_config_reads(word) != word))  # (each word once)


def file_size(size: int) -> str:
    """A file's size as a reader says it: bytes below 1 kB, kB below 1 MB, then MB (decimal units).

    >>> file_size(512), file_size(44_321), file_size(14_512_345)
    ('512 bytes', '44 kB', '14.5 MB')
    """
    if size < 1000:
        return f"{size} bytes"
    return f"{size / 1e3:.0f} kB" if size < 999_500 else f"{size / 1e6:.1f} MB"


def _with_options(model: str, *, cased: bool, whitespace_words: bool):
    """The checkpoint's tokenizer read again with lower-casing (``cased``) or basic tokenization
    (``whitespace_words``) switched off, as transformers reads it with ``BertTokenizer.from_pretrained(model,
    do_lower_case=False)``: its added and special tokens kept, cut out of the text before the rest is
    split (an added ``[ENT]`` stays one token). Words split on whitespace alone with tokens added as
    normalized is refused, as ``add_tokens`` refuses it (special_tokens.py): transformers has no such reading."""
    from ..tokenizer.bert_tokenizer import BertTokenizer
    from ..tokenizer.directory import read_tokenizer_files

    vocab_file, vocab, _, settings = read_tokenizer_files(model)
    if cased:
        settings["do_lower_case"] = False
    if whitespace_words:
        settings["do_basic_tokenize"] = False
    tokenizer = BertTokenizer.from_files_read(vocab_file, vocab, settings)
    normalized = sorted(content for content, token in tokenizer.added.tokens.items() if token.normalized)
    if whitespace_words and normalized:
        raise CommandFailed(f"--whitespace-words is not implemented for a tokenizer with tokens added as normalized "
                           f"({', '.join(normalized[:3])}{', ...' if len(normalized) > 3 else ''}): transformers' "
                           "tokenizer always normalizes and splits the words around them")  # fmt: skip
    return tokenizer
