"""Google's TensorFlow checkpoints, read by hand: no TensorFlow needed.

Google released BERT (and BioBERT, the 24 small BERTs, the Chinese and multilingual models were
released the same way) as a zip of ``bert_config.json``, ``vocab.txt`` and a TensorFlow 1
checkpoint: ``bert_model.ckpt.index`` plus ``bert_model.ckpt.data-00000-of-00001``. TensorFlow
calls this format a *tensor bundle*. It fits in a screenful:

**The data shards** (``PREFIX.data-00000-of-00001``, ...) are the tensors' raw bytes, little-endian,
laid end to end. Nothing in them says where a tensor starts: that is what the index is for.

**The index** (``PREFIX.index``) is a sorted string table in LevelDB's format, mapping each
variable name to a small protobuf message saying where its bytes are::

    [data block 0] [data block 1] ... [meta-index block] [index block] [footer: 48 bytes]

* The *footer* is two block handles (the meta-index's and the index's), padded to 40 bytes, then
  the magic number 0xdb4775248b80fb57 as 8 little-endian bytes. A block handle is two varints:
  the block's offset and size in the file.
* Every *block* is followed by a 5-byte trailer: 1 byte compression type (0 = none; TensorFlow
  has written index files uncompressed since 1.2) and a masked CRC32C of the block and that byte.
* A block holds entries, then ``num_restarts`` uint32 restart offsets, then ``num_restarts``
  itself (uint32). Each entry is ``varint shared, varint non_shared, varint value_size,
  key[shared:] (non_shared bytes), value``: the key shares its first ``shared`` bytes with the
  previous key (prefix compression); a restart point is an entry with ``shared = 0``.
* The *index block* maps the last key of each data block to that block's handle; the data blocks
  map variable names to values.

**The values** are protobuf messages (tensorflow/core/protobuf/tensor_bundle.proto). The entry whose
key is the empty string is the ``BundleHeaderProto``: ``num_shards`` (field 1) and ``endianness``
(field 2: 0 little, 1 big). Every other entry is a ``BundleEntryProto``: ``dtype`` (1, TensorFlow's
DataType enum: 1 float32, 2 float64, 3 int32, 9 int64, 14 bfloat16, 19 float16, ...), ``shape``
(2, a TensorShapeProto: repeated ``dim`` (field 2) with a ``size`` (field 1)), ``shard_id`` (3),
``offset`` (4) and ``size`` (5) of its bytes in that shard, ``crc32c`` (6, fixed32: the *masked*
CRC32C of the bytes, ``((crc >> 15 | crc << 17) + 0xa282ead8) mod 2³²``) and ``slices`` (7, for
partitioned variables, which BERT does not use and minibert refuses).

minibert reads the index whole (it is small), then maps the data shards (loading/file_pages.py:
each tensor a view of the file's pages, nothing copied) and uses only the tensors the model needs —
not the optimizer slots (``.../adam_m``, ``.../adam_v``) that pre-training checkpoints carry, which
would triple the memory — and checks every tensor's CRC32C as TensorFlow does, so a flipped byte
does not load (Python has no CRC32C: formats/crc32c.py computes it with numpy, thousands of byte
streams at once). A kernel is stored (in, out); the model's Linear weight is (out, in): its
transpose, laid out afresh by the loader (or packed by oneDNN straight from the view:
speed/packed_linear.py).

>>> entries, num_shards = read_index("uncased_L-12_H-768_A-12/bert_model.ckpt")   # doctest: +SKIP
>>> entries["bert/pooler/dense/kernel"]                                          # doctest: +SKIP
TensorEntry(name='bert/pooler/dense/kernel', dtype=torch.float32, shape=(768, 768), shard=0, offset=..., ...)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import CheckpointError
from ..formats.crc32c import crc32c, unmask
from ..formats.protobuf import FIXED_SIZES, WireReader
from .local_files import not_a_file

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48  # two block handles padded to 40 bytes, then the 8-byte magic number
BLOCK_TRAILER_SIZE = 5  # compression type (1 byte) + masked crc32c (4 bytes)

# TensorFlow's DataType enum (tensorflow/core/framework/types.proto) → torch dtypes minibert reads.
TF_DTYPES = {
    1: torch.float32, 2: torch.float64, 3: torch.int32, 4: torch.uint8, 5: torch.int16, 6: torch.int8,
    9: torch.int64, 10: torch.bool, 14: torch.bfloat16, 19: torch.float16,
}  # fmt: skip
# The rest of the enum, named for messages: a weight stored so is refused by name and dtype, never called missing.
TF_DTYPE_NAMES = {7: "string", 8: "complex64", 11: "qint8", 12: "quint8", 13: "qint32", 15: "qint16",
                  16: "quint16", 17: "uint16", 18: "complex128", 20: "resource", 21: "variant", 22: "uint32",
                  23: "uint64"}  # fmt: skip

# Keys that only TF2's object-based checkpoints (tf.train.Checkpoint, Keras) have.
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


@dataclass(frozen=True)
class TensorEntry:
    """Where one variable's bytes are: a decoded BundleEntryProto."""

    name: str
    dtype: torch.dtype | None  # None: a dtype minibert does not read (tf_dtype says which)
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    crc32c: int | None  # unmasked; None when the entry has none
    tf_dtype: int = 1  # TensorFlow's DataType enum value

    def dtype_name(self) -> str:  # for messages: "float32", or "uint16 (TensorFlow DataType 17)"
        name = TF_DTYPE_NAMES.get(self.tf_dtype, "an unknown dtype")
        return str(self.dtype).removeprefix("torch.") if self.dtype else f"{name} (TensorFlow DataType {self.tf_dtype})"


