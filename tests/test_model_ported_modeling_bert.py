"""transformers' ``tests/models/bert/test_modeling_bert.py``, ported: BertModelTester's configs and
shapes, every head minibert has, here also compared value by value with transformers (1e-5, the
parity bound of tests/test_model.py). Each test names its upstream test; the tokenizers' suites are
ported in test_tokenizer_ported_suites.py."""

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
    """create_and_check_for_pretraining, for_masked_lm and for_next_sequence_prediction: minibert's
    heads are BertForPreTraining's (MLM logits (B, T, V), NSP logits (B, 2))."""
    model, reference = _tester_model(tmp_path, 2, seed=11)
    input_ids, token_type_ids, input_mask = _tester_inputs(seed=11)
    with torch.no_grad():
        ours = model(input_ids, attention_mask=input_mask, token_type_ids=token_type_ids)
        theirs = reference(input_ids, attention_mask=input_mask, token_type_ids=token_type_ids)
    assert ours.prediction_logits.shape == (13, 7, 99)
    assert ours.seq_relationship_logits.shape == (13, 2)
    real = input_mask.bool()
    mlm = assert_close(ours.prediction_logits[real], theirs.prediction_logits[real], "tester MLM logits", 1e-5)
    nsp = assert_close(ours.seq_relationship_logits, theirs.seq_relationship_logits, "tester NSP logits", 1e-5)
    print(f"\nBertModelTester config: max |Δ| MLM {mlm:.1e}, NSP {nsp:.1e}")


def test_modeling_bert_model_as_decoder_is_refused(tmp_path):
    """create_and_check_model_as_decoder / for_causal_lm: decoders are out of minibert's scope, and a
    decoder config is refused rather than run as an encoder."""
    from minibert import BertModel, CheckpointError

    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=37, is_decoder=True, add_cross_attention=True)  # fmt: skip
    transformers.BertModel(config).save_pretrained(str(tmp_path))
    with pytest.raises(CheckpointError, match="is_decoder"):
        BertModel.from_pretrained(tmp_path)
