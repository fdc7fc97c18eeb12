"""``EmbedOptions``: how to turn texts into vectors, as one frozen value, checked once.

The Embedder, the ``minibert embed`` command, the server and the Ray adapter all pass this value
through unchanged, so an option is named, defaulted and checked in one place:

    >>> EmbedOptions(pooling="mean", layers=[-1, -2], normalize=True)
    EmbedOptions(pooling=('mean',), layers=(-1, -2), layer_combine='concat', normalize=True, ...)
    >>> EmbedOptions(long_text="cut")
    Traceback (most recent call last):
    ...
    ValueError: long_text must be 'truncate' or 'window', got 'cut'

What a value cannot know alone (whether layer -9 exists, the model's own max_length) is checked
by the Embedder against its model.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass

from ..errors import TaskArgumentError

# sentence-transformers' pooling modes, in the order older configs' booleans concatenate them (recipe.py)
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
POOLINGS = (*POOLING_MODES, "pooler", "mean_max")  # and minibert's own: the pooler output, mean and max
LAYER_COMBINES = ("concat", "sum", "mean")
LONG_TEXTS = ("truncate", "window")


@dataclass(frozen=True)
class EmbedOptions:
    # None follows the model's recipe (a sentence-transformers model's pooling, Dense layers and
    # normalization; mean pooling for a plain BERT); modes override it and are concatenated.
    pooling: tuple[str, ...] | None = None
    # Which hidden states: -1 the last layer, -2 the one before, ..., 0 the embeddings.
    layers: tuple[int, ...] = (-1,)
    layer_combine: str = "concat"  # how several layers become one vector: concat, sum or mean
    normalize: bool | None = None  # unit-length vectors; None: as the recipe says
    prompt_name: str | None = None  # the model's prompt of this name (e5's "query")
    prompt: str | None = None  # or this text, put before every text
    batch_size: int = 32  # work per forward pass, in texts of 64 tokens
    max_length: int | None = None  # tokens per text with [CLS] and [SEP]; None: the model's (checked by the Embedder)
    long_text: str = "truncate"  # texts over max_length: "truncate" or "window" (overlapping windows)
    streams: bool = True  # on a CPU, run independent batches side by side (streams.py)
    # Keep the first N values of each vector (a Matryoshka model's), as sentence-transformers'
    # encode(truncate_dim=N); None: the model's own truncate_dim, if its recipe is followed.
    truncate_dim: int | None = None

    def __post_init__(self):
        # Friendly spellings become the canonical ones: "mean" → ("mean",), -1 → (-1,), lists → tuples.
        if self.pooling is not None:
            set_field(self, "pooling", _pooling_modes(self.pooling))
        set_field(self, "layers", _layers(self.layers))
        _one_of("layer_combine", self.layer_combine, LAYER_COMBINES)
        _one_of("long_text", self.long_text, LONG_TEXTS)
        if self.normalize is not None and not isinstance(self.normalize, bool):
            raise TypeError(f"normalize must be True, False or None, got {self.normalize!r}")
        if not isinstance(self.streams, bool):
            raise TypeError(f"streams must be True or False, got {self.streams!r}")
        for name in ("prompt_name", "prompt"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str or None, got {value!r}")
        if not _is_int(self.batch_size) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {self.batch_size!r}")
        set_field(self, "batch_size", as_int(self.batch_size))  # numpy's int64(8) → 8: JSON-able
        set_field(self, "truncate_dim", check_truncate_dim(self.truncate_dim, "truncate_dim"))
        if _is_int(self.max_length):  # (its range is checked by the Embedder, which knows the model)
            set_field(self, "max_length", as_int(self.max_length))

    @classmethod
    def of(cls, options: EmbedOptions | None = None, **changes) -> EmbedOptions:
        """``options`` (or the defaults) with ``changes`` applied: the keyword spelling of a call."""
        names = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(set(changes) - set(names))
        if unknown:  # sentence-transformers' spellings (normalize_embeddings ...) answered with minibert's
            from .sentence_transformers_names import spelled_otherwise

            raise TypeError(f"unknown embedding option(s) {', '.join(unknown)}{spelled_otherwise(unknown)} (the "
                            f"options: {', '.join(names)})")  # fmt: skip
        if options is not None and not isinstance(options, EmbedOptions):
            raise TypeError(f"options must be an EmbedOptions (or its fields as keywords), got {options!r:.60}")
        base = options if options is not None else cls()
        return dataclasses.replace(base, **changes) if changes else base

    def as_dict(self) -> dict:
        """The options as plain JSON values (a resumable run's fingerprint, a log line)."""
        values = dataclasses.asdict(self)
        return {name: list(value) if isinstance(value, tuple) else value for name, value in values.items()}

    @property
    def follows_recipe(self) -> bool:
        """No pooling given: the model's own recipe decides pooling, Dense layers and normalization."""
        return self.pooling is None


def check_truncate_dim(value, what: str, error: type[Exception] = ValueError) -> int | None:
    """``truncate_dim``: None (no cut) or a positive int (sentence-transformers keeps ``[..., :value]``).

    >>> check_truncate_dim(0, "truncate_dim")
    Traceback (most recent call last):
    ...
    ValueError: truncate_dim must be a positive int or None, got 0
    """
    if value is not None and (not _is_int(value) or value < 1):
        raise error(f"{what} must be a positive int or None, got {value!r:.40}")
    return as_int(value)


def set_field(options: EmbedOptions, name: str, value) -> None:
    object.__setattr__(options, name, value)  # a frozen dataclass canonicalising itself in __post_init__


def as_int(value) -> int | None:
    """``value`` as a Python int when it is an integer, as sentence-transformers takes one: an int, or
    anything ``operator.index`` takes (numpy's ``int64(8)``, a size read from an array); else None. A
    bool is not a number here (``batch_size=True`` is a mistake, not 1).

    >>> as_int(8), as_int(True), as_int(8.0), as_int(None)
    (8, None, None, None)
    """
    if isinstance(value, bool) or type(value).__name__ == "bool_":  # (numpy's bool refuses index() itself)
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def checked_length(value, positions: int) -> int:
    """A length in tokens (``max_length``, set on the Embedder or given to ``embed``) as an int from 3
    ([CLS] a piece [SEP]) to the model's ``positions``, or a TaskArgumentError naming the limit."""
    if as_int(value) is None or not 3 <= value <= positions:  # (numpy's int64 taken, as an index)
        raise TaskArgumentError("max_length", value, f"an int from 3 to max_position_embeddings={positions}")
    return as_int(value)


def _is_int(value) -> bool:
    return as_int(value) is not None


def _one_of(name: str, value, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        quoted = " or ".join(f"'{choice}'" for choice in allowed) if len(allowed) == 2 else str(allowed)
        raise ValueError(f"{name} must be {'one of ' if len(allowed) > 2 else ''}{quoted}, got {value!r}")


def _pooling_modes(pooling) -> tuple[str, ...]:
    modes = (pooling,) if isinstance(pooling, str) else tuple(pooling) if isinstance(pooling, (list, tuple)) else ()
    if not modes or not all(isinstance(mode, str) and mode in POOLINGS for mode in modes):
        raise ValueError(f"pooling must be one of {POOLINGS} or a list of them, got {pooling!r}")
    return modes


def _layers(layers) -> tuple[int, ...]:
    items = (layers,) if _is_int(layers) else tuple(layers) if isinstance(layers, (list, tuple)) else ()
    if not items or not all(_is_int(layer) for layer in items):
        raise ValueError(f"layers must be an int or a non-empty list of ints, got {layers!r}")
    return tuple(as_int(layer) for layer in items)
