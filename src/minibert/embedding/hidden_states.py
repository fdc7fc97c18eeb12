"""The Embedder's stage 3: every window of every text through the model, in batches, in streams.

The windows (windows.py) become rows [CLS] pieces [SEP]; the rows are sorted longest first and cut
into batches by a budget of padded tokens (batches.py), so a batch holds many short rows or a few
long ones and carries little padding; on a CPU the batches run in parallel streams (streams.py).
On a GPU they run one after another, one ahead: batch i + 1 is padded, copied (from pinned memory,
without waiting) and queued while the GPU still computes batch i, and nothing on the way reads the
GPU back (the model reads the mask where it was given, on the CPU: speed/packing.py). Each batch's
results are queued to be copied back into pinned memory as soon as it is queued; the loop waits for
batch i's copy alone (an event), while the GPU goes on with batch i + 1, and before it waits, the
next chunk of a long list is tokenized a share at a time (chunks.py).
Each batch's results go back to their texts, so nothing depends on the order the batches ran in.

A text that fits in one window is pooled right in its batch when pooling modes are given (stage 4
done early: its token vectors need not be kept); a longer text keeps its windows' token vectors,
to be put back together (windows.assemble_tokens) and pooled afterwards (pooling.pool_text).
"""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..inputs import AS_ASKED
from ..pretrained import evaluating
from .batches import length_sorted_batches
from .options import EmbedOptions
from .pooling import combine_layers, pool
from .windows import Window


@dataclass
class TextStates:
    """One text after the forward passes: its pooled vector (when pooled in its batch), or its
    windows as (start, token vectors (2 + window length, dim), pooler vector or None)."""

    pooled: np.ndarray | None = None
    windows: list[tuple[int, np.ndarray, np.ndarray | None]] = field(default_factory=list)