# ----------------------------------------------------------------------------- the index file


def _reader(data: bytes, path: Path, what: str) -> WireReader:
    """A bounds-checked reader of ``data`` (protobuf.py); a problem raises CheckpointError naming the file."""

    def fail(problem: str) -> CheckpointError:
        return CheckpointError(f"cannot read TensorFlow checkpoint index {path}: {what}: {problem}")

    return WireReader(data, fail, what)


def _read_block(file_bytes: bytes, offset: int, size: int, path: Path, what: str) -> bytes:
    """One block's contents, after checking its bounds, compression type and checksum."""
    if offset < 0 or size < 0 or offset + size + BLOCK_TRAILER_SIZE > len(file_bytes):
        raise CheckpointError(
            f"cannot read TensorFlow checkpoint index {path}: the {what} at bytes [{offset}, {offset + size}) "
            f"lies outside the file ({len(file_bytes)} bytes): it is truncated or corrupt"
        )
    contents = file_bytes[offset : offset + size]
    compression = file_bytes[offset + size]
    stored = int.from_bytes(file_bytes[offset + size + 1 : offset + size + 5], "little")
    if unmask(stored) != crc32c(file_bytes[offset : offset + size + 1]):
        raise CheckpointError(f"TensorFlow checkpoint index {path}: the {what} fails its checksum: it is corrupt")
    if compression != 0:
        raise CheckpointError(
            f"TensorFlow checkpoint index {path}: the {what} is compressed (type {compression}); "
            "minibert reads uncompressed index files, which TensorFlow has written since version 1.2"
        )
    return contents


def _block_entries(block: bytes, path: Path, what: str):
    """(key, value) pairs of one block, undoing the prefix compression of its keys."""
    if len(block) < 4:
        raise CheckpointError(f"cannot read TensorFlow checkpoint index {path}: the {what} is too short")
    num_restarts = int.from_bytes(block[-4:], "little")
    entries_end = len(block) - 4 - 4 * num_restarts
    if entries_end < 0:
        raise CheckpointError(f"cannot read TensorFlow checkpoint index {path}: the {what} has a bad restart count")
    reader = _reader(block[:entries_end], path, what)
    key = b""
    while not reader.at_end():
        shared, non_shared, value_size = reader.varint(), reader.varint(), reader.varint()
        if shared > len(key):
            raise reader.fail("a key shares more bytes than the previous key has")
        key = key[:shared] + reader.take(non_shared)
        yield key, reader.take(value_size)


def _block_handle(reader: WireReader) -> tuple[int, int]:
    return reader.varint(), reader.varint()


def _proto_fields(data: bytes, path: Path, what: str):
    """(field number, value) of a protobuf message: an int for varint and fixed fields, bytes for
    length-delimited ones (the only wire types these messages use)."""
    for number, wire_type, value in _reader(data, path, what).fields():
        yield number, int.from_bytes(value, "little") if wire_type in FIXED_SIZES else value


def _as_signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _typed(value, kind: type, path: Path, what: str, field: str):
    """A protobuf field's value, if it has the wire type its schema gives (a number, or bytes for a
    message): a file that says otherwise is corrupt. Numbers are at most 64 bits."""
    if not isinstance(value, kind) or (kind is int and not 0 <= value < 1 << 64):
        raise CheckpointError(f"TensorFlow checkpoint {path}: {what}: field {field} has the wrong wire type or "
                              "range: the index is corrupt")  # fmt: skip
    return value


