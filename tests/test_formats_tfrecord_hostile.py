"""TFRecord files attacked (issue 36, item 5: "TFRecords read by training", the file-level cases):
truncated files, wrong length and data CRCs, length fields claiming terabytes, files that are not
TFRecords, malformed protobufs. Each is a ``TFRecordError`` naming the file and the record
(0-based), raised before a record of the damaged batch is handed out, and a length is checked
against the file before anything is allocated for it. (The feature-level cases, missing or
mistyped features and ids beyond the vocabulary, belong to the training reader.)

The same damaged files are given to TensorFlow's own reader in test_training_pretraining_data.py: it
refuses every one whose damage is in the framing, which shows the cases are real damage.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from minibert.errors import TFRecordError
from minibert.formats import tfrecord
from minibert.formats.crc32c import crc32c, mask

HEADER = 12


def good_file(count: int = 5) -> bytes:
    """``count`` pre-training-shaped examples, framed as Google's writer frames them."""
    buffer = io.BytesIO()
    examples = [{"input_ids": np.arange(100 + row, 132 + row), "input_mask": [1] * 32, "segment_ids": [0] * 32,
                 "masked_lm_positions": [1, 5, 0], "masked_lm_ids": [7, 8, 0], "masked_lm_weights": [1.0, 1.0, 0.0],
                 "next_sentence_labels": [row % 2]} for row in range(count)]  # fmt: skip
    tfrecord.write_examples(buffer, examples)
    return buffer.getvalue()


def starts(data: bytes) -> list[int]:
    """Where each record starts."""
    offsets, position = [], 0
    while position < len(data):
        offsets.append(position)
        (length,) = struct.unpack_from("<Q", data, position)
        position += HEADER + length + 4
    return offsets


def flip(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x10]) + data[position + 1 :]


def with_length(data: bytes, record: int, length: int, fix_crc: bool) -> bytes:
    """Record ``record``'s length field set to ``length`` (its CRC recomputed when ``fix_crc``)."""
    start = starts(data)[record]
    header = struct.pack("<Q", length)
    crc = struct.pack("<I", mask(crc32c(header))) if fix_crc else data[start + 8 : start + 12]
    return data[:start] + header + crc + data[start + 12 :]


def framed(*payloads: bytes) -> bytes:
    """Records with correct framing and CRCs around arbitrary payloads (the damage is inside)."""
    return good_file(2) + b"".join(tfrecord.frame_record(payload) for payload in payloads)


def _entry(name: bytes, feature: bytes) -> bytes:
    entry = tfrecord._field(1, name) + tfrecord._field(2, feature)
    return tfrecord._field(1, tfrecord._field(1, entry))


