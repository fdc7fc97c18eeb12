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
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from spread import cores, split
from test_formats_tfrecord_hostile import CASES as TFRECORD_CASES
from test_formats_tfrecord_hostile import TENSORFLOW_DIES, damaged_files
from unicode_text import every_category_lines, vocabulary_of

from minibert.formats.tfrecord import read_examples
from minibert.training.pretraining_data.create import create_pretraining_data
from minibert.training.pretraining_data.full_tokenizer import PretrainingVocabulary
from minibert.training.pretraining_data.instances import instances_from_document, truncate_pair
from minibert.training.pretraining_data.masking import mask_pieces
from minibert.training.pretraining_data.options import InstanceOptions
from minibert.training.pretraining_data.records import FEATURE_NAMES
from tf_reference import google_master_script, run_reference, tf_python

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
    """300 fortunes, and vocabularies learned from them, cased and uncased; two files of odd lines
    (line-break-like characters inside lines, a bare \r, \r\n, whitespace-only lines, no final newline, the
    second file continuing the first's last document); a file with invalid UTF-8 and the same file
    decoded with errors="ignore"."""
    directory = tmp_path_factory.mktemp("fortunes")
    text = write_corpus(directory / "corpus.txt", fortune_documents(300))
    odd = ["\n".join(lines) for lines in fortune_documents(80, offset=300)]
    odd = [fortune.replace(" the ", " the\x0c", 1).replace(" a ", " a\u2028", 1).replace(", ", ",\x1c\x85 ", 1)
           .replace(" and ", " and\r", 1).replace(" of ", " of\x0b", 1).replace("s ", "s\rs ", 1)
           for fortune in odd]  # fmt: skip  (a bare \r inside a line: TensorFlow drops it, joining words)
    first = "\n \t\n".join(fortune.replace("\n", "\r\n") for fortune in odd[:40]) + "\n"  # \r\n; blank: spaces
    (directory / "odd1.txt").write_bytes(first.encode())  # ends inside a document: odd2.txt continues it
    (directory / "odd2.txt").write_bytes("\n\n".join(odd[40:]).encode())  # no final newline
    dirty = "\n\n".join("\n".join(lines) for lines in fortune_documents(60, offset=380)).encode()
    dirty = dirty.replace(b"e ", b"e\xff ", 40).replace(b"s.", b"s\xc3.", 20).replace(b"t", b"\x80t", 9)
    (directory / "dirty.txt").write_bytes(dirty)
    (directory / "cleaned.txt").write_text(dirty.decode("utf-8", "ignore"), encoding="utf-8")
    vocabularies = {"uncased": train_vocab(text, directory / "uncased", True),
                    "cased": train_vocab(text, directory / "cased", False)}  # fmt: skip
    # (without NUL, which pretraining-data refuses as not text: the tokenizer tests cover its removal)
    unicode_lines = [line.replace("\x00", "") for line in every_category_lines(step=211)]
    unicode_documents = [unicode_lines[start : start + 8] for start in range(0, len(unicode_lines), 8)]
    vocabularies["unicode"] = write_corpus(directory / "unicode.txt", unicode_documents)
    vocabularies["unicode-vocab"] = directory / "unicode-vocab.txt"
    vocabularies["unicode-vocab"].write_text("\n".join(vocabulary_of(unicode_lines)) + "\n", encoding="utf-8")
    return {"text": text, **vocabularies, "odd": [directory / "odd1.txt", directory / "odd2.txt"],
            "dirty": directory / "dirty.txt", "cleaned": directory / "cleaned.txt"}  # fmt: skip


# --- every feature of every instance, against Google's script ------------------------------------

