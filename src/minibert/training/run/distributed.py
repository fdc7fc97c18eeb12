"""Data parallel, plainly: one process per share of every global batch, gradients summed by an all-reduce.

Under ``torchrun --nproc_per_node N -m minibert pretrain ...`` each process reads RANK and WORLD_SIZE
from its environment and joins the group (gloo, the CPU engine of ``torch.distributed``; on GPUs
NCCL, each process on its own GPU, cuda:LOCAL_RANK). Every
process builds the same model (same seed), takes rows rank·B/N … (rank+1)·B/N − 1 of each global
batch of B, and computes its share of the *global* loss (the denominators are the whole batch's:
tasks/pretraining.py). The gradients of the shares are then summed over the processes — one ``all_reduce`` of
one flat buffer — and every process applies the same update to the same weights. (PyTorch's
DistributedDataParallel would average instead of sum, and overlaps the all-reduce with the
backward pass; for a readable loop the sum written out is clearer.)

Without torchrun (WORLD_SIZE unset or 1) this is a group of one, and every call is a no-op.

A process that dies (killed, out of memory) leaves the others waiting in a collective: gloo then
raises its transport's text ("Connection closed by peer"), which is said as a ProcessGroupError
naming what failed (loop.py adds, on rank 0, the checkpoint on disk and the command that resumes).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ...errors import DeviceError, ProcessGroupError


@dataclass
class World:
    rank: int = 0  # this process: 0 … size − 1; rank 0 writes checkpoints and metrics
    size: int = 1  # processes
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))  # where this process trains

    @classmethod
    def from_environment(cls, device: torch.device | None = None) -> World:
        """This process's place in the group, training on ``device`` (a GPU without a number: this
        process's own, LOCAL_RANK under torchrun, else torch's current one)."""
        device = device or torch.device("cpu")
        if device.type == "cuda":
            on_this_machine = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
            if device.index is not None and on_this_machine > 1:  # (NCCL refuses two ranks on one GPU)
                raise DeviceError(f"--device {device} under torchrun: the {on_this_machine} processes on this machine "
                                  "would all train on that one GPU; give --device cuda (each process takes its own, "
                                  "cuda:LOCAL_RANK)")  # fmt: skip
            if device.index is None:
                device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", torch.cuda.current_device())))
            torch.cuda.set_device(device)
        size = int(os.environ.get("WORLD_SIZE", "1"))
        if size <= 1:
            return cls(device=device)
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
        return cls(dist.get_rank(), dist.get_world_size(), device)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The sum of ``tensor`` over the processes (in place; NCCL sums on the GPU)."""
        if self.size > 1:
            on_device = tensor.to(self.device)
            with self.together("summing over the processes"):
                dist.all_reduce(on_device, op=dist.ReduceOp.SUM)
            tensor.copy_(on_device)
        return tensor

    def sum_gradients(self, parameters: list[torch.nn.Parameter]) -> None:
        """Every process's gradients → their sum, in every process (one flat buffer, one all-reduce)."""
        if self.size == 1:
            return
        gradients = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
        flat = self.sum(torch.cat([g.reshape(-1) for g in gradients]))  # (all parameters,)
        offset = 0
        for parameter, gradient in zip(parameters, gradients):
            parameter.grad = flat[offset : offset + gradient.numel()].view_as(parameter).clone()
            offset += gradient.numel()

    def same_weights(self, model: torch.nn.Module) -> None:
        """Rank 0's weights in every process (they are equal already when built from one seed)."""
        if self.size > 1:
            with torch.no_grad(), self.together("sending rank 0's weights to every process"):
                for tensor in model.state_dict().values():
                    dist.broadcast(tensor, src=0)

    def random_states(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Each process's random-number states, gathered in every process: the CPU generator's, and
        its GPU's (dropout on a GPU draws there; an empty list on the CPU)."""
        states = (torch.get_rng_state(), torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None)
        if self.size == 1:
            gathered = [states]
        else:
            gathered = [None] * self.size
            with self.together("gathering the processes' random states"):
                dist.all_gather_object(gathered, states)
        cpu = [cpu_state for cpu_state, _ in gathered]
        return cpu, [gpu_state for _, gpu_state in gathered if gpu_state is not None]

    def wait(self) -> None:
        if self.size > 1:
            with self.together("waiting for every process"):
                dist.barrier()

    @contextlib.contextmanager
    def together(self, what: str):
        """A collective operation: its failure said as what failed and gloo's (or NCCL's) first
        sentence, not the transport's file and line and advice (ProcessGroupError)."""
        try:
            yield
        except RuntimeError as error:  # (torch's DistBackendError is one)
            said = str(error).split("] ", 1)[-1].split(". ", 1)[0].strip()  # "[.../pair.cc:553] Connection ..."
            raise ProcessGroupError(f"rank {self.rank} of {self.size}: {what} failed: another process of the "
                                    f"torchrun group stopped or cannot be reached ({said})") from error  # fmt: skip

    def close(self) -> None:
        if self.size > 1 and dist.is_initialized():
            dist.destroy_process_group()
