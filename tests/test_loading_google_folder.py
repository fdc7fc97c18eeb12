"""A folder in Google's layout (loading/google_folder.py): which checkpoint is read, and what is refused.

The checkpoints are tests/data/uncased_L-2_H-32_A-2 (written by TensorFlow; the same weights as
tests/data/tiny_hub, which transformers loads: the reference), or rewritten from it byte by byte
(tests/tf_bundles.py) with one thing changed. The numbers of a checkpoint chosen by its prefix, and of
a bert_config.json that omits fields, are compared with Google's own TensorFlow code in
test_weights_google_run_folder.py.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import torch
from tf_bundles import block, entry, field, table, varint, write_checkpoint

from helpers import run_minibert
from minibert import BertForSequenceClassification, BertModel, CheckpointError
from minibert.formats.crc32c import crc32c, mask
from minibert.loading.names import checkpoint_to_minibert
from minibert.loading.tf_checkpoint import read_index, read_tf_checkpoint
from tiny_hub import TINY as HUB_DIR

transformers = pytest.importorskip("transformers")

DATA = Path(__file__).parent / "data"
GOOGLE_DIR = DATA / "uncased_L-2_H-32_A-2"
WORDS = "bert/embeddings/word_embeddings"


def _reference_words() -> torch.Tensor:
    """transformers' word embeddings of tiny_hub: the weights the Google folder holds."""
    return transformers.BertModel.from_pretrained(str(HUB_DIR)).embeddings.word_embeddings.weight.detach()


def _google_copy(tmp_path: Path, name: str = "uncased_L-2_H-32_A-2") -> Path:
    return Path(shutil.copytree(GOOGLE_DIR, tmp_path / name))


def _tensors() -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in read_tf_checkpoint(GOOGLE_DIR / "bert_model.ckpt").items()
            if "/adam_" not in name and name != "global_step"}  # fmt: skip


# ----------------------------------------------------------------------------- which checkpoint is read


