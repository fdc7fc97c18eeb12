"""Writes the few-line format samples in src/minibert/bundled/examples/ (``minibert example-data``):
GLUE's MRPC and STS-B, CoNLL-2003, SQuAD v1.1 and v2.0, each in the layout its real files have,
made of sentences written for the purpose (no row is from the real data sets, whose licences
are their own). Run from the clone's root after changing a sample here; the languages set is
made by scripts/language_examples.py.

    python scripts/example_samples.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "src" / "minibert" / "bundled" / "examples"

PARAPHRASES = [  # (1 when the two say the same, sentence 1, sentence 2)
    (1, "The company said its profit rose 12 percent in the third quarter.",
     "Third-quarter profit was up 12 percent, the company said."),
    (0, "The council approved the new bridge on Tuesday.", "The new bridge will open to traffic next spring."),
    (1, "Heavy rain forced the organisers to cancel the race.", "The race was called off because of heavy rain."),
    (0, "Shares of the bank fell 3 percent in early trading.", "The bank hired a new chief executive last year."),
    (1, "The museum will stay open until nine on Fridays.", "On Fridays the museum closes at nine."),
    (0, "The minister visited two schools in the north.", "Teachers in the north asked for higher pay."),
    (1, "Police arrested two men after the robbery.", "Two men were arrested by police following the robbery."),
    (0, "The film won three awards at the festival.", "The festival sold more tickets than ever before."),
    (1, "The airline cut 500 jobs to save money.", "To reduce costs, the airline eliminated 500 jobs."),
    (0, "Scientists found water ice near the moon's south pole.", "The mission launched from Florida in May."),
    (1, "The talks ended without an agreement.", "No deal was reached when the talks ended."),
    (0, "The team signed a young goalkeeper from Spain.", "The stadium will be rebuilt over three years."),
    (1, "The bakery opens at six every morning.", "Every morning the bakery opens its doors at six."),
    (0, "The river flooded several farms last week.", "Farmers plan to plant wheat this autumn."),
    (1, "The singer cancelled her tour because of illness.", "Illness forced the singer to call off her tour."),
    (0, "The library added a new wing in 2019.", "Most visitors borrow novels and travel guides."),
]  # fmt: skip

SIMILARITIES = [  # (genre, score 0–5, sentence 1, sentence 2)
    ("main-captions", 5.0, "A man is playing a guitar.", "A man plays the guitar."),
    ("main-captions", 3.8, "A woman is slicing an onion.", "A woman is cutting vegetables."),
    ("main-captions", 0.4, "A dog runs across the field.", "A man is reading a newspaper."),
    ("main-news", 4.2, "Oil prices rose on Monday.", "The price of oil went up on Monday."),
    ("main-news", 1.6, "The senate passed the budget bill.", "The budget was debated for weeks."),
    ("main-forums", 2.4, "You should back up your files before updating.", "Updating can take a long time."),
    ("main-captions", 4.6, "Two children are swimming in a pool.", "Two kids swim in a pool."),
    ("main-captions", 0.0, "A cat sleeps on a sofa.", "The train leaves at noon."),
    ("main-news", 3.2, "The storm closed schools across the state.", "Many schools shut because of the storm."),
    ("main-forums", 1.0, "Is this laptop good for games?", "My phone battery does not last."),
    ("main-captions", 4.8, "A boy is riding a bicycle.", "A boy rides a bike."),
    ("main-news", 2.0, "The court delayed the trial.", "The judge heard the first witness."),
    ("main-captions", 4.4, "A woman is playing the piano.", "A woman plays a piano."),
    ("main-captions", 0.8, "A horse is running in a field.", "A man is cooking pasta."),
    ("main-news", 3.6, "The factory will close next year.", "Next year the plant is set to shut down."),
    ("main-forums", 1.8, "How do I reset my password?", "My account was locked yesterday."),
]  # fmt: skip

SENTENCES = [  # CoNLL-2003's columns: word, part of speech, chunk, entity tag (IOB)
    [("EU", "NNP", "B-NP", "B-ORG"), ("rejects", "VBZ", "B-VP", "O"), ("German", "JJ", "B-NP", "B-MISC"),
     ("call", "NN", "I-NP", "O"), ("to", "TO", "B-VP", "O"), ("boycott", "VB", "I-VP", "O"),
     ("British", "JJ", "B-NP", "B-MISC"), ("lamb", "NN", "I-NP", "O"), (".", ".", "O", "O")],
    [("Maria", "NNP", "B-NP", "B-PER"), ("Lopez", "NNP", "I-NP", "I-PER"), ("flew", "VBD", "B-VP", "O"),
     ("to", "TO", "B-PP", "O"), ("Lisbon", "NNP", "B-NP", "B-LOC"), ("on", "IN", "B-PP", "O"),
     ("Monday", "NNP", "B-NP", "O"), (".", ".", "O", "O")],
    [("Shares", "NNS", "B-NP", "O"), ("in", "IN", "B-PP", "O"), ("Acme", "NNP", "B-NP", "B-ORG"),
     ("Corp", "NNP", "I-NP", "I-ORG"), ("rose", "VBD", "B-VP", "O"), ("in", "IN", "B-PP", "O"),
     ("Tokyo", "NNP", "B-NP", "B-LOC"), (".", ".", "O", "O")],
    [("The", "DT", "B-NP", "O"), ("United", "NNP", "I-NP", "B-ORG"), ("Nations", "NNPS", "I-NP", "I-ORG"),
     ("met", "VBD", "B-VP", "O"), ("in", "IN", "B-PP", "O"), ("Geneva", "NNP", "B-NP", "B-LOC"),
     (".", ".", "O", "O")],
    [("Peter", "NNP", "B-NP", "B-PER"), ("Smith", "NNP", "I-NP", "I-PER"), ("joined", "VBD", "B-VP", "O"),
     ("the", "DT", "B-NP", "O"), ("Olympic", "JJ", "I-NP", "B-MISC"), ("team", "NN", "I-NP", "O"),
     (".", ".", "O", "O")],
    [("Rain", "NN", "B-NP", "O"), ("stopped", "VBD", "B-VP", "O"), ("play", "NN", "B-NP", "O"),
     ("at", "IN", "B-PP", "O"), ("Lord", "NNP", "B-NP", "B-LOC"), ("'s", "POS", "B-NP", "I-LOC"),
     (".", ".", "O", "O")],
    [("Anna", "NNP", "B-NP", "B-PER"), ("Berg", "NNP", "I-NP", "I-PER"), ("works", "VBZ", "B-VP", "O"),
     ("for", "IN", "B-PP", "O"), ("Siemens", "NNP", "B-NP", "B-ORG"), ("in", "IN", "B-PP", "O"),
     ("Munich", "NNP", "B-NP", "B-LOC"), (".", ".", "O", "O")],
    [("Brazil", "NNP", "B-NP", "B-LOC"), ("beat", "VBD", "B-VP", "O"), ("Chile", "NNP", "B-NP", "B-LOC"),
     ("2-1", "CD", "I-NP", "O"), ("in", "IN", "B-PP", "O"), ("the", "DT", "B-NP", "O"),
     ("Copa", "NNP", "I-NP", "B-MISC"), ("America", "NNP", "I-NP", "I-MISC"), (".", ".", "O", "O")],
    [("The", "DT", "B-NP", "O"), ("World", "NNP", "I-NP", "B-ORG"), ("Bank", "NNP", "I-NP", "I-ORG"),
     ("lent", "VBD", "B-VP", "O"), ("Kenya", "NNP", "B-NP", "B-LOC"), ("$", "$", "B-NP", "O"),
     ("50", "CD", "I-NP", "O"), ("million", "CD", "I-NP", "O"), (".", ".", "O", "O")],
    [("John", "NNP", "B-NP", "B-PER"), ("Miller", "NNP", "I-NP", "I-PER"), ("spoke", "VBD", "B-VP", "O"),
     ("in", "IN", "B-PP", "O"), ("French", "JJ", "B-NP", "B-MISC"), ("at", "IN", "B-PP", "O"),
     ("the", "DT", "B-NP", "O"), ("summit", "NN", "I-NP", "O"), (".", ".", "O", "O")],
    [("Oil", "NN", "B-NP", "O"), ("prices", "NNS", "I-NP", "O"), ("fell", "VBD", "B-VP", "O"),
     ("in", "IN", "B-PP", "O"), ("London", "NNP", "B-NP", "B-LOC"), ("and", "CC", "O", "O"),
     ("New", "NNP", "B-NP", "B-LOC"), ("York", "NNP", "I-NP", "I-LOC"), (".", ".", "O", "O")],
    [("Toyota", "NNP", "B-NP", "B-ORG"), ("recalled", "VBD", "B-VP", "O"), ("10,000", "CD", "B-NP", "O"),
     ("cars", "NNS", "I-NP", "O"), ("in", "IN", "B-PP", "O"), ("Japan", "NNP", "B-NP", "B-LOC"),
     (".", ".", "O", "O")],
    [("Sara", "NNP", "B-NP", "B-PER"), ("Kim", "NNP", "I-NP", "I-PER"), ("won", "VBD", "B-VP", "O"),
     ("the", "DT", "B-NP", "O"), ("Boston", "NNP", "I-NP", "B-MISC"), ("Marathon", "NNP", "I-NP", "I-MISC"),
     (".", ".", "O", "O")],
    [("Greenpeace", "NNP", "B-NP", "B-ORG"), ("protested", "VBD", "B-VP", "O"), ("outside", "IN", "B-PP", "O"),
     ("the", "DT", "B-NP", "O"), ("Dutch", "JJ", "I-NP", "B-MISC"), ("parliament", "NN", "I-NP", "O"),
     (".", ".", "O", "O")],
]  # fmt: skip

PARAGRAPHS = [  # (title, context, [(question, answer or None for v2.0's unanswerable, plausible answer)])
    ("Lighthouses",
     "A lighthouse is a tower that sends out light to guide ships at night. The first known lighthouse "
     "stood at Alexandria in Egypt and was built in the third century BC. Today most lighthouses are "
     "automatic and need no keeper.",
     [("What does a lighthouse guide?", "ships", None),
      ("Where was the first known lighthouse?", "Alexandria in Egypt", None),
      ("Who built the lighthouse at Alexandria?", None, "Egypt")]),
    ("Honey bees",
     "Honey bees live in colonies of up to 60,000 workers and one queen. The workers collect nectar "
     "from flowers and turn it into honey, which feeds the colony through the winter.",
     [("How many workers can a colony have?", "up to 60,000", None),
      ("What do the workers turn nectar into?", "honey", None),
      ("How long does a queen live?", None, "winter")]),
    ("Volcanoes",
     "A volcano is an opening in the crust through which molten rock, ash and gases escape. Mount Etna "
     "in Sicily is one of the most active volcanoes in Europe. Lava that cools quickly forms dark glass.",
     [("What escapes through a volcano?", "molten rock, ash and gases", None),
      ("Where is Mount Etna?", "in Sicily", None),
      ("What does lava form when it cools quickly?", "dark glass", None),
      ("When did Mount Etna last erupt?", None, "Europe")]),
]  # fmt: skip


def write(relative: str, text: str) -> None:
    path = FOLDER / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="\n")


def tsv(rows: list[list]) -> str:
    return "".join("\t".join(str(field) for field in row) + "\n" for row in rows)


def mrpc(rows) -> str:
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    return tsv([header] + [[label, 1000 + 2 * i, 1001 + 2 * i, a, b] for i, (label, a, b) in enumerate(rows)])


def stsb(rows) -> str:
    header = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2",
              "score"]  # fmt: skip
    return tsv([header] + [[i, genre, "sample", "2026", i, "none", "none", a, b, f"{score:.3f}"]
                           for i, (genre, score, a, b) in enumerate(rows)])  # fmt: skip


def conll(sentences) -> str:
    return "-DOCSTART- -X- -X- O\n\n" + "".join("".join(" ".join(word) + "\n" for word in sentence) + "\n"
                                                 for sentence in sentences)  # fmt: skip


def squad(paragraphs, version_2: bool, training: bool) -> str:
    data = []
    for title, context, questions in paragraphs:
        qas = []
        for q, (question, answer, plausible) in enumerate(questions):
            if answer is None and not version_2:
                continue
            text = answer or plausible
            found = [{"text": text, "answer_start": context.index(text)}]
            entry = {"question": question, "id": f"{title.lower().replace(' ', '-')}-{q}",
                     "answers": found * (1 if training else 2) if answer else []}  # fmt: skip
            if version_2:
                entry["is_impossible"] = answer is None
                if answer is None:
                    entry["plausible_answers"] = found
            qas.append(entry)
        data.append({"title": title, "paragraphs": [{"context": context, "qas": qas}]})
    return json.dumps({"version": "v2.0" if version_2 else "1.1", "data": data}, ensure_ascii=False, indent=1) + "\n"


# docs/finetuning.md's recipes run as written on the samples: a training file must hold one full
# step of the paper's settings, int(N / batch × epochs) ≥ 1 (Google's count of steps). GLUE and
# CoNLL: a batch of 32 over 3 epochs, so 11 examples or more (12 here); SQuAD: 12 questions over 2
# epochs, so 6 questions or more (v1.1 has only the answerable ones: 7 here).
def main() -> None:
    write("mrpc/train.tsv", mrpc(PARAPHRASES[:8] + PARAPHRASES[12:]))
    write("mrpc/dev.tsv", mrpc(PARAPHRASES[8:12]))
    write("sts-b/train.tsv", stsb(SIMILARITIES[:8] + SIMILARITIES[12:]))
    write("sts-b/dev.tsv", stsb(SIMILARITIES[8:12]))
    training_sentences = (0, 1, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13)  # every tag the dev file uses
    write("conll/train.txt", conll([SENTENCES[i] for i in training_sentences]))
    write("conll/valid.txt", conll([SENTENCES[i] for i in (2, 4)]))
    for version, version_2 in (("v1.1", False), ("v2.0", True)):
        write(f"squad/train-{version}.json", squad(PARAGRAPHS[:1] + PARAGRAPHS[1:], version_2, training=True))
        write(f"squad/dev-{version}.json", squad(PARAGRAPHS[1:] + PARAGRAPHS[:1], version_2, training=False))


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
