"""Hostile TensorFlow bundle indexes, written here byte by byte (a table: prefix-compressed data
block, index block, footer, each block with its masked CRC32C, so the checksums pass and the
entries themselves are what is wrong). Each gets a CheckpointError naming the file — never a
TypeError, OverflowError, RuntimeError, or memory that follows the entry count."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from tf_bundles import INT32, bundle, entry, field, table

from minibert import BertModel, CheckpointError
from minibert.loading.tf_checkpoint import read_index, read_tf_checkpoint

GOOGLE_DIR = Path(__file__).parent / "data" / "uncased_L-2_H-32_A-2"


def test_the_writer_writes_what_the_reader_reads(tmp_path):
    prefix = bundle(tmp_path, {"w": entry(shape=(2, 2), size=16)}, data=bytes(range(16)) + bytes(48))
    assert read_tf_checkpoint(prefix)["w"].shape == (2, 2)


@pytest.mark.parametrize(
    "entries, says",
    [
        ({"w": entry(shape=(1 << 32, 1 << 32), size=0)}, "does not fit its byte range"),  # 2^64 elements: wraps to 0
        ({"w": entry(shape=(1 << 62, 4), size=0)}, "does not fit its byte range"),
        ({"w": entry(shape=(1 << 64,))}, r"a number is larger than 64 bits \(its 10th byte is 0x02"),  # (WireReader)
        ({"w": entry(shape=(1 << 70,))}, "a number is longer than 10 bytes"),
        ({"w": entry(dtype=b"\x01")}, "field dtype has the wrong wire type"),
        ({"w": entry(shape=5)}, "field shape has the wrong wire type"),
        ({"w": entry(offset=b"\x00")}, "field offset has the wrong wire type"),
        ({"w": entry(size=b"\x10")}, "field size has the wrong wire type"),
        ({"w": entry(crc32c=b"abcd")}, "field crc32c has the wrong wire type"),
        ({"w": entry(shape=(-1,))}, "negative size or offset"),
        ({"w": entry(offset=1 << 63)}, "negative size or offset"),
    ],
    ids=["wraps to 0", "2^64 bytes", "dim past 64 bits", "dim of 71 bits", "dtype as bytes", "shape as a number",
         "offset as bytes", "size as bytes", "crc32c as bytes", "negative dim", "offset 2^63"],
)  # fmt: skip
def test_hostile_entries(tmp_path, entries, says):
    with pytest.raises(CheckpointError, match=says) as error:
        read_tf_checkpoint(bundle(tmp_path, entries))
    assert "model.ckpt" in str(error.value)


@pytest.mark.parametrize("header", [field(1, b"\x01"), field(1, 0), field(1, 1 << 40), field(2, b"x")])
def test_a_hostile_header(tmp_path, header):
    with pytest.raises(CheckpointError, match="model.ckpt.index"):
        read_index(bundle(tmp_path, {"w": entry()}, header=header))


def test_overlapping_and_repeated_ranges_are_refused_before_any_memory(tmp_path):
    """4,000 entries naming the same 16 bytes would have loaded 4,000 copies (+ memory by entry
    count); entries that overlap are refused."""
    many = {f"w{number}": entry() for number in range(4000)}
    with pytest.raises(CheckpointError, match="overlap from byte 0: the index is corrupt"):
        read_tf_checkpoint(bundle(tmp_path, many))
    with pytest.raises(CheckpointError, match="overlap from byte 8"):
        read_tf_checkpoint(bundle(tmp_path, {"a": entry(), "b": entry(offset=8)}))
    assert set(read_tf_checkpoint(bundle(tmp_path, {"a": entry(), "b": entry(offset=16)}))) == {"a", "b"}


def test_an_integer_tensor_where_the_model_has_a_weight(tmp_path):
    """A google checkpoint whose query kernel is int32 (same bytes, same shape): refused by the
    loader, listing the tensor and the dtype, not a RuntimeError from load_state_dict."""
    directory = tmp_path / "google"
    shutil.copytree(GOOGLE_DIR, directory)
    prefix = directory / "bert_model.ckpt"
    entries, _ = read_index(prefix)
    index = Path(f"{prefix}.index")
    # Rebuild the index with every entry as it was but one dtype changed.
    from minibert.loading import tf_checkpoint

    raw = {}
    file_bytes = index.read_bytes()
    footer = tf_checkpoint._reader(file_bytes[-48:-8], index, "footer")
    tf_checkpoint._block_handle(footer)
    offset, size = tf_checkpoint._block_handle(footer)
    for _, handle in tf_checkpoint._block_entries(tf_checkpoint._read_block(file_bytes, offset, size, index, "i"),
                                                  index, "i"):  # fmt: skip
        block_offset, block_size = tf_checkpoint._block_handle(tf_checkpoint._reader(handle, index, "h"))
        data = tf_checkpoint._read_block(file_bytes, block_offset, block_size, index, "d")
        raw.update(dict(tf_checkpoint._block_entries(data, index, "d")))
    name = "bert/encoder/layer_0/attention/self/query/kernel"
    target = entries[name]
    raw[name.encode()] = entry(dtype=INT32, shape=target.shape, offset=target.offset, size=target.size)
    index.write_bytes(table(list(raw.items())))
    named = r"does not compute from \(1\): bert/encoder/layer_0/attention/self/query/kernel of dtype int32 \(it reads"
    with pytest.raises(CheckpointError, match=named):  # (under the checkpoint's own name)
        BertModel.from_pretrained(directory)


@pytest.mark.parametrize("kind", ["a FIFO (named pipe)", "a directory"])
def test_a_data_shard_that_is_not_a_file_is_named_for_what_it_is(tmp_path, kind):
    """A data shard that is a FIFO was "a 0-byte file: it is truncated or corrupt" (stat's size of
    a FIFO); now it is named for what it is, found without opening it (a FIFO would wait for a writer)."""
    directory = tmp_path / "google"
    shutil.copytree(GOOGLE_DIR, directory)
    shard = directory / "bert_model.ckpt.data-00000-of-00001"
    shard.unlink()
    os.mkfifo(shard) if kind.startswith("a FIFO") else shard.mkdir()
    started = time.perf_counter()
    with pytest.raises(CheckpointError) as caught:
        BertModel.from_pretrained(directory)
    assert time.perf_counter() - started < 5
    assert str(caught.value) == f"TensorFlow checkpoint data file {shard} is {kind}, not a regular file"


@pytest.mark.parametrize(("layout", "says"), [
    ("index lost", "bert_model.ckpt.index, which says where each tensor of bert_model.ckpt.data-00000-of-00001 "
                   "is, is missing"),
    ("state names a deleted one", "its 'checkpoint' file names model.ckpt-3, which is not there"),
    ("V1 format", "bert_model.ckpt is TensorFlow's V1 checkpoint format, which minibert does not read"),
    ("config alone", "no TensorFlow checkpoint index (*.index)")], ids=lambda value: value[:20])  # fmt: skip
def test_a_google_folder_without_its_index_is_told_so(tmp_path, layout, says):
    """A folder of Google's whose index is gone (lost in a copy, a 'checkpoint' file naming a deleted
    checkpoint, TensorFlow 1's V1 format: one file, no index) was read as the hub's layout and told
    "config.json not found", a file that does not matter there. Now the missing index is named."""
    from helpers import run_minibert

    directory = tmp_path / "uncased_L-2_H-32_A-2"
    directory.mkdir()
    for name in ("bert_config.json", "vocab.txt"):
        shutil.copyfile(GOOGLE_DIR / name, directory / name)
    if layout == "index lost":
        data = "bert_model.ckpt.data-00000-of-00001"
        shutil.copyfile(GOOGLE_DIR / data, directory / data)
    elif layout == "state names a deleted one":
        (directory / "checkpoint").write_text('model_checkpoint_path: "/elsewhere/model.ckpt-3"\n')
    elif layout == "V1 format":  # tf.compat.v1.train.Saver(write_version=V1): the checkpoint is one file
        (directory / "bert_model.ckpt").write_bytes(b"\x00" * 64)
        (directory / "checkpoint").write_text('model_checkpoint_path: "bert_model.ckpt"\n')
    with pytest.raises(CheckpointError) as raised:
        BertModel.from_pretrained(directory)
    message = str(raised.value)
    assert message.startswith(f"{directory} holds bert_config.json but no TensorFlow checkpoint index (*.index)")
    assert says in message and "config.json not found" not in message, message
    for argv in (["convert", str(directory), str(tmp_path / "out")], ["embed", "--model", str(directory), "hi"]):
        result = run_minibert(*argv)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and lines[-1] == f"minibert: error: {message}", result.stderr
    assert sorted(os.listdir(tmp_path)) == [directory.name]
