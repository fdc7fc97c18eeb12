"""An int8 model's float32 twin (speed/int8_twin.py): what ``save_pretrained`` writes and what
``use_book_modules()`` gives back, read again from exactly the files the model was loaded from.

Before, the twin was loaded again by the model's name alone: a model loaded at ``revision=A``
saved main's projections beside A's embeddings (no error); one loaded with ``cache_dir=`` could not
be saved at all offline; one loaded from a relative folder was refused after ``os.chdir``; and the
calibration's tokenizer was looked for by name only (random ids instead, no word said). A model
saved into its own folder then refused its next save as another model's file; a BertModel
loaded without its pooler saved the checkpoint's pooler anyway; and one loaded from a TensorFlow
checkpoint's prefix in a training run's folder was refused (the folder's 'checkpoint' file named
another). Each case here failed so."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tf_bundles import write_checkpoint

from int8_checkpoints import measured_faster
from minibert import BertConfig, BertModel, BertTokenizer
from minibert.errors import QuantizationError
from minibert.loading.tf_checkpoint import read_tf_checkpoint
from tiny_hub import TINY as TINY_HUB

TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=120)
A, B = "a" * 40, "b" * 40  # two revisions (commit hashes) of one hub repository
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{n}" for n in range(115))]


def _save(directory, seed=0, **fields):
    torch.manual_seed(seed)
    BertModel(BertConfig(**{**TINY, **fields})).eval().save_pretrained(directory)
    return directory


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """A fresh measurement cache, the speed verdict fixed, and the hub never asked (its cache only)."""
    measured_faster(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _hub_cache(root, main: str):
    """A Hugging Face cache holding org/tiny at revisions A (seed 0, with a vocabulary) and B (seed
    1, none), ``main`` naming one: the layout huggingface_hub writes (snapshots/<commit>/, refs/main)."""
    repository = root / "models--org--tiny"
    for seed, commit in ((0, A), (1, B)):
        _save(repository / "snapshots" / commit, seed)
    (repository / "snapshots" / A / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    BertTokenizer(repository / "snapshots" / A / "vocab.txt").save_pretrained(repository / "snapshots" / A)
    (repository / ".no_exist" / A).mkdir(parents=True)  # the hub's record of the files it said A lacks
    for absent in ("tokenizer.json", "added_tokens.json"):
        (repository / ".no_exist" / A / absent).touch()
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text(main)
    return root


def _assert_saves_and_reads_back(model, checkpoint, saved):
    """``model`` (int8) saves exactly the tensors of ``checkpoint`` (a folder), and its book
    modules are exactly the float32 model read from that folder."""
    model.save_pretrained(saved)
    written, expected = load_file(saved / "model.safetensors"), load_file(checkpoint / "model.safetensors")
    assert written.keys() == expected.keys()
    assert all(torch.equal(written[name], expected[name]) for name in expected), [
        name for name in expected if not torch.equal(written[name], expected[name])]
    exact = BertModel.from_pretrained(checkpoint, gemm="mkl").state_dict()
    book = model.use_book_modules().state_dict()
    assert all(torch.equal(book[name], exact[name]) for name in exact)


@pytest.mark.parametrize("cache", ["cache_dir", "HF_HUB_CACHE"])
def test_an_int8_model_loaded_at_a_revision_saves_that_revision(tmp_path, monkeypatch, cache):
    """main is B; the model is A's. Before: HF_HUB_CACHE saved B's projections with A's embeddings;
    cache_dir= raised ModelNotFoundError ("not in the local Hugging Face cache") on saving."""
    root = _hub_cache(tmp_path / "hub", main=B)
    options = {"cache_dir": str(root)} if cache == "cache_dir" else {}
    if cache == "HF_HUB_CACHE":
        from huggingface_hub import constants

        monkeypatch.setenv("HF_HUB_CACHE", str(root))
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))  # (read once, when huggingface_hub is imported)
    model = BertModel.from_pretrained("org/tiny", revision=A, dtype="int8", **options)
    _assert_saves_and_reads_back(model, root / "models--org--tiny" / "snapshots" / A, tmp_path / "saved")


def test_the_calibration_reads_the_tokenizer_of_the_revision_and_cache_loaded(tmp_path, caplog):
    """Before: the tokenizer was asked for by name alone, outside cache_dir, and the check ran on
    random ids with nothing said above debug (the log line still said 'calibration texts')."""
    root = _hub_cache(tmp_path / "hub", main=B)
    with caplog.at_level(logging.DEBUG, logger="minibert.int8"):
        BertModel.from_pretrained("org/tiny", revision=A, cache_dir=str(root), dtype="int8")
    assert "in int8: cosine to float32" in caplog.text
    assert "calibration on random ids" not in caplog.text, caplog.text


def test_an_int8_model_loaded_from_a_relative_folder_saves_it_after_a_chdir(tmp_path, monkeypatch):
    """Before: after os.chdir the relative path named another file (here another model's), and
    the save was refused as "changed (or was removed)"."""
    _save(tmp_path / "first" / "tiny")
    _save(tmp_path / "second" / "tiny", seed=1)  # the same relative path, from the new working directory
    monkeypatch.chdir(tmp_path / "first")
    model = BertModel.from_pretrained("tiny", dtype="int8")
    monkeypatch.chdir(tmp_path / "second")
    _assert_saves_and_reads_back(model, tmp_path / "first" / "tiny", tmp_path / "saved")


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
def test_an_int8_model_saved_into_its_own_folder_saves_and_reads_back_again(tmp_path, weights):
    """Before: its own first save replaced model.safetensors, and every later save_pretrained or
    use_book_modules() was refused as "another model's" file. (A folder of pytorch_model.bin gets a
    model.safetensors beside it, which from_pretrained reads first: the record follows it too.)"""
    folder = _save(tmp_path / "model")
    original = load_file(folder / "model.safetensors")
    if weights == "pytorch_model.bin":
        torch.save(original, folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    model = BertModel.from_pretrained(folder, dtype="int8")
    model.config.output_hidden_states = True
    model.save_pretrained(folder)
    model.save_pretrained(folder)
    written = load_file(folder / "model.safetensors")
    assert all(torch.equal(written[name], original[name]) for name in original) and written.keys() == original.keys()
    assert BertConfig.from_json_file(folder / "config.json").extra["output_hidden_states"] is True
    _assert_saves_and_reads_back(model, folder, tmp_path / "saved")


def test_an_int8_model_saved_sharded_into_its_own_folder_saves_again(tmp_path):
    """A sharded save into the folder it was loaded from replaces model.safetensors by an index and
    its shards. Before: the record still named model.safetensors (gone), so the model's next save
    was refused as "changed (or was removed)". Now it follows the index, and the float32 weights
    read back through the shards are the original file's, bit for bit."""
    folder = _save(tmp_path / "model")
    original = load_file(folder / "model.safetensors")
    model = BertModel.from_pretrained(folder, dtype="int8")
    model.save_pretrained(folder, max_shard_size="20KB")
    assert (folder / "model.safetensors.index.json").is_file() and not (folder / "model.safetensors").exists()
    model.save_pretrained(tmp_path / "saved")
    written = load_file(tmp_path / "saved" / "model.safetensors")
    assert written.keys() == original.keys()
    assert all(torch.equal(written[name], original[name]) for name in original)


def test_another_models_weights_written_beside_the_file_loaded_are_refused(tmp_path):
    """from_pretrained reads model.safetensors before pytorch_model.bin: one written there since
    (another model's) would be the twin's weights, with the file loaded unchanged. Before: read
    silently."""
    folder = _save(tmp_path / "model")
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    model = BertModel.from_pretrained(folder, dtype="int8")
    _save(tmp_path / "other", seed=1)
    (tmp_path / "other" / "model.safetensors").rename(folder / "model.safetensors")
    with pytest.raises(QuantizationError, match=r"no longer gives the files this model was loaded from in int8 \("
                                                r"config\.json and pytorch_model\.bin: from_pretrained would now read "
                                                r"config\.json and model\.safetensors there\)"):  # fmt: skip
        model.save_pretrained(tmp_path / "saved")
    assert not (tmp_path / "saved").exists()


def test_an_int8_model_without_its_pooler_saves_what_the_float32_one_saves(tmp_path):
    """Before: the twin was built with the pooler, and the checkpoint's pooler.* were written back."""
    folder = _save(tmp_path / "model")
    for dtype in ("float32", "int8"):
        BertModel.from_pretrained(folder, dtype=dtype, add_pooling_layer=False).save_pretrained(tmp_path / dtype)
    exact, approximate = (load_file(tmp_path / dtype / "model.safetensors") for dtype in ("float32", "int8"))
    assert sorted(approximate) == sorted(exact) and not any(name.startswith("pooler.") for name in exact)
    assert all(torch.equal(approximate[name], exact[name]) for name in exact)


GOOGLE_DIR = Path(__file__).parent / "data" / "uncased_L-2_H-32_A-2"  # TensorFlow's; tiny_hub's weights


def _google_run_folder(tmp_path) -> Path:
    """GOOGLE_DIR with a later checkpoint of other weights (model.ckpt-9: the word embeddings + 1),
    which TensorFlow's 'checkpoint' file names as the newest: a Google training run's folder."""
    directory = Path(shutil.copytree(GOOGLE_DIR, tmp_path / "run"))
    newer = {name: tensor.clone() for name, tensor in read_tf_checkpoint(GOOGLE_DIR / "bert_model.ckpt").items()
             if "/adam_" not in name and name != "global_step"}  # fmt: skip
    newer["bert/embeddings/word_embeddings"] += 1.0
    write_checkpoint(directory / "model.ckpt-9", newer)
    (directory / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-9"\n'
                                          'all_model_checkpoint_paths: "bert_model.ckpt"\n')  # fmt: skip
    return directory


def test_an_int8_model_loaded_from_a_checkpoint_prefix_saves_that_checkpoint(tmp_path):
    """DIR/bert_model.ckpt, where DIR's 'checkpoint' file names model.ckpt-9. Before: save_pretrained
    and use_book_modules() raised "DIR no longer gives the files this model was loaded from" (the twin
    was looked for in the folder, which gives model.ckpt-9), though nothing had changed. Now both give
    bert_model.ckpt's weights: tiny_hub's, as transformers reads them (the reference)."""
    transformers = pytest.importorskip("transformers")
    directory = _google_run_folder(tmp_path)
    model = BertModel.from_pretrained(directory / "bert_model.ckpt", dtype="int8")
    model.save_pretrained(tmp_path / "saved")
    reference = transformers.BertModel.from_pretrained(TINY_HUB).state_dict()
    written = transformers.BertModel.from_pretrained(tmp_path / "saved").state_dict()
    assert written.keys() == reference.keys()
    assert all(torch.equal(written[name], reference[name]) for name in reference), [
        name for name in reference if not torch.equal(written[name], reference[name])]
    book = model.use_book_modules().state_dict()
    assert all(torch.equal(book[name], reference[name]) for name in book if name in reference)
    assert torch.equal(book["embeddings.word_embeddings.weight"], reference["embeddings.word_embeddings.weight"])


def test_an_int8_model_loaded_from_a_run_folder_saves_the_checkpoint_it_read(tmp_path):
    """The folder read model.ckpt-9 (its 'checkpoint' file's); that file then names bert_model.ckpt
    (a run restarted, say). Before: refused, as the folder now gives another checkpoint. Now the
    twin is model.ckpt-9 again, the checkpoint read at load; and model.ckpt-9 rewritten is refused."""
    directory = _google_run_folder(tmp_path)
    model = BertModel.from_pretrained(directory, dtype="int8")
    (directory / "checkpoint").write_text('model_checkpoint_path: "bert_model.ckpt"\n')
    exact = BertModel.from_pretrained(directory / "model.ckpt-9", gemm="mkl").state_dict()
    book = model.use_book_modules().state_dict()
    assert all(torch.equal(book[name], exact[name]) for name in exact)
    model = BertModel.from_pretrained(directory, dtype="int8")  # (model.ckpt-9 no more: bert_model.ckpt now)
    fresh = tmp_path / "fresh"  # replaced, as a saver renames its files into place (a file written over in
    fresh.mkdir()  # place is a CheckpointError before this: loading/file_pages.py)
    write_checkpoint(fresh / "bert_model.ckpt", read_tf_checkpoint(directory / "model.ckpt-9"))
    for written in fresh.iterdir():
        os.replace(written, directory / written.name)
    with pytest.raises(QuantizationError, match=r"bert_model\.ckpt\.index changed \(or was removed\) since"):
        model.save_pretrained(tmp_path / "saved")
