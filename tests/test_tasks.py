"""The one-call tasks (minibert.tasks) against the references that define them, on the same
checkpoint and input: transformers' ``text-classification``, ``token-classification`` and
``fill-mask`` pipelines and its next-sentence head, and its ``question-answering`` pipeline
(transformers 4.57.1; version 5 removed it: its answers are in tests/data/qa_reference, made by
scripts/make_qa_reference.py). The checkpoints are task_checkpoints.py's (random weights, heads
scaled up so that the labels vary, and rxnfp's real ones).

Tolerance: labels, words, character spans and order must be equal; scores within 1e-5 — the model
parity bound (logits within 1e-5, fp32), which a softmax or sigmoid does not enlarge (their
derivatives are at most 1/4 and 1).
"""

from __future__ import annotations

import json
import random
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import minibert
from minibert.errors import CheckpointError, TaskArgumentError
from task_checkpoints import (
    NER_LABELS,
    QA_REFERENCE,
    SCORE_TOLERANCE,
    TEXTS,
    TINY,
    minilm_tokenizer_dir,
    ner_model,
    same,
)

transformers = pytest.importorskip("transformers")


# ----------------------------------------------------------------------------- classify


CLASSIFIERS = {
    "three labels": dict(id2label={0: "negative", 1: "neutral", 2: "positive"}),
    "multi-label": dict(num_labels=4, problem_type="multi_label_classification"),
    "one label": dict(num_labels=1),
    "regression": dict(num_labels=1, problem_type="regression"),
}


@pytest.mark.parametrize("kind", CLASSIFIERS)
def test_classify_gives_the_text_classification_pipelines_results(kind, make):
    config = CLASSIFIERS[kind]
    if "id2label" in config:
        config = {**config, "label2id": {v: k for k, v in config["id2label"].items()}}
    directory = make("BertForSequenceClassification", scale=5.0, **config)
    pipeline = transformers.pipeline("text-classification", model=str(directory))
    calls = [{}, {"top_k": 2}, {"top_k": None}, {"function_to_apply": "none"}, {"function_to_apply": "sigmoid"},
             {"function_to_apply": "softmax", "top_k": None}]  # fmt: skip
    for arguments in calls:
        for inputs in (TEXTS[0], TEXTS, {"text": TEXTS[0], "text_pair": TEXTS[1]},
                       {"text": TEXTS[0], "text_pair": ""},  # one input: the tokenizer drops an empty pair
                       [{"text": "a", "text_pair": ""}, {"text": "b", "text_pair": "c"}]):  # each alone, as one input
            theirs = pipeline(inputs, **arguments)
            ours = minibert.classify(inputs, model=directory, **arguments)
            same(ours, theirs, f"{kind} {arguments} {str(inputs)[:20]}")


def test_classify_on_rxnfps_real_fifty_label_classifier():
    """A real fine-tuned checkpoint (transformers 2 era: config.json keeps a 2-label id2label beside
    num_labels 50, so transformers is told 50)."""
    module = pytest.importorskip("rxnfp")
    directory = Path(module.__file__).parent / "models" / "transformers" / "bert_ft_10k_25s"
    model = transformers.BertForSequenceClassification.from_pretrained(str(directory), num_labels=50).eval()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(str(directory))
    pipeline = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer)
    reactions = ["C C ( = O ) O . O C C >> C C O C ( C ) = O", "c 1 c c c c c 1 >> c 1 c c c c c 1 Br"]
    same(minibert.classify(reactions, model=directory, top_k=3), pipeline(reactions, top_k=3), "rxnfp")


def test_classify_reads_up_to_the_models_positions_and_cuts_where_the_pipeline_cuts(make):
    """A tokenizer that says 64 on a model of 128 positions: the pipeline computes a 100-token text
    whole (the tokenizer only logs), and truncation=True cuts it at 64; a text past the model's 128
    positions is refused, as the model cannot compute it (minibert refused at 64, the tokenizer's)."""
    directory = make("BertForSequenceClassification", scale=5.0, max_length=64, num_labels=3)
    pipeline = transformers.pipeline("text-classification", model=str(directory))
    text = "word " * 98  # 100 tokens with [CLS] and [SEP]
    same(minibert.classify(text, model=directory, top_k=None), pipeline(text, top_k=None), "100 of 128 positions")
    same(minibert.classify(text, model=directory, truncation=True), pipeline(text, truncation=True), "cut at 64")
    with pytest.raises(ValueError, match=r"input 0 is 140 tokens long, more than the 128 this model takes"):
        minibert.classify("word " * 138, model=directory)


