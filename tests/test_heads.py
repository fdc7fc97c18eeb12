"""The task heads (heads.py) against transformers' classes of the same names, loaded from what
transformers saved: logits (real tokens), the loss given labels, and the gradient of every
parameter; the problem type and labels set in the config after loading; transformers' members;
the loader's words when a checkpoint's heads and the class differ. (test_heads_labels.py: the
labels each loss takes; test_heads_real_and_training.py: real checkpoints and training.)

Tolerance: 1e-5, the parity bound of every other layer test (fp32 sums of ≤ 64 terms at values
of magnitude ≤ ~10, compared element by element); gradients as test_model.py compares them,
absolutely below 1 and relative to the parameter's largest gradient above (a gradient that is zero
in exact arithmetic, such as the attention keys' bias, carries only rounding noise)."""

from __future__ import annotations

import itertools
import json
import logging
import re

import pytest
import torch

import minibert
from head_checkpoints import ATOL, HEADS, MULTI_HOT, batch, checkpoint_name, compare_logits, labels_for, saved
from helpers import assert_close
from minibert.errors import CheckpointError, MissingHeadsError

transformers = pytest.importorskip("transformers")



@pytest.mark.parametrize("name", HEADS)
def test_every_head_matches_transformers_logits_loss_and_gradients(name, tmp_path):
    directory, reference = saved(tmp_path, name, num_labels=2 if name == "BertForQuestionAnswering" else 3)
    ours = getattr(minibert, name).from_pretrained(directory)
    inputs = batch(choices=4 if name == "BertForMultipleChoice" else None)
    labels = labels_for(name, inputs)
    theirs_out = reference(**inputs, **labels)
    ours_out = ours(**inputs, **labels)
    report = compare_logits(name, ours_out, theirs_out, inputs, name)
    report["loss"] = assert_close(ours_out.loss, theirs_out.loss, f"{name} loss", ATOL)
    theirs_out.loss.backward()
    ours_out.loss.backward()
    theirs_grads = dict(reference.named_parameters())
    worst = 0.0
    for our_name, parameter in ours.named_parameters():
        hub_name = checkpoint_name(our_name, ours)
        if hub_name not in theirs_grads:  # the tied decoder weight is the word embeddings
            continue
        expected = theirs_grads[hub_name].grad
        assert parameter.grad is not None and expected is not None, our_name
        scale = max(1.0, expected.abs().max().item())  # as test_model's gradients: absolute below 1, relative above
        worst = max(worst, assert_close(parameter.grad / scale, expected / scale, f"{name} grad {our_name}", ATOL))
    report["gradients"] = worst
    print(f"\n{name}: max |Δ| " + ", ".join(f"{key} {value:.1e}" for key, value in report.items()))


@pytest.mark.parametrize(
    "problem,labels",
    [
        ("single_label_classification", torch.tensor([2, 0, 1])),
        ("multi_label_classification", torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])),
        ("regression", torch.tensor([[0.5, -1.0, 2.0], [0.1, 0.2, 0.3], [1.0, 1.0, -1.0]])),
        (None, torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])),  # floats: multi-label
    ],
)
def test_sequence_classification_losses_by_problem_type(problem, labels, tmp_path):
    directory, reference = saved(tmp_path, "BertForSequenceClassification", num_labels=3, problem_type=problem)
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    inputs = batch()
    expected = reference(**inputs, labels=labels).loss
    assert_close(ours(**inputs, labels=labels).loss, expected, f"{problem} loss", ATOL)


def test_one_label_is_regression(tmp_path):
    directory, reference = saved(tmp_path, "BertForSequenceClassification", num_labels=1)
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    inputs, labels = batch(), torch.tensor([0.3, -1.2, 2.0])
    assert ours.num_labels == 1
    assert_close(ours(**inputs, labels=labels).loss, reference(**inputs, labels=labels).loss, "regression", ATOL)
    assert ours.problem_type == "regression"


