"""formats/protobuf.py reads what Google's protobuf library writes: varints across the 64-bit range
and messages' fields (a FieldDescriptorProto: varints, strings, a nested message), compared with the
library's own encoder and parser; and it refuses what runs past its data, naming the problem."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.internal.encoder import _VarintBytes

from minibert.formats.protobuf import WireReader


def reader(data: bytes) -> WireReader:
    return WireReader(data, ValueError, "the test's bytes")


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16_383, 16_384, 2**31 - 1, 2**32, 2**56 + 5, 2**63, 2**64 - 1])
def test_varints_as_protobuf_writes_them(value):
    data = _VarintBytes(value) + _VarintBytes(7)
    read = reader(data)
    assert (read.varint(), read.varint(), read.at_end()) == (value, 7, True)


def test_a_message_s_fields_as_protobuf_parses_them():
    options = descriptor_pb2.FieldOptions(packed=True, deprecated=True)
    message = descriptor_pb2.FieldDescriptorProto(name="input_ids", number=300, json_name="ids", options=options)
    data = message.SerializeToString()
    fields = list(reader(data).fields())
    expected = {descriptor.number: value for descriptor, value in message.ListFields()}
    assert [number for number, _, _ in fields] == sorted(expected)
    for number, wire_type, value in fields:
        if isinstance(expected[number], str):
            assert (wire_type, value.decode()) == (2, expected[number])
        elif number == 8:  # the nested options message, parsed back by protobuf itself
            assert wire_type == 2 and descriptor_pb2.FieldOptions.FromString(value) == options
        else:
            assert (wire_type, value) == (0, expected[number])


@pytest.mark.parametrize("data, problem", [
    (b"\x85", "a number runs past the end of the test's bytes"),
    (b"\xff" * 10 + b"\x01", "a number is longer than 10 bytes"),
    # the 10th byte holds bit 63 alone: more (protobuf drops it; a crafted record) is refused, not wrapped
    (b"\xff" * 9 + b"\x7f", r"a number is larger than 64 bits \(its 10th byte is 0x7f, not 0 or 1\)"),
    (b"\xff" * 9 + b"\x02", "a number is larger than 64 bits"),
    (b"\x00\x05", "a field has the number 0"),  # (protobuf's parsers: "Wire format was corrupt")
    (b"\x02\x00", "a field has the number 0"),
    (b"\x0a\x05abc", "field 1 claims 5 bytes, 3 are left"),
    (b"\x09\x00\x00", "field 1 claims 8 bytes, 2 are left"),
    (b"\x0b", "field 1 has the unsupported wire type 3"),
])  # fmt: skip
def test_what_runs_past_its_data_is_refused(data, problem):
    with pytest.raises(ValueError, match=problem):
        list(reader(data).fields()) if data[0] != 0xFF else reader(data).varint()
