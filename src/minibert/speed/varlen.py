"""Attention on packed tokens with no padding anywhere: a GPU's variable-length kernels.

A reader learning BERT can skip this file. fast_path.py packs a batch's real tokens end to end,
(P, H), and for attention lays them out again as (B, T, H) with padding: a scatter of Q, K and V
and a gather of the context in every layer, forward and backward. On a GPU a training step is
mostly the launching of small operations, and those are about a tenth of them. torch's flash and
memory-efficient kernels read the packed tokens as they are, told where each sequence starts (the
cumulative lengths, flash-attention's ``cu_seqlens``):

    lengths [3, 5, 2]  →  starts [0, 3, 8, 10]      tokens 0-2 attend to 0-2, 3-7 to 3-7, 8-9 to 8-9

Exact, as packing is: each token's softmax(q·Kᵀ/√S)·V runs over its own sequence's keys, which is
what the padded batch computes (a padded key adds exactly nothing). Dropout on the attention
weights is the kernels' own (from the GPU's generator, as the padded kernels' is).

``ON_GPU``: off until a device has measured it (issue 52 asks for a lent GPU; this was written and
tested on a CPU, against ``reference_kernel``). ``MINIBERT_VARLEN=1`` turns it on. It never runs
under ``torch.use_deterministic_algorithms`` (``--deterministic``): the padded kernels' bit-for-bit
resume is the one measured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F

ON_GPU = os.environ.get("MINIBERT_VARLEN", "") == "1"
HEAD_SIZES = range(8, 129, 8)  # what both kernels take on every GPU they run on (BERT's: 64)


@dataclass(frozen=True)
class Sequences:
    """Where each sequence of a packed batch starts in (P,), and the longest one."""

    starts: torch.Tensor  # (B + 1,) int32: 0, then the running total of the lengths
    longest: int

    @classmethod
    def of(cls, lengths: torch.Tensor) -> Sequences:
        """lengths (B,) → starts (B + 1,) [0, l0, l0 + l1, ...]."""
        starts = F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
        return cls(starts, int(lengths.max()))


def real_lengths(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B,) int64: each row's count of real tokens, whatever the mask's dtype (bool, int, or float
    0./1. as transformers takes it): they become indices (starts, groups), which must be integers."""
    return attention_mask.bool().sum(1)


def applies(device: torch.device) -> bool:
    """Whether a packed batch attends by sequence here: on a CUDA GPU, when turned on, deterministic
    algorithms off."""
    return device.type == "cuda" and ON_GPU and not torch.are_deterministic_algorithms_enabled()


def takes(q: torch.Tensor, head_size: int) -> bool:
    """Whether the kernels take these heads: a head size of 8 to 128 in steps of 8, float32, float16
    or bfloat16 (float64 is not theirs), and bfloat16 only on Ampere and later."""
    if head_size not in HEAD_SIZES or q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return False
    return not (q.is_cuda and q.dtype == torch.bfloat16) or torch.cuda.get_device_capability(q.device) >= (8, 0)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sequences: Sequences, heads: int,
              dropout: float) -> torch.Tensor:  # fmt: skip
    """q, k, v (P, H) packed → the context (P, H), each sequence attending within itself."""
    tokens, hidden = q.shape
    # (P, H) -split-> (P, N, S): a view, also of a (P, 3H) product's thirds
    q, k, v = (t.view(tokens, heads, hidden // heads) for t in (q, k, v))
    return kernel(q, k, v, sequences, dropout).reshape(tokens, hidden)


def cuda_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sequences: Sequences,
                dropout: float) -> torch.Tensor:  # fmt: skip
    """(P, N, S) each → (P, N, S): flash attention in half precision (Ampere and later), the
    memory-efficient kernel otherwise (float32). Both are differentiable as called."""
    starts, longest = sequences.starts, sequences.longest
    if q.dtype in (torch.float16, torch.bfloat16) and torch.cuda.get_device_capability(q.device) >= (8, 0):
        return torch.ops.aten._flash_attention_forward(q, k, v, starts, starts, longest, longest, dropout, False,
                                                       False)[0]  # fmt: skip
    with_gradient = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    # (1, P, N, S): the kernel's batch of one, cut into sequences by ``starts``
    out = torch.ops.aten._efficient_attention_forward(q[None], k[None], v[None], None, starts, starts, longest,
                                                      longest, dropout, 0, with_gradient)[0]  # fmt: skip
    return out[0]


def reference_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sequences: Sequences,
                     dropout: float) -> torch.Tensor:  # fmt: skip
    """What ``cuda_kernel`` computes, one sequence at a time through torch's attention: the stand-in
    the CPU's tests run the packed path with."""
    starts = sequences.starts.tolist()
    contexts = []
    for start, end in zip(starts, starts[1:]):
        # (n, N, S) -transpose-> (N, n, S) -attend-> (N, n, S) -transpose-> (n, N, S)
        parts = (t[start:end].transpose(0, 1) for t in (q, k, v))
        contexts.append(F.scaled_dot_product_attention(*parts, dropout_p=dropout).transpose(0, 1))
    return torch.cat(contexts)


kernel = cuda_kernel
