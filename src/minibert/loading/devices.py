"""Where a model runs: ``device="auto" | "cpu" | "cuda" | "cuda:N"`` (``--device`` on every command that runs one).

A name is checked against the machine before anything is loaded, so that asking for a GPU that is
not there is one line saying what is missing, not torch's ``AssertionError: Torch not compiled with
CUDA enabled`` from deep inside a ``.to()``:

    >>> import torch
    >>> resolve_device("cpu")
    device(type='cpu')
    >>> resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    True
    >>> resolve_device("gpu")
    Traceback (most recent call last):
    ValueError: device 'gpu': expected auto, cpu, cuda or cuda:N (N: the GPU's number, from 0)

``auto`` is CUDA where torch sees a GPU (``cuda``: torch's current GPU, which torchrun sets per
process), else the CPU; the commands then say on stderr which device they use
(``minibert: device cuda:0 (NVIDIA H200)``). ``None`` (the library's default) leaves a model where
it is built: on the CPU, as transformers does. The names' syntax needs no torch (the parser checks
it); what the machine has does.
"""

from __future__ import annotations

import re

from ..errors import DeviceError

DEVICE_NAMES = "auto, cpu, cuda or cuda:N"
NAME = re.compile(r"auto|cpu|cuda(?::(\d+))?")
MAX_DEVICE_INDEX = 127  # torch keeps a device's number in 8 bits: cuda:128 would be cuda:-128, cuda:256 cuda:0


def check_device_name(name: str) -> str:
    """``name`` when it is a device name minibert knows (auto, cpu, cuda, cuda:N), else ValueError:
    the syntax only, for the command line's parser (a usage error). Whether the machine has it is
    ``resolve_device``'s question.

    >>> check_device_name("cuda:1")
    'cuda:1'
    >>> check_device_name("cuda:x")
    Traceback (most recent call last):
    ValueError: device 'cuda:x': expected auto, cpu, cuda or cuda:N (N: the GPU's number, from 0)
    >>> check_device_name("cuda:256")
    Traceback (most recent call last):
    ValueError: device 'cuda:256': expected auto, cpu, cuda or cuda:N (N: the GPU's number, from 0 to 127)
    """
    matched = NAME.fullmatch(name.strip()) if isinstance(name, str) else None
    if matched is None:
        raise ValueError(f"device {name!r}: expected {DEVICE_NAMES} (N: the GPU's number, from 0)")
    if matched.group(1) is not None and int(matched.group(1)) > MAX_DEVICE_INDEX:
        raise ValueError(f"device {name.strip()[:40]!r}: expected {DEVICE_NAMES} (N: the GPU's number, from 0 to "
                         f"{MAX_DEVICE_INDEX})")  # fmt: skip
    return name.strip()


def device_flag(text: str) -> str:
    """``check_device_name`` as an argparse type (every command's --device): a bad name is a usage
    error naming the flag.

    >>> device_flag("gpu")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: device 'gpu': expected auto, cpu, cuda or cuda:N (N: the GPU's number, from 0)
    """
    import argparse

    try:
        return check_device_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def resolve_device(device):
    """The ``torch.device`` that ``device`` names on this machine (None stays None), or
    ``DeviceError`` naming what is missing: a torch built without CUDA, no GPU visible, or fewer
    GPUs than the number asked for. Other kinds of torch device (``"meta"``, ``"mps"``) are
    passed to torch as they are."""
    import torch

    if device is None:
        return None
    if _is_auto(device):
        return _auto()
    if isinstance(device, str):
        if device.strip().split(":")[0] in ("cpu", "cuda"):
            device = check_device_name(device)
        try:
            device = torch.device(device)
        except RuntimeError:  # torch's own lists every backend it was ever built for
            check_device_name(device)
    if not isinstance(device, torch.device):
        raise TypeError(f"device must be a name ({DEVICE_NAMES}) or a torch.device, got {type(device).__name__}")
    if device.type == "cuda":
        _check_cuda(device)
    return device


def placement(device, dtype=None):
    """Where a model loaded with ``device`` and ``dtype`` runs, checked before anything is read: the
    ``torch.device`` (None: where it is built, the CPU), or ``DeviceError`` / ``QuantizationError``.

    int8 runs on the CPU (torch's int8 kernels, FBGEMM's and oneDNN's, have none for a GPU): with
    ``device="auto"`` it goes there, as ``auto`` means "the best place for this model"; a GPU named
    for it is refused. Every loading entry point (the models, ``Embedder``, ``CrossEncoder``, the
    explorer, the commands) asks this first, so a wrong place is said before a file is opened.

    >>> placement("auto", "int8")
    device(type='cpu')
    >>> placement("meta", "int8")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    minibert.errors.QuantizationError: dtype='int8' runs on the CPU (...); asked for meta: load it in float16 or ...
    """
    import torch

    int8 = dtype in ("int8", torch.int8, torch.qint8)
    if int8 and _is_auto(device):
        return torch.device("cpu")
    device = resolve_device(device)
    if int8 and device is not None and device.type != "cpu":
        from ..errors import QuantizationError

        raise QuantizationError(f"dtype='int8' runs on the CPU (torch's int8 kernels, FBGEMM's and oneDNN's, have "
                                f"none for a GPU); asked for {device}: load it in float16 or bfloat16 there "
                                "instead")  # fmt: skip
    return device


def check_model_is_on(model, device) -> None:
    """A loaded model runs where it is: ``device=`` naming another place is a mistake, said
    (minibert never moves your model). None and "auto": wherever it is.

    >>> import torch
    >>> check_model_is_on(torch.nn.Linear(1, 1), "meta")
    Traceback (most recent call last):
    ValueError: device='meta', but the model given is on cpu: move it first (model.to('meta')), or leave device out
    """
    if device is None or _is_auto(device):
        return
    wanted = resolve_device(device)
    where = next(model.parameters()).device
    if wanted.type != where.type or (wanted.index is not None and wanted != where):
        raise ValueError(f"device={str(device)!r}, but the model given is on {where}: move it first "
                         f"(model.to({str(wanted)!r})), or leave device out")  # fmt: skip


def _is_auto(device) -> bool:
    return isinstance(device, str) and device.strip() == "auto"


def _auto():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _check_cuda(device) -> None:
    import torch

    name = str(device)
    if torch.version.cuda is None:
        raise DeviceError(f"device {name!r}: this torch ({torch.__version__}) is built without CUDA; install a CUDA "
                          "build of torch (pytorch.org), or use --device cpu")  # fmt: skip
    count = torch.cuda.device_count()
    if count == 0:
        raise DeviceError(f"device {name!r}: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: no "
                          "NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them; use --device cpu")  # fmt: skip
    if device.index is not None and device.index >= count:
        visible = ", ".join(f"cuda:{index}" for index in range(count))
        raise DeviceError(f"device {name!r}: this machine has {count} GPU{'s' if count > 1 else ''} ({visible})")


def describe(device) -> str:
    """``cuda:0 (NVIDIA H200)``, ``cpu``: the device as the commands name it."""
    import torch

    if device.type == "cuda":
        index = torch.cuda.current_device() if device.index is None else device.index
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return str(device)
