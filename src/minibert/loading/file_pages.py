"""A weights file mapped into memory: tensors that are the file's pages, and pages given back.

``from_pretrained`` does not copy a .safetensors file into memory. It maps the file (copy-on-write:
``mmap.ACCESS_COPY``, so a change made to a weight later, by fine-tuning say, stays in this
process and never reaches the file) and each tensor is a view of its bytes (``torch.frombuffer``).
A page the model reads comes in from the file (from the page cache, when it was read lately), and
a page it no longer needs can be given back (``madvise(MADV_DONTNEED)``): the process stops
holding it, and should the tensor be read again the page comes back from the file, unchanged.

That is how a loaded model holds each weight once (docs/performance.md, "Memory"):

* the six projections of each encoder layer, when the GEMM backend packs them into oneDNN's
  layout (speed/packed_linear.py), are multiplied in that layout: their float32 pages are given back
  as soon as each is packed, and come back only if something reads the weight itself (saving,
  ``state_dict``, training, the book's modules);
* the embedding tables are read a row per token: given back after loading, only the rows a text
  uses come back;
* every page is given back once the loader has checked it (finite numbers), so loading never holds
  the whole file at once beside what it builds from it (the packed layout, int8's layers).

Only pages nothing has written to are given back, and only while the model is being loaded (a
written page of a private mapping would lose its change): ``release`` is called by the loader, never
later. The file must not be written over in place while a model loaded from it lives — minibert
writes every file by replacing it (formats/atomic_files.py), which leaves a mapped file as it was;
``FileUnchanged`` notices an in-place write (its size or time changed) before the model reads the
pages, and refuses: before each forward pass (a hook), and before each of the other reads of every
weight (``ChecksItsFile``: state dicts and so saving, moves and casts, copies; and the book's
modules, a weight laid out afresh, which call the checks below).

A ``pytorch_model.bin`` is mapped the same way by torch itself (``torch.load(mmap=True)``, also
copy-on-write): ``TorchMappedPages`` finds that mapping in the kernel's list of this process's
mappings (/proc/self/maps) and gives its pages back by the same rule. Where there is no such list
(not Linux) or no ``madvise``, nothing is given back: the weights stay mapped, and nothing changes
but the memory held.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import weakref
from itertools import chain
from pathlib import Path

import torch

from ..errors import CheckpointError

PAGE = mmap.PAGESIZE


class MappedPages:
    """The pages of one weights file mapped copy-on-write at ``[start, end)`` in this process:
    ``release`` gives a tensor's pages back, ``still_read_by`` tells whether a tensor lies in them."""

    def __init__(self, path: Path, signature: tuple[int, int, int, int], start: int, end: int):
        self.path, self.signature, self.start, self.end = path, signature, start, end

    def byte_range(self, tensor: torch.Tensor) -> tuple[int, int] | None:
        """Where ``tensor``'s storage lies in the mapping, as (first byte, end), or None outside it
        (None too for a tensor with no memory of its own: the fake tensors ``torch.export`` and
        ``torch.compile`` trace with, the wrappers of ``torch.func``'s transforms)."""
        while torch._C._functorch.is_functorch_wrapped_tensor(tensor):  # torch.func.grad's: the tensor it wraps
            tensor = torch._C._functorch.get_unwrapped(tensor)
        if tensor.device.type != "cpu" or tensor.layout != torch.strided:
            return None
        try:
            storage = tensor.untyped_storage()
            begin = storage.data_ptr() - self.start
        except (RuntimeError, NotImplementedError):  # "Cannot access data pointer/storage of" a traced tensor
            return None
        end = begin + storage.nbytes()
        return (begin, end) if 0 <= begin and end <= self.end - self.start else None

    def still_read_by(self, tensor: torch.Tensor) -> bool:
        return self.byte_range(tensor) is not None

    def release(self, tensor: torch.Tensor) -> None:
        """Give back the whole pages of ``tensor``'s storage, if it lies in this mapping (else nothing).
        The loader calls it on tensors nothing has written to yet; reading them later brings the pages
        back from the file."""
        where = self.byte_range(tensor)
        if where is None:
            return
        first, last = -(-where[0] // PAGE) * PAGE, where[1] // PAGE * PAGE  # whole pages: a neighbour's edge stays
        if last > first:
            _dont_need(self.start + first, last - first)

    def release_all(self, tensors) -> None:
        for tensor in tensors:
            self.release(tensor)


class FilePages(MappedPages):
    """A .safetensors file, mapped here copy-on-write; ``tensor`` views its bytes."""

    def __init__(self, path: str | os.PathLike):
        path = Path(path)
        try:
            descriptor = os.open(path, os.O_RDONLY)
        except (PermissionError, IsADirectoryError) as error:  # (not found: the caller's to say)
            raise CheckpointError(f"cannot read weights file {path}: {error.strerror}") from None
        try:
            signature = _signature(os.fstat(descriptor))
            self.map = mmap.mmap(descriptor, 0, access=mmap.ACCESS_COPY)
        finally:
            os.close(descriptor)  # the mapping keeps the file open
        probe = torch.frombuffer(self.map, dtype=torch.uint8, count=1)
        start = probe.data_ptr()  # the mapping's first address
        del probe
        super().__init__(path, signature, start, start + len(self.map))

    def tensor(self, dtype: torch.dtype, shape: list[int], offset: int, nbytes: int) -> torch.Tensor:
        """The ``nbytes`` at file offset ``offset`` as a tensor of ``dtype`` and ``shape`` (no copy;
        an empty or misaligned tensor is copied out instead: a kernel may assume alignment)."""
        if nbytes == 0 or offset % dtype.itemsize:
            raw = torch.frombuffer(self.map, dtype=torch.uint8, count=nbytes, offset=offset) if nbytes else None
            copied = torch.empty(nbytes // dtype.itemsize, dtype=dtype)
            if raw is not None:
                copied.view(torch.uint8).copy_(raw)
            return copied.reshape(shape)
        return torch.frombuffer(self.map, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset).reshape(shape)


def torch_mapped_pages(path: Path, tensors) -> MappedPages | None:
    """The mapping ``torch.load(path, mmap=True)`` made, found in /proc/self/maps as the private
    mapping of ``path``'s inode that holds the first tensor; None where it cannot be found (not
    Linux, a file read whole, no tensors) or must not be given back: a file saved in the other byte
    order, which torch swapped in place (a write: given back, the pages would revert to the file's
    bytes)."""
    tensors = [tensor for tensor in tensors if tensor.device.type == "cpu" and tensor.numel()]
    if not tensors or not hasattr(mmap, "MADV_DONTNEED") or _swapped_by_torch(path):
        return None
    try:
        signature = _signature(os.stat(path))
        with open("/proc/self/maps", "rb") as maps:  # bytes: another mapping's path may not be UTF-8
            lines = maps.read().splitlines()
    except OSError:
        return None
    address = tensors[0].untyped_storage().data_ptr()
    for line in lines:  # "start-end perms offset major:minor inode path"
        fields = line.split(maxsplit=5)
        start, end = (int(part, 16) for part in fields[0].split(b"-"))
        if start <= address < end:
            private_from_the_first_byte = fields[1].endswith(b"p") and int(fields[2], 16) == 0
            if len(fields) == 6 and int(fields[4]) == signature[0] and private_from_the_first_byte:
                return MappedPages(path, signature, start, end)
            return None  # the tensor lies in other memory (the file was read whole)
    return None


def _swapped_by_torch(path: Path) -> bool:
    """Whether torch.load byte-swaps this file's storages (its ``byteorder`` record, or torch's
    default for a file without one, is not this machine's)."""
    import sys
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            records = [name for name in archive.namelist() if name.endswith("/byteorder") or name == "byteorder"]
            stored = archive.read(records[0]).decode("ascii", "replace").strip() if records else None
    except (OSError, zipfile.BadZipFile, KeyError):
        return True  # not what torch.load(mmap=True) maps: keep every page
    if stored is None:
        default = torch.serialization.get_default_load_endianness()
        stored = None if default is None else ("little" if default == torch.serialization.LoadEndianness.LITTLE
                                               else "big")  # fmt: skip
    return stored is not None and stored != sys.byteorder


def _dont_need(address: int, length: int) -> None:
    """madvise(MADV_DONTNEED): the pages of a private file mapping are dropped, and read back from
    the file when touched again (Windows has no madvise: the pages stay)."""
    if _LIBC is not None and hasattr(mmap, "MADV_DONTNEED"):
        _LIBC.madvise(ctypes.c_void_p(address), ctypes.c_size_t(length), ctypes.c_int(mmap.MADV_DONTNEED))


def _libc():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


class FileUnchanged:
    """A forward pre-hook that runs ``refuse_if_written_over`` while the model still reads the
    mapping: while any tensor of the models it watches still lies in it (a model cast, moved to a
    GPU, or copied holds its own tensors; a new embedding table leaves the projections that still
    read the file). It holds weak references only, and to the models, not to their tensors (torch's
    ``swap_tensors``, which ``set_swap_module_params_on_conversion`` makes ``.to()`` use, refuses a
    tensor something holds a weak reference to): no model and no mapping is kept alive by it, and
    the list of live checks (``_WATCHES``, which ``refuse_if_read_from_written_over`` reads) forgets
    it with the model."""

    def __init__(self, pages: MappedPages, models):
        self.pages = MappedPages(pages.path, pages.signature, pages.start, pages.end)
        self.mapping = weakref.ref(pages.map) if isinstance(pages, FilePages) else None  # torch's: no handle
        self.models: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet(models)  # the loaded one, each BertModel in it
        self.found: tuple[weakref.ref, str] | None = None  # (module, its tensor's name) that lay in the file
        _WATCHES.add(self)

    def __call__(self, module, args) -> None:
        if _dynamo_traces():  # strict torch.export, torch.compile: the graph checks no file when it runs
            return
        if self.still_read():
            refuse_if_written_over(self.pages.path, self.pages.signature)

    def still_read(self) -> bool:
        """Whether the file is mapped still and a tensor of a model it watches lies in it (the
        first one, nearly always): a live tensor there also keeps torch's mapping of a .bin mapped.
        Each of the models is looked at (the one loaded, and each BertModel inside, which may
        outlive it): a tensor that lay in the file and was replaced since no longer counts. The
        module and name of the tensor found are kept (weakly) and looked at first next time: one
        look before each forward pass (~6 µs for all-MiniLM here), not a walk of the model."""
        if self.mapping is not None and self.mapping() is None:
            return False  # unmapped: nothing reads the file
        if self.found is not None:  # where one was found last time: one look, before each forward pass
            module, name = self.found[0](), self.found[1]
            if module is not None and _reads(self.pages, getattr(module, name, None)):
                return True
        for model in list(self.models):
            for module in model.modules():
                for name, tensor in chain(module._parameters.items(), module._buffers.items()):
                    if _reads(self.pages, tensor):
                        self.found = weakref.ref(module), name
                        return True
        return False

    def __reduce__(self):  # a pickled or copied model holds copies of the tensors: nothing to check
        return _NoCheck, ()


# True only in code dynamo traces, never when it runs (torch 2.3+; before, dynamo traced the check: a graph break)
_dynamo_traces = getattr(torch.compiler, "is_dynamo_compiling", None) or (lambda: False)


def _reads(pages: MappedPages, tensor) -> bool:
    return isinstance(tensor, torch.Tensor) and pages.still_read_by(tensor)


class _NoCheck:
    """What ``FileUnchanged`` becomes in a pickled or copied model: a hook that checks nothing."""

    def __call__(self, module, args) -> None:
        return None


_WATCHES: weakref.WeakSet[FileUnchanged] = weakref.WeakSet()  # the checks of the models alive


def refuse_if_model_file_written_over(model: torch.nn.Module) -> None:
    """``CheckpointError`` when a file ``model``'s weights are still read from was written over in
    place: its ``FileUnchanged`` checks (on each BertModel inside, put there by the loader) run
    now, as before a forward pass. What reads every weight outside a forward pass calls it first
    (``ChecksItsFile``; ``use_book_modules``, ``save_pretrained``, ``resize_token_embeddings``). A
    model built by hand, or copied, has no check: nothing happens. One stat per file mapped."""
    for module in model.modules():
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, FileUnchanged):
                hook(module, ())


def refuse_if_read_from_written_over(tensor: torch.Tensor) -> None:
    """The same for one tensor, where a layer reads its own weight outside a forward pass of the
    model (packed_linear.py, laying a weight out afresh or packing it): ``CheckpointError`` when it
    lies in a file mapping a loaded model still reads and that file was written over in place."""
    for watch in list(_WATCHES):
        if watch.pages.still_read_by(tensor) and watch.still_read():
            refuse_if_written_over(watch.pages.path, watch.pages.signature)


class ChecksItsFile(torch.nn.Module):
    """``PretrainedBert``'s base: the nn.Module methods that read (or write) every weight run
    ``refuse_if_model_file_written_over`` first, so that a model whose mapped file was written
    over in place refuses them as it refuses its forward pass, before a page is touched (a page
    that comes back from a file cut short ends the process: SIGBUS)."""

    def state_dict(self, *args, **kwargs):  # and so save_pretrained, torch.save(model.state_dict())
        refuse_if_model_file_written_over(self)
        return super().state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):  # a write to a page given back reads it from the file first
        refuse_if_model_file_written_over(self)
        return super().load_state_dict(*args, **kwargs)

    def _apply(self, fn, *args, **kwargs):  # .to(), .float(), .half(), .cuda(), share_memory()
        refuse_if_model_file_written_over(self)
        return super()._apply(fn, *args, **kwargs)

    def __getstate__(self):  # copy.deepcopy, pickle, torch.save(model)
        refuse_if_model_file_written_over(self)
        return super().__getstate__()


def refuse_if_written_over(path: Path, signature: tuple[int, int, int, int]) -> None:
    """CheckpointError when ``path`` is still the mapped file (its inode) but its size or time changed:
    the pages given back would come back with other numbers (or end the process, if it was cut short).
    A file replaced by rename, or removed, leaves the mapping reading the old file, unchanged."""
    try:
        now = _signature(os.stat(path))
    except OSError:
        return
    if now[:2] == signature[:2] and now != signature:  # the same file (inode, device), other bytes
        raise CheckpointError(f"{path} was written over while a model loaded from it was in use (the model reads "
                              "the file's pages as it needs them): load the model again")  # fmt: skip


def _signature(stat: os.stat_result) -> tuple[int, int, int, int]:
    return stat.st_ino, stat.st_dev, stat.st_size, stat.st_mtime_ns
