"""The service every request shares: the loaded model (an embedder, or a sequence classifier such
as a cross-encoder reranker), the tokenizing thread, and the work of one merged batch."""

from __future__ import annotations

import asyncio
import json
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...embedding.options import EmbedOptions
from ...formats.json_files import parse_json
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


class EmbeddingService:
    """The loaded model, the batcher and the limits, shared by every request."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        self.metrics = Metrics()
        self.embedder = None
        self.classifier = None  # a CrossEncoder, when the model is a sequence classifier (a reranker)
        self.batcher: DynamicBatcher | None = None
        self.load_error: BaseException | None = None
        self.model_id = settings.served_model_name or os.path.basename(os.path.normpath(settings.model))
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
        """Each text (or pair) as PairPieces for the classifier, cut to its length (a pair as the
        CrossEncoder cuts it: longest_first, or the folder's processing_kwargs truncation) or refused;
        and the token count."""
        tokenizer, limit = self.classifier.tokenizer, self.classifier.max_length
        strategy = self.classifier.truncation if seconds is not None else True
        try:
            encoded = tokenizer(firsts, seconds, truncation=strategy if truncate else None,
                                max_length=limit if truncate else None, verbose=False)  # fmt: skip
        except ValueError:  # only_first / only_second: the text it must keep whole is alone past the limit
            self._uncuttable(firsts, seconds, strategy, field)
        out = []
        for index, (ids, types) in enumerate(zip(encoded["input_ids"], encoded["token_type_ids"])):
            if len(ids) > limit:
                if seconds is not None and strategy in ("only_first", "only_second"):
                    self._uncuttable_pair(firsts[index], seconds[index], index, strategy, field)
                raise RequestError(422, f"{field}[{index}] has {len(ids)} tokens, more than the model's limit of "
                                        f"{limit}; shorten it or send \"truncate\": true", field,
                                   "context_length_exceeded")  # fmt: skip
            out.append(PairPieces(ids, types))
        return out, sum(len(row) + 2 for row in out)

    def _uncuttable(self, firsts: list[str], seconds: list[str], strategy: str, field: str) -> None:
        """Raise the 422 naming the first pair that the folder's ``truncation`` (``only_first`` or
        ``only_second``) cannot cut to the model's length, and why (the tokenizer's words)."""
        for index, pair in enumerate(zip(firsts, seconds)):
            self._uncuttable_pair(*pair, index, strategy, field)
        raise AssertionError("a batch the tokenizer refused, each of whose pairs it accepts")

    def _uncuttable_pair(self, first: str, second: str, index: int, strategy: str, field: str) -> None:
        """Raise the 422 for one pair the folder's ``truncation`` cannot cut (sending ``"truncate":
        true`` would not help it: the advice is to shorten it); return if it can be cut."""
        tokenizer, limit = self.classifier.tokenizer, self.classifier.max_length
        try:
            tokenizer(first, second, truncation=strategy, max_length=limit, verbose=False)
        except ValueError as error:
            raise RequestError(422, f"{field}[{index}] cannot be cut to the model's limit of {limit} tokens as "
                                    f"the model folder's truncation={strategy!r} says: {error}; shorten it", field,
                               "context_length_exceeded") from None  # fmt: skip

    async def tokenize(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self._tokenizing, function, *args)

    def pieces_of(self, inputs: list, truncate: bool, field: str, options: EmbedOptions | None = None,
                  left: bool = False) -> tuple[list[list[int]], int, int]:  # fmt: skip
        """Each input's piece ids (texts tokenized with the prompt ``options`` choose, by default the
        model's; id arrays checked, ``check_request_piece_ids``, and given that prompt's pieces in front,
        as ``Embedder.embed`` gives a text's), cut to the model's length or refused
        (cut at the end, or with ``left`` at the start, as a tokenizer with ``truncation_side="left"``
        cuts); and the pooling skip and the token count."""
        from ...errors import PromptFillsMaxLengthError

        embedder = self.embedder
        room = embedder.max_length - 2
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
                if left and skip:  # the cut would take the prompt's pieces, which the pooling leaves out
                    raise RequestError(422, f"{field}[{index}] is longer than the model and truncation_direction "
                                            "\"Left\" would cut the prompt this model's pooling leaves out: send "
                                            "\"Right\" or a shorter text", "truncation_direction")  # fmt: skip
                pieces[index] = ids[len(ids) - room:] if left else ids[:room]
        return pieces, skip, sum(len(ids) + 2 for ids in pieces)


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
    ``{"id", "text", "special", "start", "stop"}`` (offsets in characters; None for [CLS], [SEP]).

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
    for encoding in encodings:
        sequence, offsets, pieces = encoding.sequence_ids(0), encoding["offset_mapping"][0], encoding.tokens(0)
        rows.append([{"id": i, "text": pieces[t], "special": sequence[t] is None,
                      "start": None if sequence[t] is None else offsets[t][0],
                      "stop": None if sequence[t] is None else offsets[t][1]}
                     for t, i in enumerate(encoding["input_ids"][0])])  # fmt: skip
    answer = json.dumps(rows, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()  # (as JSONResponse)
    return answer, total


def is_sequence_classifier(model: str) -> bool:
    from ...loading.hub import resolve_file

    path = resolve_file(model, "config.json")
    try:
        architectures = parse_json(path.read_bytes()).get("architectures") or []
    except (ValueError, AttributeError):
        return False  # the loader says what is wrong with it
    return isinstance(architectures, list) and any(
        isinstance(name, str) and name.endswith("ForSequenceClassification") for name in architectures)  # fmt: skip
