"""A training step queues its forward and backward passes without waiting for the device.

On a GPU the CPU only queues kernels; reading a number the GPU computed (``.item()``, ``float()``,
``bool()``, ``nonzero``, a boolean index) makes the CPU wait until every queued kernel has run, and
the next kernels start only once the CPU queues them again. A step of every task must read nothing
the device computed between a piece's copy to it and the last piece's backward; it reads its
figures once, after that (and its gradient norm, which the guard and clipping need, in the update).

There is no GPU here, so the test follows what a GPU would hold: ``OnTheDevice`` makes every
``.to(device)`` a real copy (on the CPU, ``.to("cpu")`` hands back the very tensor it was given)
and marks it, with the model's weights, as the device's; whatever is computed from a marked tensor
is marked too; reading a marked tensor's value is a wait. (It failed before the model's inputs
stayed on the CPU and the figures were read at the end: the mask's layout and each piece's loss and
counts were read between the forward and the backward, 26 waits a step on the tiny classifier's.)
"""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from minibert.training import FinetuneOptions, PretrainOptions, finetune, pretrain
from minibert.training.run import loop
from minibert.training.tasks import task as task_module
from random_instances import random_instances, write_instances
from squad_files import write_squad
from tiny_hub import TINY

# Reading a tensor's value on the host: on a GPU, each one waits for the kernels queued before it
READS = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "__complex__", "nonzero", "numpy",
         "__array__", "__repr__", "__format__", "unique", "masked_select", "argwhere", "repeat_interleave"}  # fmt: skip
INDEXING = {"__getitem__", "__setitem__", "index_put_", "index_put"}  # a boolean mask as an index: a read too


class OnTheDevice(TorchFunctionMode):
    """Marks what a GPU would hold and records each read of it (``reads``: the op and the
    minibert source line that asked), and the backward calls among them (``"backward"``)."""

    def __init__(self, weights):
        super().__init__()
        self.marked: dict[int, torch.Tensor] = {}  # id → tensor (held: an id is not reused meanwhile)
        self.events: list[tuple[str, str]] = []
        self._mark(list(weights))

    def _mark(self, values) -> None:
        for value in tree_flatten(values)[0]:
            if isinstance(value, torch.Tensor):
                self.marked[id(value)] = value

    def _is_marked(self, value) -> bool:
        return isinstance(value, torch.Tensor) and id(value) in self.marked

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        inputs = tree_flatten((args, kwargs))[0]
        if name == "to" and _names_a_device(args[1:], kwargs) and not self._is_marked(args[0]):
            copied = func(*args, **kwargs)
            copied = copied.clone() if copied is args[0] else copied  # (a GPU's copy is another tensor)
            self._mark(copied)
            return copied
        if name == "backward":
            self.events.append(("backward", _asked_from()))
        elif name in READS and self._is_marked(args[0]):
            self.events.append((name, _asked_from()))
        elif name in INDEXING and any(self._is_marked(t) and t.dtype == torch.bool for t in inputs[1:]):
            self.events.append((f"{name} with a boolean mask", _asked_from()))
        result = func(*args, **kwargs)
        if any(self._is_marked(value) for value in inputs):
            self._mark(result)
        return result


def _names_a_device(args, kwargs) -> bool:
    return "device" in kwargs or any(isinstance(a, (torch.device, str)) for a in args)


def _asked_from() -> str:
    """The innermost minibert source line in the stack (file:line)."""
    frames = [f for f in traceback.extract_stack()[:-2] if "/minibert/" in f.filename]
    return f"{frames[-1].filename.split('/minibert/')[-1]}:{frames[-1].lineno}" if frames else "?"


def waits_of_each_step(monkeypatch, train) -> list[list[tuple[str, str]]]:
    """Run ``train()`` with every step's forward_and_backward followed; returns each step's events."""
    steps = []
    followed = loop.forward_and_backward

    def following(run, rows, denominators):
        mode = OnTheDevice(run.model.parameters())
        with mode:
            sums = followed(run, rows, denominators)
        steps.append(mode.events)
        return sums

    monkeypatch.setattr(loop, "forward_and_backward", following)
    train()
    assert steps, "no step was followed"
    return steps


