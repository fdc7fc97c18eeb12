"""The heads on real checkpoints (rxnfp's pre-training and 50-label classification models,
antiberty's masked LM, each against transformers), and in training: one fine-tuning step, new heads
on an encoder, transformers' Trainer, and checkpoints of one head loaded as another.

Tolerance: 1e-5, the parity bound of every other layer test (fp32 sums of ≤ 64 terms at values
of magnitude ≤ ~10, compared element by element); the real checkpoints' outputs (8 and 12 layers
deep) to 1e-5 from transformers in float64 beyond fp32's own rounding at that depth
(helpers.bound_from_exact); gradients as test_model.py compares them, absolutely below 1 and
relative to the parameter's largest gradient above.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import re
from pathlib import Path

import pytest
import torch

import minibert
from head_checkpoints import ATOL, HEADS, batch, checkpoint_name, compare_logits, saved
from helpers import assert_close, exact_reference
from minibert.errors import CheckpointError

transformers = pytest.importorskip("transformers")


# ----------------------------------------------------------------------------- real checkpoints


def _package_dir(package: str, *parts: str) -> Path:
    module = pytest.importorskip(package)
    return Path(module.__file__).parent.joinpath(*parts)


def _smiles_batch(directory: Path) -> dict[str, torch.Tensor]:
    """rxnfp's inputs are SMILES split by its regex, then WordPiece without lower-casing: fed here as
    pre-split words (the tokens of two reactions)."""
    tokenizer = minibert.BertTokenizer.from_pretrained(directory)
    words = [["C", "C", "(", "=", "O", ")", "O", ">>", "C", "C", "O"], ["c", "1", "c", "c", "c", "c", "c", "1"]]
    return tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")


def test_rxnfp_pretraining_heads_match_transformers():
    directory = _package_dir("rxnfp", "models", "transformers", "bert_pretrained")
    ours = minibert.BertForPreTraining.from_pretrained(directory)
    theirs = transformers.BertForPreTraining.from_pretrained(str(directory)).eval()
    inputs = _smiles_batch(directory)
    with torch.no_grad():
        exact = exact_reference(theirs)(**inputs)
        report = compare_logits("BertForPreTraining", ours(**inputs), theirs(**inputs), inputs, "rxnfp pre-training",
                                exact)  # fmt: skip
    print(f"\nrxnfp bert_pretrained: max |Δ| {report}")


def test_rxnfp_fifty_label_classifier_matches_its_weights():
    """config.json says num_labels 50 and id2label LABEL_0, LABEL_1 (transformers 2 left the default
    there); the classifier's weights have 50 rows. minibert takes the number written on purpose, and
    so does transformers 5 loading the folder alone (docs/heads.md said it needed num_labels=50 passed)."""
    directory = _package_dir("rxnfp", "models", "transformers", "bert_ft_10k_25s")
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    assert ours.num_labels == 50 and ours.labels.id2label[49] == "LABEL_49"
    reference = transformers.BertForSequenceClassification.from_pretrained(str(directory)).eval()  # nothing passed
    assert reference.classifier.out_features == 50 and reference.config.id2label == ours.labels.id2label
    heads_md = (Path(__file__).resolve().parents[1] / "docs" / "heads.md").read_text(encoding="utf-8")
    assert "transformers 5 does the same (50 labels" in heads_md  # what the page says of it
    inputs = _smiles_batch(directory)
    with torch.no_grad():
        exact = exact_reference(reference)(**inputs)
        report = compare_logits("BertForSequenceClassification", ours(**inputs), reference(**inputs), inputs, "rxnfp",
                                exact)  # fmt: skip
    print(f"\nrxnfp bert_ft_10k_25s: max |Δ| {report}")


def test_antiberty_masked_lm_loads_naming_its_extra_heads():
    """A BERT masked LM with three heads of its own on the pooled output (cls.species/chain/graft):
    BertForMaskedLM loads it with one warning line naming them, and computes transformers' logits."""
    directory = _package_dir("antiberty", "trained_models", "AntiBERTy_md_smooth")
    with pytest.warns(UserWarning, match="cls.species"):
        ours = minibert.BertForMaskedLM.from_pretrained(directory)
    theirs = transformers.BertForMaskedLM.from_pretrained(str(directory)).eval()
    vocab = (directory.parent / "vocab.txt").read_text().splitlines()
    assert len(vocab) == 25
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(5, 25, (2, 20), generator=generator)
    input_ids[:, 0], input_ids[:, -1] = 2, 3  # [CLS] and [SEP] of its vocabulary
    attention_mask = torch.ones_like(input_ids)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    with torch.no_grad():
        exact = exact_reference(theirs)(**inputs)
        report = compare_logits("BertForMaskedLM", ours(**inputs), theirs(**inputs), inputs, "antiberty", exact)
    print(f"\nantiberty AntiBERTy_md_smooth: max |Δ| {report}")
    with pytest.raises(CheckpointError, match="next-sentence head .*; it has the masked-LM head .* BertForMaskedLM"):
        minibert.BertForPreTraining.from_pretrained(directory)


