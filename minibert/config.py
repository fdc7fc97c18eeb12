"""BertConfig: the handful of numbers that define a BERT, read from / written to ``config.json``."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CheckpointError


@dataclass
class BertConfig:
    """The shape of a BERT. Defaults are bert-base-uncased's."""

    vocab_size: int = 30522  # number of word pieces in vocab.txt
    hidden_size: int = 768  # H: width of every token vector
    num_hidden_layers: int = 12  # L: encoder layers stacked
    num_attention_heads: int = 12  # A: heads per attention layer; head size = H / A
    intermediate_size: int = 3072  # width of the feed-forward layer (4H)
    hidden_act: str = "gelu"  # "gelu" (exact erf), "gelu_new"/"gelu_pytorch_tanh" (tanh approx.), "relu"
    hidden_dropout_prob: float = 0.1  # dropout on embeddings and sub-layer outputs (training only)
    attention_probs_dropout_prob: float = 0.1  # dropout on attention weights (training only)
    max_position_embeddings: int = 512  # longest sequence the position table covers
    type_vocab_size: int = 2  # segment (token type) ids: 0 = sentence A, 1 = sentence B
    layer_norm_eps: float = 1e-12  # BERT's epsilon; PyTorch's default 1e-5 silently breaks parity
    pad_token_id: int = 0  # id of [PAD]
    initializer_range: float = 0.02  # std of the normal init for freshly created weights
    extra: dict = field(default_factory=dict, repr=False)  # other config.json fields, kept as they are

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads {self.num_attention_heads}"
            )

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, values: dict) -> BertConfig:
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kwargs = {key: value for key, value in values.items() if key in known}
        extra = {key: value for key, value in values.items() if key not in known}
        return cls(**kwargs, extra=extra)

    def to_dict(self) -> dict:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {"architectures": ["BertModel"], "model_type": "bert", **self.extra, **values}

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> BertConfig:
        """Read ``config.json``; a malformed file is a ``CheckpointError`` naming it."""
        path = Path(path)
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CheckpointError(f"config file not found: {path}") from None
        except (ValueError, UnicodeDecodeError) as error:
            raise CheckpointError(f"malformed config file {path}: {error}") from None
        if not isinstance(values, dict):
            raise CheckpointError(f"malformed config file {path}: the top level is not a JSON object")
        model_type = values.get("model_type", "bert")
        if model_type != "bert":
            raise CheckpointError(f"{path} describes a {model_type!r} model; minibert loads BERT checkpoints")
        try:
            return cls.from_dict(values)
        except (TypeError, ValueError) as error:
            raise CheckpointError(f"invalid config file {path}: {error}") from None

    def to_json_file(self, path: str | os.PathLike) -> None:
        from .io import write_atomically

        write_atomically(path, (json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n").encode())
