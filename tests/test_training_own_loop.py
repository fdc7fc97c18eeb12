"""A training loop of one's own, as the HF course's chapter 3 ("A full training") and transformers'
"Train in native PyTorch" page write it, with ``from transformers import`` changed to ``from minibert
import`` (issue r19 learner, item 2: ``DataCollatorWithPadding``, ``get_scheduler``, ``set_seed`` and
``BertTokenizerFast`` were bare ImportErrors). Each is compared with transformers': the collator's
batches (keys, dtypes, values), ``set_seed``'s generators, the loop's losses. The names minibert
leaves to transformers are refused with what to write, and what those messages claim is checked here.
(``get_scheduler``: tests/test_training_schedules.py.)"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
import torch

import minibert
from helpers import assert_close

transformers = pytest.importorskip("transformers")

TEXTS = ["A wonderful film, truly.", "Dull.", "The hotel was lovely and the staff were kind to us all week.", "Bad"]


@pytest.fixture(scope="module")
def tokenizers(minilm_dir):
    return minibert.AutoTokenizer.from_pretrained(minilm_dir), transformers.AutoTokenizer.from_pretrained(minilm_dir)


def _features(tokenizer, labels, key="label"):
    return [{**tokenizer(text), key: label} for text, label in zip(TEXTS, labels)]


def _same_batch(ours, theirs) -> None:
    assert list(ours) == list(theirs)
    for key in theirs:
        assert type(ours[key]) is type(theirs[key]) and ours[key].dtype == theirs[key].dtype, key
        assert ours[key].tolist() == theirs[key].tolist(), key


@pytest.mark.parametrize("labels", [[1, 0, 1, 0], [0.5, 3.2, 4.75, 0.0], [True, False, True, True]],
                         ids=["class ids", "STS-B scores", "booleans"])  # fmt: skip
@pytest.mark.parametrize("key", ["label", "label_ids", "labels"])
@pytest.mark.parametrize("settings", [{}, {"pad_to_multiple_of": 8}, {"padding": "max_length", "max_length": 24},
                                      {"return_tensors": "np"},
                                      {"padding": "longest", "return_tensors": "np"}])  # fmt: skip
def test_data_collator_with_padding_as_transformers(tokenizers, labels, key, settings):
    ours, theirs = tokenizers
    want = transformers.DataCollatorWithPadding(theirs, **settings)(_features(theirs, labels, key))
    _same_batch(minibert.DataCollatorWithPadding(ours, **settings)(_features(ours, labels, key)), want)
    # transformers' own collator over minibert's tokenizer: the same (float scores were cut to ints by pad)
    _same_batch(transformers.DataCollatorWithPadding(ours, **settings)(_features(ours, labels, key)), want)


def test_pad_keeps_a_columns_own_type_as_transformers(tokenizers):
    ours, theirs = tokenizers
    rows = [{"input_ids": [101, 102], "score": 3.2, "idx": 7}, {"input_ids": [101, 2000, 102], "score": 1.0, "idx": 9}]
    for kind in ("pt", "np"):
        for padding in (True, False) if kind == "np" else (True,):
            mine = ours.pad(rows, padding=padding, return_tensors=kind)
            reference = theirs.pad(rows, padding=padding, return_tensors=kind)
            for key in ("score", "idx"):
                assert mine[key].dtype == reference[key].dtype and mine[key].tolist() == reference[key].tolist()


def _generators() -> tuple:
    return random.getstate(), np.random.get_state()[1].tolist(), torch.get_rng_state().tolist()


@pytest.mark.parametrize("deterministic", [False, True])
def test_set_seed_as_transformers(deterministic):
    was = torch.are_deterministic_algorithms_enabled()
    try:
        transformers.set_seed(1234, deterministic=deterministic)
        theirs = (*_generators(), torch.are_deterministic_algorithms_enabled())
        torch.use_deterministic_algorithms(was)
        random.seed(0), np.random.seed(0), torch.manual_seed(0)
        minibert.set_seed(1234, deterministic=deterministic)
        assert (*_generators(), torch.are_deterministic_algorithms_enabled()) == theirs
    finally:
        torch.use_deterministic_algorithms(was)


def test_bert_tokenizer_fast_is_bert_tokenizer_as_in_transformers(minilm_dir):
    assert transformers.BertTokenizerFast is transformers.BertTokenizer  # transformers 5: one class, two names
    assert minibert.BertTokenizerFast is minibert.BertTokenizer
    ours = minibert.BertTokenizerFast.from_pretrained(minilm_dir)
    theirs = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    assert ours(TEXTS, padding=True, return_offsets_mapping=True) == dict(
        theirs(TEXTS, padding=True, return_offsets_mapping=True))


def _course_loop(library, checkpoint, tokenizer, features, steps: int) -> list[float]:
    """The course's loop: DataLoader over the collator, torch's AdamW, get_scheduler("linear"), a few steps."""
    model = library.AutoModelForSequenceClassification.from_pretrained(checkpoint)
    library.set_seed(42)  # (after loading: transformers draws numbers there, minibert none)
    collate = library.DataCollatorWithPadding(tokenizer=tokenizer)
    loader = torch.utils.data.DataLoader(features, shuffle=True, batch_size=4, collate_fn=collate)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    scheduler = library.get_scheduler("linear", optimizer=optimizer, num_warmup_steps=1, num_training_steps=steps)
    model.train()
    losses = []
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        optimizer.step(), scheduler.step(), optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def test_the_courses_loop_gives_transformers_losses(tmp_path, tokenizers, minilm_dir):
    """Chapter 3's loop, once with each library's imports, from one checkpoint (a small BERT with its
    classifier, dropout on: set_seed seeds it). The losses agree to float32 rounding: one step of a
    2-layer model of width 64 rounds at ~1e-7 relative, and 4 steps of Adam carry it on (bound 1e-5)."""
    config = transformers.BertConfig(vocab_size=tokenizers[1].vocab_size, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=128, num_labels=2)  # fmt: skip
    torch.manual_seed(0)
    transformers.BertForSequenceClassification(config).save_pretrained(tmp_path)
    losses = []
    for library, tokenizer in zip((minibert, transformers), tokenizers):
        features = [{**tokenizer(text), "label": label} for text, label in zip(TEXTS * 4, [1, 0, 1, 0] * 4)]
        losses.append(_course_loop(library, tmp_path, tokenizer, features, steps=4))
    ours, theirs = losses
    print(f"\nthe course loop's losses: minibert {ours}, transformers {theirs}")
    assert len(ours) == 4
    assert_close(ours, theirs, "the course loop's losses", atol=1e-5)


def _message(name: str) -> str:
    with pytest.raises(ImportError) as caught:
        exec(f"from minibert import {name}", {})
    return str(caught.value)


def test_the_course_imports_work():
    exec("from minibert import AutoTokenizer, DataCollatorWithPadding, get_scheduler, set_seed, BertTokenizerFast", {})


def test_each_name_left_to_transformers_is_transformers_and_says_what_to_write():
    for name in minibert._NOT_HERE:
        if name == "AdamW":
            continue  # transformers removed it (test_training_schedules.py)
        assert hasattr(transformers, name), f"{name} is not transformers': the message would be untrue"
        message = _message(name)
        assert message.startswith(f"cannot import {name} from minibert: ")
        code = re.findall(r"`([^`]+)`", message)  # what to write, as code that compiles
        assert code, message
        for line in code:
            compile(line, name, "exec")


def test_a_class_like_name_says_where_the_names_are_and_probes_still_answer():
    for name in ("RobertaModel", "GPT2Tokenizer", "BertTokeniser"):
        message = _message(name)
        assert f"minibert has no {name}" in message and f"`from transformers import {name}`" in message
    assert not hasattr(minibert, "__wrapped__") and not hasattr(minibert, "no_such_function")
    assert not hasattr(minibert, "MAX")


def test_what_the_messages_claim_of_transformers_classes_holds(tokenizers):
    """The collators said to take minibert's tokenizer make transformers' batches with it; the base
    class named is every model's."""
    ours, theirs = tokenizers
    words = [{**theirs(text), "labels": [1] * len(theirs(text)["input_ids"])} for text in TEXTS]
    _same_batch(transformers.DataCollatorForTokenClassification(ours)(words),
                transformers.DataCollatorForTokenClassification(theirs)(words))  # fmt: skip
    batches = []
    for tokenizer in (ours, theirs):
        torch.manual_seed(0)
        batches.append(transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.5)(
            [tokenizer(text) for text in TEXTS]))  # fmt: skip
    _same_batch(*batches)
    from minibert.pretrained import PretrainedBert

    for name in minibert.__all__:
        if name.startswith("BertFor") or name == "BertModel":
            assert issubclass(getattr(minibert, name), PretrainedBert), name
