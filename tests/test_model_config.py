"""Every config.json field is computed exactly, changes nothing, or is refused (minibert/config.py).

The audit is tested three ways: every field transformers' BertConfig has today must be in one of
minibert's three lists (so a field a future transformers adds fails here until someone decides
what it means); each implemented field is set to a non-default value and compared with
transformers; each ignored field is set to a non-default value and must leave every output equal
to transformers'; each refused value must stop loading with an error naming config.json, the field
and the value. Activations are compared one by one with transformers' ACT2FN.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

import minibert
from helpers import assert_close, compare_outputs
from minibert import BertConfig, BertForPreTraining, BertModel, BertTokenizer, CheckpointError
from minibert.activations import ACTIVATIONS, REFUSED
from minibert.loading.config_fields import IGNORED, REFUSED_UNLESS
from tiny_hub import TINY as HUB_DIR  # a random 2-layer BertForPreTraining, H=32

transformers = pytest.importorskip("transformers")

TEXTS = ["i love paris", "the bank robber was thirsty and drank water", "un want ed runn ing !", "money"]
IMPLEMENTED = {f.name for f in dataclasses.fields(BertConfig)} - {"extra"}

# Fields of older BERT config.json files on the hub (google-bert/bert-base-chinese,
# bert-base-multilingual-cased, models saved by transformers 2–4).
OLDER_FIELDS = [
    "directionality", "pooler_fc_size", "pooler_num_attention_heads", "pooler_num_fc_layers",
    "pooler_size_per_head", "pooler_type", "position_embedding_type", "gradient_checkpointing",
    "torch_dtype", "output_past", "use_cache", "torchscript", "finetuning_task", "num_labels",
    "_num_labels", "pruned_heads", "xla_device", "use_return_dict",
]  # fmt: skip


def _checkpoint(tmp_path: Path, **fields) -> Path:
    """tiny_hub with these config.json fields changed."""
    directory = tmp_path / "model"
    shutil.copytree(HUB_DIR, directory)
    config = json.loads((directory / "config.json").read_text())
    config.update(fields)
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def _batch(directory):
    return BertTokenizer.from_pretrained(directory)(TEXTS, padding=True, return_tensors="pt")


def _compare_with_transformers(directory: Path, label: str) -> None:
    """Every hidden state, the pooler, attentions, masked-LM and NSP logits vs transformers."""
    reference = transformers.BertForPreTraining.from_pretrained(str(directory), attn_implementation="eager").eval()
    model = BertForPreTraining.from_pretrained(directory)
    _compare_models(model, reference, _batch(directory), label)


def _compare_models(model, reference, batch, label: str) -> None:
    """Every output of the two, asked for by name: config.json's call defaults (return_dict, ...)
    decide only what a call that does not name them returns (tests/test_model_mistakes.py)."""
    asked = {"return_dict": True, "output_hidden_states": False, "output_attentions": False}
    with torch.no_grad():
        ours = model.bert(**batch, output_hidden_states=True, output_attentions=True, return_dict=True)
        theirs = reference.bert(**batch, output_hidden_states=True, output_attentions=True)
        compare_outputs(ours, theirs, batch["attention_mask"], label)
        ours, theirs = model(**batch, **asked), reference(**batch, **asked)
    assert_close(ours.prediction_logits, theirs.prediction_logits, f"{label} masked-LM logits (every position)")
    assert_close(ours.seq_relationship_logits, theirs.seq_relationship_logits, f"{label} NSP logits")


def test_every_field_of_transformers_bert_config_is_accounted_for():
    fields = set(transformers.BertConfig().to_dict()) | set(transformers.BertConfig.__annotations__)
    fields |= set(OLDER_FIELDS)
    unaccounted = sorted(fields - IMPLEMENTED - set(IGNORED) - set(REFUSED_UNLESS) - {"hidden_act"})
    assert not unaccounted, f"config fields minibert has not decided about: {unaccounted}"
    overlaps = (IMPLEMENTED & set(IGNORED)) | (IMPLEMENTED & set(REFUSED_UNLESS)) | (set(IGNORED) & set(REFUSED_UNLESS))
    assert not overlaps, f"fields in two lists: {overlaps}"


def test_every_field_transformers_bert_code_reads_is_accounted_for():
    """The fields read as ``config.<name>`` in transformers' modeling_bert.py (what the reference
    computes from), not only those its BertConfig declares."""
    import re

    import transformers.models.bert.modeling_bert as modeling_bert

    source = Path(modeling_bert.__file__).read_text()
    read = set(re.findall(r"\bconfig\.([a-z_][a-z_0-9]*)", source))
    unaccounted = sorted(read - IMPLEMENTED - set(IGNORED) - set(REFUSED_UNLESS) - {"get_text_config"})
    assert not unaccounted, f"modeling_bert.py reads config fields minibert has not decided about: {unaccounted}"


IMPLEMENTED_VALUES = {  # a non-default value for every implemented field that shapes the numbers
    "hidden_act": "gelu_new",
    "layer_norm_eps": 1e-3,
    "max_position_embeddings": 40,  # a smaller table (the checkpoint's is cut to fit)
    "type_vocab_size": 3,
    "num_attention_heads": 4,
    "num_hidden_layers": 1,  # the checkpoint's second layer is unused: refused as unexpected tensors
    "pad_token_id": 5,
    "hidden_dropout_prob": 0.5,  # dropout: training only, both in eval mode
    "attention_probs_dropout_prob": 0.5,
    "initializer_range": 1.0,  # initialization only
}


@pytest.mark.parametrize("field", sorted(IMPLEMENTED_VALUES))
def test_implemented_field_with_a_non_default_value_matches_transformers(field, tmp_path):
    value = IMPLEMENTED_VALUES[field]
    directory = _checkpoint(tmp_path, **{field: value})
    if field in ("max_position_embeddings", "type_vocab_size", "num_hidden_layers"):
        _reshape_checkpoint(directory, field, value)
    _compare_with_transformers(directory, f"{field}={value}")


def _reshape_checkpoint(directory: Path, field: str, value) -> None:
    """Make the weights fit a config whose table sizes or depth changed."""
    from safetensors.torch import load_file, save_file

    state = load_file(str(directory / "model.safetensors"))
    if field == "max_position_embeddings":
        name = "bert.embeddings.position_embeddings.weight"
        state[name] = state[name][:value]
    elif field == "type_vocab_size":
        torch.manual_seed(0)
        state["bert.embeddings.token_type_embeddings.weight"] = torch.randn(value, 32)
    else:
        state = {name: tensor for name, tensor in state.items() if ".layer.1." not in name}
    save_file({name: tensor.contiguous() for name, tensor in state.items()}, str(directory / "model.safetensors"))


def test_sizes_are_read_from_config(tmp_path):
    """vocab_size, hidden_size and intermediate_size must agree with the weights: tiny_hub's odd
    sizes (111, 32, 37) load and compare; a config that disagrees is refused by the loader."""
    _compare_with_transformers(_checkpoint(tmp_path), "tiny_hub as saved")
    with pytest.raises(CheckpointError, match="intermediate"):
        BertModel.from_pretrained(_checkpoint(tmp_path / "wrong", intermediate_size=64))


IGNORED_VALUES = {  # a non-default value for each ignored field (what a real config could hold)
    "architectures": ["BertForMaskedLM"], "model_type": "bert", "transformers_version": "2.11.0",
    "_name_or_path": "somebody/some-bert", "dtype": "float16", "torch_dtype": "float16", "use_cache": False,
    "chunk_size_feed_forward": 3, "output_attentions": True, "output_hidden_states": True, "return_dict": False,
    "use_return_dict": False, "torchscript": True, "classifier_dropout": 0.3,
    "id2label": {"0": "NEG", "1": "NEU", "2": "POS"}, "label2id": {"NEG": 0, "NEU": 1, "POS": 2},
    "num_labels": 3, "_num_labels": 3, "problem_type": "multi_label_classification", "finetuning_task": "sst-2",
    "bos_token_id": 2, "eos_token_id": 3, "sep_token_id": 3, "decoder_start_token_id": 2,
    "_attn_implementation": "sdpa", "attn_implementation": "sdpa", "gradient_checkpointing": True,
    "output_past": False, "xla_device": False, "directionality": "bidi", "pooler_fc_size": 768,
    "pooler_num_attention_heads": 12, "pooler_num_fc_layers": 3, "pooler_size_per_head": 128,
    "pooler_type": "first_token_transform", "tie_word_embeddings": True,
}  # fmt: skip


def test_every_ignored_field_has_a_test_value():
    assert set(IGNORED_VALUES) == set(IGNORED)


@pytest.mark.parametrize("field", sorted(IGNORED))
def test_ignored_field_changes_nothing(field, tmp_path):
    """Set to a non-default value, the field leaves minibert's outputs equal to transformers'
    (which reads it, or not, as it does)."""
    directory = _checkpoint(tmp_path, **{field: IGNORED_VALUES[field]})
    reference = transformers.BertForPreTraining.from_pretrained(str(HUB_DIR), attn_implementation="eager").eval()
    model = BertForPreTraining.from_pretrained(directory)
    _compare_models(model, reference, _batch(directory), f"{field}={IGNORED_VALUES[field]!r}")


REFUSED_VALUES = {
    "position_embedding_type": ["relative_key", "relative_key_query"],
    "is_decoder": [True],
    "add_cross_attention": [True],
    "is_encoder_decoder": [True],
    "pruned_heads": [{"0": [1]}],
    "quantization_config": [{"quant_method": "bitsandbytes", "load_in_8bit": True}],
    "per_layer_config": [{"1": {"hidden_act": "relu"}}],  # (layer 1 in ReLU: transformers refuses it for BERT)
}
REFUSED_CASES = [(field, value) for field, values in REFUSED_VALUES.items() for value in values]


def test_every_refused_field_has_test_values():
    assert set(REFUSED_VALUES) == set(REFUSED_UNLESS)


@pytest.mark.parametrize(("field", "value"), REFUSED_CASES, ids=[f"{f}={v}" for f, v in REFUSED_CASES])
def test_refused_value_stops_loading_with_the_field_named(field, value, tmp_path):
    directory = _checkpoint(tmp_path, **{field: value})
    for cls in (BertModel, BertForPreTraining):
        with pytest.raises(CheckpointError) as caught:
            cls.from_pretrained(directory)
        message = str(caught.value)
        assert str(directory / "config.json") in message and field in message and json.dumps(value) in message
    with pytest.raises(CheckpointError, match=field):
        BertConfig.from_dict({field: value})


@pytest.mark.parametrize("field", sorted(REFUSED_UNLESS))
def test_the_value_minibert_computes_loads(field, tmp_path):
    computed = REFUSED_UNLESS[field][0][0]
    _compare_with_transformers(_checkpoint(tmp_path, **{field: computed}), f"{field}={computed!r}")


def test_a_decoder_config_is_refused_because_transformers_computes_something_else(tmp_path):
    """Why the refusal matters: with is_decoder=True transformers attends causally (each token sees
    only the ones before it), so the numbers differ from an encoder's on the same weights."""
    encoder = transformers.BertModel.from_pretrained(str(HUB_DIR), attn_implementation="eager").eval()
    decoder_dir = _checkpoint(tmp_path, is_decoder=True)
    decoder = transformers.BertModel.from_pretrained(str(decoder_dir), attn_implementation="eager").eval()
    batch = _batch(HUB_DIR)
    with torch.no_grad():
        difference = (encoder(**batch).last_hidden_state - decoder(**batch).last_hidden_state).abs().max().item()
    assert difference > 1e-2, f"transformers' decoder gave the encoder's numbers (max |Δ| {difference:.1e})"
    with pytest.raises(CheckpointError, match="is_decoder = true"):
        BertModel.from_pretrained(decoder_dir)


