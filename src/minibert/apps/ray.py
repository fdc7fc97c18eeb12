"""Embedding a corpus on a Ray cluster: minibert as a Ray Data batch function.

minibert does not schedule work across processes or machines itself; Ray Data does that well
(reading files in parallel, streaming batches to a pool of actors, restarting an actor that dies
and retrying its batch, writing the results). ``EmbedBatch`` is the piece that plugs in: a callable
class, so each actor loads the model once and then embeds batch after batch::

    import ray
    from minibert.ray import EmbedBatch

    ds = ray.data.read_parquet("s3://bucket/docs/")                 # any source with a text column
    ds = ds.map_batches(
        EmbedBatch,
        fn_constructor_kwargs={"model": "sentence-transformers/all-MiniLM-L6-v2"},
        compute=ray.data.ActorPoolStrategy(size=4),  # actors, each with its own copy of the model
        batch_size=256,         # rows per call; the Embedder sorts and packs them by length
        num_cpus=1,             # cores per actor (and torch threads, unless num_threads says)
    )
    ds.write_parquet("s3://bucket/embeddings/")

Each batch's text column (``text_column``, default ``"text"``) becomes an ``embedding`` column of
fixed-size float32 vectors, computed as ``Embedder.embed`` computes them (the model's own recipe
unless ``embed_options`` say otherwise); every other column passes through untouched (an
``output_column`` the batch already has is refused). pandas, pyarrow and numpy batch formats all
work. Ray is an optional extra (``pip install minibert[ray]``); only this module imports it, and
only when it is imported.

Why a callable class and not a function: Ray Data runs a class in a pool of long-lived actors and
calls ``__init__`` once per actor, so the model is loaded once per process, not once per batch.
"""

from __future__ import annotations

import os

import numpy as np


