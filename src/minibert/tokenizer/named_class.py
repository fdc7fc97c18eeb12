"""The tokenizer class a folder names, as transformers' ``AutoTokenizer`` reads it.

``AutoTokenizer.from_pretrained(folder)`` builds the class that tokenizer_config.json's
``tokenizer_class`` names (else config.json's), whatever the model is: a folder whose config says
``MPNetTokenizer`` or ``RobertaTokenizer`` is tokenized by that class, with its own framing and ids.
minibert has one tokenizer, BERT's WordPiece, so wherever minibert stands for a reference that loads
with ``AutoTokenizer`` (minibert's ``AutoTokenizer``; the ``Embedder``, as sentence-transformers; the
tasks, as transformers' pipelines; ``CrossEncoder``; ``minibert finetune``, as run_glue) a class that
is not BERT's is refused, naming the file and the field, rather than read as BERT's. (Its
``BertTokenizer.from_pretrained`` loads any folder as BertTokenizer, as transformers' does.)

    >>> check_tokenizer_class("minibert/fortunes-mini")      # tokenizer_class "BertTokenizer"
"""

from __future__ import annotations

from ..errors import CheckpointError
from ..formats.json_files import short_json
from ..loading.config_files import config_values
from ..loading.hub import resolve_file
from .tokenizer_json import read_json_object

# The names transformers 5.24's AutoTokenizer (tokenization_auto.tokenizer_class_from_name) resolves to
# its BertTokenizer itself (Electra's, LayoutLM's, ... are that class), or to a subclass of it that
# keeps its ids (ConvBert's; DistilBERT's; DPR's encoders', which change only the file names, to the
# same ones); and BertTokenizerLegacy, transformers' slow BertTokenizer, which minibert reads as such
# (directory.py). tests/test_heads_auto.py checks each against transformers. (DistilBERT's and the
# slow BertTokenizerLegacy return no token_type_ids in transformers, as TokenizersBackend does: the
# ids are BERT's, the segments of a pair are left to the model's default, zeros.)
BERT_TOKENIZER_CLASSES = frozenset(
    [f"{name}{fast}" for name in ("BertTokenizer", "ElectraTokenizer", "LayoutLMTokenizer", "LxmertTokenizer",
                                  "MobileBertTokenizer", "SqueezeBertTokenizer", "ConvBertTokenizer",
                                  "DistilBertTokenizer", "DPRContextEncoderTokenizer", "DPRQuestionEncoderTokenizer")
     for fast in ("", "Fast")] + ["BertTokenizerLegacy"]
)  # fmt: skip
# The classes that run tokenizer.json as it is (the tokenizers library's pipeline), as minibert reads it.
FILE_RUNNERS = ("PreTrainedTokenizerFast", "TokenizersBackend")
# A near miss: BERT's WordPiece, with a call of its own.
_WHY_NOT = {"DPRReaderTokenizer": "BERT's WordPiece, with a call of its own (questions, titles and texts)"}


def named_class(name_or_path, revision: str | None = None) -> tuple[str, object] | None:
    """(file, the class it names) as AutoTokenizer finds it: tokenizer_config.json's
    ``tokenizer_class``, else (absent or null there) config.json's; None where neither names one."""
    for name in ("tokenizer_config.json", "config.json"):
        path = resolve_file(name_or_path, name, revision=revision, required=False)
        if path is None:
            continue
        # (a malformed tokenizer_config.json is refused here, as BertTokenizer's loading refuses it;
        # a broken config.json decides nothing: the model's loading names it)
        values = read_json_object(path) if name == "tokenizer_config.json" else config_values(path) or {}
        if values.get("tokenizer_class") is not None:
            return str(path), values["tokenizer_class"]
    return None


def check_tokenizer_class(name_or_path, revision: str | None = None) -> None:
    """A ``CheckpointError`` naming the file and its ``tokenizer_class`` when AutoTokenizer would build
    another tokenizer than BERT's WordPiece there (``BERT_TOKENIZER_CLASSES``), or a class that runs
    tokenizer.json (``FILE_RUNNERS``) in a folder that has none (transformers cannot build it either)."""
    named = named_class(name_or_path, revision)
    if named is None:
        return
    path, tokenizer_class = named
    if not isinstance(tokenizer_class, str):
        raise CheckpointError(f"{path}: tokenizer_class must be a class name (a string), got "
                              f"{short_json(tokenizer_class)}")  # fmt: skip
    if tokenizer_class in BERT_TOKENIZER_CLASSES:
        return
    if tokenizer_class in FILE_RUNNERS:
        if resolve_file(name_or_path, "tokenizer.json", revision=revision, required=False) is None:
            raise CheckpointError(f"{path}: tokenizer_class {tokenizer_class!r} runs tokenizer.json, and "
                                  f"{name_or_path} has none (transformers cannot build it either): name "
                                  "\"BertTokenizer\" to read vocab.txt")  # fmt: skip
        return
    why = _WHY_NOT.get(tokenizer_class.removesuffix("Fast"), "another tokenizer than BERT's WordPiece")
    raise CheckpointError(
        f"{path}: tokenizer_class {tokenizer_class!r}: transformers' AutoTokenizer builds that class ({why}), so "
        "it gives other ids or inputs than minibert's BertTokenizer, which runs BERT's; minibert refuses the "
        "folder. Load it with transformers; or, if it is a BERT tokenizer saved under another name, set "
        'tokenizer_class to "BertTokenizer"'
    )