@pytest.mark.parametrize("form", ["owner/name", "absolute", "./relative"])
def test_a_checkpoint_prefix_reads_that_checkpoint(tmp_path, monkeypatch, form):
    """DIR/bert_model.ckpt, as Google's --init_checkpoint, Saver.restore and transformers'
    load_tf_weights_in_bert take a checkpoint: that checkpoint is read, with its folder's
    bert_config.json and vocab.txt, even where the folder's 'checkpoint' file names a newer one
    (model.ckpt-9, other weights). It was refused with "pass its folder", and the folder read model.ckpt-9."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    directory = _google_copy(tmp_path)
    newer = _tensors()
    newer[WORDS] = newer[WORDS] + 1.0
    write_checkpoint(directory / "model.ckpt-9", newer)
    (directory / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-9"\n'
                                          'all_model_checkpoint_paths: "bert_model.ckpt"\n')  # fmt: skip
    monkeypatch.chdir(tmp_path)
    folder = {"owner/name": directory.name, "absolute": str(directory), "./relative": f"./{directory.name}"}[form]
    prefix = f"{folder}/bert_model.ckpt"
    reference = _reference_words()
    assert torch.equal(BertModel.from_pretrained(prefix).embeddings.word_embeddings.weight, reference)
    assert torch.equal(BertModel.from_pretrained(folder).embeddings.word_embeddings.weight, reference + 1.0)
    result = run_minibert("convert", prefix, "out")
    assert result.returncode == 0, result.stderr
    said = result.stderr.strip().splitlines()[-1]
    assert said.endswith(f" from the TensorFlow checkpoint {os.path.normpath(prefix)}"), said
    assert torch.equal(transformers.BertModel.from_pretrained("out").embeddings.word_embeddings.weight, reference)
    assert run_minibert("embed", "--model", prefix, "hi").returncode == 0


def test_a_task_keeps_a_checkpoint_prefix_with_its_folders_files(tmp_path):
    """The tasks keep a loaded model, and a model's tokenizer, under the identity of the files its
    folder holds (tasks/loading.py folder_files), so a folder saved into again is read again. For a
    checkpoint prefix the files are its folder's: the tokenizer of a model given alone (``tokenizer_of``)
    was kept under none, and a vocab.txt rewritten since was never read again."""
    from minibert.tasks.loading import folder_files, tokenizer_of

    directory = _google_copy(tmp_path)
    prefix = str(directory / "bert_model.ckpt")
    assert folder_files(prefix) == folder_files(str(directory)) != ()
    before = tokenizer_of(prefix)
    vocab = (directory / "vocab.txt").read_text().splitlines()
    (directory / "vocab.txt").write_text("\n".join([*vocab[:-1], "zzzz"]) + "\n")  # its last piece renamed
    assert "zzzz" in tokenizer_of(prefix).vocab and "zzzz" not in before.vocab


def test_a_state_file_naming_a_missing_checkpoint_is_an_error_with_one_index(tmp_path):
    """The 'checkpoint' file names model.ckpt-6, deleted; only bert_model.ckpt is left. TensorFlow's
    latest_checkpoint finds none; minibert read bert_model.ckpt without a word. Now it is an error,
    and the prefix it names reads the checkpoint that is there."""
    directory = _google_copy(tmp_path)
    (directory / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-6"\n')
    with pytest.raises(CheckpointError, match="its 'checkpoint' file names model.ckpt-6, which is not there"):
        BertModel.from_pretrained(directory)
    result = run_minibert("convert", str(directory), str(tmp_path / "out"))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "out").exists()
    assert torch.equal(BertModel.from_pretrained(directory / "bert_model.ckpt").embeddings.word_embeddings.weight,
                       _reference_words())  # fmt: skip


@pytest.mark.parametrize("name, kind", [("bert_model.ckpt.index", "fifo"), ("bert_model.ckpt.index", "/dev/zero"),
                                        ("bert_config.json", "fifo"), ("bert_config.json", "directory"),
                                        ("checkpoint", "fifo")])  # fmt: skip
def test_google_files_that_are_not_regular_files_are_named(tmp_path, name, kind):
    """An index that is a FIFO hung (opened); one linked to /dev/zero was read until memory ran out; a
    bert_config.json or 'checkpoint' file that is a FIFO or a directory was "no bert_config.json"."""
    directory = _google_copy(tmp_path)
    path = directory / name
    path.unlink(missing_ok=True)
    {"fifo": os.mkfifo, "directory": os.mkdir, "/dev/zero": lambda p: os.symlink("/dev/zero", p)}[kind](path)
    started = time.perf_counter()
    with pytest.raises(CheckpointError) as raised:
        BertModel.from_pretrained(directory)
    assert time.perf_counter() - started < 10
    said = {"fifo": "a FIFO (named pipe)", "directory": "a directory", "/dev/zero": "a link to /dev/zero"}[kind]
    assert said in str(raised.value) and "not a regular file" in str(raised.value), raised.value
    assert name in str(raised.value) or "TensorFlow's 'checkpoint' file" in str(raised.value)


def test_a_pytorch_model_bin_beside_a_google_folder(tmp_path):
    """transformers' documented conversion writes pytorch_model.bin into the Google folder; the folder
    (bert_config.json, no config.json) was then "config.json not found". Its TensorFlow checkpoint is read."""
    directory = _google_copy(tmp_path)
    torch.save({"unrelated": torch.zeros(1)}, directory / "pytorch_model.bin")
    assert torch.equal(BertModel.from_pretrained(directory).embeddings.word_embeddings.weight, _reference_words())
    assert run_minibert("convert", str(directory), str(tmp_path / "out")).returncode == 0


# ----------------------------------------------------------------------------- what the index may claim


def _with_trailer(contents: bytes) -> bytes:
    return contents + b"\x00" + mask(crc32c(contents + b"\x00")).to_bytes(4, "little")


def test_index_handles_that_repeat_are_refused_before_the_work(tmp_path):
    """8,000 index-block handles to one data block made read_index parse and check that block 8,000
    times (49 s of CPU for a 125 KB file). Handles must follow one another: refused at the second."""
    data = block([(b"", field(1, 1)), (b"w", entry())])
    handle = varint(0) + varint(len(data))
    index = block([(b"w%05d" % number, handle) for number in range(8000)])
    index_offset = len(data) + 5
    footer = (varint(0) + varint(0) + varint(index_offset) + varint(len(index))).ljust(40, b"\x00")
    prefix = tmp_path / "model.ckpt"
    Path(f"{prefix}.index").write_bytes(_with_trailer(data) + _with_trailer(index) + footer
                                        + (0xDB4775248B80FB57).to_bytes(8, "little"))  # fmt: skip
    started = time.process_time()
    with pytest.raises(CheckpointError, match="repeats or overlaps another.*the index is corrupt"):
        read_index(prefix)
    assert time.process_time() - started < 1


def test_keys_out_of_order_are_refused(tmp_path):
    prefix = tmp_path / "model.ckpt"
    unsorted = block([(b"", field(1, 1)), (b"b", entry()), (b"a", entry(offset=16))])
    index = block([(b"\xff", varint(0) + varint(len(unsorted)))])
    footer = (varint(0) + varint(0) + varint(len(unsorted) + 5) + varint(len(index))).ljust(40, b"\x00")
    Path(f"{prefix}.index").write_bytes(_with_trailer(unsorted) + _with_trailer(index) + footer
                                        + (0xDB4775248B80FB57).to_bytes(8, "little"))  # fmt: skip
    with pytest.raises(CheckpointError, match="does not follow the one before it in order"):
        read_index(prefix)


def _retyped(directory: Path, name: str, tf_dtype: int) -> None:
    """The folder's index rewritten with ``name`` stored as TensorFlow DataType ``tf_dtype`` (bytes unchanged)."""
    prefix = directory / "bert_model.ckpt"
    entries, _ = read_index(prefix)
    items = [(b"", field(1, 1))]
    for key, found in entries.items():
        dtype = tf_dtype if key == name else 1 if found.dtype == torch.float32 else 9  # (global_step: int64, 9)
        items.append((key.encode(), entry(dtype=dtype, shape=found.shape, offset=found.offset, size=found.size)))
    Path(f"{prefix}.index").write_bytes(table(items))


