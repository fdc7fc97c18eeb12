"""Reranking with a cross-encoder: the query and one document are read together, as a pair, by a
``BertForSequenceClassification`` with one output — the relevance score — and the documents are
sorted by it. It is the second stage of a retrieval pipeline: embeddings find a hundred
candidates fast; a cross-encoder, which sees both texts at once, orders them well.

    >>> ranker = CrossEncoder("cross-encoder/ms-marco-MiniLM-L6-v2")                 # doctest: +SKIP
    >>> ranker.rank("How many people live in Berlin?", documents)                   # doctest: +SKIP
    [{'corpus_id': 0, 'score': 0.9996}, {'corpus_id': 2, 'score': 0.0012}, ...]
    >>> rerank("How many people live in Berlin?", documents, model=DIR)             # doctest: +SKIP

(The same ranking in one call; these lines need a hub checkpoint and are not run as doctests:
tests/test_tasks_cross_encoder.py compares both with sentence-transformers' CrossEncoder.)

Named and computed as sentence-transformers' ``CrossEncoder``: ``predict(pairs)`` and
``rank(query, documents, top_k, return_documents)``. What the model's folder says is followed (its
sentence-transformers files, config_sentence_transformers.json and sentence_bert_config.json, only
in a folder sentence-transformers saved, one with ``modules.json``, as it reads them):

* the activation applied to the logits: ``activation_fn`` in ``config_sentence_transformers.json``
  (sentence-transformers 5 and later), else ``sentence_transformers.activation_fn`` in
  ``config.json`` (version 4), else ``sbert_ce_default_activation_function`` (older), else a
  sigmoid for one label and none for several; a class path outside ``torch.`` is not trusted
  (sentence-transformers ignores it too) and one minibert does not compute is refused;
* the length: ``processing_kwargs``' ``max_length`` in ``sentence_bert_config.json``
  (sentence-transformers 6), else its ``max_seq_length``, else the tokenizer's ``model_max_length``
  capped at the model's positions, as sentence-transformers caps it (a folder without one,
  transformers' "no limit", gives the positions); a pair longer than that is cut, the longer text
  first, or as ``processing_kwargs``' ``truncation`` says (``only_first``, ``only_second``);
* the prompts: ``prompts`` and ``default_prompt_name`` in ``config_sentence_transformers.json``; the
  default prompt (or the one ``predict``/``rank`` name) is put before each pair's first text.

Any other ``processing_kwargs`` key is refused (embedding/folder_settings.py reads them).
"""

from __future__ import annotations

import functools
import logging
import os

import numpy as np
import torch

from ..embedding.folder_settings import choose_prompt, read_prompts, read_sequence_length, torch_class_path
from ..embedding.loading import download_keywords
from ..errors import CheckpointError, TaskArgumentError
from ..formats.json_files import read_json_object
from ..heads import BertForSequenceClassification, BertWithHeads
from ..loading.architectures import architectures_in, check_head_kind
from ..loading.devices import check_model_is_on, placement
from ..loading.hub import hub_options, resolve_file
from ..loading.hub_commit import one_load
from ..tokenizer.bert_tokenizer import BertTokenizer
from ..tokenizer.named_class import check_tokenizer_class
from .classify import sigmoid
from .loading import (
    cache_key,
    download_choice,
    load_for_task,
    loading_lock,
    refuse_download_choice,
    refuse_dtype_choice,
    run_rows,
)

logger = logging.getLogger("minibert")
SCORE_ACTIVATIONS = {  # the torch class paths sentence-transformers saves for a score, and what each computes
    "torch.nn.modules.activation.Sigmoid": sigmoid,
    "torch.nn.modules.linear.Identity": lambda x: x,
    "torch.nn.modules.activation.Tanh": np.tanh,
}
_SHORT_NAMES = {"sigmoid": "torch.nn.modules.activation.Sigmoid", "identity": "torch.nn.modules.linear.Identity",
                "tanh": "torch.nn.modules.activation.Tanh"}  # fmt: skip


