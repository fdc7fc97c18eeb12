"""The service every request shares: the loaded model (an embedder, or a sequence classifier such
as a cross-encoder reranker), the tokenizing thread, and the work of one merged batch."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...embedding.options import EmbedOptions
from ...errors import PicklableError
from ...tokenizer.encoding import truncation_plan
from ...tokenizer.framing import added_by_framing, segment_ids
from .batching import DynamicBatcher
from .http_errors import RequestError
from .metrics import Metrics
from .settings import ServeSettings


class PairPieces(list):
    """A text (or pair) for the classifier. As a list: its pieces without [CLS] and the last [SEP],
    as the batcher counts them (it adds those two); ``framed`` and ``token_types``: the tokenizer's
    own framing of it (``[CLS] A [SEP] B [SEP]``, tokenizer/framing.py), which the model runs."""

    def __init__(self, framed: list[int], token_types: list[int]):
        super().__init__(framed[1:-1])
        self.framed, self.token_types = framed, token_types


class _TooLong(PicklableError):
    """A text or pair past the model's length: ``tokens`` framed; ``why``: the tokenizer's words
    when the folder's truncation cannot cut it, None when the request did not ask for a cut."""

    def __init__(self, tokens: int, why: str | None):
        super().__init__(why)
        self.tokens, self.why = tokens, why