def test_heads_are_public_names():
    for name in HEADS:
        assert getattr(minibert, name) is getattr(importlib.import_module("minibert.heads"), name)


# ----------------------------------------------------------------------------- fine-tuning


def test_one_finetuning_step_matches_transformers(tmp_path):
    """One plain step (forward with labels, backward, torch's AdamW) on minibert and on transformers,
    the same checkpoint and batch: the loss, every gradient, and every weight after the step.

    Dropout is off (probability 0) in both: the two libraries draw their dropout masks in a
    different order from one seed, so with dropout the step would differ by design, not by error.
    Tolerance: the loss and weights to 1e-5 as every parity test; gradients relative to the largest
    of each tensor (as test_every_head_... compares them). After one AdamW step a weight moves by
    about lr·sign(gradient): a gradient that is 0 in exact arithmetic (rounding noise in both) can
    move the other way, so the updated weights are compared where |gradient| is above its noise."""

    def train_step(model, optimizer, inputs: dict, labels: torch.Tensor) -> float:
        loss = model(**inputs, labels=labels).loss  # the head's cross-entropy
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    directory, reference = saved(tmp_path, "BertForSequenceClassification", num_labels=3, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)  # fmt: skip
    ours = minibert.BertForSequenceClassification.from_pretrained(directory)
    ours.train()
    reference.train()
    inputs, labels = batch(), torch.tensor([2, 0, 1])
    optimizers = [torch.optim.AdamW(model.parameters(), lr=1e-3) for model in (ours, reference)]
    loss_ours = train_step(ours, optimizers[0], inputs, labels)
    loss_theirs = train_step(reference, optimizers[1], inputs, labels)
    assert abs(loss_ours - loss_theirs) <= ATOL, (loss_ours, loss_theirs)
    theirs = dict(reference.named_parameters())
    worst_gradient, worst_weight, compared = 0.0, 0.0, 0
    for name, parameter in ours.named_parameters():
        hub_name = checkpoint_name(name, ours)
        if hub_name not in theirs:
            continue
        expected = theirs[hub_name]
        scale = max(float(expected.grad.abs().max()), 1.0)
        worst_gradient = max(worst_gradient, float((parameter.grad - expected.grad).abs().max()) / scale)
        clear = expected.grad.abs() > 1e-6  # above the rounding noise of a zero gradient
        if clear.any():
            worst_weight = max(worst_weight, float((parameter.detach() - expected.detach())[clear].abs().max()))
        compared += 1
    assert compared >= 30, compared
    assert worst_gradient <= ATOL, worst_gradient
    assert worst_weight <= ATOL, worst_weight
    print(f"\none AdamW step: loss Δ {abs(loss_ours - loss_theirs):.1e}, gradients {worst_gradient:.1e} "
          f"(relative), weights {worst_weight:.1e}, {compared} tensors")  # fmt: skip


def test_new_heads_start_a_classifier_on_an_encoder_for_finetuning(minilm_dir, caplog):
    with pytest.raises(CheckpointError, match="pass new_heads=True to start them from fresh weights"):
        minibert.BertForSequenceClassification.from_pretrained(minilm_dir)
    torch.manual_seed(0)
    with caplog.at_level(logging.WARNING, logger="minibert"):
        model = minibert.BertForSequenceClassification.from_pretrained(minilm_dir, new_heads=True, num_labels=6)
    assert "starts 2 tensors from fresh weights" in caplog.text and "classifier.weight" in caplog.text
    assert model.num_labels == 6 and model.labels.id2label[5] == "LABEL_5"
    assert abs(float(model.classifier.weight.detach().std()) - 0.02) < 0.005 and not model.classifier.bias.any()
    encoder = minibert.BertModel.from_pretrained(minilm_dir)
    assert torch.equal(model.bert.embeddings.word_embeddings.weight, encoder.embeddings.word_embeddings.weight)
    named = minibert.BertForSequenceClassification.from_pretrained(minilm_dir, new_heads=True,
                                                                   id2label={0: "no", 1: "yes"})  # fmt: skip
    assert named.labels.label2id == {"no": 0, "yes": 1}
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['num_label'\\]"):
        minibert.BertForSequenceClassification.from_pretrained(minilm_dir, num_label=3)


