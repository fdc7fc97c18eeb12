"""transformers 4's call options the tutorials pass (McCormick & Ryan's fine-tuning tutorial among
them), each giving transformers' numbers:

* ``BertForSequenceClassification.from_pretrained(path, num_labels=2, output_attentions=False,
  output_hidden_states=False)`` on a checkpoint without a classifier: a new head, drawn as Google
  draws one (a normal of deviation 0.02 truncated at two deviations, bias 0), with one warning; a
  classifier the checkpoint has with another number of outputs stays refused;
* ``output_hidden_states=True`` given to ``from_pretrained``: every call's default, the hidden
  states transformers' model loaded the same way returns;
* ``model(..., return_dict=True)``: the output object; ``return_dict=False``: transformers' tuple.
* the output object is a mapping of the fields computed, as transformers' ModelOutput: the same keys
  in the same order, ``in``, ``len``, ``dict(out)``, ``get``, ``out[0]``, ``out[1:]``, ``to_tuple()``,
  ``keys()`` printed as there, for the encoder and every head.

Bounds: 1e-5 beyond fp32's own rounding at MiniLM's depth, as transformers measures it against
float64 (helpers.bound_from_exact), as in tests/test_model.py.
"""

from __future__ import annotations

import collections.abc
import logging

import pytest
import torch

import minibert
from helpers import assert_close, bound_from_exact, exact_reference
from minibert.errors import CheckpointError, InputTypeError

transformers = pytest.importorskip("transformers")
TEXTS = ["a sentence of the tutorial's data set.", "another, longer one: it is about the weather today"]


@pytest.fixture(scope="module")
def batch(minilm_dir):
    return minibert.BertTokenizer.from_pretrained(minilm_dir)(TEXTS, padding=True, return_tensors="pt")


def test_num_labels_on_an_encoder_makes_a_new_head_with_one_warning(minilm_dir, batch, caplog):
    torch.manual_seed(0)
    with caplog.at_level(logging.WARNING, logger="minibert"):
        ours = minibert.BertForSequenceClassification.from_pretrained(
            minilm_dir, num_labels=2, output_attentions=False, output_hidden_states=False)  # fmt: skip
    warnings = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "starts 2 tensors from fresh weights" in warnings[0].getMessage(), caplog.text
    weight = ours.classifier.weight.detach()
    assert weight.shape == (2, 384) and not ours.classifier.bias.any()
    assert weight.abs().max() <= 0.04 and 0.012 < float(weight.std()) < 0.02  # truncated at 2σ: σ·0.88
    theirs = transformers.BertForSequenceClassification.from_pretrained(str(minilm_dir), num_labels=2,
                                                                        attn_implementation="eager").eval()  # fmt: skip
    with torch.no_grad():
        theirs.classifier.weight.copy_(weight)
        theirs.classifier.bias.zero_()
        labels = torch.tensor([1, 0])
        got = ours(batch["input_ids"], token_type_ids=None, attention_mask=batch["attention_mask"], labels=labels,
                   return_dict=True)  # fmt: skip
        want = theirs(batch["input_ids"], token_type_ids=None, attention_mask=batch["attention_mask"], labels=labels,
                      return_dict=True)  # fmt: skip
        exact = exact_reference(theirs)(**batch, labels=labels)
    worst = assert_close(got.logits, want.logits, "logits", bound_from_exact(want.logits, exact.logits))
    assert_close(got.loss, want.loss, "loss", bound_from_exact(want.loss, exact.loss))
    print(f"\nnew head: logits max |Δ| {worst:.1e}")


def test_a_head_with_another_number_of_outputs_stays_refused(minilm_dir, tmp_path):
    torch.manual_seed(1)
    minibert.BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=3).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match=r"has 3 outputs, one per label; the labels given are 2"):
        minibert.BertForSequenceClassification.from_pretrained(tmp_path, num_labels=2)
    assert minibert.BertForSequenceClassification.from_pretrained(tmp_path, num_labels=3).num_labels == 3


def test_a_missing_head_without_labels_is_still_an_error(minilm_dir):
    with pytest.raises(CheckpointError, match="pass new_heads=True"):
        minibert.BertForSequenceClassification.from_pretrained(minilm_dir)


