"""The run's guard against numbers that are no longer numbers (``TrainingDivergedError``).

Two moments are watched. Before each update, the step's loss and gradient norm (``stop_if_not_finite``:
a NaN there stops every process before the weights change). And before each checkpoint, what the
update made (``gives_finite_numbers``): weights that are finite one by one can still be ruined — an
update at a rate of 1e30 leaves weights of 1e30 whose every output is NaN — so the weights are run on
a few training rows first, and a checkpoint is kept as good only when that gives finite figures.
Either way the folder keeps its last good checkpoint, and the message says how to go on: the same
command with ``--resume`` and a lower rate (a tenth, and no more than the command's default).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ...errors import TrainingDivergedError
from ...pretrained import evaluating
from ..tasks.task import piece_tensors
from .precision import autocast
from .report import check_finite, resume_command

CHECKED_ROWS = 8  # the training rows a checkpoint's weights are run on before they are kept


def gives_finite_numbers(run) -> bool:  # (run: loop.Run)
    """Whether the weights, finite one by one, also make finite figures: the task's forward and loss
    on the first training rows, as in training but without dropout (an update at a huge rate leaves
    weights of 1e30 that are finite and ruin every output). Every process checks the same rows."""
    rows = np.arange(min(CHECKED_ROWS, len(run.data.train)))
    piece = piece_tensors(run.data.train.batch(rows), run.world.device)
    with evaluating(run.model), torch.no_grad(), autocast(run.options.precision, run.world.device):
        sums = run.task.sums(run.model, piece, run.task.denominators(run.data.train, rows))
    return bool(torch.isfinite(sums.loss).all()) and bool(torch.isfinite(sums.stacked_figures()).all())


def lower_rate_command(run) -> str:  # (run: loop.Run)
    """The command that resumes the run at a lower rate: a tenth of this one, and no more than the
    command's default (a tenth of 1e30 would diverge again)."""
    default = _default_rate(run.options)
    lower = min(float(f"{run.options.learning_rate / 10:.3g}"), default)
    return resume_command(run.options, run.world.size, run.task.command, learning_rate=lower)


def _default_rate(options) -> float:
    return next(f.default for f in dataclasses.fields(options) if f.name == "learning_rate")


def stop_if_not_finite(run, record: dict, gradient_norm: float) -> None:  # (run: loop.Run)
    """Before the update: a NaN or infinite figure of the task's ``watched`` (its losses) or
    gradient norm stops every process (they all see the same sums and norm), the last checkpoint
    left as it is; the step's line is written first."""
    options, world, folder = run.options, run.world, run.folder
    record["gradient_norm"] = gradient_norm
    try:
        check_finite(record, options.learning_rate, folder.path, folder.saved_step if world.is_main else None,
                     lower_rate_command(run), run.task.watched)  # fmt: skip
    except TrainingDivergedError:
        if world.is_main:
            folder.append_metrics(record)
        raise
