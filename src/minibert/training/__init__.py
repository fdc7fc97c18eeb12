"""Pre-training BERT (the paper's section 3.1) with Google's own step: the data (data.py), the step
(step.py: losses, AdamWeightDecay, schedule, clipping), the loop (loop.py), the run directory and
resume (checkpoint.py), data parallel (distributed.py), the loss curve (plot.py).

This room is imported by the ``minibert pretrain`` command, never by ``import minibert``.
"""

from .loop import PretrainOptions, pretrain

__all__ = ["PretrainOptions", "pretrain"]
