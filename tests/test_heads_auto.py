"""transformers' ``Auto`` names in minibert: the tutorials' code runs with only the import changed.

Each tutorial below is written ONCE, as a function of the library it imports from (``lib`` is
``transformers`` or ``minibert``), and run with both on the same checkpoint; its results are
compared. The tutorials are transformers' quick tour (AutoTokenizer + AutoModel →
last_hidden_state), its masked-language-modeling inference (AutoModelForMaskedLM, top 3 for a
[MASK]) and its text-classification inference (AutoModelForSequenceClassification →
``model.config.id2label[logits.argmax().item()]``).

Tolerance: fp32 forward passes of two implementations of the same formulas differ by the order of
their float sums: ~1e-7 relative per operation, a few 1e-6 absolute after six layers at the hidden
states' magnitudes (|h| ≲ 10); 1e-5, the bound tests/test_model.py uses for the same comparison.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

import minibert
from helpers import assert_close
from minibert.errors import CheckpointError
from minibert.tokenizer import named_class

transformers = pytest.importorskip("transformers")
ATOL = 1e-5
AUTO_MODELS = ["AutoModel", "AutoModelForPreTraining", "AutoModelForMaskedLM", "AutoModelForNextSentencePrediction",
               "AutoModelForSequenceClassification", "AutoModelForTokenClassification",
               "AutoModelForQuestionAnswering", "AutoModelForMultipleChoice"]  # fmt: skip


def fortunes_dir():
    from minibert.loading.hub import BUNDLED_FOLDER

    return BUNDLED_FOLDER / "fortunes-mini"


# ----------------------------------------------------------------------------- the tutorials, written once


def quick_tour(lib, path):
    tokenizer = lib.AutoTokenizer.from_pretrained(path)
    model = lib.AutoModel.from_pretrained(path)
    outputs = model(**tokenizer("Hello world", return_tensors="pt"))
    return outputs.last_hidden_state


def masked_lm_tutorial(lib, path, text="the fool doth think he is [MASK], but the wise man knows himself.", **load):
    tokenizer = lib.AutoTokenizer.from_pretrained(path)
    inputs = tokenizer(text, return_tensors="pt")
    mask_token_index = torch.where(inputs["input_ids"] == tokenizer.mask_token_id)[1]
    model = lib.AutoModelForMaskedLM.from_pretrained(path, **load)
    logits = model(**inputs).logits
    mask_token_logits = logits[0, mask_token_index, :]
    top_3_tokens = torch.topk(mask_token_logits, 3, dim=1).indices[0].tolist()
    return mask_token_logits, [text.replace(tokenizer.mask_token, tokenizer.decode([token])) for token in top_3_tokens]


def text_classification_tutorial(lib, path, text="This was a masterpiece. Not completely faithful, but enjoyable."):
    tokenizer = lib.AutoTokenizer.from_pretrained(path)
    inputs = tokenizer(text, return_tensors="pt")
    model = lib.AutoModelForSequenceClassification.from_pretrained(path)
    with torch.no_grad():
        logits = model(**inputs).logits
    predicted_class_id = logits.argmax().item()
    return logits, model.config.id2label[predicted_class_id]


def run_glue_loading(lib, path):
    """transformers' examples/pytorch/text-classification/run_glue.py, its loading lines as written
    (three MNLI labels; the script's defaults for the hub keywords)."""
    hub = {"cache_dir": None, "revision": "main", "token": None, "trust_remote_code": False}
    config = lib.AutoConfig.from_pretrained(path, num_labels=3, finetuning_task="mnli", **hub)
    tokenizer = lib.AutoTokenizer.from_pretrained(path, use_fast=True, **hub)
    model = lib.AutoModelForSequenceClassification.from_pretrained(path, config=config, ignore_mismatched_sizes=False,
                                                                   **hub)  # fmt: skip
    return config, tokenizer, model


# ----------------------------------------------------------------------------- the same results


@torch.no_grad()
def test_quick_tour_runs_with_only_the_import_changed(minilm_dir):
    ours, theirs = quick_tour(minibert, minilm_dir), quick_tour(transformers, minilm_dir)
    assert ours.shape == theirs.shape == (1, 4, 384)  # [CLS] hello world [SEP]
    print("quick tour: max |Δ| last_hidden_state", assert_close(ours, theirs, "last_hidden_state", ATOL))


@torch.no_grad()
def test_masked_lm_tutorial_runs_with_only_the_import_changed():
    """fortunes-mini's weights are stored in bfloat16: transformers 5 computes in the stored dtype,
    minibert in float32 unless asked; the reference is asked for float32, the numbers minibert gives."""
    ours, our_guesses = masked_lm_tutorial(minibert, fortunes_dir())
    theirs, their_guesses = masked_lm_tutorial(transformers, fortunes_dir(), dtype=torch.float32)
    print("masked LM: max |Δ| logits", assert_close(ours, theirs, "[MASK] logits", ATOL), our_guesses)
    assert our_guesses == their_guesses and len(our_guesses) == 3


def test_text_classification_tutorial_runs_with_only_the_import_changed(minilm_dir, tmp_path):
    """A classifier head made here (transformers' fresh head, seeded, saved with three named labels)."""
    torch.manual_seed(0)
    labels = {0: "sad", 1: "neutral", 2: "happy"}
    made = transformers.BertForSequenceClassification.from_pretrained(str(minilm_dir), id2label=labels)
    made.save_pretrained(tmp_path)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        if (minilm_dir / name).is_file():
            shutil.copy(minilm_dir / name, tmp_path / name)
    (ours, our_label), (theirs, their_label) = (text_classification_tutorial(lib, tmp_path)
                                                for lib in (minibert, transformers))  # fmt: skip
    print("classification: max |Δ| logits", assert_close(ours, theirs, "logits", ATOL), our_label)
    assert our_label == their_label and our_label in labels.values()


@torch.no_grad()
def test_run_glue_loading_runs_with_only_the_import_changed(minilm_dir, tmp_path):
    """run_glue.py's first lines failed at once: AutoConfig.from_pretrained took no num_labels (nor
    cache_dir, token ...), and from_pretrained no config=. The config read with the task's fields gives
    the model its three labels (a fresh head: the checkpoint has none), and saves as transformers reads it."""
    (config, tokenizer, model), (their_config, _, reference) = (run_glue_loading(lib, str(minilm_dir))
                                                                 for lib in (minibert, transformers))  # fmt: skip
    for name in ("num_labels", "id2label", "label2id", "hidden_size"):
        assert getattr(config, name) == getattr(model.config, name) == getattr(their_config, name), name
    assert config.finetuning_task == "mnli"  # metadata, kept as transformers 4 kept it (5 drops it unused)
    assert model.classifier.out_features == reference.classifier.out_features == 3
    inputs = tokenizer("The cat sat.", "A cat was sitting.", return_tensors="pt")
    ours, theirs = (one(**inputs, output_hidden_states=True).hidden_states[-1] for one in (model, reference))
    print("run_glue: max |Δ| last hidden state", assert_close(ours, theirs, "last hidden state", ATOL))
    config.save_pretrained(tmp_path / "saved")
    assert sorted(path.name for path in (tmp_path / "saved").iterdir()) == ["config.json"]  # (no temporary left)
    again = transformers.AutoConfig.from_pretrained(str(tmp_path / "saved"))
    assert (again.num_labels, again.finetuning_task, again.id2label) == (3, "mnli", their_config.id2label)
    reread = minibert.BertConfig.from_pretrained(tmp_path / "saved")
    assert (reread.id2label, reread.finetuning_task, reread.hidden_size) == (config.id2label, "mnli", 384)


def test_config_fields_given_are_checked_and_what_is_taken_is_named(minilm_dir):
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['num_label'\]; .* config fields .*num_labels"):
        minibert.AutoConfig.from_pretrained(minilm_dir, num_label=3)
    with pytest.raises(ValueError, match="hidden_dropout_prob"):
        minibert.BertConfig.from_pretrained(minilm_dir, hidden_dropout_prob=1.5)
    with pytest.raises(ValueError, match="num_labels must be an integer"):
        minibert.AutoConfig.from_pretrained(minilm_dir, num_labels=0)
    config = minibert.BertConfig.from_pretrained(minilm_dir, num_hidden_layers=2, output_hidden_states=True)
    assert config.num_hidden_layers == 2 and config.output_hidden_states  # a config: any shape (from_config)
    with pytest.raises(CheckpointError, match=r"changes the shape of the checkpoint's tensors: num_hidden_layers 2 "
                       r"\(config.json: 6\)"):  # fmt: skip
        minibert.AutoModel.from_pretrained(minilm_dir, config=config)
    with pytest.raises(TypeError, match="config must be minibert's BertConfig"):
        minibert.AutoModel.from_pretrained(minilm_dir, config=transformers.AutoConfig.from_pretrained(str(minilm_dir)))
    with pytest.raises(TypeError, match="cannot take hidden_size: the checkpoint's weights fix the shapes"):
        minibert.BertModel.from_pretrained(minilm_dir, hidden_size=768)
    with pytest.raises(ValueError, match="ignore_mismatched_sizes=True"):
        minibert.BertForSequenceClassification.from_pretrained(minilm_dir, ignore_mismatched_sizes=True)


@torch.no_grad()
@pytest.mark.parametrize("how", ["keywords", "config"])
def test_fields_that_keep_the_shapes_build_the_model_as_transformers_does(minilm_dir, how):
    """from_pretrained(path, hidden_dropout_prob=0.3) was refused, and nothing else changes a dropout
    (setting config.hidden_dropout_prob after loading changes no module, in transformers too): the
    model is built with the fields, in transformers' modules' places, and computes as it does."""
    fields = {"hidden_dropout_prob": 0.3, "attention_probs_dropout_prob": 0.2, "layer_norm_eps": 1e-5}
    given = {"config": minibert.AutoConfig.from_pretrained(minilm_dir, **fields)} if how == "config" else fields
    model = minibert.BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=2, **given)
    reference = transformers.BertForSequenceClassification.from_pretrained(str(minilm_dir), num_labels=2, **fields)

    def built(network):
        return (sorted({module.p for module in network.modules() if isinstance(module, torch.nn.Dropout)}),
                sorted({module.eps for module in network.modules() if isinstance(module, torch.nn.LayerNorm)}))

    assert built(model) == built(reference) == ([0.2, 0.3], [1e-5])
    assert model.config.hidden_dropout_prob == 0.3 and model.config.layer_norm_eps == 1e-5
    inputs = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))("Hello world", return_tensors="pt")
    ours, theirs = (one.eval()(**inputs, output_hidden_states=True).hidden_states[-1] for one in (model, reference))
    print("eps 1e-5: max |Δ| last hidden state", assert_close(ours, theirs, "last hidden state", ATOL))


