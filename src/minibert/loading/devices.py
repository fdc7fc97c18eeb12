"""Where a model runs: ``device="auto" | "cpu" | "cuda" | "cuda:N"`` (``--device`` on every command that runs one).

A name is checked against the machine before anything is loaded, so that asking for a GPU that is
not there is one line saying what is missing, not torch's ``AssertionError: Torch not compiled with
CUDA enabled`` from deep inside a ``.to()``:

    >>> import torch
    >>> resolve_device("cpu")
    device(type='cpu')
    >>> resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    True
    >>> resolve_device("gpu")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: device 'gpu': expected auto, cpu, cuda or cuda:N (N: the GPU's number, from 0), or another kind ...

``auto`` is CUDA where torch sees a GPU (``cuda``: torch's current GPU, which torchrun sets per
process), else the CPU; the commands then say on stderr which device they use
(``minibert: device cuda:0 (NVIDIA H200)``). ``None`` (the library's default) leaves a model where
it is built: on the CPU, as transformers does. The names' syntax needs no torch (the parser checks
it); what the machine has does.

The CPU is one device: ``"cpu:0"`` and ``torch.device("cpu", 0)``, torch's names for it with a
number, are ``cpu`` everywhere. In Python a number is a device as torch reads one, ``N`` the GPU
``cuda:N``, and ``-1`` the CPU, as in transformers' ``pipeline(device=-1)``: one rule for
``device=`` on every entry point, and ``device_map=`` where it is taken (``as_torch_device``). A message names a
device as it was given (``device 0 (cuda:0): this torch ... is built without CUDA``).

Python takes torch's other kinds of device too (``"mps"``, ``"xpu"``, ``"hpu"``), checked the same
way before a file is read (``DeviceError``: ``this torch (2.13.0+cpu) sees no XPU device``), and
``"meta"``, which holds a model's shapes and no numbers: ``from_pretrained`` builds a model there
to inspect, while what computes (the tasks, the Embedder, a CrossEncoder, the explorer) refuses
it before loading. A missing device's advice is worded for the caller: ``use --device cpu`` on the
command line, ``use device='cpu'`` in Python.
"""

from __future__ import annotations

import re

from ..errors import DeviceError