class EmbeddingService:
    """The loaded model, the batcher and the limits, shared by every request."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        self.metrics = Metrics()
        self.embedder = None
        self.classifier = None  # a CrossEncoder, when the model is a sequence classifier (a reranker)
        self.batcher: DynamicBatcher | None = None
        self.load_error: BaseException | None = None
        self.model_id = settings.served_model_name or default_model_id(settings.model)
        self.model_ids = {self.model_id, settings.model}
        self._tokenizing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minibert-tokenize")
        self.options = EmbedOptions()  # the model's recipe; a request may change normalize, prompt_name, truncate_dim

    @property
    def loaded(self) -> bool:
        return self.embedder is not None or self.classifier is not None

    def load(self) -> None:
        """An embedder, or for a checkpoint whose architecture is a sequence classifier (a
        cross-encoder, a sentiment model: its config.json says so) the classifier."""
        if is_sequence_classifier(self.settings.model):
            from ...tasks.rerank import CrossEncoder

            self.classifier = CrossEncoder(self.settings.model, dtype=self.settings.dtype, gemm=self.settings.gemm,
                                           device=self.settings.device)  # fmt: skip
            return
        from ...embedding.embedder import Embedder

        embedder = Embedder.from_pretrained(self.settings.model, dtype=self.settings.dtype, gemm=self.settings.gemm,
                                            device=self.settings.device)  # fmt: skip
        self.dimension = embedder.dimension(self.options)
        self.embedder = embedder

    def compute(self, pieces: list[list[int]], job: tuple) -> np.ndarray:
        """One merged batch of requests that share the job key: (pooling skip, options) for
        embeddings, ("logits",) for the classifier's raw scores (N, labels)."""
        if job == ("logits",):
            return self._logits(pieces)
        skip, options = job
        return self.embedder.embed_pieces(pieces, options, skip=skip)

    def _logits(self, rows: list[PairPieces]) -> np.ndarray:
        """(N, labels) raw scores of merged requests' rows, run as the offline CrossEncoder runs
        them: sorted by length, 32 at a time (one padded batch of mixed lengths is slower)."""
        from ...tasks.loading import run_rows

        inputs = {"input_ids": [row.framed for row in rows], "token_type_ids": [row.token_types for row in rows]}
        results = run_rows(self.classifier.model, self.classifier.tokenizer, inputs, 32)
        return np.stack([result["logits"] for result in results])

    def pair_pieces(self, firsts: list[str], seconds: list[str] | None, truncate: bool, field: str):
        """/predict's texts (or pairs) as PairPieces for the classifier, each cut to its length (a pair
        as the CrossEncoder cuts it: longest_first, or the folder's processing_kwargs truncation) or
        refused; and the token count."""
        piece_ids = self.classifier.tokenizer.piece_ids
        rows = []
        for index, first in enumerate(firsts):
            second = None if seconds is None else piece_ids(seconds[index])
            try:
                rows.append(self._pair_row(piece_ids(first), second, truncate))
            except _TooLong as error:
                raise self._too_long(error, f"{field}[{index}]", field) from None
        return rows, sum(len(row.framed) for row in rows)

    def rerank_pieces(self, prompt: str, query: str, documents: list[str], truncate: bool, field: str):
        """Each (prompt + query, document) pair as PairPieces, cut as ``CrossEncoder.rank`` cuts it or
        refused; and the token count. The query is tokenized once: the tokenizer tokenizes each text
        of a pair alone and then cuts the pieces (``_pair_row`` does the same), so pairing the text
        with every document tokenized it again for each, up to --max-inputs times --max-input-chars
        characters from a body of a few hundred KB, on the one tokenizing thread every request shares."""
        piece_ids = self.classifier.tokenizer.piece_ids
        query_ids = piece_ids(prompt + query)
        rows = []
        for index, document in enumerate(documents):
            try:
                rows.append(self._pair_row(query_ids, piece_ids(document), truncate))
            except _TooLong as error:
                raise self._rerank_too_long(error, len(query_ids), bool(prompt), index, field) from None
        return rows, sum(len(row.framed) for row in rows)

    def _pair_row(self, first: list[int], second: list[int] | None, truncate: bool) -> PairPieces:
        """A text's (or pair's) pieces framed as the tokenizer frames them, cut as its call with
        ``truncation`` and ``max_length`` cuts them (by the same plan, tokenizer/encoding.py's
        ``truncation_plan``); ``_TooLong`` if they pass the model's length and are not to be cut,
        or cannot be cut as the folder's truncation (``only_first``, ``only_second``) says."""
        tokenizer, limit = self.classifier.tokenizer, self.classifier.max_length
        strategy = "longest_first" if second is None else self.classifier.truncation
        second_length, added = None if second is None else len(second), added_by_framing(second is not None)
        tokens = len(first) + (second_length or 0) + added
        if tokens > limit:
            try:
                [(kept, kept_second)] = truncation_plan(len(first), second_length, limit - added, strategy, 0,
                                                        tokenizer.truncation_side, overflow=False)  # fmt: skip
            except ValueError as error:  # the text the folder's truncation keeps whole is alone too long
                raise _TooLong(tokens, str(error)) from None
            if not truncate:
                raise _TooLong(tokens, None)
            first, second = first[slice(*kept)], None if second is None else second[slice(*kept_second)]
        framed = tokenizer.build_inputs_with_special_tokens(first, second)
        return PairPieces(framed, segment_ids(len(first), None if second is None else len(second)))

    def _too_long(self, error: _TooLong, where: str, field: str) -> RequestError:
        """/predict's 422 for an input past the model's length (``where``: ``inputs[3]``)."""
        limit, strategy = self.classifier.max_length, self.classifier.truncation
        if error.why is not None:  # "truncate": true would not help it: the advice is to shorten it
            return RequestError(422, f"{where} cannot be cut to the model's limit of {limit} tokens as the model "
                                     f"folder's truncation={strategy!r} says: {error.why}; shorten it", field,
                                "context_length_exceeded")  # fmt: skip
        return RequestError(422, f"{where} has {error.tokens} tokens, more than the model's limit of {limit}; "
                                 "shorten it or send \"truncate\": true", field, "context_length_exceeded")  # fmt: skip

    def _rerank_too_long(self, error: _TooLong, query: int, prompt: bool, index: int, field: str) -> RequestError:
        """The rerank 422 for a pair past the model's length, naming what is too long: the query
        (``query``: its pieces) when it alone leaves no room for a document, else the pair."""
        limit, strategy = self.classifier.max_length, self.classifier.truncation
        cause = " with the model's prompt" if prompt else ""
        if error.why is not None and strategy == "only_second":  # the query, which it keeps whole, is too long
            return RequestError(422, f"query cannot be cut to the model's limit of {limit} tokens as the model "
                                     f"folder's truncation={strategy!r} says: {error.why}; shorten it", "query",
                                "context_length_exceeded")  # fmt: skip
        if error.why is not None:  # only_first: the document, which it keeps whole, is too long
            return self._too_long(error, f"{field}[{index}]", field)
        if query + added_by_framing(pair=True) >= limit:
            return RequestError(422, f"query has {query} word pieces{cause}: with [CLS] and two [SEP] they leave no "
                                     f"room for a document within the model's limit of {limit} tokens per pair; "
                                     "shorten it or send \"truncate\": true", "query",
                                "context_length_exceeded")  # fmt: skip
        return RequestError(422, f"the query and {field}[{index}] together have {error.tokens} tokens with [CLS] and "
                                 f"two [SEP] (the query's word pieces{cause}: {query}), more than the model's limit "
                                 f"of {limit} per pair; shorten them or send \"truncate\": true", field,
                            "context_length_exceeded")  # fmt: skip

    async def tokenize(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self._tokenizing, function, *args)

    def pieces_of(self, inputs: list, truncate: bool, field: str, options: EmbedOptions | None = None,
                  left: bool | None = None) -> tuple[list[list[int]], int, int]:  # fmt: skip
        """Each input's piece ids (texts tokenized with the prompt ``options`` choose, by default the
        model's; id arrays checked, ``check_request_piece_ids``, and given that prompt's pieces in front,
        as ``Embedder.embed`` gives a text's), cut to the model's length or refused
        (cut at the end, or with ``left`` at the start, as a tokenizer with ``truncation_side="left"``
        cuts, the pooling skip then leaving out the first prompt-length tokens of what is kept, as
        ``Embedder.embed`` and sentence-transformers do; ``left`` None: the side the model folder's
        ``truncation_side`` names); and the pooling skip and the token count."""
        from ...errors import PromptFillsMaxLengthError

        embedder = self.embedder
        room = embedder.max_length - 2
        left = embedder.tokenizer.truncation_side == "left" if left is None else left
        as_ids = not isinstance(inputs[0], str)
        if as_ids:
            check_request_piece_ids(inputs, embedder.tokenizer, field)
        try:  # (ids: the prompt's pieces alone, as pieces_for_embedding gives them for an empty text)
            pieces, skip = embedder.pieces_for_embedding([""] if as_ids else inputs, options or self.options)
        except PromptFillsMaxLengthError as error:
            raise RequestError(422, " ".join(str(error).split()), "prompt_name") from None
        if as_ids:  # a text's pieces get the prompt a text gets, in front: the same vector as the text
            pieces = [pieces[0] + list(row) for row in inputs]
        for index, ids in enumerate(pieces):
            if len(ids) > room:
                if not truncate:
                    raise RequestError(
                        422, f"{field}[{index}] has {len(ids) + 2} tokens, more than the model's limit of "
                        f"{room + 2}; shorten it or send \"truncate\": true", field, "context_length_exceeded",
                    )  # fmt: skip
                pieces[index] = ids[len(ids) - room:] if left else ids[:room]
        return pieces, skip, sum(len(ids) + 2 for ids in pieces)


