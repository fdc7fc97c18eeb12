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
    chunks += [b"", b"a", b"123456789", rng.integers(0, 256, size=70_001, dtype=np.uint8).tobytes()]
    assert [int(value) for value in crc32c_many(chunks)] == [crc32c(chunk) for chunk in chunks]


def _peak_of_reading(path) -> int:
    """The most memory (bytes, numpy's arrays included) that reading every record of ``path`` held at once."""
    import tracemalloc

    tracemalloc.start()
    try:
        for _ in tfrecord.iter_records(path):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_long_record_among_short_ones_costs_memory_in_proportion_to_its_length(tmp_path):
    """The CRCs of a batch of 4,096 records were computed in one array padded to the longest record,
    for the lengths and the data together: 4,095 tiny records and one of 1 MB (a 1.1 MB file) asked
    for 7.6 GiB, and one numpy step per 4 bytes of the longest made a 2 MB record take 12 s. Now
    records go in groups of similar length, a record too long for its group through crc32c (linear),
    and the lengths apart: one long record adds a few times its length to a read's memory."""
    tiny = tfrecord.encode_example({"input_ids": [1, 2, 3]})
    long = bytes(range(256)) * 64  # 16 KiB
    for name, last in (("short.tfrecord", tiny), ("mixed.tfrecord", long)):
        (tmp_path / name).write_bytes(b"".join(tfrecord.frame_record(record) for record in [tiny] * 4095 + [last]))
    assert list(tfrecord.iter_records(tmp_path / "mixed.tfrecord")) == [tiny] * 4095 + [long]
    added = _peak_of_reading(tmp_path / "mixed.tfrecord") - _peak_of_reading(tmp_path / "short.tfrecord")
    print(f"a {len(long):,}-byte record among 4,095 of {len(tiny)} bytes adds {added:,} bytes to the peak")
    assert added < 8 * len(long)  # (it added 8,192 × 16 KiB = 134 MB)
    damaged = bytearray((tmp_path / "mixed.tfrecord").read_bytes())
    damaged[-5] ^= 1  # the long record's last data byte
    (tmp_path / "mixed.tfrecord").write_bytes(bytes(damaged))
    with pytest.raises(TFRecordError, match="record 4095 .*the CRC of its data does not match"):
        list(tfrecord.iter_records(tmp_path / "mixed.tfrecord"))


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
