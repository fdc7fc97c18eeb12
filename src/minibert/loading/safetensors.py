"""The safetensors format, read by hand and checked before a byte of data is trusted.

A .safetensors file is 8 bytes (little-endian header length N), N bytes of JSON
``{name: {"dtype": "F32", "shape": [...], "data_offsets": [start, end]}, "__metadata__": {...}}``,
then the raw data, tensor after tensor. ``safetensors_shapes`` reads the header alone (enough to
check a file against a model); ``read_safetensors`` reads each tensor into its own memory;
``map_safetensors`` maps the file instead, each tensor a view of its pages (file_pages.py: what
``from_pretrained`` uses, so that a loaded model holds each weight once).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from ..errors import CheckpointError
from ..formats.json_files import parse_json
from .hub_failures import damaged_copy_remedy

# safetensors dtype codes → torch dtypes
_SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}  # fmt: skip
# Dtypes of the format that no BERT weight of minibert is computed from, those transformers 5 reads
# (modeling_utils.str_to_torch_dtype): read, range-checked by their item size, so that a tensor the
# model does not use is ignored with the other unexpected ones, as transformers ignores it; one where
# a weight goes is refused by name (strict.py). Any other dtype (C64, F8_E8M0, F4: transformers says
# "unknown dtype") is refused naming it.
_SAFETENSORS_DTYPES.update({code: getattr(torch, name) for code, name in {
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "U16": "uint16", "U32": "uint32", "U64": "uint64",
}.items() if hasattr(torch, name)})  # fmt: skip
_INT64_LIMIT = 2**63  # torch's sizes, strides and byte counts are int64


def _corrupt(path: Path, problem: str) -> CheckpointError:
    """The error for a damaged weights file, with the remedy that replaces it where it is (a hub
    cache's copy is downloaded again: hub_failures.py)."""
    return CheckpointError(f"cannot read weights file {path}: {problem}; it is truncated or corrupt — "
                           f"{damaged_copy_remedy(path)}")  # fmt: skip


def _read_safetensors_header(handle, path: Path) -> tuple[dict, int]:
    """Read and check a safetensors header from an open file; return it and the data size after it."""
    file_size = os.fstat(handle.fileno()).st_size
    prefix = handle.read(8)
    if len(prefix) < 8:
        raise _corrupt(path, "shorter than the 8-byte header length")
    header_size = int.from_bytes(prefix, "little")
    if header_size > file_size - 8 or header_size > 100_000_000:
        raise _corrupt(path, f"header length {header_size} exceeds the file size {file_size}")
    try:
        header = parse_json(handle.read(header_size))
    except ValueError as error:
        raise _corrupt(path, f"malformed header ({error})") from None
    if not isinstance(header, dict):
        raise _corrupt(path, "the header is not a JSON object")
    return header, file_size - 8 - header_size


def _safetensors_entries(header: dict, data_size: int, path: Path) -> list[tuple[str, torch.dtype, list, int, int]]:
    """Each tensor's (name, dtype, shape, start, end), checked against the data's real size before
    a byte of it is read: every range fits its dtype and shape, and the ranges tile the data exactly
    (no overlap, no gap, no trailing bytes), as the safetensors library requires."""
    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or not all(key in info for key in ("dtype", "shape", "data_offsets")):
            raise _corrupt(path, f"tensor {name} has an unreadable entry {str(info)[:120]}")
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if isinstance(code, str) and code not in _SAFETENSORS_DTYPES and code.isascii() and len(code) <= 16:
            raise CheckpointError(f"cannot read weights file {path}: tensor {name} has dtype {code}, which minibert "
                                  "does not read")
        if not _counts(shape) or not _counts(offsets) or len(offsets) != 2 or not isinstance(code, str) \
                or code not in _SAFETENSORS_DTYPES:  # fmt: skip
            raise _corrupt(path, f"tensor {name} has an unreadable entry {str(info)[:120]} (shapes and offsets are "
                                 "lists of whole numbers from 0 to 2**63 - 1)")  # fmt: skip
        dtype, (start, end) = _SAFETENSORS_DTYPES[code], offsets
        item_size = dtype.itemsize
        if math.prod(max(size, 1) for size in shape) * item_size >= _INT64_LIMIT:  # a 0 would hide the others
            raise _corrupt(path, f"tensor {name} {code}{str(shape)[:120]}: its dimensions multiply past 2**63, more "
                                 "than torch can count")  # fmt: skip
        if (
            not 0 <= start <= end <= data_size
            or (end - start != math.prod(shape) * item_size)
        ):
            raise _corrupt(path, f"tensor {name} {code}{str(shape)[:120]} does not fit its byte range [{start}, {end}) "
                                 f"of {data_size} data bytes")  # fmt: skip
        entries.append((name, dtype, shape, start, end))
    covered = 0
    for name, _, _, start, end in sorted(entries, key=lambda entry: (entry[3], entry[4])):
        if start != covered:
            problem = "overlaps the tensor before it" if start < covered else f"leaves a gap at byte {covered}"
            raise _corrupt(path, f"tensor {name} [{start}, {end}) {problem}")
        covered = end
    if covered != data_size:
        raise _corrupt(path, f"{data_size - covered} trailing bytes after the last tensor (byte {covered})")
    return entries


def _counts(values) -> bool:
    """Whether ``values`` is a list of whole numbers from 0 below 2⁶³, as a shape or a byte range is
    (not 62.9, "62" or true, which a lenient int() would take).

    >>> _counts([30522, 384]), _counts([62.9]), _counts(["62"]), _counts([True]), _counts([2**70])
    (True, False, False, False, False)
    """
    return isinstance(values, list) and all(type(value) is int and 0 <= value < _INT64_LIMIT for value in values)


def safetensors_shapes(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The tensors a .safetensors file declares, as shapes without data ('meta' tensors), from its
    header alone: enough to check a file against a model before reading it."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            header, data_size = _read_safetensors_header(handle, path)
    except FileNotFoundError:
        raise CheckpointError(f"weights file not found: {path}") from None
    except PermissionError as error:
        raise CheckpointError(f"cannot read weights file {path}: {error.strerror}") from None
    entries = _safetensors_entries(header, data_size, path)
    return {name: torch.empty(shape, dtype=dtype, device="meta") for name, dtype, shape, _, _ in entries}


def read_safetensors(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Read a .safetensors file into tensors, each in its own memory: no second copy of the weights.

    The format is simple: 8 bytes (little-endian header length N), N bytes of JSON
    ``{name: {"dtype": "F32", "shape": [...], "data_offsets": [start, end]}}``, then the raw data.
    Every offset and size is checked before the data is read, so a truncated or corrupt file is a
    ``CheckpointError`` that names the file (and the tensor), never a crash; the memory taken is
    what the checked header declares, read from the file (a short read is an error).

    Each tensor is read straight into its own buffer (the ranges tile the data: one sequential
    read), not sliced out of one buffer of the whole file: a tensor the model later drops (the
    float32 weights an int8 model replaces, docs/int8.md) gives its memory back.
    """
    path = Path(path)

    try:
        with path.open("rb") as handle:
            header, data_size = _read_safetensors_header(handle, path)
            entries = _safetensors_entries(header, data_size, path)
            tensors = {}
            for name, dtype, shape, start, end in sorted(entries, key=lambda entry: entry[3]):  # file order
                tensor = torch.empty((end - start) // dtype.itemsize, dtype=dtype)
                if end > start and handle.readinto(memoryview(tensor.view(torch.uint8).numpy())) != end - start:
                    raise _corrupt(path, f"the file ended early (in tensor {name})")
                tensors[name] = tensor.reshape(shape)
    except FileNotFoundError:
        raise CheckpointError(f"weights file not found: {path}") from None
    except PermissionError as error:
        raise CheckpointError(f"cannot read weights file {path}: {error.strerror}") from None
    return {name: tensors[name] for name, *_ in entries}  # the header's order


def map_safetensors(path: str | os.PathLike):
    """The tensors of a .safetensors file as views of the file mapped copy-on-write (no copy made:
    file_pages.py), checked as ``read_safetensors`` checks them; returns ``(tensors, pages)``, the
    ``FilePages`` that can give pages back while the model is loaded."""
    from .file_pages import FilePages

    path = Path(path)
    try:
        with path.open("rb") as handle:
            header, data_size = _read_safetensors_header(handle, path)
            first_data_byte = handle.tell()
    except FileNotFoundError:
        raise CheckpointError(f"weights file not found: {path}") from None
    except PermissionError as error:
        raise CheckpointError(f"cannot read weights file {path}: {error.strerror}") from None
    entries = _safetensors_entries(header, data_size, path)
    if data_size == 0:  # nothing to map (mmap refuses an empty range)
        return {name: torch.empty(shape, dtype=dtype) for name, dtype, shape, _, _ in entries}, None
    pages = FilePages(path)
    if len(pages.map) != first_data_byte + data_size:
        raise _corrupt(path, "its size changed while it was read")
    tensors = {name: pages.tensor(dtype, shape, first_data_byte + start, end - start)
               for name, dtype, shape, start, end in entries}  # fmt: skip
    return tensors, pages