# name: (the file's bytes, the record the error must name, text the message must hold)
GOOD = good_file()
S = starts(GOOD)
CASES = {
    "cut inside the first header": (GOOD[:5], 0, "ends inside a record header"),
    "cut inside a later header": (GOOD[: S[3] + 7], 3, "ends inside a record header"),
    "cut inside the first record's data": (GOOD[: S[0] + 40], 0, "truncated"),
    "cut inside the last record's data": (GOOD[: S[4] + 30], 4, "truncated"),
    "cut inside the last data CRC": (GOOD[:-2], 4, "truncated"),
    "three stray bytes after the last record": (GOOD + b"\x00\x01\x02", 5, "ends inside a record header"),
    "length CRC wrong, record 0": (flip(GOOD, S[0] + 9), 0, "CRC of its length"),
    "length CRC wrong, record 2": (flip(GOOD, S[2] + 8), 2, "CRC of its length"),
    "data CRC wrong (a data byte), record 0": (flip(GOOD, S[0] + 30), 0, "CRC of its data"),
    "data CRC wrong (a data byte), record 4": (flip(GOOD, S[4] + HEADER + 3), 4, "CRC of its data"),
    "data CRC wrong (the stored CRC), record 1": (flip(GOOD, S[2] - 1), 1, "CRC of its data"),
    "a length of a terabyte": (with_length(GOOD, 0, 2**40, False), 0, "CRC of its length does not match either"),
    "a length of a terabyte, its CRC right": (with_length(GOOD, 1, 2**40, True), 1, "1,099,511,627,776 bytes"),
    "a length of 2**64 - 1": (with_length(GOOD, 2, 2**64 - 1, True), 2, "truncated"),
    "a length one byte too long": (with_length(GOOD, 0, S[1] - 16 + 1, True), 0, "CRC of its data"),
    "a length one byte too short": (with_length(GOOD, 3, S[4] - S[3] - 16 - 1, True), 3, "CRC"),
    "a length of zero, its CRC right": (with_length(GOOD, 0, 0, True), 0, "CRC"),
    "a text file": (b"one sentence per line\n" * 50, 0, "record 0"),
    "a JSON file": (b'{"input_ids": [101, 2023, 102]}\n', 0, "record 0"),
    "a .npy file": (
        b"\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }" + b" " * 60,
        0,
        "record 0",
    ),  # fmt: skip
    "a gzip-compressed TFRecord file": (gzip.compress(GOOD), 0, "record 0"),
    "random bytes": (np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes(), 0, "record 0"),
    "a payload that is not a protobuf": (framed(b"\xff\xff\xff"), 2, "not a valid tf.train.Example"),
    "a varint running past the record": (framed(b"\x0a\x85"), 2, "runs past the end of the record"),
    "a field longer than the record": (framed(b"\x0a\x7f\x00"), 2, "claims 127 bytes"),
    "a varint of eleven bytes": (framed(b"\x08" + b"\xff" * 10 + b"\x01"), 2, "longer than 10 bytes"),
    "a group (wire type 3)": (framed(b"\x0b\x0c"), 2, "unsupported wire type 3"),
    # A 10-byte varint whose 10th byte holds more than bit 63: 'internal error: OverflowError' when
    # unpacked (np.array([2**70], dtype=np.uint64)), silently wrapped when packed. Refused in both.
    "an unpacked int larger than 64 bits": (
        framed(_entry(b"input_ids", tfrecord._field(3, b"\x08" + b"\xff" * 9 + b"\x7f"))),
        2,
        "feature 'input_ids': not a valid tf.train.Example: a number is larger than 64 bits",
    ),  # fmt: skip
    "a packed int larger than 64 bits": (
        framed(_entry(b"input_ids", tfrecord._field(3, tfrecord._field(1, b"\x05" + b"\xff" * 9 + b"\x02")))),
        2,
        "feature 'input_ids': not a valid tf.train.Example: a number is larger than 64 bits (its 10th byte is 0x02",
    ),  # fmt: skip
    "a field number 0": (framed(b"\x00\x05"), 2, "a field has the number 0"),  # protobuf: "Wire format was corrupt"
    "a field number 0 in a feature": (framed(_entry(b"ids", b"\x02\x00")), 2, "a field has the number 0"),
    "a feature name that is not UTF-8": (framed(_entry(b"\xff\xfe", b"\x1a\x02\x0a\x00")), 2, "not UTF-8"),
    "a float list of 7 bytes": (framed(_entry(b"w", b"\x12\x09\x0a\x07" + b"\x00" * 7)), 2, "float list of 7 bytes"),
    "a packed int list cut mid-number": (framed(_entry(b"ids", b"\x1a\x03\x0a\x01\x85")), 2, "runs past its field"),
    "a feature entry without a name": (
        framed(tfrecord._field(1, tfrecord._field(1, tfrecord._field(2, b"")))),
        2,
        "without a name",
    ),  # fmt: skip
    "a feature with two kinds of list": (framed(_entry(b"x", b"\x12\x00\x1a\x00")), 2, "one bytes, float or int64"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_damage_is_a_tfrecord_error_naming_file_and_record(name, tmp_path):
    data, record, expected = CASES[name]
    path = tmp_path / "shard-00007.tfrecord"
    path.write_bytes(data)
    handed_out = []
    with pytest.raises(TFRecordError) as raised:
        for example in tfrecord.read_examples(path):
            handed_out.append(example)
    message = str(raised.value)
    assert str(path) in message and f"record {record} (0-based)" in message and expected in message, message
    if "CRC" in expected or "truncated" in expected:
        assert not handed_out, "a record of a damaged batch was handed out before the damage was found"


def test_the_largest_ints_still_read_as_protobuf_writes_them():
    """The 10th byte's one bit (bit 63) is read, packed and unpacked: the varints protobuf's own
    encoder writes for int64 -1 and -2**63 (ten bytes, the last 0x01) are not refused."""
    from google.protobuf.internal.encoder import _EncodeSignedVarint

    values = [-1, -(2**63), 2**63 - 1, 5]
    encoded = []
    for value in values:
        pieces: list[bytes] = []
        _EncodeSignedVarint(pieces.append, value)  # (it writes a byte at a time)
        encoded.append(b"".join(bytes(piece) for piece in pieces))
    assert [len(number) for number in encoded[:2]] == [10, 10] and encoded[0][-1] == 0x01
    packed = tfrecord._field(3, tfrecord._field(1, b"".join(encoded)))
    unpacked = tfrecord._field(3, b"".join(b"\x08" + number for number in encoded))
    for feature in (packed, unpacked):
        assert tfrecord.decode_example(_entry(b"ids", feature))["ids"].tolist() == values


def test_a_terabyte_length_allocates_nothing(tmp_path):
    """The length is compared with what is left of the file before a byte is read for it."""
    path = tmp_path / "huge.tfrecord"
    path.write_bytes(with_length(GOOD, 0, 2**40, True))
    tracemalloc.start()
    try:
        with pytest.raises(TFRecordError, match="claims 1,099,511,627,776 bytes"):
            list(tfrecord.iter_records(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"{peak:,} bytes allocated"


def test_missing_and_unreadable_paths(tmp_path):
    with pytest.raises(TFRecordError, match="does not exist"):
        list(tfrecord.read_examples(tmp_path / "nothing.tfrecord"))
    with pytest.raises(TFRecordError, match="is a directory"):
        list(tfrecord.read_examples(tmp_path))


def test_a_pipe_or_a_device_is_refused_naming_it(tmp_path):
    """Each record's length is checked against what is left of the file, which a pipe cannot tell:
    `--data <(cat x.tfrecord)` was "[Errno 29] Illegal seek", naming nothing, and /dev/urandom a
    record claiming a made-up number of bytes. Both are refused up front, named, as not regular files."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, GOOD)  # (a few hundred bytes: the pipe holds them, no reader needed yet)
        os.close(write_end)
        piped = f"/dev/fd/{read_end}"
        with pytest.raises(TFRecordError, match=f"^TFRecord file {piped} is a FIFO \\(named pipe\\), not a regular"):
            list(tfrecord.read_examples(piped))
    finally:
        os.close(read_end)
    with pytest.raises(TFRecordError, match="^TFRecord file /dev/urandom is a character device, not a regular file"):
        list(tfrecord.iter_records("/dev/urandom"))
    link = tmp_path / "data.tfrecord"
    link.symlink_to("/dev/zero")
    with pytest.raises(TFRecordError, match=f"^TFRecord file {link} is a character device"):
        list(tfrecord.read_examples(link))


def test_an_empty_file_holds_no_records(tmp_path):
    """As TensorFlow reads it: zero records, not an error (the training reader decides)."""
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    assert list(tfrecord.read_examples(tmp_path / "empty.tfrecord")) == []


def test_the_undamaged_file_reads(tmp_path):
    (tmp_path / "good.tfrecord").write_bytes(GOOD)
    examples = list(tfrecord.read_examples(tmp_path / "good.tfrecord"))
    assert [example["next_sentence_labels"].tolist() for example in examples] == [[0], [1], [0], [1], [0]]


TENSORFLOW_DIES = "a length of a terabyte, its CRC right"  # TensorFlow's reader allocates it: the process dies


def damaged_files(directory: Path) -> dict[str, Path]:
    """Every case of damaged framing written to ``directory`` (for TensorFlow's reader, in the
    reference test): the cases before the protobuf ones (framed correctly, so TensorFlow's reader
    reads those) and not the files that are something else altogether."""
    framing = list(CASES)[: list(CASES).index("a text file")]
    paths = {}
    for number, name in enumerate(framing):
        if name != TENSORFLOW_DIES:
            paths[name] = directory / f"case{number}.tfrecord"
            paths[name].write_bytes(CASES[name][0])
    return paths
