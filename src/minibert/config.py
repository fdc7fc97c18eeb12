"""BertConfig: the handful of numbers that define a BERT, read from / written to ``config.json``.

A config.json carries more fields than the numbers that define the network. Every field that
transformers' BERT code (or an older BERT config on the hub) has is accounted for: it is one of
the dataclass fields below (implemented), or in loading/config_fields.py, with the reason, as ignored (it
changes nothing minibert computes) or refused (a value that asks for something minibert does not
compute, such as relative position embeddings or a decoder: loading stops with a
``CheckpointError`` naming the field and its value, rather than computing something else). Fields
no reference reads (a training script's notes, say) are kept in ``extra`` and ignored, as
transformers ignores them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CheckpointError, TransformersNameError
from .formats.json_files import parse_json, short_json
from .loading.config_fields import (
    CALL_DEFAULTS,
    GOOGLE_CONFIG,
    IGNORED,
    INTEGER_RANGES,
    PROBLEM_TYPES,
    READABLE,
    REAL_RANGES,
    REFUSED_UNLESS,
    SETTABLE,
    taking_config_json_fields,
    with_google_defaults,
)


@taking_config_json_fields
@dataclass
class BertConfig:
    """The shape of a BERT. Defaults are bert-base-uncased's. ``BertConfig(num_labels=3)`` keeps a
    config.json field minibert reads at use in ``extra``, as ``from_dict`` does (``taking_config_json_fields``)."""

    vocab_size: int = 30522  # number of word pieces in vocab.txt
    hidden_size: int = 768  # H: width of every token vector
    num_hidden_layers: int = 12  # L: encoder layers stacked
    num_attention_heads: int = 12  # N: heads per attention layer; head size S = H / N
    intermediate_size: int = 3072  # width of the feed-forward layer (4H)
    hidden_act: str = "gelu"  # "gelu" (exact erf), "gelu_new" (tanh approx.), ... (see activations.py)
    hidden_dropout_prob: float = 0.1  # dropout on embeddings and sub-layer outputs (training only)
    attention_probs_dropout_prob: float = 0.1  # dropout on attention weights (training only)
    max_position_embeddings: int = 512  # longest sequence the position table covers
    type_vocab_size: int = 2  # segment (token type) ids: 0 = sentence A, 1 = sentence B
    layer_norm_eps: float = 1e-12  # BERT's epsilon; PyTorch's default 1e-5 silently breaks parity
    pad_token_id: int | None = 0  # id of [PAD]: the word-embedding row no gradient updates (padding_idx; None: none)
    # (but where minibert pretrain trains: Google's step has no padding row, training/tasks/pretraining.py)
    initializer_range: float = 0.02  # std of fresh weights' normal (init_weights)
    extra: dict = field(default_factory=dict, repr=False)  # other config.json fields, kept as they are

    model_type = "bert"  # transformers' config.model_type (a class attribute, not a field)

    def __setattr__(self, name: str, value) -> None:
        """The dataclass's fields are set checked, each alone (``config.layer_norm_eps = float("nan")`` is
        refused, as the constructor refuses it); what holds between two of them (hidden_size a multiple of
        num_attention_heads, pad_token_id in the vocabulary) is checked when a model is built from the config
        (``check``), so that they can be set one after the other. Of config.json's other fields, those read at
        use (``SETTABLE``: the heads' ``problem_type``, ``id2label``, ``label2id``, ``num_labels``; each call's
        defaults ``output_hidden_states``, ``output_attentions``, ``return_dict``) are checked and kept in
        ``extra``, so that they take effect and ``save_pretrained`` writes them; so is ``use_cache`` (True or
        False), which transformers' ``Trainer`` sets on every model it is given and which changes nothing here:
        BERT is an encoder, with no key/value cache to keep. Any other (``config.is_decoder = True``, a typo)
        would change nothing minibert computes, nor be saved: refused, naming what to do instead."""
        if name in _FIELD_NAMES:
            if "extra" in self.__dict__:  # (set up: the constructor checks its fields together, in __post_init__)
                _check_field(name, value)
            super().__setattr__(name, value)
        elif name in CALL_DEFAULTS:
            if not isinstance(value, bool):
                raise ValueError(f"config.{name} must be True or False, got {short_json(value)}")
            self._update_extra(**{name: value})
        elif name in SETTABLE:
            getattr(self, f"_set_{name}")(value)
        else:
            raise TransformersNameError(f"config.{name} cannot be set on minibert's config: {_why_not(name)}")

    def __getattr__(self, name: str):
        """config.json's other fields that transformers' config has as attributes (``READABLE``):
        ``config.is_decoder``, ``config.problem_type``, ...: config.json's value, else transformers' default."""
        if name not in READABLE and name not in ("use_return_dict", "name_or_path", "_commit_hash", "dtype",
                                                 "torch_dtype"):  # fmt: skip
            raise AttributeError(f"'BertConfig' object has no attribute {name!r}")
        extra = self.__dict__.get("extra", {})  # (a config being unpickled has no extra yet)
        if name in ("dtype", "torch_dtype"):  # the dtype it was saved in, as a torch.dtype (transformers'), or None
            import torch

            saved = extra.get("dtype", extra.get("torch_dtype"))
            return getattr(torch, saved, None) if isinstance(saved, str) and saved.isidentifier() else None
        if name == "use_return_dict":
            return extra.get("return_dict", True)
        if name == "name_or_path":
            return self.__dict__.get("_name_or_path", "")  # where from_pretrained read it (loading/from_pretrained.py)
        if name == "_commit_hash":  # the hub commit from_pretrained read it at; None for a folder or a new config
            return None
        return extra.get(name, READABLE[name])

    def _set_problem_type(self, value) -> None:
        if value is not None and value not in PROBLEM_TYPES:
            raise ValueError(f"problem_type must be None or one of {', '.join(PROBLEM_TYPES)}, got {value!r}")
        self._update_extra(problem_type=value)

    def _set_id2label(self, value) -> None:
        """transformers' ``config.id2label = {0: "neg", 1: "pos"}``: the labels' names by id (keys
        ints, or their strings as in JSON); ``num_labels`` follows, and ``label2id`` becomes its inverse."""
        try:
            id2label, _ = labels_by_id({"id2label": value})
        except CheckpointError as error:
            raise ValueError(str(error).replace("config field ", "")) from None
        self._update_extra(id2label=id2label, label2id={label: index for index, label in id2label.items()},
                           dropped=("num_labels", "_num_labels"))  # fmt: skip

    def _set_use_cache(self, value) -> None:
        """transformers' ``config.use_cache``: whether a decoder keeps its keys and values between calls
        of ``generate``. An encoder reads every token at once and has none to keep, so either value computes
        the same (transformers' BERT reads it only as a decoder, which minibert refuses); kept and saved."""
        if not isinstance(value, bool):
            raise ValueError(f"config.use_cache must be True or False, got {short_json(value)}")
        self._update_extra(use_cache=value)

    def _set_label2id(self, value) -> None:
        """Metadata (no computation reads it; the heads name their outputs by ``id2label``), saved as given."""
        if not isinstance(value, dict) or not all(
            isinstance(key, str) and isinstance(index, int) and not isinstance(index, bool)
            for key, index in value.items()
        ):
            raise ValueError(f"label2id must be a dict of label names to ids, got {short_json(value)}")
        self._update_extra(label2id=dict(value))

    def _update_extra(self, dropped: tuple[str, ...] = (), **fields) -> None:
        """A new ``extra`` with ``fields`` set and ``dropped`` gone: a copy of this config
        (``copy.copy``, ``dataclasses.replace``) shares the old dict, and keeps its own values."""
        extra = {name: value for name, value in self.extra.items() if name not in dropped}
        object.__setattr__(self, "extra", {**extra, **fields})

    def _set_num_labels(self, value) -> None:
        """As transformers: labels LABEL_0 ... LABEL_{n-1}, unless id2label already names ``value`` labels."""
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
            raise ValueError(f"num_labels must be an integer from 1 to 1,000,000, got {short_json(value)}")
        if value != self.num_labels:
            self._set_id2label({index: f"LABEL_{index}" for index in range(value)})
        elif not {"id2label", "num_labels", "_num_labels"} & set(self.extra):  # the default two, now asked for:
            self._update_extra(num_labels=value)  # (labels given, as AutoConfig(num_labels=2) gives them to a load)

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """The whole config checked, as it is built and again when a model is built from it
        (``BertModel.__init__``: after ``config.x = ...`` or ``dataclasses.replace``, nothing is built
        from a config the constructor would refuse)."""
        _check_field("hidden_act", self.hidden_act)
        _check_field("extra", self.extra)
        for name, (computed, meaning) in REFUSED_UNLESS.items():
            if name in self.extra and self.extra[name] not in computed:
                raise CheckpointError(
                    f"config field {name} = {short_json(self.extra[name])}: {meaning}; minibert refuses it "
                    "rather than compute something else"
                )
        for name in CALL_DEFAULTS:
            if self.extra.get(name) is not None and not isinstance(self.extra[name], bool):
                raise ValueError(f"field {name} = {short_json(self.extra[name])}: must be true or false")
        self.check_domains()

    def check_domains(self) -> None:
        """Every number within its domain (type, sign, range) before anything is built: a config
        asking for a million layers or a NaN epsilon is refused at once, in one short line."""
        for name in (*INTEGER_RANGES, *REAL_RANGES):
            _check_number(name, getattr(self, name))
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"field hidden_size = {self.hidden_size} is not a multiple of num_attention_heads = "
                f"{self.num_attention_heads}"
            )
        pad = self.pad_token_id
        if pad is not None and (not isinstance(pad, int) or isinstance(pad, bool) or not 0 <= pad < self.vocab_size):
            vocabulary = f"[0, {self.vocab_size})"
            raise ValueError(f"field pad_token_id = {short_json(pad)}: must be an id in the vocabulary {vocabulary}")

    def check_vocabulary(self, vocab: dict[str, int], source: str, config_name: str = "") -> None:
        """Refuse a tokenizer whose vocabulary ({piece: id}) can produce ids the model has no
        embedding for, at load rather than when a rare word finally hits a big id. The message names
        ``config_name``, else the file the config was read from (bert_config.json in Google's layout)."""
        config_name = config_name or self.__dict__.get("_config_file", "config.json")
        # (an empty piece, a vocab.txt's blank last line, is no id a text can get: Google and transformers run)
        tokenizer_ids = max((index for piece, index in vocab.items() if piece), default=-1) + 1
        if tokenizer_ids > self.vocab_size:
            raise CheckpointError(
                f"{source}: the tokenizer has ids up to {tokenizer_ids - 1:,} but the model's vocab_size is "
                f"{self.vocab_size:,} ({config_name}): the tokenizer belongs to another model"
            )

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def id2label(self) -> dict[int, str]:
        """A classifier's label names by id, as transformers' ``config.id2label`` (``labels_by_id``)."""
        return labels_by_id(self.extra)[0]

    @property
    def label2id(self) -> dict[str, int]:
        """The inverse of ``id2label``, or what was set (``config.label2id = ...``, saved as given)."""
        given = self.extra.get("label2id")
        if isinstance(given, dict) and len(given) == self.num_labels:
            return dict(given)
        return {label: index for index, label in self.id2label.items()}

    @property
    def num_labels(self) -> int:
        return len(self.id2label)

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
        """Read ``config.json`` (Google's ``bert_config.json`` with Google's defaults for the fields it
        omits: loading/config_fields.py); a malformed file is a ``CheckpointError`` naming it."""
        path = Path(path)
        try:
            values = parse_json(path.read_bytes())
        except FileNotFoundError:
            raise CheckpointError(f"config file not found: {path}") from None
        except PermissionError as error:
            raise CheckpointError(f"cannot read config file {path}: {error.strerror}") from None
        except ValueError as error:
            raise CheckpointError(f"malformed config file {path}: {error}") from None
        if not isinstance(values, dict):
            raise CheckpointError(f"malformed config file {path}: the top level is not a JSON object")
        if path.name == GOOGLE_CONFIG:  # Google's, read as Google's BertConfig.from_dict reads it
            try:
                values = with_google_defaults(values, path)
            except ValueError as error:
                raise CheckpointError(str(error)) from None
        model_type = values.get("model_type", "bert")
        if model_type != "bert":
            raise CheckpointError(f"{path} describes a {model_type!r} model; minibert loads BERT checkpoints")
        try:
            config = cls.from_dict(values)
        except (TypeError, ValueError, CheckpointError) as error:
            raise CheckpointError(f"{path}: {error}") from None
        object.__setattr__(config, "_config_file", path.name)  # what check_vocabulary names
        return config

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, *, revision: str | None = None, **fields) -> BertConfig:
        """transformers' ``BertConfig.from_pretrained``: the config.json of a folder or hub repository
        (bert_config.json in Google's zips), with ``fields`` set (``num_labels=3``,
        ``hidden_dropout_prob=0.3``, ...: any field minibert reads) and transformers' download
        keywords (``cache_dir``, ``local_files_only``, ``token``); loading/config_files.py."""
        from .loading.config_files import read_config

        return read_config(cls, name_or_path, revision, fields)

    def save_pretrained(self, save_directory: str | os.PathLike) -> None:
        """transformers' ``config.save_pretrained``: ``save_directory/config.json`` (the folder created
        if needed), written atomically: a reader never sees half a file."""
        from .loading.config_files import save_config

        save_config(self, save_directory)

    def update(self, values: dict) -> None:
        """transformers' ``config.update({...})``: each field set as ``config.name = value`` sets it."""
        for name, value in values.items():
            setattr(self, name, value)

    def to_diff_dict(self) -> dict:
        """``to_dict``'s fields whose values differ from a new BertConfig's (bert-base's), and model_type."""
        default = BertConfig().to_dict()
        return {name: value for name, value in self.to_dict().items()
                if name == "model_type" or default.get(name, _NONE) != value}  # fmt: skip

    def to_json_string(self, use_diff: bool = True) -> str:
        """config.json's text, as ``save_pretrained`` writes it (keys sorted, indented by 2). Every
        field is written, whatever ``use_diff`` says (transformers' True leaves out the fields at its
        defaults; the values of the fields written agree either way)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str | os.PathLike) -> None:
        from .formats.atomic_files import write_atomically

        write_atomically(path, self.to_json_string().encode())


_FIELD_NAMES = [f.name for f in dataclasses.fields(BertConfig)]
_NONE = object()  # (a field a new config has not)


def _check_number(name: str, value) -> None:
    """A number field within its domain (``INTEGER_RANGES``, ``REAL_RANGES``): ValueError naming it."""
    if name in INTEGER_RANGES:
        low, high = INTEGER_RANGES[name]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValueError(f"field {name} = {short_json(value)}: must be an integer from {low:,} to {high:,}")
    elif name in REAL_RANGES:
        low, high, low_open = REAL_RANGES[name]
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not number or not (low < value if low_open else low <= value) or value > high:
            bound = f"greater than {low:g}" if low_open else f"from {low:g}"
            raise ValueError(f"field {name} = {short_json(value)}: must be a finite number {bound} to {high:g}")


def _check_field(name: str, value) -> None:
    """One field set on a built config, checked alone: a number's domain, hidden_act's name,
    pad_token_id an id or None (whether the vocabulary holds it is ``check_domains``'s), extra a dict."""
    from .activations import check_activation

    if name == "hidden_act":
        check_activation(value)
    elif name == "pad_token_id":
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ValueError(f"field pad_token_id = {short_json(value)}: must be an id (an int from 0) or None")
    elif name == "extra":
        if not isinstance(value, dict):
            raise ValueError(f"field extra must be a dict of config.json's other fields, got {short_json(value)}")
    else:
        _check_number(name, value)


def labels_by_id(extra: dict, field: str = "config field {}") -> tuple[dict[int, str], str | None]:
    """({id: label name}, a note when num_labels overrides id2label) from config.json's fields:
    ``id2label`` (its keys are strings in JSON), else ``num_labels`` (default 2, as transformers)
    with labels LABEL_0, LABEL_1, ... A malformed field is a ``CheckpointError`` naming it, as
    ``field`` spells a field's name (a caller's keyword: loading/config_keywords.py)."""
    count = extra.get("num_labels", extra.get("_num_labels"))
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 1_000_000):
        raise CheckpointError(f"{field.format('num_labels')} = {count!r}: must be an integer from 1 to 1,000,000")
    raw = extra.get("id2label")
    if raw is None:
        return {index: f"LABEL_{index}" for index in range(2 if count is None else count)}, None
    if not isinstance(raw, dict) or not raw:
        raise CheckpointError(f"{field.format('id2label')} must be a non-empty object, got {raw!r:.60}")
    try:
        id2label = {int(key): str(value) for key, value in raw.items()}
    except (TypeError, ValueError):
        raise CheckpointError(f"{field.format('id2label')} has a key that is not a number: {raw!r:.60}") from None
    if sorted(id2label) != list(range(len(id2label))):
        raise CheckpointError(f"{field.format('id2label')} must number its labels 0 to {len(id2label) - 1}")
    if count is not None and count != len(id2label):
        # transformers 2 and 3 wrote num_labels and left id2label at its 2-label default (rxnfp's
        # classifier: num_labels 50, id2label LABEL_0, LABEL_1): the number was written on purpose.
        note = (f"num_labels = {count} but id2label names {len(id2label)} labels; using {count} labels "
                f"LABEL_0 ... LABEL_{count - 1}")  # fmt: skip
        return {index: f"LABEL_{index}" for index in range(count)}, note
    return id2label, None


def _why_not(name: str) -> str:
    """Why setting ``config.<name>`` is refused, and what to write instead."""
    if name == "use_return_dict":
        return "it is read from return_dict (as transformers' property is): set config.return_dict"
    if name == "classifier_dropout":
        return (
            "the head's dropout is built when the model is (model.dropout); give it when loading: "
            "from_pretrained(path, classifier_dropout=0.2)"
        )
    if name in REFUSED_UNLESS:
        return f"minibert computes only {name} = {REFUSED_UNLESS[name][0][0]!r} ({REFUSED_UNLESS[name][1]})"
    if name in IGNORED:
        return f"it would change nothing ({IGNORED[name]})"
    return (
        f"not a field minibert reads, so it would change nothing and would not be saved (what may be set "
        f"besides the dataclass's numbers: {', '.join(SETTABLE)})"
    )


