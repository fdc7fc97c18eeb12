"""Mistakes that teach: what a student following the classic BERT tutorials types first, and the
error each gets. Every error is of a documented type (minibert.errors) that also subclasses the
Python type a user would catch, and says what was passed, what is expected and the next step.
Where the error claims something about transformers (its module names), the claim is checked
against transformers' own module tree."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import torch

import minibert
from minibert import BertForMaskedLM, BertForSequenceClassification, BertModel, BertTokenizer, Embedder
from minibert.errors import InputTypeError, MinibertError, ModelNotFoundError, TransformersNameError
from minibert.loading.names import RENAMES


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    return BertTokenizer.from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def model(minilm_dir):
    return BertModel.from_pretrained(minilm_dir)


# ----------------------------------------------------------------------------- a batch where one text is taken


def test_tokenize_takes_one_text(tokenizer):
    with pytest.raises(InputTypeError, match=r"tokenize takes one str, got a list of 2 texts.*tokenizer\(texts\)"):
        tokenizer.tokenize(["a", "b"])
    with pytest.raises(TypeError, match="tokenize takes one str, got NoneType None"):  # still a TypeError
        tokenizer.tokenize(None)
    assert tokenizer.tokenize("I love Paris") == ["i", "love", "paris"]


def test_word_vectors_and_embed_tokens_take_one_text(minilm_dir):
    embedder = Embedder.from_pretrained(minilm_dir)
    for method in (embedder.word_vectors, embedder.embed_tokens):
        with pytest.raises(InputTypeError, match=r"takes one str, got a list of 2 texts.*embed\(texts\)"):
            method(["the bank robber", "the river bank"])


# ----------------------------------------------------------------------------- text where ids are taken


def test_model_called_on_text_says_tokenize_first(model):
    with pytest.raises(InputTypeError, match=re.escape("tokenize first: batch = tokenizer(text, return_tensors='pt')")):
        model("I love Paris")
    with pytest.raises(TypeError, match="input_ids is the text 'I love Paris'"):
        model("I love Paris")


def test_model_called_on_the_whole_encoding_says_unpack_it(model, tokenizer):
    batch = tokenizer("I love Paris", return_tensors="pt")
    with pytest.raises(InputTypeError, match=re.escape("unpack it: model(**batch)")):
        model(batch)
    assert model(**batch).last_hidden_state.shape == (1, 5, 384)  # what the message says to write works


def test_model_called_on_word_pieces_says_convert_them(model, tokenizer):
    tokens = tokenizer.tokenize("I love Paris")
    with pytest.raises(InputTypeError, match=re.escape("tokenizer.convert_tokens_to_ids(tokens)")):
        model(tokens)
    with pytest.raises(InputTypeError, match=re.escape("tokenizer(texts, padding=True, return_tensors='pt')")):
        model(["I love Paris", "I was thirsty!"])


def test_multiple_choice_checks_its_inputs_as_the_model_does(minilm_dir, tokenizer):
    """BertForMultipleChoice flattens (B, C, T) to rows for the encoder: its inputs are checked first,
    so text and the tokenizer's whole output get the model's InputTypeError, and shapes are named as
    passed, (B, C, T), not as the flattened (B·C, T)."""
    from minibert import BertForMultipleChoice

    choices = BertForMultipleChoice.from_pretrained(minilm_dir, new_heads=True)
    batch = tokenizer(["a question"] * 3, ["one", "two", "three"], padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"][None], batch["attention_mask"][None]  # (1, 3, T)
    with pytest.raises(InputTypeError, match=re.escape("tokenize first")):
        choices("I love Paris")
    with pytest.raises(InputTypeError, match=re.escape("unpack it: model(**batch)")):
        choices(batch)
    with pytest.raises(InputTypeError, match="is a list of strings"):
        choices([["a question", "one"]])
    shape = tuple(ids.shape)
    wrong = f"attention_mask has shape {tuple(mask[0].shape)} but input_ids has {shape}"
    with pytest.raises(ValueError, match=re.escape(wrong)):
        choices(ids, attention_mask=mask[0])
    for empty in (ids[:, :0], ids[..., :0]):
        named = f"(batch, choices, tokens), each at least 1, got {tuple(empty.shape)}"
        with pytest.raises(ValueError, match=re.escape(named)):
            choices(empty)
    logits = choices(ids, attention_mask=mask).logits  # the right call still runs
    assert logits.shape == (1, 3)
    positions = torch.arange(ids.shape[-1])
    for every_row in (positions, positions[None]):  # (T,) and (1, T): every row's, as the encoder takes them
        assert torch.allclose(choices(ids, attention_mask=mask, position_ids=every_row).logits, logits, atol=1e-5)


def test_extended_masks_are_taken_as_transformers_takes_them_and_masks_per_query_refused(minilm_dir, model, tokenizer):
    """transformers adds a (B, 1, 1, T) float mask of 0 and the dtype's minimum to the scores
    (model.get_extended_attention_mask's): minibert reads it as the (B, T) mask it stands for, the
    same numbers as transformers on it (1e-5: fp32 sums in another order). A mask per query (3-D,
    4-D (B, 1, T, T)), other additive values (they weigh keys, not hide them) and a boolean 4-D mask
    (transformers' eager and sdpa attention read it differently) are refused, saying what is taken."""
    import transformers

    batch = tokenizer(["I love Paris", "I was thirsty, so I drank some water"], padding=True, return_tensors="pt")
    mask = batch["attention_mask"]
    extended = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min  # (B, 1, 1, T)
    reference = transformers.BertModel.from_pretrained(str(minilm_dir), attn_implementation="eager").eval()
    with torch.no_grad():
        theirs = reference(batch["input_ids"], attention_mask=extended).last_hidden_state
        ours = model(batch["input_ids"], attention_mask=extended).last_hidden_state
        plain = model(batch["input_ids"], attention_mask=mask).last_hidden_state
    real = mask.bool()
    worst = float((ours - theirs)[real].abs().max())
    assert worst <= 1e-5, f"extended mask: max |Δ| {worst:.2e} against transformers"
    assert torch.equal(ours, plain)
    tokens = mask.shape[1]
    for wrong in (mask[:, None, :].expand(-1, tokens, -1), mask[:, None, None, :].expand(-1, 1, tokens, -1).float(),
                  (1.0 - mask[:, None, None, :].float()) * -10000.0, mask[:, None, None, :].bool()):  # fmt: skip
        with pytest.raises(ValueError, match="takes one value per token.*a mask per query .3-D or 4-D. is not taken"):
            model(batch["input_ids"], attention_mask=wrong)


# ----------------------------------------------------------------------------- a file where a folder is taken


@pytest.mark.parametrize("load", [BertModel.from_pretrained, BertTokenizer.from_pretrained, Embedder.from_pretrained])
@pytest.mark.parametrize("filename", ["model.safetensors", "vocab.txt", "config.json"])
def test_from_pretrained_on_a_file_says_pass_its_folder(minilm_dir, load, filename):
    with pytest.raises(ModelNotFoundError, match=f"pass the folder that holds {filename}: ") as raised:
        load(str(minilm_dir / filename))
    assert repr(str(minilm_dir)) in str(raised.value)  # the folder to pass, spelled out
    assert " and " not in str(raised.value).split("holds")[1]  # (it named a file the folder lacks: "and modules.json")


def test_a_tensorflow_checkpoint_s_file_says_its_folder_or_its_prefix():
    """bert_model.ckpt.index given: the folder, or the checkpoint's prefix (the form Google's scripts
    take), not "the folder that holds bert_model.ckpt.index and config.json" (it holds bert_config.json)."""
    google = Path(__file__).parent / "data" / "uncased_L-2_H-32_A-2"
    for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001"):
        with pytest.raises(ModelNotFoundError) as raised:
            BertModel.from_pretrained(str(google / name))
        message = str(raised.value)
        assert f"pass the folder that holds {name}: {str(google)!r}" in message, message
        assert f"(or the TensorFlow checkpoint's prefix, {str(google / 'bert_model.ckpt')!r})" in message, message
    assert BertModel.from_pretrained(str(google / "bert_model.ckpt")).config.hidden_size == 32  # that prefix loads


def _output_form(output) -> list:
    """What a call returned, comparable across libraries: a tuple's length and each item's kind, or
    an output object's field names."""
    if isinstance(output, tuple):
        return ["tuple", *(type(item).__name__ for item in output)]
    return list(output.keys())


@pytest.mark.parametrize("where", ["config.json", "from_pretrained", "set on the config"])
def test_the_configs_call_defaults_decide_what_a_call_returns_as_in_transformers(tmp_path, where):
    """transformers keeps output_hidden_states, output_attentions and return_dict in the config as the
    default of each call: set on it, given to from_pretrained, or read from a config.json that
    transformers saved after loading with them. minibert does the same (they used to be ignored:
    tuples unpacked as field names, hidden states missing), the call's own argument wins, and
    save_pretrained writes them; its own callers (the Embedder) are not changed by them."""
    import transformers

    from minibert import BertForSequenceClassification

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37, num_labels=3)  # fmt: skip
    transformers.BertForSequenceClassification(config).save_pretrained(tmp_path / "plain")
    options = {"output_hidden_states": True, "output_attentions": True, "return_dict": False}
    folder = tmp_path / "plain"
    if where == "config.json":
        folder = tmp_path / "saved"
        loaded = transformers.BertForSequenceClassification.from_pretrained(tmp_path / "plain", **options)
        loaded.save_pretrained(folder)
    keywords = options if where == "from_pretrained" else {}
    theirs = transformers.BertForSequenceClassification.from_pretrained(folder, attn_implementation="eager", **keywords)
    ours = BertForSequenceClassification.from_pretrained(folder, **keywords)
    if where == "set on the config":
        for name, value in options.items():
            setattr(theirs.config, name, value)
            setattr(ours.config, name, value)
    ids, labels = torch.tensor([[2, 5, 7, 3], [2, 9, 3, 0]]), torch.tensor([0, 2])
    mask = (ids != 0).long()
    for call in ({}, {"labels": labels}, {"return_dict": True}, {"output_hidden_states": False}):
        got, expected = ours(ids, attention_mask=mask, **call), theirs(ids, attention_mask=mask, **call)
        assert _output_form(got) == _output_form(expected), f"{where}, call {sorted(call)}"
    loss, logits, hidden_states, attentions = ours(ids, attention_mask=mask, labels=labels)
    assert len(hidden_states) == 3 and len(attentions) == 2 and logits.shape == (2, 3) and loss.dim() == 0
    ours.save_pretrained(tmp_path / "ours")
    saved = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert {name: saved.get(name) for name in options} == options
    with pytest.raises(ValueError, match='config.return_dict must be True or False, got "no"'):
        ours.config.return_dict = "no"
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"word{n}" for n in range(94))]
    for saved_folder in (tmp_path / "plain", tmp_path / "ours"):
        (saved_folder / "vocab.txt").write_text("\n".join(vocabulary) + "\n")
    texts = ["word1 word2 word3", "word4"]
    plain, with_defaults = (Embedder.from_pretrained(tmp_path / name).embed(texts) for name in ("plain", "ours"))
    assert (plain == with_defaults).all(), "the Embedder's own call was changed by the config's call defaults"