def test_untied_decoder_is_refused_by_the_heads_but_the_encoder_loads(tmp_path):
    directory = _checkpoint(tmp_path, tie_word_embeddings=False)
    with pytest.raises(CheckpointError, match=r"config\.json: config field tie_word_embeddings = false"):
        BertForPreTraining.from_pretrained(directory)
    reference = transformers.BertModel.from_pretrained(str(HUB_DIR), attn_implementation="eager").eval()
    batch = _batch(directory)
    with torch.no_grad():
        ours = BertModel.from_pretrained(directory)(**batch, output_hidden_states=True)
        theirs = reference(**batch, output_hidden_states=True)
    compare_outputs(ours, theirs, batch["attention_mask"], "tie_word_embeddings=false, encoder only")


# --- activations -------------------------------------------------------------------------------


def test_every_transformers_activation_is_computed_or_refused():
    from transformers.activations import ACT2CLS

    unaccounted = sorted(set(ACT2CLS) - set(ACTIVATIONS) - set(REFUSED))
    assert not unaccounted, f"activations minibert has not decided about: {unaccounted}"


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_matches_transformers(name):
    from transformers.activations import ACT2FN

    torch.manual_seed(0)
    x = torch.cat([torch.linspace(-12, 12, 4801), torch.randn(10_000) * 3])
    expected = ACT2FN[name](x.clone())
    # The bound, from the arithmetic: most activations are x·gate(x) with a gate in [0, 1] (GELU's
    # ½(1 + erf(x/√2)), SiLU's sigmoid, ...). Where the gate is small (x < 0) its fp32 value carries the
    # absolute error of erf/tanh/exp near ±1 (a few ulps of 2⁻²⁴ each): two implementations, 2 ulps
    # each, times |x| ≤ 12 gives 12 · 4 · 2⁻²⁴ = 2.9e-6 absolute. Elsewhere the values are compared
    # relative to their size (relu2 grows as x²), a few ulps of 2⁻²³. (1e-6 held on AVX2 machines
    # and failed at 1.04e-6 on an AVX-512 one, whose vectorized erf rounds differently.)
    tolerance = 12 * 4 * 2**-24
    for inplace in (False, True):
        actual = ACTIVATIONS[name](x.clone(), inplace=inplace)
        scale = expected.abs().clamp(min=1)  # relu2 grows as x²: compare relative to the value
        assert_close(actual / scale, expected / scale, f"{name} (inplace={inplace})", atol=tolerance)


