"""Debian's English fortunes as a pre-training corpus, in Google's input format: one sentence a line,
a blank line between documents (a fortune is a document).

    python scripts/fortunes_corpus.py fortunes.txt

It is the text the bundled English model ``minibert/fortunes-mini`` learned from (docs/pretraining.md §4
gives the whole recipe). The files are those of Debian's ``fortunes`` and ``fortunes-min`` packages
(``apt-get install fortunes``), English only: the Portuguese ``mario.*`` files and the pictures of
``ascii-art`` are left out. Their licence is the BSD-style notice in /usr/share/doc/fortunes/copyright.

Each fortune's whitespace is joined into single spaces and its sentences are cut after ``.``, ``!`` or
``?`` followed by a space: a rule of thumb, not a sentence splitter, but the next-sentence task only needs
segments in their order. The output is the same bytes for the same package version (printed on stderr
with the file's SHA-256, the number to compare with the recipe's).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
from pathlib import Path

FORTUNES = Path("/usr/share/games/fortunes")
LEFT_OUT = ("ascii-art", "mario.")  # pictures; Portuguese
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def fortune_files(directory: Path = FORTUNES) -> list[Path]:
    """The English fortune files, by name (the .dat indexes and .u8 links left out)."""
    files = [path for path in directory.iterdir() if path.is_file() and not path.is_symlink() and not path.suffix]
    return sorted((path for path in files if not path.name.startswith(LEFT_OUT)), key=lambda path: path.name)


def fortune_documents(files: list[Path]) -> list[list[str]]:
    """Each fortune of each file, as a list of sentences (fortunes are separated by a line ``%``)."""
    documents = []
    for path in files:
        for fortune in path.read_text(encoding="utf-8").split("\n%\n"):
            sentences = [sentence for sentence in SENTENCE_END.split(" ".join(fortune.split())) if sentence]
            if sentences:
                documents.append(sentences)
    return documents


def package_version() -> str:
    """The installed version of Debian's fortunes package (the corpus depends on it)."""
    result = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "fortunes"], capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", type=Path, help="the text file to write")
    args = parser.parse_args()
    if not FORTUNES.is_dir():
        sys.exit(f"fortunes_corpus.py: {FORTUNES} does not exist: apt-get install fortunes")
    documents = fortune_documents(fortune_files())
    text = "".join("\n".join(sentences) + "\n\n" for sentences in documents).encode("utf-8")
    args.output.write_bytes(text)
    print(f"fortunes_corpus.py: {len(documents):,} fortunes, {sum(map(len, documents)):,} sentences, "
          f"{len(text):,} bytes (fortunes {package_version()}) → {args.output}; "
          f"sha256 {hashlib.sha256(text).hexdigest()}", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
