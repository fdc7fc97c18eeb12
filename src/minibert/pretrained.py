"""What every minibert network shares: built from a config, loaded from a checkpoint, saved back.

``BertModel`` and the networks with heads on top of it (heads.py) subclass ``PretrainedBert``, as
transformers' classes subclass its ``PreTrainedModel``: ``from_pretrained`` builds the class from
``config.json`` and fills it through the rename table (loading/); ``save_pretrained`` writes the
hub's names back. A subclass sets ``self.config`` and calls ``self.init_weights()`` last.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings

import torch
from torch import nn

from .errors import ModeChangedError
from .inputs import OLD_ARGUMENTS
from .loading.file_pages import ChecksItsFile, refuse_if_model_file_written_over
from .loading.transformers_methods import TransformersModelMethods


class PretrainedBert(TransformersModelMethods, ChecksItsFile):  # (ChecksItsFile: an nn.Module whose reads of every
    # weight check a mapped file first; TransformersModelMethods: transformers' members, transformers_methods.py)
    config: object  # BertConfig

    def __new__(cls, config=None, *args, **kwargs):
        """Refuse, before any layer is built, what a learner passes in place of minibert's BertConfig: a
        checkpoint's name or folder (``BertModel("bert-base-uncased")``) names ``from_pretrained``;
        transformers' BertConfig (the same class name) names the conversion."""
        from .config import BertConfig
        from .errors import InputTypeError

        if isinstance(config, (str, os.PathLike)):  # (copy and pickle call __new__ with no config: allowed)
            raise InputTypeError(
                f"{cls.__name__}(config) builds a model with fresh weights from a BertConfig, got the path or name "
                f"{os.fspath(config)!r}; to load a checkpoint: {cls.__name__}.from_pretrained({os.fspath(config)!r})"
            )
        if config is not None and not isinstance(config, BertConfig):
            kind = f"{type(config).__module__}.{type(config).__qualname__}"
            raise InputTypeError(
                f"{cls.__name__}(config) builds a model from minibert's BertConfig, got a {kind}; convert it: "
                f"{cls.__name__}(minibert.BertConfig.from_dict(config.to_dict()))"
            )
        return super().__new__(cls)

    def __call__(self, *args, **kwargs):
        """nn.Module's call, with transformers' call options around it: ``return_dict=False`` gives
        the output as a tuple (``return_dict=True``, the default, the output object, which indexes as
        one too); the config's ``output_hidden_states`` / ``output_attentions`` / ``return_dict``
        (config.json's, or given to ``from_pretrained``, or set) are the defaults of each call.
        pytorch-pretrained-bert's ``output_all_encoded_layers=`` is answered with today's spelling, and
        transformers' ``head_mask=None`` / ``inputs_embeds=None`` dropped (any other value of them
        refused: inputs.py), and ``use_cache`` too (a decoder's; an encoder keeps no cache)."""
        if kwargs.keys() & set(OLD_ARGUMENTS):
            from .inputs import refuse_old_arguments

            refuse_old_arguments(self, kwargs)
        return_dict, use_cache = kwargs.pop("return_dict", None), kwargs.pop("use_cache", None)
        for name, flag in (("return_dict", return_dict), ("use_cache", use_cache)):  # (use_cache: an encoder has
            if flag is not None and not isinstance(flag, bool):  # no cache; model(**batch, use_cache=False) runs)
                from .errors import InputTypeError

                raise InputTypeError(f"{name} must be True or False, got {flag!r}")
        defaults = self.config.extra  # transformers' call defaults kept in the config (config_fields.CALL_DEFAULTS)
        if defaults.get("output_hidden_states"):
            kwargs.setdefault("output_hidden_states", True)
        if defaults.get("output_attentions"):
            kwargs.setdefault("output_attentions", True)
        if return_dict is None:
            return_dict = defaults.get("return_dict", True)
        output = super().__call__(*args, **kwargs)
        return output.to_tuple() if return_dict is False else output

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """``load_state_dict`` takes transformers' and Google's tensor names too, renamed by the table
        ``from_pretrained`` reads (loading/names.py): ``model.load_state_dict(torch.load("pytorch_model.bin"))``
        or a transformers model's ``state_dict()`` loads as it does there, with ``strict=True``."""
        from .loading.strict import rename_in_place

        rename_in_place(self, state_dict, prefix)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def init_weights(self) -> None:
        """Fresh weights for a model built from a config (pre-training from scratch); from_pretrained
        overwrites them. Every Linear and Embedding weight is drawn from a normal of std
        ``initializer_range`` (0.02), every bias is 0 and every LayerNorm 1 and 0: transformers'
        init of BERT, but for one row. transformers then zeros the [PAD] row of the word embeddings
        (``padding_idx``); here it keeps its draw, as in Google's code, which has no padding row: the
        [PAD] row is trained like any other where ``minibert pretrain`` trains (masking's random
        replacement draws [PAD] too: training/tasks/pretraining.py). Google's ``create_initializer``
        draws from a truncated normal (``tf.truncated_normal_initializer``: values beyond two
        deviations drawn again), as minibert draws a new head on a checkpoint (loading/strict.py
        ``google_normal_``); this draws the plain normal, which the bundled fortunes-mini's recipe
        was made with (tests/test_training_fortunes_mini_recipe.py compares its first step).

        On a model from ``from_pretrained`` it does nothing, as transformers' does nothing to weights
        read from a checkpoint (a fresh model of the same shape: ``type(model)(model.config)``)."""
        if getattr(self, "weights_from_checkpoint", False):
            return
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=self.config.initializer_range)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def use_book_modules(self, book: bool = True):
        """``True``: run exactly the book's modules (model.py: plain ``nn.Linear``, the feed-forward's
        activation in place, attention written out), undoing the speed ``from_pretrained`` added
        (speed/seam.py lists it); ``False``: the speed back. The numbers are the same either way, up to
        the order of float sums. Returns the model: ``model = BertModel.from_pretrained(p).use_book_modules()``."""
        from .speed.seam import use_book_modules

        use_book_modules(self, book)
        return self

    @property
    def book_modules(self) -> bool:
        """Whether the model runs the book's modules only (after ``use_book_modules()``)."""
        return getattr(self, "_speed", None) is not None

    # ------------------------------------------------------------------ transformers' PreTrainedModel members

    main_input_name = "input_ids"  # what the model reads first (transformers' Trainer and pipelines ask)

    @property
    def base_model(self) -> nn.Module:
        """The encoder: ``self.bert`` under heads, the model itself for ``BertModel`` (transformers' ``base_model``)."""
        return getattr(self, "bert", self)

    def get_input_embeddings(self) -> nn.Embedding:
        """The word embedding table (V, H): ``embeddings.word_embeddings``."""
        return self.base_model.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        """Put ``value`` in place of the word embedding table; ``config.vocab_size`` follows its rows (minibert
        checks ids against it). Under a masked-LM head, whose bias has a row per word, the number of rows
        must stay: ``resize_token_embeddings`` changes both."""
        if not isinstance(value, nn.Embedding) or value.embedding_dim != self.config.hidden_size:
            raise TypeError(f"the input embeddings must be an nn.Embedding of width hidden_size = "
                            f"{self.config.hidden_size}, got {value!r}")  # fmt: skip
        head = getattr(self, "mlm_head", None)
        if head is not None and value.num_embeddings != head.bias.shape[0]:
            raise ValueError(f"the masked-LM head scores {head.bias.shape[0]} words and the table given has "
                             f"{value.num_embeddings} rows: model.resize_token_embeddings(n) resizes both")  # fmt: skip
        self.base_model.embeddings.word_embeddings = value
        self.config.vocab_size = value.num_embeddings

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike,
        *,
        revision: str | None = None,
        dtype: torch.dtype | str | None = None,
        device: torch.device | str | None = None,
        new_heads: bool = False,
        gemm: str | None = None,
        **label_config,
    ):
        """Build the model from ``config.json`` and load the pretrained weights of a local directory
        or a hub repository (see ``loading/from_pretrained.py``). Returned in eval mode (dropout off).

        To fine-tune a checkpoint that lacks the class's head (a classifier on bert-base, say):
        ``new_heads=True`` starts the missing head tensors (and a missing pooler) from fresh
        weights, as Google initialises them, and warns with their names; without it they are an
        error. ``num_labels``, ``id2label``, ``label2id``, ``problem_type`` and ``classifier_dropout``
        replace config.json's, as in transformers; labels given to a classifier class ask for a new
        head too, as in transformers (a head the checkpoint has with another number of outputs is
        still refused): ``BertForSequenceClassification.from_pretrained(path, num_labels=6)``.
        ``output_hidden_states`` / ``output_attentions`` become the defaults of the model's calls. The
        fields that keep the tensors' shapes (``hidden_dropout_prob``, ``attention_probs_dropout_prob``,
        ``layer_norm_eps``, ``hidden_act``, ``initializer_range``, ``pad_token_id``) build the model, and
        ``config=`` a BertConfig of the checkpoint's shapes is read in place of config.json, as in
        transformers (loading/config_keywords.py).

        ``device``: "cpu", "cuda", "cuda:N", "auto" (CUDA where torch sees a GPU) or a torch.device;
        a GPU that is not there raises ``DeviceError`` before anything is read (devices.py).
        ``dtype="auto"`` (``torch_dtype="auto"``) is transformers' own: the dtype the checkpoint was saved
        in (config.json's ``dtype`` / ``torch_dtype``, else its weights'). ``dtype="fastest"`` is bfloat16
        on a GPU that has it, and where it is measured faster than float32 on this CPU (speed/bf16.py's
        ``bf16_is_faster``; bf16 instructions alone are not enough; on the ``gemm`` library where one is
        named), else float32: approximate numbers,
        opted into. ``dtype="int8"`` (never chosen by "fastest") runs the encoder's linear
        layers in int8 after checking the model against float32 (speed/int8.py, speed/int8_check.py, docs/int8.md).
        ``gemm`` picks the linear layers' matrix library
        ("auto", "mkl", "onednn", "onednn-fused"; default ``$MINIBERT_GEMM`` or "auto": measured on
        this CPU, see speed/gemm.py)."""
        from .loading.from_pretrained import load_pretrained

        return load_pretrained(cls, name_or_path, revision=revision, dtype=dtype, device=device,
                               new_heads=new_heads, label_config=label_config, gemm=gemm)  # fmt: skip

    def resize_token_embeddings(self, new_num_tokens: int | None = None, pad_to_multiple_of: int | None = None,
                                mean_resizing: bool = True) -> nn.Embedding:  # fmt: skip
        """Give the word embedding table ``new_num_tokens`` rows (after ``tokenizer.add_special_tokens``:
        ``len(tokenizer)``), as transformers does: old rows kept; new rows the mean of the old ones
        (``mean_resizing``, transformers' default, which samples within 1e-9 × their covariance of
        that mean) or drawn as BERT initialises weights. A masked-LM head's bias grows with zeros.
        ``pad_to_multiple_of``: the number of rows rounded up to a multiple of it (of the current number
        when ``new_num_tokens`` is None), as transformers rounds it; with neither, the table is returned as it is.
        Inside ``torch.inference_mode()`` too, the new tables are ordinary tensors (they can be trained)."""
        if pad_to_multiple_of is not None:
            if not _is_positive_int(pad_to_multiple_of):
                raise ValueError(f"pad_to_multiple_of must be a positive int, got {pad_to_multiple_of!r}")
            rows = self.get_input_embeddings().num_embeddings if new_num_tokens is None else new_num_tokens
            if _is_positive_int(rows):
                new_num_tokens = -(-rows // pad_to_multiple_of) * pad_to_multiple_of  # rounded up
        elif new_num_tokens is None:
            return self.get_input_embeddings()
        if not _is_positive_int(new_num_tokens):
            raise ValueError(f"new_num_tokens must be a positive int, got {new_num_tokens!r}")
        refuse_if_model_file_written_over(self)  # the old rows are read (loading/file_pages.py)
        with torch.inference_mode(False):
            return self._resize_word_embeddings(new_num_tokens, mean_resizing)

    def _resize_word_embeddings(self, new_num_tokens: int, mean_resizing: bool) -> nn.Embedding:
        """The new table. One too short to hold the [PAD] row has none (transformers' table too), and
        ``config.pad_token_id`` becomes None, which the table then says (transformers keeps an id its
        own loader then refuses): a warning names the row dropped."""
        embeddings = self.base_model.embeddings
        old = embeddings.word_embeddings
        kept = min(old.num_embeddings, new_num_tokens)
        padding_idx = old.padding_idx
        if padding_idx is not None and padding_idx >= new_num_tokens:
            warnings.warn(f"resize_token_embeddings({new_num_tokens}) drops the [PAD] row (pad_token_id = "
                          f"{padding_idx}): the table has no padding row now, and config.pad_token_id is None",
                          stacklevel=3)  # fmt: skip
            padding_idx = self.config.pad_token_id = None
        new = nn.Embedding(new_num_tokens, old.embedding_dim, padding_idx=padding_idx,
                           device=old.weight.device, dtype=old.weight.dtype)  # fmt: skip
        with torch.no_grad():
            new.weight[:kept] = old.weight[:kept]
            if new_num_tokens > kept:
                fill = old.weight.float().mean(0) if mean_resizing else None
                if fill is None:
                    new.weight[kept:].normal_(0.0, self.config.initializer_range)
                else:
                    new.weight[kept:] = fill.to(old.weight.dtype)
            head = getattr(self, "mlm_head", None)
            if head is not None:
                bias = torch.zeros(new_num_tokens, dtype=head.bias.dtype, device=head.bias.device)
                bias[:kept] = head.bias[:kept]
                head.bias = nn.Parameter(bias)
        embeddings.word_embeddings = new
        self.config.vocab_size = new_num_tokens
        return new

    def save_pretrained(self, save_directory: str | os.PathLike, **keywords) -> None:
        """Write ``config.json`` and ``model.safetensors`` with the hub's tensor names into
        ``save_directory`` (transformers' name; created if needed). A model loaded with
        ``dtype="int8"`` is saved in float32, from its checkpoint: int8 is a loading choice.
        transformers' keywords are taken where minibert honours them (``is_main_process``,
        ``state_dict``, ``max_shard_size``, ``safe_serialization=True``, ``push_to_hub=False``,
        ``save_function``: loading/save_pretrained.py); another is a TypeError listing them."""
        from .loading.save_pretrained import save_options, save_pretrained
        from .speed.int8 import is_int8
        from .speed.int8_twin import float32_twin, follow_save

        options = save_options(keywords)
        refuse_if_model_file_written_over(self)  # (int8's float32 twin would read the file written over)
        if not is_int8(self):
            return save_pretrained(self, save_directory, options)
        if options.state_dict is not None:
            raise ValueError("save_pretrained: state_dict= with a model loaded with dtype='int8': its float32 "
                             "weights are saved, from its checkpoint; leave state_dict out")  # fmt: skip
        save_pretrained(float32_twin(self), save_directory, options)
        if options.is_main_process:
            follow_save(self, save_directory)  # saved into the folder it was loaded from: its files are its own


def _is_positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


_held: dict[nn.Module, list] = {}  # module → [runs under way that hold it in eval, its own mode before the first]
_held_lock = threading.Lock()


@contextlib.contextmanager
def evaluating(model: nn.Module):
    """The model in eval mode for the block, each submodule's own mode put back after it: what every
    minibert function that computes with a model it was given (fill_mask, classify, tag, answer,
    CrossEncoder, Embedder, explore) runs its forward passes under.

    A model left in training mode (just fine-tuned, or ``.train()`` called) keeps dropout on: a
    tenth of its activations dropped at random, other numbers on each call, attention rows that do
    not sum to 1. sentence-transformers' ``encode`` and ``predict`` call ``model.eval()`` for the
    same reason (and leave the model so); this leaves it as it was, so that a training loop can
    call a task between steps. Runs that overlap (threads; one on a model, one on its encoder) count
    per module: each module's mode comes back when the last run holding it ends.

    The mode is the modules' own flag, shared by every thread: a model trained in one thread while
    another runs a task on it is not supported (its weights change under the run too). What can be
    seen is refused: a ``train()`` made while a run holds the model (a training loop's, each epoch)
    ends that run with ``ModeChangedError`` rather than numbers that may have had dropout, and is
    kept. A training step taken in another thread during the run runs in eval mode; to train and
    use one model at once, run the task on a copy (``copy.deepcopy(model)``).

        >>> model = torch.nn.Sequential(torch.nn.Dropout(0.1)).train()
        >>> with evaluating(model):
        ...     model.training
        False
        >>> model.training
        True
    """
    modules = list(model.modules())  # (as they are now: a module swapped in meanwhile is not ours)
    with _held_lock:
        # A model all in eval mode that no other run holds (an Embedder's, every call) is left alone:
        # switching and putting back ~40 modules' modes cost as much as a forward pass of a tiny model
        switching = any(module.training or module in _held for module in modules)
        if switching:
            for module in modules:
                _held.setdefault(module, [0, module.training])[0] += 1
            model.eval()
    computed = False
    try:
        yield model
        computed = True
    finally:
        with _held_lock:
            switched = [module for module in modules if module.training]  # a train() made while held
            for module in modules if switching else ():
                held = _held[module]
                held[0] -= 1
                if held[0] == 0:
                    del _held[module]
                    if not module.training:  # (a train() made meanwhile is kept)
                        _put_back(module, held[1])
    if switched and computed:
        raise ModeChangedError(
            f"{type(model).__name__} was put in training mode ({type(switched[0]).__name__}.train(), in another "
            "thread?) while minibert computed with it in eval mode: its numbers may have had dropout, so none is "
            "returned. Run tasks on a copy of a model being trained (copy.deepcopy(model))"
        )


def _put_back(module: nn.Module, mode: bool) -> None:
    """``module``'s own flag only (``.train(mode)`` would set its children too, which another run may
    still hold), or its own ``train`` where its class has one (packed_linear.py's, without children)."""
    if type(module).train is nn.Module.train:
        module.training = mode
    else:
        module.train(mode)
