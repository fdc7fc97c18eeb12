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

So the training state holds all three. On resume the backend follows the run's (unless ``--gemm`` or
``$MINIBERT_GEMM`` names one: then that is used, and the difference said), and a thread count or a device that
differs is said: the resumed steps are then right but not bit-identical to the run that was never
stopped (a run from a GPU resumed on a CPU draws its dropout masks from the CPU's generator).
"""

from __future__ import annotations

import warnings

import torch

from ...speed import BACKENDS
from ...speed.gemm import requested_in_environment
from ...speed.packed_linear import use_backend


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
