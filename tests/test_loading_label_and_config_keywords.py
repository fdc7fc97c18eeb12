"""A model's ``from_pretrained`` keywords about its labels, its config and its dtype, against
transformers 5 on the same checkpoint (loading/config_keywords.py, loading/from_pretrained.py):
``num_labels`` beside an ``id2label`` of another length; a wrong label keyword named as the caller's,
not as config.json's; ``config=`` a folder, and torch's dtype names ("float64", "half", ...)."""

from __future__ import annotations

import pytest
import torch

import minibert
from minibert.errors import CheckpointError
from minibert.loading.names import minibert_to_checkpoint

transformers = pytest.importorskip("transformers")

SHAPE = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
NAMES = {0: "neg", 1: "neu", 2: "pos"}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """{"encoder": a BertModel's save (no classifier), "classifier": a 3-label classifier's (LABEL_0 ...),
    "labelled": config.json alone, of the same shapes, naming the labels neg, neu, pos}."""
    root = tmp_path_factory.mktemp("saved")
    torch.manual_seed(0)
    transformers.BertModel(transformers.BertConfig(**SHAPE)).save_pretrained(root / "encoder")
    transformers.BertForSequenceClassification(transformers.BertConfig(**SHAPE, num_labels=3)).save_pretrained(
        root / "classifier"
    )
    transformers.BertConfig(**SHAPE, id2label=NAMES).save_pretrained(root / "labelled")
    return {name: root / name for name in ("encoder", "classifier", "labelled")}


def test_num_labels_beside_an_id2label_of_another_length_is_refused(saved):
    """transformers 5 sizes the head by id2label then, but keeps the label2id that num_labels made
    (LABEL_0, LABEL_1 for three labels neg, neu, pos): a config that contradicts itself. minibert built a
    2-output head named LABEL_0, LABEL_1 from the same call, dropping the names given, with a note at
    INFO level. Now a ValueError names both keywords, for the model and for AutoConfig; agreeing ones load
    as transformers loads them."""
    given = {"num_labels": 2, "id2label": NAMES}
    theirs = transformers.BertForSequenceClassification.from_pretrained(str(saved["encoder"]), **given)
    assert theirs.config.id2label == NAMES and theirs.config.label2id == {"LABEL_0": 0, "LABEL_1": 1}  # the reason
    refusal = r"num_labels=2 and id2label, which names 3 labels \(neg, neu, pos\), contradict each other"
    for load in (minibert.BertForSequenceClassification.from_pretrained, minibert.AutoConfig.from_pretrained):
        with pytest.raises(ValueError, match=refusal):
            load(saved["encoder"], **given)
    agreeing = {"num_labels": 3, "id2label": NAMES}
    ours = minibert.BertForSequenceClassification.from_pretrained(saved["encoder"], **agreeing)
    theirs = transformers.BertForSequenceClassification.from_pretrained(str(saved["encoder"]), **agreeing)
    assert ours.config.id2label == theirs.config.id2label == NAMES
    assert ours.classifier.weight.shape == theirs.classifier.weight.shape == (3, 32)


def test_num_labels_of_the_count_a_checkpoint_names_keeps_its_names(saved, tmp_path):
    """``from_pretrained(fine_tuned, num_labels=3)`` where config.json names its 3 labels: transformers'
    setter keeps the names (it renames only when the count changes); minibert named them LABEL_0 ...
    LABEL_2 and saved them so, for good. A count that changes the head is still refused (the weights
    have 3 outputs), as transformers refuses it."""
    theirs_folder = tmp_path / "fine-tuned"
    transformers.BertForSequenceClassification(transformers.BertConfig(**SHAPE, id2label=NAMES)).save_pretrained(
        theirs_folder)  # fmt: skip
    theirs = transformers.BertForSequenceClassification.from_pretrained(str(theirs_folder), num_labels=3)
    ours = minibert.BertForSequenceClassification.from_pretrained(theirs_folder, num_labels=3)
    assert ours.config.id2label == theirs.config.id2label == NAMES
    assert ours.config.label2id == {"neg": 0, "neu": 1, "pos": 2}
    ours.save_pretrained(tmp_path / "saved again")
    assert minibert.AutoConfig.from_pretrained(tmp_path / "saved again").id2label == NAMES
    with pytest.raises(CheckpointError, match=r"has 3 outputs, one per label; the labels given are 2"):
        minibert.BertForSequenceClassification.from_pretrained(theirs_folder, num_labels=2)
    renamed = minibert.BertForSequenceClassification.from_pretrained(saved["encoder"], num_labels=3)
    assert renamed.config.id2label == {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}  # a new head: no names to keep


BAD_KEYWORDS = {  # keyword: (value, what the ValueError says of it)
    "id2label": ({1: "a", 2: "b", 3: "c"}, "id2label must number its labels 0 to 2"),
    "num_labels": (0, "num_labels = 0: must be an integer from 1 to 1,000,000"),
    "label2id": ({"a": "x"}, "label2id must be a dict of label names to ids"),
    "problem_type": ("regresion", "problem_type must be None or one of single_label_classification"),
    "classifier_dropout": (1.5, "classifier_dropout must be a number from 0 to 1, got 1.5"),
}


@pytest.mark.parametrize("keyword", sorted(BAD_KEYWORDS))
def test_a_wrong_label_keyword_is_named_as_the_callers(saved, keyword):
    """``from_pretrained(path, id2label={1: "a", 2: "b", 3: "c"})`` said ``.../config.json: config field
    id2label must number its labels 0 to 2``, though config.json's own id2label is right: the keyword
    was merged into the config first. Now the keyword is checked first and named as one, before any
    file is read (transformers refuses these too, or takes them unchecked)."""
    value, said = BAD_KEYWORDS[keyword]
    with pytest.raises(ValueError, match=rf"^from_pretrained\(\) keyword {said}") as error:
        minibert.BertForSequenceClassification.from_pretrained(saved["classifier"], **{keyword: value})
    assert not isinstance(error.value, CheckpointError) and "config.json" not in str(error.value)


