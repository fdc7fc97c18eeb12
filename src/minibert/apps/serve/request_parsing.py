"""A request's body read within its limits, and its fields checked one by one: every error names
the field (``RequestError``'s ``param``) and the limit it passed."""

from __future__ import annotations

import asyncio
import json

from starlette.requests import ClientDisconnect, Request

from ...formats.json_files import parse_json
from .http_errors import RequestError
from .settings import ServeSettings


async def read_json(request: Request, limit: int, seconds: float = 30.0):
    """The body as JSON, read up to ``limit`` bytes (413 past it) within ``seconds`` (408 past it;
    the answer closes the connection, guard.py: a client trickling its body holds it no longer);
    400 if it is not JSON (NaN and Infinity are not), or nests deeper than 64 levels; 415 if it is
    compressed (``Content-Encoding: gzip``: this server reads bodies as they are, and its bytes are
    no JSON)."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise RequestError(415, f"the request body is sent with Content-Encoding: {encoding:.40}; this server reads "
                                "bodies as they are: send the JSON uncompressed")  # fmt: skip
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"the request body has {int(declared)} bytes, more than the limit of {limit}")
    try:
        body = await asyncio.wait_for(_body(request, limit), seconds)  # (asyncio.timeout is Python 3.11's)
    except ClientDisconnect:
        raise RequestError(400, "the client disconnected while sending the body") from None
    except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11 on; its own class on 3.10
        raise RequestError(408, f"the request body did not arrive within {seconds:g} s") from None
    try:
        value = parse_json(bytes(body), strict=True, unique_keys=True)  # (a key twice: which one did a proxy read?)
    except ValueError as error:
        raise RequestError(400, f"the request body is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise RequestError(422, "the request body must be a JSON object")
    return value


async def _body(request: Request, limit: int) -> bytearray:
    """The body's bytes as they arrive, refused (413) once they pass ``limit``."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RequestError(413, f"the request body is larger than the limit of {limit} bytes")
    return body


# Each route's fields (docs/serving.md). A field that another route here applies is refused where it
# is not applied (422 naming it), never ignored: "prompt_name" on /v1/embeddings, or "raw_scores" on
# /v1/rerank, answered 200 with numbers other than the ones asked for. A key that no route here knows is
# ignored, as text-embeddings-inference ignores it, except on /v1/embeddings: OpenAI's API refuses an
# unrecognized argument, and so does its route here. A field sent as null counts as absent.
ROUTE_FIELDS = {
    "/v1/embeddings": ("model", "input", "encoding_format", "dimensions", "user", "truncate"),
    "/embed": ("inputs", "normalize", "truncate", "truncation_direction", "prompt_name", "dimensions"),
    "/tokenize": ("inputs", "add_special_tokens"),
    "/rerank": ("query", "texts", "raw_scores", "return_text", "truncate", "truncation_direction"),
    "/v1/rerank": ("model", "query", "documents", "top_n", "return_documents", "truncate"),
    "/predict": ("inputs", "raw_scores", "truncate", "truncation_direction"),
}
REFUSES_UNKNOWN_FIELDS = ("/v1/embeddings",)


def check_fields(body: dict, route: str) -> None:
    """Refuse (422, naming it) a field of ``body`` that ``route`` does not apply but another route of
    this server does, and on /v1/embeddings any field it does not read (``ROUTE_FIELDS``).

    >>> check_fields({"inputs": ["a"], "colour": "red"}, "/embed")  # (unknown: ignored, as TEI does)
    >>> try:
    ...     check_fields({"input": ["a"], "prompt_name": "doc"}, "/v1/embeddings")
    ... except RequestError as error:
    ...     print(error.status, error.message)
    422 prompt_name is not supported on /v1/embeddings (it is a field of /embed); /v1/embeddings takes model, \
input, encoding_format, dimensions, user, truncate
    """
    taken = ROUTE_FIELDS[route]
    for name, value in body.items():
        if name in taken or value is None:
            continue
        owners = [path for path, fields in ROUTE_FIELDS.items() if name in fields]
        if owners:
            raise RequestError(422, f"{name} is not supported on {route} (it is a field of {', '.join(owners)}); "
                                    f"{route} takes {', '.join(taken)}", name)  # fmt: skip
        if route in REFUSES_UNKNOWN_FIELDS:  # (quoted in the message; param is the bare name, as OpenAI's)
            raise RequestError(422, f"unrecognized field {json.dumps(name[:60])} (OpenAI's API refuses it too); "
                                    f"{route} takes {', '.join(taken)}", name[:60])  # fmt: skip


def without_nulls(body: dict) -> dict:
    """The body without its ``null`` fields: a field sent as null counts as absent, on every route.

    >>> without_nulls({"input": "a", "encoding_format": None, "truncate": False})
    {'input': 'a', 'truncate': False}
    """
    return {name: value for name, value in body.items() if value is not None}


