"""BERT, one module per idea of the paper (Devlin et al., 2018, "BERT: Pre-training of Deep
Bidirectional Transformers for Language Understanding").

Shape legend used in the comments:
    B = batch size, T = tokens per sequence, H = hidden size (768 for base),
    N = attention heads (12), S = head size (H / N = 64), F = feed-forward size (4H = 3072),
    P = packed tokens: the real (non-padding) tokens of a whole batch laid end to end.

    input_ids (B, T)
      └─ Embeddings: word piece + position + segment, LayerNorm      → (B, T, H)
      └─ EncoderLayer × L:                                            (B, T, H)
           x = LayerNorm(x + Attention(x))      every token looks at every other token
           x = LayerNorm(x + FeedForward(x))    each token on its own: H → F → H
      └─ last_hidden_state (B, T, H);  Pooler: tanh(W · h[CLS])      → pooler_output (B, H)

Loading pretrained weights lives in ``weights.py``; this file is only the computation.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from .activations import activation
from .config import BertConfig
from .errors import CheckpointError


class Packing:
    """Where the real tokens of a right-padded batch live, so that work on padding can be skipped.

    Most of BERT's FLOPs are in layers that treat each token on its own (the Q/K/V and output
    projections, the feed-forward network, LayerNorm). For those, a batch (B, T, H) with padding
    is laid out as (P, H): only the P real tokens, end to end. Attention is the one place where
    tokens of a sequence meet; there the tokens are put back in their (B, T) places.

        attention_mask [[1 1 1 0]      index = [0 1 2 4 5]      (B, T, H) --pack--> (P, H)
                        [1 1 0 0]]                              (P, H) --unpack--> (B, T, H), zeros at pads
    """

    def __init__(self, attention_mask: torch.Tensor):
        self.batch, self.tokens = attention_mask.shape
        is_real = attention_mask.reshape(-1).bool()  # (B*T,)
        self.index = is_real.nonzero().squeeze(1)  # (P,) positions of the real tokens in the flattened (B*T)
        self.padding_index = (~is_real).nonzero().squeeze(1)  # (B*T - P,) positions of the padding
        self.groups = AttentionGroup.of(attention_mask.sum(1))  # None: the whole batch attends as one

    @staticmethod
    def applies_to(attention_mask: torch.Tensor) -> bool:
        """Packing needs right padding: every row is real tokens first, then padding."""
        lengths = attention_mask.sum(1, keepdim=True)
        positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
        return bool((lengths > 0).all()) and bool((attention_mask.bool() == (positions < lengths)).all())

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

    Attention is the one layer whose cost grows with the padded length, squared: a batch with one
    250-token text and fifteen 30-token ones computes attention as if all sixteen were 250 tokens
    long (about 60× the real work for the short ones). A server's batches mix lengths like this.
    So the rows are grouped by length (each row at least ``RATIO`` of its group's longest), and
    each group gets its own attention call on (b, T_group) instead of (B, T). Exact: a padded key
    adds exactly nothing to a softmax, so leaving it out changes only the order of float sums.

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

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        # (P, H) -select this group's tokens-> (p, H) -scatter-> (b*T_group, H) -view-> (b, T_group, H)
        out = x.new_zeros(len(self.rows) * self.tokens, x.shape[-1])
        out.index_copy_(0, self.local, x.index_select(0, self.packed))
        return out.view(len(self.rows), self.tokens, x.shape[-1])

    def mask(self, mask: torch.Tensor | None) -> torch.Tensor | None:
        """The batch's additive (B, 1, 1, T) mask, cut to this group's rows and length."""
        if self.full or mask is None:
            return None
        return mask.index_select(0, self.rows)[..., : self.tokens]


class Embeddings(nn.Module):
    """Token vector = word-piece embedding + position embedding + segment embedding, normalized.

    BERT learns one table per kind of information: what the piece is (``word_embeddings``,
    vocab_size × H), where it is (``position_embeddings``, 512 × H), and which sentence of a pair
    it belongs to (``token_type_embeddings``, 2 × H). The three are summed, then LayerNorm'ed.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, position_ids: torch.Tensor
    ) -> torch.Tensor:
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)
        return self.dropout(self.layer_norm(embeddings))


