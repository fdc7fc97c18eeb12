"""BERT, one module per idea of the paper (Devlin et al., 2018, "BERT: Pre-training of Deep
Bidirectional Transformers for Language Understanding"). Read it top-down.

Shape legend used in the comments:
    B = batch size, T = tokens per sequence, H = hidden size (768 for base), L = layers (12),
    N = attention heads (12), S = head size (H / N = 64), F = feed-forward size (4H = 3072).

    input_ids (B, T)
      └─ Embeddings: word piece + position + segment, LayerNorm      → (B, T, H)
      └─ EncoderLayer × L:                                            (B, T, H)
           x = LayerNorm(x + Attention(x))      every token looks at every other token
           x = LayerNorm(x + FeedForward(x))    each token on its own: H → F → H
      └─ last_hidden_state (B, T, H);  Pooler: tanh(W · h[CLS])      → pooler_output (B, H)

What this file leaves to others: checking the inputs (inputs.py), loading pretrained weights
(loading/, through the base class in pretrained.py), the task heads (heads.py), and speed. Speed
enters in two named places, each computing the same numbers as the formulas written out here (up to
the order of float sums, except in a float16 row with no real token: speed/fast_path.py;
tests/test_model_padding.py and tests/test_speed_book_modules.py compare them):

* ``layout`` in ``SelfAttention.forward`` (speed/fast_path.py): a fused attention kernel, Q, K and V
  as one product where a GPU trains, and, where a caller asks for it by name
  (``skip_padding=True``), padding packed away;
* ``speed_up`` at the end of ``from_pretrained`` (speed/seam.py): a faster GEMM library swapped into the
  linear layers. ``model.use_book_modules()`` turns both off: the model is then this file's code alone.

``TransformersNames`` in the bases only answers transformers' module names (``model.encoder.layer[3]``)
with these (loading/transformers_names.py).
"""

from __future__ import annotations

from collections.abc import ItemsView, KeysView, Mapping, ValuesView
from dataclasses import dataclass, fields

import torch
import torch.utils._pytree as pytree
from torch import nn

from .activations import activation, is_hooked
from .config import BertConfig
from .inputs import prepare_inputs, recording_graph
from .loading.transformers_names import TransformersNames
from .pretrained import PretrainedBert
from .speed.fast_path import FastLayout


class Embeddings(TransformersNames, nn.Module):
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
        embeddings = embeddings + self.position_embeddings(position_ids)  # (B, T, H)
        return self.dropout(self.layer_norm(embeddings))


class SelfAttention(TransformersNames, nn.Module):
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
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, layout: FastLayout | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, T, H), mask (B, 1, 1, T) additive → (B, T, H) and the weights (B, N, T, T)."""
        if layout is not None:  # where the fast path enters (speed/fast_path.py): same numbers, no weights kept
            return self.output(layout.self_attention(x, self, mask)), None
        q, k, v = self.query(x), self.key(x), self.value(x)  # (B, T, H) each
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)  # (B, N, T, S) each
        scores = (q @ k.transpose(-1, -2)) * self.head_size**-0.5  # (B, N, T, T): query · key / √S
        if mask is not None:
            scores = scores + mask  # padding keys: + the dtype's minimum, so softmax gives them 0
        weights = self.dropout(scores.softmax(dim=-1))  # (B, N, T, T): each row sums to 1
        context = weights @ v  # (B, N, T, S)
        batch, _, tokens, _ = context.shape
        # (B, N, T, S) -transpose-> (B, T, N, S) -merge-> (B, T, H)
        context = context.transpose(1, 2).reshape(batch, tokens, -1)
        return self.output(context), weights

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = x.shape
        # (B, T, H) -split-> (B, T, N, S) -transpose-> (B, N, T, S)
        return x.view(batch, tokens, self.num_heads, self.head_size).transpose(1, 2)


class FeedForward(TransformersNames, nn.Module):
    """The position-wise feed-forward network: H → F (activation) → H, for each token on its own."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.activation = activation(config.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shown = is_hooked(self.intermediate)  # a forward hook keeps the pre-activation (asked before: it may go)
        hidden = self.intermediate(x)  # (B, T, F): the largest tensor of the layer
        # (in place when nothing else holds the pre-activation, no gradient nor hook: one (B, T, F) buffer fewer;
        # not while jit traces, whose check runs the call again without gradients and compares the graphs)
        inplace = not hidden.requires_grad and not shown and not torch.jit.is_tracing()
        return self.output(self.activation(hidden, inplace=inplace))


class EncoderLayer(TransformersNames, nn.Module):
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
        self, x: torch.Tensor, mask: torch.Tensor | None, layout: FastLayout | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, weights = self.attention(x, mask, layout)
        # (the sum in x's dtype: under autocast the products are bfloat16 and the residual stream stays float32)
        x = self.attention_norm(x + self.dropout(attended))
        x = self.output_norm(x + self.dropout(self.feed_forward(x)))
        return x, weights