def test_labels_come_from_config(tmp_path):
    labels = {0: "NEGATIVE", 1: "NEUTRAL", 2: "POSITIVE"}
    directory, _ = saved(tmp_path, "BertForSequenceClassification", id2label=labels,
                         label2id={v: k for k, v in labels.items()})  # fmt: skip
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    assert ours.labels.id2label == labels and ours.labels.label2id == {v: k for k, v in labels.items()}
    assert ours.num_labels == 3 and ours.classifier.out_features == 3


# ----------------------------------------------------------------------------- the config set after loading



@pytest.mark.parametrize(
    "problem, labels",
    [("regression", MULTI_HOT), ("multi_label_classification", MULTI_HOT),
     ("single_label_classification", torch.tensor([2, 0, 1]))],
)  # fmt: skip
def test_problem_type_set_after_loading_picks_the_loss_and_is_saved(problem, labels, tmp_path):
    """transformers' classification examples set ``model.config.problem_type`` after loading: the
    loss of the next call follows it (float labels with "regression": the mean squared error, not the
    multi-label loss float labels suggest), and save_pretrained writes it, as transformers does."""
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3)
    reference = transformers.BertForSequenceClassification.from_pretrained(directory).eval()
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    inputs = batch()
    for model in (reference, ours):
        model.config.problem_type = problem
    assert_close(ours(**inputs, labels=labels).loss, reference(**inputs, labels=labels).loss, f"{problem} loss", ATOL)
    reference.save_pretrained(tmp_path / "theirs")
    ours.save_pretrained(tmp_path / "ours")
    written = [json.loads((tmp_path / who / "config.json").read_text())["problem_type"] for who in ("theirs", "ours")]
    assert written == [problem, problem]
    assert transformers.AutoConfig.from_pretrained(tmp_path / "ours").problem_type == problem


def test_problem_type_the_first_labels_decide_is_kept_in_the_config(tmp_path):
    """With no problem_type, the first labels decide it (float labels: multi-label) and transformers
    keeps that in the config, so a later call with other labels keeps the loss; the same here."""
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3)
    reference = transformers.BertForSequenceClassification.from_pretrained(directory).eval()
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    inputs, regression = batch(), torch.tensor([[0.5, -1.0, 2.0], [0.1, 0.2, 0.3], [1.0, 1.0, -1.0]])
    for labels in (MULTI_HOT, regression):
        assert_close(ours(**inputs, labels=labels).loss, reference(**inputs, labels=labels).loss, "loss", ATOL)
    assert ours.config.problem_type == reference.config.problem_type == "multi_label_classification"
    with pytest.raises(ValueError, match="problem_type must be None or one of single_label_classification"):
        ours.config.problem_type = "ranking"


def test_labels_named_after_loading_as_transformers(tmp_path):
    """``model.config.id2label = {...}; model.config.label2id = {...}`` before save_pretrained (a
    standard fine-tuning step): num_labels follows, the heads' labels are the new names, and the files
    transformers reads back name them; ``config.num_labels = n`` renames as transformers does; labels
    of another number than the head's outputs are an error at the next call."""
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3)
    reference = transformers.BertForSequenceClassification.from_pretrained(directory).eval()
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    names = {0: "neg", 1: "neu", 2: "pos"}
    for model in (reference, ours):
        model.config.id2label = names
        model.config.label2id = {name: index for index, name in names.items()}
    assert (ours.config.id2label, ours.config.label2id, ours.config.num_labels) == (
        reference.config.id2label, reference.config.label2id, reference.config.num_labels)  # fmt: skip
    assert ours.labels.id2label == names and ours.num_labels == 3
    ours.save_pretrained(tmp_path / "ours")
    assert transformers.AutoConfig.from_pretrained(tmp_path / "ours").id2label == names
    assert minibert.BertForSequenceClassification.from_pretrained(tmp_path / "ours").labels.id2label == names
    for count in (3, 4):  # the same number keeps the names; another gives LABEL_0 ... as transformers
        for model in (reference, ours):
            model.config.num_labels = count
        assert ours.config.id2label == reference.config.id2label and ours.config.num_labels == count
    with pytest.raises(ValueError, match="config.id2label names 4 labels but the classifier has 3 outputs"):
        ours(**batch())