@pytest.mark.parametrize("name, tf_dtype, says", [(WORDS, 17, "uint16 (TensorFlow DataType 17)"),
                                                  ("bert/pooler/dense/bias", 8, "complex64 (TensorFlow DataType 8)"),
                                                  ("bert/pooler/dense/kernel", 23, "uint64 (TensorFlow DataType 23)")])
def test_a_weight_in_a_dtype_minibert_does_not_read_is_named(tmp_path, name, tf_dtype, says):
    """A weight stored as uint16 or complex64 was dropped, then said to be missing ("has no tensors for
    the pooler"). It is named, with its dtype."""
    directory = _google_copy(tmp_path)
    _retyped(directory, name, tf_dtype)
    with pytest.raises(CheckpointError) as raised:
        BertModel.from_pretrained(directory)
    assert f"{name} is stored as {says}, which minibert does not read" in str(raised.value), raised.value
    assert "missing" not in str(raised.value) and "no tensors for" not in str(raised.value)


def test_convert_refuses_a_vocabulary_the_model_has_no_rows_for(tmp_path):
    """vocab.txt with more ids than bert_config.json's vocab_size: every command that runs the folder
    refused it, convert wrote it (transformers then failed with IndexError on a word of a large id)."""
    directory = _google_copy(tmp_path)
    vocab_size = len((GOOGLE_DIR / "vocab.txt").read_text(encoding="utf-8").splitlines())
    with (directory / "vocab.txt").open("a", encoding="utf-8") as vocab:
        vocab.write("".join(f"extra{number}\n" for number in range(10)))
    result = run_minibert("convert", str(directory), str(tmp_path / "out"))
    says = (f"the tokenizer has ids up to {vocab_size + 9} but the model's vocab_size is {vocab_size} "
            "(bert_config.json): the tokenizer belongs to another model")  # fmt: skip
    assert result.returncode == 1 and result.stderr.strip().splitlines()[-1].endswith(says), result.stderr
    assert sorted(os.listdir(tmp_path)) == [directory.name]


