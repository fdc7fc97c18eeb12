"""``--task tag``: one label per word (named entities, the paper's CoNLL-2003 experiment).

The files are CoNLL's: a word per line, its tag in the last column, a blank line between
sentences, ``-DOCSTART-`` lines skipped::

    EU NNP B-NP B-ORG
    rejects VBZ B-VP O
    German JJ B-NP B-MISC

The columns are split at ASCII spaces and tabs only, as the conll2003 reader of ``datasets`` (which
transformers' run_ner reads) splits them at " ": other white space (a no-break space in "10 000",
U+2028) stays in its word. A ``.json``, ``.jsonl`` or ``.csv`` file is refused by its suffix (the
``tokens``/``ner_tags`` JSON of the hub's datasets stores tag ids whose names are not in the file).

A word becomes one or more WordPiece pieces of the model's own tokenizer (the one the run saves and
``minibert tag`` serves with), cut on its own as run_ner's ``is_split_into_words`` cuts it. As in
transformers' ``run_ner`` (and the paper's section 5.3), the *first* piece of a word carries its tag
and the others are ignored by the loss and by evaluation (label -100). With ``label_all_pieces``
(run_ner's ``label_all_tokens``) the later pieces are trained too, with the tag *inside* the entity:
``B-X`` becomes ``I-X`` when ``I-X`` is a label (run_ner's ``b_to_i_label``), so that a one-word
entity stays one entity — ``Lovelace B-PER`` is ``love B-PER, ##lace I-PER``, not two B-PER
entities (the dev figures still read the first pieces only). A word that makes no piece at all (a
zero-width space, a control character: the tokenizer removes it) has nothing to carry its tag: it
is left out, as run_ner's ``word_ids`` leave it out, and the words after it keep their own tags. A
sentence longer than ``max_seq_length − 2`` pieces is cut, and its cut words are not evaluated (as run_ner).

The dev figures are seqeval's: entities found as ``get_entities`` finds them (IOB1, IOB2 or
IOBES tags, a change of type ends an entity), and micro precision, recall and F1 over entities —
an entity counts only when its type, start and end are all right.

>>> get_entities(["B-PER", "I-PER", "O", "B-LOC", "I-ORG"])
[('PER', 0, 1), ('LOC', 3, 3), ('ORG', 4, 4)]

The loss (transformers' ``BertForTokenClassification``): a classifier on every piece's last hidden
state after dropout, the cross-entropy at every labelled piece summed and divided by the global
batch's count of labelled pieces — the mean over them:

    logits = W · dropout(hidden) + b          (B, T, K)
    loss   = Σ_labelled CE(logits, tag) / (labelled pieces of the global batch)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ...errors import DataError
from ...formats.line_files import name_suffix
from ...heads import (  # -100: a piece no loss or figure reads (transformers' ignore_index)
    IGNORE_INDEX,
    BertForTokenClassification,
)
from ...inputs import AS_ASKED
from ...loading.head_labels import shown_labels
from ...tokenizer import BertTokenizer
from .examples import read_labelled_text
from .features import Features
from .finetuning import Finetuning
from .head import fit_labels, load_tokenizer, refuse_a_single_label
from .task import PieceSums, TrainingData


@dataclass(frozen=True)
class Sentence:
    words: list[str]
    tags: list[str]
    line: int  # the line of its first word


COLUMNS = re.compile(r"[ \t]+")  # what separates a CoNLL line's columns
LINE_BREAKS = re.compile(r"\r\n|\r|\n")  # a text file's line ends, as Python's open() reads them
NOT_CONLL = (".json", ".jsonl", ".csv")  # files whose suffix says they are another format


def read_conll(path: str | os.PathLike) -> list[Sentence]:
    if name_suffix(path).lower() in NOT_CONLL:  # (a file named .jsonl alone too)
        raise DataError(f"{path}: --task tag reads CoNLL files (a word and its tag per line, separated by spaces or "
                        f"a tab, a blank line between sentences), not {name_suffix(path)} files")  # fmt: skip
    text = read_labelled_text(Path(path))
    sentences, words, tags, first = [], [], [], 0
    for number, line in enumerate(LINE_BREAKS.split(text) + [""], start=1):
        fields = [field for field in COLUMNS.split(line) if field]
        if not fields or fields[0] == "-DOCSTART-":
            if words:
                sentences.append(Sentence(words, tags, first))
            words, tags = [], []
            continue
        if len(fields) < 2:
            raise DataError(f"{path}, line {number}: the word {fields[0]!r} has no tag (the tag is the last column)")
        first = first if words else number
        words.append(fields[0])
        tags.append(fields[-1])
    if not sentences:
        raise DataError(f"{path} holds no sentences")
    return sentences


def inside_tags(labels: list[str]) -> list[int]:
    """Each label's id → the id a word's later pieces carry under ``label_all_pieces``: ``I-X``'s for
    ``B-X`` when ``I-X`` is a label, else its own (run_ner's ``b_to_i_label``, its rule as written).

    >>> inside_tags(["B-PER", "I-PER", "B-LOC", "O"])
    [1, 1, 2, 3]
    """
    inside = {label: number for number, label in enumerate(labels)}
    return [inside.get(label.replace("B-", "I-"), number) if label.startswith("B-") else number
            for number, label in enumerate(labels)]  # fmt: skip


def tag_features(sentences: list[Sentence], tokenizer: BertTokenizer, max_seq_length: int,
                 labels: list[str], label_all_pieces: bool = False) -> Features:  # fmt: skip
    """Pieces of every sentence, ``[CLS]`` … ``[SEP]``; label_ids (N, T): the tag's id at a word's
    first piece, -100 elsewhere — with ``label_all_pieces``, the later pieces of a word its tag
    inside the entity (``inside_tags``: ``B-X`` → ``I-X``)."""
    index = {label: number for number, label in enumerate(labels)}
    later = inside_tags(labels)
    rows = np.zeros((len(sentences), max_seq_length), dtype=np.int64)
    mask, label_ids = np.zeros_like(rows), np.full_like(rows, IGNORE_INDEX)
    for row, sentence in enumerate(sentences):
        pieces, piece_labels = [tokenizer.cls_token_id], [IGNORE_INDEX]
        for word, tag in zip(sentence.words, sentence.tags):
            ids = tokenizer.piece_ids(word)  # (the word alone, as run_ner's is_split_into_words)
            if not ids:  # a word with no pieces (U+200B, a control character): no label, as in run_ner
                continue
            pieces += ids
            piece_labels += [index[tag]] + [later[index[tag]] if label_all_pieces else IGNORE_INDEX] * (len(ids) - 1)
        pieces, piece_labels = pieces[: max_seq_length - 1], piece_labels[: max_seq_length - 1]
        pieces.append(tokenizer.sep_token_id)
        piece_labels.append(IGNORE_INDEX)
        rows[row, : len(pieces)], mask[row, : len(pieces)] = pieces, 1
        label_ids[row, : len(pieces)] = piece_labels
    return Features(rows, mask, np.zeros_like(rows), label_ids)


def check_tags(sentences: list[Sentence], labels: list[str], path: str | os.PathLike, flag: str) -> None:
    known = set(labels)
    for sentence in sentences:
        for offset, tag in enumerate(sentence.tags):
            if tag not in known:
                raise DataError(f"{flag} {path}, line {sentence.line + offset}: tag {tag!r} is not among the training "
                                f"tags ({shown_labels(labels)}); give them all with --labels")  # fmt: skip


def _end_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    return (prev_tag in ("E", "S") or (prev_tag in ("B", "I") and tag in ("B", "S", "O"))
            or (prev_tag not in ("O", ".") and prev_type != type_))  # fmt: skip


def _start_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    return (tag in ("B", "S") or (prev_tag in ("E", "S", "O") and tag in ("E", "I"))
            or (tag not in ("O", ".") and prev_type != type_))  # fmt: skip


def get_entities(tags: list[str]) -> list[tuple[str, int, int]]:
    """(type, first, last) of every entity in a tag sequence, as seqeval's ``get_entities``."""
    chunks, prev_tag, prev_type, begin = [], "O", "", 0
    for position, chunk in enumerate([*tags, "O"]):
        tag, type_ = chunk[0], chunk[1:].split("-", maxsplit=1)[-1] or "_"
        if _end_of_chunk(prev_tag, tag, prev_type, type_):
            chunks.append((prev_type, begin, position - 1))
        if _start_of_chunk(prev_tag, tag, prev_type, type_):
            begin = position
        prev_tag, prev_type = tag, type_
    return chunks


def entity_scores(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    """Micro precision, recall and F1 over the entities of every sentence (seqeval's default mode)."""
    true = {(number, *entity) for number, tags in enumerate(gold) for entity in get_entities(tags)}
    found = {(number, *entity) for number, tags in enumerate(predicted) for entity in get_entities(tags)}
    right = len(true & found)
    precision = right / len(found) if found else 0.0
    recall = right / len(true) if true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def tag_metrics(label_ids: np.ndarray, logits: np.ndarray, labels: list[str]) -> dict[str, float]:
    """Dev figures from (N, T) gold ids (-100 where not evaluated) and (N, T, K) logits."""
    predicted = logits.argmax(-1)
    gold_tags, predicted_tags, right, total = [], [], 0, 0
    for gold_row, predicted_row in zip(label_ids, predicted):
        kept = gold_row != IGNORE_INDEX
        gold_tags.append([labels[i] for i in gold_row[kept]])
        predicted_tags.append([labels[i] for i in predicted_row[kept]])
        right, total = right + int((gold_row[kept] == predicted_row[kept]).sum()), total + int(kept.sum())
    return {**entity_scores(gold_tags, predicted_tags), "accuracy": right / max(total, 1)}


class Tag(Finetuning):
    name = "tag"
    network_class = BertForTokenClassification

    def read(self, options) -> tuple:
        """CoNLL files → sentences → pieces with the first piece of each word labelled."""
        train_sentences = read_conll(options.train)
        dev_sentences = read_conll(options.dev) if options.dev else None
        stated = bool(options.labels)
        labels = list(options.labels) if stated else sorted({tag for s in train_sentences for tag in s.tags})
        labels, continues = fit_labels(options.model, labels, self.problem, stated)
        check_tags(train_sentences, labels, options.train, "--train")
        if dev_sentences:
            check_tags(dev_sentences, labels, options.dev, "--dev")
        refuse_a_single_label(labels, options)
        tokenizer = load_tokenizer(options.model)
        length, every = options.max_seq_length, options.label_all_pieces
        train = tag_features(train_sentences, tokenizer, length, labels, every)
        dev = tag_features(dev_sentences, tokenizer, length, labels) if dev_sentences else None
        return train, dev, labels, continues, tokenizer

    def denominators(self, train, rows: np.ndarray) -> dict[str, float]:
        """The global batch's labelled pieces (at least 1: a batch of unlabelled pieces has loss 0)."""
        return {"labelled": float(max(int((train.label_ids[rows] != IGNORE_INDEX).sum()), 1))}

    def sums(self, model, piece: dict[str, torch.Tensor], denominators: dict[str, float]) -> PieceSums:
        """Real tokens only, as classify's: a [PAD] piece is never labelled."""
        out = model.bert(piece["input_ids"], piece["input_mask"], piece["segment_ids"], use_fast_path=True,
                         skip_padding=True, **AS_ASKED)  # fmt: skip
        logits = model.classifier(model.dropout(out.last_hidden_state)).float()  # (B, T, K)
        labels = piece["label_ids"]  # (B, T), -100 where no label counts
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX,
                               reduction="sum") / int(denominators["labelled"])  # fmt: skip
        correct = ((logits.argmax(-1) == labels) & (labels != IGNORE_INDEX)).sum()
        return PieceSums(loss, {"loss": loss.detach(), "correct": correct})

    def figures(self, sums: dict[str, float], denominators: dict[str, float]) -> dict[str, float]:
        return {"loss": sums["loss"], "accuracy": sums["correct"] / denominators["labelled"]}

    def metrics(self, gold: np.ndarray, logits: np.ndarray, data: TrainingData, options) -> dict[str, float]:
        return tag_metrics(gold, logits, data.labels)

    def main_metric(self, options) -> str:
        return "f1"  # seqeval's entity F1


TASK = Tag()