def test_classify_refuses_what_it_would_get_wrong(make):
    directory = make("BertForSequenceClassification", scale=5.0, id2label={0: "a", 1: "b"}, label2id={"a": 0, "b": 1})
    with pytest.raises(ValueError, match=r"input 0 is 140 tokens long, more than the 128 this model takes"):
        minibert.classify("word " * 138, model=directory)
    assert minibert.classify("word " * 138, model=directory, truncation=True)[0]["label"] in ("a", "b")
    with pytest.raises(ValueError, match="function_to_apply must be one of"):
        minibert.classify("a", model=directory, function_to_apply="relu")
    with pytest.raises(ValueError, match="top_k must be a positive int or None"):
        minibert.classify("a", model=directory, top_k=0)
    with pytest.raises(ValueError, match="every input a text_pair or none"):
        minibert.classify(["a", {"text": "b", "text_pair": "c"}], model=directory)
    with pytest.raises(CheckpointError, match=r"architectures names BertForTokenClassification, a token classifier "
                       r".*, not a sentence classifier \(BertForSequenceClassification\): read it with tag"):
        minibert.classify("a", model=make("BertForTokenClassification", num_labels=3))


def test_a_tokenizer_without_a_length_is_read_up_to_the_models_positions(make, tmp_path):
    """A model of 600 positions whose folder gives no model_max_length (transformers' "no limit",
    int(1e30)): truncation=True cuts at the model's 600 positions, where sentence-transformers caps
    the tokenizer (min(model_max_length, max_position_embeddings)); minibert cut at 512, the length
    it gave such a tokenizer. The pipelines are told that cap (they would run the model past it)."""
    torch.manual_seed(0)
    labels = dict(id2label=dict(enumerate(NER_LABELS)), label2id={label: i for i, label in enumerate(NER_LABELS)})
    folders = {}
    for name, config in (("BertForSequenceClassification", {"num_labels": 1}),
                         ("BertForTokenClassification", labels)):  # fmt: skip
        model = getattr(transformers, name)(transformers.BertConfig(**{**TINY, "max_position_embeddings": 600},
                                                                    **config))  # fmt: skip
        with torch.no_grad():
            model.classifier.weight.mul_(40.0)
        folders[name] = tmp_path / name
        model.save_pretrained(folders[name])
        shutil.copy(minilm_tokenizer_dir() / "vocab.txt", folders[name] / "vocab.txt")  # no tokenizer_config.json
    classifier, tagger = folders["BertForSequenceClassification"], folders["BertForTokenClassification"]
    text = "word " * 640  # 642 tokens: past 512 and past 600
    pipeline = transformers.pipeline("text-classification", model=str(classifier))
    pipeline.tokenizer.model_max_length = 600
    same(minibert.classify(text, model=classifier, truncation=True), pipeline(text, truncation=True), "cut at 600")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    reference = sentence_transformers.CrossEncoder(str(classifier))
    ranker = minibert.CrossEncoder(classifier)
    assert ranker.max_length == reference.max_seq_length == 600
    pair = [["a question", "word " * 560], ["a question", "word " * 640]]
    np.testing.assert_allclose(ranker.predict(pair), reference.predict(pair), atol=SCORE_TOLERANCE, rtol=0)
    pipeline = transformers.pipeline("token-classification", model=str(tagger), aggregation_strategy="simple")
    pipeline.tokenizer.model_max_length = 600
    long_text = " ".join(TEXTS * 20)  # 600 tokens and more
    with pytest.warns(UserWarning, match="more than the 600 this model takes"):
        ours = minibert.tag(long_text, model=tagger, aggregation_strategy="simple")
    same(ours, pipeline(long_text), "tag, cut at 600")


# ----------------------------------------------------------------------------- tag


@pytest.mark.parametrize("strategy", ["none", "simple", "first", "average", "max"])
def test_tag_gives_the_token_classification_pipelines_entities(strategy, make):
    directory = ner_model(make)
    pipeline = transformers.pipeline("token-classification", model=str(directory), aggregation_strategy=strategy)
    theirs = pipeline(TEXTS)
    ours = minibert.tag(TEXTS, model=directory, aggregation_strategy=strategy)
    assert sum(map(len, theirs)) >= 8, "the random head should find entities to aggregate"
    same(ours, theirs, strategy)
    same(minibert.tag(TEXTS[1], model=directory, aggregation_strategy=strategy), theirs[1], f"{strategy} one text")
    for text, entities in zip(TEXTS, ours):  # the offsets point at the words
        for entity in entities:
            if strategy != "none":
                assert text[entity["start"] : entity["end"]].lower().replace(" ", "") != ""


