"""TFRecord files of ``tf.train.Example`` messages, written and read by hand (no TensorFlow).

Google's ``create_pretraining_data.py`` writes its masked-LM / next-sentence instances as TFRecords
and ``run_pretraining.py`` reads them. A TFRecord file is records back to back, each framed as::

    uint64  length            little-endian, the number of data bytes
    uint32  masked CRC32C     of the 8 length bytes
    bytes   data[length]      here: one serialized tf.train.Example
    uint32  masked CRC32C     of the data

(CRCs are *masked* as everywhere in TensorFlow: see ``crc32c.mask``.) A ``tf.train.Example`` is a
small protobuf; the parts used here, with their field numbers::

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }      a map entry: key = 1, value = 2
    Feature   { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; }
    FloatList { repeated float value = 1 [packed]; }     little-endian float32s
    Int64List { repeated int64 value = 1 [packed]; }     varints (two's complement, 10 bytes if < 0)

Writing uses the packed encoding, as TensorFlow does; reading accepts packed and unpacked (protobuf
parsers must). A file that is not what it claims fails with a ``TFRecordError`` naming the file and
the record (0-based), before any of its data is used: a wrong CRC says "CRC", a length that runs
past the end of the file is refused before anything is allocated for it.

>>> data = encode_example({"input_ids": [101, 7592, 102], "masked_lm_weights": [1.0, 0.0]})
>>> example = decode_example(data)
>>> example["input_ids"].tolist(), example["masked_lm_weights"].tolist()
([101, 7592, 102], [1.0, 0.0])
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import TFRecordError
from .atomic_files import KINDS
from .crc32c import crc32c_many, mask, unmask
from .protobuf import WireReader

HEADER_BYTES = 12  # uint64 length + uint32 masked CRC of it
FOOTER_BYTES = 4  # uint32 masked CRC of the data
READ_BATCH = 4096  # records whose CRCs are checked together (crc32c_many), at most ...
READ_BATCH_BYTES = 1 << 22  # ... and their bytes, at most (a longer record is a batch of its own)

_ONE_BYTE = [bytes([value]) for value in range(0x80)]

Value = Sequence[int] | Sequence[float] | Sequence[bytes] | np.ndarray


# --- protobuf, the few wire types an Example uses ------------------------------------------------


def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    value &= (1 << 64) - 1  # int64 → its two's complement, as protobuf encodes negative int64s
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varints(values: np.ndarray) -> bytes:
    """Many int64s as back-to-back varints, vectorized: each value's 7-bit digits, low first, the
    high bit set on every byte but its last (a negative int64 takes ten bytes, as its uint64).

    >>> _varints(np.array([1, 150, 0, -1])) == b"".join(_varint(value) for value in [1, 150, 0, -1])
    True
    """
    if not values.size:
        return b""
    unsigned = values.astype(np.int64).view(np.uint64)[:, None]  # (N, 1)
    width = max(1, -(-int(unsigned.max()).bit_length() // 7))  # bytes of the largest value
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)  # (W,)
    digits = (unsigned >> shifts) & np.uint64(0x7F)  # (N, W)
    counts = 1 + (unsigned >= (np.uint64(1) << shifts[1:])).sum(axis=1, keepdims=True)  # (N, 1) bytes per value
    places = np.arange(width)  # (W,)
    encoded = (digits | ((places < counts - 1) << 7).astype(np.uint64)).astype(np.uint8)
    return encoded[places < counts].tobytes()  # row by row: each value's bytes in order


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): tag, length, payload."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _encode_feature(values: Value) -> bytes:
    array = values if isinstance(values, np.ndarray) else None
    if array is None and len(values) and isinstance(values[0], (bytes, bytearray)):
        return _field(1, b"".join(_field(1, bytes(item)) for item in values))  # BytesList
    if array is None:
        is_float = any(isinstance(item, float) for item in values)
        array = np.asarray(values, dtype=np.float32 if is_float else np.int64)
    if array.dtype.kind == "f":
        return _field(2, _field(1, array.astype("<f4").tobytes()))  # FloatList, packed
    if array.dtype.kind in "iub":
        return _field(3, _field(1, _varints(array.ravel())))  # Int64List, packed
    raise TypeError(f"a tf.train.Feature holds int64s, float32s or bytes, not {array.dtype}")


def encode_example(features: Mapping[str, Value]) -> bytes:
    """A ``tf.train.Example`` with one feature per key, in the mapping's order: ints → Int64List,
    floats → FloatList, bytes → BytesList."""
    entries = b"".join(_field(1, _field(1, name.encode()) + _field(2, _encode_feature(values)))
                       for name, values in features.items())  # fmt: skip
    return _field(1, entries)


def encode_examples(columns: Mapping[str, np.ndarray]) -> list[bytes]:
    """Many ``tf.train.Example`` at once, from one (N, L) array per feature (row i → example i): the
    bytes ``encode_example`` gives each row, with the varints of all rows computed together (the
    pre-training data's fixed-length features: ~10x faster than one example at a time).

    >>> columns = {"ids": np.array([[101, 7], [5, 0]]), "weights": np.array([[1.0, 0.0], [1.0, 1.0]])}
    >>> encode_examples(columns)[1] == encode_example({"ids": [5, 0], "weights": [1.0, 1.0]})
    True
    """
    rows = len(next(iter(columns.values())))
    per_feature = []  # for each feature, each row's serialized map entry (name + Feature)
    for name, array in columns.items():
        key = _field(1, name.encode())
        if array.dtype.kind == "f":
            payloads = [row.tobytes() for row in array.astype("<f4")]
            kind = 2  # FloatList
        else:
            data = _varints(array.reshape(-1))
            unsigned = array.astype(np.int64).view(np.uint64)
            sizes = np.ones(array.shape, dtype=np.int64)
            for bits in range(7, 64, 7):
                sizes += unsigned >= np.uint64(1 << bits)
            ends = np.cumsum(sizes.sum(axis=1)).tolist()
            payloads = [data[start:end] for start, end in zip([0, *ends[:-1]], ends)]
            kind = 3  # Int64List
        per_feature.append([_field(1, key + _field(2, _field(kind, _field(1, payload)))) for payload in payloads])
    return [_field(1, b"".join(entries)) for entries in zip(*per_feature)] if per_feature else [b""] * rows


def _fields(data: bytes, where: str) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of a protobuf message (protobuf.py); a problem raises
    TFRecordError naming ``where``."""

    def fail(problem: str) -> TFRecordError:
        return TFRecordError(f"{where}: not a valid tf.train.Example: {problem}")

    return WireReader(data, fail, "the record").fields()


def _decode_varints(payload: bytes, where: str) -> np.ndarray:
    """Packed varints → int64 array, vectorized: a byte under 0x80 ends a number, and each byte
    contributes its low 7 bits shifted by 7 × its place within its number."""
    data = np.frombuffer(payload, dtype=np.uint8)
    if len(data) == 0:
        return np.zeros(0, dtype=np.int64)
    if data[-1] & 0x80:
        raise TFRecordError(f"{where}: not a valid tf.train.Example: a packed number runs past its field")
    ends = np.flatnonzero(data < 0x80)
    starts = np.concatenate([[0], ends[:-1] + 1])
    if int((ends - starts).max()) > 9:
        raise TFRecordError(f"{where}: not a valid tf.train.Example: a number is longer than 10 bytes")
    tenth = data[ends[ends - starts == 9]]  # the 10th byte holds bit 63 alone (protobuf.py's WireReader.varint)
    if (tenth > 1).any():
        raise TFRecordError(f"{where}: not a valid tf.train.Example: a number is larger than 64 bits (its 10th "
                            f"byte is {int(tenth[tenth > 1][0]):#04x}, not 0 or 1)")  # fmt: skip
    place = np.arange(len(data)) - np.repeat(starts, ends - starts + 1)
    parts = (data & 0x7F).astype(np.uint64) << (7 * place).astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts).view(np.int64)