def _parse_entry(name: str, value: bytes, path: Path) -> TensorEntry:
    """A BundleEntryProto → TensorEntry (its dtype None for one minibert does not read: strings, ...)."""
    fields = {"dtype": 0, "shard": 0, "offset": 0, "size": 0, "crc32c": None}
    shape: list[int] = []
    what = f"the entry of tensor {name}"
    for number, field in _proto_fields(value, path, what):
        if number == 1:
            fields["dtype"] = _typed(field, int, path, what, "dtype")
        elif number == 2:
            for dim_number, dim in _proto_fields(_typed(field, bytes, path, what, "shape"), path, what):
                if dim_number == 2:  # Dim { int64 size = 1; string name = 2; }
                    sizes = [_as_signed(_typed(v, int, path, what, "shape.dim.size"))
                             for n, v in _proto_fields(_typed(dim, bytes, path, what, "shape.dim"), path, what)
                             if n == 1]  # fmt: skip
                    shape.append(sizes[-1] if sizes else 0)
                elif dim_number == 3 and field:  # unknown_rank
                    raise CheckpointError(f"TensorFlow checkpoint {path}: tensor {name} has an unknown rank")
        elif number in (3, 4, 5):
            key = {3: "shard", 4: "offset", 5: "size"}[number]
            fields[key] = _as_signed(_typed(field, int, path, what, key))
        elif number == 6:
            fields["crc32c"] = unmask(_typed(field, int, path, what, "crc32c") & 0xFFFFFFFF)
        elif number == 7:
            raise CheckpointError(
                f"TensorFlow checkpoint {path}: tensor {name} is partitioned into slices, which minibert does not read"
            )
    dtype = TF_DTYPES.get(fields["dtype"])
    if any(size < 0 for size in shape) or min(fields["shard"], fields["offset"], fields["size"]) < 0:
        raise CheckpointError(f"TensorFlow checkpoint {path}: tensor {name} has a negative size or offset")
    return TensorEntry(name, dtype, tuple(shape), fields["shard"], fields["offset"], fields["size"], fields["crc32c"],
                       fields["dtype"])  # fmt: skip


def _data_block_handles(index_block: bytes, index_offset: int, path: Path):
    """The (offset, size) of each data block the index block lists, checked to follow one another in file
    order and end before the index block, as LevelDB writes them: each is read once (handles that repeat
    or overlap would re-read a block per handle, work growing as the square of the file's size)."""
    end = 0
    for _, handle in _block_entries(index_block, path, "index block"):
        offset, size = _block_handle(_reader(handle, path, "a block handle"))
        if offset < end or offset + size + BLOCK_TRAILER_SIZE > index_offset:
            raise CheckpointError(
                f"cannot read TensorFlow checkpoint index {path}: the index block lists a data block at bytes "
                f"[{offset}, {offset + size}) that repeats or overlaps another, or the index block itself: "
                "the index is corrupt"
            )
        end = offset + size + BLOCK_TRAILER_SIZE
        yield offset, size


def _table_entries(file_bytes: bytes, index_block: bytes, index_offset: int, path: Path):  # in the file's order
    for offset, size in _data_block_handles(index_block, index_offset, path):
        block = _read_block(file_bytes, offset, size, path, f"data block at byte {offset}")
        yield from _block_entries(block, path, f"data block at byte {offset}")


def _ascending(pairs, path: Path):
    """The (key, value) pairs of the data blocks, checked to ascend strictly (a sorted table)."""
    previous = None
    for key, value in pairs:
        if previous is not None and key <= previous:  # (the header's key, "", comes first)
            raise CheckpointError(f"cannot read TensorFlow checkpoint index {path}: the key {key[:80]!r} does not "
                                  "follow the one before it in order: the index is corrupt")  # fmt: skip
        previous = key
        yield key, value