def parse_inputs(value, field: str, settings: ServeSettings, allow_ids: bool) -> list:
    """A str, a list of str, or (``allow_ids``) a list of token ids or a list of such lists. Too many
    items are refused before any is looked at (a million one-id lists cost half a second to scan)."""
    one_input_of_ids = allow_ids and isinstance(value, list) and bool(value) and is_token_id(value[0])
    if isinstance(value, list) and len(value) > settings.max_inputs and not one_input_of_ids:
        raise RequestError(422, f"{field} has {len(value)} items, more than the limit of {settings.max_inputs} "
                                "per request", field, "too_many_inputs")  # fmt: skip
    if isinstance(value, str):
        inputs = [value]
    elif isinstance(value, list) and value and all(is_token_id(item) for item in value) and allow_ids:
        inputs = [value]
    elif isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        inputs = value
    elif (isinstance(value, list) and value and allow_ids
          and all(isinstance(item, list) and all(is_token_id(i) for i in item) for item in value)):  # fmt: skip
        inputs = value
    elif isinstance(value, list) and not value:
        raise RequestError(422, f"{field} is empty", field)
    else:
        kinds = "a string, a list of strings" + (", a list of token ids or a list of such lists" if allow_ids else "")
        raise RequestError(422, f"{field} must be {kinds}", field)
    if len(inputs) > settings.max_inputs:
        raise RequestError(422, f"{field} has {len(inputs)} items, more than the limit of {settings.max_inputs} "
                                "per request", field, "too_many_inputs")  # fmt: skip
    for index, item in enumerate(inputs):
        if not item:
            raise RequestError(422, f"{field}[{index}] is empty", field)
        if isinstance(item, str) and len(item) > settings.max_input_chars:
            raise RequestError(422, f"{field}[{index}] has {len(item)} characters, more than the limit of "
                                    f"{settings.max_input_chars}", field, "input_too_long")  # fmt: skip
        if isinstance(item, str):
            check_characters(item, f"{field}[{index}]", field)
    return inputs


def text_field(body: dict, name: str, settings: ServeSettings) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise RequestError(422, f"{name} must be a non-empty string", name)
    if len(value) > settings.max_input_chars:
        limit = settings.max_input_chars
        raise RequestError(422, f"{name} has {len(value)} characters, more than the limit of {limit}", name,
                           "input_too_long")  # fmt: skip
    check_characters(value, name, name)
    return value


def check_characters(text: str, where: str, field: str) -> None:
    r"""A text is refused (422, naming ``where``) if it holds a lone UTF-16 surrogate: JSON's
    ``"\ud800"`` without the second half of its pair, which Python's JSON reader accepts but which is
    no character. Hugging Face's tokenizer refuses such a string; minibert's would drop it silently
    (``"b\ud800"`` scored as ``"b"``), and an answer echoing it could not be written as UTF-8.

    >>> try:
    ...     check_characters("b\ud800", "documents[0]", "documents")
    ... except RequestError as error:
    ...     print(error.status, error.message[:66])
    422 documents[0] holds a lone UTF-16 surrogate (\ud800) at character 1
    """
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise RequestError(422, f"{where} holds a lone UTF-16 surrogate (\\u{ord(text[error.start]):04x}) at "
                                f"character {error.start}, which is not a character: a character beyond U+FFFF is "
                                "written as a pair (\\ud83d\\ude00), or sent as UTF-8", field,
                           "invalid_text") from None  # fmt: skip


def is_token_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def json_type(value) -> str:
    """The name JSON gives a value's type, for messages (``"384"`` is a string, not an integer).

    >>> json_type("384"), json_type(True), json_type(1.5), json_type(None)
    ('a string', 'a boolean', 'a number', 'null')
    """
    if isinstance(value, bool):
        return "a boolean"
    kinds = {str: "a string", int: "an integer", float: "a number", list: "an array", dict: "an object"}
    return kinds.get(type(value), "null")


def check_user(body: dict) -> None:
    """OpenAI's "user" (the end user's id): read by no one here, but a string, as OpenAI's API refuses
    anything else (a number sent there is a client's mistake, not an id)."""
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise RequestError(422, f"user must be a string (the end user's id, as OpenAI's API takes it), got "
                                f"{json_type(user)}", "user")  # fmt: skip


def bool_field(body: dict, name: str, default: bool) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise RequestError(422, f"{name} must be true or false, got {json.dumps(value)[:40]}", name)
    return value


def prompt_name_of(body: dict, prompts: dict[str, str]) -> str | None:
    """TEI's "prompt_name": absent (the model's default prompt, if it has one), or one of its prompts."""
    name = body.get("prompt_name")
    if name is not None and (not isinstance(name, str) or name not in prompts):
        known = ", ".join(json.dumps(known) for known in prompts) or "none"
        raise RequestError(422, f"prompt_name {json.dumps(name)[:60]} is not one of this model's prompts "
                                f"({known})", "prompt_name")  # fmt: skip
    return name


def kept_dimensions(dimensions, size: int) -> int | None:
    """OpenAI's and TEI's "dimensions": absent, or how many of each vector's first values to keep
    (1 to the model's), as sentence-transformers' ``truncate_dim``."""
    if dimensions is None:
        return None
    if not is_token_id(dimensions):  # (an int, not a bool)
        raise RequestError(422, f"dimensions must be an integer, got {json_type(dimensions)} "
                                f"({json.dumps(dimensions)[:40]})", "dimensions")  # fmt: skip
    if not 1 <= dimensions <= size:
        raise RequestError(422, f"dimensions must be an integer from 1 to this model's {size}, got {dimensions}",
                           "dimensions")  # fmt: skip
    return dimensions


def truncation_left(body: dict, pairs: bool, folder_side: str = "right") -> bool:
    """TEI's "truncation_direction": "Right" (a long text loses its end) or "Left" (its start; True).
    Absent, the model folder's ``truncation_side`` decides (``folder_side``), so that /embed gives what
    ``Embedder.embed`` and sentence-transformers give. Pairs (``pairs``: /rerank, /predict) are cut
    as the model's folder says, from the end, so "Left" is refused there rather than ignored."""
    value = body.get("truncation_direction")
    if value is None:
        return not pairs and folder_side == "left"
    if value not in ("Left", "Right"):
        raise RequestError(422, f'truncation_direction must be "Left" or "Right", got {json.dumps(value)[:40]}',
                           "truncation_direction")  # fmt: skip
    if value == "Left" and pairs:
        raise RequestError(422, 'truncation_direction "Left" is not supported here: texts and pairs are cut at '
                                'their end ("Right")', "truncation_direction")  # fmt: skip
    return value == "Left"
