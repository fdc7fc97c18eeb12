"""The tutorials' learning-rate schedules (training/schedules.py) against transformers' own
(``transformers.optimization``): the rate of every step, from the same optimizer, equal bit for bit
(the same float formula), for warmups of 0, 1 and several steps, past the last step, and after a
resume from the scheduler's state, with numpy ints and float step counts; ``get_scheduler`` by name, as
transformers takes its arguments; and ``from minibert import AdamW`` names torch's and the defaults that differ."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch

import minibert

transformers = pytest.importorskip("transformers")

CASES = [(0, 10), (1, 10), (3, 10), (4, 4), (7, 5), (2, 1)]  # (warmup, total): none, one, some, all, more than all
NAMES = ["get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup", "get_constant_schedule_with_warmup"]


def _rates(make, steps: int) -> list[float]:
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=3e-5)
    scheduler = make(optimizer)
    rates = []
    for _ in range(steps):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    return rates


def _arguments(name: str, warmup: int, total: int) -> dict:
    if name == "get_constant_schedule_with_warmup":
        return {"num_warmup_steps": warmup}
    return {"num_warmup_steps": warmup, "num_training_steps": total}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("warmup", "total"), CASES)
def test_every_step_as_transformers(name, warmup, total):
    ours, theirs = getattr(minibert, name), getattr(transformers, name)
    arguments = _arguments(name, warmup, total)
    want = _rates(lambda optimizer: theirs(optimizer, **arguments), total + 3)
    got = _rates(lambda optimizer: ours(optimizer, **arguments), total + 3)
    assert got == want, f"{name} warmup={warmup} total={total}:\n  transformers {want}\n  minibert     {got}"
    assert len(set(want)) > 1 or name == "get_constant_schedule_with_warmup" and warmup == 0


@pytest.mark.parametrize("cycles", [0.5, 1.0, 2.25])
def test_cosine_cycles_as_transformers(cycles):
    want = _rates(lambda o: transformers.get_cosine_schedule_with_warmup(o, 2, 12, num_cycles=cycles), 14)
    got = _rates(lambda o: minibert.get_cosine_schedule_with_warmup(o, 2, 12, num_cycles=cycles), 14)
    assert got == want


def test_a_resumed_scheduler_goes_on_where_it_stopped():
    """The tutorials save ``scheduler.state_dict()`` beside the optimizer's; loaded into a new
    scheduler, the rates go on as if the loop had not stopped."""
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=1e-3)
    scheduler = minibert.get_linear_schedule_with_warmup(optimizer, 2, 8)
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    state = scheduler.state_dict()
    again = minibert.get_linear_schedule_with_warmup(optimizer, 2, 8)
    again.load_state_dict(state)
    assert again.get_last_lr() == scheduler.get_last_lr() == [1e-3 * 5 / 6]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("warmup", "total"), [(np.int64(2), np.int64(10)), (np.int32(3), 10), (0.1 * 128, 128),
                                               (2.5, 7.5), (0.5, 4)])  # fmt: skip
def test_numpy_ints_and_float_step_counts_as_transformers(name, warmup, total):
    """transformers takes numpy's ints and floats (a warmup of ``0.1 * num_training_steps``) and
    computes its formulas with them: the same rates, step by step."""
    ours, theirs = getattr(minibert, name), getattr(transformers, name)
    arguments = _arguments(name, warmup, total)
    want = _rates(lambda optimizer: theirs(optimizer, **arguments), int(total) + 3)
    got = _rates(lambda optimizer: ours(optimizer, **arguments), int(total) + 3)
    assert got == want, f"{name} warmup={warmup!r} total={total!r}:\n  transformers {want}\n  minibert     {got}"


@pytest.mark.parametrize(("bad", "error", "message"), [
    (-1, ValueError, "0 or more, and finite, got -1"), (float("nan"), ValueError, "0 or more, and finite, got nan"),
    (math.inf, ValueError, "0 or more, and finite, got inf"), (np.int64(-3), ValueError, "got -3"),
    (True, TypeError, r"a number of steps \(an int, or a float\), got True"), ("10", TypeError, "got '10'"),
    (None, TypeError, "got None"),
])  # fmt: skip
def test_a_step_count_that_is_not_one_is_refused(bad, error, message):
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=1e-3)
    with pytest.raises(error, match=f"num_warmup_steps must be .*{message}"):
        minibert.get_linear_schedule_with_warmup(optimizer, bad, 10)
    with pytest.raises(error, match=f"num_training_steps must be .*{message}"):
        minibert.get_cosine_schedule_with_warmup(optimizer, 0, bad)


def test_adamw_names_torchs_and_the_defaults_that_differ():
    """The message's facts: transformers removed AdamW; torch's defaults are the ones it names, and
    not transformers 4's (``AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0,
    correct_bias=True)``), so the call it gives states weight_decay=0.0."""
    with pytest.raises(ImportError) as caught:
        from minibert import AdamW  # noqa: F401
    message = str(caught.value)
    assert "transformers removed its AdamW" in message and "correct_bias=False has no equivalent" in message
    assert "transformers' AdamW: weight_decay=0.0, eps=1e-6; torch's: 0.01 and 1e-8" in message
    assert "torch.optim.AdamW(model.parameters(), lr=2e-5, eps=1e-8, weight_decay=0.0)" in message
    assert "with the same arguments" not in message
    defaults = inspect.signature(torch.optim.AdamW).parameters
    assert (defaults["weight_decay"].default, defaults["eps"].default) == (0.01, 1e-8)
    assert "correct_bias" not in defaults
    assert not hasattr(transformers, "AdamW")  # (transformers removed it: the message is true)


SCHEDULER_CALLS = [  # (name, get_scheduler's keywords): the counts as each schedule takes them, and extras
    ("linear", {"num_warmup_steps": 2, "num_training_steps": 9}),
    ("cosine", {"num_warmup_steps": 1, "num_training_steps": 9}),
    ("cosine", {"num_warmup_steps": 0, "num_training_steps": 9, "scheduler_specific_kwargs": {"num_cycles": 2}}),
    ("constant", {}),
    ("constant", {"num_warmup_steps": 3, "num_training_steps": 9}),  # ignored, as transformers ignores them
    ("constant_with_warmup", {"num_warmup_steps": 3}),
    ("constant_with_warmup", {"num_warmup_steps": 3, "scheduler_specific_kwargs": {"num_cycles": 2}}),  # ignored
    ("linear", {"num_warmup_steps": 0.1 * 9, "num_training_steps": 9}),
]


@pytest.mark.parametrize(("name", "keywords"), SCHEDULER_CALLS)
def test_get_scheduler_as_transformers(name, keywords):
    """The HF course's ``get_scheduler("linear", optimizer=..., num_warmup_steps=0, num_training_steps=...)``
    (issue r19 learner, item 2): the same rates, by name or by transformers' SchedulerType."""
    want = _rates(lambda optimizer: transformers.get_scheduler(name, optimizer=optimizer, **keywords), 12)
    for spelt in (name, transformers.SchedulerType(name)):
        got = _rates(lambda optimizer, spelt=spelt: minibert.get_scheduler(spelt, optimizer=optimizer, **keywords), 12)
        assert got == want, f"{spelt!r} {keywords}:\n  transformers {want}\n  minibert     {got}"


