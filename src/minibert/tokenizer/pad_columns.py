"""``tokenizer.pad``'s way in and out: what is given (one example, a dict of lists, a list of dicts
as a data collator has them; lists, tensors or arrays) as columns of lists, and the padded columns as
tensors the way transformers makes them.

The token columns (``input_ids``, ``token_type_ids``, ``attention_mask``, ...) become int64; every
other column (a collator's ``label``, ``idx``) keeps its own type, as transformers' ``convert_to_tensors``
gives it: float scores stay floats.

    >>> padded_tensors({"input_ids": [[101, 102]], "label": [3.2]}, "np")["label"].dtype
    dtype('float64')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .encoding import PAD_VALUES, to_tensors


def columns_to_pad(encoded_inputs, return_tensors: str | None) -> tuple[dict[str, list], bool, str | None]:
    """``pad``'s input as columns of lists: (columns, was it one example, the tensor kind to return)."""
    if isinstance(encoded_inputs, Sequence) and encoded_inputs and isinstance(encoded_inputs[0], Mapping):
        keys = list(encoded_inputs[0])
        if any(set(example) != set(keys) for example in encoded_inputs):
            raise ValueError("pad: every example must have the same keys")
        encoded_inputs = {key: [example[key] for example in encoded_inputs] for key in keys}
    if not isinstance(encoded_inputs, Mapping) or "input_ids" not in encoded_inputs:
        raise ValueError("pad expects a dict (or a list of dicts) with input_ids")
    columns = {}
    for key, value in encoded_inputs.items():
        if hasattr(value, "tolist"):  # a torch tensor or numpy array
            return_tensors = return_tensors or ("pt" if type(value).__module__.startswith("torch") else "np")
            value = value.tolist()
        elif isinstance(value, list) and value and hasattr(value[0], "tolist"):
            return_tensors = return_tensors or ("pt" if type(value[0]).__module__.startswith("torch") else "np")
            value = [row.tolist() for row in value]
        columns[key] = value
    single = not columns["input_ids"] or not isinstance(columns["input_ids"][0], (list, tuple))
    if single:
        columns = {key: [value] for key, value in columns.items()}
    columns = {key: [list(row) for row in rows] if key in PAD_VALUES or key == "input_ids" else rows
               for key, rows in columns.items()}  # fmt: skip
    return columns, single, return_tensors


def padded_tensors(columns: dict[str, list], kind: str) -> dict:
    """``pad``'s columns as tensors: the token columns int64 (``to_tensors``); the others (a data
    collator's ``label``) as transformers converts them, ``torch.tensor(rows)`` or ``np.asarray(rows)``,
    so STS-B's float scores stay floats (int64 made 3.2 a 3) and booleans stay booleans."""
    tensors = to_tensors({key: rows for key, rows in columns.items() if key in PAD_VALUES or key == "input_ids"}, kind)
    return {key: tensors[key] if key in tensors else _as_given(rows, kind) for key, rows in columns.items()}


def _as_given(rows: list, kind: str):
    """One column as transformers' ``convert_to_tensors`` makes it: its own dtype (int64 if empty);
    for ``"np"``, rows of different lengths as an object array of arrays."""
    if kind == "pt":
        import torch

        return torch.tensor(rows) if rows else torch.tensor(rows, dtype=torch.long)
    import numpy as np

    if any(isinstance(row, (list, tuple)) for row in rows) and len({len(row) for row in rows}) > 1:
        column = np.empty(len(rows), dtype=object)  # (filled one by one: numpy would try to broadcast the rows)
        for index, row in enumerate(rows):
            column[index] = np.asarray(row)
        return column
    return np.asarray(rows) if rows else np.asarray(rows, dtype=np.int64)