def test_tag_reads_long_texts_in_windows_as_the_pipeline_does(make):
    directory = ner_model(make, max_length=32)
    long_text = " ".join(TEXTS * 3)
    for strategy in ("simple", "first", "max"):
        pipeline = transformers.pipeline("token-classification", model=str(directory), aggregation_strategy=strategy,
                                         stride=8)  # fmt: skip
        same(minibert.tag(long_text, model=directory, aggregation_strategy=strategy, stride=8), pipeline(long_text),
             f"stride {strategy}")  # fmt: skip
    with pytest.raises(ValueError, match="only an aggregation_strategy other than"):
        minibert.tag(long_text, model=directory, stride=8)
    with pytest.raises(ValueError, match="aggregation_strategy must be one of"):
        minibert.tag("a", model=directory, aggregation_strategy="mean")


def test_tag_with_ignore_labels(make):
    directory = ner_model(make)
    pipeline = transformers.pipeline("token-classification", model=str(directory), ignore_labels=[])
    same(minibert.tag(TEXTS[0], model=directory, ignore_labels=[]), pipeline(TEXTS[0]), "ignore nothing")
    default = transformers.pipeline("token-classification", model=str(directory))  # None: the default ["O"]
    same(minibert.tag(TEXTS[0], model=directory, ignore_labels=None), default(TEXTS[0], ignore_labels=None), "None")


def test_tag_stride_beyond_the_window_is_a_task_argument_error(make):
    """Checked once the window (the model's length) is known, as data a command turns into --stride."""
    with pytest.raises(ValueError, match="only an aggregation_strategy other than"):  # before the model loads
        minibert.tag("a", model="/no/such/model", stride=8)
    with pytest.raises(TaskArgumentError, match=r"^stride must be an int from 0 to 125 \(the window is 128 tokens\), "
                       "got 126$") as raised:  # fmt: skip
        minibert.tag("a", model=ner_model(make), aggregation_strategy="simple", stride=126)
    assert (raised.value.parameter, raised.value.value) == ("stride", 126)


# ----------------------------------------------------------------------------- answer


def test_answer_gives_the_question_answering_pipelines_answers():
    """Long contexts in doc_stride windows, top_k, max_answer_len, handle_impossible_answer,
    align_to_words, batches: each case's answer is what transformers 4.57.1's pipeline gave."""
    reference = json.loads((QA_REFERENCE / "expected.json").read_text(encoding="utf-8"))
    assert reference["transformers"].startswith("4.")
    for number, case in enumerate(reference["cases"]):
        arguments = dict(case["arguments"])
        question, context = arguments.pop("question"), arguments.pop("context")
        same(minibert.answer(question, context, model=QA_REFERENCE, **arguments), case["expected"], f"case {number}")


class LowerCounted(str):
    """A context that counts the ``lower()`` calls of its slices (the answer texts the merge compares)."""

    lowered = 0

    def __getitem__(self, key):
        return LowerCounted(str.__getitem__(self, key))

    def lower(self):
        LowerCounted.lowered += 1
        return str.lower(self)


def test_answer_merges_equal_texts_in_work_linear_in_the_context():
    """The same answer text found in several windows adds its scores (the reference's long case, in
    test_answer_gives_the_question_answering_pipelines_answers, checks the merged answers against the
    pipeline's). Each span's text is compared once (a dict keyed by its lower-cased text): doubling
    the context doubles the comparisons. The scan of every earlier answer made them grow as the
    square: 88,420 then 333,764 for 300 then 600 words, a 350 KB context took 81 s."""
    words = json.loads((QA_REFERENCE / "expected.json").read_text(encoding="utf-8"))["cases"][0]["arguments"]
    words = words["context"].split()
    counts = []
    for length in (600, 1200):
        LowerCounted.lowered = 0
        context = LowerCounted(" ".join(random.Random(0).choices(words, k=length)))
        found = minibert.answer("What was never built?", context, model=QA_REFERENCE, max_seq_len=48, doc_stride=16,
                                top_k=5)  # fmt: skip
        assert len(found) == 5 and all(context[a["start"]:a["end"]] == a["answer"] for a in found)
        counts.append(LowerCounted.lowered)
    assert 0 < counts[0] < 2 * 600 and counts[1] <= 2.2 * counts[0], counts  # ~20 spans per window of 16 new words