class CrossEncoder:
    """A sentence-transformers cross-encoder folder (or any ``BertForSequenceClassification``
    checkpoint), scoring text pairs. ``max_length`` and ``activation_fn`` (a class path,
    ``"sigmoid"``/``"identity"``/``"tanh"``, or the torch module itself: ``torch.nn.Identity()``)
    override the folder's. (sentence-transformers lets a folder's ``processing_kwargs`` max_length
    win over a ``max_length`` given; minibert follows the one given.) ``token``, ``cache_folder``
    and ``local_files_only`` are its download keywords (embedding/loading.py)."""

    def __init__(self, model_name_or_path: str | os.PathLike, *, max_length: int | None = None,
                 activation_fn: str | None = None, revision: str | None = None, dtype=None, device=None,
                 gemm: str | None = None, token: str | bool | None = None,
                 cache_folder: str | os.PathLike | None = None, local_files_only: bool = False, **others):  # fmt: skip
        hub = download_keywords("CrossEncoder", "max_length, activation_fn, revision, dtype, device, gemm", others,
                                token=token, cache_folder=cache_folder, local_files_only=local_files_only)  # fmt: skip
        source = os.fspath(model_name_or_path)
        device = placement(device, dtype, computes="a CrossEncoder")  # said before a file is read
        # The model, the tokenizer and the settings: one commit (loading/hub_commit.py), with the download
        # keywords checked once (each part is given none: loading/hub.py hub_options).
        with one_load(), hub_options(hub):
            # a token classifier's head would load too: refused by config.json's word
            check_head_kind(BertForSequenceClassification, *architectures_in(source, revision))
            self.model = BertForSequenceClassification.from_pretrained(source, revision=revision, dtype=dtype,
                                                                       device=device, gemm=gemm).eval()  # fmt: skip
            check_tokenizer_class(source, revision)  # (sentence-transformers' CrossEncoder: AutoTokenizer)
            self.tokenizer = BertTokenizer.from_pretrained(source, revision=revision)
            settings = _read_settings(source, revision)
        self.model.config.check_vocabulary(self.tokenizer.vocab, source)
        self._follow(settings, max_length, activation_fn, source)

    @classmethod
    def _around(cls, model: BertForSequenceClassification, tokenizer: BertTokenizer) -> CrossEncoder:
        """A cross-encoder on a model already loaded (``rerank(model=...)``), with the settings of the
        folder or hub id it was loaded from (its ``name_or_path``), as ``CrossEncoder(that folder)``
        reads them; a model built in Python has none: a sigmoid, the tokenizer's length."""
        encoder = cls.__new__(cls)
        encoder.model, encoder.tokenizer = model, tokenizer
        source = getattr(model, "name_or_path", None)
        with one_load():
            settings = {} if source is None else _read_settings(str(source), model.config._commit_hash)
        encoder._follow(settings, None, None, "" if source is None else str(source))
        return encoder

    def _follow(self, settings: dict, max_length: int | None, activation_fn, source: str) -> None:
        """The length, truncation, activation and prompts: as given, else as the folder's settings say."""
        limit = self.model.config.max_position_embeddings
        saved = settings.get("max_seq_length")
        if max_length is None and saved is not None and saved > limit:  # the folder's, not the caller's: no flag
            logger.warning("%s: %s %d is more than the model's %d positions (sentence-transformers fails on a longer "
                           "pair); pairs are cut at %d", settings["max_seq_length_file"],
                           settings["max_seq_length_field"], saved, limit, limit)  # fmt: skip
            saved = limit
        length = saved if max_length is None else max_length
        self.max_length = min(self.tokenizer.model_max_length, limit) if length is None else length
        self.truncation = settings.get("truncation", "longest_first")  # which text of a long pair is cut
        self.activation_fn = _activation(activation_fn, settings, self.num_labels, source)
        self.prompts: dict[str, str] = settings.get("prompts", {})  # sentence-transformers' names
        self.default_prompt_name: str | None = settings.get("default_prompt_name")

    @property
    def num_labels(self) -> int:
        return self.model.num_labels

    @property
    def max_length(self) -> int:
        """The longest pair scored, in tokens with [CLS] and both [SEP]; a longer one is cut as
        ``truncation`` says (the longer text first, unless the folder says otherwise). Set, it is
        checked then: an int from 3 to the model's positions."""
        return self._max_length

    @max_length.setter
    def max_length(self, value: int) -> None:
        self._max_length = _checked_length(value, self.model.config.max_position_embeddings, "max_length")

    @property
    def max_seq_length(self) -> int:
        """sentence-transformers 6's name of ``max_length`` (which it keeps as a deprecated alias)."""
        return self._max_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self._max_length = _checked_length(value, self.model.config.max_position_embeddings, "max_seq_length")

    def predict(self, inputs=None, *, prompt_name: str | None = None, prompt: str | None = None, batch_size: int = 32,
                show_progress_bar: bool | None = None, activation_fn: str | None = None, apply_softmax: bool = False,
                convert_to_numpy: bool = True, convert_to_tensor: bool = False, device=None, sentences=None,
                **others):  # fmt: skip
        """Scores of text pairs: one float per pair (``num_labels`` floats per pair for a classifier
        with several labels; ``apply_softmax`` turns those into probabilities). One pair in, one
        score (or one row) out: ``inputs`` is a pair, a list of pairs, or a numpy array of texts (1-D one
        pair, 2-D a batch: a pandas frame's ``.values``), as sentence-transformers 6 takes them.

        The keywords are sentence-transformers 6's, with its meanings: a numpy float32 array by
        default; ``convert_to_tensor=True``, one tensor on the model's device; ``convert_to_numpy=False``,
        a list of tensors, one per pair. ``prompt_name`` / ``prompt``: the model's prompt of that name,
        or this text, before each pair's first text; neither: the model's default prompt, if it has
        one. ``show_progress_bar``: a bar over the batches on stderr (None: on a terminal, for more
        than 8 batches, as ``Embedder.embed`` decides; sentence-transformers asks its logger's level).
        ``device``: where the model already is, or None (minibert never moves it). ``sentences=`` is
        the older name of ``inputs``. Its multi-process ``pool`` and ``chunk_size`` are refused with a
        value, as is a keyword it forwards to the model."""
        inputs = _sentence_transformers_keywords(inputs, sentences, device, others)
        check_model_is_on(self.model, device, "a CrossEncoder")
        if isinstance(inputs, str):  # ("" gave no scores, "ab" the pairs 'a' and 'b')
            raise TypeError(f"CrossEncoder.predict takes text pairs, [query, document] or a list of them, got a str "
                            f"{inputs!r:.40}")  # fmt: skip
        inputs = _texts_of_an_array(inputs)  # df[["query", "doc"]].values: one pair (1-D) or a batch (2-D)
        single = isinstance(inputs, (list, tuple)) and len(inputs) == 2 and all(
            isinstance(text, str) for text in inputs)  # fmt: skip
        pairs = [inputs] if single else list(inputs)
        for number, pair in enumerate(pairs):
            if not isinstance(pair, (list, tuple)):
                raise TypeError(f"pair {number} must be a list or tuple of two texts, got a {type(pair).__name__}: "
                                f"{pair!r:.80}")  # fmt: skip
            if len(pair) != 2 or not all(isinstance(text, str) for text in pair):
                raise TypeError(f"pair {number} must be two texts, got {pair!r:.80}")
        function = self.activation_fn if activation_fn is None else _activation(activation_fn, {}, self.num_labels, "")
        prefix = choose_prompt(self.prompts, self.default_prompt_name, prompt, prompt_name)
        scores = np.zeros((0,), dtype=np.float32)
        if pairs:
            rows = self.tokenizer([prefix + a for a, _ in pairs], [b for _, b in pairs], truncation=self.truncation,
                                  max_length=self.max_length)  # fmt: skip
            results = run_rows(self.model, self.tokenizer, rows, batch_size, progress=show_progress_bar)
            scores = SCORE_ACTIVATIONS[function](np.stack([row["logits"] for row in results])).astype(np.float32)
            if self.num_labels == 1:
                scores = scores[:, 0]  # (N, 1) -> (N,)
            elif apply_softmax:
                shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
                scores = shifted / shifted.sum(axis=1, keepdims=True)
        if convert_to_tensor or not convert_to_numpy:
            scores = torch.from_numpy(scores).to(self.model.device)  # (N,) or (N, K)
            scores = scores if convert_to_tensor else list(scores)  # a tensor per pair
        return scores[0] if single else scores

    def rank(self, query: str, documents: list[str], *, top_k: int | None = None, return_documents: bool = False,
             prompt_name: str | None = None, prompt: str | None = None, batch_size: int = 32,
             show_progress_bar: bool | None = None, activation_fn: str | None = None, device=None, pool=None,
             chunk_size=None) -> list[dict]:  # fmt: skip
        """The documents by relevance to ``query``, best first: ``{"corpus_id": i, "score": s}`` (and
        ``"text"`` with ``return_documents``), the best ``top_k`` (default all). The other keywords are
        sentence-transformers 6's, passed to ``predict`` as it passes them: the prompt (before the query),
        ``batch_size``, ``show_progress_bar``, ``activation_fn`` and ``device``; ``pool`` and
        ``chunk_size`` are refused with a value, as ``predict`` refuses them."""
        if self.num_labels != 1:
            raise ValueError(f"rank needs a model with one output (a relevance score); this one has {self.num_labels} "
                             "labels: use predict")  # fmt: skip
        documents = _texts_of_an_array(documents)  # df["doc"].values
        if not isinstance(query, str) or not isinstance(documents, (list, tuple)):
            raise TypeError("rank takes a query (str) and a list of documents (str)")
        if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
            raise ValueError(f"top_k must be a positive int or None, got {top_k!r}")
        scores = self.predict([[query, document] for document in documents], prompt_name=prompt_name, prompt=prompt,
                              batch_size=batch_size, show_progress_bar=show_progress_bar, activation_fn=activation_fn,
                              device=device, pool=pool, chunk_size=chunk_size)  # fmt: skip
        results = [{"corpus_id": i, "score": float(score)} for i, score in enumerate(scores)]
        if return_documents:
            for result in results:
                result["text"] = documents[result["corpus_id"]]
        return sorted(results, key=lambda result: result["score"], reverse=True)[:top_k]


