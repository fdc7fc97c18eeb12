"""What the kernel says of this process's pages: how much of a mapped file is resident
(/proc/self/smaps), which of a tensor's pages are mapped (/proc/self/pagemap), and which torch
operations a forward pass hands a given weight (``WeightReads``). The loading tests read these
instead of inferring residency (tests/test_loading_file_pages.py, tests/test_loading_tf_mapped.py)."""

from __future__ import annotations

import os
from pathlib import Path

import torch


def resident_kb(path: Path) -> int:
    """The resident kilobytes of this process's mappings of ``path`` (smaps' Rss lines)."""
    total, inside = 0, False
    target = os.fspath(Path(path).resolve())
    with open("/proc/self/smaps", encoding="utf-8") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line: address perms offset dev inode [path]
                inside = len(fields) >= 6 and fields[5] == target
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total


def present_pages(tensor: torch.Tensor) -> int:
    """How many of ``tensor``'s pages this process has mapped in now (/proc/self/pagemap: bit 63 of
    each virtual page's entry says "present")."""
    page = os.sysconf("SC_PAGE_SIZE")
    first = tensor.data_ptr() // page
    last = (tensor.data_ptr() + tensor.numel() * tensor.element_size() - 1) // page
    with open("/proc/self/pagemap", "rb") as pagemap:
        pagemap.seek(first * 8)
        entries = pagemap.read((last - first + 1) * 8)
    return sum(entries[i + 7] >> 7 for i in range(0, len(entries), 8))


def assert_forward_reads_no_packed_weight(model, packed: list) -> None:
    """A forward pass multiplies the packed layout and hands no torch operation a packed projection's
    float32 weight (``WeightReads`` watches every call). Its pages may still be mapped in again: the
    kernel maps pages around each page read (fault-around: 16 pages, or a whole large folio on a
    kernel that caches files in large folios), so a bias read beside a weight can map some of it,
    without the weight being read; the count is printed, not asserted."""
    ids = torch.tensor([[101, 7592, 2088, 102]])
    weights = [module.weight for module in packed]
    with WeightReads(weights) as reads, torch.inference_mode():
        model(input_ids=ids)
    assert reads.operations == [], reads.operations
    feed_forward = [weight for weight in weights if weight.numel() == 128 * 512]
    present = [present_pages(weight) for weight in feed_forward]
    print(f"after a forward pass: no operation read a packed weight; feed-forward weights' pages mapped "
          f"{present} of 64 each")  # fmt: skip


class WeightReads(torch.overrides.TorchFunctionMode):
    """The torch operations called with one of ``weights`` (by storage) as an argument, besides
    asking it for its metadata (address, version, dtype, shape)."""

    METADATA = {"data_ptr", "__get__", "_version", "is_inference", "is_contiguous", "dim", "size"}

    def __init__(self, weights: list[torch.Tensor]):
        super().__init__()
        self.addresses = {weight.untyped_storage().data_ptr() for weight in weights}
        self.operations: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if name not in self.METADATA and any(self._watched(value) for value in [*args, *kwargs.values()]):
            self.operations.append(name)
        return func(*args, **kwargs)

    def _watched(self, value) -> bool:
        return (isinstance(value, torch.Tensor) and value.layout == torch.strided and not value.is_mkldnn
                and value.device.type == "cpu" and value.untyped_storage().data_ptr() in self.addresses)  # fmt: skip