def default_model_id(model: str) -> str:
    """The id a model is served under without --served-model-name: a local directory's own name,
    whatever path names it (``.``, ``../tiny/``: the name of the directory, not ``.``), a hub id's
    last part (``sentence-transformers/all-MiniLM-L6-v2``: ``all-MiniLM-L6-v2``).

    >>> default_model_id("sentence-transformers/all-MiniLM-L6-v2")
    'all-MiniLM-L6-v2'
    """
    if os.path.isdir(model):
        return os.path.basename(os.path.abspath(model)) or model  # (the root, "/", has no name: itself)
    return os.path.basename(os.path.normpath(model))


def check_request_piece_ids(inputs: list[list[int]], tokenizer, field: str) -> None:
    """Token-id input is a text's pieces, as ``tokenizer.piece_ids(text)`` gives them: the server
    frames each as ``[CLS] pieces [SEP]`` itself. So an id outside the vocabulary is refused (422),
    and so is [CLS], [SEP] or [PAD] (400): a tokenizer's ``input_ids`` (``[101, 7592, ..., 102]``)
    would otherwise be framed twice and silently give another vector."""
    vocab = tokenizer.vocab_size
    framing = {tokenizer.cls_token_id: "[CLS]", tokenizer.sep_token_id: "[SEP]", tokenizer.pad_token_id: "[PAD]"}
    framing.pop(None, None)  # (a vocabulary without one of them)
    for index, ids in enumerate(inputs):
        bad = next((i for i in ids if not 0 <= i < vocab), None)
        if bad is not None:
            raise RequestError(422, f"{field}[{index}] has token id {bad}, outside the vocabulary [0, {vocab})", field)
        position = next((position for position, i in enumerate(ids) if i in framing), None)
        if position is not None:
            special = ids[position]
            raise RequestError(400, f"{field}[{index}] has token id {special} ({framing[special]}) at position "
                                    f"{position}: send a text's pieces without [CLS], [SEP] or padding (a "
                                    "tokenizer's input_ids[1:-1]); the server adds [CLS] and [SEP] itself",
                               field, "special_token_in_input")  # fmt: skip