def test_a_config_setting_that_would_change_nothing_is_refused(model):
    """Setting a config.json field minibert does not read after the model is built (a typo, a decoder,
    use_return_dict, the classifier's dropout) would change nothing and not be saved: each is refused,
    saying what to do instead; what it reads (problem_type, id2label, ...) is taken (tests/test_heads.py)."""
    for name, value, words in (("use_return_dict", False, "set config.return_dict"),
                               ("is_decoder", True, "minibert computes only is_decoder = False"),
                               ("classifier_dropout", 0.2, "from_pretrained(path, classifier_dropout=0.2)"),
                               ("hidden_dropout", 0.2, "not a field minibert reads")):  # fmt: skip
        with pytest.raises(TransformersNameError, match=re.escape(words)):
            setattr(model.config, name, value)
        assert name not in model.config.to_dict() or model.config.to_dict()[name] != value


def test_head_mask_and_inputs_embeds(model, tokenizer):
    """``head_mask=None`` / ``inputs_embeds=None`` mean "not given", in transformers too: taken.
    A head mask (which transformers 5 ignores without a word) or vectors in place of ids are refused
    with an InputTypeError that names what the call takes."""
    batch = tokenizer(["I love Paris", "hi"], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch).last_hidden_state
        assert torch.equal(model(**batch, head_mask=None, inputs_embeds=None).last_hidden_state, expected)
    for name, value in (("head_mask", torch.ones(6, 12)), ("inputs_embeds", torch.zeros(2, 5, 384))):
        with pytest.raises(InputTypeError, match=f"BertModel does not take {name}: .* The call takes input_ids, "
                                                 "attention_mask, token_type_ids, position_ids"):  # fmt: skip
            model(**batch, **{name: value})