def read_index(prefix: str | os.PathLike) -> tuple[dict[str, TensorEntry], int]:
    """Every tensor entry of the checkpoint ``PREFIX.index`` by variable name (see the module doc),
    and the number of data shards. Entries of types minibert never reads (strings, such as TF2's
    object graph; uint16, complex64) have the dtype None and their ``tf_dtype``.

    Raises ``CheckpointError`` naming the file for a missing, truncated, corrupt or foreign file.
    """
    path = Path(os.fspath(prefix) + ".index")
    kind = not_a_file(path)  # stat only: a FIFO is never opened, a link to /dev/zero never read
    if kind:
        raise CheckpointError(f"TensorFlow checkpoint index {path} is {kind}, not a regular file")
    try:
        file_bytes = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"TensorFlow checkpoint index not found: {path}") from None
    except OSError as error:
        raise CheckpointError(f"cannot read TensorFlow checkpoint index {path}: {error.strerror}") from None
    if len(file_bytes) < FOOTER_SIZE or int.from_bytes(file_bytes[-8:], "little") != TABLE_MAGIC:
        raise CheckpointError(
            f"{path} is not a TensorFlow checkpoint index (no table footer with magic number "
            f"{TABLE_MAGIC:#x}): it is truncated, corrupt or another kind of file"
        )
    footer = _reader(file_bytes[-FOOTER_SIZE:-8], path, "the footer")
    _block_handle(footer)  # the meta-index block: empty in tensor bundles
    index_offset, index_size = _block_handle(footer)
    index_block = _read_block(file_bytes, index_offset, index_size, path, "index block")

    header, entries = None, {}
    for raw_key, value in _ascending(_table_entries(file_bytes, index_block, index_offset, path), path):
        name = raw_key.decode("utf-8", errors="replace")
        if name == "":
            header = dict(_proto_fields(value, path, "the header"))
            continue
        entries[name] = _parse_entry(name, value, path)
    if header is None:
        raise CheckpointError(f"{path} has no bundle header entry: it is not a TensorFlow checkpoint index")
    if header.get(2, 0) != 0:
        raise CheckpointError(f"TensorFlow checkpoint {path} was written big-endian; minibert reads little-endian ones")
    num_shards = header.get(1, 1)
    if not isinstance(num_shards, int) or not 1 <= num_shards <= 100_000 or not isinstance(header.get(2, 0), int):
        raise CheckpointError(f"TensorFlow checkpoint {path}: the header's num_shards {num_shards!r:.40} is not a "
                              "count from 1 to 100,000: the index is corrupt")  # fmt: skip
    for entry in entries.values():
        if entry.shard >= num_shards:
            raise CheckpointError(f"TensorFlow checkpoint {path}: tensor {entry.name} names shard {entry.shard} "
                                  f"of {num_shards}")  # fmt: skip
    return entries, num_shards


# ----------------------------------------------------------------------------- the data shards


def shard_path(prefix: str | os.PathLike, shard: int, num_shards: int) -> Path:
    return Path(f"{os.fspath(prefix)}.data-{shard:05d}-of-{num_shards:05d}")


def read_tf_checkpoint(prefix: str | os.PathLike, wanted=lambda name: True) -> dict[str, torch.Tensor]:
    """The tensors of a TensorFlow checkpoint whose names ``wanted`` accepts, by Google's names
    (``bert/encoder/layer_0/attention/self/query/kernel``), as stored (kernels are (in, out)):
    ``map_tf_checkpoint``'s tensors."""
    return map_tf_checkpoint(prefix, wanted)[0]


def map_tf_checkpoint(prefix: str | os.PathLike, wanted=lambda name: True):
    """``(tensors, pages)``: the tensors ``wanted`` accepts as views of the data shards mapped
    copy-on-write (file_pages.py: nothing is copied, and the loader gives each tensor's pages back
    once it has used them), and each shard's ``FilePages``. Every entry is checked against the real
    size of its shard file first (memory never follows a size the index merely claims), and each
    tensor's CRC32C is verified."""
    prefix = Path(prefix)
    entries, num_shards = read_index(prefix)
    index_path = Path(os.fspath(prefix) + ".index")
    if OBJECT_GRAPH_KEY in entries or any(".ATTRIBUTES/" in name for name in entries):
        raise CheckpointError(
            f"{index_path} is a TensorFlow 2 object-based checkpoint (tf.train.Checkpoint / Keras), with names like "
            "'.../.ATTRIBUTES/VARIABLE_VALUE'; minibert reads the name-based TF1 checkpoints Google released BERT in"
        )
    chosen = [entry for name, entry in entries.items() if wanted(name)]
    _refuse_unread_dtypes(chosen, index_path)
    chosen = [entry for entry in chosen if entry.dtype is not None]
    _check_byte_ranges(chosen, prefix, num_shards)
    return _map_tensors(chosen, prefix, num_shards)