@pytest.mark.parametrize("name", sorted(REFUSED) + ["gelu_tanh", "GELU", "swiglu"])
def test_other_activations_are_refused_naming_them(name, tmp_path):
    with pytest.raises(CheckpointError, match=f"hidden_act = '{name}' is not supported"):
        BertModel.from_pretrained(_checkpoint(tmp_path, hidden_act=name))


@pytest.mark.parametrize("name", ["gelu_python", "quick_gelu", "gelu_10", "mish", "gelu_fast"])
def test_model_with_other_activation_matches_transformers(name, tmp_path):
    _compare_with_transformers(_checkpoint(tmp_path, hidden_act=name), f"hidden_act={name}")


SET_FIELDS = {"problem_type": "regression", "classifier_dropout": 0.3, "num_labels": 3, "finetuning_task": "sst-2",
              "architectures": ["BertForMaskedLM"]}  # fmt: skip


@pytest.mark.parametrize("fields", [{}, SET_FIELDS], ids=["defaults", "set"])
def test_config_json_fields_read_as_transformers_config_attributes(tmp_path, fields):
    """transformers' users read config.json's other fields as attributes (``config.model_type``,
    ``config.is_decoder``, ``config.problem_type``, ...): the value the file gives, else transformers'
    default, as transformers answers; ``to_json_string()`` is the config.json save_pretrained writes."""
    from minibert.loading.config_fields import READABLE

    directory = _checkpoint(tmp_path, **fields)
    ours = BertConfig.from_json_file(directory / "config.json")
    theirs = transformers.AutoConfig.from_pretrained(directory)
    for name in [*READABLE, "model_type", "use_return_dict", "id2label", "label2id", "num_labels"]:
        if name in ("position_embedding_type", "finetuning_task") and not hasattr(theirs, name):
            assert getattr(ours, name) == READABLE[name], name  # transformers 5 has them only when the file does
        else:
            assert getattr(ours, name) == getattr(theirs, name), name
    assert json.loads(ours.to_json_string()) == ours.to_dict()
    ours.to_json_file(tmp_path / "config.json")
    assert (tmp_path / "config.json").read_text() == ours.to_json_string()
    assert BertModel.from_pretrained(directory).config.name_or_path == str(directory)