@pytest.mark.parametrize("name", HEADS + ["BertModel"])
def test_transformers_model_members(name, tmp_path):
    """What transformers' users call on a model besides forward: num_parameters (every flag, and with
    the embeddings frozen), get_input_embeddings, get_output_embeddings (the masked-LM decoder: the
    word embedding matrix and the head's bias), base_model and main_input_name, as transformers answers."""
    directory, reference = saved(tmp_path, name)
    ours = getattr(minibert, name).from_pretrained(directory)
    for frozen in (False, True):
        for model in (reference, ours):
            model.get_input_embeddings().requires_grad_(not frozen)
        for only_trainable, exclude_embeddings in itertools.product((False, True), repeat=2):
            flags = dict(only_trainable=only_trainable, exclude_embeddings=exclude_embeddings)
            assert ours.num_parameters(**flags) == reference.num_parameters(**flags), (flags, frozen)
    assert torch.equal(ours.get_input_embeddings().weight, reference.get_input_embeddings().weight)
    assert type(ours.base_model).__name__ == type(reference.base_model).__name__ == "BertModel"
    assert ours.main_input_name == reference.main_input_name == "input_ids"
    decoder, their_decoder = ours.get_output_embeddings(), reference.get_output_embeddings()
    assert (decoder is None) == (their_decoder is None)
    if decoder is not None:
        assert decoder.weight is ours.get_input_embeddings().weight and decoder.bias is ours.mlm_head.bias
        assert torch.equal(decoder.weight, their_decoder.weight) and torch.equal(decoder.bias, their_decoder.bias)
        hidden = torch.randn(2, 3, 32)
        assert_close(decoder(ours.mlm_head.layer_norm(ours.mlm_head.activation(ours.mlm_head.transform(hidden)))),
                     their_decoder(reference.cls.predictions.transform(hidden)), "decoder", ATOL)  # fmt: skip
    ours.tie_weights()  # always tied: nothing to do, nothing changed
    assert ours.get_output_embeddings() is None or ours.get_output_embeddings().weight is decoder.weight
    # the members a probe found missing: each as transformers answers, or refused saying why
    assert ours.can_generate() is reference.can_generate() is False
    assert ours.base_model_prefix == reference.base_model_prefix == "bert"
    assert ours.supports_gradient_checkpointing is False  # (transformers' True: refused here, docs/migrating.md)
    assert ours.config_class is minibert.BertConfig
    assert ours.get_memory_footprint() == reference.get_memory_footprint() - _position_ids_bytes(reference)
    with pytest.raises(NotImplementedError, match=r"minibert does not upload.*upload_folder\(repo_id='me/x'"):
        ours.push_to_hub("me/x")
    before = {name: tensor.clone() for name, tensor in ours.state_dict().items()}
    ours.init_weights()  # transformers' leaves weights read from a checkpoint: it redrew every one of them
    assert all(torch.equal(tensor, before[name]) for name, tensor in ours.state_dict().items())
    if decoder is not None:  # a new decoder assigned was dropped in silence (a new Linear each call)
        with pytest.raises(AttributeError, match="tied to the word embeddings"):
            ours.get_output_embeddings().weight = torch.nn.Parameter(torch.zeros_like(decoder.weight))
        ours.set_output_embeddings(ours.get_output_embeddings())  # the tied one: nothing to do
        ours.get_output_embeddings().weight = ours.get_input_embeddings().weight  # (tying again: allowed)
        with pytest.raises(ValueError, match="always tied"):
            ours.set_output_embeddings(torch.nn.Linear(32, decoder.weight.shape[0]))


def _position_ids_bytes(model) -> int:
    """transformers keeps position_ids (and token_type_ids) as buffers of the embeddings; minibert makes them."""
    return sum(buffer.numel() * buffer.element_size() for name, buffer in model.named_buffers()
               if name.endswith(("position_ids", "token_type_ids")))  # fmt: skip


