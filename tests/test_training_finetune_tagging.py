"""Tagging (``minibert finetune --task tag``): CoNLL files read as the CoNLL-2003 layout says,
transformers' run_ner rule (the first piece of a word carries its tag) checked against the
``tokenizers`` library's word ids, entity precision/recall/F1 equal to seqeval's, and a run whose
folder transformers' BertForTokenClassification loads with the same logits."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

import minibert
from minibert.apps.cli import main
from minibert.errors import DataError
from minibert.heads import IGNORE_INDEX
from minibert.training.tasks.head import load_tokenizer
from minibert.training.tasks.tag import entity_scores, read_conll, tag_features
from tiny_hub import TINY

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
to TO B-VP O
boycott VB I-VP O
British JJ B-NP B-MISC
lamb NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O
"""


def test_conll_files_are_read_by_their_layout(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(CONLL, encoding="utf-8")
    sentences = read_conll(path)
    assert [s.words for s in sentences][1:] == [["Peter", "Blackburn"], ["BRUSSELS", "1996-08-22"]]
    assert sentences[0].tags == ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"]
    assert [s.line for s in sentences] == [3, 13, 16]
    path.write_text("EU B-ORG\nrejects\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train.txt, line 2: the word 'rejects' has no tag"):
        read_conll(path)


def conll2003_reads(path: Path) -> list[tuple[list[str], list[str]]]:
    """The words and NER tags of the conll2003 loader of ``datasets`` (the CoNLL-2003 files of
    transformers' run_ner), its _generate_examples: lines as open() reads them, columns split at " "."""
    sentences, tokens, tags = [], [], []
    with open(path, encoding="utf-8") as file:
        for line in file:
            if line.startswith("-DOCSTART-") or line == "" or line == "\n":
                if tokens:
                    sentences.append((tokens, tags))
                    tokens, tags = [], []
            else:
                splits = line.split(" ")
                tokens.append(splits[0])
                tags.append(splits[3].rstrip())
    return sentences + ([(tokens, tags)] if tokens else [])


def test_columns_are_split_at_spaces_as_the_conll2003_loader_splits_them(tmp_path):
    """str.split() also splits at a no-break space (French numbers: "10 000"), U+0085, U+2028, U+3000:
    '10\u00a0000' became the word '10' and '000' a column dropped unsaid. Those stay in their word; CRLF
    and a tab separate as in CoNLL files."""
    text = ("10\u00a0000 CD I-NP O\nParis NNP B-NP B-LOC\n\na\x85b NN B-NP O\nthe\u2028cat NN I-NP B-PER\n"
            "\u3000 SP O O\n\nEU NNP B-NP B-ORG\n")  # fmt: skip
    path = tmp_path / "train.txt"
    path.write_text(text, encoding="utf-8")
    assert [(s.words, s.tags) for s in read_conll(path)] == conll2003_reads(path)
    assert read_conll(path)[0].words == ["10\u00a0000", "Paris"]
    tabs = tmp_path / "tabs.txt"
    tabs.write_bytes(text.replace("\n", "\r\n").replace(" ", "\t").encode("utf-8"))
    assert [(s.words, s.tags) for s in read_conll(tabs)] == conll2003_reads(path) != []


# Words that make no WordPiece piece (a zero-width space, a bell, a soft hyphen: the tokenizer removes
# them), before, between and after tagged words: once a numpy broadcast error, or with a short
# --max-seq-length every later tag shifted one piece.
NO_PIECES = """\u200b O
Anna B-PER
\x07 O
Schmidt I-PER
visited O
\u00ad B-MISC
Berlin B-LOC
\u200b I-LOC
yesterday O
"""


# One-word entities of several pieces: "Lovelace" (love ##lace) with I-PER among the labels, "EU-wide"
# (eu - wide) a B-MISC with no I-MISC, "Hammerschmidt" an I-PER of its own.
MANY_PIECES = """Lovelace B-PER
wrote O
EU-wide B-MISC
Hammerschmidt I-PER
"""


def run_ner_inside_tags(labels: list[str]) -> list[int]:
    """transformers' run_ner.py, its b_to_i_label as written there."""
    b_to_i_label = []
    for idx, label in enumerate(labels):
        if label.startswith("B-") and label.replace("B-", "I-") in labels:
            b_to_i_label.append(labels.index(label.replace("B-", "I-")))
        else:
            b_to_i_label.append(idx)
    return b_to_i_label


@pytest.mark.parametrize("label_all", [False, True], ids=["first piece", "--label-all-pieces"])
@pytest.mark.parametrize("length", [32, 5, 7], ids=["whole", "cut after 3 pieces", "cut after 5 pieces"])
@pytest.mark.parametrize("text", [CONLL, NO_PIECES, MANY_PIECES], ids=["CoNLL-2003", "words without pieces",
                                                                     "words of many pieces"])  # fmt: skip
def test_first_piece_rule_equals_transformers_run_ner(tmp_path, minilm_dir, text, length, label_all):
    """run_ner's tokenize_and_align_labels: word_ids() of the fast tokenizer (truncated as run_ner
    truncates); the tag at a word's first piece, -100 at [CLS]/[SEP] and at its other pieces — with
    label_all_tokens (--label-all-pieces), there the tag inside the entity (B-X → I-X when I-X is a
    label: b_to_i_label); a word without pieces has no label and moves no other."""
    tokenizers = pytest.importorskip("transformers")
    fast = tokenizers.BertTokenizerFast.from_pretrained(minilm_dir)
    path = tmp_path / "train.txt"
    path.write_text(text, encoding="utf-8")
    sentences = read_conll(path)
    labels = sorted({t for s in sentences for t in s.tags} | {"I-PER"})
    b_to_i_label = run_ner_inside_tags(labels)
    tokenizer = load_tokenizer(str(minilm_dir))
    features = tag_features(sentences, tokenizer, length, labels, label_all_pieces=label_all)
    for row, sentence in enumerate(sentences):
        encoded = fast(sentence.words, is_split_into_words=True, truncation=True, max_length=length)
        expected, previous = [], None
        for word in encoded.word_ids():
            if word is None:
                expected.append(IGNORE_INDEX)
            elif word != previous:
                expected.append(labels.index(sentence.tags[word]))
            else:
                expected.append(b_to_i_label[labels.index(sentence.tags[word])] if label_all else IGNORE_INDEX)
            previous = word
        used = len(encoded["input_ids"])
        assert features.input_ids[row, :used].tolist() == encoded["input_ids"]
        assert features.label_ids[row, :used].tolist() == expected
        assert (features.label_ids[row, used:] == IGNORE_INDEX).all()


def test_entity_scores_equal_seqevals():
    metrics = pytest.importorskip("seqeval.metrics")
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "E-PER", "S-LOC", "I-MISC", "B-MISC"]
    for seed in range(200):
        rng = random.Random(seed)
        gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(20)]
        predicted = [[rng.choice(tags) if rng.random() < 0.4 else tag for tag in sentence] for sentence in gold]
        ours = entity_scores(gold, predicted)
        assert ours["precision"] == pytest.approx(metrics.precision_score(gold, predicted), abs=1e-12)
        assert ours["recall"] == pytest.approx(metrics.recall_score(gold, predicted), abs=1e-12)
        assert ours["f1"] == pytest.approx(metrics.f1_score(gold, predicted), abs=1e-12)