_REFUSED_KEYWORDS = {  # sentence-transformers' predict keywords minibert does not compute, but for their default None
    "pool": "a pool of processes; minibert runs the batches in parallel streams by itself (on a CPU)",
    "chunk_size": "the inputs per process of a pool; minibert uses none",
}


def _texts_of_an_array(inputs):
    """A numpy array of texts (dtype str or object: a pandas frame's ``.values``) as the lists it holds,
    as sentence-transformers reads it (``inputs.tolist()``); anything else as it is."""
    if isinstance(inputs, np.ndarray) and inputs.dtype.kind in ("U", "O"):
        return inputs.tolist()
    return inputs


def _sentence_transformers_keywords(inputs, sentences, device, others: dict):
    """The pairs given to predict, once sentence-transformers' other keywords are checked: those
    minibert does not compute are refused when given a value, by name and with the reason."""
    if sentences is not None:
        if inputs is not None:
            raise TypeError("CrossEncoder.predict got both inputs and sentences (its older name): give one")
        inputs = sentences
    if inputs is None:
        raise TypeError("CrossEncoder.predict needs the pairs: predict([[query, document], ...])")
    if isinstance(device, (list, tuple)):
        raise ValueError(f"device={device!r}: several devices mean a pool of processes in sentence-transformers; "
                         "minibert's CrossEncoder runs on the model's own device")  # fmt: skip
    for name, value in others.items():
        if name in _REFUSED_KEYWORDS and value is not None:
            raise ValueError(f"CrossEncoder.predict({name}={value!r:.40}): {_REFUSED_KEYWORDS[name]}")
        if name not in _REFUSED_KEYWORDS:
            raise TypeError(
                f"CrossEncoder.predict got an unexpected keyword argument {name!r} (sentence-transformers forwards "
                "such keywords to its model; minibert takes inputs, prompt_name, prompt, batch_size, "
                "show_progress_bar, activation_fn, apply_softmax, convert_to_numpy, convert_to_tensor and device)"
            )
    return inputs