def test_output_hidden_states_given_at_load_is_every_calls_default(minilm_dir, batch):
    ours = minibert.BertModel.from_pretrained(minilm_dir, output_hidden_states=True, output_attentions=True)
    options = {"output_hidden_states": True, "output_attentions": True}
    theirs = transformers.BertModel.from_pretrained(str(minilm_dir), **options, attn_implementation="eager").eval()
    with torch.no_grad():
        got, want = ours(**batch), theirs(**batch)
        exact = exact_reference(theirs)(**batch)
        assert ours(**batch, output_hidden_states=False).hidden_states is None  # the call's own choice wins
    assert len(got.hidden_states) == len(want.hidden_states) == 7 and len(got.attentions) == 6
    real = batch["attention_mask"].bool()
    for index, (mine, reference, float64) in enumerate(zip(got.hidden_states, want.hidden_states, exact.hidden_states)):
        bound = bound_from_exact(reference[real], float64[real])
        assert_close(mine[real], reference[real], f"hidden_states[{index}]", bound)
    for index, (mine, reference) in enumerate(zip(got.attentions, want.attentions)):
        assert_close(mine, reference, f"attentions[{index}]", 1e-5)  # probabilities in [0, 1]


def test_return_dict_false_is_transformers_tuple(minilm_dir, batch):
    torch.manual_seed(2)
    ours = minibert.BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=2)
    theirs = transformers.BertForSequenceClassification.from_pretrained(str(minilm_dir), num_labels=2,
                                                                        attn_implementation="eager").eval()  # fmt: skip
    theirs.load_state_dict({**theirs.state_dict(), "classifier.weight": ours.classifier.weight.detach(),
                            "classifier.bias": ours.classifier.bias.detach()})  # fmt: skip
    labels = torch.tensor([0, 1])
    with torch.no_grad():
        got = ours(**batch, labels=labels, return_dict=False)
        want = theirs(**batch, labels=labels, return_dict=False)
    assert isinstance(got, tuple) and len(got) == len(want) == 2
    for mine, reference, name in zip(got, want, ("loss", "logits")):
        assert_close(mine, reference, name, 1e-4)  # MiniLM's logits: magnitudes below 1, six layers of fp32


@pytest.mark.parametrize(("keyword", "value"), [("return_dict", "yes"), ("return_dict", 1)])
def test_a_call_option_that_is_not_a_bool_is_refused(minilm_dir, batch, keyword, value):
    model = minibert.BertModel.from_pretrained(minilm_dir)
    with pytest.raises(InputTypeError, match=f"{keyword} must be True or False"):
        model(**batch, **{keyword: value})
    with pytest.raises(InputTypeError, match="output_hidden_states must be True or False"):
        minibert.BertModel.from_pretrained(minilm_dir, output_hidden_states="yes")


OUTPUT_CASES = [
    ("BertModel", {}),
    ("BertModel", {"output_hidden_states": True}),
    ("BertForSequenceClassification", {"labels": torch.tensor([0, 1])}),
    ("BertForSequenceClassification", {"output_hidden_states": True, "output_attentions": True}),
    ("BertForTokenClassification", {"labels": torch.tensor([[0] * 13, [1] * 13])}),
    ("BertForQuestionAnswering", {"start_positions": torch.tensor([1, 2]), "end_positions": torch.tensor([2, 3])}),
    ("BertForMaskedLM", {"output_hidden_states": True}),
    ("BertForNextSentencePrediction", {}),
    ("BertForPreTraining", {"output_hidden_states": True}),  # transformers' fields only: no last_hidden_state
]


@pytest.mark.parametrize(("name", "options"), OUTPUT_CASES, ids=[f"{n}-{'-'.join(o)}" for n, o in OUTPUT_CASES])
def test_the_output_is_a_mapping_as_transformers(minilm_dir, batch, tmp_path, name, options):
    """``"hidden_states" in out`` was False whatever was asked, ``for key in out`` gave tensors and
    ``dict(out)`` a dict keyed by tensor rows; ``out[2]`` of BertForPreTraining was last_hidden_state."""
    torch.manual_seed(3)
    getattr(transformers, name).from_pretrained(str(minilm_dir)).save_pretrained(tmp_path)  # heads drawn once
    ours = getattr(minibert, name).from_pretrained(tmp_path)
    theirs = getattr(transformers, name).from_pretrained(str(tmp_path), attn_implementation="eager").eval()
    assert batch["input_ids"].shape[1] == 13  # the token-classification labels above
    with torch.no_grad():
        got, want = ours(**batch, **options), theirs(**batch, **options)
    assert isinstance(got, collections.abc.Mapping) and isinstance(want, collections.abc.Mapping)
    assert list(got) == list(got.keys()) == list(dict(got)) == list(want.keys()), (list(got), list(want))
    assert len(got) == len(want) and [key for key, _ in got.items()] == list(want)
    assert repr(got.keys()) == repr(want.keys())  # odict_keys(['logits', ...]), not the whole output printed
    for view in ("values", "items"):  # the tensors themselves, as there, each once (not the output around them)
        printed, reference = repr(getattr(got, view)()), repr(getattr(want, view)())
        assert printed.split("(", 2)[:2] == reference.split("(", 2)[:2] and type(got).__name__ not in printed, view
        assert printed.count("tensor(") == reference.count("tensor("), view
    for key in ("loss", "logits", "hidden_states", "attentions", "pooler_output", "last_hidden_state", 0):
        assert (key in got) == (key in want), key
        assert (got.get(key) is None) == (want.get(key) is None), key
    with pytest.raises(KeyError):
        got["cross_attentions"]
    assert len(got.to_tuple()) == len(want.to_tuple()) and len(got[1:]) == len(want[1:])
    for key, mine, reference in zip(want, got.to_tuple(), want.to_tuple()):
        assert got[key] is getattr(got, key) is dict(got)[key]
        for index, (a, b) in enumerate(zip(*(t if isinstance(t, tuple) else (t,) for t in (mine, reference)))):
            assert_close(a, b, f"{name} {key}[{index}]", 1e-4)  # MiniLM's magnitudes, six layers of fp32
    assert_close(got[0], want[0], f"{name} out[0]", 1e-4)