def test_a_copys_labels_and_problem_type_are_its_own():
    """copy.copy and dataclasses.replace share the config's dict of other fields: a setter (or the
    loss choosing problem_type from the first labels) wrote into it, so the original changed too,
    where transformers leaves it alone."""
    import copy
    import dataclasses

    original = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                          intermediate_size=32)  # fmt: skip
    shallow, replaced = copy.copy(original), dataclasses.replace(original, hidden_dropout_prob=0.0)
    shallow.problem_type = "regression"
    shallow.id2label = {0: "x", 1: "y", 2: "z"}
    replaced.label2id = {"a": 0, "b": 1}
    assert original.problem_type is None and original.num_labels == 2 and original.label2id == {"LABEL_0": 0,
                                                                                               "LABEL_1": 1}
    assert shallow.problem_type == "regression" and shallow.num_labels == 3 and replaced.label2id == {"a": 0, "b": 1}


def test_use_cache_is_set_as_transformers_trainer_sets_it(tmp_path):
    """transformers' Trainer sets ``model.config.use_cache = args.use_cache`` (False by default) on every
    model it is given: taken, as by transformers' BertConfig, and saved; the outputs are the same as
    transformers' with either value (an encoder has no key/value cache); only True or False is taken."""
    directory = _checkpoint(tmp_path)
    reference = transformers.BertForPreTraining.from_pretrained(str(directory), attn_implementation="eager").eval()
    model = BertForPreTraining.from_pretrained(directory)
    for value in (False, True):
        model.config.use_cache = reference.config.use_cache = value
        assert model.config.use_cache is value
        _compare_models(model, reference, _batch(directory), f"use_cache={value}")
    model.config.use_cache = False
    model.save_pretrained(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "config.json").read_text())["use_cache"] is False
    assert transformers.AutoConfig.from_pretrained(tmp_path / "saved").use_cache is False
    assert BertForPreTraining.from_pretrained(tmp_path / "saved").config.use_cache is False
    with pytest.raises(ValueError, match="config.use_cache must be True or False, got 1"):
        model.config.use_cache = 1


