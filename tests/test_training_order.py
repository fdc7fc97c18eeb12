"""The fine-tuning order (training/tasks/order.py): each epoch's shuffle is drawn once (issue r19
learner, item 1). ``rows(step)`` drew the whole epoch's permutation again for every batch, and
``write`` called it for every step of the run before step 1: O(steps × N) before training began
(58 s on a 100,000-row CSV, 3 epochs of 32; an estimated 1.8 hours on a million rows), then O(N)
more at every step. The order itself is unchanged: the same rows for the same (N, B, seed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from minibert.training.tasks import order as order_module
from minibert.training.tasks.order import TrainingOrder


def reference_rows(examples: int, batch_size: int, seed: int, steps: int) -> list[list[int]]:
    """The order as defined, written out plainly: epoch e's permutation is numpy's
    ``default_rng([seed, e]).permutation(N)``; the epochs one after another, cut into batches of B."""
    epochs = -(-steps * batch_size // examples)
    stream = np.concatenate([np.random.default_rng([seed, e]).permutation(examples) for e in range(epochs)])
    return [stream[step * batch_size : (step + 1) * batch_size].tolist() for step in range(steps)]


@pytest.fixture
def draws(monkeypatch):
    """How many generators order.py makes (one per permutation drawn)."""
    made = []
    real = np.random.default_rng

    def counting(seed):
        made.append(seed)
        return real(seed)

    forget = getattr(order_module, "epoch_permutation", None)  # the kept epochs, drawn afresh here
    forget = forget.cache_clear if forget else lambda: None
    forget()
    monkeypatch.setattr(order_module.np.random, "default_rng", counting)
    yield made
    forget()


@pytest.mark.parametrize("examples, batch_size, seed", [(5, 2, 0), (37, 8, 12345), (100, 32, 7), (64, 32, 3)])
def test_the_order_is_the_defined_one(examples, batch_size, seed, tmp_path):
    steps = int(examples / batch_size * 3.5)
    expected = reference_rows(examples, batch_size, seed, steps)
    order = TrainingOrder(examples, batch_size, seed)
    assert [order.rows(step).tolist() for step in range(steps)] == expected
    order.write(tmp_path, steps)
    lines = (tmp_path / "order.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"step": s + 1, "examples": r} for s, r in enumerate(expected)]


def test_write_draws_each_epochs_permutation_once(draws, tmp_path):
    examples, batch_size = 1000, 32
    steps = int(examples / batch_size * 3)  # 93 steps, 3 epochs (two batches straddle two)
    TrainingOrder(examples, batch_size, seed=1).write(tmp_path, steps)
    assert sorted(map(tuple, draws)) == [(1, 0), (1, 1), (1, 2)]


def test_the_training_loop_draws_each_epochs_permutation_once(draws):
    order = TrainingOrder(1000, 32, seed=1)
    for step in range(93):  # as training/run/loop.py asks: one rows(step) per step
        order.rows(step)
    assert sorted(map(tuple, draws)) == [(1, 0), (1, 1), (1, 2)]


def test_the_kept_permutation_cannot_be_changed_by_a_caller():
    order = TrainingOrder(10, 4, seed=0)
    with pytest.raises(ValueError, match="read-only"):
        order.permutation(0)[0] = 3
    rows = order.rows(0)
    rows[0] = -1  # a batch's rows are the caller's own copy
    assert order.rows(0)[0] != -1