def test_get_constant_schedule_as_transformers():
    assert _rates(minibert.get_constant_schedule, 5) == _rates(transformers.get_constant_schedule, 5)


@pytest.mark.parametrize(("name", "keywords", "error"), [
    ("linear", {"num_training_steps": 9}, ValueError), ("cosine", {"num_warmup_steps": 1}, ValueError),
    ("constant_with_warmup", {}, ValueError), ("no_such_schedule", {}, ValueError),
    ("linear", {"num_warmup_steps": 1, "num_training_steps": 9, "scheduler_specific_kwargs": {"power": 2}}, TypeError),
])  # fmt: skip
def test_get_scheduler_refuses_what_transformers_refuses(name, keywords, error):
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=1e-3)
    with pytest.raises(error):
        transformers.get_scheduler(name, optimizer, **keywords)
    with pytest.raises(error):
        minibert.get_scheduler(name, optimizer, **keywords)


def test_transformers_other_schedules_are_named_with_the_function_that_makes_them():
    """Every name of transformers' SchedulerType is minibert's or refused naming transformers' function."""
    from transformers.optimization import TYPE_TO_SCHEDULER_FUNCTION

    from minibert.training.schedules import SCHEDULES, TRANSFORMERS_ONLY_SCHEDULES

    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=1e-3)
    for kind, function in TYPE_TO_SCHEDULER_FUNCTION.items():
        if kind.value in SCHEDULES:
            assert SCHEDULES[kind.value][0].__name__ == function.__name__
            continue
        assert TRANSFORMERS_ONLY_SCHEDULES[kind.value] == function.__name__
        with pytest.raises(ValueError, match=f"minibert has no '{kind.value}' schedule .*{function.__name__}"):
            minibert.get_scheduler(kind.value, optimizer, 1, 9)
        with pytest.raises(ImportError, match=f"keep `from transformers import {function.__name__}`"):
            exec(f"from minibert import {function.__name__}", {})  # the function itself, imported: the same advice