CONFIGS = {
    # name: (vocab, flags, whole-word masking, google-research/bert's file (else the PyPI package's), shards)
    "defaults-128": ("uncased", {"max_seq_length": 128, "random_seed": 12345}, False, False, 2),
    "wwm-24": (
        "uncased",
        {"max_seq_length": 24, "random_seed": 7, "max_predictions_per_seq": 5, "short_seq_prob": 0.3},
        True,
        True,
        1,
    ),  # fmt: skip
    "cased-48": ("cased", {"max_seq_length": 48, "random_seed": 3, "masked_lm_prob": 0.2}, False, False, 3),
    "cased-48-master": ("cased", {"max_seq_length": 48, "random_seed": 3, "masked_lm_prob": 0.2}, False, True, 3),
    "odd-lines-two-files": ("uncased", {"max_seq_length": 40, "random_seed": 11, "dupe_factor": 5}, True, True, 1),
    "invalid-utf8-ignored": ("uncased", {"max_seq_length": 64, "random_seed": 5, "dupe_factor": 8}, False, False, 1),
    # text holding every Unicode category (tests/unicode_text.py), with a vocabulary of its characters
    "every-category-uncased-preserve-unused": (
        "unicode-vocab", {"max_seq_length": 64, "random_seed": 9, "do_lower_case": True, "dupe_factor": 10,
                          "preserve_unused_tokens": True}, False, False, 1),  # fmt: skip
    "every-category-cased": (
        "unicode-vocab", {"max_seq_length": 48, "random_seed": 4, "do_lower_case": False, "dupe_factor": 6},
        False, False, 1),  # fmt: skip
}
INPUTS = {"odd-lines-two-files": ("odd", "odd"), "invalid-utf8-ignored": ("dirty", "cleaned"),
          "every-category-uncased-preserve-unused": ("unicode", "unicode"),
          "every-category-cased": ("unicode", "unicode")}  # (minibert's, Google's)  # fmt: skip


def config_job(name: str, configs: dict, corpus: dict, workdir: Path, later: bool = False) -> dict:
    """Make minibert's files for one configuration; the job that has Google's script make its own
    and TensorFlow read both. ``later``: minibert's files are made by run_jobs, while TensorFlow runs
    Google's script (the job's "_make"), and TensorFlow reads them once "wait_for" exists."""
    vocab_name, flags, whole_word, _, shards = configs[name]
    flags = {"dupe_factor": 2, "max_predictions_per_seq": 20, "masked_lm_prob": 0.15, "short_seq_prob": 0.1,
             "do_lower_case": vocab_name == "uncased", **flags}  # fmt: skip
    out = workdir / name
    out.mkdir()
    google_files = [str(out / f"google{index}.tfrecord") for index in range(shards)]
    minibert_files = [str(out / f"minibert{index}.tfrecord") for index in range(shards)]
    options = InstanceOptions(max_seq_length=flags["max_seq_length"], dupe_factor=flags["dupe_factor"],
                              max_predictions_per_seq=flags["max_predictions_per_seq"],
                              masked_lm_prob=flags["masked_lm_prob"], short_seq_prob=flags["short_seq_prob"],
                              whole_word_mask=whole_word)  # fmt: skip
    ours, googles = (_paths(corpus[key]) for key in INPUTS.get(name, ("text", "text")))
    invalid_utf8 = "ignore" if name == "invalid-utf8-ignored" else "error"
    make = functools.partial(create_pretraining_data, ours, corpus[vocab_name], minibert_files, options,
                             flags["random_seed"], flags["do_lower_case"], invalid_utf8=invalid_utf8,
                             preserve_unused_tokens=flags.get("preserve_unused_tokens", False))  # fmt: skip
    if not later:
        make()
    flags = {**flags, "input_file": ",".join(map(str, googles)), "vocab_file": str(corpus[vocab_name]),
             "output_file": ",".join(google_files)}  # fmt: skip
    if configs[name][3]:
        flags["do_whole_word_mask"] = whole_word
    job = {"mode": "create", "flags": flags, "read_paths": minibert_files, "name": name}
    return {**job, "_make": make, "wait_for": str(out / "minibert-files-made")} if later else job


