"""What config.json may hold besides the numbers of ``BertConfig`` (config.py), and each number's domain.

Every field that transformers' BERT code (or an older BERT config on the hub) has is accounted for:
a field of ``BertConfig`` (implemented), or in ``IGNORED`` (it changes nothing minibert computes,
with the reason), or in ``REFUSED_UNLESS`` (a value that asks for something minibert does not
compute: loading stops with a ``CheckpointError`` naming the field and its value).
tests/test_model_config.py checks the accounting against transformers' ``BertConfig``. Last, the
constructor's wrapper that takes those fields as keywords (``taking_config_json_fields``).
"""

import dataclasses
import functools

# The fields from_pretrained(**label_config) replaces, as transformers' from_pretrained does: the
# classification heads' labels (loading/from_pretrained.py; speed/int8.py keeps them when it rebuilds).
LABEL_FIELDS = ("num_labels", "id2label", "label2id", "problem_type", "classifier_dropout")

# transformers' defaults of each call, kept in the config (``config.output_hidden_states = True``,
# or config.json's): a call that names them decides (pretrained.py: PretrainedBert.__call__).
CALL_DEFAULTS = ("output_hidden_states", "output_attentions", "return_dict")

# The dataclass's fields that decide the tensors' shapes (a checkpoint's weights fix them), and its others:
# read as each module is built, changing no shape, so that from_pretrained(path, **fields) takes them
# (loading/config_keywords.py). BertConfig.from_pretrained(path, **fields) takes CONFIG_FIELDS: every field
# minibert reads, and two it keeps and saves (loading/config_files.py).
SHAPE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "type_vocab_size")  # fmt: skip
BUILD_FIELDS = ("hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps",
                "initializer_range", "pad_token_id")  # fmt: skip
CONFIG_FIELDS = (*SHAPE_FIELDS, *BUILD_FIELDS, *LABEL_FIELDS, *CALL_DEFAULTS, "use_cache", "finetuning_task")

# Google's bert_config.json is read as Google's modeling.BertConfig.from_dict reads it (bert-tensorflow 1.0.4):
# a field it omits takes Google's default, not transformers', which differs in type_vocab_size (Google 16,
# transformers 2); vocab_size has no default there (None, on which Google's model fails): refused, named.
GOOGLE_CONFIG = "bert_config.json"
GOOGLE_DEFAULTS = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                   "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                   "max_position_embeddings": 512, "type_vocab_size": 16, "initializer_range": 0.02}  # fmt: skip


def with_google_defaults(values: dict, path) -> dict:
    """bert_config.json's fields, each field it omits given Google's default (``GOOGLE_DEFAULTS``), so
    that minibert builds the model Google's code built from the same file; no vocab_size is an error."""
    if "vocab_size" not in values:
        raise ValueError(f"{path} names no vocab_size, which Google's BertConfig requires (it has no default)")
    return {**GOOGLE_DEFAULTS, **values}


# Fields of config.json that read as attributes (``config.is_decoder``), as transformers' config has
# them: config.json's value, else transformers' default (position_embedding_type and finetuning_task,
# which transformers 5 has only when config.json does: what minibert computes, and None). ``model_type``
# is always "bert".
READABLE = {
    "architectures": None,
    "is_decoder": False,
    "add_cross_attention": False,
    "is_encoder_decoder": False,
    "position_embedding_type": "absolute",
    "tie_word_embeddings": True,
    "use_cache": True,
    "return_dict": True,
    "output_hidden_states": False,
    "output_attentions": False,
    "chunk_size_feed_forward": 0,
    "problem_type": None,
    "classifier_dropout": None,
    "finetuning_task": None,
    "bos_token_id": None,
    "eos_token_id": None,
    "transformers_version": None,
}
# The fields that may be set on a built model's config because minibert reads them at use (config.py):
# the classification heads' labels and their loss, and each call's defaults; and use_cache, which changes
# nothing an encoder computes but which transformers' Trainer sets on every model it is given (kept, and saved).
SETTABLE = ("problem_type", "id2label", "label2id", "num_labels", *CALL_DEFAULTS, "use_cache")
PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")

