"""Fine-tuning trains on the tokens its run folder is served with: every task's features (read back
from ``--write-features``' TFRecord file) are the ids transformers' own tokenizer of ``--model`` gives
— the tokenizer run_glue/run_ner/run_qa tokenize with, and the one the run saves for ``minibert
classify``/``tag``/``answer``/``serve`` and transformers' pipelines. The model folder is where Google's
FullTokenizer and the model's tokenizer part (docs/tokenizer.md): tokens added with ``add_tokens``
(embeddings resized), ``strip_accents: false`` in its tokenizer config, ``[SEP]`` typed in a text, a
word of 101-200 characters, a private-use character, a final capital sigma."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from minibert.apps.cli import main
from minibert.formats.tfrecord import read_examples

ADDED = ["<e1>", "</e1>"]
TEXTS = [("the cat sat [SEP] a cat sits", "café naïve résumé"),
         ("<e1> paris </e1> is big", None),
         ("Ölçü " + "b" * 150 + " ΟΔΟΣ", "x\ue000y [MASK] done"),
         ("plain words only", "and a second text")]


@pytest.fixture(scope="module")
def model(tmp_path_factory, minilm_dir) -> Path:
    """A small BERT with MiniLM's vocabulary, two tokens added by transformers (their rows made by
    ``resize_token_embeddings``) and accents kept (``strip_accents: false``), saved by transformers."""
    transformers = pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("served") / "model"
    folder.mkdir()
    (folder / "vocab.txt").write_bytes((minilm_dir / "vocab.txt").read_bytes())
    settings = {"do_lower_case": True, "strip_accents": False, "model_max_length": 128}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    tokenizer = transformers.BertTokenizer.from_pretrained(folder)
    tokenizer.add_tokens(ADDED)
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=37, max_position_embeddings=128)  # fmt: skip
    network = transformers.BertModel(config)
    network.resize_token_embeddings(len(tokenizer))
    network.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def served(folder: Path):
    """transformers' tokenizer of the folder: what its pipelines (and run_glue, run_ner) tokenize with."""
    return pytest.importorskip("transformers").AutoTokenizer.from_pretrained(folder)


def written_features(tmp_path: Path, *argv: str) -> list[dict]:
    """``minibert finetune ... --write-features``' records, each cut to its real tokens."""
    path = tmp_path / "features.tfrecord"
    assert main(["finetune", *argv, "--max-seq-length", "128", "--write-features", str(path)]) == 0
    records = []
    for record in read_examples(path):
        real = int(np.asarray(record["input_mask"]).sum())
        records.append({name: np.asarray(record[name])[:real].tolist() for name in ("input_ids", "segment_ids")})
    return records


def test_the_folder_is_where_the_two_tokenizers_part(model, minilm_dir):
    """The case is real: Google's tokenizer (the features before) gives other pieces on every text."""
    from minibert.tokenizer.google import google_tokenizer

    google = google_tokenizer(served(minilm_dir).get_vocab())
    tokenizer = served(model)
    for text in (text for pair in TEXTS[:3] for text in pair if text):
        assert google.piece_ids(text) != tokenizer(text, add_special_tokens=False)["input_ids"], text


