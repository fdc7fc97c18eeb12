"""transformers' learning-rate schedules, for a training loop of your own (the tutorials' loops).

``minibert finetune`` follows Google's schedule (run/optimization.py ``Schedule``). A loop written
after a transformers tutorial builds torch's AdamW and one of these, and calls ``scheduler.step()``
after each ``optimizer.step()``:

    >>> import torch
    >>> weight = torch.nn.Parameter(torch.zeros(1))
    >>> optimizer = torch.optim.AdamW([weight], lr=1.0)
    >>> scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=6)
    >>> rates = []
    >>> for _ in range(6):
    ...     rates.append(round(scheduler.get_last_lr()[0], 3))
    ...     optimizer.step()
    ...     scheduler.step()
    >>> rates
    [0.0, 0.5, 1.0, 0.75, 0.5, 0.25]

Each is a ``torch.optim.lr_scheduler.LambdaLR`` whose factor, at step ``t``, is the formula of
transformers' ``optimization.py`` (tests/test_training_schedules.py compares them step by step):
a linear warmup ``t / warmup`` from 0, then

* ``get_linear_schedule_with_warmup``: down to 0 in a straight line at ``num_training_steps``;
* ``get_cosine_schedule_with_warmup``: half a cosine (``num_cycles=0.5``) down to 0;
* ``get_constant_schedule_with_warmup``: the optimizer's rate, constant;
* ``get_constant_schedule``: the optimizer's rate from the first step (no warmup).

``get_scheduler(name, optimizer, num_warmup_steps, num_training_steps)``, the HF course's
Trainer-free loop's spelling, picks one of them by transformers' name ("linear", "cosine",
"constant", "constant_with_warmup"), taking the arguments as transformers' does. transformers'
other schedules (polynomial, cosine with restarts, inverse square root, ...) are not here: asked
for, ``get_scheduler`` says so and names transformers' function, which schedules any torch optimizer.

The step counts are ints (numpy's too) or floats, as transformers takes them: a warmup of
``0.1 * num_training_steps`` (12.8 of 128 steps) rises by 1/12.8 a step.

transformers' ``AdamW`` is gone (transformers removed it): torch's ``torch.optim.AdamW`` is the one
to use, and ``from minibert import AdamW`` says so, and which defaults differ (weight_decay, eps).
"""

from __future__ import annotations

import functools
import math
import numbers
import operator

from torch.optim.lr_scheduler import LambdaLR

from .. import TRANSFORMERS_ONLY_SCHEDULES

__all__ = ["get_constant_schedule", "get_constant_schedule_with_warmup", "get_cosine_schedule_with_warmup",
           "get_linear_schedule_with_warmup", "get_scheduler"]  # fmt: skip


def _steps(value, name: str) -> int | float:
    """A number of steps as transformers takes one: an int (numpy's too: ``operator.index``) or a
    float (``num_warmup_steps=0.1 * num_training_steps``: the formulas are the same for it, as there);
    refused: a bool, something not a number, a negative number, NaN or infinity (no schedule to compute)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = operator.index(value)
    elif isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of steps (an int, or a float), got {value!r}")
    if not 0 <= value < math.inf:  # (NaN fails both)
        raise ValueError(f"{name} must be 0 or more, and finite, got {value!r}")
    return value


def _warmup(step: int, warmup: int | float) -> float | None:
    """The factor during the warmup (``step / warmup``, from 0), or None after it."""
    return float(step) / float(max(1, warmup)) if step < warmup else None


def _linear(step: int, *, warmup: int | float, total: int | float) -> float:
    rising = _warmup(step, warmup)
    return rising if rising is not None else max(0.0, float(total - step) / float(max(1, total - warmup)))


def _cosine(step: int, *, warmup: int | float, total: int | float, cycles: float) -> float:
    rising = _warmup(step, warmup)
    if rising is not None:
        return rising
    progress = float(step - warmup) / float(max(1, total - warmup))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * cycles * 2.0 * progress)))


def _constant(step: int, *, warmup: int | float) -> float:
    rising = _warmup(step, warmup)
    return rising if rising is not None else 1.0


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps: int, num_training_steps: int,
                                    last_epoch: int = -1) -> LambdaLR:  # fmt: skip
    """From 0 up to the optimizer's rate over ``num_warmup_steps``, then linearly down to 0 at
    ``num_training_steps`` (transformers' function of that name)."""
    factor = functools.partial(_linear, warmup=_steps(num_warmup_steps, "num_warmup_steps"),
                               total=_steps(num_training_steps, "num_training_steps"))  # fmt: skip
    return LambdaLR(optimizer, factor, last_epoch)


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps: int, num_training_steps: int,
                                    num_cycles: float = 0.5, last_epoch: int = -1) -> LambdaLR:  # fmt: skip
    """From 0 up to the optimizer's rate over ``num_warmup_steps``, then along a cosine to 0 at
    ``num_training_steps`` (``num_cycles`` cosine periods; 0.5: half a period, transformers' default)."""
    if isinstance(num_cycles, bool) or not isinstance(num_cycles, (int, float)) or not num_cycles >= 0:
        raise ValueError(f"num_cycles must be a number, 0 or more, got {num_cycles!r}")
    warmup, total = _steps(num_warmup_steps, "num_warmup_steps"), _steps(num_training_steps, "num_training_steps")
    factor = functools.partial(_cosine, warmup=warmup, total=total, cycles=float(num_cycles))
    return LambdaLR(optimizer, factor, last_epoch)