def _paths(value) -> list[Path]:
    return list(value) if isinstance(value, list) else [value]


def run_jobs(jobs: list[dict], workdir: Path, parts: int = 1) -> dict:
    """Run the jobs in TensorFlow processes, all at once (one per core at a time): one per version
    of Google's script, each version's jobs split over ``parts`` processes. Results by job name.
    Meanwhile, the jobs of config_job(later=True) have minibert's files made here, in the order the
    processes reach them, each followed by its "wait_for" marker."""
    master_script = str(google_master_script(workdir)) if any(job["_master"] for job in jobs) else None
    requests = []
    for master in (False, True):
        for group in split([job for job in jobs if job["_master"] == master], parts):
            if group:
                request = {"script": master_script if master else None,
                           "jobs": [{k: v for k, v in job.items() if k[0] != "_"} for job in group]}  # fmt: skip
                requests.append((group, request))
    with ThreadPoolExecutor(cores()) as pool:  # each thread waits on its own TensorFlow process
        running = [pool.submit(run_reference, request) for _, request in requests]
        try:
            for job in jobs:
                if "_make" in job:
                    job["_make"]()
                    Path(job["wait_for"]).touch()
        finally:  # minibert failed: no process waits for ever
            for job in jobs:
                if "wait_for" in job:
                    Path(job["wait_for"]).touch()
        answers = [future.result() for future in running]
    return {job["name"]: {**result, "job": job}
            for (group, _), answer in zip(requests, answers) for job, result in zip(group, answer)}  # fmt: skip


def assert_same_arrays(expected: list[str], actual: list[str], what: str) -> None:
    """assert_same_instances for the .npz files of a job run with "arrays_dir" (tf_google_runner.py):
    every feature of every instance, file by file, in order; the first differing instance is named."""
    assert len(actual) == len(expected), f"{what}: file counts"
    for shard, (want_file, got_file) in enumerate(zip(expected, actual)):
        want, got = np.load(want_file), np.load(got_file)
        assert len(got["input_ids"]) == len(want["input_ids"]), f"{what}: file {shard}, instance counts"
        for name in FEATURE_NAMES:
            if not np.array_equal(got[name], want[name]):
                index = int(np.flatnonzero((got[name] != want[name]).any(axis=1))[0])
                want_row, got_row = want[name][index].tolist(), got[name][index].tolist()
                where = f"{what}: file {shard}, instance {index}, {name}"
                raise AssertionError(f"{where}:\n  expected {want_row}\n  got      {got_row}")


def _as_lists(examples) -> list[dict]:
    return [{name: example[name].tolist() for name in FEATURE_NAMES} for example in examples]


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    """Every default-suite job against Google's code, in two TensorFlow processes (package, master) at once."""
    workdir = tmp_path_factory.mktemp("reference")
    jobs = [{**config_job(name, CONFIGS, corpus, workdir), "_master": CONFIGS[name][3]} for name in CONFIGS]
    lines = [line for line in corpus["text"].read_text(encoding="utf-8").split("\n") if line.strip()] + EDGE_LINES
    dirty = {**jobs[0]["flags"], "input_file": str(corpus["dirty"]), "output_file": str(workdir / "dirty.tfrecord")}
    jobs.append({"mode": "create", "flags": dirty, "name": "google-on-invalid-utf8", "_master": False})
    for case in ("uncased", "cased"):
        jobs.append({"mode": "tokenize", "vocab_file": str(corpus[case]), "do_lower_case": case == "uncased",
                     "lines": lines, "name": f"tokenize-{case}", "_master": False})  # fmt: skip
    damaged = damaged_files(workdir)
    jobs.append({"mode": "read_each", "paths": [str(path) for path in damaged.values()], "name": "damaged",
                 "cases": list(damaged), "_master": False})  # fmt: skip
    jobs.append({"mode": "calls", "calls": [call for call, _ in EDGE_CALLS.values()], "name": "calls",
                 "_master": True})  # fmt: skip
    results = run_jobs(jobs, workdir)
    results["lines"] = lines
    return results


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
def test_instances_equal_googles(name, reference):
    """minibert's instances = Google's, every feature, same order, same round-robin shards; each
    side's files read by TensorFlow (CRCs checked) and by minibert's reader."""
    result = reference[name]
    assert result["error"] is None, f"Google's script failed: {result['error']}"
    google = result["instances"]
    assert sum(len(shard) for shard in google) > 300, "too few instances to prove much"
    minibert_files, google_files = result["job"]["read_paths"], result["job"]["flags"]["output_file"].split(",")
    assert_same_instances(google, result["read"], "minibert's files as TensorFlow reads them")
    assert_same_instances(google, [_as_lists(read_examples(path)) for path in minibert_files],
                          "minibert's files as minibert reads them")  # fmt: skip
    assert_same_instances(google, [_as_lists(read_examples(path)) for path in google_files],
                          "Google's files as minibert's reader reads them")  # fmt: skip
    labels = [example["next_sentence_labels"][0] for shard in google for example in shard]
    assert 0 < np.mean(labels) < 1, "both next-sentence labels occur"


