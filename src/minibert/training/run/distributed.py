"""Data parallel, plainly: one process per share of every global batch, gradients summed by an all-reduce.

Under ``torchrun --nproc_per_node N -m minibert pretrain ...`` each process reads RANK and WORLD_SIZE
from its environment and joins the group (gloo, the CPU engine of ``torch.distributed``). Every
process builds the same model (same seed), takes rows rank·B/N … (rank+1)·B/N − 1 of each global
batch of B, and computes its share of the *global* loss (the denominators are the whole batch's:
tasks/pretraining.py). The gradients of the shares are then summed over the processes — one ``all_reduce`` of
one flat buffer — and every process applies the same update to the same weights. (PyTorch's
DistributedDataParallel would average instead of sum, and overlaps the all-reduce with the
backward pass; for a readable loop the sum written out is clearer.)

Without torchrun (WORLD_SIZE unset or 1) this is a group of one, and every call is a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class World:
    rank: int = 0  # this process: 0 … size − 1; rank 0 writes checkpoints and metrics
    size: int = 1  # processes

    @classmethod
    def from_environment(cls) -> World:
        size = int(os.environ.get("WORLD_SIZE", "1"))
        if size <= 1:
            return cls()
        if not dist.is_initialized():
            dist.init_process_group(backend="gloo")
        return cls(dist.get_rank(), dist.get_world_size())

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The sum of ``tensor`` over the processes (in place)."""
        if self.size > 1:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
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
            with torch.no_grad():
                for tensor in model.state_dict().values():
                    dist.broadcast(tensor, src=0)

    def random_states(self) -> list[torch.Tensor]:
        """Each process's CPU random-number state (dropout), gathered in every process."""
        state = torch.get_rng_state()
        if self.size == 1:
            return [state]
        states = [torch.empty_like(state) for _ in range(self.size)]
        dist.all_gather(states, state)
        return states

    def wait(self) -> None:
        if self.size > 1:
            dist.barrier()

    def close(self) -> None:
        if self.size > 1 and dist.is_initialized():
            dist.destroy_process_group()
