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
model (256 for all-MiniLM-L6-v2), else the tokenizer's ``model_max_length`` (512 for BERT), at most
the model's ``max_position_embeddings``, as sentence-transformers caps it (a tokenizer without a
length, transformers' "no limit" 1e30, gives the positions).
Texts longer than ``max_length`` tokens are cut (``long_text="truncate"``, with a warning that
counts them; at their end, or at their start where the tokenizer's ``truncation_side`` is "left", as
sentence-transformers cuts them) or embedded in overlapping windows (``long_text="window"``): each
token's vector comes from the window in which it has the most context on both sides.

The stages, each in its module: tokens (``pieces_for_embedding``) → windows (windows.py) → hidden
states (hidden_states.py: batches, streams) → pooling (pooling.py) → the recipe's Dense layers and
normalization (``_embed_pieces``); word vectors merge the pieces' vectors (word_vectors.py). The
options travel as one ``EmbedOptions`` value (options.py).

Speed: texts are sorted by length and cut into batches by a token budget of ``batch_size`` × 64
padded tokens (2,048 by default): a batch holds many short texts or a few long ones, so every
forward pass is large enough to run near the machine's matmul peak yet small enough to stay in
cache, and memory does not grow with the length of the texts. Little padding is left, and the
model packs the real tokens of a batch so its per-token layers never touch it (speed/fast_path.py). On
a CPU, batches run in parallel streams, two at once on two threads, each on one (streams.py); a
single batch gets every thread, and so do batches too uneven in work (``batch_cost``) for the
streams to share out. Results are put back in input order; they do not depend on the batching
(up to float rounding: ≤ 1e-5 in float32) or on the streams. A long list runs a chunk at a time,
so memory follows a chunk; on a GPU the next chunk is tokenized while the GPU computes this one
(chunks.py).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..errors import TaskArgumentError
from ..loading.devices import check_model_is_on, placement
from ..loading.from_pretrained import check_dtype
from ..model import BertModel
from ..tokenizer.arguments import one_text
from ..tokenizer.bert_tokenizer import BertTokenizer
from .chunks import embed_in_chunks
from .embedded import Embedded, warn_if_truncated
from .hidden_states import hidden_states
from .loading import download_keywords, load_parts, recipe_of
from .options import EmbedOptions, check_truncate_dim, checked_length
from .pooling import pool_text
from .prompts import tokenizing
from .recipe import SentenceRecipe, similarity
from .recipe_settings import RecipeSettings
from .sentence_transformers_names import AnswersSentenceTransformersNames
from .texts import texts_as_list
from .windows import assemble_tokens, check_piece_ids, check_skip, cut_into_windows
from .word_vectors import check_merge, merge_pieces

logger = logging.getLogger("minibert")


