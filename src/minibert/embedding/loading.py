"""What ``SentenceTransformer(m)`` reads, read for the Embedder: the tokenizer, the model and the
recipe (recipe.py), from one commit of a hub repository (loading/hub_commit.py), with
sentence-transformers' download keywords, which its ``SentenceTransformer`` and ``CrossEncoder`` take
(``token``, ``cache_folder``, ``local_files_only``: transformers' ``token``, ``cache_dir`` and
``local_files_only``). tasks/rerank.py's CrossEncoder takes them here too.
"""

from __future__ import annotations

import functools
import logging

from ..errors import MissingHeadsError, ModelNotFoundError
from ..loading.hub import HubOptions, hub_options
from ..loading.hub_commit import one_load
from ..loading.transformers_keywords import hub_keywords
from ..model import BertModel
from ..tokenizer.bert_tokenizer import BertTokenizer
from ..tokenizer.named_class import check_tokenizer_class
from .recipe import SentenceRecipe, read_modules, read_recipe

logger = logging.getLogger("minibert")

# sentence-transformers' download keywords (SentenceTransformer's and CrossEncoder's, version 6).
DOWNLOAD_KEYWORDS = ("token", "cache_folder", "local_files_only")


def download_keywords(caller: str, takes: str, others: dict, **given) -> HubOptions:
    """HubOptions of sentence-transformers' download keywords ``given``, checked; ``others`` (any
    other keyword the call got) are refused with a TypeError that lists what ``caller`` takes."""
    if others:
        raise TypeError(f"{caller}() got unexpected keyword arguments {sorted(others)}; it takes {takes}, and "
                        f"sentence-transformers' {', '.join(DOWNLOAD_KEYWORDS)} (docs/migrating.md)")  # fmt: skip
    return hub_keywords(dict(given), cache_name="cache_folder")


def load_parts(name_or_path, revision: str | None, hub: HubOptions, **model_keywords):
    """(model, tokenizer, recipe or None) of a folder or hub repository, every file from one commit.
    An encoder saved without its pooler (an MLM-trained BERT) loads without one: only
    ``pooling="pooler"`` reads it, and says so then. modules.json is checked first (``read_modules``):
    a pipeline minibert does not load is refused for that reason, not for a tokenizer missing at the root."""
    with one_load(), hub_options(hub):  # ``hub`` checked once (download_keywords): each part is given none
        modules = read_modules(name_or_path, revision)  # a pipeline minibert cannot load says so before "no vocab.txt"
        check_tokenizer_class(name_or_path, revision)  # sentence-transformers builds the class a folder names
        tokenizer = BertTokenizer.from_pretrained(name_or_path, revision=revision)
        load = functools.partial(BertModel.from_pretrained, name_or_path, revision=revision, **model_keywords)
        try:
            model = load()
        except MissingHeadsError as error:
            if not error.only_the_pooler:
                raise
            model = load(add_pooling_layer=False)
        recipe = read_recipe(name_or_path, revision, hidden_size=model.config.hidden_size, modules=modules)
    return model, tokenizer, recipe


def recipe_of(model) -> SentenceRecipe:
    """The recipe of the folder (or hub commit) ``model`` was loaded from, as ``from_pretrained`` reads
    it: ``Embedder(model, tokenizer)`` of a sentence-transformers model embeds as its
    ``SentenceTransformer`` does (it mean-pooled, unnormalized, at the tokenizer's length). A model
    built from a config, or a plain BERT's folder: mean pooling."""
    source = getattr(model, "name_or_path", None)
    if source is None:
        return SentenceRecipe()
    try:
        with one_load():  # (the commit the model was read at: its config's _commit_hash)
            found = read_recipe(str(source), getattr(model.config, "_commit_hash", None),
                                hidden_size=model.config.hidden_size)  # fmt: skip
    except (ModelNotFoundError, OSError) as error:  # (a folder gone since, a hub not reachable now)
        logger.warning("the recipe of %s cannot be read now (%s): mean pooling; pass recipe=, or load with "
                       "Embedder.from_pretrained", source, " ".join(str(error).split())[:200])  # fmt: skip
        return SentenceRecipe()
    return found or SentenceRecipe()
