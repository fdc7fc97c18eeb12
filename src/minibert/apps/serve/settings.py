"""``minibert serve``'s settings: each one a field, its default, its check and its ``--flag`` help
written once, here. The command's flags are made from these fields (``add_serve_flags``), the parsed
flags become one ``ServeSettings`` (``settings_from``), and the server reads nothing else.

This module imports no server library, so the parser is built without the ``serve`` extra.

>>> ServeSettings(model="m").max_batch_tokens
16384
>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> add_serve_flags(parser)
>>> settings_from(parser.parse_args(["--model", "m", "--port", "9000"])).port
9000
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field

from ..flag_types import DTYPE_HELP, DTYPES, add_flags, model_name, number, positive_int, whole_number

_port = whole_number(0, 65_535)
_SECONDS = number(0.1, 3600, "seconds")  # every timeout


def _model_id(text: str) -> str:
    """--served-model-name's type: never empty (``--served-model-name "$NAME"`` with the variable
    unset is a usage error, as an empty --model is, not the directory's name silently).

    >>> _model_id(" ")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: is empty: give the model id clients send, or leave the flag out (the directory's name)
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give the model id clients send, or leave the flag out (the "
                                         "directory's name)")  # fmt: skip
    return text


def _api_key(text: str) -> str:
    """--api-key's type: never empty (``--api-key "$KEY"`` with the variable unset started a server
    anyone could use, with only the usual "no API key" line), and without spaces at either end (the
    key a client sends after ``Bearer`` has none: such a key could never match).

    >>> _api_key("")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: is empty: give the key clients must send, or leave the flag out
    >>> _api_key(" k")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: has spaces at its start or end, which a client's 'Bearer KEY' cannot carry
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give the key clients must send, or leave the flag out")
    if text != text.strip():
        raise argparse.ArgumentTypeError("has spaces at its start or end, which a client's 'Bearer KEY' cannot carry")
    return text


def _host(text: str) -> str:
    """--host's type: an address or name, never empty (``--host "$HOST"`` with the variable unset);
    an IPv6 address may be written in brackets, as the server writes it (``[::1]``: ``::1``).

    >>> _host("[::1]")
    '::1'
    >>> _host(" ")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: is empty: give an address (127.0.0.1, 0.0.0.0, ::1) or leave the flag out
    """
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give an address (127.0.0.1, 0.0.0.0, ::1) or leave the flag out")
    return text


def _flag(help: str, type=None, **argparse_options) -> dict:
    """A field's flag: its help, its argparse type and other add_argument options."""
    return {"help": help, "type": type, **argparse_options}


@dataclass
class ServeSettings:
    model: str = field(metadata=_flag("hub id or local directory of the model to serve", model_name, required=True))
    served_model_name: str | None = field(
        default=None, metadata=_flag("the model id clients send (default: the model directory's name)", _model_id)
    )
    host: str = field(
        default="127.0.0.1",
        metadata=_flag("address to listen on (default 127.0.0.1: this machine only; IPv6: ::1 or [::1])", _host),
    )
    port: int = field(default=8080, metadata=_flag("port to listen on", _port))
    api_key: str | None = field(
        default=None,
        repr=False,  # a secret: never in a repr, a log line or a traceback's locals shown with it
        metadata=_flag("require 'Authorization: Bearer KEY' (default: $MINIBERT_API_KEY, else none)", _api_key),
    )
    max_batch_tokens: int = field(
        default=16_384,
        metadata=_flag(
            "tokens in one model batch, at most: a larger request runs in several, and a stop waits for one "
            "(a text longer than this is a batch alone)",
            positive_int,
        ),  # fmt: skip
    )
    max_wait_ms: float = field(
        default=5.0,
        metadata=_flag(
            "how long a request waits for others to batch with", number(0.0, 60_000.0, "milliseconds")
        ),  # fmt: skip
    )
    max_queue: int = field(  # texts waiting for the model
        default=4_096,
        metadata=_flag("texts waiting for the model, at most; beyond, 503 with Retry-After", positive_int),
    )
    max_body_bytes: int = field(
        default=4 * 1024 * 1024, metadata=_flag("largest request body (default 4 MiB; 413 beyond)", positive_int)
    )
    max_inputs: int = field(default=2_048, metadata=_flag("texts per request", positive_int))  # OpenAI's
    max_input_chars: int = field(default=100_000, metadata=_flag("characters per text", positive_int))
    max_tokenize_tokens: int = field(  # /tokenize answers a row per token: its answer is bounded by this
        default=131_072,
        metadata=_flag(
            "tokens one /tokenize request may produce, all texts together (default 131072; 413 beyond)", positive_int
        ),  # fmt: skip
    )
    dtype: str = field(default="float32", metadata=_flag(DTYPE_HELP, choices=DTYPES))
    auto_truncate: bool = field(  # texts over the model's length are cut unless a request says "truncate": false
        default=False,
        metadata=_flag(
            'cut inputs longer than the model unless a request says "truncate": false (default: refuse '
            "them with 422 unless it says true)",
            action="store_true",
        ),  # fmt: skip
    )
    max_header_bytes: int = field(
        default=64 * 1024,
        metadata=_flag("a request's line and headers, at most (default 65536; 431 beyond)", positive_int),
    )
    read_timeout: float = field(
        default=30.0,
        metadata=_flag("seconds for a request's body to arrive (default 30; 408 beyond)", _SECONDS),
    )
    header_timeout: float = field(
        default=5.0,
        metadata=_flag(
            "seconds from a connection's start (or a kept-alive one's next byte) to its request's headers "
            "(default 5; then closed, with 408 if part of a request came)",
            _SECONDS,
        ),  # fmt: skip
    )
    keep_alive_timeout: float = field(
        default=75.0, metadata=_flag("seconds an idle kept-alive connection stays open between requests", _SECONDS)
    )
    send_timeout: float = field(default=60.0, metadata=_flag(  # then the connection is aborted
        "seconds a client may read none of an answer waiting for it; then it is aborted", _SECONDS))  # fmt: skip
    graceful_timeout: float = field(
        default=30.0,
        metadata=_flag(
            "seconds a stop (SIGTERM, Ctrl-C) waits for the requests in flight (default 30); those unfinished "
            "then are answered 503 and the command exits 1",
            _SECONDS,
        ),  # fmt: skip
    )
    limit_concurrency: int = field(
        default=512,
        metadata=_flag(
            "requests being served at once (from when a body is in), at most; idle connections do not count "
            "(default 512; 503 beyond)",
            positive_int,
        ),  # fmt: skip
    )
    gemm: str | None = None  # the linear layers' matrix library (the command's --gemm, a flag of every command)
    device: str | None = None  # where the model runs (the command's --device, checked before the server starts)

    def __post_init__(self):
        if self.max_queue < self.max_inputs:  # else a request of max_inputs texts could never be queued
            raise ValueError(f"--max-queue ({self.max_queue}) must be at least --max-inputs ({self.max_inputs})")


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    """A ``--flag`` for each field of ServeSettings that has one (its help, type, default)."""
    add_flags(parser, ServeSettings)


def settings_from(args: argparse.Namespace) -> ServeSettings:
    """The parsed flags as ServeSettings (``--api-key`` defaults to ``$MINIBERT_API_KEY``)."""
    values = {setting.name: getattr(args, setting.name, None) for setting in dataclasses.fields(ServeSettings)}
    values["api_key"] = values["api_key"] or _api_key_from_the_environment()
    return ServeSettings(**values)


def _api_key_from_the_environment() -> str | None:
    """``$MINIBERT_API_KEY``, checked as ``--api-key`` is (a key with spaces at either end could never
    match a client's ``Bearer KEY``); unset or empty: none. There is no flag to leave out here: a
    variable of spaces only is told to be unset."""
    key = os.environ.get("MINIBERT_API_KEY") or None
    if key is not None and not key.strip():
        raise ValueError("MINIBERT_API_KEY holds only spaces: give the key clients must send, or unset it (an empty "
                         "MINIBERT_API_KEY counts as unset)")  # fmt: skip
    if key is not None:
        try:
            _api_key(key)
        except argparse.ArgumentTypeError as error:
            raise ValueError(f"MINIBERT_API_KEY {error}") from None
    return key
