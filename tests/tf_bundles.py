"""TensorFlow tensor bundles (checkpoints) written byte by byte, without TensorFlow: a table
(prefix-compressed data block, index block, footer, each block with its masked CRC32C) and a data
shard. The hostile tests write broken entries with it; ``write_checkpoint`` writes a whole model
under Google's names, as Google's release zips hold it (loading/tf_checkpoint.py reads the format)."""

from __future__ import annotations

from pathlib import Path

import torch

from minibert.formats.crc32c import crc32c, mask

FLOAT, INT32 = 1, 3  # TensorFlow's DataType numbers


def varint(value: int) -> bytes:
    value = value % (1 << 64) if value < 0 else value  # a negative int64, as protobuf writes it
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, value) -> bytes:
    """A protobuf field: an int as a varint (wire type 0), bytes length-delimited (2); ("fixed32", n)
    as wire type 5."""
    if isinstance(value, tuple):
        return varint(number << 3 | 5) + value[1].to_bytes(4, "little")
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def entry(dtype=FLOAT, shape=(4,), offset=0, size=16, shard=0, **wrong) -> bytes:
    """A BundleEntryProto; ``wrong`` replaces a field's encoded value (name → raw value)."""
    dims = shape if isinstance(shape, int) else b"".join(field(2, field(1, dim)) for dim in shape)
    values = {"dtype": dtype, "shape": dims, "shard": shard, "offset": offset, "size": size}
    values.update(wrong)
    numbers = {"dtype": 1, "shape": 2, "shard": 3, "offset": 4, "size": 5, "crc32c": 6}
    return b"".join(field(numbers[name], value) for name, value in values.items())


def block(items: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(varint(0) + varint(len(key)) + varint(len(value)) + key + value for key, value in items)
    return body + (0).to_bytes(4, "little") + (1).to_bytes(4, "little")  # one restart, at 0


def table(items: list[tuple[bytes, bytes]]) -> bytes:
    def with_trailer(contents: bytes) -> bytes:
        return contents + b"\x00" + mask(crc32c(contents + b"\x00")).to_bytes(4, "little")

    data = block(sorted(items))
    index = block([(b"\xff", varint(0) + varint(len(data)))])
    index_offset = len(data) + 5
    footer = (varint(0) + varint(0) + varint(index_offset) + varint(len(index))).ljust(40, b"\x00")
    return with_trailer(data) + with_trailer(index) + footer + (0xDB4775248B80FB57).to_bytes(8, "little")


def bundle(tmp_path: Path, entries: dict[str, bytes], header: bytes | None = None, data: bytes = bytes(64)) -> Path:
    prefix = tmp_path / "model.ckpt"
    items = [(b"", field(1, 1) if header is None else header)] + [(k.encode(), v) for k, v in entries.items()]
    Path(f"{prefix}.index").write_bytes(table(items))
    Path(f"{prefix}.data-00000-of-00001").write_bytes(data)
    return prefix


def write_checkpoint(prefix: Path, tensors: dict[str, torch.Tensor]) -> Path:
    """``tensors`` (float32, by Google's names: kernels (in, out)) as PREFIX.index and one data
    shard, laid end to end in name order, each entry with its masked CRC32C, as TensorFlow writes them."""
    data, entries = bytearray(), []
    for name in sorted(tensors):
        raw = tensors[name].detach().to(torch.float32).contiguous().numpy().tobytes()
        entries.append((name.encode(), entry(shape=tuple(tensors[name].shape), offset=len(data), size=len(raw),
                                             crc32c=("fixed32", mask(crc32c(raw))))))  # fmt: skip
        data += raw
    Path(f"{prefix}.index").write_bytes(table([(b"", field(1, 1))] + entries))
    Path(f"{prefix}.data-00000-of-00001").write_bytes(bytes(data))
    return prefix