class SelfAttention(nn.Module):
    """Multi-head self-attention: each token's new vector is a weighted mix of all tokens' values.

    Per head: weights = softmax(Q·Kᵀ / √S + mask), output = weights·V. Padding keys get -∞ (the
    dtype's minimum) in the mask, so no real token attends to [PAD]. ``output`` projects the
    concatenated heads back to H.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_prob = config.attention_probs_dropout_prob

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = x.shape
        # (B, T, H) -split-> (B, T, N, S) -transpose-> (B, N, T, S)
        return x.view(batch, tokens, self.num_heads, self.head_size).transpose(1, 2)

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, return_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """q, k, v: (B, N, T, S); mask: (B, 1, 1, T) additive. Returns (B, T, H) and the weights."""
        dropout = self.dropout_prob if self.training else 0.0
        if return_weights:  # the plain computation, written out
            scores = (q @ k.transpose(-1, -2)) * self.head_size**-0.5  # (B, N, T, T)
            if mask is not None:
                scores = scores + mask
            weights = F.dropout(scores.softmax(dim=-1), p=dropout, training=self.training)
            context = weights @ v  # (B, N, T, S)
        else:  # the same, fused by PyTorch (no T×T matrix kept around)
            weights = None
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        batch, _, tokens, _ = context.shape
        # (B, N, T, S) -transpose-> (B, T, N, S) -merge-> (B, T, H)
        return context.transpose(1, 2).reshape(batch, tokens, -1), weights

    def attend_in_groups(self, q, k, v, mask, groups: list[AttentionGroup]) -> torch.Tensor:
        """q, k, v: (P, H) packed. Each group of rows attends on its own (see AttentionGroup)."""
        context = torch.empty_like(q)  # (P, H); every real token belongs to exactly one group
        for group in groups:
            heads = [self.split_heads(group.unpack(t)) for t in (q, k, v)]  # 3 × (b, N, T_group, S)
            attended, _ = self.attend(*heads, group.mask(mask), return_weights=False)  # (b, T_group, H)
            # (b, T_group, H) -flatten-> (b*T_group, H) -select real-> (p, H) -> its rows of (P, H)
            context.index_copy_(0, group.packed, attended.reshape(-1, q.shape[-1]).index_select(0, group.local))
        return context

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, return_weights: bool = False, packing: Packing | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x: (B, T, H), or (P, H) real tokens only when ``packing`` is given."""
        q, k, v = self.query(x), self.key(x), self.value(x)
        if packing is not None and packing.groups is not None:  # rows of very different lengths
            return self.output(self.attend_in_groups(q, k, v, mask, packing.groups)), None
        if packing is not None:  # (P, H) -> (B, T, H): attention needs each sequence's tokens together
            q, k, v = packing.unpack(q), packing.unpack(k), packing.unpack(v)
        context, weights = self.attend(
            self.split_heads(q), self.split_heads(k), self.split_heads(v), mask, return_weights
        )
        if packing is not None:
            context = packing.pack(context)  # (B, T, H) -> (P, H)
        return self.output(context), weights


class FeedForward(nn.Module):
    """The position-wise feed-forward network: H → F (activation) → H, for each token on its own."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.activation = activation(config.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.intermediate(x)  # (..., F): the largest tensor of the layer
        return self.output(self.activation(hidden, inplace=not hidden.requires_grad))


class EncoderLayer(nn.Module):
    """One Transformer encoder layer, post-LayerNorm as in the original BERT:

    x = LayerNorm(x + Dropout(Attention(x)))
    x = LayerNorm(x + Dropout(FeedForward(x)))
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = SelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.output_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, return_weights: bool = False, packing: Packing | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, weights = self.attention(x, mask, return_weights, packing)
        x = self.attention_norm(self.dropout(attended).add_(x))  # LayerNorm(x + attended), summed in place
        x = self.output_norm(self.dropout(self.feed_forward(x)).add_(x))
        return x, weights