def get_constant_schedule_with_warmup(optimizer, num_warmup_steps: int, last_epoch: int = -1) -> LambdaLR:
    """From 0 up to the optimizer's rate over ``num_warmup_steps``, then constant."""
    factor = functools.partial(_constant, warmup=_steps(num_warmup_steps, "num_warmup_steps"))
    return LambdaLR(optimizer, factor, last_epoch)


def get_constant_schedule(optimizer, last_epoch: int = -1) -> LambdaLR:
    """The optimizer's rate at every step (transformers' function of that name)."""
    return LambdaLR(optimizer, functools.partial(_constant, warmup=0), last_epoch)


# transformers' get_scheduler names that minibert has: the function, and whether it takes the total.
SCHEDULES = {"linear": (get_linear_schedule_with_warmup, True), "cosine": (get_cosine_schedule_with_warmup, True),
             "constant": (get_constant_schedule, False),
             "constant_with_warmup": (get_constant_schedule_with_warmup, False)}  # fmt: skip


def get_scheduler(name, optimizer, num_warmup_steps: int | None = None, num_training_steps: int | None = None,
                  scheduler_specific_kwargs: dict | None = None) -> LambdaLR:  # fmt: skip
    """transformers' ``get_scheduler``: the schedule called ``name`` ("linear", "cosine", "constant",
    "constant_with_warmup"; transformers' ``SchedulerType`` too), as transformers builds it: "constant"
    takes neither step count, "constant_with_warmup" the warmup alone (both ignore
    ``scheduler_specific_kwargs``, as there), "linear" and "cosine" both counts and the keywords
    (``{"num_cycles": 2}``). A missing count is a ValueError; a name transformers has and minibert
    does not is a ValueError naming transformers' function."""
    name = getattr(name, "value", name)  # transformers' SchedulerType is a str Enum
    if name not in SCHEDULES:
        names = ", ".join(map(repr, SCHEDULES))
        if name in TRANSFORMERS_ONLY_SCHEDULES:
            raise ValueError(f"get_scheduler: minibert has no {name!r} schedule (it has {names}); transformers makes "
                             f"it: `from transformers import get_scheduler` (or {TRANSFORMERS_ONLY_SCHEDULES[name]}) "
                             "schedules any torch optimizer, a minibert model's too")  # fmt: skip
        raise ValueError(f"get_scheduler: {name!r} is not a schedule's name; the names are {names}")
    make, needs_total = SCHEDULES[name]
    if name == "constant":
        return make(optimizer)
    if num_warmup_steps is None:
        raise ValueError(f"get_scheduler({name!r}) requires num_warmup_steps")
    if not needs_total:
        return make(optimizer, num_warmup_steps=num_warmup_steps)
    if num_training_steps is None:
        raise ValueError(f"get_scheduler({name!r}) requires num_training_steps")
    return make(optimizer, num_warmup_steps=num_warmup_steps, num_training_steps=num_training_steps,
                **(scheduler_specific_kwargs or {}))  # fmt: skip
