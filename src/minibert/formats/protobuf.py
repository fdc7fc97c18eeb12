"""Protocol buffers' wire format, read with every length checked: the one reader of varints and
fields that TFRecord Examples (tfrecord.py) and TensorFlow's checkpoint index (loading/tf_checkpoint.py) share.

A protobuf message is a run of fields, each a *tag* then a value. The tag is a varint holding
``field number << 3 | wire type``; the wire type says how the value is stored:

    0  a varint                               (int64, bool, enum)
    1  8 bytes, little-endian                 (fixed64, double)
    2  a varint length, then that many bytes  (bytes, strings, nested messages, packed lists)
    5  4 bytes, little-endian                 (fixed32, float)

(3 and 4, "groups", are obsolete and refused.) A *varint* stores 7 bits per byte, the least
significant first; every byte but the last has its high bit set: 300 = 0b10_0101100 is
``0xAC 0x02``. 64 bits take at most 10 bytes, the 10th holding bit 63 alone (0 or 1). Field
numbers start at 1.

    >>> reader = WireReader(bytes([0x08, 0xAC, 0x02, 0x12, 0x02, 0x68, 0x69]), ValueError)
    >>> list(reader.fields())  # field 1 = 300 (a varint), field 2 = b"hi" (length-delimited)
    [(1, 0, 300), (2, 2, b'hi')]

The data comes from files anyone can write, so nothing is trusted: a number or a field that runs
past the end, a varint longer than 10 bytes or larger than 64 bits (protobuf's parsers drop the
extra bits: a crafted number, refused here rather than read as another), a field number 0, an
unknown wire type raise the exception ``fail``
makes of a sentence (the caller's own type, naming its file and record).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

FIXED_SIZES = {1: 8, 5: 4}  # wire type → bytes of its value


class WireReader:
    """Bounds-checked reading from ``data``: varints, counted bytes, a message's fields.

    ``fail(problem)`` makes the exception raised for a problem ("a number is longer than 10
    bytes"): tfrecord.py's names the record, loading/tf_checkpoint.py's the index file and block.
    ``container`` names what the data is, in "a number runs past the end of the record".
    """

    def __init__(self, data: bytes, fail: Callable[[str], Exception], container: str = "the data"):
        self.data, self.position = data, 0
        self.fail, self.container = fail, container

    def at_end(self) -> bool:
        return self.position >= len(self.data)

    def varint(self) -> int:
        """The unsigned varint at the position (0 … 2⁶⁴ − 1 in at most 10 bytes; longer or larger is refused)."""
        data, position = self.data, self.position
        if position >= len(data):
            raise self.fail(f"a number runs past the end of {self.container}")
        byte = data[position]
        if byte < 0x80:  # one byte: most tags and lengths
            self.position = position + 1
            return byte
        result = shift = 0
        while True:
            if position >= len(data):
                raise self.fail(f"a number runs past the end of {self.container}")
            byte = data[position]
            position += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.position = position
                return result
            shift += 7
            if shift > 63:
                raise self.fail("a number is longer than 10 bytes")
            if shift == 63 and position < len(data) and 1 < data[position] < 0x80:  # a last 10th byte: bit 63 alone
                raise self.fail(f"a number is larger than 64 bits (its 10th byte is {data[position]:#04x}, not 0 or 1)")

    def take(self, count: int) -> bytes:
        """The next ``count`` bytes."""
        if count < 0 or self.position + count > len(self.data):
            raise self.fail(f"{count} bytes wanted at byte {self.position} of {len(self.data)}")
        chunk = self.data[self.position : self.position + count]
        self.position += count
        return chunk

    def fields(self) -> Iterator[tuple[int, int, int | bytes]]:
        """(field number, wire type, value) to the end of the data: an int for a varint, the raw
        bytes for the other wire types (fixed-size values too: the caller knows their type)."""
        while self.position < len(self.data):
            tag = self.varint()
            number, wire_type = tag >> 3, tag & 7
            if number == 0:  # (protobuf's parsers refuse it too: "Wire format was corrupt")
                raise self.fail("a field has the number 0, which no protobuf field has")
            if wire_type == 0:
                yield number, wire_type, self.varint()
                continue
            size = FIXED_SIZES.get(wire_type)
            if size is None and wire_type != 2:
                raise self.fail(f"field {number} has the unsupported wire type {wire_type}")
            if size is None:
                size = self.varint()
            if self.position + size > len(self.data):
                raise self.fail(f"field {number} claims {size} bytes, {len(self.data) - self.position} are left")
            yield number, wire_type, self.data[self.position : self.position + size]
            self.position += size