class Embedder(RecipeSettings, AnswersSentenceTransformersNames):
    """A tokenizer and a BertModel, turning texts into vectors (following ``recipe``: by default the
    sentence-transformers recipe of the folder the model was loaded from, if it has one).
    sentence-transformers' names are answered with minibert's (``Embedder(path)``, ``encode``:
    sentence_transformers_names.py); its settings (``similarity_fn_name``, ``truncate_dim``,
    ``prompts``, ``default_prompt_name``) set the recipe (recipe_settings.py)."""

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
        check_model_is_on(model, None, "the Embedder")  # a model on meta: said now, not torch's error at a batch
        self.model = model  # run in eval mode, and left in its own (pretrained.evaluating)
        self.recipe = recipe if recipe is not None else recipe_of(model)
        # sentence-transformers lowercases first (accents kept), added tokens matched after it; a copy.
        self.tokenizer = tokenizer.lowercasing_first() if self.recipe.do_lower_case else tokenizer
        # Longest input in tokens, used when embed() is not given max_length: the model's own
        # training length for sentence-transformers models (max_seq_length), else the tokenizer's.
        limit = model.config.max_position_embeddings
        if max_length is None and (self.recipe.max_seq_length or 0) > limit:  # the folder's, not the caller's
            logger.warning("this model's recipe says max_seq_length %d, more than its %d positions "
                           "(sentence-transformers fails on a longer text); texts are cut at %d",
                           self.recipe.max_seq_length, limit, limit)  # fmt: skip
        max_length = max_length or self.recipe.max_seq_length or tokenizer.model_max_length
        self.max_length = min(max_length, limit)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike,
        *,
        revision: str | None = None,
        dtype: torch.dtype | str | None = None,
        device: torch.device | str | None = None,
        gemm: str | None = None,
        truncate_dim: int | None = None,
        token: str | bool | None = None,
        cache_folder: str | os.PathLike | None = None,
        local_files_only: bool = False,
        **others,
    ) -> Embedder:
        """Load the tokenizer, model and recipe of a local directory or a hub repository (one commit of
        it: loading/hub_commit.py). ``dtype`` and ``gemm`` as ``BertModel.from_pretrained`` takes them;
        ``truncate_dim``: as sentence-transformers' ``SentenceTransformer(model, truncate_dim=N)``, in
        place of the model's own; ``token``, ``cache_folder`` and ``local_files_only`` as it takes them
        (transformers' ``token``, ``cache_dir``, ``local_files_only``). Every argument is checked first."""
        hub = download_keywords("Embedder.from_pretrained", "revision, dtype, device, gemm, truncate_dim", others,
                                token=token, cache_folder=cache_folder, local_files_only=local_files_only)  # fmt: skip
        device = placement(device, check_dtype(dtype), computes="the Embedder")  # said before a file is read
        if truncate_dim is not None:
            truncate_dim = check_truncate_dim(truncate_dim, "truncate_dim")  # numpy's int64 → int
        model, tokenizer, recipe = load_parts(name_or_path, revision, hub, dtype=dtype, device=device, gemm=gemm)
        if truncate_dim is not None:
            recipe = dataclasses.replace(recipe or SentenceRecipe(), truncate_dim=truncate_dim)
        return cls(model, tokenizer, recipe=recipe or SentenceRecipe())

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
        * ``truncate_dim``: keep each vector's first values, as sentence-transformers'
          ``encode(truncate_dim=N)``; None: the model's own ``truncate_dim`` (when its recipe is followed).

        ``progress``: a progress bar on stderr; by default only on a terminal and a long run.
        ``embed_with_report`` returns the count of truncated texts as data instead of a warning.
        """
        single = isinstance(texts, str)
        result = self.embed_with_report([texts] if single else texts, EmbedOptions.of(options, **changes), progress)
        warn_if_truncated(result)
        return result.vectors[0] if single else result.vectors

    def embed_with_report(
        self, texts: Sequence[str], options: EmbedOptions | None = None, progress: bool | None = None
    ) -> Embedded:
        """``embed`` for a list of texts, returning the vectors with what happened to the texts."""
        if isinstance(texts, str):
            raise TypeError("embed_with_report takes a sequence of texts: pass [text] (embed takes one str too)")
        texts = texts_as_list(texts)  # in order, each a str: a dict, a set, None ... refused (texts.py)
        options = EmbedOptions.of(options)
        tokenize, skip = self._tokenizing(options)

        def embed_chunk(pieces: list[list[int]], between, chunk_progress) -> Embedded:
            return self._embed_pieces(pieces, options, skip, chunk_progress, between)

        return embed_in_chunks(texts, tokenize, embed_chunk, self.model.device, progress)  # chunks.py

    def pieces_for_embedding(
        self, texts: Sequence[str], options: EmbedOptions | None = None
    ) -> tuple[list[list[int]], int]:
        """Stage 1, tokens: each text's piece ids (the prompt, if any, in front), and how many
        leading tokens the pooling leaves out ([CLS] and the prompt's pieces, when the recipe says
        so). A server tokenizes once with this, counts and checks the tokens, and passes them to
        ``embed_pieces``."""
        tokenize, skip = self._tokenizing(EmbedOptions.of(options))
        return [tokenize(text) for text in texts], skip

    def _tokenizing(self, options: EmbedOptions) -> tuple[Callable[[str], list[int]], int]:
        """A text's piece ids as stage 1 makes them, and the pooling's ``skip`` (prompts.py)."""
        prefix = self.recipe.prompt_for(options.prompt, options.prompt_name)
        return tokenizing(self.recipe, self.tokenizer, prefix, max_length=self._max_length(options),
                          long_text=options.long_text, follows_recipe=options.follows_recipe)  # fmt: skip

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
        [CLS]/[SEP]); the options are ``embed``'s (an EmbedOptions, or its fields as keywords).
        ``skip``: how many leading tokens ([CLS] first) the pooling leaves out, as
        ``pieces_for_embedding`` returns it. Texts longer than max_length are truncated with
        ``embed``'s warning (or embedded in windows: ``long_text="window"``)."""
        options = EmbedOptions.of(options, **changes)
        check_piece_ids(pieces, self.model.config.vocab_size)  # from outside: embed's own are made right
        max_length = self._max_length(options)
        check_skip(skip, pieces, self._room(max_length), max_length, options.long_text)
        result = self._embed_pieces(pieces, options, skip, progress)
        warn_if_truncated(result)
        return result.vectors

    def _embed_pieces(self, pieces: Sequence[list[int]], options: EmbedOptions, skip: int, progress,
                      between: Callable[[int, int], None] | None = None) -> Embedded:  # fmt: skip
        """Stages 2 to 5: windows → hidden states → pooling → the recipe's Dense layers and normalization
        (``between``: called before the loop waits for each batch's results, hidden_states.py)."""
        recipe = self.recipe
        modes = recipe.pooling if options.follows_recipe else options.pooling
        layer_list = self._layer_list(options.layers)
        if "pooler" in modes and getattr(self.model, "pooler", None) is None:
            raise ValueError("pooling='pooler' reads BERT's pooler, which this model has not (its checkpoint was saved "
                             "without one); pool the tokens instead: 'cls', 'mean' or 'max'")  # fmt: skip
        if "pooler" in modes and layer_list != [-1]:
            raise ValueError("pooling='pooler' uses the last layer; it cannot be combined with layers")
        dense = recipe.dense if options.follows_recipe else []
        if dense and (layer_list != [-1]):
            raise ValueError("this model's Dense layers take its pooled last layer; pass pooling= to pool other layers")
        max_length = self._max_length(options)
        windows, truncated = cut_into_windows(pieces, self._room(max_length), options.long_text,
                                              self.tokenizer.truncation_side)  # stage 2  # fmt: skip
        texts = hidden_states(self.model, self.tokenizer, windows, options, layers=layer_list, progress=progress,
                              pooling=modes, skip=skip, between=between)  # stage 3 (and 4: one window)  # fmt: skip
        if not pieces:
            return Embedded(np.zeros((0, self.dimension(options)), np.float32), truncated, max_length)
        out = torch.from_numpy(np.stack([pool_text(text, modes, skip) for text in texts]))  # stage 4
        for layer in dense:  # stage 5: the recipe
            out = layer(out)
        if options.normalize is None and options.follows_recipe and recipe.normalize:
            out = torch.nn.functional.normalize(out, dim=1)  # the recipe's Normalize module, before truncate_dim
        width = self._truncate_dim(options)
        if width is not None:
            out = out[:, :width].contiguous()
        if options.normalize:  # asked for: after the cut, as sentence-transformers' normalize_embeddings=True
            out = torch.nn.functional.normalize(out, dim=1)
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
            width = self.recipe.dimension(hidden)
        else:
            modes = self.recipe.pooling if options.follows_recipe else options.pooling
            count = len(self._layer_list(options.layers))
            width = hidden * count if options.layer_combine == "concat" else hidden
            width *= sum(2 if mode == "mean_max" else 1 for mode in modes)
        cut = self._truncate_dim(options)
        return width if cut is None else min(width, cut)

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
        room = self._room(self._max_length(options))
        windows, _ = cut_into_windows([self.tokenizer.piece_ids(text)], room, "window")
        (states,) = hidden_states(self.model, self.tokenizer, windows, options, layers=self._layer_list(options.layers),
                                  progress=False, pooling=None, skip=0)  # fmt: skip
        ids: list[int] = []
        for start, window in windows[0]:  # the text's pieces, from its (overlapping) windows
            ids[start:] = window
        tokens = self.tokenizer.convert_ids_to_tokens(self.tokenizer.build_inputs_with_special_tokens(ids))
        return tokens, assemble_tokens(states.windows)

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
        check_merge(merge)  # before the forward pass
        words, pieces = self.tokenizer.words_and_pieces(text)
        _, vectors = self.embed_tokens(text, layers=layers, layer_combine=layer_combine, max_length=max_length)
        return words, merge_pieces(vectors[1:-1], pieces, merge)  # [CLS] and [SEP] dropped

    # ------------------------------------------------------------------ machinery

    def _layer_list(self, layers: Sequence[int]) -> list[int]:
        """``layers`` as negative indices into hidden_states (L + 1 of them), each checked to exist."""
        num_layers = self.model.config.num_hidden_layers
        count = num_layers + 1
        for layer in layers:
            if not -count <= layer < count:  # a TaskArgumentError: a command names its flag (--layers)
                states = f"0..{num_layers} (or -1..-{count})"
                raise TaskArgumentError("layers", layer, f"a hidden state of this model, {states}",
                                        f"layer {layer} does not exist: this model has hidden states {states}")
        return [layer - count if layer >= 0 else layer for layer in layers]

    def _max_length(self, options: EmbedOptions) -> int:
        """As asked, else the length of the task ``prompt_name`` names, where the model gives one
        (``query_length``: encode_query's), else the model's."""
        max_length = self.recipe.task_lengths.get(options.prompt_name, self.max_length)
        max_length = max_length if options.max_length is None else options.max_length
        return checked_length(max_length, self.model.config.max_position_embeddings)

    def _truncate_dim(self, options: EmbedOptions) -> int | None:
        """How many values of each vector are kept: as asked, else the recipe's (when it is followed)."""
        if options.truncate_dim is not None:
            return options.truncate_dim
        return self.recipe.truncate_dim if options.follows_recipe else None

    def _room(self, max_length: int) -> int:
        """Pieces a window holds: ``max_length`` less [CLS] and [SEP]."""
        return max_length - self.tokenizer.num_special_tokens_to_add()
