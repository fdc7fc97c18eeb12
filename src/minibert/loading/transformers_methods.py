"""The members of transformers' ``PreTrainedModel`` that code written for it calls on a BERT, besides
loading and saving (pretrained.py): the embedding tables, counts, and the hooks libraries reach for.

A reader of the book can skip this room: nothing here computes what the model computes. Each member
does what transformers' does, or refuses, saying why:

    get_output_embeddings    the masked-LM decoder, tied to the word embeddings (a view of the same
                             Parameters: assigning a new weight to it is refused, not ignored)
    set_output_embeddings    the tied decoder only (an untied one is refused, as config.json's is)
    tie_weights              nothing to do: always tied
    num_parameters           shared parameters counted once
    get_memory_footprint     the bytes of the parameters (and buffers)
    enable_input_require_grads  the word embeddings' output requires grad (PEFT's adapters on a frozen model)
    post_init                a subclass's last line: fresh weights, as ``init_weights``
    can_generate             False: an encoder
    push_to_hub              refused: minibert does not upload (save, then huggingface_hub.upload_folder)
    config_class, base_model_prefix, main_input_name, supports_gradient_checkpointing  transformers' class facts
"""

from __future__ import annotations

from torch import nn


class TiedDecoder(nn.Linear):
    """transformers' ``cls.predictions.decoder``, as minibert has it: a Linear(H, V) whose weight IS the
    word embedding table and whose bias is the masked-LM head's (the same Parameters). Its values can be
    changed in place; a new weight or bias assigned to it would change nothing in the model, so it is
    refused (transformers' untied decoder has no minibert equivalent)."""

    def __init__(self, weight: nn.Parameter, bias: nn.Parameter):
        super().__init__(weight.shape[1], weight.shape[0], device="meta")  # allocates nothing
        self.weight, self.bias = weight, bias
        self._tied = True

    def __setattr__(self, name: str, value) -> None:
        if name in ("weight", "bias") and self.__dict__.get("_tied") and value is not getattr(self, name):  # (the same
            # Parameter again, as transformers' _tie_or_clone_weights assigns it: nothing changes)
            raise AttributeError(f"the masked-LM decoder's {name} is the model's own (the decoder is tied to the word "
                                 "embeddings, always, in minibert): change its values in place "
                                 f"(decoder.{name}.data.copy_(...)), or model.set_input_embeddings / "
                                 "resize_token_embeddings for a new table")  # fmt: skip
        super().__setattr__(name, value)


class _ConfigClass:
    """``config_class``: BertConfig, imported when asked (config.py is read before the models)."""

    def __get__(self, instance, owner):
        from ..config import BertConfig

        return BertConfig


class TransformersModelMethods:
    """transformers' ``PreTrainedModel`` members that a BERT's users call (the module's table)."""

    config_class = _ConfigClass()
    base_model_prefix = "bert"  # the encoder's attribute under a head, and its tensors' prefix
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False  # refused by name (docs/migrating.md)

    def get_output_embeddings(self) -> TiedDecoder | None:
        """The masked-LM decoder (``TiedDecoder``), scoring ``mlm_head``'s transformed vectors; None
        without a masked-LM head."""
        head = getattr(self, "mlm_head", None)
        if head is None:
            return None
        return TiedDecoder(self.get_input_embeddings().weight, head.bias)  # (V, H), (V,)

    def set_output_embeddings(self, value: nn.Module) -> None:
        """Only the decoder the model has (tied: nothing to do); another, an untied decoder, is refused."""
        decoder = self.get_output_embeddings()
        if decoder is None or getattr(value, "weight", None) is not decoder.weight \
                or getattr(value, "bias", None) is not decoder.bias:  # fmt: skip
            raise ValueError("minibert's masked-LM decoder is the word embedding table itself (always tied; an "
                             "untied one is refused, as in config.json): set new values in place, or "
                             "set_input_embeddings / resize_token_embeddings for a new table")  # fmt: skip

    def tie_weights(self, *args, **kwargs) -> None:
        """Nothing to do: minibert's masked-LM decoder is the word embedding matrix itself (always tied;
        a config that unties them is refused, see heads.py)."""

    def num_parameters(self, only_trainable: bool = False, exclude_embeddings: bool = False) -> int:
        """The number of parameters, each shared one once, as transformers counts: ``only_trainable``
        those with ``requires_grad``; ``exclude_embeddings`` without the three embedding tables."""
        tables = {id(module.weight) for module in self.modules() if isinstance(module, nn.Embedding)}
        return sum(parameter.numel() for parameter in self.parameters()
                   if (parameter.requires_grad or not only_trainable)
                   and not (exclude_embeddings and id(parameter) in tables))  # fmt: skip

    def get_memory_footprint(self, return_buffers: bool = True) -> int:
        """The bytes of the parameters (each shared one once) and, with ``return_buffers``, the buffers."""
        tensors = [*self.parameters(), *(self.buffers() if return_buffers else ())]
        return sum(tensor.numel() * tensor.element_size() for tensor in tensors)

    def enable_input_require_grads(self) -> None:
        """The word embeddings' output requires grad, so that a frozen model under trainable adapters
        (PEFT) still passes gradients through the layers; ``disable_input_require_grads`` undoes it."""

        def outputs_require_grad(module, inputs, output):
            output.requires_grad_(True)

        self.disable_input_require_grads()
        self._require_grads_hook = self.get_input_embeddings().register_forward_hook(outputs_require_grad)

    def disable_input_require_grads(self) -> None:
        hook = self.__dict__.pop("_require_grads_hook", None)
        if hook is not None:
            hook.remove()

    def post_init(self) -> None:
        """A subclass's last line in transformers (``self.post_init()``): fresh weights (``init_weights``)."""
        self.init_weights()

    @classmethod
    def can_generate(cls) -> bool:
        return False  # an encoder: no generate()

    def push_to_hub(self, repo_id: str, *args, **kwargs):
        raise NotImplementedError(f"minibert does not upload: save, then upload the folder: "
                                  f"model.save_pretrained(FOLDER); huggingface_hub.upload_folder(repo_id={repo_id!r}, "
                                  "folder_path=FOLDER)")  # fmt: skip
