"""``minibert.explore(...)``: one text through one model, as data and as a page.

    >>> page = minibert.explore("path/to/bert-base-uncased", "Paris is the [MASK] of France.")  # doctest: +SKIP
    >>> page.data.attention.shape            # (layers, heads, tokens, tokens)                   # doctest: +SKIP
    (12, 12, 10, 10)
    >>> page.save("paris.html")              # one file: open it in any browser, offline         # doctest: +SKIP

In Jupyter the object draws itself (``_repr_html_``) inside an isolated frame.
"""

from __future__ import annotations

import html
import os
from functools import cached_property
from pathlib import Path

from ..formats.atomic_files import folder_error, write_atomically
from ..tokenizer.bert_tokenizer import BertTokenizer
from .data import ExplorationData, check_top_k, compute
from .loading import load_for_exploring
from .page import render
from .payload import check_attention_bits, page_payload


class Exploration:
    """What ``explore`` returns: ``.data`` (numpy arrays, full precision), ``.html()`` (the page),
    ``.save(path)`` (the page, written atomically) and ``.payload`` (the page's JSON object)."""

    def __init__(self, data: ExplorationData, cls_token: str, sep_token: str, attention_bits: int | None = None):
        self.data = data
        self._page_arguments = (cls_token, sep_token, attention_bits)

    @cached_property
    def payload(self) -> dict:
        """The page's JSON object (payload.py), made on first use: bert-base at 512 tokens takes seconds."""
        return page_payload(self.data, *self._page_arguments)

    def html(self) -> str:
        return render(self.payload, f"minibert explore: {self.data.model_name}")

    def save(self, path: str | os.PathLike) -> Path:
        """Write the page to ``path`` (its directory must exist); an existing file is replaced atomically.
        A directory that is not one is said as the command says it (``folder_error``): missing
        (FileNotFoundError), a file or something else (NotADirectoryError), unreadable (OSError);
        never "does not exist" of a file that does."""
        path = Path(path)
        error = folder_error(path.parent)
        if error is not None:
            raise error
        write_atomically(path, self.html().encode("utf-8"))
        return path

    def _repr_html_(self) -> str:
        """For Jupyter: the page in a sandboxed iframe (its scripts run there, apart from the notebook's)."""
        return (f'<iframe sandbox="allow-scripts allow-downloads" style="width:100%;height:900px;border:0" '
                f'srcdoc="{html.escape(self.html(), quote=True)}"></iframe>')  # fmt: skip

    def __repr__(self) -> str:
        data = self.data
        return (
            f"Exploration({data.model_name!r}: {len(data.tokens)} tokens, {data.layers} layers × "
            f"{data.heads} heads, masked-LM head: {'yes' if data.prediction_ids is not None else 'no'})"
        )


def explore(model, text: str, pair: str | None = None, *, top_k: int = 5, max_length: int | None = None,
            truncate: bool = False, tokenizer: BertTokenizer | None = None,
            attention_bits: int | None = None, device=None) -> Exploration:  # fmt: skip
    """Run ``text`` (and ``pair``) through ``model`` and return what the explorer page shows.

    ``model``: a hub id or directory, a minibert model loaded with ``from_pretrained`` (``BertModel``,
    ``BertForMaskedLM``, ``BertForPreTraining``, ...) or a ``(model, tokenizer)`` pair. A checkpoint
    with the masked-LM head gets the logit lens (``top_k`` guesses per position and layer, 1 to 100:
    the page keeps them all); one without it gets none. A text longer than the model's positions (or
    ``max_length``) is refused unless ``truncate=True``. ``attention_bits`` (8 or 16; default: 16 up
    to 4 M weights, else 8) is how precisely the page stores the attention; ``.data`` keeps float32.
    ``device``: where a model given by name runs ("cuda", "auto"; default the CPU). A model whose
    outputs are NaN or infinite is refused, naming the first layer (and head) where they are."""
    check_attention_bits(attention_bits)  # before the model is loaded, not when the page is drawn
    check_top_k(top_k)  # its bound from the vocabulary is checked once the model is loaded
    loaded = load_for_exploring(model, tokenizer, device)
    data = compute(loaded, text, pair, top_k=top_k, max_length=max_length, truncate=truncate)
    return Exploration(data, loaded.tokenizer.cls_token, loaded.tokenizer.sep_token, attention_bits)