def test_answer_refuses_bad_arguments():
    with pytest.raises(ValueError, match="max_answer_len must be a positive int"):
        minibert.answer("q", "c", model=QA_REFERENCE, max_answer_len=0)
    with pytest.raises(ValueError, match=r"max_seq_len must be an int from 4 to 128"):
        minibert.answer("q", "c", model=QA_REFERENCE, max_seq_len=1000)
    with pytest.raises(ValueError, match=r"^context 1 is empty: a question and its context must hold text$"):
        minibert.answer(["q", "r"], ["c", " "], model="/no/such/model")  # said before the model loads
    with pytest.raises(TypeError, match="two lists of texts of one length"):
        minibert.answer(["q", "r"], ["c"], model=QA_REFERENCE)
    with pytest.raises(TaskArgumentError, match=r"^doc_stride must be at most the window's 128 tokens, got 129$"):
        minibert.answer("q", "c", model=QA_REFERENCE, doc_stride=129)  # the pipeline's own check
    with pytest.raises(TaskArgumentError, match=r"^max_seq_len must be an int from 4 to 128 \(the model's "
                       r"max_position_embeddings\), got 129$"):  # fmt: skip
        minibert.answer("q", "c", model=QA_REFERENCE, max_seq_len=129)


def test_answer_honours_a_max_seq_len_past_the_tokenizers_length(tmp_path):
    """The tokenizer says 64, the model has 128 positions: an explicit max_seq_len=100 is read as
    transformers 4.57.1's pipeline reads it (its answer is the reference's case, made with 100 on the
    same weights); minibert refused it as more than "the model's length", 64."""
    folder = tmp_path / "qa64"
    shutil.copytree(QA_REFERENCE, folder)
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "model_max_length": 64}), encoding="utf-8")
    reference = json.loads((QA_REFERENCE / "expected.json").read_text(encoding="utf-8"))
    case = next(case for case in reference["cases"] if case["arguments"].get("max_seq_len") == 100)
    arguments = dict(case["arguments"])
    question, context = arguments.pop("question"), arguments.pop("context")
    same(minibert.answer(question, context, model=folder, **arguments), case["expected"], "max_seq_len=100 of 128")


# ----------------------------------------------------------------------------- fill-mask and next sentence


def test_fill_mask_and_next_sentence_on_rxnfps_real_pretraining_heads():
    """rxnfp's BertForPreTraining (real MLM and NSP heads): fill_mask equals the fill-mask pipeline
    (tokens, ids, scores), next_sentence equals transformers' NSP softmax."""
    module = pytest.importorskip("rxnfp")
    directory = Path(module.__file__).parent / "models" / "transformers" / "bert_pretrained"
    reference = transformers.BertForPreTraining.from_pretrained(str(directory)).eval()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(str(directory))
    masked_lm = transformers.BertForMaskedLM.from_pretrained(str(directory)).eval()
    pipeline = transformers.pipeline("fill-mask", model=masked_lm, tokenizer=tokenizer, top_k=5)
    text = "c c ( = o ) o . o c c [MASK] c c o c ( c ) = o"
    ours = minibert.fill_mask(text, model=directory, top_k=5)
    same(ours, pipeline(text), "fill-mask")  # score, token (the id), token_str, sequence: the pipeline's keys
    many = minibert.fill_mask([text, "c c [MASK] c ( c ) = o"], model=directory, top_k=5)  # a list: one each
    same(many, pipeline([text, "c c [MASK] c ( c ) = o"]), "fill-mask of a list")
    two_masks = "c c ( = o ) o . o c c [MASK] c c o c ( c ) = [MASK]"  # each sequence fills its own mask
    same(minibert.fill_mask(two_masks, model=directory, top_k=5), pipeline(two_masks), "fill-mask of two masks")
    for targets in ("o", ["o", "n"], ["n", "o", "c", "o"], ["o", "cl"]):  # "cl" is no piece: its first, [UNK]
        for given, top_k in ((text, 5), (two_masks, 2), ([text, "c c [MASK] c ( c ) = o"], 1)):
            ours = minibert.fill_mask(given, model=directory, top_k=top_k, targets=targets)
            same(ours, pipeline(given, top_k=top_k, targets=targets), f"fill-mask targets={targets} top_k={top_k}")
    pads = (two_masks, "c c [PAD] [MASK] c ( c ) = [MASK]", "c c [PAD] [MASK] c")  # [PAD] guessed, [PAD] in the text
    for given in pads:  # the pipeline leaves every [PAD] out of `sequence` before decoding
        for keywords in ({"top_k": 3}, {"top_k": 2, "targets": ["[PAD]", "o"]}):
            same(minibert.fill_mask(given, model=directory, **keywords), pipeline(given, **keywords),
                 f"fill-mask of {given!r} {keywords}")  # fmt: skip
    with pytest.warns(UserWarning, match=r"the target 'cl' is not in the vocabulary: its first piece '\[UNK\]'"):
        minibert.fill_mask(text, model=directory, targets=["o", "cl"])
    with warnings.catch_warnings():  # one error, no "left out" warning before it
        warnings.simplefilter("error")
        with pytest.raises(TaskArgumentError, match="targets must be words of which at least one has a piece"):
            minibert.fill_mask(text, model=directory, targets=[""])
    with pytest.raises(TypeError, match="targets must be a str or a list of str"):
        minibert.fill_mask(text, model=directory, targets=3)
    first, second = "c c ( = o ) o", "c c o c ( c ) = o"
    with torch.no_grad():
        expected = reference(**tokenizer(first, second, return_tensors="pt")).seq_relationship_logits.softmax(-1)
    model = minibert.BertForPreTraining.from_pretrained(directory)
    pair = (model, minibert.BertTokenizer.from_pretrained(directory))
    probability = minibert.next_sentence(first, second, model=pair)
    assert abs(probability - float(expected[0, 0])) <= SCORE_TOLERANCE