SHAPE = dict(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=37)
CONSTRUCTOR_FIELDS = [{"num_labels": 3}, {"id2label": {0: "neg", 1: "pos"}}, {"num_labels": 3, "id2label": {0: "a"}},
                      {"problem_type": "regression"}, {"classifier_dropout": 0.2}, {"output_hidden_states": True},
                      {"return_dict": False}, {"finetuning_task": "mnli"}]  # fmt: skip


@pytest.mark.parametrize("fields", CONSTRUCTOR_FIELDS, ids=[",".join(fields) for fields in CONSTRUCTOR_FIELDS])
def test_the_constructor_takes_config_json_fields_as_transformers_and_from_dict(fields):
    """``BertConfig(..., num_labels=3)``, transformers' way to make a new classifier's config, is what
    transformers' constructor makes of it, and what ``from_dict`` makes of the same fields (it was
    Python's own TypeError, unexpected keyword argument)."""
    ours, theirs = BertConfig(**SHAPE, **fields), transformers.BertConfig(**SHAPE, **fields)
    assert ours.to_dict() == BertConfig.from_dict({**SHAPE, **fields}).to_dict()
    for name in ("num_labels", "id2label", "problem_type", "classifier_dropout", "output_hidden_states",
                 "return_dict", "finetuning_task"):  # fmt: skip
        assert getattr(ours, name) == getattr(theirs, name, None), name  # (transformers 5: finetuning_task if given)
    if theirs.label2id is not None:  # (transformers 5 leaves it None beside an id2label given alone)
        assert ours.label2id == theirs.label2id
    built, reference = (library.BertForSequenceClassification(config) for library, config in
                        ((minibert, ours), (transformers, theirs)))  # fmt: skip
    assert built.classifier.out_features == reference.classifier.out_features


def test_the_constructor_refuses_what_minibert_does_not_compute_and_names_what_it_takes():
    """A value minibert refuses in config.json is refused as a keyword, with the same message; a keyword
    neither library knows is a TypeError listing what is taken (transformers keeps it as an attribute
    nothing reads: docs/checkpoints.md)."""
    with pytest.raises(CheckpointError, match="position_embedding_type = \"relative_key\": relative position .*"
                                              "minibert refuses it"):  # fmt: skip
        BertConfig(**SHAPE, position_embedding_type="relative_key")
    taken = r"unexpected keyword arguments \['num_label'\]: it takes its fields vocab_size, .*, extra, and "
    with pytest.raises(TypeError, match=taken + "config.json's other fields .*num_labels"):
        BertConfig(**SHAPE, num_label=3)
    assert transformers.BertConfig(**SHAPE, num_label=3).num_labels == 2  # (theirs: kept, unread)