@functools.lru_cache(maxsize=4)  # as the other task functions keep theirs (loading.py), with the folder's files
def _cross_encoder_cached(name_or_path: str, dtype: str | None, device: str, files: tuple = (),
                          revision: str | None = None) -> CrossEncoder:  # fmt: skip
    return CrossEncoder(name_or_path, dtype=dtype, device=device, revision=revision)  # the token: hub_options


def rerank(query: str, documents: list[str], *, model, top_k: int | None = None, return_documents: bool = False,
           dtype: str | None = None, device=None, revision: str | None = None,
           token: str | bool | None = None) -> list[dict]:  # fmt: skip
    """``CrossEncoder(model, dtype=dtype, device=device, revision=revision, token=token).rank(query,
    documents, ...)``, the model loaded once per folder (or hub id), revision, dtype and device, the
    last four kept (the token is sent, not part of the key), and read again once the folder's files
    change (loading.py's ``folder_files``; a CrossEncoder given runs where it is).
    ``model`` may also be what the other tasks take: a loaded ``BertForSequenceClassification`` (its
    tokenizer and cross-encoder settings come from where it was loaded) or a ``(model, tokenizer)`` pair;
    ``revision``/``token`` with a model already loaded are a ``TaskArgumentError`` (loading.py)."""
    if isinstance(model, CrossEncoder):
        refuse_download_choice(revision, token)
        check_model_is_on(model.model, device, "a CrossEncoder")
        refuse_dtype_choice(dtype, model.model)
    elif isinstance(model, (str, os.PathLike)):
        hub = download_choice(revision, token)
        name, where, files = cache_key(model, device, dtype, "a CrossEncoder")
        with loading_lock, hub_options(hub):  # two threads asking for the same model load it once
            model = _cross_encoder_cached(name, dtype, where, files, revision)
    elif isinstance(model, (BertWithHeads, tuple)):  # a BertForTokenClassification: refused by its class
        model = CrossEncoder._around(*load_for_task(model, BertForSequenceClassification, device=device,
                                                    revision=revision, token=token))  # fmt: skip
    else:
        raise TypeError(f"model must be a hub id, a directory, a CrossEncoder, a BertForSequenceClassification "
                        f"or (model, tokenizer), got {type(model).__name__}")  # fmt: skip
    return model.rank(query, documents, top_k=top_k, return_documents=return_documents)


