"""minibert: BERT from scratch in PyTorch, loading Google's pretrained weights, checked number by
number against the reference implementation.

    >>> from minibert import BertTokenizer, BertModel, Embedder

The public names are imported lazily, so ``import minibert`` is instant and the tokenizer works
without importing torch.
"""

from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "BertTokenizer": "tokenizer",
    "BasicTokenizer": "tokenizer",
    "WordPieceTokenizer": "tokenizer",
    "BatchEncoding": "tokenizer",
    "BertConfig": "config",
    "BertModel": "model",
    "BertForPreTraining": "heads",
    "BertForMaskedLM": "heads",
    "BertForNextSentencePrediction": "heads",
    "BertForSequenceClassification": "heads",
    "BertForTokenClassification": "heads",
    "BertForQuestionAnswering": "heads",
    "BertForMultipleChoice": "heads",
    "BertOutput": "model",
    "BertPreTrainingOutput": "heads",
    "AutoConfig": "auto",
    "AutoModel": "auto",
    "AutoModelForPreTraining": "auto",
    "AutoModelForMaskedLM": "auto",
    "AutoModelForNextSentencePrediction": "auto",
    "AutoModelForSequenceClassification": "auto",
    "AutoModelForTokenClassification": "auto",
    "AutoModelForQuestionAnswering": "auto",
    "AutoModelForMultipleChoice": "auto",
    "AutoTokenizer": "auto",
    "Embedder": "embedding.embedder",
    "EmbedOptions": "embedding.options",
    "fill_mask": "tasks",
    "next_sentence": "tasks",
    "classify": "tasks",
    "tag": "tasks",
    "answer": "tasks",
    "rerank": "tasks",
    "CrossEncoder": "tasks",
    "explore": "explorer",
    "Exploration": "explorer",
    "MinibertError": "errors",
    "CheckpointError": "errors",
    "ModelNotFoundError": "errors",
    "HubDownloadError": "errors",
    "InputTypeError": "errors",
    "TransformersNameError": "errors",
    "DeviceError": "errors",
    "get_linear_schedule_with_warmup": "training.schedules",
    "get_cosine_schedule_with_warmup": "training.schedules",
    "get_constant_schedule_with_warmup": "training.schedules",
}

# Names the tutorials import from transformers that transformers itself removed: what to use instead.
_REMOVED = {
    "AdamW": "transformers removed its AdamW (and so has minibert): use torch.optim.AdamW, and give weight_decay and "
             "eps, whose defaults differ (transformers' AdamW: weight_decay=0.0, eps=1e-6; torch's: 0.01 and 1e-8). "
             "The tutorials' AdamW(model.parameters(), lr=2e-5, eps=1e-8) becomes "
             "torch.optim.AdamW(model.parameters(), lr=2e-5, eps=1e-8, weight_decay=0.0), whose steps differ a "
             "little early on: transformers added eps before the bias correction, torch after, so transformers' "
             "eps weighed as eps/sqrt(1 - 0.999**step) does in torch (32x at step 1, 3x at step 100), which "
             "matters for gradients within some hundred times eps. correct_bias=False has no "
             "equivalent: torch always corrects the bias",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if name in _REMOVED:  # (an ImportError: `from minibert import AdamW` shows this message as it is)
        raise ImportError(f"cannot import {name} from minibert: {_REMOVED[name]}", name=name)
    if module is None:
        raise AttributeError(f"module 'minibert' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