DEVICE_NAMES = "auto, cpu, cuda or cuda:N"
NAME = re.compile(r"auto|cpu(?::0)?|cuda(?::(0|[1-9][0-9]*))?")  # N as torch reads it: 0-9, no leading zero;
# cpu:0 is the CPU (torch's name for it with a number: the CPU is one device)
OTHER_KINDS = ", or another kind of device torch has (mps, xpu, meta, ...)"  # in Python only: torch.device's
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
    >>> check_device_name("cuda:01")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: device 'cuda:01': expected ... (N: the GPU's number, from 0, without a leading zero: cuda:1)
    """
    matched = NAME.fullmatch(name.strip()) if isinstance(name, str) else None
    if matched is None or (matched.group(1) is not None and int(matched.group(1)) > MAX_DEVICE_INDEX):
        raise ValueError(refusal(name))
    return name.strip()


def refusal(name, others: str = "") -> str:
    """Why ``name`` is not a device name minibert knows, with the rule for N that it breaks;
    ``others``: what else is accepted where the message is read (Python takes torch's other kinds).

    >>> refusal("cuda:١")   # an Arabic-Indic one: a digit to Python, not to torch
    "device 'cuda:١': expected auto, cpu, cuda or cuda:N (N: the GPU's number, from 0, in the digits 0-9)"
    """
    rule = "from 0"
    kind, _, number = name.strip()[:40].partition(":") if isinstance(name, str) else ("", "", "")
    if kind == "cpu" and number:
        return f"device {name.strip()[:40]!r}: the CPU is one device: cpu (or cpu:0)"
    if number.isdigit() and not number.isascii():
        rule = "from 0, in the digits 0-9"
    elif number.isdigit() and len(number) > 1 and number.startswith("0"):
        rule = f"from 0, without a leading zero: {kind}:{int(number)}"
    elif number.isdigit() and int(number) > MAX_DEVICE_INDEX:
        rule = f"from 0 to {MAX_DEVICE_INDEX}"
    shown = name.strip()[:40] if isinstance(name, str) else name
    return f"device {shown!r}: expected {DEVICE_NAMES} (N: the GPU's number, {rule}){others}"


def device_name(device) -> str:
    """``device`` as the name the command line's ``--device`` would give, checked as the parser checks
    it (``check_device_name``), without importing torch: the options of a run, which the parser
    reads too, take what every Python entry point takes. A number is a device as ``as_torch_device``
    reads one (``N``: ``cuda:N``; ``-1``: the CPU), and a ``torch.device`` its name; ValueError
    saying the rule broken, as the parser says it.

    >>> device_name(-1), device_name(1), device_name(" cuda ")
    ('cpu', 'cuda:1', 'cuda')
    >>> device_name("cuda:256")
    Traceback (most recent call last):
    ValueError: device 'cuda:256': expected auto, cpu, cuda or cuda:N (N: the GPU's number, from 0 to 127)
    """
    import sys

    torch = sys.modules.get("torch")  # a torch.device given: torch is imported already
    if isinstance(device, int) and not isinstance(device, bool):
        device = _number_name(device)
    elif torch is not None and isinstance(device, torch.device):
        device = str(device)
    name = check_device_name(device)
    return "cpu" if name == "cpu:0" else name


def _number_name(number: int) -> str:
    """The device a number means, as torch reads one (``N``: the GPU ``cuda:N``, 0 to 127) with
    transformers' pipelines' ``-1`` for the CPU: "cpu" or "cuda:N"; ValueError for any other number.
    The one reading of a device number (``device_name``, ``as_torch_device``)."""
    if number == -1:  # transformers' pipeline(device=-1)
        return "cpu"
    if not 0 <= number <= MAX_DEVICE_INDEX:
        raise ValueError(f"device={number}: expected a GPU's number from 0 to {MAX_DEVICE_INDEX} (cuda:N), "
                         "or -1 for the CPU")  # fmt: skip
    return f"cuda:{number}"


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


def resolve_device(device, flags: bool = False):
    """The ``torch.device`` that ``device`` (a name, a ``torch.device``, a number: ``as_torch_device``)
    means on this machine (None stays None), or ``DeviceError`` naming what is missing: a torch
    built without CUDA, no GPU visible, or fewer GPUs than the number asked for. Torch's other
    kinds of device (``"mps"``, ``"xpu"``, ``"hpu"``) are asked for in Python only, and checked the
    same way: the device must be there (``"meta"``, which holds shapes and no numbers, always is).
    A name torch does not read (``"cuda:01"``) is a ValueError saying what is expected. ``flags``:
    the advice names ``--device`` (the commands), else ``device=`` (Python).

    >>> resolve_device("cuda:01")  # torch refuses it too (N is written as torch writes it)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: device 'cuda:01': expected ... (N: the GPU's number, from 0, without a leading zero: cuda:1)
    """
    if device is None:
        return None
    if is_auto(device):
        return _auto()
    written = as_written(device)
    device = as_torch_device(device)
    if device.type == "cuda":
        _check_cuda(device, flags, written)
    elif device.type not in ("cpu", "meta"):
        _check_other_accelerator(device, flags, written)
    return device


def as_torch_device(device):
    """The ``torch.device`` that ``device`` (not None or "auto": ``resolve_device`` settles those)
    means, in one spelling, without asking the machine: a name (torch's other kinds too, in Python),
    a ``torch.device``, or a number, as torch reads one (``N``: the GPU ``cuda:N``) with transformers'
    pipelines' ``-1`` for the CPU, so ``device=-1`` and ``device_map=-1`` both mean the CPU, wherever
    each is taken. The CPU is one device: ``"cpu:0"`` and ``torch.device("cpu", 0)`` are ``cpu``.

    >>> as_torch_device(-1), as_torch_device(1), as_torch_device("cpu:0")
    (device(type='cpu'), device(type='cuda', index=1), device(type='cpu'))
    >>> as_torch_device(-2)
    Traceback (most recent call last):
    ValueError: device=-2: expected a GPU's number from 0 to 127 (cuda:N), or -1 for the CPU
    """
    import torch

    if isinstance(device, int) and not isinstance(device, bool):
        return torch.device(_number_name(device))
    if isinstance(device, str):
        name = device.strip()
        if name.partition(":")[0] in ("cpu", "cuda"):
            name = check_device_name(name)  # minibert's own rule, said precisely
        try:
            device = torch.device(name)
        except RuntimeError:  # torch's own message lists every backend it was ever built for
            raise ValueError(refusal(name, OTHER_KINDS)) from None
    if not isinstance(device, torch.device):
        raise TypeError(f"device must be a name ({DEVICE_NAMES}), a torch.device or a GPU's number (-1: the CPU), "
                        f"got {type(device).__name__}")  # fmt: skip
    if device.type == "cpu" and device.index:  # torch.device("cpu", 1): as "cpu:1", not a name of the CPU
        raise ValueError(refusal(str(device)))
    return torch.device("cpu") if device.type == "cpu" else device


def as_written(device) -> str:
    """How a message names ``device``: as the caller wrote it (``'cuda:1'``), and a number with the
    device it means (``0 (cuda:0)``), never a spelling the caller did not write.

    >>> as_written(" cuda "), as_written(0)
    ("'cuda'", '0 (cuda:0)')
    """
    if isinstance(device, int) and not isinstance(device, bool):
        return f"{device} (cuda:{device})" if device >= 0 else str(device)
    return repr(device.strip() if isinstance(device, str) else str(device))


def placement(device, dtype=None, *, flags: bool = False, computes: str | None = None):
    """Where a model loaded with ``device`` and ``dtype`` runs, checked before anything is read: the
    ``torch.device`` (None: where it is built, the CPU), or ``DeviceError`` / ``QuantizationError``.
    ``flags``: as ``resolve_device``; ``computes``: what will compute with the model (``"classify"``),
    which the meta device cannot do (``check_computes_on``). ``from_pretrained`` computes nothing: a
    model on meta is its shapes, to look at.

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
    if int8 and is_auto(device):
        return torch.device("cpu")
    device = resolve_device(device, flags)
    if computes is not None:
        check_computes_on(device, computes)
    if int8 and device is not None and device.type != "cpu":
        from ..errors import QuantizationError

        raise QuantizationError(f"dtype='int8' runs on the CPU (torch's int8 kernels, FBGEMM's and oneDNN's, have "
                                f"none for a GPU); asked for {device}: load it in float16 or bfloat16 there "
                                "instead")  # fmt: skip
    return device


def check_computes_on(device, what: str) -> None:
    """DeviceError when ``device`` is the meta device: it holds a model's shapes, not its numbers, so
    ``what`` (a task, the Embedder, the explorer) cannot run there. Said before a model is read.

    >>> import torch
    >>> check_computes_on(torch.device("meta"), "classify")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    minibert.errors.DeviceError: device 'meta' holds a model's shapes, not its numbers: classify cannot run there; ...
    """
    if device is not None and device.type == "meta":
        raise DeviceError(f"device 'meta' holds a model's shapes, not its numbers: {what} cannot run there; "
                          "use 'cpu' or 'cuda' (from_pretrained(device='meta') builds one to inspect)")  # fmt: skip


def check_model_is_on(model, device, what: str) -> None:
    """A loaded model runs where it is: ``device=`` naming another place is a mistake, said
    (minibert never moves your model). None and "auto": wherever it is. ``what`` runs the model,
    so neither the device named nor the model may be on meta (``check_computes_on``).

    >>> import torch
    >>> check_model_is_on(torch.nn.Linear(1, 1), "meta", "classify")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    minibert.errors.DeviceError: ...
    """
    where = next(model.parameters()).device
    if where.type == "meta":  # (said first: "move it to the CPU" is no advice for weights that hold no numbers)
        check_computes_on(where, what)
    if device is not None and not is_auto(device):
        wanted = resolve_device(device)
        check_computes_on(wanted, what)
        if wanted.type != where.type or (wanted.index is not None and wanted != where):
            spelled = device.strip() if isinstance(device, str) else device if isinstance(device, int) else str(wanted)
            target = str(wanted) if spelled == -1 else spelled  # (model.to(-1) is refused: -1 is the CPU here)
            raise ValueError(f"device={spelled!r}, but the model given is on {where}: move it first "
                             f"(model.to({target!r})), or leave device out")  # fmt: skip
    check_computes_on(where, what)


def is_auto(device) -> bool:
    """Whether ``device`` is "auto": CUDA where there is one, else the CPU."""
    return isinstance(device, str) and device.strip() == "auto"


def _auto():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def use_the_cpu(flags: bool) -> str:
    """The advice that ends a missing GPU's message, as the caller asks for a device.

    >>> use_the_cpu(flags=True), use_the_cpu(flags=False)
    ('use --device cpu', "use device='cpu'")
    """
    return "use --device cpu" if flags else "use device='cpu'"


def _check_cuda(device, flags: bool, written: str) -> None:
    import torch

    if torch.version.cuda is None:
        raise DeviceError(f"device {written}: this torch ({torch.__version__}) is built without CUDA; install a CUDA "
                          f"build of torch (pytorch.org), or {use_the_cpu(flags)}")  # fmt: skip
    count = torch.cuda.device_count()
    if count == 0:
        raise DeviceError(f"device {written}: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: no "
                          f"NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them; {use_the_cpu(flags)}")  # fmt: skip
    _check_index(device, count, "GPU", written)


def _check_other_accelerator(device, flags: bool, written: str) -> None:
    """mps, xpu, hpu, ...: there when torch's module for it says so (``torch.xpu.is_available()``),
    or when it is torch's current accelerator (a plugin's, such as Intel Gaudi's hpu)."""
    import torch

    kind = device.type
    count = _devices_of_kind(kind)
    if count is None:  # a kind only a plugin knows (torch_xla's xla, ...): there if torch can make a tensor there
        try:
            torch.empty(0, device=device)
            return
        except Exception:  # noqa: BLE001 - torch's RuntimeError, or an ImportError of torch.<kind>: no backend
            raise DeviceError(f"device {written}: this torch ({torch.__version__}) sees no {kind.upper()} "
                              f"device (no backend for it is loaded: torch cannot make a tensor there); "
                              f"{use_the_cpu(flags)}") from None  # fmt: skip
    if count == 0:
        if kind == "mps":
            why = "no Apple GPU here, or macOS before 12.3" if torch.backends.mps.is_built() else "built without it"
        else:
            why = "no such device on this machine, or this torch is built without it"
        raise DeviceError(f"device {written}: this torch ({torch.__version__}) sees no {kind.upper()} device "
                          f"({why}); {use_the_cpu(flags)}")  # fmt: skip
    _check_index(device, count, f"{kind.upper()} device", written)


def _devices_of_kind(kind: str) -> int | None:
    """How many devices of ``kind`` torch can run on here (0: none, or no backend for it; None: torch
    has no way to count them, a kind that only a plugin such as torch_xla knows)."""
    import torch

    if kind == "mps":  # Apple's one GPU
        return int(torch.backends.mps.is_available())
    module = getattr(torch, kind, None)
    if hasattr(module, "is_available") and hasattr(module, "device_count"):
        return module.device_count() if module.is_available() else 0
    accelerator = getattr(torch, "accelerator", None)  # (torch 2.6+)
    if accelerator is not None and accelerator.is_available() and accelerator.current_accelerator().type == kind:
        return accelerator.device_count()
    return None


def _check_index(device, count: int, what: str, written: str) -> None:
    """``device``'s number among the ``count`` devices of its kind (none given: the current one)."""
    if device.index is not None and not 0 <= device.index < count:
        visible = ", ".join(f"{device.type}:{index}" for index in range(count))
        raise DeviceError(f"device {written}: this machine has {count} {what}{'s' if count > 1 else ''} "
                          f"({visible})")  # fmt: skip


def describe(device) -> str:
    """``cuda:0 (NVIDIA H200)``, ``cpu``: the device as the commands name it."""
    import torch

    if device.type == "cuda":
        index = torch.cuda.current_device() if device.index is None else device.index
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return str(device)