class Pooler(nn.Module):
    """The sentence-level vector BERT was pre-trained to produce for next-sentence prediction:
    tanh(dense(h[CLS])), the final hidden state of the first token through one more layer."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden_states[:, 0]))


class _Output:
    """Attribute access plus transformers-style tuple indexing (``outputs[0]``) of set fields."""

    def to_tuple(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None)

    def __getitem__(self, index):
        if isinstance(index, str):
            return getattr(self, index)
        return self.to_tuple()[index]


@dataclass
class BertOutput(_Output):
    last_hidden_state: torch.Tensor  # (B, T, H): the final vector of every token
    pooler_output: torch.Tensor | None = None  # (B, H): tanh(dense(h[CLS]))
    hidden_states: tuple[torch.Tensor, ...] | None = None  # L + 1 tensors (B, T, H): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None = None  # L tensors (B, N, T, T): attention weights per layer


@dataclass
class BertPreTrainingOutput(_Output):
    prediction_logits: torch.Tensor  # (B, T, vocab_size): masked-LM scores of every piece at each position
    seq_relationship_logits: torch.Tensor  # (B, 2): [is next sentence, is random sentence]
    last_hidden_state: torch.Tensor | None = None
    pooler_output: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


def validate_inputs(config: BertConfig, input_ids, attention_mask=None, token_type_ids=None):
    """Check the model's inputs before any compute; return them as tensors (the ONE place that does).

    Raises ``TypeError`` for non-integer ids and ``ValueError`` for shapes that disagree, ids outside
    [0, vocab_size), type ids outside [0, type_vocab_size) and sequences longer than
    max_position_embeddings — each message names the problem and the limit.
    """
    input_ids = _as_int64(_as_tensor(input_ids, "input_ids"), "input_ids")
    if input_ids.dim() == 1:
        input_ids = input_ids.unsqueeze(0)  # one sequence: add the batch dimension
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape (batch, tokens), got {tuple(input_ids.shape)}")
    batch, tokens = input_ids.shape
    if batch == 0 or tokens == 0:
        raise ValueError(f"input_ids has shape {tuple(input_ids.shape)}: it needs at least one sequence of one token")
    if tokens > config.max_position_embeddings:
        raise ValueError(
            f"sequence of {tokens} tokens is longer than max_position_embeddings={config.max_position_embeddings}; "
            "truncate it (tokenizer truncation=True) or embed it in windows (Embedder long_text='window')"
        )
    _check_range(input_ids, "input_ids", config.vocab_size, f"the vocabulary [0, {config.vocab_size})")
    if token_type_ids is not None:
        token_type_ids = _as_int64(_like_input_ids(token_type_ids, "token_type_ids", input_ids), "token_type_ids")
        limit = config.type_vocab_size
        _check_range(token_type_ids, "token_type_ids", limit, f"[0, type_vocab_size={limit})")
    if attention_mask is not None:
        attention_mask = _like_input_ids(attention_mask, "attention_mask", input_ids)
        if not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token)")
    return input_ids, attention_mask, token_type_ids


def _as_int64(ids: torch.Tensor, name: str) -> torch.Tensor:
    """Ids of any integer dtype (int8 ... uint64) as int64, what an embedding lookup takes."""
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers, got dtype {ids.dtype}")
    return ids if ids.dtype == torch.int64 else ids.to(torch.int64)


def _check_range(ids: torch.Tensor, name: str, limit: int, allowed: str) -> None:
    """All ids in [0, limit): else a ValueError naming the offending value and the range."""
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= limit:
        raise ValueError(f"{name} contains {low if low < 0 else high}, outside {allowed}")


def _as_tensor(value, name: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f"{name} must be a tensor or a (nested) list of ints: {error}") from None


def _like_input_ids(value, name: str, input_ids: torch.Tensor) -> torch.Tensor:
    """``value`` as a tensor of the same (B, T) shape as input_ids, or a ValueError naming both."""
    tensor = _as_tensor(value, name)
    if tensor.dim() == 1:
        tensor = tensor.unsqueeze(0)
    if tensor.shape != input_ids.shape:
        raise ValueError(f"{name} has shape {tuple(tensor.shape)} but input_ids has {tuple(input_ids.shape)}")
    return tensor


def additive_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, T) of 1 = real, 0 = pad  →  (B, 1, 1, T) of 0 = attend, dtype-minimum = ignore."""
    keep = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - keep) * torch.finfo(dtype).min


