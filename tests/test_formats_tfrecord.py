"""TFRecord framing and tf.train.Example encoding, written by hand (formats/tfrecord.py).

The comparison with TensorFlow's own reader and writer is in the pre-training data tests (they run
TensorFlow in its own venv); these check the round trip, the CRC32C of many strings against the
one-at-a-time CRC32C (itself checked against the standard check value), and that damage is found.
"""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

from minibert.errors import TFRecordError
from minibert.formats import tfrecord
from minibert.formats.crc32c import crc32c, crc32c_many


def test_crc32c_many_equals_one_at_a_time():
    rng = np.random.default_rng(0)
    chunks = [rng.integers(0, 256, size=int(n), dtype=np.uint8).tobytes() for n in rng.integers(0, 3000, 300)]
    chunks += [b"", b"a", b"123456789"]
    assert [int(value) for value in crc32c_many(chunks)] == [crc32c(chunk) for chunk in chunks]


def _examples(count: int):
    return [{"input_ids": np.arange(i, i + 128), "masked_lm_weights": [1.0, 0.5, 0.0], "labels": [i % 2],
             "extremes": [-1, -(2**63), 2**63 - 1, 0]} for i in range(count)]  # fmt: skip


def _file(tmp_path, examples) -> bytes:
    buffer = io.BytesIO()
    assert tfrecord.write_examples(buffer, examples, batch=7) == len(examples)
    (tmp_path / "data.tfrecord").write_bytes(buffer.getvalue())
    return buffer.getvalue()


def test_round_trip(tmp_path):
    examples = _examples(50)
    _file(tmp_path, examples)
    back = list(tfrecord.read_examples(tmp_path / "data.tfrecord"))
    assert len(back) == len(examples)
    for written, read in zip(examples, back):
        assert read["input_ids"].dtype == np.int64 and read["input_ids"].tolist() == written["input_ids"].tolist()
        assert read["masked_lm_weights"].dtype == np.float32
        assert read["masked_lm_weights"].tolist() == written["masked_lm_weights"]
        assert read["extremes"].tolist() == written["extremes"]


def test_unpacked_and_bytes_features_are_read():
    # An Int64List with unpacked values (tag 1, wire type 0) and a BytesList, built field by field.
    int_list = b"\x08\x05\x08\x96\x01"  # value 5, value 150
    feature_ints = b"\x1a" + bytes([len(int_list)]) + int_list
    bytes_list = b"\x0a\x02hi"
    feature_bytes = b"\x0a" + bytes([len(bytes_list)]) + bytes_list
    entries = b""
    for name, feature in ((b"ids", feature_ints), (b"text", feature_bytes)):
        entry = b"\x0a" + bytes([len(name)]) + name + b"\x12" + bytes([len(feature)]) + feature
        entries += b"\x0a" + bytes([len(entry)]) + entry
    example = tfrecord.decode_example(b"\x0a" + bytes([len(entries)]) + entries)
    assert example["ids"].tolist() == [5, 150] and example["text"] == [b"hi"]


@pytest.mark.parametrize("damage", ["length_crc", "data_crc", "truncated_body", "truncated_header", "huge_length"])
def test_damage_is_named(tmp_path, damage):
    data = bytearray(_file(tmp_path, _examples(5)))
    (first_length,) = struct.unpack_from("<Q", data)
    second = 12 + first_length + 4  # where record 1 starts
    if damage == "length_crc":
        data[second + 8] ^= 1
    elif damage == "data_crc":
        data[second + 12 + 3] ^= 1
    elif damage == "truncated_body":
        data = data[: len(data) - 2]
    elif damage == "truncated_header":
        data = data[: second + 5]
    else:
        struct.pack_into("<Q", data, second, 2**40)  # a length field claiming a terabyte
    (tmp_path / "data.tfrecord").write_bytes(bytes(data))
    with pytest.raises(TFRecordError) as raised:
        list(tfrecord.read_examples(tmp_path / "data.tfrecord"))
    message = str(raised.value)
    assert "data.tfrecord" in message and "record" in message
    if damage.endswith("crc"):
        assert "CRC" in message and "record 1 " in message


def test_not_a_tfrecord_file(tmp_path):
    (tmp_path / "text.tfrecord").write_text("one sentence per line\n" * 10)
    with pytest.raises(TFRecordError, match="text.tfrecord, record 0"):
        list(tfrecord.read_examples(tmp_path / "text.tfrecord"))


def test_malformed_example_is_named():
    with pytest.raises(TFRecordError, match="not a valid tf.train.Example"):
        tfrecord.decode_example(b"\x0a\x7f\x00", "record 3")
