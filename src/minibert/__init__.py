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
    "BertTokenizerFast": "tokenizer",
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
    "get_constant_schedule": "training.schedules",
    "get_scheduler": "training.schedules",
    "set_seed": "training.own_loop",
    "DataCollatorWithPadding": "training.own_loop",
}

# transformers' schedules that minibert does not have, by get_scheduler's name for each (its SchedulerType)
# → the function of transformers that makes it. Importing the function from minibert (below), and
# get_scheduler(name) (training/schedules.py), both say to keep transformers' own.
TRANSFORMERS_ONLY_SCHEDULES = {
    "cosine_with_restarts": "get_cosine_with_hard_restarts_schedule_with_warmup",
    "polynomial": "get_polynomial_decay_schedule_with_warmup", "inverse_sqrt": "get_inverse_sqrt_schedule",
    "reduce_lr_on_plateau": "get_reduce_on_plateau_schedule",
    "cosine_with_min_lr": "get_cosine_with_min_lr_schedule_with_warmup",
    "cosine_warmup_with_min_lr": "get_cosine_with_min_lr_schedule_with_warmup_lr_rate",
    "warmup_stable_decay": "get_wsd_schedule", "greedy": "get_greedy_schedule"}  # fmt: skip

# Names the tutorials import from transformers that minibert does not have: what to write instead.
# (A name transformers itself removed, AdamW, too. tests/test_training_own_loop.py checks that each
# other one is transformers', and what the messages say of transformers' classes with minibert's.)
_SCHEDULES = ("minibert has the linear, cosine and constant schedules (get_scheduler's 'linear', 'cosine', "
              "'constant', 'constant_with_warmup'; get_linear_schedule_with_warmup, ...); for {name} keep `from "
              "transformers import {name}`: transformers' schedules and optimizers take any torch optimizer or "
              "parameters, a minibert model's too")  # fmt: skip
_TRAINER = ("minibert has no {name}; keep `from transformers import {name}`: transformers' Trainer (which needs "
            "accelerate) trains minibert's models as its own (docs/migrating.md); save with "
            "trainer.model.save_pretrained(folder), not trainer.save_model")  # fmt: skip
_COLLATOR = ("minibert has DataCollatorWithPadding only; keep `from transformers import {name}`: it takes "
             "minibert's tokenizer and makes the batches it makes with transformers' own")  # fmt: skip
_DECODER = ("minibert implements BERT as an encoder: no decoder (is_decoder), no generate(); for {name}, "
            "keep `from transformers import {name}`, with a decoder's checkpoint")  # fmt: skip
_NOT_HERE = {
    "AdamW": "transformers removed its AdamW (and so has minibert): use torch.optim.AdamW, and give weight_decay and "
             "eps, whose defaults differ (transformers' AdamW: weight_decay=0.0, eps=1e-6; torch's: 0.01 and 1e-8). "
             "The tutorials' AdamW(model.parameters(), lr=2e-5, eps=1e-8) becomes "
             "torch.optim.AdamW(model.parameters(), lr=2e-5, eps=1e-8, weight_decay=0.0), whose steps differ a "
             "little early on: transformers added eps before the bias correction, torch after, so transformers' "
             "eps weighed as eps/sqrt(1 - 0.999**step) does in torch (32x at step 1, 3x at step 100), which "
             "matters for gradients within some hundred times eps. correct_bias=False has no "
             "equivalent: torch always corrects the bias",
    **dict.fromkeys([*TRANSFORMERS_ONLY_SCHEDULES.values(), "Adafactor"], _SCHEDULES),
    "SchedulerType": "minibert's get_scheduler takes the schedule's name as a string ('linear', 'cosine', 'constant', "
                     "'constant_with_warmup'), or transformers' SchedulerType: `get_scheduler('linear', optimizer, "
                     "num_warmup_steps=0, num_training_steps=steps)`",
    **dict.fromkeys(["Trainer", "TrainingArguments", "TrainerCallback", "EarlyStoppingCallback", "EvalPrediction"],
                    _TRAINER),
    **dict.fromkeys(["DataCollatorForLanguageModeling", "DataCollatorForTokenClassification"], _COLLATOR),
    **dict.fromkeys(["default_data_collator", "DefaultDataCollator"],
                    "minibert has DataCollatorWithPadding (it pads each batch to its longest row); for rows of one "
                    "length already, keep `from transformers import {name}`: it stacks them, with no tokenizer"),
    "enable_full_determinism": "minibert's set_seed(seed, deterministic=True) seeds every generator and turns on "
                               "torch.use_deterministic_algorithms; {name} also sets CUDA's environment variables "
                               "and cudnn's flags: keep `from transformers import {name}` for that",
    "pipeline": "minibert's one-call tasks do for BERT what pipeline does: `from minibert import fill_mask, "
                "classify, tag, answer` (docs/tasks.md); transformers' pipeline(task, model=folder) also loads a "
                "folder that minibert saved",
    "logging": "minibert logs through Python's logging, to the logger 'minibert' (how a call is written is said "
               "with Python's warnings): for transformers' logging.set_verbosity_error(), write "
               "`import logging; logging.getLogger('minibert').setLevel(logging.ERROR)`",
    **dict.fromkeys(["PreTrainedModel", "BertPreTrainedModel"],
                    "minibert's models derive from minibert.pretrained.PretrainedBert (from_pretrained, "
                    "save_pretrained, ...): `from minibert.pretrained import PretrainedBert`"),
    **dict.fromkeys(["PreTrainedTokenizer", "PreTrainedTokenizerFast", "PreTrainedTokenizerBase"],
                    "minibert has one tokenizer class, `from minibert import BertTokenizer` (AutoTokenizer and "
                    "BertTokenizerFast name it too)"),
    **dict.fromkeys(["PretrainedConfig", "PreTrainedConfig"],
                    "minibert has one config class, `from minibert import BertConfig`"),
    **dict.fromkeys(["BertLMHeadModel", "AutoModelForCausalLM", "AutoModelForSeq2SeqLM"], _DECODER),
}
# Any other name spelt as a class: say where minibert's names are listed.
_CLASS_LIKE = ("minibert has no {name}. Its names are transformers' for BERT's models, tokenizer, config and "
               "training helpers (minibert.__all__; docs/migrating.md); if {name} is transformers', keep `from "
               "transformers import {name}` (another architecture: load it with transformers)")  # fmt: skip


def _not_here(name: str) -> str | None:
    """What to write instead of ``name``, a name minibert does not have; None when nothing is known."""
    advice = _NOT_HERE.get(name)
    if advice is None and name[:1].isupper() and name.isalnum() and not name.isupper():
        advice = _CLASS_LIKE  # (CamelCase only: tools probe attributes such as __wrapped__ with hasattr)
    return None if advice is None else advice.format(name=name)


__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    advice = None if module is not None else _not_here(name)
    if advice is not None:  # (an ImportError: `from minibert import AdamW` shows this message as it is)
        raise ImportError(f"cannot import {name} from minibert: {advice}", name=name)
    if module is None:
        raise AttributeError(f"module 'minibert' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