def _checked_length(value, limit: int, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 3 <= value <= limit:
        raise TaskArgumentError(name, value, f"an int from 3 to {limit} (the model's positions)")
    return value


def _read_settings(source: str, revision: str | None) -> dict:
    """The cross-encoder settings in a folder's JSON files: ``activation_fn`` (with the file it came
    from), the prompts, ``max_seq_length`` (with its file and field) and the truncation strategy.
    config_sentence_transformers.json and sentence_bert_config.json are read only beside a
    modules.json, as sentence-transformers reads them."""
    settings: dict = {}

    def read(filename: str):
        path = resolve_file(source, filename, revision=revision, required=False)
        if path is None:
            return None, None
        return read_json_object(path, "JSON in"), path

    config, config_path = read("config.json")
    found = []  # the activations the folder names, the newest format first (as sentence-transformers tries them)
    if config is not None:
        nested = config.get("sentence_transformers")
        if isinstance(nested, dict) and "activation_fn" in nested:  # (null there: the default, not the legacy field)
            found.append((nested["activation_fn"], f"{config_path}: sentence_transformers.activation_fn"))
        elif config.get("sbert_ce_default_activation_function") is not None:
            found.append((config["sbert_ce_default_activation_function"],
                          f"{config_path}: sbert_ce_default_activation_function"))  # fmt: skip
    # sentence-transformers reads its own files in a folder it saved (one with modules.json) only: without
    # one it builds its default modules from config.json, whatever else lies beside it
    pipeline = resolve_file(source, "modules.json", revision=revision, required=False) is not None
    modern, modern_path = read("config_sentence_transformers.json") if pipeline else (None, None)
    if modern is not None and modern.get("activation_fn") is not None:
        found.insert(0, (modern["activation_fn"], f"{modern_path}: activation_fn"))
    if modern is not None:
        settings["prompts"], settings["default_prompt_name"] = read_prompts(modern, modern_path)
    settings["activation_fn"] = [(path, where) for path, where in found if path is not None]
    plain, plain_path = read("sentence_bert_config.json") if pipeline else (None, None)
    if plain is not None:
        length, field, call = read_sequence_length(plain, plain_path, pair=True)
        settings["truncation"] = call.truncation
        if length is not None:
            settings.update(max_seq_length=length, max_seq_length_file=plain_path, max_seq_length_field=field)
    return settings


def _activation(asked, settings: dict, num_labels: int, source: str) -> str:
    """The activation's class path: as asked, else the folder's, else sigmoid for one label and
    identity for several."""
    default = "torch.nn.modules.activation.Sigmoid" if num_labels == 1 else "torch.nn.modules.linear.Identity"
    if asked is not None:
        if isinstance(asked, torch.nn.Module) or isinstance(asked, type) and issubclass(asked, torch.nn.Module):
            kind = asked if isinstance(asked, type) else type(asked)  # torch.nn.Identity() as sentence-transformers
            asked = f"{kind.__module__}.{kind.__qualname__}"  # takes it, or the class itself
        path = _SHORT_NAMES.get(str(asked).lower()) or torch_class_path(asked)
        if path not in SCORE_ACTIVATIONS:
            raise ValueError(f"activation_fn must be one of {sorted(_SHORT_NAMES)} or {sorted(SCORE_ACTIVATIONS)}, "
                             f"got {asked!r}")  # fmt: skip
        return path
    for path, where in settings.get("activation_fn", []):  # the newest format first; an untrusted one is passed over
        if not isinstance(path, str):
            raise CheckpointError(f"{where} must be a class path (a string), got {path!r:.60}")
        if not path.startswith("torch."):
            logger.warning("%s: activation %s is not a torch class and is not trusted (as in sentence-transformers); "
                           "it is passed over", where, path)  # fmt: skip
            continue
        resolved = torch_class_path(path)  # torch.nn.Sigmoid is torch.nn.modules.activation.Sigmoid
        if resolved not in SCORE_ACTIVATIONS:
            computed = ", ".join(sorted(SCORE_ACTIVATIONS))
            raise CheckpointError(f"{where}: activation {path} is not implemented (minibert computes the torch "
                                  f"classes {computed}, by any of their paths)")  # fmt: skip
        return resolved
    return default