@pytest.mark.parametrize("auto_name", AUTO_MODELS)
def test_each_auto_model_loads_as_its_bert_class(auto_name):
    """Same class, same tensors as the named class's from_pretrained (fortunes-mini has MLM + NSP heads;
    the others get fresh heads, asked for by new_heads=True as with the named class)."""
    auto = getattr(minibert, auto_name)
    options = {} if auto_name in ("AutoModel", "AutoModelForPreTraining", "AutoModelForMaskedLM",
                                  "AutoModelForNextSentencePrediction") else {"new_heads": True}  # fmt: skip
    torch.manual_seed(0)
    model = auto.from_pretrained("minibert/fortunes-mini", **options)
    torch.manual_seed(0)
    named = auto.bert_class.from_pretrained("minibert/fortunes-mini", **options)
    assert type(model) is auto.bert_class
    expected = "BertModel" if auto_name == "AutoModel" else auto_name.replace("AutoModel", "Bert")
    assert auto.bert_class.__name__ == expected
    ours, theirs = model.state_dict(), named.state_dict()
    assert list(ours) == list(theirs) and all(torch.equal(ours[key], theirs[key]) for key in ours)
    reference = getattr(transformers, auto_name).from_pretrained(str(fortunes_dir()))  # transformers picks ...
    assert type(reference).__name__ == auto.bert_class.__name__  # ... the class of the same name