def test_gradient_checkpointing_says_it_is_not_implemented(model):
    """transformers' gradient_checkpointing_enable (and its new name) has no minibert counterpart: an
    AttributeError that says so and what to do, never a silent no-op."""
    for name in ("gradient_checkpointing_enable", "activation_checkpointing_enable"):
        with pytest.raises(TransformersNameError, match="does not implement gradient checkpointing"):
            getattr(model, name)()
        assert not hasattr(model, name)


# ----------------------------------------------------------------------------- transformers' module names


def _pairs(message: str) -> list[tuple[str, str]]:
    """The 'transformers → minibert' lines of a TransformersNameError, as (theirs, ours) paths."""
    return re.findall(r"^    (\S+) → (\S+)$", message, flags=re.MULTILINE)


def _weight(module, path: str, layer: int = 3) -> torch.Tensor:
    """The weight of the module (or the parameter) at a dotted path such as ``encoder.layer[n].output.dense``."""
    target = module
    for part in path.replace("[n]", f".{layer}").split("."):
        target = target[int(part)] if part.isdigit() else getattr(target, part)
    return (target if isinstance(target, torch.Tensor) else target.weight).detach()


def test_transformers_names_say_minibert_names(model):
    with pytest.raises(TransformersNameError, match=r"transformers' encoder.layer\[n\] is minibert's layers\[n\]"):
        _ = model.encoder.layer[3]
    with pytest.raises(AttributeError, match="transformers' LayerNorm is minibert's layer_norm"):
        _ = model.embeddings.LayerNorm
    with pytest.raises(AttributeError, match=r"self.query → query\n"):
        _ = model.layers[3].attention.self.query
    with pytest.raises(AttributeError, match=r"output.dense → feed_forward.output\n\s+output.LayerNorm → output_norm"):
        _ = model.layers[3].output
    with pytest.raises(MinibertError, match="the rename table: minibert.loading.names.RENAMES"):
        _ = model.layers[3].intermediate