def _decode_feature(payload: bytes, where: str) -> np.ndarray | list[bytes]:
    kinds = [(number, value) for number, _, value in _fields(payload, where)]
    if len(kinds) != 1 or kinds[0][0] not in (1, 2, 3) or not isinstance(kinds[0][1], bytes):
        raise TFRecordError(f"{where}: not a valid tf.train.Example: a feature is not one bytes, float or int64 list")
    kind, body = kinds[0]
    if kind == 1:
        return [value for number, wire, value in _fields(body, where) if number == 1 and wire == 2]
    pieces = []
    for number, wire_type, value in _fields(body, where):
        if number != 1:
            continue
        if kind == 2 and wire_type == 2:
            if len(value) % 4:
                raise TFRecordError(f"{where}: not a valid tf.train.Example: a float list of {len(value)} bytes")
            pieces.append(np.frombuffer(value, dtype="<f4"))
        elif kind == 2 and wire_type == 5:
            pieces.append(np.frombuffer(value, dtype="<f4"))
        elif kind == 3 and wire_type == 2:
            pieces.append(_decode_varints(value, where))
        elif kind == 3 and wire_type == 0:
            pieces.append(np.array([value], dtype=np.uint64).view(np.int64))
        else:
            raise TFRecordError(f"{where}: not a valid tf.train.Example: a list value of wire type {wire_type}")
    dtype = np.float32 if kind == 2 else np.int64
    return np.concatenate(pieces).astype(dtype) if pieces else np.zeros(0, dtype=dtype)


