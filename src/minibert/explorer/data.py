"""What the explorer shows, computed by one forward pass of minibert's own model.

For one text (or pair), BERT's encoder gives, at every layer, the attention weights of each head
and the hidden state of each position; its masked-LM head, applied to the hidden state of *every*
layer rather than only the last (the "logit lens"), says what the model would guess at each
position if it stopped there. ``ExplorationData`` holds these as numpy arrays:

    L = layers, A = attention heads per layer, T = tokens ([CLS] and [SEP] included),
    H = hidden size, K = guesses kept per position

    attention             (L, A, T, T)   row i: how token i spreads its attention over the tokens
    hidden_states         (L + 1, T, H)  layer 0 is the embeddings' output
    prediction_ids        (L + 1, T, K)  the masked-LM head's K most likely pieces, best first
    prediction_probabilities (L + 1, T, K)  their softmax probabilities over the vocabulary

    >>> data = compute(load_for_exploring("path/to/bert"), "Paris is the [MASK] of France.")  # doctest: +SKIP
    >>> data.tokens[:3], data.attention.shape                                                 # doctest: +SKIP
    (['[CLS]', 'paris', 'is'], (12, 12, 11, 11))

Layers are numbered as ``hidden_states`` numbers them, here and on the page: 0 is the embeddings'
output (it has no attention), 1 … L the encoder layers. Encoder layer ``l``'s weights are
``attention[l - 1]`` (as transformers' ``attentions[l - 1]``); ``attention_map(l, head)`` reads them
by the layer's number, as the page's "layer l, head h" and ``scripts/plot_attention.py --layer l
--head h`` do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ExplorerArgumentError, ExplorerInputError
from ..pretrained import evaluating
from ..tasks.loading import lost_part
from .loading import LoadedModel

MIN_GUESSES = 3  # the page's contract promises at least three guesses per position
# The most guesses a page keeps per position and layer (top_k). Each guess is an int32 id and a float32
# probability in base64, 10.7 bytes, at every layer and position, plus its piece's name once: bert-base at
# 512 tokens (13 × 512 rows, random weights) measured 14.1 MB at top_k 5, 17.4 at 50, 21.0 at 100 (0.073 MB a
# guess), so 100 stays under the 25 MB target (docs/explore.md); the whole vocabulary (30,522) would be
# 2.2 GB, more than a browser parses. The page lists a position's K guesses: 100 is already a long list.
MAX_TOP_K = 100
# The most attention weights a page holds (layers × heads × T²): bert-large at 512 tokens has 101 M, a
# page of ~40 MB in 8 bits (0.38 bytes a weight) and 0.4 GB of float32 while it is made. A model of
# more positions grows as T²: bert-base's shape at 2,048 tokens would be 604 M, a page of ~230 MB.
MAX_ATTENTION_WEIGHTS = 1 << 27


@dataclass(frozen=True)
class ExplorationData:
    """One text through one model: the tokens, and every number the page draws."""

    model_name: str
    tokens: list[str]  # (T,) as the tokenizer cut them, [CLS]/[SEP] included
    input_ids: np.ndarray  # (T,) int64
    token_type_ids: np.ndarray  # (T,) 0 = text, 1 = pair
    word_ids: list[int | None]  # (T,) which word of its text each piece belongs to (None: [CLS]/[SEP])
    offsets: np.ndarray  # (T, 2) each piece's character span [start, end) in its own text
    sequence_ids: list[int | None]  # (T,) 0 = text, 1 = pair, None = special token
    mask_positions: list[int]  # positions of [MASK]
    attention: np.ndarray  # (L, A, T, T) float32
    hidden_states: np.ndarray  # (L + 1, T, H) float32
    prediction_ids: np.ndarray | None  # (L + 1, T, K) int64; None: the checkpoint has no masked-LM head
    prediction_probabilities: np.ndarray | None  # (L + 1, T, K) float32
    prediction_pieces: dict[int, str] | None  # {id: piece} for every id in prediction_ids
    top_k: int  # how many guesses the page shows (K may be larger: at least MIN_GUESSES are kept)
    truncated: bool  # the input was cut (truncate=True): ``cut`` says to what, where and what it lost
    max_positions: int  # the longest input the model takes
    # what the model computed in ("bfloat16", "float16", "int8": approximate numbers, opted into)
    dtype: str = "float32"
    cut: Cut | None = None  # what truncate=True cut; None when nothing was

    @property
    def layers(self) -> int:
        return self.attention.shape[0]

    @property
    def heads(self) -> int:
        return self.attention.shape[1]

    def attention_map(self, layer: int, head: int) -> np.ndarray:
        """The (T, T) weights of encoder layer ``layer`` (1 … L: the page's "layer 3, head 5" is
        ``attention_map(3, 5)``) and ``head`` (from 0); row i is where token i looks."""
        why = " (layer 0 is the embeddings, which have no attention)"
        _check_index("layer", layer, 1, self.layers, why)
        _check_index("head", head, 0, self.heads - 1)
        return self.attention[layer - 1, head]

    def predictions(self, layer: int) -> list[list[tuple[str, float]]] | None:
        """Per position, the guesses ``[(piece, probability), ...]`` of layer ``layer`` (0 = the
        embeddings' output, ..., L), best first; None without a masked-LM head."""
        if self.prediction_ids is None:
            return None
        _check_index("layer", layer, 0, self.layers, " (0 is the embeddings' output)")
        return [
            [(self.prediction_pieces[int(i)], float(p)) for i, p in zip(ids, probabilities)]
            for ids, probabilities in zip(self.prediction_ids[layer], self.prediction_probabilities[layer])
        ]


def _check_index(name: str, value, first: int, last: int, why: str = "") -> None:
    """``value`` is an int from ``first`` to ``last``, or an ExplorerInputError naming the range
    (numpy would take -1 as the last one, and say 'index 5 is out of bounds' of anything else)."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not first <= value <= last:
        raise ExplorerInputError(f"{name} {value!r} does not exist: this model's {name}s are {first}..{last}{why}")


@dataclass(frozen=True)
class Cut:
    """What ``truncate=True`` cut from an input longer than its limit: ``limit`` tokens (``max_length``
    when given, else the model's positions: ``limit_name`` says which), losing each text's ``lost``
    part (its "end", or its "start" where the tokenizer's ``truncation_side`` is "left", as
    transformers cuts), ``text_pieces`` and ``pair_pieces`` pieces of them, ``masks`` [MASK]s among them.

    >>> Cut(20, "max_length", "end", 12, 0, 1).describe()
    'cut to max_length 20: the text lost its last 12 pieces, 1 [MASK] among them'
    """

    limit: int
    limit_name: str  # "max_length" or "the model's positions"
    lost: str  # "end" or "start"
    text_pieces: int
    pair_pieces: int
    masks: int

    def describe(self, max_length_name: str = "max_length") -> str:
        """One sentence, naming ``max_length`` as ``max_length_name`` (the command: ``--max-length``)."""
        limit = f"the model's {self.limit} positions"
        if self.limit_name == "max_length":
            limit = f"{max_length_name} {self.limit}"
        which = "last" if self.lost == "end" else "first"
        parts = [f"the {name} lost its {which} {count} piece{'s' if count != 1 else ''}"
                 for name, count in (("text", self.text_pieces), ("pair", self.pair_pieces)) if count]  # fmt: skip
        said = f"cut to {limit}: {' and '.join(parts)}"
        if self.masks:
            said += f", {self.masks} [MASK]{'s' if self.masks != 1 else ''} among them"
        return said


# The shortest max_length: [CLS] A [SEP] with one piece of A; a pair: [CLS] A [SEP] B [SEP] with one piece of each
# (apps/explore_command.py's --max-length says the same).
SHORTEST = {"text": 3, "pair": 5}


def _encode(loaded: LoadedModel, text, pair, max_length: int | None, truncate: bool):
    """The tokenizer's output for the text (and pair), and what was cut (``Cut``, None when nothing):
    cut to ``max_length`` (else the model's positions) only when asked."""
    model_positions = loaded.encoder.config.max_position_embeddings
    limit = model_positions if max_length is None else max_length
    shortest = SHORTEST["text" if pair is None else "pair"]
    if not isinstance(limit, int) or isinstance(limit, bool) or not shortest <= limit <= model_positions:
        what = "[CLS] A [SEP] B [SEP] with a piece of each" if pair is not None else "[CLS] a piece [SEP]"
        raise ExplorerArgumentError("max_length", max_length, f"an int from {shortest} ({what}) to the model's "
                                                              f"{model_positions} positions")  # fmt: skip
    if pair is not None and loaded.encoder.config.type_vocab_size < 2:
        raise ExplorerInputError(f"this model takes no pair: it has {loaded.encoder.config.type_vocab_size} segment "
                                 "(type_vocab_size), so a second text's segment 1 has no embedding; explore the text "
                                 "alone")  # fmt: skip
    for name, value in (("text", text), ("pair", pair)):
        if value is None and name == "pair":
            continue
        if not isinstance(value, str):
            raise ExplorerInputError(f"the {name} must be a str, got {type(value).__name__}")
        if not value.strip():
            raise ExplorerInputError(f"the {name} is empty: there is nothing to explore")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:  # e.g. a command-line argument whose bytes are not UTF-8
            raise ExplorerInputError(f"the {name} is not valid Unicode: a lone surrogate {value[error.start]!r} at "
                                     f"character {error.start} (bytes that are not UTF-8?)") from None  # fmt: skip
        if not loaded.tokenizer.tokenize(value):  # only characters the tokenizer drops ("\x00\u200b")
            raise ExplorerInputError(f"the {name} gives no tokens (the tokenizer drops each of its characters): "
                                     "there is nothing to explore")  # fmt: skip
    arguments = dict(return_offsets_mapping=True, verbose=False)
    encoding = loaded.tokenizer(text, pair, **arguments)
    length = len(encoding["input_ids"])
    if length > limit:
        if not truncate:
            where = f"max_length {limit}" if max_length is not None else f"the model's {limit} positions"
            what = "the text is" if pair is None else "the text and pair are"
            raise ExplorerInputError(f"{what} {length} tokens long, more than {where}; pass "
                                     "--truncate (truncate=True) to cut it")  # fmt: skip
        whole = encoding
        encoding = loaded.tokenizer(text, pair, truncation=True, max_length=limit, **arguments)
        cut = _what_was_cut(loaded.tokenizer, whole, encoding, limit, "max_length" if max_length is not None else "")
        return encoding, cut
    if len(encoding["input_ids"]) == 0:
        raise ExplorerInputError("the text gives no tokens: there is nothing to explore")
    return encoding, None


def _what_was_cut(tokenizer, whole, cut, limit: int, limit_name: str) -> Cut:
    """The ``Cut`` from the encoding before (``whole``) and after (``cut``) the cut: the pieces each
    text lost (counted by ``sequence_ids``), and the [MASK]s among them."""

    def pieces(encoding, sequence: int) -> int:
        return sum(1 for number in encoding.sequence_ids() if number == sequence)

    def masks(encoding) -> int:
        return sum(1 for piece in encoding["input_ids"] if piece == tokenizer.mask_token_id)

    return Cut(limit, limit_name or "the model's positions", lost_part(tokenizer), pieces(whole, 0) - pieces(cut, 0),
               pieces(whole, 1) - pieces(cut, 1), masks(whole) - masks(cut))  # fmt: skip


def check_top_k(top_k, vocab_size: int | None = None) -> None:
    """``top_k``: an int from 1 to ``MAX_TOP_K`` (what the page holds), and to the vocabulary's size
    when it is known (the model loaded); the command's ``--top-k`` takes the same numbers."""
    high = MAX_TOP_K if vocab_size is None else min(MAX_TOP_K, vocab_size)
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= high:
        why = f"{MAX_TOP_K} (the page stores each guess at every layer)"
        if high < MAX_TOP_K:
            why = f"the vocabulary's {vocab_size}"
        raise ExplorerArgumentError("top_k", top_k, f"an int from 1 to {why}")  # (a TaskArgumentError too)


def compute(loaded: LoadedModel, text: str, pair: str | None = None, *, top_k: int = 5,
            max_length: int | None = None, truncate: bool = False) -> ExplorationData:  # fmt: skip
    """Tokenize, run the encoder once with every attention and hidden state kept, and apply the
    masked-LM head (when there is one) to each layer's hidden state."""
    vocab_size = loaded.encoder.config.vocab_size
    check_top_k(top_k, vocab_size)
    encoding, cut = _encode(loaded, text, pair, max_length, truncate)
    _check_page_size(loaded.encoder.config, len(encoding["input_ids"]))
    ids = torch.tensor([encoding["input_ids"]])  # (1, T)
    token_types = torch.tensor([encoding["token_type_ids"]])  # (1, T)
    encoder = loaded.encoder
    model = loaded.masked_lm if loaded.masked_lm is not None else encoder  # the encoder, with the head if any
    with evaluating(model), torch.inference_mode():  # one forward pass as inference runs it: dropout off
        out = encoder(ids.to(encoder.device), token_type_ids=token_types.to(encoder.device),
                      output_hidden_states=True, output_attentions=True, return_dict=True)  # fmt: skip
        attention = torch.cat(out.attentions).float().cpu().numpy()  # L × (1, A, T, T) → (L, A, T, T)
        hidden = torch.cat(out.hidden_states)  # (L + 1) × (1, T, H) → (L + 1, T, H)
        guesses = None
        if loaded.masked_lm is not None:
            guesses = _logit_lens(loaded, hidden, min(vocab_size, max(top_k, MIN_GUESSES)))
    mask_id = loaded.tokenizer.mask_token_id
    input_ids = ids[0].numpy()
    prediction_ids, probabilities = guesses if guesses is not None else (None, None)
    states = hidden.float().cpu().numpy()
    dtype = computed_in(encoder)
    refuse_what_is_not_finite(attention, states, probabilities, dtype)
    pieces = None
    if prediction_ids is not None:
        pieces = {piece_id: _piece_name(loaded, piece_id) for piece_id in np.unique(prediction_ids).tolist()}
    return ExplorationData(
        model_name=loaded.name,
        tokens=loaded.tokenizer.convert_ids_to_tokens(input_ids.tolist()),
        input_ids=input_ids,
        token_type_ids=token_types[0].numpy(),
        word_ids=encoding.word_ids(),
        offsets=np.asarray(encoding["offset_mapping"], dtype=np.int64).reshape(-1, 2),
        sequence_ids=encoding.sequence_ids(),
        mask_positions=[] if mask_id is None else np.flatnonzero(input_ids == mask_id).tolist(),
        attention=attention,
        hidden_states=states,
        prediction_ids=prediction_ids,
        prediction_probabilities=probabilities,
        prediction_pieces=pieces,
        top_k=top_k,
        truncated=cut is not None,
        max_positions=encoder.config.max_position_embeddings,
        dtype=dtype,
        cut=cut,
    )


def _check_page_size(config, tokens: int) -> None:
    """The page's attention (layers × heads × tokens² weights) within ``MAX_ATTENTION_WEIGHTS``, or
    an ExplorerInputError naming the longest input that fits (before the forward pass)."""
    per_token_pair = config.num_hidden_layers * config.num_attention_heads
    weights = per_token_pair * tokens * tokens
    if weights <= MAX_ATTENTION_WEIGHTS:
        return
    longest = int((MAX_ATTENTION_WEIGHTS // per_token_pair) ** 0.5)
    raise ExplorerInputError(f"{tokens} tokens make {weights:,} attention weights ({config.num_hidden_layers} "
                             f"layers × {config.num_attention_heads} heads × {tokens}²), more than the "
                             f"{MAX_ATTENTION_WEIGHTS:,} one page holds (its size grows as the square of "
                             f"the tokens); explore the first {longest} with --max-length {longest} --truncate "
                             f"(max_length={longest}, truncate=True)")  # fmt: skip


def computed_in(model: torch.nn.Module) -> str:
    """What the model computes in: its parameters' dtype ("float32", "bfloat16", ...), or "int8"
    for a model whose linear layers are int8 (``from_pretrained(..., dtype="int8")``, docs/int8.md):
    its parameters stay float32 there, but its matrix products are int8's, approximate numbers."""
    from ..speed.int8 import is_int8

    return "int8" if is_int8(model) else str(model.dtype).removeprefix("torch.")


def refuse_what_is_not_finite(attention: np.ndarray, hidden_states: np.ndarray, probabilities: np.ndarray | None,
                              dtype: str) -> None:  # fmt: skip
    """An ``ExplorerInputError`` naming the first layer (and head) whose output is NaN or infinite.

    The page stores attention and similarities as integers, and a cast makes NaN a 0: a NaN weight
    would be drawn as 0.0 and a NaN cosine as -1, confident numbers where the model gave none. A
    page of NaN would draw nothing either, so none is made; the one line says where it starts
    (layer l's attention comes before its hidden states; 0 is the embeddings' output)."""
    if np.isfinite(attention).all() and np.isfinite(hidden_states).all() and (
            probabilities is None or np.isfinite(probabilities).all()):  # fmt: skip
        return
    cause = f"(a weight it reads is NaN or infinite, or {dtype} overflowed): the page shows finite numbers only"
    for layer, state in enumerate(hidden_states):
        if layer > 0:
            heads = attention[layer - 1].reshape(attention.shape[1], -1)  # (A, T·T)
            finite = np.isfinite(heads).all(-1)
            if not finite.all():
                head = int(np.argmin(finite))
                raise ExplorerInputError(f"layer {layer}, head {head}: the attention weights are "
                                         f"{_not_finite(heads[head])} {cause}")  # fmt: skip
        if not np.isfinite(state).all():
            raise ExplorerInputError(f"layer {layer}: the hidden states are {_not_finite(state)} {cause}")
    layer = int(np.argmin(np.isfinite(probabilities).reshape(len(probabilities), -1).all(-1)))
    raise ExplorerInputError(f"layer {layer}: the masked-LM head's probabilities are "
                             f"{_not_finite(probabilities[layer])} {cause}")  # fmt: skip


def _not_finite(values: np.ndarray) -> str:
    return "NaN" if np.isnan(values).any() else "infinite"


def _piece_name(loaded: LoadedModel, piece_id: int) -> str:
    """The vocabulary's piece for an id the model guessed; an id the vocabulary does not name (a
    model with more rows than its vocab.txt has distinct lines) is shown as ``[id 6]``."""
    try:
        return loaded.tokenizer.convert_ids_to_tokens(piece_id)
    except ValueError:
        return f"[id {piece_id}]"


def _logit_lens(loaded: LoadedModel, hidden: torch.Tensor, guesses: int) -> tuple[np.ndarray, np.ndarray]:
    """The masked-LM head on every layer's hidden state (L + 1, T, H): the top ``guesses`` pieces
    and their probabilities, (L + 1, T, K) each. One layer at a time: (T, V) logits of bert-base at
    512 positions are 62 MB, all layers at once would be 13 times that."""
    head = loaded.masked_lm.mlm_head
    word_embeddings = loaded.encoder.embeddings.word_embeddings.weight  # (V, H): the tied decoder
    ids, probabilities = [], []
    for state in hidden:  # (T, H)
        logits = head(state[None], word_embeddings)[0].float()  # (T, V)
        top = logits.softmax(-1).topk(guesses, dim=-1)  # (T, K)
        ids.append(top.indices.cpu().numpy())
        probabilities.append(top.values.cpu().numpy())
    return np.stack(ids).astype(np.int64), np.stack(probabilities).astype(np.float32)
