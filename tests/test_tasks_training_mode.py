"""A task run on a model in training mode (as a fine-tuning loop leaves it): run without dropout and
left in the modes it had, module by module; runs that overlap share one switch to eval mode; a
train() made while a run holds the model is kept; an Embedder beside a training loop gives the eval
numbers or refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import minibert
from task_checkpoints import DOCUMENTS, QA_REFERENCE, TEXTS, cross_encoder_dir, ner_model, same
from tiny_hub import TINY

transformers = pytest.importorskip("transformers")


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

    embedder = minibert.Embedder.from_pretrained(TINY)
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