def write_train(directory: Path, task: str) -> Path:
    texts = ["the machine drank water", "a bank of the river", "i love paris and its river banks", "money",
             "he was thirsty", "she is an engineer", "they drank all the water in paris", "the river bank had money"]
    if task == "tag":
        path = directory / "train.txt"
        path.write_text("".join("".join(f"{w} {'B-X' if w in ('paris', 'river') else 'O'}\n" for w in t.split()) + "\n"
                                for t in texts))  # fmt: skip
        return path
    if task == "answer":
        return write_squad(directory / "train.json", paragraphs=2, fortunes_per_context=2, questions=2,
                           version_2=False, training=True)  # fmt: skip
    labels = {"regress": ["0.5", "3", "1.5", "4", "2", "2.5", "0", "5"],
              "multilabel": ["a", "a|b", "b", "", "a", "b", "a|b", "a"]}.get(task, ["x", "y"] * 4)  # fmt: skip
    path = directory / "train.csv"
    path.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in zip(texts, labels)), encoding="utf-8")
    return path


@pytest.mark.parametrize("task, accumulate", [("classify", 1), ("regress", 1), ("multilabel", 1), ("tag", 1),
                                              ("answer", 1), ("pretraining", 1), ("pretraining", 2)])  # fmt: skip
def test_a_step_reads_what_the_device_computed_only_after_every_backward(tmp_path, monkeypatch, task, accumulate):
    output = str(tmp_path / "run")
    if task == "pretraining":
        data = write_instances(tmp_path / "data.tfrecord", random_instances(8, vocab_size=111, seq_len=16, seed=5))
        options = PretrainOptions(data=[str(data)], init=str(TINY), output=output, steps=2, batch_size=4,
                                  accumulate=accumulate, progress=False)  # fmt: skip
        steps = waits_of_each_step(monkeypatch, lambda: pretrain(options))
    else:
        extra = {"max_seq_length": 48, "doc_stride": 16, "max_query_length": 12} if task == "answer" else \
            {"max_seq_length": 16}  # fmt: skip
        options = FinetuneOptions(model=str(TINY), train=str(write_train(tmp_path, task)), output=output, task=task,
                                  epochs=1, batch_size=4, progress=False, **extra)  # (fine-tuning: 1 piece) fmt: skip
        steps = waits_of_each_step(monkeypatch, lambda: finetune(options))
    for events in steps:
        backwards = [index for index, (name, _) in enumerate(events) if name == "backward"]
        assert len(backwards) == accumulate, events
        reads = [event for event in events if event[0] != "backward"]
        early = events[: backwards[-1]]
        assert [e for e in early if e[0] != "backward"] == [], f"waits for the device before the last backward: {early}"
        assert [name for name, _ in reads] == ["tolist"], f"more than the figures' one read: {reads}"


@pytest.mark.parametrize("spoiled", ["the loss read in the task", "the model's inputs copied to the device"])
def test_the_follower_sees_a_wait_where_there_is_one(monkeypatch, tmp_path, spoiled):
    """The check can fail: a task that reads its loss as a number before the backward (as every
    task did), or a model given its inputs' device copies (the mask's layout is then read there),
    is caught, with the line that read it."""
    from minibert.training.tasks.classify import Classify

    if spoiled == "the loss read in the task":
        summed = Classify.sums

        def reading(self, model, piece, denominators):
            sums = summed(self, model, piece, denominators)
            float(sums.figures["loss"])
            return sums

        monkeypatch.setattr(Classify, "sums", reading)
    else:
        monkeypatch.setattr(task_module, "MODEL_INPUTS", frozenset())
    options = FinetuneOptions(model=str(TINY), train=str(write_train(tmp_path, "classify")), output=str(tmp_path / "r"),
                              epochs=1, batch_size=4, max_seq_length=16, progress=False)  # fmt: skip
    steps = waits_of_each_step(monkeypatch, lambda: finetune(options))
    for events in steps:
        early = events[: [name for name, _ in events].index("backward")]
        if spoiled == "the loss read in the task":  # (read in this file: the line is the loop's call of the task)
            assert early == [("__float__", early[0][1])], events
        else:  # the model checks its inputs (inputs.py) and lays out the mask (speed/) on the device
            assert {line.split("/")[0].split(".")[0] for _, line in early} >= {"inputs", "speed"}, events