class BertModel(nn.Module):
    """The BERT encoder: embeddings, ``num_hidden_layers`` encoder layers and the pooler.

    >>> model = BertModel.from_pretrained("google-bert/bert-base-uncased")       # doctest: +SKIP
    >>> out = model(**tokenizer("I love Paris", return_tensors="pt"))            # doctest: +SKIP
    >>> out.last_hidden_state.shape, out.pooler_output.shape                     # doctest: +SKIP
    (torch.Size([1, 5, 768]), torch.Size([1, 768]))
    """

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_hidden_layers))
        self.pooler = Pooler(config) if add_pooling_layer else None
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        """Fresh weights as BERT initialises them (normal, std 0.02); from_pretrained overwrites them."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=self.config.initializer_range)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    @property
    def dtype(self) -> torch.dtype:
        return self.embeddings.word_embeddings.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.embeddings.word_embeddings.weight.device

    def forward(
        self,
        input_ids,
        attention_mask=None,
        token_type_ids=None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertOutput:
        """input_ids (B, T) → BertOutput(last_hidden_state (B, T, H), pooler_output (B, H), ...)."""
        input_ids, attention_mask, token_type_ids = validate_inputs(
            self.config, input_ids, attention_mask, token_type_ids
        )
        if attention_mask is None:
            self._warn_if_padded(input_ids)
        device = self.device
        input_ids = input_ids.to(device)
        batch, tokens = input_ids.shape
        token_type_ids = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids.to(device)
        position_ids = torch.arange(tokens, device=device).expand(batch, tokens)  # (B, T)
        if attention_mask is not None:
            attention_mask = attention_mask.to(device)

        # The fast path: skip padding in every per-token layer (see Packing). It computes the
        # same numbers as the plain path on real tokens; padding positions come out as zeros.
        has_padding = attention_mask is not None and not bool(attention_mask.all())
        packing = None
        if has_padding and not output_attentions and Packing.applies_to(attention_mask):
            packing = Packing(attention_mask)
        if packing is not None:
            x = self.embeddings(packing.pack(input_ids), packing.pack(token_type_ids), packing.pack(position_ids))
        else:
            x = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, T, H)

        mask = additive_mask(attention_mask, x.dtype) if has_padding else None  # (B, 1, 1, T)

        unpack = packing.unpack if packing is not None else (lambda states: states)
        hidden_states = [unpack(x)] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for layer in self.layers:
            x, weights = layer(x, mask, return_weights=output_attentions, packing=packing)
            if output_hidden_states:
                hidden_states.append(unpack(x))
            if output_attentions:
                attentions.append(weights)
        x = hidden_states[-1] if output_hidden_states else unpack(x)

        return BertOutput(
            last_hidden_state=x,
            pooler_output=self.pooler(x) if self.pooler is not None else None,
            hidden_states=tuple(hidden_states) if hidden_states is not None else None,
            attentions=tuple(attentions) if attentions is not None else None,
        )

    def _warn_if_padded(self, input_ids: torch.Tensor) -> None:
        """Once per model, as transformers does: ids that start or end with the pad id look padded,
        and without an attention_mask padding is attended to like text (different numbers)."""
        pad = self.config.pad_token_id
        if getattr(self, "_warned_padding", False) or pad is None or input_ids.numel() == 0:
            return
        if bool((input_ids[:, [-1, 0]] == pad).any()):
            self._warned_padding = True
            warnings.warn(
                f"input_ids contain the pad id {pad} at the start or end of a sequence and no attention_mask was "
                "given, so padding is attended to like text: pass the tokenizer's attention_mask",
                stacklevel=3,
            )

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike,
        *,
        revision: str | None = None,
        dtype: torch.dtype | str | None = None,
        device: torch.device | str | None = None,
    ):
        """Build the model from ``config.json`` and load the pretrained weights of a local directory
        or a hub repository (see ``weights.py``). Returned in eval mode (dropout off)."""
        from .weights import load_pretrained

        return load_pretrained(cls, name_or_path, revision=revision, dtype=dtype, device=device)

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Write ``config.json`` and ``model.safetensors`` with the hub's tensor names."""
        from .weights import save_pretrained

        save_pretrained(self, directory)


class MaskedLMHead(nn.Module):
    """Predicts the original piece at each position: transform (dense + activation + LayerNorm),
    then scores against every word embedding (the decoder shares the input embedding matrix) plus
    a bias of its own."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = activation(config.hidden_act)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        """hidden_states (B, T, H), word_embeddings (vocab_size, H) — the tied input matrix."""
        x = self.layer_norm(self.activation(self.transform(hidden_states)))  # (B, T, H)
        return F.linear(x, word_embeddings, self.bias)  # (B, T, vocab_size)


class BertForPreTraining(nn.Module):
    """BERT with its two pre-training heads: masked-LM (which piece was masked?) and next-sentence
    prediction (does sentence B follow sentence A?, from the pooler output)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        if config.extra.get("tie_word_embeddings", True) is not True:
            raise CheckpointError(
                "config field tie_word_embeddings = false: a masked-LM decoder with weights of its own is "
                "not implemented; minibert's decoder is the word embedding matrix, as in BERT"
            )
        self.config = config
        self.bert = BertModel(config)
        self.mlm_head = MaskedLMHead(config)
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        self.bert._init_weights(self.mlm_head.transform)
        self.bert._init_weights(self.nsp_head)

    dtype = BertModel.dtype
    device = property(lambda self: self.bert.device)

    @property
    def embeddings(self):
        return self.bert.embeddings

    def forward(
        self,
        input_ids,
        attention_mask=None,
        token_type_ids=None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertPreTrainingOutput:
        out = self.bert(
            input_ids,
            attention_mask,
            token_type_ids,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        return BertPreTrainingOutput(
            prediction_logits=self.mlm_head(out.last_hidden_state, self.bert.embeddings.word_embeddings.weight),
            seq_relationship_logits=self.nsp_head(out.pooler_output),
            last_hidden_state=out.last_hidden_state,
            pooler_output=out.pooler_output,
            hidden_states=out.hidden_states,
            attentions=out.attentions,
        )

    from_pretrained = BertModel.__dict__["from_pretrained"]
    save_pretrained = BertModel.save_pretrained