def test_google_under_tensorflow_2_dies_on_invalid_utf8(reference):
    """Google's convert_to_unicode would drop the bytes (decode "ignore"), but TensorFlow 2's file
    reader decodes strictly first: the script stops with a UnicodeDecodeError and no line number.
    minibert names the file and line, or, with --invalid-utf8 ignore, drops the bytes as
    convert_to_unicode does: the "invalid-utf8-ignored" configuration above is Google's instances
    for the text with those bytes removed."""
    assert (reference["google-on-invalid-utf8"]["error"] or "").startswith("UnicodeDecodeError")


def test_tensorflow_refuses_the_damaged_tfrecords_too(reference):
    """The file-level hostile cases of test_formats_tfrecord_hostile.py (cut files, wrong CRCs, lengths past
    the file) are damage by TensorFlow's judgement as well: its reader refuses each, except a file
    that ends inside a record header, which TensorFlow takes for the end of the file (the records
    before it are read, the cut one silently dropped). minibert refuses that too."""
    result = reference["damaged"]
    outcomes = dict(zip(result["job"]["cases"], result["outcomes"]))
    assert len(outcomes) >= 15
    accepted = {name: outcome for name, outcome in outcomes.items() if not outcome.startswith("refused")}
    assert accepted == {"cut inside the first header": "read 0 records", "cut inside a later header": "read 3 records",
                        "three stray bytes after the last record": "read 5 records"}, accepted  # fmt: skip