def hidden_states(model, tokenizer, sequences: Sequence[list[Window]], options: EmbedOptions, *, layers: list[int],
                  progress: bool | None, pooling: tuple[str, ...] | None, skip: int,
                  between: Callable[[int, int], None] | None = None) -> list[TextStates]:  # fmt: skip
    """Each text's ``TextStates``, from its windows ``sequences[i]`` run through ``model``.

    ``layers``: negative indices into the hidden states (checked), combined as
    ``options.layer_combine`` says; ``pooling``: the modes that pool a one-window text in its batch
    (the first ``skip`` tokens left out), or None to keep every text's token vectors;
    ``options.batch_size`` and ``options.streams`` shape the batches. ``between(i, count)``, when
    given, is called before the loop reads batch i's results (of ``count`` batches): on a GPU once
    batch i + 1 is queued too (or, for the last, while the GPU computes it), work for the CPU while
    the GPU computes (chunks.py)."""
    windows = [  # (text index, start, [CLS] pieces [SEP])
        (index, start, tokenizer.build_inputs_with_special_tokens(ids))
        for index, text_windows in enumerate(sequences)
        for start, ids in text_windows
    ]
    results = [TextStates() for _ in sequences]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.unk_token_id  # masked

    on_gpu = model.device.type == "cuda"

    def forward(batch: list[int]):
        """One batch through the model, and a call that returns its token vectors (None when every
        text of the batch is pooled here), pooler vectors and pooled vectors as numpy arrays once
        they are on the CPU (a GPU's are still being copied back when this returns)."""
        input_ids, attention_mask = _padded([windows[i][2] for i in batch], pad)
        if on_gpu:  # pinned: checked here on the CPU, then copied without waiting for the GPU's last batch
            input_ids, attention_mask = input_ids.pin_memory(), attention_mask.pin_memory()
        with torch.inference_mode():
            asked = {**AS_ASKED, "output_hidden_states": layers != [-1]}
            out = model(input_ids, attention_mask, skip_padding=True, **asked)
            if layers == [-1]:  # pooling reads real tokens only: the padding's rows are never used
                states = out.last_hidden_state.float()
            else:
                states = combine_layers([out.hidden_states[layer].float() for layer in layers], options.layer_combine)
            pooler = out.pooler_output.float() if pooling and "pooler" in pooling else None
            mask = attention_mask.to(states.device, non_blocking=True).unsqueeze(-1).to(states.dtype)  # (B, T, 1)
            mask[:, :skip] = 0
            pooled = pool(states, mask, pooler, pooling) if pooling else None
            if pooled is not None and all(len(sequences[windows[i][0]]) == 1 for i in batch):
                states = pooler = None  # every text pooled here: no token vectors to keep
        if not on_gpu:  # (another accelerator: copied back here, waiting)
            arrays = tuple(t if t is None else t.cpu().numpy() for t in (states, pooler, pooled))
            return batch, lambda: arrays
        # into pinned memory, queued behind this batch on the model's stream: the loop waits for these copies alone
        copies = tuple(t if t is None else t.to("cpu", non_blocking=True) for t in (states, pooler, pooled))
        copied = torch.cuda.Event()
        copied.record(torch.cuda.current_stream(model.device))

        def arrived():
            copied.synchronize()
            return tuple(t if t is None else t.numpy().copy() for t in copies)  # pageable: pinned buffers get reused

        return batch, arrived

    # On a CPU, batches run in parallel streams, each on its share of the threads (streams.py).
    # Closed on the way out, even by an exception here: no stream goes on computing for nobody.
    streams = 1 if model.device.type != "cpu" or not options.streams else None
    lengths = [len(window[2]) for window in windows]
    batches, outputs = length_sorted_batches(lengths, forward, options.batch_size, model.config, streams)
    with evaluating(model), contextlib.closing(outputs):  # dropout off, the model's mode put back after
        for number, (batch, arrived) in enumerate(_progress(_one_ahead(outputs) if on_gpu else outputs, progress,
                                                            batches)):  # fmt: skip
            if between is not None:
                between(number, len(batches))
            states, pooler, pooled = arrived()  # (on a GPU: waits for this batch's copies back, not the next batch)
            for row, i in enumerate(batch):
                index, start, ids = windows[i]
                if pooled is not None and len(sequences[index]) == 1:
                    results[index].pooled = pooled[row]
                else:
                    pooler_row = pooler[row] if pooler is not None else None
                    results[index].windows.append((start, states[row, : len(ids)], pooler_row))
    for text in results:
        text.windows.sort(key=lambda window: window[0])
    return results


def _padded(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of ids as (B, T) int64 ids padded on the right with ``pad`` to the longest, and their
    (B, T) mask, made in one pass over all the ids: a tensor per row cost about 10 µs a row (64 rows:
    660 against 38 µs on a Xeon), 60 ms of the 4,096 texts an H200 embedded in 0.55 s, during which
    the GPU, faster than the CPU that feeds it, waited.

    >>> _padded([[5, 6, 7], [8]], pad=0)
    (tensor([[5, 6, 7],
            [8, 0, 0]]), tensor([[1, 1, 1],
            [1, 0, 0]]))
    """
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    real = np.arange(lengths.max()) < lengths[:, None]  # (B, T): the first length[b] positions of row b
    ids = np.full(real.shape, pad, np.int64)
    ids[real] = np.fromiter(itertools.chain.from_iterable(rows), np.int64, int(lengths.sum()))  # row by row
    return torch.from_numpy(ids), torch.from_numpy(real.astype(np.int64))


def _one_ahead(results: Iterator) -> Iterator:
    """Each result once the next one has been started: on a GPU, the next batch is queued before
    this one's results are copied back (which waits for them)."""
    previous = _NOTHING = object()
    for result in results:
        if previous is not _NOTHING:
            yield previous
        previous = result
    if previous is not _NOTHING:
        yield previous


def _progress(results: Iterator, progress: bool | None, batches: list):
    """A tqdm bar over ``results`` (one per batch) when asked, or by default when stderr is a
    terminal and the run is long."""
    show = progress if progress is not None else (sys.stderr.isatty() and len(batches) > 8)
    if not show:
        return results
    from tqdm.auto import tqdm

    return tqdm(results, total=len(batches), desc="embedding", unit="batch", file=sys.stderr)