def test_use_cache_in_a_call_changes_nothing_as_in_transformers(tmp_path):
    """``model(**batch, use_cache=False)`` (a decoder's option, passed by generic training code) was a
    TypeError; transformers' BERT takes it and computes the same as without it."""
    directory, reference = saved(tmp_path, "BertModel")
    ours = minibert.BertModel.from_pretrained(directory)
    ids = torch.tensor([[2, 5, 7, 3]])
    assert torch.equal(ours(ids, use_cache=False).last_hidden_state, ours(ids).last_hidden_state)
    assert_close(ours(ids, use_cache=True).last_hidden_state, reference(ids, use_cache=False).last_hidden_state,
                 "use_cache", ATOL)  # fmt: skip
    with pytest.raises(minibert.errors.InputTypeError, match="use_cache must be True or False, got 'no'"):
        ours(ids, use_cache="no")


def test_enable_input_require_grads_lets_a_frozen_model_pass_gradients(tmp_path):
    """PEFT's call on a frozen model (``enable_input_require_grads``): the word embeddings' output requires
    grad, so a loss reaches a trainable part above frozen embeddings; disabled, it does not (it was an
    AttributeError)."""
    directory, _ = saved(tmp_path, "BertModel")
    ours = minibert.BertModel.from_pretrained(directory).train()
    ours.requires_grad_(False)
    ids = torch.tensor([[2, 5, 7, 3]])
    assert not ours(ids).last_hidden_state.requires_grad
    ours.enable_input_require_grads()
    assert ours(ids).last_hidden_state.requires_grad
    ours.disable_input_require_grads()
    assert not ours(ids).last_hidden_state.requires_grad


def test_set_input_embeddings_as_transformers(tmp_path):
    """A new word table: the model reads it (ids past the old vocabulary too: config.vocab_size follows),
    as transformers' does; under a masked-LM head a table of another number of rows is refused."""
    directory, reference = saved(tmp_path, "BertModel")
    ours = minibert.BertModel.from_pretrained(directory)
    torch.manual_seed(2)
    table = torch.nn.Embedding(104, 32, padding_idx=0)
    ours.set_input_embeddings(table)
    reference.set_input_embeddings(torch.nn.Embedding.from_pretrained(table.weight.detach().clone(), freeze=False))
    assert ours.get_input_embeddings() is table and ours.config.vocab_size == 104
    ids = torch.tensor([[2, 100, 103, 7, 3]])
    with torch.no_grad():
        assert_close(ours(ids).last_hidden_state, reference(ids).last_hidden_state, "new table", ATOL)
    masked_lm = minibert.BertForMaskedLM.from_pretrained(saved(tmp_path, "BertForMaskedLM")[0])
    with pytest.raises(ValueError, match="resize_token_embeddings"):
        masked_lm.set_input_embeddings(table)


def test_saved_heads_load_in_transformers_with_the_same_logits(tmp_path):
    for name in ("BertForSequenceClassification", "BertForQuestionAnswering", "BertForMaskedLM"):
        directory, _ = saved(tmp_path, name, num_labels=3 if name != "BertForQuestionAnswering" else 2)
        ours = getattr(minibert, name).from_pretrained(directory)
        ours.save_pretrained(tmp_path / f"{name}-again")
        again = getattr(transformers, name).from_pretrained(str(tmp_path / f"{name}-again")).eval()
        inputs = batch()
        with torch.no_grad():
            compare_logits(name, ours(**inputs), again(**inputs), inputs, f"{name} saved by minibert")


def test_a_checkpoint_with_other_heads_loads_naming_them(tmp_path, caplog):
    directory, reference = saved(tmp_path, "BertForPreTraining")
    with caplog.at_level(logging.INFO, logger="minibert"):
        ours = minibert.BertForMaskedLM.from_pretrained(directory)
    lines = [record.getMessage() for record in caplog.records if "other heads" in record.getMessage()]
    assert len(lines) == 1 and "cls.seq_relationship.weight" in lines[0] and "BertForMaskedLM" in lines[0], lines
    assert "bert.pooler.dense.weight" in lines[0]  # BertForMaskedLM has no pooler, as in transformers
    inputs = batch()
    with torch.no_grad():
        mlm = ours(**inputs).logits
        expected = reference(**inputs).prediction_logits
    assert_close(mlm, expected, "MLM logits of a pre-training checkpoint (every position)", ATOL)