def test_a_tagging_run_is_a_token_classifier_transformers_loads(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    words = "the machine drank water in paris by the river bank".split()
    tags = ["O", "B-THING", "O", "B-THING", "O", "B-PLACE", "O", "O", "B-PLACE", "I-PLACE"]
    rng = random.Random(0)
    lines = []
    for _ in range(12):
        chosen = sorted(rng.sample(range(len(words)), 5))
        lines += [f"{words[i]} {tags[i]}" for i in chosen] + [""]
    (tmp_path / "train.txt").write_text("\n".join(lines), encoding="utf-8")
    run = tmp_path / "run"
    argv = ["finetune", "--task", "tag", "--model", str(TINY), "--train", str(tmp_path / "train.txt"), "--dev",
            str(tmp_path / "train.txt"), "--output", str(run), "--batch-size", "4", "--epochs", "2",
            "--learning-rate", "1e-3", "--max-seq-length", "16"]  # fmt: skip
    assert main(argv) == 0
    assert "a new classifier (4 labels: B-PLACE, B-THING, I-PLACE, O)" in capsys.readouterr().err
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert {"dev_precision", "dev_recall", "dev_f1", "dev_accuracy"} <= set(records[-1])
    ours = minibert.BertForTokenClassification.from_pretrained(run)
    theirs = transformers.BertForTokenClassification.from_pretrained(run, attn_implementation="eager").eval()
    batch = minibert.BertTokenizer.from_pretrained(run)(["the river bank in paris"], return_tensors="pt")
    with torch.no_grad():
        difference = (ours(**batch).logits - theirs(**batch).logits).abs().max().item()
    assert difference < 1e-5, f"logits max |Δ| {difference:.2e}"
    assert json.loads((run / "config.json").read_text())["id2label"]["0"] == "B-PLACE"
    assert np.isfinite([r["loss"] for r in records]).all()
