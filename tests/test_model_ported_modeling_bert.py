"""transformers' ``tests/models/bert/test_modeling_bert.py``, ported: BertModelTester's configs and
shapes, for BertModel and every head minibert has (pre-training, masked LM, next sentence, question
answering, sequence and token classification, multiple choice: upstream's create_and_check_* cases),
here also compared value by value with transformers, logits and loss (1e-5, the parity bound of
tests/test_model.py). Each test names its upstream test; the decoder cases are a refusal; the
tokenizers' suites are ported in test_tokenizer_ported_suites.py."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_close

transformers = pytest.importorskip("transformers")


# ============================================================================ transformers
# tests/models/bert/test_modeling_bert.py :: BertModelTester


def _tester_model(tmp_path, layers: int, seed: int):
    """BertModelTester's tiny config (vocab 99, hidden 32, 4 heads, intermediate 37, type vocab 16),
    random weights from transformers, saved and loaded by minibert."""
    from minibert import BertForPreTraining

    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4, intermediate_size=37,
        hidden_act="gelu", max_position_embeddings=512, type_vocab_size=16, initializer_range=0.02,
        attn_implementation="eager",
    )  # fmt: skip
    reference = transformers.BertForPreTraining(config).eval()
    reference.save_pretrained(str(tmp_path))
    return BertForPreTraining.from_pretrained(tmp_path), reference


def _tester_inputs(seed: int, batch_size=13, seq_length=7, vocab_size=99, type_vocab_size=16):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, vocab_size, (batch_size, seq_length), generator=generator)
    token_type_ids = torch.randint(0, type_vocab_size, (batch_size, seq_length), generator=generator)
    input_mask = torch.randint(0, 2, (batch_size, seq_length), generator=generator)
    input_mask[:, -1] = 1  # random_attention_mask: at least one token attended in each row
    return input_ids, token_type_ids, input_mask


@pytest.mark.parametrize("layers", [2, 5])
def test_modeling_bert_create_and_check_model(tmp_path, layers):
    model, reference = _tester_model(tmp_path, layers, seed=layers)
    input_ids, token_type_ids, input_mask = _tester_inputs(seed=layers)
    with torch.no_grad():
        for kwargs in (dict(attention_mask=input_mask, token_type_ids=token_type_ids),
                       dict(token_type_ids=token_type_ids), dict()):  # fmt: skip
            ours = model.bert(input_ids, **kwargs, output_hidden_states=True)
            theirs = reference.bert(input_ids, **kwargs, output_hidden_states=True)
            assert ours.last_hidden_state.shape == (13, 7, 32)
            assert ours.pooler_output.shape == (13, 32)
            assert len(ours.hidden_states) == layers + 1
            real = (kwargs.get("attention_mask", torch.ones_like(input_ids))).bool()
            for index, (a, b) in enumerate(zip(ours.hidden_states, theirs.hidden_states)):
                assert_close(a[real], b[real], f"tester layers={layers} hidden state {index}", 1e-5)
            assert_close(ours.pooler_output, theirs.pooler_output, f"tester layers={layers} pooler", 1e-5)


def test_modeling_bert_create_and_check_for_pretraining(tmp_path):
    """create_and_check_for_pretraining: MLM logits (B, T, V), NSP logits (B, 2), with the token labels
    and sequence labels as upstream passes them (the loss compared too)."""
    model, reference = _tester_model(tmp_path, 2, seed=11)
    input_ids, token_type_ids, input_mask = _tester_inputs(seed=11)
    sequence_labels, token_labels, _ = _tester_labels(seed=11)
    inputs = dict(attention_mask=input_mask, token_type_ids=token_type_ids, labels=token_labels,
                  next_sentence_label=sequence_labels)  # fmt: skip
    with torch.no_grad():
        ours, theirs = model(input_ids, **inputs), reference(input_ids, **inputs)
    assert_close(ours.loss, theirs.loss, "tester pre-training loss", 1e-5)
    assert ours.prediction_logits.shape == (13, 7, 99)
    assert ours.seq_relationship_logits.shape == (13, 2)
    real = input_mask.bool()
    mlm = assert_close(ours.prediction_logits[real], theirs.prediction_logits[real], "tester MLM logits", 1e-5)
    nsp = assert_close(ours.seq_relationship_logits, theirs.seq_relationship_logits, "tester NSP logits", 1e-5)
    print(f"\nBertModelTester config: max |Δ| MLM {mlm:.1e}, NSP {nsp:.1e}")


# The task heads' cases: each builds its head on BertModelTester's config (2 layers; num_labels 3,
# num_choices 4), calls it with the tester's inputs and labels (sequence labels from 2 classes, token
# labels from 3, choice labels from 4) and asserts the logits' shape. Here the same random head, saved
# by transformers and loaded by minibert, must also give transformers' logits (real tokens) and loss.
NUM_LABELS, NUM_CHOICES, SEQUENCE_CLASSES = 3, 4, 2


def _tester_head(tmp_path, name: str, seed: int, **config):
    """transformers' ``name`` on the tester's config (plus ``config``), random, saved; minibert's loaded."""
    import minibert

    torch.manual_seed(seed)
    reference = getattr(transformers, name)(transformers.BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
        hidden_act="gelu", max_position_embeddings=512, type_vocab_size=16, initializer_range=0.02,
        attn_implementation="eager", **config)).eval()  # fmt: skip
    reference.save_pretrained(str(tmp_path / name))
    return getattr(minibert, name).from_pretrained(tmp_path / name), reference