class EmbedBatch:
    """``ray.data.Dataset.map_batches(EmbedBatch, fn_constructor_kwargs={"model": M, ...})``.

    * ``model``: a hub id or local directory (every node must be able to read it).
    * ``text_column`` / ``output_column``: where the texts are and where the vectors go.
    * ``dtype``: "float32" (default), "bfloat16" or "float16"; ``num_threads``: torch threads per
      actor (default: what Ray gives the actor, ``num_cpus``).
    * ``device``: where each actor's model runs: "auto", "cpu", "cuda" (give the actors GPUs:
      ``map_batches(..., num_gpus=1)``; Ray sets each actor's visible GPU). Default the CPU.
    * ``options``: an ``EmbedOptions``; or its fields as keywords (pooling, normalize,
      prompt_name, max_length, long_text, ...), checked once when the actor starts.
    """

    def __init__(
        self,
        model: str | os.PathLike,
        *,
        text_column: str = "text",
        output_column: str = "embedding",
        dtype: str | None = None,
        device: str | None = None,
        num_threads: int | None = None,
        options=None,
        **embed_options,
    ):
        import torch

        from ..embedding.embedder import Embedder
        from ..embedding.options import EmbedOptions

        # Every option is checked here, once per actor, not batch after batch: first those that need
        # no model, before anything changes (torch's thread count is the whole process's) ...
        if num_threads is not None and (not isinstance(num_threads, int) or isinstance(num_threads, bool)
                                        or num_threads < 1):  # fmt: skip
            raise ValueError(f"EmbedBatch: num_threads must be a positive int, got {num_threads!r}")
        for name, column in (("text_column", text_column), ("output_column", output_column)):
            if not isinstance(column, str) or not column:
                raise TypeError(f"EmbedBatch: {name} must be a column name (a non-empty str), got {column!r}")
        if output_column == text_column:
            raise ValueError(f"EmbedBatch: output_column and text_column are both {text_column!r}; the vectors "
                             "would replace the texts: name another output_column")  # fmt: skip
        self.text_column, self.output_column = text_column, output_column
        self.options = EmbedOptions.of(options, **embed_options)
        if self.options.prompt is not None and self.options.prompt_name is not None:  # as --prompt/--prompt-name:
            # embed takes both, as sentence-transformers does (prompt wins, with a warning an actor's log would hide)
            raise ValueError("EmbedBatch: pass prompt or prompt_name, not both")
        threads = torch.get_num_threads()
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        try:  # ... then those this model may refuse (a prompt_name it lacks, a layer it lacks)
            self.embedder = Embedder.from_pretrained(model, dtype=dtype, device=device)
            _, skip = self.embedder.pieces_for_embedding([], self.options)
            self.embedder.embed_pieces([], self.options, skip=skip)
        except BaseException:
            torch.set_num_threads(threads)  # a refused actor leaves the process as it found it
            raise

    def __call__(self, batch):
        """pandas.DataFrame, pyarrow.Table or dict of numpy arrays in → the same type out."""
        if isinstance(batch, dict):  # batch_format="numpy"
            batch = dict(batch)
            batch[self.output_column] = self._embed(self._column(batch, list(batch)))
            return batch
        if type(batch).__module__.startswith("pyarrow"):
            import pyarrow as pa

            vectors = self._embed(self._column(batch, batch.column_names))
            flat = pa.array(vectors.reshape(-1), type=pa.float32())
            column = pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])
            return batch.append_column(self.output_column, column)
        vectors = self._embed(self._column(batch, list(batch.columns)))  # pandas
        batch = batch.copy()
        batch[self.output_column] = list(vectors)
        return batch

    def _column(self, batch, columns: list) -> list:
        """The batch's texts, checked (and its columns: the output column must be a new one, so
        every batch format gives the same result) before any is embedded."""
        if self.output_column in columns:
            raise ValueError(f"EmbedBatch: this batch already has a column {self.output_column!r}; set "
                             "output_column= to a new name (the vectors would replace it, or with pyarrow "
                             "sit beside it under the same name)")  # fmt: skip
        if self.text_column not in columns:
            raise ValueError(f"EmbedBatch: no column {self.text_column!r} in this batch (columns: {columns}); "
                             "set text_column=")  # fmt: skip
        values = batch[self.text_column]
        values = values.to_pylist() if hasattr(values, "to_pylist") else list(values)
        for row, value in enumerate(values):
            if not isinstance(value, str):
                kind = "missing (None/NaN)" if _is_missing(value) else f"{type(value).__name__} {_short(value)!r}"
                raise TypeError(f"EmbedBatch: column {self.text_column!r} row {row} of this batch of {len(values)} "
                                f"is {kind}, not text; {self._which_row(batch, columns, values, row)}")  # fmt: skip
        return values

    def _which_row(self, batch, columns: list, texts: list, row: int) -> str:
        """What tells the user which row of the dataset a batch's ``row`` is (Ray Data numbers rows
        within the batch): its other columns (an id), or without any the texts around it."""
        others = [name for name in columns if name != self.text_column]
        if not others:
            before = repr(_short(texts[row - 1])) if row > 0 else "(the batch's start)"
            after = repr(_short(texts[row + 1])) if row + 1 < len(texts) else "(the batch's end)"
            return f"the batch has no other column: the rows before and after it are {before} and {after}"
        if isinstance(batch, dict):  # numpy arrays
            found = {name: batch[name][row] for name in others}
        elif type(batch).__module__.startswith("pyarrow"):
            found = batch.select(others).slice(row, 1).to_pylist()[0]
        else:  # a DataFrame, by position (its index may be any)
            found = batch[others].iloc[row].to_dict()
        found = {name: _short(value.tolist() if hasattr(value, "tolist") else value) for name, value in found.items()}
        return f"its other columns: {found}"

    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors = self.embedder.embed(texts, self.options, progress=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)


def _is_missing(value) -> bool:
    """None, NaN (how pandas stores a missing text), pandas' NA and NaT, Arrow's null (None)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(value, (float, np.floating)) and bool(np.isnan(value))


def _short(value):
    """A value for an error message: a text or repr cut to 60 characters."""
    if isinstance(value, str):
        return value if len(value) <= 60 else value[:57] + "..."
    shown = repr(value)
    return value if len(shown) <= 60 else shown[:57] + "..."
