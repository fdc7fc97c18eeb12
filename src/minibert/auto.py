"""transformers' ``Auto`` names, for BERT checkpoints: the tutorials run with only the import changed.

transformers' tutorials begin with ``AutoTokenizer`` and ``AutoModel``, which read ``config.json``
and pick the class of its ``model_type``. minibert implements one architecture, so each ``Auto``
name here stands for one BERT class and loads exactly as that class does; a checkpoint of another
architecture (``model_type`` "roberta", "gpt2", ...) is refused with a ``CheckpointError`` that
names its model_type, and so is a tokenizer of another kind (tokenizer_config.json's ``tokenizer_class``
"MPNetTokenizer", ...: tokenizer/named_class.py), which transformers' AutoTokenizer would build:

    >>> from minibert import AutoModel, AutoTokenizer
    >>> tokenizer = AutoTokenizer.from_pretrained("minibert/fortunes-mini")    # a BertTokenizer
    >>> model = AutoModel.from_pretrained("minibert/fortunes-mini")            # a BertModel
    >>> model(**tokenizer("Hello world", return_tensors="pt")).last_hidden_state.shape
    torch.Size([1, 4, 256])

    AutoModel                              → BertModel
    AutoModelForPreTraining                → BertForPreTraining
    AutoModelForMaskedLM                   → BertForMaskedLM
    AutoModelForNextSentencePrediction     → BertForNextSentencePrediction
    AutoModelForSequenceClassification     → BertForSequenceClassification
    AutoModelForTokenClassification        → BertForTokenClassification
    AutoModelForQuestionAnswering          → BertForQuestionAnswering
    AutoModelForMultipleChoice             → BertForMultipleChoice
    AutoTokenizer                          → BertTokenizer
    AutoConfig                             → BertConfig

One difference stays, as in the named classes: a head the checkpoint lacks (a classifier on
bert-base) is an error unless ``new_heads=True`` asks for fresh weights (transformers starts them
with a warning).
"""

from __future__ import annotations

import os

from . import heads
from .config import BertConfig
from .errors import CheckpointError
from .loading.config_files import config_file as config_file_of
from .loading.config_files import config_values
from .loading.hub import hub_options
from .loading.hub_commit import before_the_first_file, one_load
from .loading.transformers_keywords import hub_keywords
from .model import BertModel
from .tokenizer import BertTokenizer
from .tokenizer.named_class import check_tokenizer_class


def _refuse_other_architectures(auto_name: str, name_or_path, revision: str | None, required: bool = True) -> None:
    """A ``CheckpointError`` naming the model_type when config.json describes another architecture."""
    config_file = config_file_of(name_or_path, revision, required)
    if config_file is None:
        return
    values = config_values(config_file)  # (None: the class's own loading names the broken file)
    model_type = "bert" if values is None else values.get("model_type", "bert")
    if model_type != "bert":
        raise CheckpointError(
            f"{auto_name}: {os.fspath(name_or_path)} is a {model_type!r} checkpoint (config.json model_type), but "
            f"minibert implements BERT only (model_type 'bert'); load it with transformers' {auto_name}"
        )


class _AutoClass:
    """One ``Auto`` name: ``from_pretrained`` checks the architecture, then loads as ``bert_class``."""

    bert_class: type

    def __init__(self, *args, **kwargs):
        name = type(self).__name__
        raise OSError(  # as transformers: an Auto class is never built directly
            f"{name} is not built directly: use {name}.from_pretrained(name_or_path)"
        )

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, *args, revision: str | None = None, **kwargs):
        """``bert_class.from_pretrained(name_or_path, ...)``, refusing another architecture (and, first
        of all, a ``device`` that is not there). The class checks its keywords first; config.json is
        then read for its model_type, just before the class's first file (hub_commit.py
        ``before_the_first_file``: a misspelt keyword costs no request), as the class reads its
        files: with the call's ``cache_dir``, ``local_files_only`` and ``token``."""
        if "device" in kwargs:
            from .loading.devices import placement

            kwargs["device"] = placement(kwargs["device"], kwargs.get("dtype"))
        hub = hub_keywords(kwargs)  # the download keywords, checked once and taken out: the class is given none
        # config.json read here and the class's files: one commit (loading/hub_commit.py), with those options
        with one_load(), hub_options(hub), before_the_first_file(lambda: cls._refuse_others(name_or_path, revision)):
            return cls.bert_class.from_pretrained(name_or_path, *args, revision=revision, **kwargs)

    @classmethod
    def _refuse_others(cls, name_or_path, revision: str | None) -> None:
        """A checkpoint this name would load as another architecture in transformers: refused."""
        _refuse_other_architectures(cls.__name__, name_or_path, revision)


class _AutoModelClass(_AutoClass):
    @classmethod
    def from_config(cls, config: BertConfig):
        """A model with fresh weights, as ``bert_class(config)`` builds it."""
        return cls.bert_class(config)


class AutoModel(_AutoModelClass):
    bert_class = BertModel


class AutoModelForPreTraining(_AutoModelClass):
    bert_class = heads.BertForPreTraining


class AutoModelForMaskedLM(_AutoModelClass):
    bert_class = heads.BertForMaskedLM


class AutoModelForNextSentencePrediction(_AutoModelClass):
    bert_class = heads.BertForNextSentencePrediction


class AutoModelForSequenceClassification(_AutoModelClass):
    bert_class = heads.BertForSequenceClassification


class AutoModelForTokenClassification(_AutoModelClass):
    bert_class = heads.BertForTokenClassification


class AutoModelForQuestionAnswering(_AutoModelClass):
    bert_class = heads.BertForQuestionAnswering


class AutoModelForMultipleChoice(_AutoModelClass):
    bert_class = heads.BertForMultipleChoice


class AutoTokenizer(_AutoClass):
    """``BertTokenizer.from_pretrained``; a folder with a config.json of another model_type, or whose
    ``tokenizer_class`` names another tokenizer than BERT's, is refused."""

    bert_class = BertTokenizer

    @classmethod
    def _refuse_others(cls, name_or_path, revision: str | None) -> None:
        _refuse_other_architectures(cls.__name__, name_or_path, revision, required=False)  # (a tokenizer alone)
        check_tokenizer_class(name_or_path, revision)


class AutoConfig(_AutoClass):
    """``BertConfig.from_pretrained``: config.json (bert_config.json in Google's zips) with the fields
    given, ``AutoConfig.from_pretrained(path, num_labels=3)``."""

    bert_class = BertConfig