def tokens_answer(tokenizer, texts: list[str], add_special_tokens: bool, limit: int) -> tuple[bytes, int]:
    """/tokenize's answer as JSON bytes, and its token count: for each text, a row per token
    ``{"id", "text", "special", "start", "stop"}`` as text-embeddings-inference's ``into_tokens``
    writes it: a token the tokenizer added ([CLS], [SEP]) is its own string, with no offsets; any
    other is the input as written (``"Héllo"``, not the piece ``"hello"``; ``"ffa"``, not ``"##ffa"``),
    with its offsets in UTF-8 bytes, so that a client slicing the UTF-8 text gets that text back.

    A row is a few hundred bytes of Python and some 60 of JSON, and a 4 MiB body of Chinese text is
    1.4 million tokens: so texts are tokenized one at a time and counted, and past ``limit``
    tokens in all the request is refused (413) before a row is built. Run it in a thread."""
    encodings, total = [], 0
    for index, text in enumerate(texts):
        encoding = tokenizer([text], add_special_tokens=add_special_tokens, return_offsets_mapping=True,
                             verbose=False)  # fmt: skip
        total += len(encoding["input_ids"][0])
        if total > limit:
            raise RequestError(413, f"inputs has more than {limit} tokens (the first {index + 1} texts hold {total}), "
                                    "the limit of one /tokenize request (--max-tokenize-tokens): send fewer or "
                                    "shorter texts", "inputs", "too_many_tokens")  # fmt: skip
        encodings.append(encoding)
    rows = []
    for text, encoding in zip(texts, encodings):
        sequence, offsets, pieces = encoding.sequence_ids(0), encoding["offset_mapping"][0], encoding.tokens(0)
        byte = _byte_offsets(text)
        rows.append([{"id": i, "text": pieces[t], "special": True, "start": None, "stop": None}
                     if sequence[t] is None else
                     {"id": i, "text": text[slice(*offsets[t])], "special": False, "start": byte[offsets[t][0]],
                      "stop": byte[offsets[t][1]]}
                     for t, i in enumerate(encoding["input_ids"][0])])  # fmt: skip
    answer = json.dumps(rows, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()  # (as JSONResponse)
    return answer, total


def _byte_offsets(text: str):
    """Each character offset of ``text`` (0 to its length) as the offset of its UTF-8 bytes.

    >>> list(_byte_offsets("aé中"))
    [0, 1, 3, 6]
    """
    if text.isascii():
        return range(len(text) + 1)
    return list(itertools.accumulate((len(character.encode()) for character in text), initial=0))


def is_sequence_classifier(model: str) -> bool:
    """Whether config.json's ``architectures`` names a sentence classifier (a cross-encoder, a sentiment
    model), which the server runs as one; anything else is loaded as an embedder, whose loading says
    what is wrong with a folder (a config.json missing, unreadable or not JSON)."""
    from ...loading.architectures import architectures_in, classifier_kinds

    return "ForSequenceClassification" in classifier_kinds(architectures_in(model)[0])