# Fields that change nothing minibert computes, and why.
IGNORED = {
    "architectures": "names the heads the checkpoint was saved with; the class you load decides",
    "model_type": "checked when config.json is read: only 'bert' loads",
    "transformers_version": "metadata",
    "_name_or_path": "metadata",
    "dtype": "the stored weights' dtype; minibert computes in the dtype you ask for (fp32 by default)",
    "torch_dtype": "older name of dtype",
    "use_cache": "key/value caching for decoders; an encoder has no cache (settable, as transformers' Trainer "
    "sets it, and saved)",
    "chunk_size_feed_forward": "computes the per-token feed-forward in chunks: the same function",
    "output_attentions": "the default of each call (its own output_attentions= decides): what is returned",
    "output_hidden_states": "the default of each call (its own output_hidden_states= decides): what is returned",
    "return_dict": "the default of each call's output type (its own return_dict= decides)",
    "use_return_dict": "older name of return_dict",
    "torchscript": "export setting",
    "classifier_dropout": "read by the classification heads (heads.py: Labels); the encoder ignores it",
    "id2label": "read by the classification heads (heads.py: Labels); the encoder ignores it",
    "label2id": "the inverse of id2label, which the heads read",
    "num_labels": "read by the classification heads when there is no id2label",
    "_num_labels": "older name of num_labels",
    "problem_type": "read by BertForSequenceClassification for its loss (at each call with labels)",
    "finetuning_task": "metadata",
    "bos_token_id": "generation setting; an encoder does not generate",
    "eos_token_id": "generation setting",
    "sep_token_id": "generation setting",
    "decoder_start_token_id": "generation setting",
    "_attn_implementation": "eager or sdpa: the same attention, computed two ways",
    "attn_implementation": "eager or sdpa: the same attention, computed two ways",
    "gradient_checkpointing": "trades compute for memory in training; same numbers",
    "output_past": "older name of use_cache",
    "xla_device": "device placement",
    "directionality": "metadata of Google's Chinese and multilingual configs (bidi), read by no code",
    "pooler_fc_size": "from Google's internal configs; read by neither Google's code nor transformers",
    "pooler_num_attention_heads": "the same",
    "pooler_num_fc_layers": "the same",
    "pooler_size_per_head": "the same",
    "pooler_type": "the same (always first_token_transform: minibert's pooler)",
    "tie_word_embeddings": "the masked-LM decoder's weight is the word embedding matrix; the heads "
    "refuse a config that unties them (see BertForPreTraining)",
}

# Fields whose other values ask for a computation minibert does not do: field → (values minibert
# computes exactly, what another value would mean).
REFUSED_UNLESS = {
    "position_embedding_type": (["absolute"], "relative position embeddings (Shaw et al. 2018 / "
                                "Huang et al. 2020) are not implemented; minibert adds absolute positions"),
    "is_decoder": ([False], "BERT as a decoder (causal attention) is out of scope"),
    "add_cross_attention": ([False], "cross-attention to an encoder (a decoder's) is out of scope"),
    "is_encoder_decoder": ([False], "encoder-decoder models are out of scope"),
    "pruned_heads": ([{}], "pruned attention heads are not implemented"),
    "quantization_config": ([None], "quantized weights are not implemented"),
    "per_layer_config": ([None, {}], "per-layer overrides of the config (transformers 5's PreTrainedConfig field) are "
                         "not implemented; minibert computes every layer from the config's own fields"),
}  # fmt: skip

# The config.json fields besides the dataclass's that minibert accounts for: the keywords BertConfig(...)
# takes beyond its own fields (config.py), kept in ``extra`` as from_dict keeps them.
CONFIG_JSON_FIELDS = (*IGNORED, *REFUSED_UNLESS)


# The domain of each number (inclusive). The upper bounds are far above any BERT published (the
# largest has 48 layers, 4,096 wide, 250k pieces) and keep a hostile config from asking for
# minutes of work or gigabytes of memory before the weights file can disagree with it.
INTEGER_RANGES = {
    "vocab_size": (1, 16_777_216),
    "hidden_size": (1, 65_536),
    "num_hidden_layers": (1, 1_024),
    "num_attention_heads": (1, 65_536),
    "intermediate_size": (1, 1_048_576),
    "max_position_embeddings": (1, 1_048_576),
    "type_vocab_size": (1, 65_536),
}
# name: (low, high, low excluded)
REAL_RANGES = {
    "layer_norm_eps": (0.0, 1.0, True),
    "hidden_dropout_prob": (0.0, 1.0, False),
    "attention_probs_dropout_prob": (0.0, 1.0, False),
    "initializer_range": (0.0, 1e6, False),
}


def taking_config_json_fields(cls):
    """``BertConfig(..., num_labels=3)``, as transformers' constructor: a keyword that is not one of the
    dataclass's fields but that config.json may hold (transformers' BertConfig has it: the labels,
    ``classifier_dropout``, ``output_hidden_states``, ``position_embedding_type``, ...) goes into ``extra``,
    as ``from_dict`` puts it, and means what it means there (``__post_init__`` refuses a value minibert does
    not compute). A keyword neither library knows is a TypeError listing what is taken (transformers keeps
    it as an attribute that nothing reads)."""
    made_by_dataclass, field_names = cls.__init__, [field.name for field in dataclasses.fields(cls)]

    @functools.wraps(made_by_dataclass)
    def __init__(self, *args, **keywords):
        outside = {name: keywords.pop(name) for name in list(keywords) if name not in field_names}
        unknown = sorted(set(outside) - set(CONFIG_JSON_FIELDS))
        if unknown:
            raise TypeError(
                f"BertConfig() got unexpected keyword arguments {unknown}: it takes its fields "
                f"{', '.join(name for name in field_names if name != 'extra')}, extra, and config.json's other fields "
                f"(transformers' and older BERT configs'): {', '.join(sorted(CONFIG_JSON_FIELDS))}"
            )
        if outside:
            keywords["extra"] = {**keywords.get("extra", {}), **outside}
        made_by_dataclass(self, *args, **keywords)

    cls.__init__ = __init__
    return cls
