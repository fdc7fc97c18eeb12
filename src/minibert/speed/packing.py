"""Where the real tokens of a padded batch live: the packed layout (P, H) of speed/fast_path.py.

A batch (B, T, H) with padding on the right holds P real tokens; the per-token layers compute
those only, laid end to end (``Packing``), and attention puts each sequence's tokens back in their
(B, T) places — whole, or in length groups each padded to its own longest (``AttentionGroup``; in
training, ``_ToGroups`` and ``_FromGroups`` are each other's adjoint, one autograd function each).

The index tensors are computed where the attention mask was given: for a model on a GPU fed from
the CPU, on the CPU, without waiting for the GPU, and then copied to it (``to``) — the GPU's queue
is never read back between two batches.

Shape legend as in model.py; P = packed tokens: the real tokens of a whole batch laid end to end.
"""

from __future__ import annotations

import torch

from . import varlen


def on_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` on ``device``, copied without waiting: a CPU tensor bound for a GPU is pinned
    first, so the copy is queued behind the GPU's work instead of waiting for it."""
    if tensor.device == device:
        return tensor
    if device.type == "cuda" and tensor.device.type == "cpu":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=device.type != "cpu")  # (to a CPU: read at once, so waited for)


class Packing:
    """Where the real tokens of a right-padded batch live, so that work on padding can be skipped.

    attention_mask [[1 1 1 0]      index = [0 1 2 4 5]      (B, T, H) --pack--> (P, H)
                    [1 1 0 0]]                              (P, H) --unpack--> (B, T, H), zeros at pads
    """

    def __init__(self, attention_mask: torch.Tensor, groups: bool = True):
        self.batch, self.tokens = attention_mask.shape
        is_real = attention_mask.reshape(-1).bool()  # (B*T,)
        self.index = is_real.nonzero().squeeze(1)  # (P,) positions of the real tokens in the flattened (B*T)
        self.padding_index = (~is_real).nonzero().squeeze(1)  # (B*T - P,) positions of the padding
        # None: the whole batch attends as one (always, when ``groups`` is False)
        self.groups = AttentionGroup.of(varlen.real_lengths(attention_mask)) if groups else None

    @staticmethod
    def applies_to(attention_mask: torch.Tensor) -> bool:
        """Packing needs right padding: every row is real tokens first, then padding."""
        lengths = attention_mask.sum(1, keepdim=True)
        positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
        return bool((lengths > 0).all()) and bool((attention_mask.bool() == (positions < lengths)).all())

    def to(self, device: torch.device) -> Packing:
        """This packing's index tensors on ``device`` (``on_device``: without waiting)."""
        self.index, self.padding_index = on_device(self.index, device), on_device(self.padding_index, device)
        self.groups = None if self.groups is None else [group.to(device) for group in self.groups]
        return self

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        # (B, T, ...) -flatten-> (B*T, ...) -select-> (P, ...)
        return x.reshape(self.batch * self.tokens, *x.shape[2:]).index_select(0, self.index)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        # (P, H) -scatter-> (B*T, H), zeros at padding -view-> (B, T, H)
        out = x.new_empty(self.batch * self.tokens, x.shape[-1])
        out.index_copy_(0, self.index, x).index_fill_(0, self.padding_index, 0.0)
        return out.view(self.batch, self.tokens, x.shape[-1])


class AttentionGroup:
    """Rows of similar length that attend together, padded only to their own longest.

    A batch with one 250-token text and fifteen 30-token ones computes attention as if all sixteen
    were 250 tokens long (about 60× the real work for the short ones); a server's batches mix
    lengths like this. So the rows are grouped by length (each row at least ``RATIO`` of its
    group's longest), and each group gets its own attention call on (b, T_group) instead of (B, T).
    Exact: a padded key adds exactly nothing to a softmax.

        lengths [250, 240, 30, 28, 25]  ->  groups [rows 0, 1: T=250] [rows 2, 3, 4: T=30]
    """

    RATIO = 0.8

    def __init__(self, rows: torch.Tensor, lengths: torch.Tensor, starts: torch.Tensor):
        self.rows, self.tokens = rows, int(lengths.max())
        positions = torch.arange(self.tokens, device=lengths.device)
        is_real = positions[None, :] < lengths[:, None]  # (b, T_group)
        self.full = bool(is_real.all())  # no padding at all: no mask needed
        self.local = is_real.reshape(-1).nonzero().squeeze(1)  # real positions in the flattened (b*T_group)
        self.packed = (starts[:, None] + positions[None, :])[is_real]  # the same tokens' positions in (P,)

    @classmethod
    def of(cls, lengths: torch.Tensor) -> list[AttentionGroup] | None:
        """The groups of a batch with these lengths, or None when one group (the whole batch) does."""
        if int(lengths.min()) >= cls.RATIO * int(lengths.max()):
            return None
        starts = lengths.cumsum(0) - lengths  # where each row's tokens begin in the packed (P,)
        order = lengths.argsort(descending=True, stable=True).tolist()
        values = lengths.tolist()
        groups, first = [], 0
        for end in range(1, len(order) + 1):
            if end == len(order) or values[order[end]] < cls.RATIO * values[order[first]]:
                rows = torch.tensor(order[first:end], device=lengths.device)
                groups.append(cls(rows, lengths[rows], starts[rows]))
                first = end
        return groups

    def to(self, device: torch.device) -> AttentionGroup:
        """This group's index tensors on ``device`` (``on_device``: without waiting)."""
        self.rows, self.local, self.packed = (on_device(t, device) for t in (self.rows, self.local, self.packed))
        return self

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        # (P, H) -select this group's tokens-> (p, H) -scatter-> (b*T_group, H) -view-> (b, T_group, H)
        out = x.new_zeros(len(self.rows) * self.tokens, x.shape[-1])
        out.index_copy_(0, self.local, x.index_select(0, self.packed))
        return out.view(len(self.rows), self.tokens, x.shape[-1])

    def pack_into(self, out: torch.Tensor, part: torch.Tensor) -> torch.Tensor:
        """``unpack``'s inverse: this group's (b, T_group, C) written to its tokens' rows of the packed
        ``out`` (P, C); the padding is left out."""
        # (b, T_group, C) -flatten-> (b*T_group, C) -select real-> (p, C) -> its rows of (P, C)
        return out.index_copy_(0, self.packed, part.reshape(-1, part.shape[-1]).index_select(0, self.local))

    def mask(self, mask: torch.Tensor | None) -> torch.Tensor | None:
        """The batch's additive (B, 1, 1, T) mask, cut to this group's rows and length."""
        if self.full or mask is None:
            return None
        return mask.index_select(0, self.rows)[..., : self.tokens]


class _ToGroups(torch.autograd.Function):
    """Packed tensors (P, C) → each group's (b, T_group, C), zeros at padding; backward: the groups'
    gradients at their real tokens written back into one (P, C) each (every real token is in exactly
    one group), instead of autograd's scatter of a whole (P, C) per group and tensor."""

    @staticmethod
    def forward(groups, *packed):
        return tuple(group.unpack(t) for group in groups for t in packed)

    @staticmethod
    def setup_context(ctx, inputs, output):  # (apart from forward: torch.func's transforms work too)
        ctx.groups, ctx.shapes = inputs[0], [t.shape for t in inputs[1:]]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        count, out = len(ctx.shapes), []
        for which, shape in enumerate(ctx.shapes):
            grad = None
            for number, group in enumerate(ctx.groups):
                part = grads[number * count + which]  # (b, T_group, C)
                grad = group.pack_into(part.new_empty(shape) if grad is None else grad, part)
            out.append(grad)
        return (None, *out)


class _FromGroups(torch.autograd.Function):
    """Each group's (b, T_group, C) → the packed (P, C) of their real tokens; backward: the packed
    gradient laid out by group again (zeros at padding: the padded rows were not kept)."""

    @staticmethod
    def forward(groups, *parts):
        out = parts[0].new_empty(sum(len(group.packed) for group in groups), parts[0].shape[-1])  # (P, C)
        for group, part in zip(groups, parts):
            group.pack_into(out, part)
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.groups = inputs[0]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        return (None, *(group.unpack(grad) for group in ctx.groups))
