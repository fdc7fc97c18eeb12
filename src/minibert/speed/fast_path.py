"""The fast path: the same numbers as the book's plain attention (model.py), with less work.

A reader learning BERT can skip this file. ``BertModel.forward`` chooses a ``FastLayout`` once per
call; when it has one, the embeddings and every per-token layer run on ``layout.pack``-ed tensors
and ``SelfAttention`` hands its input to ``layout.self_attention`` instead of the written-out formula.
That ``if`` in SelfAttention is the one place where speed enters attention (the other place, the linear
layers' GEMM library, is seam.py's).

Four ideas, each exact (they change only the order of float sums; the one row where the numbers
differ, a float16 row with no real token, is in 3.):

1. **Packing** (``Packing``, packing.py). Most of BERT's FLOPs are in layers that treat each token on its own
   (the Q/K/V and output projections, the feed-forward network, LayerNorm). For those, a batch
   (B, T, H) with padding is laid out as (P, H) when the caller asks (``skip_padding=True``: the
   [PAD] rows of its outputs are then zeros, not transformers' values) and the padding is on the
   right with a real token in every row: only the P real tokens, end to end. (Any other batch is
   computed whole, and model.py sets its [PAD] rows to zeros.) Attention is the one place where
   tokens of a sequence meet; there they are put back in their (B, T) places.
2. **Length groups** (``AttentionGroup``, packing.py). Attention's cost grows with the padded length, squared;
   rows of very different lengths attend in groups, each padded only to its own longest. In
   training (on a CPU) too: laying the tokens out by group and packing them back are each other's
   adjoint, so each is one autograd function whose backward is the other (``_ToGroups``,
   ``_FromGroups``). A fine-tuning batch of real text (32 texts, 8 to 128 tokens) computes
   attention and its dropout on 2-3 times fewer weights. (With dropout on, the weights dropped
   are drawn group by group: another draw from the same distribution.)
3. **The fused kernel**: ``F.scaled_dot_product_attention`` computes softmax(QKᵀ/√S + mask)·V
   without keeping the T×T weights. For short sequences the formula written out (two batched
   matmuls and a softmax) can be faster: the fused kernel splits its work poorly over threads
   (2-core AMD EPYC, 2 threads, 64 sequences of 32 tokens: 4.4 ms fused, 2.7 ms written out).
   ``short_attention`` (measured per CPU and thread count: attention_threshold.py) says up to which length
   the written-out formula is used.
   A batch with a row of no real token, where a gradient is recorded, is not given a layout at all
   (``FastLayout.for_call``: model.py runs the book's formula): there the fused kernel's backward is not the formula's
   (torch's CPU kernel: dQ 4x the written-out one). Otherwise one row is not the same: in float16,
   a row with no real token (attention_mask all zeros). The
   book adds the mask (-65504, float16's minimum) to the scores in float16, where the sums round to
   steps of 32 and the scores are mostly lost; the fused kernel adds it to scores it holds in
   float32, where they survive, so that row attends as if nothing were masked (torch's CPU kernel;
   Δ about 2 on all-MiniLM-L6-v2). In float32 and bfloat16 the minimum (-3.4e38) swallows every
   score on both paths: every key weighs the same. Such a row carries no text, and with
   ``skip_padding=True`` it is zeros on both paths (tests/test_model_padding.py pins all three dtypes).
4. **One product for Q, K and V** (``fused_projections``), on a GPU where a gradient is recorded (training):
   x·[Wq; Wk; Wv]ᵀ is the three products side by side, one GEMM of 3H columns instead of three of H,
   and one layout change of (P, 3H) instead of three of (P, H). A training step is mostly the
   launching of small operations on a GPU (a bert-base step on 32 sentences, bf16: the GPU busy 10
   of 40 ms), and this takes 14-20% of them away (counted: docs/gpu.md): forward, backward and
   autocast's casts. The weights change every step, so they are stacked afresh each forward; in
   float32 the stacked copy is kept for the backward pass (3H² floats a layer, 85 MB for
   bert-base), under autocast it replaces the casts kept anyway. On a CPU, where a step's time is
   its arithmetic, it bought nothing measurable (fine-tuning all-MiniLM-L6-v2 against transformers:
   1.46-1.47x without, 1.45-1.46x with, Intel Xeon with AMX), so there the three stay apart and
   the copy is not made (``ONE_PRODUCT_ON``). At inference the three products stay apart too (a kept
   copy would double the memory of Q, K and V), and so do layers that are not plain (int8, an
   adapter, hooks: ``fused_projections``).

On a GPU, packed tokens can also attend as they lie, each sequence by itself (varlen.py: no layout
change at all in the layers; off until a device has measured it).

Shape legend as in model.py; P = packed tokens: the real tokens of a whole batch laid end to end.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.modules import module as torch_module

from . import varlen
from .packed_linear import PackedLinear, records_gradient
from .packing import Packing, _FromGroups, _ToGroups, on_device

# On a GPU, torch's fused attention without cuDNN's kernel: cuDNN builds a plan for every new
# shape it meets (tens of milliseconds each), and a run of length-sorted batches is mostly new
# shapes. On an H200 (torch 2.11), 4,096 texts embedded in float16 took 4.4 s the first time
# through, 0.66 s once every shape had its plan; the flash and memory-efficient kernels need none.
# None: torch's own choice.
GPU_ATTENTION: tuple[SDPBackend, ...] | None = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                                                SDPBackend.MATH)  # fmt: skip


# Where rows attend in length groups in training too (where a gradient is recorded): see FastLayout.
# Not on a GPU until one has measured it: there a step is bound by launching kernels, and groups add them.
GROUPS_IN_TRAINING_ON = frozenset({"cpu"})

# Where Q, K and V are one product in training (fused_projections): where a step is bound by launching
# operations rather than by arithmetic.
ONE_PRODUCT_ON = frozenset({"cuda"})


class FastLayout:
    """How one forward call lays out its tokens, chosen once from the attention mask.

    Without padding (or with padding that is not on the right, a row with no real token, or when
    not asked to ``pack``: then [PAD] rows are computed as transformers computes them, and model.py
    zeros them if the caller asked to skip them) tokens stay (B, T, H) and only the fused kernel is
    used; with right padding they are packed to (P, H), and attention unpacks them (whole, or in
    length groups): [PAD] rows come back as zeros.
    """

    def __init__(self, attention_mask: torch.Tensor | None, short_attention: dict[int, int] | None = None,
                 pack: bool = True, device: torch.device | None = None):  # fmt: skip
        """``attention_mask`` where the caller gave it, for a model on ``device`` (default: the mask's):
        a GPU's model fed from the CPU reads the mask there, without waiting for the GPU, and its
        index tensors are copied over (packing.py)."""
        device = device or (attention_mask.device if attention_mask is not None else None)
        padded = pack and attention_mask is not None and not bool(attention_mask.all())
        # Length groups where no gradient is recorded, and in training on a CPU (GROUPS_IN_TRAINING_ON).
        # Their layout's backward writes each group's gradient once into one (P, H) (_ToGroups): left
        # to autograd, each gather came back as a scatter into a whole (P, H), one per group and tensor,
        # which cost more than the attention saved. With it, a fine-tuning step of all-MiniLM-L6-v2
        # (32 real texts, 8-128 tokens, 7-9 groups) is 1.20x faster (1.17-1.32; Intel Xeon with AMX).
        # On a GPU a step is mostly launches, and each group adds some: there training attends as one
        # group (or by sequence: varlen.py) until a GPU has measured groups.
        groups = not torch.is_grad_enabled() or attention_mask is not None and device.type in GROUPS_IN_TRAINING_ON
        packs = padded and Packing.applies_to(attention_mask)
        # On a GPU (when turned on: varlen.py), packed sequences attend as they lie, without groups
        by_sequence = packs and varlen.applies(device)
        self.packing = Packing(attention_mask, groups and not by_sequence).to(device) if packs else None
        self.sequences = None
        if by_sequence:
            sequences = varlen.Sequences.of(varlen.real_lengths(attention_mask))
            self.sequences = replace(sequences, starts=on_device(sequences.starts, device))
        # {threads: longest sequence that attends written out}; {} or a thread count not listed: none
        # (None while recording: torch.get_num_threads() is no value dynamo can record, strict export's)
        self.short_tokens = short_attention.get(torch.get_num_threads(), 0) if short_attention else 0

    @classmethod
    def for_call(cls, attention_mask: torch.Tensor | None, padded: bool, recording: bool, skip_padding: bool,
                 short_attention: dict[int, int] | None, device: torch.device) -> FastLayout | None:  # fmt: skip
        """The layout of one call of BertModel.forward, or None: the book's formula. While torch records
        the call as a graph (``recording``), no choice may read the mask's values: the graph would keep
        the example's answer (no mask at all, when it had no padding); the mask is then always added (0
        at real tokens: the same scores), nothing is packed away, and jit's tracer records the book's
        formula. A row with no real token where a gradient is recorded runs the book's formula too
        (while recording: wherever a mask is given): there the fused kernel's backward is not the
        formula's (3. above). Nor may a choice read the length while recording: the measured
        ``short_attention`` length (up to which attention is written out) became a guard of the graph
        (torch.export refused a dynamic length with "tokens <= 16"), so a recorded call always attends
        through the fused kernel, whatever this CPU measured."""
        empty_row = padded and torch.is_grad_enabled() and (recording or not bool(attention_mask.any(dim=1).all()))
        if torch.jit.is_tracing() or empty_row:
            return None
        return cls(attention_mask, None if recording else short_attention, skip_padding and not recording, device)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) → (P, ...) when packing, else unchanged."""
        return x if self.packing is None else self.packing.pack(x)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(P, H) → (B, T, H) with zeros at padding, when packing; else unchanged."""
        return x if self.packing is None else self.packing.unpack(x)

    def self_attention(self, x: torch.Tensor, attention: nn.Module, mask: torch.Tensor | None) -> torch.Tensor:
        """``attention`` (model.py's SelfAttention) on x laid out as ``pack`` left it: the Q, K, V
        projections and softmax(Q·Kᵀ/√S + mask)·V; the context likewise (before the output projection)."""
        heads, dropout = attention.num_heads, attention.dropout.p * attention.training
        qkv = fused_projections(x, attention)  # (P, 3H) or (B, T, 3H); None: three products
        if qkv is None:
            q, k, v = attention.query(x), attention.key(x), attention.value(x)
        else:
            q, k, v = qkv.chunk(3, dim=-1)  # views
        if self.sequences is not None and varlen.takes(q, attention.head_size):  # packed, each sequence by itself
            return varlen.attention(q, k, v, self.sequences, heads, dropout)
        if qkv is not None and self.packing is not None and self.packing.groups is None:
            q, k, v = self.packing.unpack(qkv).chunk(3, dim=-1)  # (P, 3H) -> (B, T, 3H): one scatter, not three
            return self.packing.pack(self._attention(q, k, v, mask, heads, dropout))
        return self.attend(q, k, v, mask, heads, dropout)

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, heads: int, dropout: float
    ) -> torch.Tensor:
        """softmax(Q·Kᵀ/√S + mask)·V for q, k, v laid out as ``pack`` left them; the context likewise."""
        groups = self.packing.groups if self.packing is not None else None
        if groups is not None and torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):  # training
            parts = _ToGroups.apply(groups, q, k, v)  # q, k, v of group 0, then of group 1, ...
            attended = [self._attention(*parts[3 * number : 3 * number + 3], group.mask(mask), heads, dropout)
                        for number, group in enumerate(groups)]  # fmt: skip
            return _FromGroups.apply(groups, *attended)  # (P, H), in attention's dtype (bf16 under autocast)
        if groups is not None:  # the same without a gradient: one group's tensors alive at a time
            context = None  # (P, H), in attention's dtype (bfloat16 under autocast); every real token is in one group
            for group in groups:
                parts = [group.unpack(t) for t in (q, k, v)]  # 3 × (b, T_group, H)
                attended = self._attention(*parts, group.mask(mask), heads, dropout)  # (b, T_group, H)
                context = group.pack_into(attended.new_empty(q.shape) if context is None else context, attended)
            return context
        if self.packing is not None:  # (P, H) -> (B, T, H): attention needs each sequence's tokens together
            q, k, v = self.packing.unpack(q), self.packing.unpack(k), self.packing.unpack(v)
            return self.packing.pack(self._attention(q, k, v, mask, heads, dropout))
        return self._attention(q, k, v, mask, heads, dropout)

    def _attention(self, q, k, v, mask, heads: int, dropout: float) -> torch.Tensor:
        """(B, T, H) each → (B, T, H): the fused kernel, or the formula written out for short T."""
        if q.shape[1] <= self.short_tokens and not dropout:
            return written_out(q, k, v, mask, heads)
        return fused_kernel(q, k, v, mask, heads, dropout)


def fused_projections(x: torch.Tensor, attention: nn.Module) -> torch.Tensor | None:
    """x (…, H) → [q k v] (…, 3H): the query, key and value projections as one product, on a device
    of ``ONE_PRODUCT_ON``, where a gradient is recorded (of x, a weight or a bias) and the three are
    plain linear layers that multiply by ``F.linear`` there: ``nn.Linear`` itself, or seam.py's
    ``PackedLinear``, which trains through it. Anything else computes its own product (None): int8
    layers, a subclass with its own forward (a LoRA adapter), a layer with hooks (torch's pruning,
    weight norm), inference, a CPU."""
    layers = (attention.query, attention.key, attention.value)
    if x.device.type not in ONE_PRODUCT_ON or not torch.is_grad_enabled():
        return None
    if not all(_plain_linear(layer) for layer in layers):
        return None
    if not any(records_gradient(layer, x) for layer in layers):
        return None  # nothing trains (x, weights, biases frozen): seam.py's products (packed on a CPU) are faster
    biases = [layer.bias for layer in layers]
    if any(b is None for b in biases) and any(b is not None for b in biases):
        return None
    tensors = [t for layer in layers for t in (layer.weight, layer.bias) if t is not None]
    if len({(t.dtype, t.device) for t in tensors}) > 1:  # (three products would refuse; a stack would cast)
        return None
    for layer in layers:
        if isinstance(layer, PackedLinear):
            layer.lay_out_weight()  # as its own forward would before F.linear (a TF kernel read as a view)
    weight = torch.cat([layer.weight for layer in layers])  # (3H, H): Wq, Wk, Wv stacked
    bias = torch.cat(biases) if biases[0] is not None else None  # (3H,)
    return F.linear(x, weight, bias)


def _plain_linear(layer: nn.Module) -> bool:
    """A layer whose call is exactly F.linear(x, weight, bias) while training: nn.Linear or a
    PackedLinear without an activation, its forward not replaced on the instance (accelerate's
    offloading wraps it so), and no hook of any kind to run (torch calls a module's forward
    directly only then: pruning and weight norm use forward pre-hooks, gradient inspection
    backward hooks)."""
    plain = type(layer) is nn.Linear or (type(layer) is PackedLinear and layer.activation is None)
    hooks = (layer._forward_hooks, layer._forward_pre_hooks, layer._backward_hooks, layer._backward_pre_hooks,
             torch_module._global_forward_hooks, torch_module._global_forward_pre_hooks,
             torch_module._global_backward_hooks, torch_module._global_backward_pre_hooks)  # fmt: skip
    return plain and "forward" not in vars(layer) and not any(hooks)


def fused_kernel(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, heads: int, dropout: float
) -> torch.Tensor:
    """q, k, v (B, T, H) → context (B, T, H) through PyTorch's fused attention kernel."""
    batch, tokens, hidden = q.shape
    # (B, T, H) -split-> (B, T, N, S) -transpose-> (B, N, T, S)
    q, k, v = (t.view(batch, tokens, heads, hidden // heads).transpose(1, 2) for t in (q, k, v))
    backends = sdpa_kernel(list(GPU_ATTENTION)) if q.is_cuda and GPU_ATTENTION else contextlib.nullcontext()
    with backends:
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)  # (B, N, T, S)
    # (B, N, T, S) -transpose-> (B, T, N, S) -merge-> (B, T, H)
    return context.transpose(1, 2).reshape(batch, tokens, hidden)


def written_out(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, heads: int
) -> torch.Tensor:
    """q, k, v (B, T, H) → context (B, T, H): softmax(Q·Kᵀ/√S + mask)·V as model.py writes it."""
    batch, tokens, hidden = q.shape
    # (B, T, H) -split-> (B, T, N, S) -transpose-> (B, N, T, S)
    q, k, v = (t.view(batch, tokens, heads, hidden // heads).transpose(1, 2) for t in (q, k, v))
    scores = (q @ k.transpose(-1, -2)).mul_((hidden // heads) ** -0.5)  # (B, N, T, T)
    if mask is not None:
        scores.add_(mask)  # (B, 1, 1, T) broadcast: padding keys get the dtype's minimum
    context = scores.softmax(dim=-1) @ v  # (B, N, T, S)
    # (B, N, T, S) -transpose-> (B, T, N, S) -merge-> (B, T, H)
    return context.transpose(1, 2).reshape(batch, tokens, hidden)
