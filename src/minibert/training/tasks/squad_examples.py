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
silently train on the wrong words). A v1.1 dev question without answers is refused too: the official
evaluate-v1.1.py cannot score it (v2.0's questions without answers expect "").

>>> words, offsets = context_words("a  bc d")
>>> words, offsets
(['a', 'bc', 'd'], [0, 0, 0, 1, 1, 1, 2])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...errors import DataError
from ...formats.json_files import parse_json

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
    could not be recovered from the words (Google skips them too).

    The file is checked as it is read (``SquadFile``): every field Google's reader uses must be there
    with its type, an answer's text must not be blank, and a question id must be unique — each
    DataError names the file, the place (``data[0].paragraphs[3].qas[1]``), the question id and the field."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} does not exist" if not path.exists() else f"{path} is not a file")
    try:  # (one line of JSON, 30 MB for SQuAD's training file: not read_labelled_text's lines of text)
        data = parse_json(path.read_text(encoding="utf-8-sig"))  # -sig: a byte-order mark (Notepad's) dropped
    except (OSError, UnicodeDecodeError, ValueError) as error:  # (ValueError: JSONDecodeError, nested too deep)
        raise DataError(f"{path}: not a SQuAD JSON file: {error}") from None
    squad = SquadFile(path)
    examples: list[SquadExample] = []
    skipped = 0
    for article_place, article in squad.items(data, "data", "", top=True):
        for place, paragraph in squad.items(article, "paragraphs", article_place):
            context = squad.field(paragraph, "context", str, place)
            words, offsets = context_words(context)
            for qa_place, qa in squad.items(paragraph, "qas", place):
                example = _example(squad.question(qa, qa_place), context, words, offsets, is_training, version_2, path)
                if example is None:
                    skipped += 1
                else:
                    examples.append(example)
    return examples, skipped


class SquadFile:
    """The checks of one SQuAD file's structure, with the place of each value for the message."""

    def __init__(self, path):
        self.path, self.ids = path, {}  # question id → its place (a repeated id is refused)

    def fail(self, place: str, problem: str):
        raise DataError(f"{self.path}: {place}: {problem}")

    def field(self, record, name: str, kind: type | tuple, place: str):
        if name not in record:
            self.fail(place, f"no field {name!r}")
        value = record[name]
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            wanted = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            self.fail(place, f"{name!r} must be a {_JSON_NAMES.get(wanted, wanted)}, "
                             f"got {_JSON_NAMES.get(type(value).__name__, type(value).__name__)}")  # fmt: skip
        return value

    def items(self, record, name: str, place: str, top: bool = False):
        """(place, object) of each entry of the list ``record[name]``, each checked to be an object."""
        if not isinstance(record, dict):
            self.fail(place or "the file", "must be a JSON object" + (" with a 'data' list" if top else ""))
        for number, item in enumerate(self.field(record, name, list, place or "the file")):
            here = f"{place}.{name}[{number}]" if place else f"{name}[{number}]"
            if not isinstance(item, dict):
                self.fail(here, f"must be an object, got {_JSON_NAMES.get(type(item).__name__, type(item).__name__)}")
            yield here, item

    def question(self, qa: dict, place: str) -> dict:
        """A question object, checked: a unique id, a question, answers with non-blank text and a
        whole-number start (0.0 is 0, as a JSON writer may put it), a true/false is_impossible."""
        qas_id = self.field(qa, "id", (str, int), place)
        named = f" (question {qas_id!r})"
        if str(qas_id) in self.ids:
            self.fail(place + named, f"the id is also the id of {self.ids[str(qas_id)]}: each question needs its "
                                     "own (its prediction is stored under it)")  # fmt: skip
        self.ids[str(qas_id)] = place
        checked = {"id": str(qas_id), "question": self.field(qa, "question", str, place + named), "answers": []}
        for answer_place, answer in self.items(qa, "answers", place + named) if "answers" in qa else ():
            answer_place = answer_place.replace(named, "") + named  # data[0]...qas[1].answers[0] (question 'x')
            text = self.field(answer, "text", str, answer_place)
            if not text.strip():
                self.fail(answer_place, f"the answer's text is {'empty' if not text else 'blank'}")
            start = self.field(answer, "answer_start", (int, float), answer_place)
            if isinstance(start, float) and not start.is_integer() or start < 0:
                self.fail(answer_place, f"answer_start must be a character position (0 or more), got {start!r}")
            checked["answers"].append({"text": text, "answer_start": int(start)})
        if "is_impossible" in qa:
            checked["is_impossible"] = self.field(qa, "is_impossible", bool, place + named)
        checked["where"] = place + named
        return checked


_JSON_NAMES = {"str": "string", "int": "number", "float": "number", "list": "list", "dict": "object",
               "bool": "true or false", "NoneType": "null", "int or str": "string or number",
               "str or int": "string or number", "int or float": "number"}  # fmt: skip


def _example(qa: dict, context: str, words: list[str], offsets: list[int], is_training: bool,
             version_2: bool, path) -> SquadExample | None:  # fmt: skip
    """One (checked) question as Google reads it; None for a training answer that cannot be recovered."""
    qas_id, where = qa["id"], qa["where"]
    answers = qa["answers"]
    for number, answer in enumerate(answers):
        start, text = answer["answer_start"], answer["text"]
        if context[start:start + len(text)] != text:
            raise DataError(f"{path}: {where}: answers[{number}].answer_start is {start!r}, but the context "
                            f"there is {context[start:start + len(text)]!r}, not the answer's text {text!r}")
    example = SquadExample(qas_id, qa["question"], words, gold_answers=[answer["text"] for answer in answers])
    if not is_training and not version_2 and not answers:  # evaluate-v1.1.py: max() over no answers fails
        raise DataError(f"{path}: {where}: a SQuAD v1.1 dev question needs at least 1 answer to be scored, this one "
                        "has none (field 'answers'); a file with unanswerable questions is SQuAD v2.0 "
                        "(--version-2-with-negative)")  # fmt: skip
    if not is_training:
        return example
    if version_2 and "is_impossible" not in qa:
        raise DataError(f"{path}: {where}: no field 'is_impossible' (SQuAD 2.0 training questions say "
                        "true or false)")  # fmt: skip
    example.is_impossible = qa.get("is_impossible", False) if version_2 else False
    if example.is_impossible:
        example.orig_answer_text, example.start_position, example.end_position = "", -1, -1
        return example
    if len(answers) != 1:
        raise DataError(f"{path}: {where}: a training question has exactly 1 answer, "
                        f"this one has {len(answers)} (field 'answers')")  # fmt: skip
    text, start = answers[0]["text"], answers[0]["answer_start"]
    example.orig_answer_text = text
    example.start_position, example.end_position = offsets[start], offsets[start + len(text) - 1]
    found = " ".join(words[example.start_position:example.end_position + 1])
    if found.find(" ".join(text.split())) == -1:
        return None
    return example
