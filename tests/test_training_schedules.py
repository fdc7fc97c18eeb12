"""The tutorials' learning-rate schedules (training/schedules.py) against transformers' own
(``transformers.optimization``): the rate of every step, from the same optimizer, equal bit for bit
(the same float formula), for warmups of 0, 1 and several steps, past the last step, and after a
resume from the scheduler's state; and ``from minibert import AdamW`` names torch's."""

from __future__ import annotations

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


@pytest.mark.parametrize("bad", [-1, 2.5, True, "10", None])
def test_a_step_count_that_is_not_one_is_refused(bad):
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=1e-3)
    with pytest.raises(ValueError, match="num_warmup_steps must be a whole number of steps"):
        minibert.get_linear_schedule_with_warmup(optimizer, bad, 10)
    with pytest.raises(ValueError, match="num_training_steps must be a whole number of steps"):
        minibert.get_cosine_schedule_with_warmup(optimizer, 0, bad)


def test_adamw_names_torchs():
    with pytest.raises(ImportError, match=r"transformers removed its AdamW .* torch\.optim\.AdamW\(model\.parameters"):
        from minibert import AdamW  # noqa: F401
    assert not hasattr(transformers, "AdamW")  # (transformers removed it: the message is true)