@pytest.mark.parametrize(
    "saved_as,loaded_as,says",
    [
        ("BertModel", "BertForMaskedLM", "has no tensors for the masked-LM head (cls.predictions.*), which "
         "BertForMaskedLM needs; it has no heads: it holds the encoder only; load it with BertModel"),
        ("BertForMaskedLM", "BertForPreTraining", "has no tensors for the pooler (bert.pooler.*) or the "
         "next-sentence head (cls.seq_relationship.*), which BertForPreTraining needs; it has the masked-LM "
         "head (cls.predictions.*); load it with BertForMaskedLM"),
        ("BertForPreTraining", "BertForSequenceClassification", "has no tensors for a classifier (classifier.*)"
         ", which BertForSequenceClassification needs; it has the masked-LM head (cls.predictions.*) and the "
         "next-sentence head (cls.seq_relationship.*); load it with BertForPreTraining"),
        # a classifier of two outputs is no BertForMultipleChoice's (one score per choice)
        ("BertForSequenceClassification", "BertForQuestionAnswering", "it has a classifier (classifier.*); load "
         "it with BertForSequenceClassification or BertForTokenClassification (or pass"),
        # one output: each class loads it; config.json's architectures first
        ("BertForMultipleChoice", "BertForQuestionAnswering", "it has a classifier (classifier.*); load it with "
         "BertForMultipleChoice, BertForSequenceClassification or BertForTokenClassification (or pass"),
    ],
)  # fmt: skip
def test_missing_heads_are_named_with_what_the_checkpoint_has(saved_as, loaded_as, says, tmp_path):
    directory, _ = saved(tmp_path, saved_as, num_labels=2)
    with pytest.raises(CheckpointError) as error:
        getattr(minibert, loaded_as).from_pretrained(directory)
    assert says in str(error.value), str(error.value)


@pytest.mark.parametrize("saved_as, num_labels", [
    ("BertForSequenceClassification", 1), ("BertForSequenceClassification", 2), ("BertForTokenClassification", 3),
    ("BertForMultipleChoice", 2), ("BertForPreTraining", 2), ("BertForQuestionAnswering", 2)])  # fmt: skip
def test_every_class_the_advice_names_loads_the_checkpoint(saved_as, num_labels, tmp_path):
    """No false advice: for each class that cannot load the checkpoint, every class its MissingHeadsError
    names loads it; and where a head of the wrong shape is the class's fault (a 2-label classifier loaded as
    BertForMultipleChoice), the error names the class config.json says, not a config.json of another model."""
    directory, reference = saved(tmp_path, saved_as, num_labels=num_labels)
    for loaded_as in HEADS:
        if loaded_as == saved_as:
            continue
        try:
            getattr(minibert, loaded_as).from_pretrained(directory)
        except MissingHeadsError as error:
            named = re.search(r"; load it with (.*) \(or pass", str(error)).group(1)
            for advised in re.split(r", | or ", named):
                getattr(minibert, advised).from_pretrained(directory)  # loads
        except (CheckpointError, ValueError) as error:
            if "wrong shape" in str(error):
                assert f"config.json says this is a {saved_as}: load it with that class" in str(error), str(error)
                assert "belongs to another model" not in str(error)


def test_a_misshaped_classifier_lists_it(tmp_path):
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3)
    config = (directory / "config.json").read_text().replace('"2": "LABEL_2"', '"2": "LABEL_2", "3": "LABEL_3"')
    (directory / "config.json").write_text(config)
    with pytest.raises(CheckpointError, match=r"classifier.weight \(3, 32\) \(expected \(4, 32\)\)"):
        minibert.BertForSequenceClassification.from_pretrained(directory)