def decode_example(data: bytes, where: str = "record") -> dict[str, np.ndarray | list[bytes]]:
    """A serialized ``tf.train.Example`` → {name: int64 array | float32 array | list of bytes}."""
    features: dict[str, np.ndarray | list[bytes]] = {}
    for number, wire_type, value in _fields(data, where):
        if number != 1 or wire_type != 2:
            continue  # fields an Example does not have: skipped, as protobuf parsers do
        for entry_number, entry_wire, entry in _fields(value, where):
            if entry_number != 1 or entry_wire != 2:
                continue
            name, feature = None, b""
            for part, part_wire, part_value in _fields(entry, where):
                if part == 1 and part_wire == 2:
                    try:
                        name = part_value.decode()
                    except UnicodeDecodeError:
                        raise TFRecordError(
                            f"{where}: not a valid tf.train.Example: a feature name is not UTF-8"
                        ) from None
                elif part == 2 and part_wire == 2:
                    feature = part_value
            if name is None:
                raise TFRecordError(f"{where}: not a valid tf.train.Example: a feature without a name")
            features[name] = _decode_feature(feature, f"{where}, feature {name!r}")
    return features


# --- the record framing ----------------------------------------------------------------------------


def frame_record(data: bytes) -> bytes:
    """One record: length, its masked CRC, the data, its masked CRC."""
    length = struct.pack("<Q", len(data))
    length_crc, data_crc = crc32c_many([length, data])
    return length + struct.pack("<I", mask(int(length_crc))) + data + struct.pack("<I", mask(int(data_crc)))


def frame_records(records: Sequence[bytes]) -> bytes:
    """Many records framed at once (their CRCs computed together: much faster than one by one)."""
    lengths = [struct.pack("<Q", len(data)) for data in records]
    length_crcs, data_crcs = crc32c_many(lengths), crc32c_many(records)
    out = bytearray()
    for length, length_crc, data, data_crc in zip(lengths, length_crcs, records, data_crcs):
        out += length + struct.pack("<I", mask(int(length_crc))) + data + struct.pack("<I", mask(int(data_crc)))
    return bytes(out)


def iter_records(path: str | os.PathLike, check_crc: bool = True) -> Iterator[bytes]:
    """The data of each record of a TFRecord file, in order, each CRC checked (unless told not to).

    Raises ``TFRecordError`` naming the file (a pipe, a device or a directory: not a regular file)
    or the file and the record: a header or data cut short (a truncated file), a length larger than
    what is left of the file (checked before reading it), a CRC that does not match. A batch of
    records (READ_BATCH of them, READ_BATCH_BYTES at most, or one longer record) is checked before
    any of it is yielded: memory stays within a few times the larger of READ_BATCH_BYTES and the
    longest record.
    """
    path = Path(path)
    _refuse_what_is_not_a_file(path)
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        raise TFRecordError(f"TFRecord file {path} does not exist") from None
    except IsADirectoryError:
        raise TFRecordError(f"TFRecord file {path} is a directory") from None
    except OSError as error:
        raise TFRecordError(f"cannot read TFRecord file {path}: {error.strerror}") from None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        index = 0
        while True:
            batch, headers, batch_bytes = [], [], 0
            while len(batch) < READ_BATCH and batch_bytes < READ_BATCH_BYTES:
                header = handle.read(HEADER_BYTES)
                if not header:
                    break
                left = size - handle.tell()
                if len(header) < HEADER_BYTES or struct.unpack_from("<Q", header)[0] + FOOTER_BYTES > left:
                    if check_crc:  # damage in an earlier record of the batch comes first: it may have misframed this
                        _check_crcs(path, index, headers, batch)
                    _refuse_frame(path, index + len(batch), header, left, check_crc)
                (length,) = struct.unpack_from("<Q", header)
                body = handle.read(length + FOOTER_BYTES)
                headers.append(header)
                batch.append(body)
                batch_bytes += len(body)
            if not batch:
                return
            if check_crc:
                _check_crcs(path, index, headers, batch)
            for body in batch:
                yield body[:-FOOTER_BYTES]
            index += len(batch)