@pytest.mark.parametrize("field, value", [("layer_norm_eps", float("nan")), ("hidden_act", "swiglu"), ("vocab_size", 0),
                                          ("hidden_size", 2.5), ("pad_token_id", -1), ("extra", None)])  # fmt: skip
def test_a_field_set_alone_is_checked_as_the_constructor_checks_it(field, value):
    """``config.layer_norm_eps = float("nan")`` was taken as it was (the model then gave NaN everywhere),
    though ``BertConfig(layer_norm_eps=float("nan"))`` is refused."""
    config = BertConfig(**SHAPE)
    kept = getattr(config, field)
    with pytest.raises(ValueError, match=f"field {field}"):
        setattr(config, field, value)
    assert getattr(config, field) == kept


def test_a_config_changed_after_it_was_made_is_checked_when_a_model_is_built():
    """``check_domains`` ran in the constructor alone: 5 heads set on a width of 32 built a model that
    failed inside ``view`` at its first call (transformers refuses it when the model is built, as now
    here). What holds between two fields is checked at build, so that they can be set one after the other;
    so is a config changed around the setters (``object.__setattr__``, ``config.extra = {...}``)."""
    config, theirs = BertConfig(**SHAPE), transformers.BertConfig(**SHAPE)
    config.num_attention_heads = theirs.num_attention_heads = 5
    with pytest.raises(ValueError, match=r"hidden_size = 32 is not a multiple of num_attention_heads = 5"):
        minibert.BertModel(config)
    with pytest.raises(ValueError, match=r"hidden size \(32\) is not a multiple of the number of attention heads"):
        transformers.BertModel(theirs)
    with pytest.raises(ValueError, match="not a multiple"):
        minibert.BertForSequenceClassification(config)
    config.hidden_size = 40  # the width next: now a whole head size
    assert minibert.BertModel(config).config.head_size == 8
    config.pad_token_id = 99
    with pytest.raises(ValueError, match=r"pad_token_id = 99: must be an id in the vocabulary \[0, 99\)"):
        minibert.BertModel(config)
    config.vocab_size = 100
    minibert.BertModel(config)
    for field, value, error in [("layer_norm_eps", float("nan"), ValueError),
                                ("extra", {"position_embedding_type": "relative_key"}, CheckpointError)]:  # fmt: skip
        changed = dataclasses.replace(config)
        object.__setattr__(changed, field, value)  # (around the setter)
        with pytest.raises(error, match=field if field != "extra" else "position_embedding_type"):
            minibert.BertForMaskedLM(changed)


def test_dtype_update_and_to_diff_dict_as_transformers_config(tmp_path):
    """`config.dtype` / `config.torch_dtype` were AttributeErrors though config.json holds the dtype;
    `config.update({...})` and `config.to_diff_dict()` were missing (transformers' scripts call them)."""
    transformers = pytest.importorskip("transformers")
    shape = dict(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=37)
    transformers.BertModel(transformers.BertConfig(**shape)).to(torch.bfloat16).save_pretrained(tmp_path)
    ours, theirs = minibert.BertConfig.from_pretrained(tmp_path), transformers.BertConfig.from_pretrained(str(tmp_path))
    assert ours.dtype == ours.torch_dtype == theirs.dtype == torch.bfloat16
    assert minibert.BertConfig().dtype is None
    ours.update({"hidden_dropout_prob": 0.3, "num_labels": 3})
    theirs.update({"hidden_dropout_prob": 0.3, "num_labels": 3})
    assert (ours.hidden_dropout_prob, ours.num_labels) == (theirs.hidden_dropout_prob, theirs.num_labels) == (0.3, 3)
    with pytest.raises(ValueError, match="hidden_dropout_prob"):
        ours.update({"hidden_dropout_prob": 2.0})
    diff = ours.to_diff_dict()
    assert diff["model_type"] == "bert" and diff["hidden_size"] == 32 and "layer_norm_eps" not in diff
    assert {name: diff[name] for name in shape} == {name: theirs.to_diff_dict()[name] for name in shape}