def test_fill_mask_on_a_vocabulary_padded_past_the_tokenizer_decodes_as_the_pipeline(tmp_path):
    """A checkpoint whose head scores more rows than its tokenizer has pieces (30,528 for 30,522, a
    table padded to a multiple of 8): a guess past the pieces was 'token id 30525 is outside the
    vocabulary' (exit 1 in the CLI); the pipeline gives its token_str as "" and leaves it out of the
    sequence. Those rows are made likely here (their bias 5) so that they are guessed."""
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(transformers.BertConfig(vocab_size=30528, **TINY)).eval()
    with torch.no_grad():
        model.cls.predictions.bias[30522:] = 5.0
    model.save_pretrained(tmp_path)
    transformers.AutoTokenizer.from_pretrained(str(minilm_tokenizer_dir())).save_pretrained(tmp_path)
    pipeline = transformers.pipeline("fill-mask", model=str(tmp_path))
    for text, keywords in (("I love [MASK].", {"top_k": 8}), ("[MASK] and [MASK]", {"top_k": 3})):
        ours, theirs = minibert.fill_mask(text, model=tmp_path, **keywords), pipeline(text, **keywords)
        assert any(row["token"] >= 30522 for rows in (ours if isinstance(ours[0], list) else [ours]) for row in rows)
        same(ours, theirs, f"fill-mask of {text!r} {keywords}")


def test_fill_mask_sequence_leaves_out_pad_pieces_as_the_pipeline_does(tmp_path):
    """A random BERT with MiniLM's word pieces: with several [MASK]s `sequence` keeps special tokens,
    and the fill-mask pipeline leaves every [PAD] out before decoding, so a [PAD] guessed or in the
    text is not written and its neighbours join ("a [PAD] ##romatic" is "aromatic"). minibert wrote
    "[CLS] [PAD] is the [MASK]. [SEP]" and "a [PAD]romatic"."""
    torch.manual_seed(0)
    transformers.BertForMaskedLM(transformers.BertConfig(vocab_size=30522, **TINY)).eval().save_pretrained(tmp_path)
    transformers.AutoTokenizer.from_pretrained(str(minilm_tokenizer_dir())).save_pretrained(tmp_path)
    pipeline = transformers.pipeline("fill-mask", model=str(tmp_path))
    cases = [("[MASK] is the [MASK].", {"targets": ["[PAD]", "the"]}),
             ("a [PAD] [MASK] [MASK] c", {"targets": ["##romatic", "[PAD]", "the"], "top_k": 3}),
             ("a [PAD] [MASK] [MASK] c", {"top_k": 4}), ("a [PAD] [MASK] c", {"targets": ["[PAD]", "##romatic"]}),
             (["[PAD] [MASK] ##s [MASK]", "x [MASK]"], {"top_k": 2, "targets": ["[PAD]", "##ing", "the"]})]  # fmt: skip
    for text, keywords in cases:
        same(minibert.fill_mask(text, model=tmp_path, **keywords), pipeline(text, **keywords),
             f"fill-mask of {text!r} {keywords}")  # fmt: skip