def test_auto_config_and_tokenizer_are_berts(minilm_dir):
    config = minibert.AutoConfig.from_pretrained(minilm_dir)
    assert config == minibert.BertConfig.from_json_file(minilm_dir / "config.json")
    assert config.hidden_size == transformers.AutoConfig.from_pretrained(str(minilm_dir)).hidden_size == 384
    tokenizer = minibert.AutoTokenizer.from_pretrained(minilm_dir)
    assert isinstance(tokenizer, minibert.BertTokenizer)
    text = "Hello world, the bank robber fled to the river bank."
    reference = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    assert tokenizer(text)["input_ids"] == reference(text)["input_ids"]
    assert isinstance(minibert.AutoModel.from_config(config), minibert.BertModel)
    with pytest.raises(OSError, match=r"AutoModel is not built directly: use AutoModel.from_pretrained"):
        minibert.AutoModel(config)


# ----------------------------------------------------------------------------- other architectures refused


@pytest.mark.parametrize("model_type", ["roberta", "gpt2"])
@pytest.mark.parametrize("auto_name", [*AUTO_MODELS, "AutoTokenizer", "AutoConfig"])
def test_other_architectures_are_refused_naming_the_model_type(tmp_path, auto_name, model_type):
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(fortunes_dir() / name, tmp_path / name)
    config = json.loads((fortunes_dir() / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": model_type}))
    with pytest.raises(CheckpointError, match=rf"{auto_name}: .* is a '{model_type}' checkpoint \(config.json "
                       rf"model_type\), but minibert implements BERT only .*transformers' {auto_name}$"):  # fmt: skip
        getattr(minibert, auto_name).from_pretrained(tmp_path)


# ----------------------------------------------------------------------------- other tokenizers refused

PAIRS = (["Hello World, the fool doth think", "naïve Café"], ["he is WISE.", "a second text"])


def _tokenizer_folder(directory, tokenizer_class, where: str = "tokenizer_config.json", model: bool = False):
    """fortunes-mini's tokenizer (and config.json, and with ``model`` its weights), its tokenizer_class
    in ``where`` (tokenizer_config.json's, or config.json's with none in tokenizer_config.json)."""
    directory.mkdir()
    for name in ("vocab.txt", "config.json", *(["model.safetensors"] if model else [])):
        shutil.copy(fortunes_dir() / name, directory / name)
    settings = json.loads((fortunes_dir() / "tokenizer_config.json").read_text())
    settings.pop("tokenizer_class")
    config = json.loads((fortunes_dir() / "config.json").read_text())
    named = {"tokenizer_config.json": settings, "config.json": config}
    named[where]["tokenizer_class"] = tokenizer_class
    for name, values in named.items():
        (directory / name).write_text(json.dumps(values))
    return directory


def _outputs(tokenizer, names=("input_ids", "token_type_ids", "attention_mask")) -> dict:
    """A batch of pairs' inputs: those of ``names`` that the tokenizer returns."""
    return {name: list(values) for name, values in tokenizer(*PAIRS).items() if name in names}


def _same_inputs(folder) -> None:
    """The folder's AutoTokenizer in both libraries: the ids and mask equal; so are the segments, where
    transformers' class returns them (DistilBERT's and TokenizersBackend's leave them to the model)."""
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
    expected = _outputs(theirs)
    assert _outputs(minibert.AutoTokenizer.from_pretrained(folder), names=expected) == expected, type(theirs).__name__


@pytest.mark.parametrize("where", ["tokenizer_config.json", "config.json"])
@pytest.mark.parametrize("tokenizer_class", ["MPNetTokenizer", "RobertaTokenizer", "BertJapaneseTokenizer",
                                             "DPRReaderTokenizerFast"])  # fmt: skip
def test_a_tokenizer_class_that_is_not_berts_is_refused_by_auto_tokenizer(tmp_path, tokenizer_class, where):
    """transformers' AutoTokenizer builds the class tokenizer_config.json (else config.json) names: MPNet's
    and RoBERTa's frame and number otherwise, BertJapanese's does not lowercase, DPR's reader takes
    questions, titles and texts. minibert's AutoTokenizer loaded each folder
    as BertTokenizer, giving other inputs without a word; now a CheckpointError names the file and the
    field. BertTokenizer.from_pretrained still loads it, as transformers' BertTokenizer does."""
    folder = _tokenizer_folder(tmp_path / "tok", tokenizer_class, where)
    bert = minibert.BertTokenizer.from_pretrained(folder)
    assert _outputs(transformers.AutoTokenizer.from_pretrained(str(folder))) != _outputs(bert)  # the reason
    with pytest.raises(CheckpointError, match=rf"tok/{where}: tokenizer_class '{tokenizer_class}': transformers' "
                                              r"AutoTokenizer builds that class"):  # fmt: skip
        minibert.AutoTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("tokenizer_class", sorted(named_class.BERT_TOKENIZER_CLASSES - {"BertTokenizerLegacy"}))
def test_the_tokenizer_classes_taken_are_berts_in_transformers(tmp_path, tokenizer_class):
    """Each class minibert's AutoTokenizer takes (named_class.BERT_TOKENIZER_CLASSES) gives, in
    transformers' AutoTokenizer, the inputs minibert's BertTokenizer gives: ids, mask, and segments
    where the class returns them."""
    folder = _tokenizer_folder(tmp_path / "tok", tokenizer_class)
    _same_inputs(folder)


def test_a_class_that_runs_tokenizer_json_needs_one_and_the_loaders_refuse_as_auto_tokenizer(tmp_path):
    """PreTrainedTokenizerFast runs tokenizer.json: without one transformers cannot build it, and
    minibert says so; with one, the file is read (docs/tokenizer.md). The Embedder (sentence-transformers
    loads with AutoTokenizer) and the tasks (transformers' pipelines: AutoTokenizer) refuse what
    AutoTokenizer refuses."""
    folder = _tokenizer_folder(tmp_path / "fast", "PreTrainedTokenizerFast")
    with pytest.raises(ValueError):
        transformers.AutoTokenizer.from_pretrained(str(folder))
    with pytest.raises(CheckpointError, match="tokenizer_class 'PreTrainedTokenizerFast' runs tokenizer.json, and"):
        minibert.AutoTokenizer.from_pretrained(folder)
    transformers.BertTokenizer.from_pretrained(str(folder)).save_pretrained(str(tmp_path / "saved"))
    shutil.copy(tmp_path / "saved" / "tokenizer.json", folder)
    _same_inputs(folder)
    model = _tokenizer_folder(tmp_path / "model", "MPNetTokenizer", model=True)
    for load in (minibert.Embedder.from_pretrained, lambda path: minibert.fill_mask("a [MASK] b", model=path)):
        with pytest.raises(CheckpointError, match="tokenizer_class 'MPNetTokenizer'"):
            load(model)
