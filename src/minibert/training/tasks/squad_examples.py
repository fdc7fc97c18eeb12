"""SQuAD v1.1 and v2.0 JSON files → question examples, as Google's ``run_squad.read_squad_examples``.

A paragraph's context is cut into *words* at whitespace (space, tab, CR, LF and U+202F, Google's
``is_whitespace``); ``char_to_word_offset`` maps every character to the word it is in (a space to
the word before it). A training answer is given in characters (``answer_start``, ``text``) and
becomes the first and last word it touches:

    context:  "The leader was John Smith (1895-1943)."
    words:     The  leader  was  John  Smith  (1895-1943).
    answer "1895" at 27 → words 5..5 — the WordPiece step (squad_features.py) narrows it further

A training answer whose words, joined by spaces, do not contain the answer's own words is skipped
(Google logs "Could not find answer"; odd Unicode), and counted. v2.0 questions may say
``is_impossible``: no answer, start and end -1. An ``answer_start`` whose characters are not the
answer's ``text`` is an error naming the file, the question id and the field (Google's code would
silently train on the wrong words).

>>> words, offsets = context_words("a  bc d")
>>> words, offsets
(['a', 'bc', 'd'], [0, 0, 0, 1, 1, 1, 2])
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import DataError

WHITESPACE = (" ", "\t", "\r", "\n", "\u202f")


@dataclass
class SquadExample:
    """One question on one paragraph (Google's ``SquadExample``); positions are word indices."""

    qas_id: str
    question_text: str
    doc_tokens: list[str]  # the context's whitespace words
    orig_answer_text: str | None = None  # training only ("" when impossible)
    start_position: int | None = None  # first word of the answer; -1 when impossible
    end_position: int | None = None  # last word of the answer; -1 when impossible
    is_impossible: bool = False
    gold_answers: list[str] = field(default_factory=list)  # every annotated answer text (evaluation)


def context_words(text: str) -> tuple[list[str], list[int]]:
    """(words, char_to_word_offset): the context cut at whitespace, each character's word index."""
    words: list[str] = []
    offsets: list[int] = []
    previous_is_space = True
    for character in text:
        if character in WHITESPACE:
            previous_is_space = True
        else:
            if previous_is_space:
                words.append(character)
            else:
                words[-1] += character
            previous_is_space = False
        offsets.append(len(words) - 1)
    return words, offsets


def read_squad_examples(path: str | Path, is_training: bool, version_2: bool = False
                        ) -> tuple[list[SquadExample], int]:  # fmt: skip
    """(examples, skipped): every question of the file; ``skipped`` counts the training answers that
    could not be recovered from the words (Google skips them too)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))["data"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise DataError(f"{path}: not a SQuAD JSON file (a top-level 'data' list): {error}") from None
    examples: list[SquadExample] = []
    skipped = 0
    for article in data:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            words, offsets = context_words(context)
            for qa in paragraph["qas"]:
                example = _example(qa, context, words, offsets, is_training, version_2, path)
                if example is None:
                    skipped += 1
                else:
                    examples.append(example)
    return examples, skipped


def _example(qa: dict, context: str, words: list[str], offsets: list[int], is_training: bool,
             version_2: bool, path) -> SquadExample | None:  # fmt: skip
    """One question as Google reads it; None for a training answer that cannot be recovered."""
    qas_id = qa["id"]
    answers = qa.get("answers", [])
    for number, answer in enumerate(answers):
        start, text = answer["answer_start"], answer["text"]
        if not isinstance(start, int) or context[start:start + len(text)] != text:
            raise DataError(f"{path}: question {qas_id}: answers[{number}].answer_start is {start!r}, but the "
                            f"context there is {context[start:start + len(text)]!r}, not the answer's text "
                            f"{text!r}" if isinstance(start, int) else
                            f"{path}: question {qas_id}: answers[{number}].answer_start is {start!r}, not a number")
    example = SquadExample(qas_id, qa["question"], words, gold_answers=[answer["text"] for answer in answers])
    if not is_training:
        return example
    example.is_impossible = bool(qa["is_impossible"]) if version_2 else False
    if example.is_impossible:
        example.orig_answer_text, example.start_position, example.end_position = "", -1, -1
        return example
    if len(answers) != 1:
        raise DataError(f"{path}: question {qas_id}: a training question has exactly 1 answer, "
                        f"this one has {len(answers)} (field 'answers')")  # fmt: skip
    text, start = answers[0]["text"], answers[0]["answer_start"]
    example.orig_answer_text = text
    example.start_position, example.end_position = offsets[start], offsets[start + len(text) - 1]
    found = " ".join(words[example.start_position:example.end_position + 1])
    if found.find(" ".join(text.split())) == -1:
        return None
    return example
