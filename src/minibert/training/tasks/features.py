"""Examples → the model's inputs, as Google's ``run_classifier.convert_single_example`` makes them.

    tokens:       [CLS] is this jack ##son ##ville ? [SEP] no it is not . [SEP]  [PAD] ...
    segment_ids:  0     0  0    0    0     0       0 0     1  1  1  1   1 1      0
    input_mask:   1     1  1    1    1     1       1 1     1  1  1  1   1 1      0

Each text is cut into WordPiece pieces by the model's own tokenizer (head.py ``load_tokenizer``: the
``BertTokenizer`` the run saves and is served with, as transformers' run_glue tokenizes), then cut
and framed as Google's function does. On plain text its pieces are those of Google's
``FullTokenizer``; where the two differ (docs/tokenizer.md: ``[SEP]`` or an added token typed in the
text, a folder's ``strip_accents``, ...) the features follow the tokenizer that serves the model, so a
classifier is never served inputs of a kind it did not train on. A pair longer than ``max_seq_length − 3`` is trimmed by
``_truncate_seq_pair``: one piece at a time from the end of the *longer* side (B when they are
equal), so a short question keeps all of its words while a long passage loses its tail. A single
text keeps its first ``max_seq_length − 2`` pieces. A ``text_b`` that is empty, or has no pieces,
makes a single-text example, as in Google's code (``if example.text_b:`` and ``if tokens_b:``).

>>> tokens_a, tokens_b = list("abcdef"), list("xy")
>>> truncate_seq_pair(tokens_a, tokens_b, 5)
>>> tokens_a, tokens_b
(['a', 'b', 'c'], ['x', 'y'])
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ...errors import DataError
from ...tokenizer import BertTokenizer
from .examples import DECIMAL, Example, split_labels


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """Trim the pair in place to ``max_length`` pieces together: the longer side loses its last piece."""
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def convert_single_example(example: Example, tokenizer: BertTokenizer, max_seq_length: int
                           ) -> tuple[list[int], list[int], list[int]]:  # fmt: skip
    """(input_ids, input_mask, segment_ids), each ``max_seq_length`` long, as Google's function
    makes them from the tokenizer's pieces."""
    tokens_a = tokenizer.piece_ids(example.text_a)
    tokens_b = tokenizer.piece_ids(example.text_b) if example.text_b else None
    if tokens_b:
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)  # room for [CLS], [SEP], [SEP]
    else:
        tokens_a = tokens_a[: max_seq_length - 2]  # room for [CLS], [SEP]
    input_ids = [tokenizer.cls_token_id, *tokens_a, tokenizer.sep_token_id]
    segment_ids = [0] * len(input_ids)
    if tokens_b:
        input_ids += [*tokens_b, tokenizer.sep_token_id]
        segment_ids += [1] * (len(tokens_b) + 1)
    padding = max_seq_length - len(input_ids)
    return input_ids + [0] * padding, [1] * len(input_ids) + [0] * padding, segment_ids + [0] * padding