def test_an_output_rebuilt_from_its_items_keeps_them(minilm_dir, batch):
    """torch's default_collate and pin_memory and transformers' nested_detach rebuild a mapping as
    ``type(out)({name: value})``: the dict became the first field (loss={...}, logits None), as
    transformers' ModelOutput avoids with its __post_init__; now the fields are set from it."""
    from torch.utils.data import default_collate

    model = minibert.BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=3)
    with torch.no_grad():
        out = model(**batch)
    rebuilt = type(out)(dict(out))
    assert list(rebuilt) == ["logits"] and rebuilt.logits is out.logits and rebuilt.loss is None
    collated = default_collate([out, out])
    assert list(collated) == ["logits"] and collated.logits.shape == (2, *out.logits.shape)
    assert torch.equal(collated.logits[1], out.logits)


EXPORT_CASES = [
    ("BertModel", {}, False),
    ("BertForSequenceClassification", {"labels": torch.tensor([0, 1])}, True),  # the loss too
    ("BertForPreTraining", {}, True),
]


@pytest.mark.parametrize(("name", "options", "strict"), EXPORT_CASES, ids=[case[0] for case in EXPORT_CASES])
def test_a_model_that_returns_its_output_object_exports(minilm_dir, batch, tmp_path, name, options, strict):
    """``torch.export.export(model, ...)`` with the default ``return_dict`` stopped at the output:
    "Found <class 'minibert.model.BertOutput'> in output, which is not a known type" (strict or not),
    where transformers' model exports. Each kind of output is now a pytree node: the program, saved and
    loaded back, returns the same kind of object, with transformers' numbers."""
    torch.manual_seed(4)
    getattr(transformers, name).from_pretrained(str(minilm_dir)).save_pretrained(tmp_path / "model")
    ours = getattr(minibert, name).from_pretrained(tmp_path / "model")
    theirs = getattr(transformers, name).from_pretrained(str(tmp_path / "model"), attn_implementation="eager").eval()
    arguments = {**batch, **options}
    with torch.no_grad():
        program = torch.export.export(ours, (), arguments, strict=strict)
        torch.export.save(program, tmp_path / "program.pt2")
        got = torch.export.load(tmp_path / "program.pt2").module()(**arguments)
        want = theirs(**arguments)
    assert type(got) is type(ours(**arguments)) and list(got) == list(want.keys()), (type(got), list(got))
    real = batch["attention_mask"].bool()
    for key in want.keys():
        mine, reference = (got[key], want[key]) if key != "last_hidden_state" else (got[key][real], want[key][real])
        assert_close(mine, reference, f"{name} exported, {key}", 1e-4)  # MiniLM's magnitudes, six layers of fp32


def test_every_kind_of_output_flattens_to_its_computed_tensors():
    """As a pytree node (torch.utils._pytree: what export, DDP's static graph and torch.func read), an
    output is its computed fields in order, and unflattens to the same kind with the same names."""
    import torch.utils._pytree as pytree

    from minibert.heads import BertPreTrainingOutput, HeadOutput, QuestionAnsweringOutput
    from minibert.model import BertOutput

    first, second = torch.zeros(2, 3), torch.ones(2)
    for kind, fields in ((BertOutput, {"last_hidden_state": first, "hidden_states": (first, first)}),
                         (HeadOutput, {"loss": second, "logits": first}),
                         (QuestionAnsweringOutput, {"start_logits": first, "end_logits": first}),
                         (BertPreTrainingOutput, {"prediction_logits": first})):  # fmt: skip
        out = kind(**fields)
        leaves, spec = pytree.tree_flatten(out)
        assert len(leaves) == sum(len(value) if isinstance(value, tuple) else 1 for value in fields.values())
        rebuilt = pytree.tree_unflatten([leaf + 1 for leaf in leaves], spec)
        assert type(rebuilt) is kind and list(rebuilt) == list(fields), (kind, list(rebuilt))
        assert torch.equal(pytree.tree_leaves(rebuilt)[0], leaves[0] + 1)
