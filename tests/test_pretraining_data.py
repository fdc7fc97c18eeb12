"""``minibert pretraining-data`` (training/) against Google's create_pretraining_data.py, run by
TensorFlow in its own venv (tf_reference.py): every feature of every instance, in order, on real
documents (Debian's fortunes: a fortune is a document, its lines are the sentences), with a
vocabulary learned from them by Hugging Face tokenizers' BertWordPieceTokenizer.

The features are integers (ids, positions, labels) and 0.0/1.0 weights: the comparisons are exact.
Each TensorFlow run costs seconds, so each configuration runs once per session (cached); the
larger sweeps are marked slow.
"""

from __future__ import annotations

import doctest
import functools
import importlib
import random
from pathlib import Path

import numpy as np
import pytest
from tf_reference import google_master_script, run_reference

from minibert.formats.tfrecord import read_examples
from minibert.training.create import create_pretraining_data
from minibert.training.instances import instances_from_document, truncate_pair
from minibert.training.masking import mask_pieces
from minibert.training.options import InstanceOptions
from minibert.training.records import FEATURE_NAMES
from minibert.training.vocabulary import PretrainingVocabulary

FORTUNES = Path("/usr/share/games/fortunes")
FORTUNE_FILES = ("computers", "science", "people", "politics", "wisdom", "literature", "humorists")


def fortune_documents(count: int, offset: int = 0) -> list[list[str]]:
    """``count`` fortunes (each a list of its non-blank lines), from Debian's fortunes package."""
    if not FORTUNES.is_dir():
        pytest.fail("Debian's fortunes are missing: apt-get install -y fortunes (.ci/run installs them)")
    documents = []
    for name in FORTUNE_FILES:
        for fortune in (FORTUNES / name).read_text(encoding="utf-8").split("\n%\n"):
            lines = [line for line in fortune.split("\n") if line.strip()]
            if lines:
                documents.append(lines)
    return documents[offset : offset + count]


def write_corpus(path: Path, documents: list[list[str]]) -> Path:
    path.write_text("\n\n".join("\n".join(lines) for lines in documents) + "\n", encoding="utf-8")
    return path


def train_vocab(corpus: Path, directory: Path, lowercase: bool, size: int = 3000) -> Path:
    """A vocab.txt learned by tokenizers (the reference learner; not minibert's)."""
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(lowercase=lowercase)
    tokenizer.train([str(corpus)], vocab_size=size, min_frequency=2)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save_model(str(directory))
    return directory / "vocab.txt"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """300 fortunes, and vocabularies learned from them, cased and uncased."""
    directory = tmp_path_factory.mktemp("fortunes")
    text = write_corpus(directory / "corpus.txt", fortune_documents(300))
    return {"text": text, "uncased": train_vocab(text, directory / "uncased", True),
            "cased": train_vocab(text, directory / "cased", False)}  # fmt: skip


# --- every feature of every instance, against Google's script ------------------------------------

CONFIGS = {
    # name: (vocab, flags, whole-word masking (google-research/bert's file), output shards)
    "defaults-128": ("uncased", {"max_seq_length": 128, "random_seed": 12345}, False, 2),
    "wwm-24": ("uncased", {"max_seq_length": 24, "random_seed": 7, "max_predictions_per_seq": 5,
                           "short_seq_prob": 0.3}, True, 1),  # fmt: skip
    "cased-48": ("cased", {"max_seq_length": 48, "random_seed": 3, "masked_lm_prob": 0.2}, False, 3),
}


@functools.cache
def compare_config(name: str, corpus_text: Path, vocab: Path, workdir: Path, master: bool | None = None):
    """Run Google's script and minibert on one configuration; both outputs, each read by TensorFlow
    and by minibert's reader."""
    vocab_name, flags, whole_word, shards = CONFIGS[name]
    flags = {"dupe_factor": 2, "max_predictions_per_seq": 20, "masked_lm_prob": 0.15, "short_seq_prob": 0.1,
             **flags, "do_lower_case": vocab_name == "uncased"}  # fmt: skip
    out = workdir / name
    out.mkdir()
    google_files = [str(out / f"google{index}.tfrecord") for index in range(shards)]
    minibert_files = [out / f"minibert{index}.tfrecord" for index in range(shards)]
    use_master = whole_word if master is None else master
    request = {"mode": "create", "read_paths": [str(path) for path in minibert_files],
               "flags": {**flags, "input_file": str(corpus_text), "vocab_file": str(vocab),
                         "output_file": ",".join(google_files)}}  # fmt: skip
    if use_master:
        request["script"] = str(google_master_script(out))
        request["flags"]["do_whole_word_mask"] = whole_word
    options = InstanceOptions(max_seq_length=flags["max_seq_length"], dupe_factor=flags["dupe_factor"],
                              max_predictions_per_seq=flags["max_predictions_per_seq"],
                              masked_lm_prob=flags["masked_lm_prob"], short_seq_prob=flags["short_seq_prob"],
                              whole_word_mask=whole_word)  # fmt: skip
    create_pretraining_data([corpus_text], vocab, minibert_files, options, flags["random_seed"],
                            flags["do_lower_case"])  # fmt: skip
    result = run_reference(request)
    assert result["returncode"] == 0, f"Google's script failed: {result['stderr_tail']}"
    return {
        "google_by_tf": result["instances"],
        "minibert_by_tf": result["read"],
        "google_by_minibert": [_as_lists(read_examples(path)) for path in google_files],
        "minibert_by_minibert": [_as_lists(read_examples(path)) for path in minibert_files],
    }


