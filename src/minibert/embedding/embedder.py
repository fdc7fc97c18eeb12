"""Embedder: the feature-extraction workflows of the classic BERT tutorials, one call each.

    >>> from minibert import Embedder
    >>> embedder = Embedder.from_pretrained("sentence-transformers/all-MiniLM-L6-v2")   # doctest: +SKIP
    >>> embedder.embed(["A man is eating food.", "A man eats."], normalize=True).shape   # doctest: +SKIP
    (2, 384)

What a "sentence embedding" is, is a choice. A sentence-transformers model makes it itself: its
recipe (pooling, Dense layers, normalization, prompts; see ``recipe.py``) is read with the weights
and followed by default, so ``embed(texts)`` returns what ``SentenceTransformer(model).encode(texts)``
returns. Passing ``pooling`` overrides the recipe's pooling, Dense layers and normalization (the
prompt still applies). A plain BERT's default is mean pooling. The modes (``pooling``, a name or a
list of names whose vectors are concatenated):

* ``"mean"``: the average of the token vectors of the real tokens ([CLS] and [SEP] included, padding
  excluded) — what most sentence-transformers models are trained for, and usually the best without
  fine-tuning; ``"mean_sqrt_len_tokens"``: the sum divided by √length; ``"weightedmean"``: token i
  weighs i + 1;
* ``"cls"``: the final vector of [CLS] (the bge family); ``"lasttoken"``: of the last token ([SEP]);
  ``"pooler"``: tanh(dense([CLS])), the vector BERT was pre-trained to use for next-sentence
  prediction;
* ``"max"``: the element-wise maximum over real tokens; ``"mean_max"``: mean and max, concatenated.

Which layer's vectors (``layers``): ``-1`` is the last layer, ``-2`` the one before, ``0`` the
embedding layer; a list such as ``[-1, -2, -3, -4]`` combines several (``layer_combine``: concat,
sum or mean), as in the tutorials' "sum of the last four layers".

``max_length`` defaults to the model's own limit: ``max_seq_length`` of a sentence-transformers
model (256 for all-MiniLM-L6-v2), else the tokenizer's ``model_max_length`` (512 for BERT).
Texts longer than ``max_length`` tokens are cut (``long_text="truncate"``, with a warning that
counts them) or embedded in overlapping windows (``long_text="window"``): each token's vector comes
from the window in which it has the most context on both sides.

The stages, each a method: tokens (``pieces_for_embedding``) → windows (``_windows``) → hidden
states (``_hidden_states``, in batches) → pooling (``_pooled``) → the recipe's Dense layers and
normalization (``_embed_pieces``). The options travel as one ``EmbedOptions`` value (options.py).

Speed: texts are sorted by length and cut into batches by a token budget of ``batch_size`` × 64
padded tokens (2,048 by default): a batch holds many short texts or a few long ones, so every
forward pass is large enough to run near the machine's matmul peak yet small enough to stay in
cache, and memory does not grow with the length of the texts. Little padding is left, and the
model packs the real tokens of a batch so its per-token layers never touch it (fast_path.py). On
a CPU, batches run in parallel streams, two at once on two threads, each on one (streams.py); a
single batch gets every thread, and so do batches too uneven in work (``batch_cost``) for the
streams to share out. Results are put back in input order; they do not depend on the batching
(up to float rounding, ≤ 1e-5) or on the streams.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..model import BertModel
from ..tokenizer.arguments import one_text
from ..tokenizer.bert_tokenizer import BertTokenizer
from ..tokenizer.encoding import window_starts
from ..tokenizer.fast_basic import FastBasicTokenizer
from .batches import TOKENS_PER_TEXT, length_sorted_batches, token_budget_batches  # noqa: F401 (re-exported)
from .options import POOLINGS, EmbedOptions  # noqa: F401 (POOLINGS: re-exported for the CLI's choices)
from .recipe import SentenceRecipe, read_recipe, similarity

WORD_MERGES = ("mean", "sum", "first", "last")


class Embedder:
    """A tokenizer and a BertModel, turning texts into vectors (following ``recipe``, a
    sentence-transformers model's own, by default)."""

    def __init__(
        self,
        model: BertModel,
        tokenizer: BertTokenizer,
        *,
        max_length: int | None = None,
        recipe: SentenceRecipe | None = None,
    ):
        # The tokenizer must not produce ids the model has no embedding for (refused now, not at a rare word).
        model.config.check_vocabulary(tokenizer.vocab, getattr(model, "name_or_path", "Embedder"))
        self.model = model.eval()
        self.recipe = recipe or SentenceRecipe()
        if self.recipe.do_lower_case and not tokenizer.basic.do_lower_case:
            # sentence-transformers lowercases first (accents are kept); on a copy: the caller's
            # tokenizer stays as it was (the pieces cache is keyed by lowercased words: shared safely).
            basic = tokenizer.basic
            tokenizer = copy.copy(tokenizer)
            tokenizer.basic = FastBasicTokenizer(True, basic.strip_accents, basic.tokenize_chinese_chars)
        self.tokenizer = tokenizer
        # Longest input in tokens, used when embed() is not given max_length: the model's own
        # training length for sentence-transformers models (max_seq_length), else the tokenizer's.
        max_length = max_length or self.recipe.max_seq_length or tokenizer.model_max_length
        self.max_length = min(max_length, model.config.max_position_embeddings)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike,
        *,
        revision: str | None = None,
        dtype: torch.dtype | str | None = None,
        device: torch.device | str | None = None,
        gemm: str | None = None,
    ) -> Embedder:
        """Load the tokenizer and model of a local directory or a hub repository (``dtype`` and
        ``gemm`` as ``BertModel.from_pretrained`` takes them)."""
        tokenizer = BertTokenizer.from_pretrained(name_or_path, revision=revision)
        model = BertModel.from_pretrained(name_or_path, revision=revision, dtype=dtype, device=device, gemm=gemm)
        recipe = read_recipe(name_or_path, revision, hidden_size=model.config.hidden_size)
        return cls(model, tokenizer, recipe=recipe)

    # ------------------------------------------------------------------ sentence vectors

    def embed(
        self,
        texts: str | Sequence[str],
        options: EmbedOptions | None = None,
        *,
        progress: bool | None = None,
        **changes,
    ) -> np.ndarray:
        """One vector per text: (N, dim) float32 for a list of N texts, (dim,) for a single str.

        The options (an ``EmbedOptions``, or its fields as keywords: ``embed(texts, pooling="cls")``):

        * ``pooling``: None (default) follows the model's recipe (a sentence-transformers model's
          pooling, Dense layers and normalization; mean pooling for a plain BERT). A mode or a list
          of modes (see the module doc) overrides the recipe: then no Dense layer is applied and
          ``normalize`` defaults to False.
        * ``layers``: -1 (last), -2, ..., 0 (embeddings), or a list combined by ``layer_combine``
          ("concat", "sum", "mean"). ``dim`` is the hidden size, times the number of layers for
          "concat", times the number of pooling modes (two for "mean_max").
        * ``normalize``: unit-length vectors (then a dot product is the cosine similarity);
          None: as the recipe says.
        * ``prompt_name`` / ``prompt``: text put before each text, as in sentence-transformers: the
          model's prompt of that name (e5's "query"), or this string; neither: the model's
          default prompt, if it has one.
        * ``batch_size``: work per forward pass, in texts of 64 tokens (see the module doc).
        * ``max_length``: tokens per text including [CLS] and [SEP] (default: the model's).
        * ``long_text``: "truncate" (with a warning that counts the cut texts) or "window".
        * ``streams``: on a CPU, independent batches side by side (default True).

        ``progress``: a progress bar on stderr; by default only on a terminal and a long run.
        ``embed_with_report`` returns the count of truncated texts as data instead of a warning.
        """
        single = isinstance(texts, str)
        result = self.embed_with_report([texts] if single else texts, EmbedOptions.of(options, **changes), progress)
        if result.truncated:
            warnings.warn(
                f"{result.truncated} of {len(result.vectors)} texts are longer than max_length={result.max_length} "
                "tokens and were truncated; pass long_text='window' to embed all of each text",
                stacklevel=2,
            )
        return result.vectors[0] if single else result.vectors

    def embed_with_report(
        self, texts: Sequence[str], options: EmbedOptions | None = None, progress: bool | None = None
    ) -> Embedded:
        """``embed`` for a list of texts, returning the vectors with what happened to the texts."""
        texts = list(texts)
        if not all(isinstance(text, str) for text in texts):
            raise TypeError("texts must be a str or a sequence of str")
        options = EmbedOptions.of(options)
        pieces, skip = self.pieces_for_embedding(texts, options)
        return self._embed_pieces(pieces, options, skip, progress)

    def pieces_for_embedding(
        self, texts: Sequence[str], options: EmbedOptions | None = None
    ) -> tuple[list[list[int]], int]:
        """Stage 1, tokens: each text's piece ids (the prompt, if any, in front), and how many
        leading tokens the pooling leaves out ([CLS] and the prompt's pieces, when the recipe says
        so). A server tokenizes once with this, counts and checks the tokens, and passes them to
        ``embed_pieces``."""
        options = EmbedOptions.of(options)
        prefix = self.recipe.prompt_for(options.prompt, options.prompt_name)
        skip = 0
        if prefix and options.follows_recipe and not self.recipe.include_prompt:
            skip = 1 + len(self.tokenizer.piece_ids(prefix))
        return [self.tokenizer.piece_ids(prefix + text if prefix else text) for text in texts], skip

    def embed_pieces(
        self,
        pieces: Sequence[list[int]],
        options: EmbedOptions | None = None,
        *,
        skip: int = 0,
        progress: bool | None = None,
        **changes,
    ) -> np.ndarray:
        """The second half of ``embed``: (N, dim) vectors of texts given as piece ids (without
        [CLS]/[SEP]); the options are ``embed``'s (an EmbedOptions, or its fields as keywords)."""
        return self._embed_pieces(pieces, EmbedOptions.of(options, **changes), skip, progress).vectors

    def _embed_pieces(self, pieces: Sequence[list[int]], options: EmbedOptions, skip: int, progress) -> Embedded:
        """Stages 2 to 5: windows → hidden states → pooling → the recipe's Dense layers and normalization."""
        recipe = self.recipe
        modes = recipe.pooling if options.follows_recipe else options.pooling
        layer_list = self._layer_list(options.layers)
        if "pooler" in modes and layer_list != [-1]:
            raise ValueError("pooling='pooler' uses the last layer; it cannot be combined with layers")
        dense = recipe.dense if options.follows_recipe else []
        if dense and (layer_list != [-1]):
            raise ValueError("this model's Dense layers take its pooled last layer; pass pooling= to pool other layers")
        normalize = options.normalize
        if normalize is None:  # the recipe's normalization, or none when the pooling was chosen here
            normalize = recipe.normalize if options.follows_recipe else False
        max_length = self._max_length(options)
        windows, truncated = self._windows(pieces, max_length, options.long_text)  # stage 2
        texts = self._hidden_states(windows, options, progress, pooling=modes, skip=skip)  # stage 3 (and 4)
        if not pieces:
            return Embedded(np.zeros((0, self.dimension(options)), np.float32), truncated, max_length)
        out = torch.from_numpy(np.stack([self._pooled(text, modes, skip) for text in texts]))  # stage 4
        for layer in dense:  # stage 5: the recipe
            out = layer(out)
        if normalize and len(out):
            out = out / out.norm(dim=1, keepdim=True).clamp(min=1e-12)
        return Embedded(out.numpy().astype(np.float32, copy=False), truncated, max_length)

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(N, M) similarity scores of two sets of vectors from ``embed``, with the model's own
        similarity function (``similarity_fn_name``: cosine unless the model says dot, euclidean or
        manhattan), as sentence-transformers' ``model.similarity`` computes them."""
        a, b = (torch.as_tensor(np.atleast_2d(x), dtype=torch.float32) for x in (a, b))
        return similarity(a, b, self.recipe.similarity_fn_name).numpy()

    def dimension(self, options: EmbedOptions | str | Sequence[str] | None = None, *args, **changes) -> int:
        """Length of the vectors ``embed`` returns with these options: an EmbedOptions, its fields as
        keywords, or (as before EmbedOptions) ``dimension(pooling, layers, layer_combine)``."""
        if options is not None and not isinstance(options, EmbedOptions):  # the positional spelling
            changes.update(zip(("pooling", "layers", "layer_combine"), (options, *args)))
            options = None
        elif args:
            raise TypeError("dimension() takes an EmbedOptions, or pooling, layers and layer_combine")
        options = EmbedOptions.of(options, **changes)
        hidden = self.model.config.hidden_size
        if options.follows_recipe and self.recipe.dense:
            return self.recipe.dimension(hidden)
        modes = self.recipe.pooling if options.follows_recipe else options.pooling
        count = len(self._layer_list(options.layers))
        width = hidden * count if options.layer_combine == "concat" else hidden
        return width * sum(2 if mode == "mean_max" else 1 for mode in modes)

    # ------------------------------------------------------------------ token and word vectors

    def embed_tokens(
        self,
        text: str,
        *,
        layers: int | Sequence[int] = -1,
        layer_combine: str = "concat",
        max_length: int | None = None,
    ) -> tuple[list[str], np.ndarray]:
        """The tokens of ``text`` ([CLS] … [SEP]) and one contextual vector each: (T, dim).
        Long texts are embedded in windows, each token taking its vector from the window where it
        has the most context."""
        text = one_text(text, "embed_tokens", "one call per text, or embed(texts) for one vector per text")
        options = EmbedOptions(layers=layers, layer_combine=layer_combine, max_length=max_length, long_text="window")
        windows, _ = self._windows([self.tokenizer.piece_ids(text)], self._max_length(options), "window")
        (states,) = self._hidden_states(windows, options, progress=False, pooling=None, skip=0)
        ids: list[int] = []
        for start, window in windows[0]:  # the text's pieces, from its (overlapping) windows
            ids[start:] = window
        tokens = self.tokenizer.convert_ids_to_tokens(self.tokenizer.build_inputs_with_special_tokens(ids))
        return tokens, _assemble_tokens(states.windows)

    def word_vectors(
        self,
        text: str,
        *,
        merge: str = "mean",
        layers: int | Sequence[int] = -1,
        layer_combine: str = "concat",
        max_length: int | None = None,
    ) -> tuple[list[str], np.ndarray]:
        """Whole words (BERT's basic tokens: lowercased words and punctuation marks) with one vector
        each, merged from the vectors of their word pieces (``merge``: mean, sum, first, last).

        >>> words, vectors = embedder.word_vectors("The embeddings are unbelievable")   # doctest: +SKIP
        >>> words                                                                        # doctest: +SKIP
        ['the', 'embeddings', 'are', 'unbelievable']          # 'em ##bed ##ding ##s' → one vector
        """
        text = one_text(text, "word_vectors", "one call per text, or embed(texts) for one vector per text")
        if merge not in WORD_MERGES:
            raise ValueError(f"merge must be one of {WORD_MERGES}, got {merge!r}")
        words, pieces = self.tokenizer.words_and_pieces(text)
        _, vectors = self.embed_tokens(text, layers=layers, layer_combine=layer_combine, max_length=max_length)
        vectors = vectors[1:-1]  # drop [CLS] and [SEP]
        merged, position = [], 0
        for word_pieces in pieces:
            chunk = vectors[position : position + len(word_pieces)]
            position += len(word_pieces)
            if merge == "mean":
                merged.append(chunk.mean(axis=0))
            elif merge == "sum":
                merged.append(chunk.sum(axis=0))
            else:
                merged.append(chunk[0] if merge == "first" else chunk[-1])
        dim = vectors.shape[1]
        return words, (np.stack(merged) if merged else np.zeros((0, dim), np.float32)).astype(np.float32)

    # ------------------------------------------------------------------ machinery

    def _layer_list(self, layers: Sequence[int]) -> list[int]:
        """``layers`` as negative indices into hidden_states (L + 1 of them), each checked to exist."""
        num_layers = self.model.config.num_hidden_layers
        count = num_layers + 1
        for layer in layers:
            if not -count <= layer < count:
                raise ValueError(
                    f"layer {layer} does not exist: this model has hidden states 0..{num_layers} (or -1..-{count})"
                )
        return [layer - count if layer >= 0 else layer for layer in layers]

    def _max_length(self, options: EmbedOptions) -> int:
        limit = self.model.config.max_position_embeddings
        max_length = self.max_length if options.max_length is None else options.max_length
        if not isinstance(max_length, int) or isinstance(max_length, bool) or not 3 <= max_length <= limit:
            raise ValueError(f"max_length must be an int from 3 to max_position_embeddings={limit}, got {max_length!r}")
        return max_length

    def _windows(
        self, pieces: Sequence[list[int]], max_length: int, long_text: str
    ) -> tuple[list[list[tuple[int, list[int]]]], int]:
        """Stage 2: each text's windows [(start, piece ids)], one unless the text is long and
        ``long_text`` is "window"; and how many texts were truncated."""
        room = max_length - self.tokenizer.num_special_tokens_to_add()  # [CLS] and [SEP]
        windows, truncated = [], 0
        for ids in pieces:
            if len(ids) > room and long_text == "truncate":
                ids, truncated = ids[:room], truncated + 1
            starts = window_starts(len(ids), room, room // 2)  # windows overlap by half
            windows.append([(start, ids[start : start + room]) for start in starts])
        return windows, truncated

    def _hidden_states(self, sequences, options: EmbedOptions, progress, pooling, skip) -> list[TextStates]:
        """Stage 3: every window of every text through the model, in length-sorted batches.

        Returns, per text, its windows' token vectors — or, for a text that fits in one window when
        ``pooling`` modes are given, its vector pooled right in the batch (stage 4 done early, the
        first ``skip`` tokens left out), so the token vectors need not be kept."""
        layer_list = self._layer_list(options.layers)
        tokenizer = self.tokenizer
        windows = [  # (text index, start, [CLS] pieces [SEP])
            (index, start, tokenizer.build_inputs_with_special_tokens(ids))
            for index, text_windows in enumerate(sequences)
            for start, ids in text_windows
        ]
        results = [TextStates() for _ in sequences]
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.unk_token_id  # masked

        def forward(batch: list[int]):
            """One batch through the model: its token vectors, pooler vectors and pooled vectors."""
            rows = [windows[i][2] for i in batch]
            input_ids = torch.full((len(rows), len(rows[0])), pad, dtype=torch.long)
            attention_mask = torch.zeros_like(input_ids)
            for row, ids in enumerate(rows):
                input_ids[row, : len(ids)] = torch.tensor(ids)
                attention_mask[row, : len(ids)] = 1
            with torch.inference_mode():
                out = self.model(
                    input_ids, attention_mask, output_hidden_states=layer_list != [-1], skip_padding=True
                )  # pooling reads real tokens only
                if layer_list == [-1]:
                    states = out.last_hidden_state.float()
                else:
                    states = _combine([out.hidden_states[layer].float() for layer in layer_list], options.layer_combine)
                pooler = out.pooler_output.float() if pooling and "pooler" in pooling else None
                mask = attention_mask.to(states.device).unsqueeze(-1).to(states.dtype)  # (B, T, 1)
                mask[:, :skip] = 0
                pooled = _pool(states, mask, pooler, pooling).cpu().numpy() if pooling else None
            return batch, states, pooler, pooled

        # On a CPU, batches run in parallel streams, each on its share of the threads (streams.py).
        # Closed on the way out, even by an exception here: no stream goes on computing for nobody.
        streams = 1 if self.model.device.type != "cpu" or not options.streams else None
        lengths = [len(window[2]) for window in windows]
        batches, outputs = length_sorted_batches(lengths, forward, options.batch_size, self.model.config, streams)
        with contextlib.closing(outputs):
            for batch, states, pooler, pooled in _progress(outputs, progress, batches):
                for row, i in enumerate(batch):
                    index, start, ids = windows[i]
                    if pooled is not None and len(sequences[index]) == 1:
                        results[index].pooled = pooled[row]
                    else:
                        pooler_row = pooler[row].cpu().numpy() if pooler is not None else None
                        results[index].windows.append((start, states[row, : len(ids)].cpu().numpy(), pooler_row))
        for text in results:
            text.windows.sort(key=lambda window: window[0])
        return results

    @staticmethod
    def _pooled(text: TextStates, modes: tuple[str, ...], skip: int) -> np.ndarray:
        """Stage 4: a text's pooled vector: computed in its batch, or over its assembled windows."""
        if text.pooled is not None:
            return text.pooled
        tokens = torch.from_numpy(_assemble_tokens(text.windows)).unsqueeze(0)  # (1, T, dim)
        pooler = None
        if "pooler" in modes:  # one pooler output per window: their mean
            pooler = torch.from_numpy(np.mean([pooler for _, _, pooler in text.windows], axis=0)).unsqueeze(0)
        mask = torch.ones(1, tokens.shape[1], 1)
        mask[:, :skip] = 0
        return _pool(tokens, mask, pooler, modes)[0].numpy()


@dataclass
class Embedded:
    """What ``embed_with_report`` returns: the vectors and what happened to the texts."""

    vectors: np.ndarray  # (N, dim) float32
    truncated: int  # texts longer than max_length that were cut (long_text="truncate")
    max_length: int  # the limit that applied, in tokens with [CLS] and [SEP]


@dataclass
class TextStates:
    """One text after the forward passes: its pooled vector (when pooled in its batch), or its
    windows as (start, token vectors (2 + window length, dim), pooler vector or None)."""

    pooled: np.ndarray | None = None
    windows: list[tuple[int, np.ndarray, np.ndarray | None]] = field(default_factory=list)


def _combine(states: list[torch.Tensor], how: str) -> torch.Tensor:
    if len(states) == 1:
        return states[0]
    if how == "concat":
        return torch.cat(states, dim=-1)
    stacked = torch.stack(states)  # (layers, B, T, H)
    return stacked.sum(0) if how == "sum" else stacked.mean(0)


def _pool(states: torch.Tensor, mask: torch.Tensor, pooler, modes: tuple[str, ...]) -> torch.Tensor:
    """states (B, T, dim), mask (B, T, 1): 1 for the tokens to pool → (B, dim · number of modes),
    each mode as sentence-transformers' Pooling computes it."""
    return torch.cat([_pool_one(states, mask, pooler, mode) for mode in modes], dim=-1)


def _pool_one(states: torch.Tensor, mask: torch.Tensor, pooler, mode: str) -> torch.Tensor:
    if mode == "pooler":
        return pooler
    if mode in ("cls", "lasttoken"):  # the first (or last) pooled token: [CLS] (or [SEP])
        pooled = mask[..., 0] > 0  # (B, T)
        first = pooled.int().argmax(1)
        last = pooled.shape[1] - 1 - pooled.flip(1).int().argmax(1)
        return states[torch.arange(states.shape[0]), first if mode == "cls" else last]  # (B, dim)
    if mode == "max":
        return states.masked_fill(mask == 0, float("-inf")).amax(1)
    if mode == "weightedmean":  # token i (from 0) weighs i + 1
        weights = mask * torch.arange(1, states.shape[1] + 1, dtype=mask.dtype).view(1, -1, 1)  # (B, T, 1)
        return (states * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    total, count = (states * mask).sum(1), mask.sum(1).clamp(min=1e-9)  # (B, dim), (B, 1)
    mean = total / count
    if mode == "mean":
        return mean
    if mode == "mean_sqrt_len_tokens":
        return total / count.sqrt()
    return torch.cat([mean, states.masked_fill(mask == 0, float("-inf")).amax(1)], dim=-1)  # mean_max


def _assemble_tokens(parts) -> np.ndarray:
    """Token vectors of a whole text from its windows' token vectors.

    ``parts`` = [(start, states (2 + window length, dim), pooler), ...] sorted by start. Each piece
    takes its vector from the window in which it is farthest from an edge (the most context on its
    shorter side); [CLS] and [SEP] get the mean of all windows' [CLS] and [SEP]."""
    if len(parts) == 1:
        return parts[0][1]
    length = parts[-1][0] + parts[-1][1].shape[0] - 2
    out = np.empty((length + 2, parts[0][1].shape[1]), dtype=np.float32)
    out[0] = np.mean([states[0] for _, states, _ in parts], axis=0)
    out[-1] = np.mean([states[-1] for _, states, _ in parts], axis=0)
    # Only the windows that cover a position compete for it (two or three, as windows overlap by
    # half): `first` is the first window not yet behind the position, so the work is linear in the
    # text's length, not its square.
    first = 0
    for position in range(length):
        while parts[first][0] + parts[first][1].shape[0] - 2 <= position:
            first += 1
        best, best_context = None, -1
        for index in range(first, len(parts)):
            start, states, _ = parts[index]
            if start > position:
                break
            size = states.shape[0] - 2
            context = min(position - start, start + size - 1 - position)
            if context > best_context:
                best, best_context = (start, states), context
        start, states = best
        out[position + 1] = states[position - start + 1]
    return out


def _progress(results: Iterator, progress: bool | None, batches: list):
    """A tqdm bar over ``results`` (one per batch) when asked, or by default when stderr is a
    terminal and the run is long."""
    show = progress if progress is not None else (sys.stderr.isatty() and len(batches) > 8)
    if not show:
        return results
    from tqdm.auto import tqdm

    return tqdm(results, total=len(batches), desc="embedding", unit="batch", file=sys.stderr)