def test_config_may_be_a_folder_as_in_transformers(saved):
    """run_glue's ``from_pretrained(name, config=model_args.config_name)``: transformers reads a str
    as a folder or hub id; minibert refused it (config must be minibert's BertConfig). Read now, with
    the same shape check as a config object: the labels it names give the fresh head."""
    ours = minibert.BertForSequenceClassification.from_pretrained(saved["encoder"], config=str(saved["labelled"]))
    theirs = transformers.BertForSequenceClassification.from_pretrained(str(saved["encoder"]),
                                                                         config=str(saved["labelled"]))  # fmt: skip
    assert ours.config.id2label == theirs.config.id2label == NAMES
    assert ours.classifier.weight.shape == theirs.classifier.weight.shape == (3, 32)
    other = saved["labelled"].parent / "wider"
    transformers.BertConfig(**{**SHAPE, "hidden_size": 64}).save_pretrained(other)
    with pytest.raises(CheckpointError, match=r"changes the shape of the checkpoint's tensors: hidden_size 64"):
        minibert.BertModel.from_pretrained(saved["encoder"], config=other)


@pytest.mark.parametrize("name", ["float64", "double", "half", "float", "bfloat16"])
@pytest.mark.parametrize("keyword", ["dtype", "torch_dtype"])
def test_torchs_dtype_names_load_as_in_transformers(saved, name, keyword):
    """transformers takes any torch dtype's name (``getattr(torch, name)``); minibert refused all but
    float32, bfloat16, float16 ("dtype must be one of ...") though it loads the same torch.dtype. Now
    each name gives transformers' dtype and, tensor for tensor, transformers' weights; in float64 the
    outputs agree to float64 rounding (1e-12 at these magnitudes: the same formulas, sums in other orders)."""
    ours = minibert.BertModel.from_pretrained(saved["encoder"], **{keyword: name})
    theirs = transformers.BertModel.from_pretrained(str(saved["encoder"]), **{keyword: name}).eval()
    assert ours.dtype == theirs.dtype == getattr(torch, name)
    their_state = theirs.state_dict()
    for key, tensor in ours.state_dict().items():  # (each under its name in transformers: loading/names.py)
        assert torch.equal(tensor, their_state[minibert_to_checkpoint(key)]), key
    if name in ("float64", "double"):
        ids = torch.tensor([[2, 5, 7, 9, 11, 3]])
        with torch.no_grad():
            delta = (ours(ids).last_hidden_state - theirs(ids).last_hidden_state).abs().max().item()
        assert delta < 1e-12, delta


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", torch.float8_e4m3fn, "int32", "Tensor"])
def test_a_dtype_the_model_cannot_compute_in_is_refused_before_loading(saved, dtype):
    """A float8 dtype loaded, then failed at the first forward ("add_stub" not implemented); a name that
    is no dtype, or not a float one, is refused as before, naming what is taken."""
    with pytest.raises(ValueError, match=r"float32, float16, bfloat16, float64"):
        minibert.BertModel.from_pretrained(saved["encoder"], dtype=dtype)



@pytest.mark.parametrize("labels", [2, 3])
def test_run_glue_s_config_with_num_labels_starts_the_head_as_transformers_does(saved, labels):
    """run_glue's ``AutoConfig.from_pretrained(base, num_labels=n)`` then ``from_pretrained(base,
    config=config)``: with n = 2, the default count, the config kept no trace of the labels given, so
    a base checkpoint was refused (MissingHeadsError, "pass new_heads=True") on the seven binary GLUE
    tasks, while 3 worked; and a 3-label checkpoint given such a config blamed its config.json."""
    config = minibert.AutoConfig.from_pretrained(saved["encoder"], num_labels=labels, finetuning_task="mrpc")
    ours = minibert.AutoModelForSequenceClassification.from_pretrained(saved["encoder"], config=config)
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(saved["encoder"]), config=transformers.AutoConfig.from_pretrained(str(saved["encoder"]), num_labels=labels))
    assert ours.classifier.out_features == theirs.classifier.out_features == labels
    assert ours.config.id2label == theirs.config.id2label
    if labels == 2:
        with pytest.raises(CheckpointError, match=r"has 3 outputs, one per label; the labels given are 2 \(LABEL_0"):
            minibert.AutoModelForSequenceClassification.from_pretrained(saved["classifier"], config=config)
    unasked = minibert.AutoConfig.from_pretrained(saved["encoder"])  # (no labels given: the head rule stands)
    with pytest.raises(minibert.errors.MissingHeadsError):
        minibert.AutoModelForSequenceClassification.from_pretrained(saved["encoder"], config=unasked)


def test_a_config_given_that_does_not_fit_is_named_not_config_json(saved):
    """A 3-label checkpoint loaded with ``config=`` a config of 2 labels: the error said the weights did
    not fit "the model described by .../config.json" and that config.json called it a BertModel, of a
    file that names the right class and labels. It names the config given now (transformers refuses
    the same load, a size mismatch)."""
    unasked = minibert.AutoConfig.from_pretrained(saved["encoder"])
    with pytest.raises(CheckpointError) as refused:
        minibert.AutoModelForSequenceClassification.from_pretrained(saved["classifier"], config=unasked)
    said = str(refused.value)
    assert f"does not fit the model described by the config given (config=, in place of {saved['classifier']}" in said
    assert "the config given describes other tensors than this checkpoint's" in said and "BertModel" not in said