class Pooler(nn.Module):
    """The sentence-level vector BERT was pre-trained to produce for next-sentence prediction:
    tanh(dense(h[CLS])), the final hidden state of the first token through one more layer."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden_states[:, 0]))  # (B, T, H) -[CLS]-> (B, H)


def additive_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, T) of 1 = real, 0 = pad  →  (B, 1, 1, T) of 0 = attend, dtype-minimum = ignore."""
    keep = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - keep) * torch.finfo(dtype).min


def as_outputs(layout: FastLayout | None, zeros_where_padding: torch.Tensor | None):
    """How the layers' states become outputs (B, T, H): packed tokens put back in their places, zeros
    at [PAD] rows (speed/fast_path.py); where nothing was packed (left padding, a row with no real
    token, attention written out) and ``zeros_where_padding`` (the attention mask, with
    ``skip_padding``) is given, the [PAD] rows set to zeros, so that promise holds on every path."""
    if layout is not None and layout.packing is not None:
        return layout.unpack  # (P, H) -> (B, T, H), zeros at padding
    if zeros_where_padding is not None:
        is_padding = ~zeros_where_padding.bool()[:, :, None]  # (B, T, 1)
        return lambda states: states.masked_fill(is_padding, 0.0)
    return lambda states: states


class ModelOutput(Mapping):
    """What a model returns: a dataclass read by attribute (``out.pooler_output``) that is also, as
    transformers' ModelOutput, an ordered mapping of the fields that were computed (the ones not None):

    >>> out = model(**inputs, output_hidden_states=True)                          # doctest: +SKIP
    >>> list(out), len(out), "attentions" in out                                  # doctest: +SKIP
    (['last_hidden_state', 'pooler_output', 'hidden_states'], 3, False)
    >>> out["pooler_output"] is out.pooler_output is out[1]                       # doctest: +SKIP
    True

    So ``dict(out)``, ``out.items()`` and ``out.get("attentions")`` work as there (``out.keys()`` prints
    ``odict_keys(['last_hidden_state', ...])``), and an integer or a slice indexes the computed fields
    in order: ``out[1:]``, or ``to_tuple()`` for all of them (what ``return_dict=False`` returns).

    Each kind of output is a pytree node of torch's (its computed fields, by name), as transformers'
    are: ``torch.export`` records a model that returns one, and DDP with ``static_graph`` finds its
    tensors (an unregistered class was "not a known type" to export, and a leaf to the others)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        pytree.register_pytree_node(
            cls,
            lambda out: (list(out.values()), list(out.keys())),  # (the tensors computed, their names)
            lambda tensors, names: cls(**dict(zip(names, tensors))),
            serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",  # (an exported program saved)
        )

    def __post_init__(self):
        """``type(out)({name: value, ...})``, as torch's default_collate and pin_memory and transformers'
        nested_detach rebuild a mapping, sets those fields (as transformers' ModelOutput does), not the
        first field to the dict."""
        first, *others = fields(self)
        given = getattr(self, first.name)
        if (
            isinstance(given, Mapping)
            and set(given) <= {f.name for f in fields(self)}
            and all(getattr(self, field.name) is None for field in others)
        ):
            setattr(self, first.name, None)
            for name, value in given.items():
                setattr(self, name, value)

    def __iter__(self):  # the names of the computed fields, in the dataclass's order
        return (field.name for field in fields(self) if getattr(self, field.name) is not None)

    def __len__(self) -> int:
        return len(self.to_tuple())

    def __contains__(self, name) -> bool:
        return name in tuple(self)

    def __getitem__(self, key):
        if not isinstance(key, str):
            return self.to_tuple()[key]  # an index or a slice
        if key not in self:
            raise KeyError(f"{key!r} is not in this {type(self).__name__}: it holds {', '.join(self)}")
        return getattr(self, key)

    def get(self, name, default=None):  # by name only, as a dict's (``out.get(0)`` is the default)
        return getattr(self, name) if name in self else default

    def keys(self) -> KeysView:  # printed as transformers': odict_keys(['last_hidden_state', ...])
        return _Keys(self)

    def values(self) -> ValuesView:
        return _Values(self)

    def items(self) -> ItemsView:
        return _Items(self)

    def to_tuple(self) -> tuple:
        return tuple(getattr(self, name) for name in self)


# The views of a ModelOutput print what they hold, as transformers' (an OrderedDict's) do; a plain
# view of a mapping prints the whole mapping, every tensor of the output included.
class _Keys(KeysView):
    def __repr__(self) -> str:
        return f"odict_keys({list(self)!r})"


class _Values(ValuesView):
    def __repr__(self) -> str:
        return f"odict_values({list(self)!r})"


class _Items(ItemsView):
    def __repr__(self) -> str:
        return f"odict_items({list(self)!r})"


@dataclass
class BertOutput(ModelOutput):
    last_hidden_state: torch.Tensor  # (B, T, H): the final vector of every token
    pooler_output: torch.Tensor | None = None  # (B, H): tanh(dense(h[CLS]))
    hidden_states: tuple[torch.Tensor, ...] | None = None  # L + 1 tensors (B, T, H): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None = None  # L tensors (B, N, T, T): attention weights per layer


class BertModel(TransformersNames, PretrainedBert):
    """The BERT encoder: embeddings, ``num_hidden_layers`` encoder layers and the pooler.

    >>> model = BertModel.from_pretrained("google-bert/bert-base-uncased")       # doctest: +SKIP
    >>> out = model(**tokenizer("I love Paris", return_tensors="pt"))            # doctest: +SKIP
    >>> out.last_hidden_state.shape, out.pooler_output.shape                     # doctest: +SKIP
    (torch.Size([1, 5, 768]), torch.Size([1, 768]))

    Every position of ``last_hidden_state`` is computed, [PAD] rows too, as transformers computes
    them. ``model(..., skip_padding=True)`` is for callers that never read [PAD] rows (pooling, the
    tasks, the server): those rows are zeros then, and their work is skipped where the fast path can
    pack the batch (see ``forward``). ``model.use_book_modules()`` runs this file's modules alone
    (see speed/seam.py for what ``from_pretrained`` swaps in, and why).
    """

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        config.check()  # (a field set after the config was made: 5 heads for a width of 32, refused here)
        self.config = config
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_hidden_layers))
        self.pooler = Pooler(config) if add_pooling_layer else None
        self.use_fast_path = True
        self.short_attention: dict[int, int] = {}  # fast path: {threads: T up to which attention is written out}
        self.init_weights()

    def forward(
        self,
        input_ids,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        use_fast_path: bool | None = None,
        skip_padding: bool = False,
    ) -> BertOutput:
        """input_ids (B, T) → BertOutput(last_hidden_state (B, T, H), pooler_output (B, H), ...).
        ``position_ids`` (B, T): the row of the position table each token reads (default 0, 1, ..., T-1).

        ``use_fast_path`` (default: the model's): False writes attention out as above. ``skip_padding``:
        the [PAD] rows (attention_mask 0) of ``last_hidden_state`` and of every ``hidden_states`` are
        zeros, on every path (the attention weights are left as computed). The fast path with right
        padding and a real token in every row computes the real tokens only (speed/fast_path.py
        packs them); otherwise every row is computed and the [PAD] rows are set to zeros."""
        ids, token_types, positions, attention_mask, given = prepare_inputs(
            self, input_ids, attention_mask, token_type_ids, position_ids
        )
        # Choices read the mask where it was given: a GPU's copy would make the CPU wait for the GPU.
        recording = recording_graph()  # jit.trace, onnx.export, torch.export, torch.compile: FastLayout.for_call
        padded = attention_mask is not None and (recording or not bool(given.all()))
        # The fast path keeps no attention weights, so asking for them runs the plain formula.
        fast = (self.use_fast_path if use_fast_path is None else use_fast_path) and not output_attentions
        layout = FastLayout.for_call(given, padded, recording, skip_padding, self.short_attention, ids.device) \
            if fast else None  # fmt: skip
        if layout is not None:  # (B, T) → (P,): the real tokens only, when packing applies
            ids, token_types, positions = layout.pack(ids), layout.pack(token_types), layout.pack(positions)
        x = self.embeddings(ids, token_types, positions)  # (B, T, H)
        mask = additive_mask(attention_mask, x.dtype) if padded else None  # (B, 1, 1, T)

        unpack = as_outputs(layout, attention_mask if skip_padding and padded else None)  # back to (B, T, H)
        hidden_states = [unpack(x)] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for layer in self.layers:
            x, weights = layer(x, mask, layout)
            if output_hidden_states:
                hidden_states.append(unpack(x))
            if output_attentions:
                attentions.append(weights)
        # The pooler reads position 0 as computed: with left padding a [PAD] row (transformers reads it
        # too), which skip_padding zeroes only in the outputs. Packed, position 0 is every row's [CLS].
        computed = x if x.dim() == 3 else None  # (B, T, H), or None: packed (P, H)
        x = hidden_states[-1] if output_hidden_states else unpack(x)

        return BertOutput(
            last_hidden_state=x,
            pooler_output=self.pooler(x if computed is None else computed) if self.pooler is not None else None,
            hidden_states=tuple(hidden_states) if hidden_states is not None else None,
            attentions=tuple(attentions) if attentions is not None else None,
        )