def test_transformers_names_name_the_same_weights_as_in_transformers(model, minilm_dir):
    """Every pair the errors list, read in both trees loaded from the same checkpoint: transformers'
    path in transformers' BertModel and minibert's path in minibert's hold the same tensor."""
    transformers = pytest.importorskip("transformers")
    reference = transformers.BertModel.from_pretrained(str(minilm_dir)).eval()
    checked = set()
    for owner, theirs_owner, name in [
        (model, reference, "encoder"),
        (model.embeddings, reference.embeddings, "LayerNorm"),
        (model.layers[3], reference.encoder.layer[3], "output"),
        (model.layers[3], reference.encoder.layer[3], "intermediate"),
        (model.layers[3].attention, reference.encoder.layer[3].attention, "self"),
    ]:
        with pytest.raises(TransformersNameError) as raised:
            getattr(owner, name)
        pairs = _pairs(str(raised.value)) or [
            re.search(r"transformers' (\S+) is minibert's (\S+)", str(raised.value)).groups()
        ]
        for theirs, ours in pairs:
            assert torch.equal(_weight(theirs_owner, theirs), _weight(owner, ours)), f"{theirs} vs {ours}"
            checked.add(theirs)
    assert len(checked) >= 8 + 1 + 2 + 1 + 3


def test_transformers_names_cover_the_rename_table(model):
    """The errors are read from the rename table: every encoder-layer row is listed under
    ``model.encoder``, as the table says."""
    with pytest.raises(TransformersNameError) as raised:
        _ = model.encoder
    listed = dict(_pairs(str(raised.value)))
    rows = [(hub.rstrip("."), ours.rstrip(".")) for hub, _, ours in RENAMES if hub.startswith("encoder.")]
    assert len(rows) == 8
    for hub, ours in rows:
        assert listed[hub.replace(".{n}", "[n]")] == ours.replace(".{n}", "[n]")