def test_a_blank_last_line_of_vocab_txt_is_no_id_a_text_can_get(tmp_path):
    """vocab.txt ending in a blank line holds the piece "" one id past the model's rows: refused as
    "ids up to 21,128 but vocab_size is 21,128 ... another model", though no text gives "" (WordPiece
    makes no empty piece) and Google's load_vocab and transformers run the folder. It converts and
    runs now, with the same numbers as the folder without the blank line."""
    import numpy as np

    directory = _google_copy(tmp_path)
    plain = run_minibert("embed", "a text", "--model", str(directory), "--json")
    (directory / "vocab.txt").write_text((directory / "vocab.txt").read_text(encoding="utf-8") + "\n",
                                         encoding="utf-8")  # fmt: skip
    blank = run_minibert("embed", "a text", "--model", str(directory), "--json")
    assert plain.returncode == blank.returncode == 0, blank.stderr
    vectors = [np.array(json.loads(result.stdout)["embedding"]) for result in (plain, blank)]
    assert np.array_equal(*vectors)
    assert run_minibert("convert", str(directory), str(tmp_path / "out")).returncode == 0


# ----------------------------------------------------------------------------- names and fields


def test_every_tensorflow_name_maps_back_to_itself():
    """minibert_to_tf is the inverse of the rename table's TensorFlow column, on TensorFlow's own names."""
    from minibert.loading.names import minibert_to_tf

    names = [name for name in read_index(GOOGLE_DIR / "bert_model.ckpt")[0]
             if "/adam_" not in name and name != "global_step"]  # fmt: skip
    assert names and all(minibert_to_tf(checkpoint_to_minibert(name)) == name for name in names)
    assert minibert_to_tf("classifier.weight") == "output_weights"


@pytest.mark.parametrize("dropped", ["bert/encoder/layer_1/output/dense/bias", "bert/pooler/dense/bias"])
def test_missing_tensorflow_tensors_are_named_as_the_checkpoint_names_them(tmp_path, dropped):
    """A missing tensor was named by the hub's name (encoder.layer.1.output.dense.bias), which the
    file does not hold; a pooler missing its bias "had no tensors for the pooler", its kernel there."""
    directory = _google_copy(tmp_path)
    tensors = _tensors()
    del tensors[dropped]
    for path in directory.glob("bert_model.ckpt.*"):
        path.unlink()
    write_checkpoint(directory / "bert_model.ckpt", tensors)
    with pytest.raises(CheckpointError) as raised:
        BertModel.from_pretrained(directory)
    assert f"missing tensors (1): {dropped}" in str(raised.value), raised.value
    assert "no tensors for" not in str(raised.value)


def test_a_bert_config_json_without_vocab_size_names_the_field(tmp_path):
    """Google's BertConfig has no default vocab_size (from_dict leaves it None): refused, naming it.
    (The other omitted fields take Google's defaults: test_weights_google_run_folder.py.)"""
    directory = _google_copy(tmp_path)
    config = (directory / "bert_config.json").read_text()
    (directory / "bert_config.json").write_text(config.replace('"vocab_size"', '"_vocab_size"'))
    with pytest.raises(CheckpointError, match="bert_config.json names no vocab_size, which Google's BertConfig"):
        BertForSequenceClassification.from_pretrained(directory)