def _as_lists(examples) -> list[dict]:
    return [{name: example[name].tolist() for name in FEATURE_NAMES} for example in examples]


def assert_same_instances(expected: list[list[dict]], actual: list[list[dict]], what: str) -> None:
    """Every feature of every instance, file by file, in order; the first difference is named."""
    assert [len(shard) for shard in actual] == [len(shard) for shard in expected], f"{what}: instance counts"
    for shard, (want_shard, got_shard) in enumerate(zip(expected, actual)):
        for index, (want, got) in enumerate(zip(want_shard, got_shard)):
            for name in FEATURE_NAMES:
                assert got[name] == want[name], (
                    f"{what}: file {shard}, instance {index}, {name}:\n  expected {want[name]}\n  got      {got[name]}"
                )


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_instances_equal_googles(name, corpus, tmp_path_factory):
    """minibert's instances = Google's, every feature, same order, same round-robin shards."""
    vocab_name = CONFIGS[name][0]
    outputs = compare_config(name, corpus["text"], corpus[vocab_name], tmp_path_factory.mktemp("config"))
    google = outputs["google_by_tf"]
    assert sum(len(shard) for shard in google) > 300, "too few instances to prove much"
    assert_same_instances(google, outputs["minibert_by_tf"], "minibert's files as TensorFlow reads them")
    assert_same_instances(google, outputs["minibert_by_minibert"], "minibert's files as minibert reads them")
    assert_same_instances(google, outputs["google_by_minibert"], "Google's files as minibert's reader reads them")
    labels = [example["next_sentence_labels"][0] for shard in google for example in shard]
    assert 0 < np.mean(labels) < 1, "both next-sentence labels occur"


def test_googles_two_versions_agree_without_whole_word_masking(corpus, tmp_path_factory):
    """google-research/bert's file (vendored, for --do_whole_word_mask) without the flag = the PyPI
    package's: so the whole-word reference is the same program plus the flag."""
    workdir = tmp_path_factory.mktemp("versions")
    package = compare_config("cased-48", corpus["text"], corpus["cased"], workdir / "a" if False else workdir)
    master = compare_config("cased-48", corpus["text"], corpus["cased"], tmp_path_factory.mktemp("m"), True)
    assert_same_instances(package["google_by_tf"], master["google_by_tf"], "google-research/bert vs 1.0.4")


# --- the tokenizer, against Google's FullTokenizer -----------------------------------------------

EDGE_LINES = [
    "Typed special tokens are text to Google: [MASK] [CLS] [SEP] [UNK]",
    "a" * 150 + " is a word of 150 characters (Google's limit is 200, transformers' 100)",
    "b" * 201 + " is over Google's limit",
    "Crème BRÛLÉE, naïve café; Straße — “quotes” … 中文字 ＡＢＣ",
    "tabs\tand\u00a0no-break\u2028line separator\x0cform feed\x1cfile separator",
]


@pytest.mark.parametrize("case", ["uncased", "cased"])
def test_pieces_equal_google_full_tokenizer(case, corpus):
    lines = [line for line in corpus["text"].read_text(encoding="utf-8").split("\n") if line.strip()]
    lines += EDGE_LINES
    google = run_reference({"mode": "tokenize", "vocab_file": str(corpus[case]), "do_lower_case": case == "uncased",
                            "lines": lines})["pieces"]  # fmt: skip
    vocabulary = PretrainingVocabulary.load(corpus[case], do_lower_case=case == "uncased")
    for line, want in zip(lines, google):
        got = [vocabulary.tokens[index] for index in vocabulary.piece_ids(line.strip())]
        assert got == want, f"{line!r}:\n  Google   {want}\n  minibert {got}"


def test_docstring_examples():
    for name in ("options", "vocabulary", "masking", "instances", "records", "documents", "create"):
        module = importlib.import_module(f"minibert.training.{name}")
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