def test_other_missing_names_stay_plain_attribute_errors(model):
    with pytest.raises(AttributeError) as raised:
        _ = model.no_such_thing
    assert type(raised.value) is AttributeError
    assert not hasattr(model, "bert") and hasattr(model, "layers")
    assert getattr(model.layers[0], "_not_there", "default") == "default"


# ----------------------------------------------------------------------------- the long-input warning


def test_long_input_warning_says_what_minibert_does(minilm_dir, model, caplog):
    tokenizer = BertTokenizer.from_pretrained(minilm_dir)  # a fresh one: the warning comes once per tokenizer
    with caplog.at_level(logging.WARNING, logger="minibert"):
        batch = tokenizer("word " * 600, return_tensors="pt")
    warning = caplog.text
    assert "indexing errors" not in warning  # transformers' words, untrue of minibert
    assert (
        "602 > 512" in warning and "refuses a row longer than its max_position_embeddings with a ValueError" in warning
    )
    assert "truncation=True" in warning
    with pytest.raises(ValueError, match="602 tokens is longer than max_position_embeddings=512"):  # what it says
        model(**batch)
    assert tokenizer("word " * 600, truncation=True, return_tensors="pt")["input_ids"].shape == (1, 512)


def test_the_docs_module_name_table_is_the_rename_table():
    """docs/checkpoints.md shows the rename table, not a second copy that could drift."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "checkpoints.md").read_text(encoding="utf-8")
    section = text.split("## Module names: transformers' and minibert's")[1]
    shown = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|$", section, flags=re.MULTILINE)
    expected = [(hub.rstrip(".").replace(".{n}", "[n]"), ours.rstrip(".").replace(".{n}", "[n]"))
                for hub, _, ours in RENAMES]  # fmt: skip
    assert shown == expected


def test_rows_of_different_lengths_say_pad_them(model, tokenizer):
    unpadded = tokenizer(["I love Paris", "I was thirsty, so I drank water"])  # lists, no padding
    with pytest.raises(
        InputTypeError, match=re.escape("rows of lengths 5, 10; pad them: tokenizer(texts, padding=True")
    ):
        model(**unpadded)


def test_pad_to_max_length_in_todays_call_says_what_replaces_it(tokenizer):
    """transformers 5's call has no pad_to_max_length (transformers 4's encode_plus, which the
    tutorials call with it, takes it: tests/test_tokenizer_transformers4_calls.py)."""
    with pytest.raises(InputTypeError, match=re.escape("write padding='max_length'")):
        tokenizer("I love Paris", max_length=8, pad_to_max_length=True)
    batch = tokenizer("I love Paris", max_length=8, padding="max_length", truncation=True)  # what it says works
    assert batch["attention_mask"] == [1, 1, 1, 1, 1, 0, 0, 0]
    with pytest.raises(AttributeError, match="'BertTokenizer' object has no attribute 'no_such_method'$"):
        _ = tokenizer.no_such_method


# ----------------------------------------------------------------------------- a path where a config is taken


def test_a_model_built_from_a_path_says_from_pretrained(minilm_dir):
    # BertModel(path): transformers' error was AttributeError 'str' object has no attribute 'vocab_size'
    for cls in (BertModel, BertForMaskedLM):
        with pytest.raises(InputTypeError, match=re.escape(f"{cls.__name__}.from_pretrained({str(minilm_dir)!r})")):
            cls(str(minilm_dir))
        with pytest.raises(TypeError, match="builds a model with fresh weights from a BertConfig"):
            cls(minilm_dir)  # a Path too
    assert isinstance(BertModel.from_pretrained(str(minilm_dir)), BertModel)  # what it says works


def test_a_model_built_from_transformers_config_says_how_to_convert_it():
    """Both libraries call their class BertConfig: transformers' given to a minibert class was AttributeError
    'BertConfig' object has no attribute 'head_size', naming neither library; the conversion it names works."""
    transformers = pytest.importorskip("transformers")
    theirs = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                     intermediate_size=37, num_labels=3)  # fmt: skip
    for cls in (BertModel, BertForSequenceClassification):
        said = f"got a transformers.models.bert.configuration_bert.BertConfig; convert it: {cls.__name__}(minibert."
        with pytest.raises(InputTypeError, match=re.escape(said + "BertConfig.from_dict(config.to_dict()))")):
            cls(theirs)
    converted = minibert.BertConfig.from_dict(theirs.to_dict())
    assert BertForSequenceClassification(converted).classifier.out_features == 3


# ----------------------------------------------------------------------------- two texts where one is taken


def test_tokenize_command_given_two_texts_says_pair():
    from helpers import run_minibert

    result = run_minibert("tokenize", "I was thirsty!", "I drank water")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "unrecognized arguments: I drank water" in result.stderr
    assert 'for a pair of texts, minibert tokenize "first text" --pair "second text"' in result.stderr
    elsewhere = run_minibert("embed", "--no-such-flag")  # other commands: argparse's line, no tokenize hint
    assert elsewhere.returncode == 2 and "--pair" not in elsewhere.stderr


# ----------------------------------------------------------------------------- a model name that does not load offline


def test_an_unknown_name_offline_lists_the_offline_models_and_a_near_name(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # a cache that holds one model
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    (tmp_path / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots").mkdir(parents=True)
    with pytest.raises(ModelNotFoundError) as raised:
        BertModel.from_pretrained("fortunes-mini")
    message = str(raised.value)
    assert "Did you mean minibert/fortunes-mini?" in message
    assert "Models that load offline here: minibert/fortunes-mini, sentence-transformers/all-MiniLM-L6-v2." in message
    with pytest.raises(ModelNotFoundError, match="Did you mean sentence-transformers/all-MiniLM-L6-v2?"):
        BertTokenizer.from_pretrained("sentence-transformers/all-MiniLM-L6-v3")
    with pytest.raises(ModelNotFoundError) as far:
        BertModel.from_pretrained("someone/gpt-neo")
    assert "Did you mean" not in str(far.value) and "Models that load offline here" in str(far.value)
    assert isinstance(BertModel.from_pretrained("minibert/fortunes-mini"), BertModel)  # what it says works


# ----------------------------------------------------------------------------- pytorch-pretrained-bert's calls


def _warnings_of(call) -> list[str]:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(warning.message) for warning in caught]


def test_segment_ids_passed_where_the_mask_goes_warn_once(minilm_dir, tokenizer):
    """McCormick's notebook: model(tokens_tensor, segments_tensors), in pytorch-pretrained-bert's order."""
    model = BertModel.from_pretrained(minilm_dir)
    pair = tokenizer("After stealing money from the bank vault,", "the bank robber was seen fishing.",
                     return_tensors="pt")  # fmt: skip
    ids, segments = pair["input_ids"], pair["token_type_ids"]
    first = _warnings_of(lambda: model(ids, segments))
    assert len(first) == 1
    for fix in ("look like a pair's segment ids", "pytorch-pretrained-bert's was (input_ids, token_type_ids, "
                "attention_mask)", "model(input_ids, token_type_ids=segments)"):  # fmt: skip
        assert fix in first[0], first[0]
    assert _warnings_of(lambda: model(ids, segments)) == []  # once per model
    zeros = BertModel.from_pretrained(minilm_dir)  # one sentence's segment ids: all zeros
    single = tokenizer("the bank robber", return_tensors="pt")
    warned = _warnings_of(lambda: zeros(single["input_ids"], single["token_type_ids"]))
    assert len(warned) == 1 and "look like segment ids" in warned[0] and "token_type_ids=" in warned[0]
    # what it says to write: the pair's numbers, as with the tokenizer's own mask
    by_name = model(ids, token_type_ids=segments).last_hidden_state
    assert torch.equal(by_name, model(**pair).last_hidden_state)


def test_real_attention_masks_passed_positionally_do_not_warn(minilm_dir, tokenizer):
    model = BertModel.from_pretrained(minilm_dir)
    texts = ["the bank", "the bank robber was seen fishing on the river bank"]
    right = tokenizer(texts, padding=True, return_tensors="pt")
    left = tokenizer(texts, padding=True, padding_side="left", return_tensors="pt")
    assert left["attention_mask"][0, 0] == 0  # left padding hides position 0, which holds [PAD]
    ones = tokenizer("the bank robber", return_tensors="pt")
    assert _warnings_of(lambda: [model(right["input_ids"], right["attention_mask"]),
                                 model(left["input_ids"], left["attention_mask"]),
                                 model(ones["input_ids"], ones["attention_mask"]),
                                 model(ones["input_ids"], ones["token_type_ids"] + 1)]) == []  # fmt: skip
    # (the notebook's literal cells pass all-ones segment ids second: also a valid mask, so no warning)


def test_output_all_encoded_layers_names_output_hidden_states(minilm_dir, model, tokenizer):
    ids = tokenizer("the bank robber", return_tensors="pt")["input_ids"]
    for owner in (model, BertForMaskedLM.from_pretrained("minibert/fortunes-mini")):
        with pytest.raises(InputTypeError, match=re.escape("output_hidden_states=True")) as raised:
            owner(ids % 100, output_all_encoded_layers=True)
        assert "outputs.hidden_states[1:]" in str(raised.value) and "pytorch-pretrained-bert" in str(raised.value)
    layers = model(ids, output_hidden_states=True).hidden_states[1:]  # what it says: the encoder layers
    assert len(layers) == model.config.num_hidden_layers and torch.equal(layers[-1], model(ids).last_hidden_state)


def test_the_optimizer_groups_migrating_md_gives_decay_what_transformers_groups_decay(minilm_dir):
    """run_glue.py's ``no_decay = ["bias", "LayerNorm.weight"]`` matches none of minibert's LayerNorm
    names (silently decaying them: migrating.md's Mistakes table says so); the list the table gives
    instead picks, in minibert, the very parameters transformers' list picks in transformers."""
    import transformers

    from minibert.loading.names import minibert_to_checkpoint

    def no_decay(model, words):
        return {name for name, _ in model.named_parameters() if any(word in name for word in words)}

    from minibert import BertForSequenceClassification

    ours = BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=2)
    theirs = transformers.BertForSequenceClassification.from_pretrained(str(minilm_dir), num_labels=2)
    expected = no_decay(theirs, ["bias", "LayerNorm.weight"])
    def hub_name(name):  # bert.layers.3.output_norm.weight -> bert.encoder.layer.3.output.LayerNorm.weight
        return "bert." + minibert_to_checkpoint(name[len("bert."):]) if name.startswith("bert.") else name

    assert {hub_name(name) for name in no_decay(ours, ["bias", "LayerNorm.weight", "norm.weight"])} == expected
    assert len(no_decay(ours, ["bias", "LayerNorm.weight"])) < len(expected)  # the mistake the table names
    by_kind = {name for module_name, module in ours.named_modules() if isinstance(module, torch.nn.LayerNorm)
               for name in (f"{module_name}.weight", f"{module_name}.bias")}  # fmt: skip
    assert by_kind | no_decay(ours, ["bias"]) == no_decay(ours, ["bias", "LayerNorm.weight", "norm.weight"])


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
@pytest.mark.parametrize("how", ["read", "mapped"])
def test_an_unreadable_file_is_a_checkpoint_error_naming_it(tmp_path, monkeypatch, name, how):
    """(``how``: the weights read into memory, ``read_state_dict``, or mapped, ``map_state_dict``,
    as from_pretrained maps them.)"""
    """A config or weights file the user may not read was Python's bare PermissionError (the docs say
    CheckpointError, as for an unreadable vocab.txt). The refusal is simulated (the tests run as root,
    whom chmod 000 does not stop)."""
    import os
    import shutil

    from minibert.errors import CheckpointError
    from tiny_hub import TINY

    folder = tmp_path / "model"
    shutil.copytree(TINY, folder)
    target = str(folder / name)

    def refusing(real):
        def call(path, *args, **kwargs):
            if os.fspath(path) == target:
                raise PermissionError(13, "Permission denied", target)
            return real(path, *args, **kwargs)

        return call

    monkeypatch.setattr(os, "open", refusing(os.open))
    monkeypatch.setattr(Path, "read_bytes", lambda self, real=Path.read_bytes: refusing(real)(self))
    monkeypatch.setattr(Path, "open", lambda self, *a, real=Path.open, **k: refusing(real)(self, *a, **k))
    from minibert.loading.checkpoint_files import map_state_dict, read_state_dict

    load = (lambda: BertModel.from_pretrained(folder)) if name == "config.json" else \
        (lambda: (read_state_dict if how == "read" else map_state_dict)(folder / name))  # fmt: skip
    with pytest.raises(CheckpointError, match=f"cannot read .*{re.escape(target)}: Permission denied"):
        load()