def test_transformers_trainer_trains_as_it_trains_transformers(tmp_path):
    """transformers' Trainer (which sets ``model.config.use_cache`` on every model, and needs accelerate)
    on minibert's classifier and on transformers' own, loaded from one folder, dropout off: the same
    two logged losses, the same weights after two AdamW steps, and the same evaluation loss. Trainer saves
    a model that is not transformers' own as its state dict alone (minibert's tensor names, no
    config.json): ``trainer.model.save_pretrained(folder)`` writes a folder both libraries load, and
    from_pretrained on save_model's folder says so (docs/migrating.md)."""
    pytest.importorskip("accelerate")
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)  # fmt: skip
    inputs = batch()
    rows = [{key: value[row] for key, value in inputs.items()} | {"labels": torch.tensor(row % 3)} for row in range(3)]
    rows = rows * 4  # 12 rows: two steps of 4, then an evaluation
    results = {}
    for library in (transformers, minibert):
        model = library.BertForSequenceClassification.from_pretrained(directory)
        args = transformers.TrainingArguments(str(tmp_path / library.__name__), max_steps=2, learning_rate=1e-3,
                                              per_device_train_batch_size=4, logging_steps=1, report_to=[],
                                              save_strategy="no", use_cpu=True, seed=0, data_seed=0)  # fmt: skip
        trainer = transformers.Trainer(model=model, args=args, train_dataset=rows, eval_dataset=rows)
        trainer.train()
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        results[library.__name__] = losses, trainer.evaluate()["eval_loss"], model, trainer
    (their_losses, their_eval, reference, _), (losses, evaluation, ours, trainer) = results.values()
    assert len(losses) == 2 and losses == pytest.approx(their_losses, abs=ATOL), (losses, their_losses)
    assert evaluation == pytest.approx(their_eval, abs=ATOL)
    assert ours.config.use_cache is False  # what Trainer set (TrainingArguments.use_cache)
    theirs = dict(reference.named_parameters())
    for name, parameter in ours.named_parameters():
        if checkpoint_name(name, ours) in theirs:
            assert_close(parameter, theirs[checkpoint_name(name, ours)], f"{name} after two steps", ATOL)
    trainer.save_model(tmp_path / "save_model")
    with pytest.raises(minibert.ModelNotFoundError, match=r"Trainer.save_model.*trainer.model.save_pretrained"):
        minibert.BertForSequenceClassification.from_pretrained(tmp_path / "save_model")
    trainer.model.save_pretrained(tmp_path / "save_pretrained")
    loaded = transformers.BertForSequenceClassification.from_pretrained(tmp_path / "save_pretrained").eval()
    with torch.no_grad():
        assert_close(ours.eval()(**inputs).logits, loaded(**inputs).logits, "saved, loaded in transformers", ATOL)


def test_a_classifier_of_three_labels_loaded_as_question_answering_names_the_class_it_was_saved_from(tmp_path):
    """A 3-label sequence classifier (transformers saves ``architectures``) loaded as
    BertForQuestionAnswering: transformers builds a 3-output qa_outputs from random weights, which
    every pipeline call then fails to unpack. The cause is the class, not the label count: a
    CheckpointError naming config.json, the class it was saved from, and the class that loads it."""
    directory, _ = saved(tmp_path, "BertForSequenceClassification", num_labels=3)
    with pytest.raises(CheckpointError, match=re.escape(str(directory / "config.json")) + r" was saved from "
                       r"BertForSequenceClassification .*num_labels must be 2, not 3; load it with "
                       r"BertForSequenceClassification$"):  # fmt: skip
        minibert.BertForQuestionAnswering.from_pretrained(directory)
    assert minibert.BertForSequenceClassification.from_pretrained(directory).config.num_labels == 3


def test_a_head_whose_config_asks_for_what_it_cannot_compute_says_so():
    """A question-answering head of other than 2 outputs (transformers builds it, then every call
    fails unpacking), and a one-output classifier told single_label_classification (its cross-entropy
    is 0 for every input, so training learns nothing; transformers refuses the config): each a
    ValueError naming the field, not a raw error or a silent zero."""
    config = minibert.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32)  # fmt: skip
    with pytest.raises(ValueError, match="num_labels must be 2, not 3"):
        minibert.BertForQuestionAnswering(dataclasses.replace(config, extra={"num_labels": 3}))
    one = minibert.BertForSequenceClassification(dataclasses.replace(config, extra={"num_labels": 1}))
    one.config.problem_type = "single_label_classification"
    with pytest.raises(ValueError, match="needs two labels or more"):
        one(torch.tensor([[2, 5, 3]]), labels=torch.tensor([0]))