def _tester_labels(seed: int, batch_size=13, seq_length=7):
    """prepare_config_and_inputs' labels: (sequence_labels, token_labels, choice_labels)."""
    generator = torch.Generator().manual_seed(seed + 1000)
    return (torch.randint(0, SEQUENCE_CLASSES, (batch_size,), generator=generator),
            torch.randint(0, NUM_LABELS, (batch_size, seq_length), generator=generator),
            torch.randint(0, NUM_CHOICES, (batch_size,), generator=generator))  # fmt: skip


def _same_head_outputs(ours, theirs, fields: dict[str, tuple], real: torch.Tensor | None, what: str) -> None:
    """Each field's shape as upstream asserts, its values (real tokens only where it has one per token)
    and the loss within 1e-5 of transformers'."""
    for field, shape in fields.items():
        a, b = getattr(ours, field), getattr(theirs, field)
        assert tuple(a.shape) == shape, f"{what} {field}: {tuple(a.shape)}, upstream asserts {shape}"
        per_token = real is not None and a.dim() >= 2 and a.shape[1] == real.shape[1]
        assert_close(a[real] if per_token else a, b[real] if per_token else b, f"{what} {field}", 1e-5)
    assert_close(ours.loss, theirs.loss, f"{what} loss", 1e-5)


@pytest.mark.parametrize("case", ["for_masked_lm", "for_next_sequence_prediction", "for_question_answering",
                                  "for_sequence_classification", "for_token_classification"])  # fmt: skip
def test_modeling_bert_create_and_check_heads(tmp_path, case):
    """create_and_check_for_masked_lm (labels: token labels), _for_next_sequence_prediction (sequence
    labels), _for_question_answering (start and end positions: the sequence labels),
    _for_sequence_classification and _for_token_classification (num_labels 3)."""
    name, config, labels, fields = {
        "for_masked_lm": ("BertForMaskedLM", {}, lambda s, t: {"labels": t}, {"logits": (13, 7, 99)}),
        "for_next_sequence_prediction": ("BertForNextSentencePrediction", {}, lambda s, t: {"labels": s},
                                         {"logits": (13, 2)}),
        "for_question_answering": ("BertForQuestionAnswering", {}, lambda s, t: {"start_positions": s,
                                   "end_positions": s}, {"start_logits": (13, 7), "end_logits": (13, 7)}),
        "for_sequence_classification": ("BertForSequenceClassification", {"num_labels": NUM_LABELS},
                                        lambda s, t: {"labels": s}, {"logits": (13, NUM_LABELS)}),
        "for_token_classification": ("BertForTokenClassification", {"num_labels": NUM_LABELS},
                                     lambda s, t: {"labels": t}, {"logits": (13, 7, NUM_LABELS)}),
    }[case]  # fmt: skip
    model, reference = _tester_head(tmp_path, name, seed=21, **config)
    input_ids, token_type_ids, input_mask = _tester_inputs(seed=21)
    sequence_labels, token_labels, _ = _tester_labels(seed=21)
    inputs = dict(attention_mask=input_mask, token_type_ids=token_type_ids, **labels(sequence_labels, token_labels))
    with torch.no_grad():
        ours, theirs = model(input_ids, **inputs), reference(input_ids, **inputs)
    _same_head_outputs(ours, theirs, fields, input_mask.bool(), case)


def test_modeling_bert_create_and_check_for_multiple_choice(tmp_path):
    """create_and_check_for_multiple_choice: each row repeated for 4 choices, (B, C, T) inputs,
    logits (B, C), the choice labels."""
    model, reference = _tester_head(tmp_path, "BertForMultipleChoice", seed=31)
    input_ids, token_type_ids, input_mask = _tester_inputs(seed=31)
    _, _, choice_labels = _tester_labels(seed=31)
    inputs = {name: value.unsqueeze(1).expand(-1, NUM_CHOICES, -1).contiguous()
              for name, value in (("input_ids", input_ids), ("token_type_ids", token_type_ids),
                                  ("attention_mask", input_mask))}  # fmt: skip
    with torch.no_grad():
        ours, theirs = model(**inputs, labels=choice_labels), reference(**inputs, labels=choice_labels)
    _same_head_outputs(ours, theirs, {"logits": (13, NUM_CHOICES)}, None, "for_multiple_choice")


def test_modeling_bert_model_as_decoder_is_refused(tmp_path):
    """create_and_check_model_as_decoder / for_causal_lm: decoders are out of minibert's scope, and a
    decoder config is refused rather than run as an encoder."""
    from minibert import BertModel, CheckpointError

    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=37, is_decoder=True, add_cross_attention=True)  # fmt: skip
    transformers.BertModel(config).save_pretrained(str(tmp_path))
    with pytest.raises(CheckpointError, match="is_decoder"):
        BertModel.from_pretrained(tmp_path)