def _refuse_what_is_not_a_file(path: Path) -> None:
    """A TFRecordError naming ``path`` when it is there but is not a regular file. Each record's
    length is checked against what is left of the file before a byte is read for it, which needs the
    file's size and position: a pipe (``--data <(cat x.tfrecord)``) has neither ("Illegal seek"), and a
    device (``/dev/urandom``) a made-up size. Only ``stat`` is asked, so a FIFO is never opened
    (opening one waits for a writer). A missing or unreadable file is left to ``open`` to say."""
    try:
        mode = os.stat(path).st_mode  # follows links: a link to /dev/zero is a device
    except OSError:
        return
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in KINDS.items() if test(mode)), f"a special file (mode {oct(mode)})")
        raise TFRecordError(f"TFRecord file {path} is {kind}, not a regular file: a TFRecord file is read from "
                            "disk (its size bounds each record's length); write the records to a file and give "
                            "that")  # fmt: skip


def _refuse_frame(path: Path, record: int, header: bytes, left: int, check_crc: bool) -> None:
    """A header cut short, or a length past the end of the file: truncated, or not a TFRecord at all
    (told apart by the CRC of the length: a genuine header with a long length means a cut file)."""
    where = f"TFRecord file {path}, record {record} (0-based)"
    if len(header) < HEADER_BYTES:
        raise TFRecordError(f"{where}: the file ends inside a record header: it is truncated")
    (length,) = struct.unpack_from("<Q", header)
    genuine = unmask(struct.unpack_from("<I", header, 8)[0]) == int(crc32c_many([header[:8]])[0])
    if not check_crc:
        what = "the file is truncated or corrupt"
    elif genuine:
        what = "the file is truncated"
    else:
        what = "the CRC of its length does not match either: it is not a TFRecord file or is corrupt"
    raise TFRecordError(
        f"{where}: the record claims {length:,} bytes, {max(left - FOOTER_BYTES, 0):,} are left: {what}"
    )


def _check_crcs(path: Path, first: int, headers: list[bytes], bodies: list[bytes]) -> None:
    """The CRCs of a batch of records, in order: of each 8-byte length (all together), of each record's
    data (views of the bodies, not copies; crc32c_many groups them by length)."""
    length_crcs = crc32c_many([header[:8] for header in headers])
    data_crcs = crc32c_many([memoryview(body)[:-FOOTER_BYTES] for body in bodies])
    for offset in range(len(headers)):
        where = f"TFRecord file {path}, record {first + offset} (0-based)"
        (stored_length_crc,) = struct.unpack_from("<I", headers[offset], 8)
        if unmask(stored_length_crc) != int(length_crcs[offset]):
            raise TFRecordError(f"{where}: the CRC of its length does not match: the file is corrupt")
        (stored_data_crc,) = struct.unpack_from("<I", bodies[offset], len(bodies[offset]) - FOOTER_BYTES)
        if unmask(stored_data_crc) != int(data_crcs[offset]):
            raise TFRecordError(f"{where}: the CRC of its data does not match: the file is corrupt")


def read_examples(path: str | os.PathLike) -> Iterator[dict[str, np.ndarray | list[bytes]]]:
    """Each record of a TFRecord file, CRCs checked, parsed as a ``tf.train.Example``."""
    for index, data in enumerate(iter_records(path)):
        yield decode_example(data, f"TFRecord file {path}, record {index} (0-based)")


def write_examples(handle, examples: Iterable[Mapping[str, Value]], batch: int = READ_BATCH) -> int:
    """Write examples as TFRecords to an open binary file (e.g. ``atomic_output``); the count written."""
    count, pending = 0, []
    for example in examples:
        pending.append(encode_example(example))
        if len(pending) == batch:
            handle.write(frame_records(pending))
            count, pending = count + len(pending), []
    if pending:
        handle.write(frame_records(pending))
    return count + len(pending)