def _refuse_unread_dtypes(chosen: list[TensorEntry], index_path: Path) -> None:
    """A tensor the model computes from (a name of the rename table) stored in a dtype minibert does not read
    (uint16, complex64, a quantized type): refused by name and dtype, never dropped, then called missing."""
    from .names import checkpoint_to_minibert

    unread = [entry for entry in chosen if entry.dtype is None and checkpoint_to_minibert(entry.name) is not None]
    if unread:
        listed = ", ".join(f"{entry.name} is stored as {entry.dtype_name()}" for entry in unread[:5])
        raise CheckpointError(f"TensorFlow checkpoint {index_path}: {listed}, which minibert does not read (a "
                              "weight is read from float32, float16, bfloat16 or float64)")  # fmt: skip


def _check_byte_ranges(chosen: list[TensorEntry], prefix: Path, num_shards: int) -> None:
    """Each entry's bytes fit its dtype and shape and lie inside its shard file (its real size, on
    disk), and no two entries share a byte: memory then follows the files' size, never the index's claims."""
    shard_sizes = {}
    for entry in chosen:
        if entry.shard not in shard_sizes:
            data_path = shard_path(prefix, entry.shard, num_shards)
            kind = not_a_file(data_path)  # stat only: a FIFO is not opened, nor its size of 0 believed
            if kind:
                raise CheckpointError(f"TensorFlow checkpoint data file {data_path} is {kind}, not a regular file")
            try:
                shard_sizes[entry.shard] = data_path.stat().st_size
            except FileNotFoundError:
                raise CheckpointError(f"TensorFlow checkpoint data file not found: {data_path}") from None
        item_size = torch.empty((), dtype=entry.dtype).element_size()
        count = math.prod(entry.shape)  # exact: a product that overflows 64 bits does not wrap to 0
        if entry.size != count * item_size or entry.offset + entry.size > shard_sizes[entry.shard]:
            raise CheckpointError(
                f"TensorFlow checkpoint {shard_path(prefix, entry.shard, num_shards)}: tensor {entry.name} "
                f"{str(entry.dtype).removeprefix('torch.')}{list(entry.shape)} does not fit its byte range "
                f"[{entry.offset}, {entry.offset + entry.size}) of a {shard_sizes[entry.shard]}-byte file: "
                "it is truncated or corrupt"
            )

    # Each byte of a shard belongs to one tensor at most: entries that overlap (or repeat) would
    # make memory follow the entry count instead of the files' size.
    previous = None
    for entry in sorted((e for e in chosen if e.size), key=lambda e: (e.shard, e.offset)):
        if previous is not None and previous.shard == entry.shard and entry.offset < previous.offset + previous.size:
            raise CheckpointError(
                f"TensorFlow checkpoint {shard_path(prefix, entry.shard, num_shards)}: tensors {previous.name} and "
                f"{entry.name} overlap from byte {entry.offset}: the index is corrupt"
            )  # fmt: skip
        previous = entry


def _map_tensors(chosen: list[TensorEntry], prefix: Path, num_shards: int):
    """The checked entries as views of their shards, mapped (one ``FilePages`` a shard), every
    CRC32C verified on the mapped bytes (a tensor's pages are read, then given back: the file is
    never resident whole)."""
    from .file_pages import FilePages

    shards, tensors = {}, {}
    for entry in sorted(chosen, key=lambda entry: (entry.shard, entry.offset)):  # file order
        if entry.size == 0:
            tensors[entry.name] = torch.empty(entry.shape, dtype=entry.dtype)
            continue
        if entry.shard not in shards:
            shards[entry.shard] = FilePages(shard_path(prefix, entry.shard, num_shards))
        pages = shards[entry.shard]
        if entry.crc32c is not None:
            with memoryview(pages.map) as whole:
                stored = whole[entry.offset : entry.offset + entry.size]
                matches = crc32c(stored) == entry.crc32c
                stored.release()
            if not matches:
                raise CheckpointError(
                    f"TensorFlow checkpoint {pages.path}: tensor {entry.name} fails its CRC32C checksum: "
                    "the file is corrupt — download it again"
                )
        tensors[entry.name] = pages.tensor(entry.dtype, list(entry.shape), entry.offset, entry.size)
        pages.release(tensors[entry.name])  # checked: its pages given back before the next is read
    return {entry.name: tensors[entry.name] for entry in chosen}, list(shards.values())