SWEEP = {f"sweep-{length}-{seed}-{'wwm' if whole_word else 'pieces'}-{case}": (
    case, {"max_seq_length": length, "random_seed": seed, "dupe_factor": 3, "short_seq_prob": 0.2,
           "max_predictions_per_seq": max(1, length // 6)}, whole_word, True, 1)
    for length, seed, whole_word, case in [(8, 1, True, "uncased"), (16, 2, False, "cased"), (32, 3, True, "cased"),
                                          (64, 4, False, "uncased"), (128, 5, True, "uncased"),
                                          (256, 6, False, "uncased"), (512, 7, True, "cased")]}  # fmt: skip


@pytest.mark.slow
def test_sweep_of_lengths_seeds_and_masking_equals_google(tmp_path_factory):
    """1,500 fortunes, seven configurations (lengths 8 to 512, whole-word masking on and off, cased
    and uncased, other seeds): every feature of every instance equals Google's. TensorFlow reads
    both sides' files into arrays (.npz: 27 M ids each side, which took ~25 s as JSON), and
    minibert makes its files while Google's script runs (the cores took turns before)."""
    directory = tmp_path_factory.mktemp("sweep")
    text = write_corpus(directory / "corpus.txt", fortune_documents(1500))
    corpus = {"text": text, "uncased": train_vocab(text, directory / "uncased", True, 6000),
              "cased": train_vocab(text, directory / "cased", False, 6000)}  # fmt: skip
    jobs = [{**config_job(name, SWEEP, corpus, directory, later=True), "_master": True,
             "arrays_dir": str(directory / name)} for name in SWEEP]  # fmt: skip
    for name, result in run_jobs(jobs, directory, parts=cores()).items():
        assert result["error"] is None, f"{name}: Google's script failed: {result['error']}"
        assert_same_arrays(result["instances"], result["read"], name)


@pytest.mark.slow
def test_tensorflow_dies_on_a_terabyte_length_that_minibert_refuses(tmp_path):
    """A length field of 2**40 with a correct CRC: TensorFlow's reader tries to allocate it and the
    process dies (measured with tensorflow-cpu 2.21); minibert compares it with the file's size
    first (test_formats_tfrecord_hostile.py: a TFRecordError, nothing allocated)."""
    path = tmp_path / "terabyte.tfrecord"
    path.write_bytes(TFRECORD_CASES[TENSORFLOW_DIES][0])
    code = f"import tensorflow as tf\nprint(sum(1 for _ in tf.data.TFRecordDataset([{str(path)!r}])))"
    done = subprocess.run([tf_python(), "-c", code], capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback" not in done.stderr, (done.returncode, done.stderr[-500:])


def test_googles_two_versions_agree_without_whole_word_masking(reference):
    """google-research/bert's file (vendored, for --do_whole_word_mask) without the flag makes the
    PyPI package's instances: the whole-word reference is the same program plus the flag."""
    package, master = reference["cased-48"], reference["cased-48-master"]
    assert_same_instances(package["instances"], master["instances"], "google-research/bert vs bert-tensorflow 1.0.4")


# --- REFERENCE.md's edge cases, each against Google's own function ------------------------------

SMALL_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "the", "cat", "##s", "sat", "##ting", "on",
               "mat", "a", "dog", "##gy", "ran"]  # fmt: skip
IDS = {token: index for index, token in enumerate(SMALL_VOCAB)}
CONTINUATION = [token.startswith("##") for token in SMALL_VOCAB]
FRAME = (IDS["[CLS]"], IDS["[SEP]"])
WORDS = ["the", "cat", "##s", "sat", "on", "a", "mat", "dog", "##gy", "ran", "##ting"]


def _masking(tokens, prob, max_predictions, seed, whole_word=False):
    return {"function": "create_masked_lm_predictions", "seed": seed, "whole_word_mask": whole_word,
            "args": {"tokens": tokens, "masked_lm_prob": prob, "max_predictions": max_predictions,
                     "vocab_words": SMALL_VOCAB}}  # fmt: skip


def _document(all_documents, index, max_seq_length, seed, short_seq_prob=0.0):
    return {"function": "create_instances_from_document", "seed": seed,
            "args": {"all_documents": all_documents, "document_index": index, "max_seq_length": max_seq_length,
                     "short_seq_prob": short_seq_prob, "masked_lm_prob": 0.15, "max_predictions": 20,
                     "vocab_words": SMALL_VOCAB}}  # fmt: skip


def _sentences(count: int, length: int, start: int = 0) -> list[list[str]]:
    return [[WORDS[(start + number * length + k) % 10] for k in range(length)] for number in range(count)]


def _edge_calls() -> dict:
    calls = {}
    for seed in range(3):
        calls[f"round-2.5-to-even-{seed}"] = (_masking(["[CLS]", *WORDS[:8], "[SEP]"], 0.25, 20, seed), 2)
        calls[f"round-3.5-to-even-{seed}"] = (_masking(["[CLS]", *WORDS[:6], "[SEP]", *WORDS[:5], "[SEP]"], 0.25,
                                                       20, seed), 4)  # fmt: skip
        calls[f"at-least-one-{seed}"] = (_masking(["[CLS]", "the", "[SEP]", "cat", "[SEP]"], 0.1, 20, seed), 1)
    for seed in range(12):  # B's first piece "##ting" was cut from its word: it joins A's last word "cat ##s"
        tokens = ["[CLS]", "the", "cat", "##s", "[SEP]", "##ting", "on", "[SEP]"]
        calls[f"wwm-##-at-start-of-B-{seed}"] = (_masking(tokens, 0.375, 20, seed, whole_word=True), "wwm")
    for seed in range(6):
        tokens = ["[CLS]", *(WORDS * 4)[:40], "[SEP]", "dog", "[SEP]"]
        calls[f"random-piece-from-whole-vocab-{seed}"] = (_masking(tokens, 1.0, 43, seed), "random")
    one_sentence_documents = [[sentence] for sentence in _sentences(5, 4)]
    for seed in range(5):
        calls[f"one-sentence-documents-{seed}"] = (_document(one_sentence_documents, seed, 12, seed), "documents")
        calls[f"one-document-ten-tries-{seed}"] = (_document([_sentences(6, 3)], 0, 10, seed), "documents")
    for seed in range(8):
        documents = [_sentences(8, 3), _sentences(3, 5, 4), _sentences(2, 2, 7)]
        calls[f"sentences-put-back-{seed}"] = (_document(documents, 0, 14, seed, short_seq_prob=0.5), "documents")
    for seed, (a, b, limit) in enumerate([(10, 3, 4), (3, 10, 4), (5, 5, 4), (6, 6, 11), (1, 40, 2)]):
        call = {
            "function": "truncate_seq_pair",
            "seed": seed,
            "args": {"tokens_a": list(range(a)), "tokens_b": list(range(100, 100 + b)), "max_num_tokens": limit},
        }
        calls[f"truncate-{a}-{b}-to-{limit}"] = (call, "truncate")  # fmt: skip
    return calls


EDGE_CALLS = _edge_calls()


def run_ours(call: dict) -> dict:
    """The same call in minibert (ids for tokens), with the rng's next draw."""
    args, rng = call["args"], random.Random(call["seed"])
    if call["function"] == "create_masked_lm_predictions":
        ids = [IDS[token] for token in args["tokens"]]
        masked, positions, labels = mask_pieces(
            ids, CONTINUATION, IDS["[MASK]"], args["masked_lm_prob"], args["max_predictions"], call["whole_word_mask"],
            rng, FRAME,
        )  # fmt: skip
        value = {"tokens": [SMALL_VOCAB[i] for i in masked], "positions": positions,
                 "labels": [SMALL_VOCAB[i] for i in labels]}  # fmt: skip
    elif call["function"] == "truncate_seq_pair":
        tokens_a, tokens_b = truncate_pair(args["tokens_a"], args["tokens_b"], args["max_num_tokens"], rng)
        value = {"tokens_a": tokens_a, "tokens_b": tokens_b}
    else:
        documents = [
            [[IDS[token] for token in sentence] for sentence in document] for document in args["all_documents"]
        ]
        options = InstanceOptions(
            max_seq_length=args["max_seq_length"],
            short_seq_prob=args["short_seq_prob"],
            masked_lm_prob=args["masked_lm_prob"],
            max_predictions_per_seq=args["max_predictions"],
        )
        instances = instances_from_document(documents, args["document_index"], FRAME, IDS["[MASK]"], CONTINUATION,
                                            options, rng)  # fmt: skip
        value = [{"tokens": [SMALL_VOCAB[i] for i in instance.input_ids], "segment_ids": instance.segment_ids,
                  "positions": instance.masked_lm_positions,
                  "labels": [SMALL_VOCAB[i] for i in instance.masked_lm_ids],
                  "is_random_next": instance.is_random_next} for instance in instances]  # fmt: skip
    return {"value": value, "next_draw": rng.random()}


@pytest.mark.parametrize("name", list(EDGE_CALLS))
def test_edge_case_equals_googles_function(name, reference):
    """Google's function and minibert's on the same input and seed: the same result, and the same
    next random number afterwards (so the same numbers were drawn: e.g. no draw for the random-next
    test of a one-sentence chunk, Python's or short-circuits)."""
    call, expectation = EDGE_CALLS[name]
    google = reference["calls"]["results"][list(EDGE_CALLS).index(name)]
    ours = run_ours(call)
    assert ours == google, f"{name}:\n  Google   {google}\n  minibert {ours}"
    value = ours["value"]
    if isinstance(expectation, int):  # num_to_predict = max(1, round(len · prob)), Python 3's round
        assert len(value["positions"]) == expectation
    elif expectation == "wwm":  # cat ##s | ##ting: masked together or not at all
        assert set(value["positions"]) & {2, 3, 5} in (set(), {2, 3, 5})


def test_edge_cases_occur():
    """The edge-case inputs do exercise their edge (checked on minibert's side; the test above
    proves Google's side equal)."""
    results = {name: run_ours(call)["value"] for name, (call, _) in EDGE_CALLS.items()}
    assert any({2, 3, 5} <= set(v["positions"]) for n, v in results.items() if n.startswith("wwm"))
    specials = {"[PAD]", "[CLS]", "[SEP]", "[unused0]", "[UNK]"}
    replaced = [token for name, v in results.items() if name.startswith("random-piece") for token in
                (v["tokens"][p] for p in v["positions"]) if token in specials]  # fmt: skip
    assert replaced, "a random replacement drew a special or unused entry of the vocabulary"
    put_back = [v for n, v in results.items() if n.startswith("sentences-put-back")]
    labels = {instance["is_random_next"] for value in put_back for instance in value}
    assert labels == {True, False}, "random next (sentences put back) and actual next both occur"
    assert any(len(v) > 1 for n, v in results.items() if n.startswith("one-document")), "the one document is reused"


# --- the tokenizer, against Google's FullTokenizer -----------------------------------------------

EDGE_LINES = [
    "Typed special tokens are text to Google: [MASK] [CLS] [SEP] [UNK]",
    "a" * 150 + " is a word of 150 characters (Google's limit is 200, transformers' 100)",
    "b" * 201 + " is over Google's limit",
    "Crème BRÛLÉE, naïve café; Straße — “quotes” … 中文字 ＡＢＣ",
    "tabs\tand\u00a0no-break\u2028line separator\x0cform feed\x1cfile separator",
    "ΟΔΟΣ ΣΟΦΟΣ. ΣΑΣ, Σ ΑΣ-ΑΣ ΑΣ\x00Β ΟΔΟΣ\u200bΑ ΟΔΟΣ\x7f ΟΔΟΣ\U0002a6e0 Σ中Σ",  # final sigma, Google's way
]


@pytest.mark.parametrize("case", ["uncased", "cased"])
def test_pieces_equal_google_full_tokenizer(case, corpus, reference):
    """minibert's tokenizer set up as Google's (pretraining_data/full_tokenizer.py) = FullTokenizer, line by line."""
    google = reference[f"tokenize-{case}"]["pieces"]
    vocabulary = PretrainingVocabulary.load(corpus[case], do_lower_case=case == "uncased")
    for line, want in zip(reference["lines"], google, strict=True):
        got = [vocabulary.tokens[index] for index in vocabulary.piece_ids(line.strip())]
        assert got == want, f"{line!r}:\n  Google   {want}\n  minibert {got}"


def test_docstring_examples():
    for name in ("options", "full_tokenizer", "masking", "instances", "records", "documents", "create"):
        module = importlib.import_module(f"minibert.training.pretraining_data.{name}")
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
