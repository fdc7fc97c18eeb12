"""How a training step is computed, recorded in the training state so a resumed run computes the same way.

A resumed run repeats an uninterrupted one bit for bit only if every sum is added up in the same
order. Two things of the process, not of the run's settings, decide that order:

- **torch's thread count.** A reduction (a bias gradient summed over the batch, LayerNorm's mean) is
  split into one partial sum per thread; 1 thread and 2 threads round differently (about 1e-7 after
  a few steps of the tiny model).
- **the GEMM backend** of the encoder's linear layers (gemm.py: MKL, oneDNN, oneDNN with the fused
  activation). ``auto`` picks it by a measurement on this machine, which a new cache can repeat with
  another verdict.

- **the device.** A GPU adds up in its own order (and, without ``--deterministic``, in an order
  that may change from run to run), and draws dropout from its own generator.
  ``--deterministic`` (``deterministic_algorithms``) fixes the order on a GPU.

So the training state holds all three. On resume the backend follows the run's (unless ``--gemm`` or
``$MINIBERT_GEMM`` names one: then that is used, and the difference said), and a thread count or a device that
differs is said: the resumed steps are then right but not bit-identical to the run that was never
stopped (a run from a GPU resumed on a CPU draws its dropout masks from the CPU's generator).
"""

from __future__ import annotations

import contextlib
import os
import warnings

import torch

from ...errors import DeviceError
from ...speed import BACKENDS
from ...speed.gemm import requested_in_environment
from ...speed.packed_linear import use_backend

CUBLAS_WORKSPACE = ":4096:8"  # cuBLAS's fixed workspace: its products add up in one order (NVIDIA's docs)
CUBLAS_IN_ONE_ORDER = (CUBLAS_WORKSPACE, ":16:8")  # the two settings torch takes as deterministic
NO_DETERMINISTIC_KERNEL = " does not have a deterministic implementation"  # torch's words, in strict mode


@contextlib.contextmanager
def deterministic_algorithms(device: torch.device, asked: bool):
    """``--deterministic`` on a GPU, for the run: torch's deterministic algorithms, strictly, and
    the process's setting put back afterwards (nothing on a CPU, which sums in one order anyway).

    Strictly, not ``warn_only=True``: in warn-only mode torch's flash and memory-efficient
    attention keep their fast backward, which splits the keys among thread blocks and adds the
    queries' gradients with atomic adds, in an order that changes from run to run once a sequence
    is longer than one block (64 to 128 tokens) — a resumed run would not repeat a never-stopped
    one. In strict mode they add up in one order, and an operation torch has no deterministic
    kernel for stops the run with a ``DeviceError`` naming it, instead of computing it in an order
    that may change while the run says it repeats.

    cuBLAS adds up in one order only with ``CUBLAS_WORKSPACE_CONFIG`` set to ``:4096:8`` or
    ``:16:8``, and torch reads it once, at the process's first product on the GPU: set here before
    the run's first product (a command's process has run none); another value is refused at once;
    in a process that already computed on the GPU before it was set, torch refuses every product,
    and the run stops with a ``DeviceError`` saying so (the process is warned first)."""
    if not asked or device.type != "cuda":
        yield
        return
    value = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if value is None:
        if torch.cuda.is_initialized():
            warnings.warn(f"--deterministic: this process used the GPU before CUBLAS_WORKSPACE_CONFIG was set; torch "
                          "reads it at the process's first GPU product, and if one has run, every product of the run "
                          f"is refused: set CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE} before the process's first GPU "
                          "product", stacklevel=3)  # fmt: skip
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    elif value not in CUBLAS_IN_ONE_ORDER:
        raise DeviceError(f"--deterministic: CUBLAS_WORKSPACE_CONFIG is {value!r}; cuBLAS adds up in one order only "
                          f"with {' or '.join(CUBLAS_IN_ONE_ORDER)} (NVIDIA's cuBLAS docs): set one of them, or unset "
                          "it (minibert sets :4096:8)")  # fmt: skip
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    except RuntimeError as error:
        stopped = _what_stopped(error, device)
        if stopped is None:
            raise
        raise stopped from error
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def _what_stopped(error: RuntimeError, device: torch.device) -> DeviceError | None:
    """Torch's refusals under strict deterministic algorithms as minibert's one line; None for any
    other error (raised as it is)."""
    message = str(error)
    operation, refused, _ = message.partition(NO_DETERMINISTIC_KERNEL)
    if refused:
        return DeviceError(f"--deterministic: {operation.strip()} has no deterministic kernel in this torch "
                           f"({torch.__version__}) on {device}; run without --deterministic (then a resumed run is "
                           "right but not bit-identical to a never-stopped one)")  # fmt: skip
    if "CUBLAS_WORKSPACE_CONFIG" in message:
        return DeviceError("--deterministic: cuBLAS started in this process before CUBLAS_WORKSPACE_CONFIG was set "
                           "(torch reads it at the first GPU product), so torch refuses its products: set "
                           f"CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE} before the process's first GPU product, or "
                           "run without --deterministic")  # fmt: skip
    return None


def arithmetic_of(model) -> dict:
    """This process's way of computing ``model``'s step: {"threads": n, "gemm": backend, "device": type}."""
    model = getattr(model, "module", model)  # under DistributedDataParallel
    device = next(model.parameters()).device.type
    return {"threads": torch.get_num_threads(), "gemm": getattr(model, "gemm_backend", "mkl"), "device": device}


def follow_the_run(model, saved: dict, *, say: bool = True, gemm: str | None = None) -> None:
    """Compute the resumed steps as the run computed its first ones: its GEMM backend (unless
    ``gemm``, the command's --gemm, or else ``$MINIBERT_GEMM`` asks for another), and a warning for
    what cannot follow (the threads, a backend that was asked for). A state written before this was
    recorded (``saved`` empty) is taken as it is."""
    model = getattr(model, "module", model)
    if not saved:
        return
    now, differences = arithmetic_of(model), []
    backend = saved.get("gemm")
    asker = "--gemm" if gemm is not None else "MINIBERT_GEMM"
    requested = gemm.strip().lower() if gemm is not None else requested_in_environment()
    if backend in BACKENDS and backend != now["gemm"]:
        if requested == "auto":
            use_backend(model, backend)
        else:
            differences.append(f"with the {backend} GEMMs ({asker} asks for {now['gemm']})")
    if saved.get("device", "cpu") != now["device"]:
        differences.append(f"on {saved.get('device', 'cpu')} (this process runs on {now['device']}: its own order of "
                           "sums, and its own generator for dropout)")  # fmt: skip
    elif now["device"] == "cpu" and isinstance(saved.get("threads"), int) and saved["threads"] != now["threads"]:
        differences.append(f"with {saved['threads']} torch threads (this process has {now['threads']})")
    if differences and say:
        warnings.warn(f"the run was computed {' and '.join(differences)}: the resumed steps round differently "
                      "from a run that was never stopped (right, but not bit-identical)", stacklevel=3)  # fmt: skip
