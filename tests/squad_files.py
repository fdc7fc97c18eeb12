"""SQuAD JSON files made of real text for the answer tests: Debian's fortunes joined into long
contexts, questions taken from other fortunes, answers chosen as substrings of the context at
random characters (so some start or end inside a word, hug punctuation, or sit at a window's
edge), the last word of a context as an answer, and for v2.0 unanswerable questions."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

FORTUNES = Path("/usr/share/games/fortunes/fortunes")


def fortunes(count: int) -> list[str]:
    """Real English text: the first ``count`` fortunes, each on one line (tabs and newlines → spaces)."""
    if not FORTUNES.exists():
        pytest.skip(f"{FORTUNES} (Debian's fortunes-min) is not installed")
    entries = FORTUNES.read_text(encoding="utf-8", errors="replace").split("\n%\n")
    return [" ".join(entry.split()) for entry in entries if entry.strip()][:count]


def random_answer(context: str, generator: random.Random, longest: int = 40) -> dict:
    """A substring of ``context`` starting and ending on a non-space character."""
    while True:
        start = generator.randrange(len(context))
        end = min(len(context), start + generator.randint(1, longest))
        text = context[start:end].strip()
        if text:
            return {"text": text, "answer_start": context.index(text, start)}


def squad_data(paragraphs: int, fortunes_per_context: int, questions: int, version_2: bool, training: bool,
               seed: int = 0) -> dict:  # fmt: skip
    """A SQuAD file's JSON: ``paragraphs`` contexts of ``fortunes_per_context`` fortunes each."""
    generator = random.Random(seed)
    texts = fortunes(paragraphs * fortunes_per_context + paragraphs * questions)
    contexts = [" ".join(texts[i * fortunes_per_context:(i + 1) * fortunes_per_context]) for i in range(paragraphs)]
    asked = texts[paragraphs * fortunes_per_context:]
    data = []
    for number, context in enumerate(contexts):
        qas = []
        for q in range(questions):
            question = asked[number * questions + q]
            last_word = context.split()[-1]
            if q == 0:  # the context's last word: the answer ends at the last piece
                answers = [{"text": last_word, "answer_start": len(context) - len(last_word)}]
            else:
                answers = [random_answer(context, generator) for _ in range(1 if training else 3)]
            qa = {"id": f"p{number}q{q}", "question": question, "answers": answers}
            if version_2:
                qa["is_impossible"] = q % 3 == 2
                if qa["is_impossible"]:
                    qa["plausible_answers"], qa["answers"] = qa["answers"], []
            qas.append(qa)
        data.append({"title": f"fortunes {number}", "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "v2.0" if version_2 else "1.1", "data": data}


def write_squad(path: Path, **kwargs) -> Path:
    path.write_text(json.dumps(squad_data(**kwargs)), encoding="utf-8")
    return path