@dataclass
class Features:
    """A file's examples as arrays (N = examples, T = max_seq_length), Google's feature names."""

    input_ids: np.ndarray  # (N, T) int64
    input_mask: np.ndarray  # (N, T) int64: 1 real, 0 padding
    segment_ids: np.ndarray  # (N, T) int64
    label_ids: np.ndarray  # (N,) int64 class ids; (N,) float32 scores; (N, K) float32 multi-hot; (N, T) int64 tags

    def __len__(self) -> int:
        return len(self.label_ids)

    @property
    def sequence_length(self) -> int:  # T
        return self.input_ids.shape[1]

    @property
    def fingerprint(self) -> str:
        """A SHA-256 of every array: a resumed run must train on the same features."""
        digest = hashlib.sha256()
        for array in (self.input_ids, self.input_mask, self.segment_ids, self.label_ids):
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()

    def batch(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The rows, cut to the longest real sequence among them: the columns cut are padding in
        every row, which attention ignores, so the outputs are those of Google's padded batch."""
        length = max(int(self.input_mask[rows].sum(1).max()), 1)
        is_tags = self.label_ids.ndim == 2 and self.label_ids.dtype == np.int64  # (N, T); multi-hot is (N, K) floats
        labels = self.label_ids[rows, :length] if is_tags else self.label_ids[rows]
        return {"input_ids": self.input_ids[rows, :length], "input_mask": self.input_mask[rows, :length],
                "segment_ids": self.segment_ids[rows, :length], "label_ids": labels}  # fmt: skip

    def tfrecord_columns(self) -> dict[str, np.ndarray]:
        """Google's TFRecord features, one (N, L) array each, as ``file_based_convert_examples_to_features``
        writes them: ``input_ids``, ``input_mask``, ``segment_ids`` (T ints each), ``label_ids`` (one
        int; T ints for tags; one float for a score; K floats multi-hot) and ``is_real_example`` (1)."""
        labels = self.label_ids if self.label_ids.ndim == 2 else self.label_ids[:, None]
        return {"input_ids": self.input_ids, "input_mask": self.input_mask, "segment_ids": self.segment_ids,
                "label_ids": labels, "is_real_example": np.ones((len(self), 1), dtype=np.int64)}  # fmt: skip


def write_features(features: Features, path: str) -> int:
    """The features as a TFRecord file of one tf.train.Example per row, in the layout of the task's
    Google script (``Features.tfrecord_columns``: run_classifier.py's; SQuAD's windows: run_squad.py's).
    Written atomically; returns the count of records."""
    from ...formats.atomic_files import atomic_output
    from ...formats.tfrecord import encode_examples, frame_records

    with atomic_output(path) as handle:
        handle.write(frame_records(encode_examples(features.tfrecord_columns())))
    return len(features)


def make_features(examples: list[Example], tokenizer: BertTokenizer, max_seq_length: int,
                  labels: list[str] | None, path: str, separator: str | None = None) -> Features:  # fmt: skip
    """Every example's features; ``labels`` None: the label is a score (regression); ``separator``:
    several labels per example (multi-hot label_ids, (N, K) floats)."""
    rows = [convert_single_example(example, tokenizer, max_seq_length) for example in examples]
    ids, mask, segments = (np.array([row[k] for row in rows], dtype=np.int64) for k in range(3))
    if labels is None:
        label_ids = np.array([_score(example, path) for example in examples], dtype=np.float32)
    elif separator is not None:
        label_ids = np.zeros((len(examples), len(labels)), dtype=np.float32)
        for row, example in enumerate(examples):
            label_ids[row, [labels.index(label) for label in split_labels(example.label, separator)]] = 1.0
    else:
        index = {label: number for number, label in enumerate(labels)}
        label_ids = np.array([index[example.label] for example in examples], dtype=np.int64)
    return Features(ids, mask, segments, label_ids)


def _score(example: Example, path: str) -> float:
    """A label as a score: a decimal number in ASCII digits (examples.py ``DECIMAL``), finite in float32."""
    if DECIMAL.fullmatch(example.label) is None:  # (not "1_5", "٣", "nan", which float() reads)
        raise DataError(f"{path}, line {example.line}: the label {example.label!r} is not a number "
                        "(--task regress learns a score, written in ASCII digits: 2, -0.5, 1e-3)")  # fmt: skip
    value = float(example.label)
    if not np.isfinite(value):
        raise DataError(f"{path}, line {example.line}: the label {example.label!r} is not a finite number")
    if abs(value) > LARGEST_SCORE:  # finite in float64, but its squared error is not in float32
        raise DataError(f"{path}, line {example.line}: the label {example.label!r} is too large: scores are "
                        f"trained in float32, where the squared error of a score beyond ±{LARGEST_SCORE:.2g} "
                        "is infinite")  # fmt: skip
    return value


# The largest score whose square (the mean squared error of a prediction near 0) is finite in float32.
LARGEST_SCORE = float(np.sqrt(np.finfo(np.float32).max))