def test_classify_features_are_the_served_ids(tmp_path, model):
    """Texts and pairs (no cut at 128): ids and segments are those of transformers' tokenizer(text, pair)."""
    with open(tmp_path / "train.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "pair", "label"])
        writer.writerows([(a, b or "", f"l{number % 2}") for number, (a, b) in enumerate(TEXTS)])
    records = written_features(tmp_path, "--model", str(model), "--train", str(tmp_path / "train.csv"),
                               "--pair-column", "pair")  # fmt: skip
    tokenizer = served(model)
    for (text, pair), record in zip(TEXTS, records, strict=True):
        expected = tokenizer(text, pair)
        assert record["input_ids"] == expected["input_ids"], (text, pair)
        assert record["segment_ids"] == expected["token_type_ids"], (text, pair)


def test_tag_features_are_the_served_ids(tmp_path, model):
    """CoNLL words: the ids of transformers' tokenizer(words, is_split_into_words=True), as run_ner's."""
    sentences = [text.split() for pair in TEXTS for text in pair if text]
    conll = "\n\n".join("\n".join(f"{word} {'B-X' if number % 2 else 'O'}" for number, word in enumerate(words))
                        for words in sentences)  # fmt: skip
    (tmp_path / "train.txt").write_text(conll + "\n", encoding="utf-8")
    records = written_features(tmp_path, "--task", "tag", "--model", str(model), "--train", str(tmp_path / "train.txt"))
    tokenizer = served(model)
    for words, record in zip(sentences, records, strict=True):
        assert record["input_ids"] == tokenizer(words, is_split_into_words=True)["input_ids"], words


def test_answer_windows_are_the_served_ids(tmp_path, model):
    """SQuAD: [CLS] the question's pieces [SEP] each context word's pieces [SEP], all transformers' tokenizer's."""
    contexts = [" ".join(pair) if pair[1] else pair[0] for pair in TEXTS]
    data = [{"title": "t", "paragraphs": [{"context": context, "qas": [
        {"id": f"q{number}", "question": TEXTS[(number + 1) % len(TEXTS)][0],
         "answers": [{"text": context.split()[-1], "answer_start": len(context) - len(context.split()[-1])}]}]}]}
        for number, context in enumerate(contexts)]  # fmt: skip
    (tmp_path / "train.json").write_text(json.dumps({"version": "1.1", "data": data}), encoding="utf-8")
    records = written_features(tmp_path, "--task", "answer", "--model", str(model), "--train",
                               str(tmp_path / "train.json"))  # fmt: skip
    tokenizer = served(model)
    for number, (context, record) in enumerate(zip(contexts, records, strict=True)):
        question = tokenizer(TEXTS[(number + 1) % len(TEXTS)][0], add_special_tokens=False)["input_ids"]
        words = tokenizer(context.split(), is_split_into_words=True, add_special_tokens=False)["input_ids"]
        assert record["input_ids"] == [tokenizer.cls_token_id, *question, tokenizer.sep_token_id, *words,
                                       tokenizer.sep_token_id], context  # fmt: skip


def test_the_run_folder_serves_the_tokens_it_trained_on(tmp_path, model):
    """A run's folder, as transformers loads it, gives the same ids as --model's tokenizer: the features above."""
    rows = [(a, f"l{number % 2}") for number, (a, _) in enumerate(TEXTS)]
    with open(tmp_path / "train.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([("text", "label"), *rows])
    run = tmp_path / "run"
    assert main(["finetune", "--model", str(model), "--train", str(tmp_path / "train.csv"), "--batch-size", "2",
                 "--epochs", "1", "--output", str(run)]) == 0  # fmt: skip
    before, after = served(model), served(run)
    for text, _ in rows:
        assert after(text)["input_ids"] == before(text)["input_ids"], text


def test_added_tokens_without_embeddings_are_refused(tmp_path, model, capsys):
    """Tokens added but the embeddings not resized: ids the model has no row for, refused before any
    work (one line, exit 1) rather than failing at the first batch that holds one."""
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "unresized"
    config = transformers.BertConfig.from_pretrained(model, vocab_size=30522)
    transformers.BertModel(config).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((model / name).read_bytes())
    (tmp_path / "train.csv").write_text("text,label\na,x\nb,y\n", encoding="utf-8")
    capsys.readouterr()
    argv = ["finetune", "--model", str(folder), "--train", str(tmp_path / "train.csv"), "--output", str(tmp_path / "r")]
    assert main(argv) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "the tokenizer has ids up to 30,523 but the model's vocab_size is 30,522" in lines[0]
    assert not (tmp_path / "r").exists()
