"""Google's optimization, written out (``optimization.py`` of google-research/bert): the learning-rate
schedule, clipping by the global norm, AdamWeightDecay — one update for pre-training and for every
fine-tuning task (each task's loss is its own: tasks/).

    gradients clipped by their *global* norm (one norm over every tensor, not one per tensor)
    AdamWeightDecay (no bias correction):
      m ← 0.9 m + 0.1 g       v ← 0.999 v + 0.001 g²
      update = m / (√v + 1e-6) + 0.01 · param          (no decay for LayerNorm and bias tensors)
      param ← param − rate · update
    rate = peak · s / warmup while s < warmup, else peak · (1 − s / steps)
      s = updates done *before* this one (the first update of a warmup uses rate 0)

Everything here is what google-research/bert (bert-tensorflow 1.0.4) computes, in PyTorch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

NO_DECAY = re.compile("LayerNorm|layer_norm|bias")  # Google's exclude_from_weight_decay, on the hub's names


@dataclass(frozen=True)
class Schedule:
    """Google's learning rate: linear warmup from 0 to ``peak`` over ``warmup`` updates, then
    linear decay to 0 at ``steps`` (``optimization.create_optimizer``).

    >>> schedule = Schedule(peak=1e-4, warmup=2, steps=4)
    >>> [schedule.rate(done) for done in range(4)]   # the rate of update 1, 2, 3, 4
    [0.0, 5e-05, 5e-05, 2.5e-05]
    """

    peak: float  # the rate at the end of warmup (--learning-rate)
    warmup: int  # updates that warm up (--warmup-steps); 0 for none
    steps: int  # the update at which the rate reaches 0 (--steps)

    def rate(self, done: int) -> float:
        """The rate of the update that follows ``done`` updates (TF's global_step before it is incremented)."""
        if done < self.warmup:
            return self.peak * done / self.warmup
        return self.peak * (1.0 - min(done, self.steps) / self.steps)

    def never_peaks(self) -> str | None:
        """A warmup longer than the run (Google's rule allows it): the rate rises for the whole run,
        never reaching ``peak`` nor decaying; said as a warning (None: the rate peaks, then decays).

        >>> print(Schedule(peak=1e-4, warmup=10, steps=3).never_peaks())  # doctest: +ELLIPSIS
        --warmup-steps 10 is more than --steps 3: the rate rises for the whole run (to 2e-05 at the last update), ...
        >>> Schedule(peak=1e-4, warmup=3, steps=3).never_peaks() is None  # Google's warmup_proportion 1.0
        True
        """
        if self.warmup <= self.steps:
            return None
        return (f"--warmup-steps {self.warmup} is more than --steps {self.steps}: the rate rises for the whole run "
                f"(to {self.rate(self.steps - 1):g} at the last update), never reaching --learning-rate "
                f"{self.peak:g} nor decaying to 0 (Google's rule allows it)")  # fmt: skip


def update(parameters: list[torch.nn.Parameter], optimizer: AdamWeightDecay, rate: float, world,
           max_grad_norm: float, before_step: Callable[[float], None] | None = None,
           scaler=None) -> tuple[float, bool]:  # fmt: skip
    """The update after every piece's ``backward()``: gradients summed over the processes (``world``:
    distributed.py), clipped by their global norm, AdamWeightDecay at ``rate``, gradients cleared.
    ``before_step(norm)``, if given, sees the norm before the weights change (and may stop the run).
    ``scaler`` (fp16's LossScaler, precision.py): the gradients are unscaled first, and a step whose
    gradients overflowed is skipped. Returns the gradient norm before clipping, and whether the
    weights were updated."""
    world.sum_gradients(parameters)
    if scaler is not None:
        scaler.unscale(parameters)
    gradient_norm = global_norm(parameters)
    if scaler is not None and not scaler.update(gradient_norm):
        optimizer.zero_grad()  # an fp16 overflow: this step is skipped, with a smaller scale next time
        return gradient_norm, False
    clip_by_global_norm(parameters, max_grad_norm, gradient_norm)
    if before_step is not None:
        before_step(gradient_norm)
    optimizer.step(rate)
    optimizer.zero_grad()
    return gradient_norm, True


def global_norm(parameters: Iterable[torch.nn.Parameter]) -> float:
    """The norm of all gradients together: the norm of the tensors' norms."""
    gradients = [p.grad for p in parameters if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(gradients))))


def clip_by_global_norm(parameters: Iterable[torch.nn.Parameter], max_norm: float, norm: float | None = None) -> float:
    """Scale every gradient by ``max_norm / max(norm, max_norm)``, where ``norm`` is the norm of all
    gradients together (TensorFlow's ``clip_by_global_norm``; given when already known). Returns
    that norm (before clipping)."""
    gradients = [p.grad for p in parameters if p.grad is not None]
    norm = global_norm(parameters) if norm is None else norm
    scale = max_norm / max(norm, max_norm)
    if scale != 1.0:
        torch._foreach_mul_(gradients, scale)
    return norm


class AdamWeightDecay:
    """Google's ``AdamWeightDecayOptimizer``: Adam without bias correction, with weight decay added
    to the update (not to the gradient), and no decay for LayerNorm and bias tensors.

    ``named_parameters``: (hub name, parameter) pairs; the hub's names (``bert.embeddings.LayerNorm.weight``,
    ``cls.predictions.bias``) are what Google's exclusion patterns match. ``moments[name]`` = (m, v),
    created at the first update. The rate is given to each ``step(rate)`` (the schedule: ``Schedule``).
    (A plain class, not a ``torch.optim.Optimizer``: the update reads as the formula, and nothing
    else is needed.)
    """

    def __init__(self, named_parameters, weight_decay: float = 0.01, betas=(0.9, 0.999), eps: float = 1e-6):
        self.parameters = list(named_parameters)
        self.decays = {name: weight_decay if not NO_DECAY.search(name) else 0.0 for name, _ in self.parameters}
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.moments: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    CHUNK = 1 << 23  # elements updated per batch of tensors: bounds the two temporaries (2 × 32 MB in fp32)

    @torch.no_grad()
    def step(self, rate: float) -> None:
        """One update of every parameter that has a gradient, at ``rate``."""
        live = [(name, p) for name, p in self.parameters if p.grad is not None]
        for name, p in live:
            if name not in self.moments:
                self.moments[name] = (torch.zeros_like(p), torch.zeros_like(p))
        chunk, size = [], 0
        for name, p in live:  # a batch of tensors at a time, so the temporaries stay small
            chunk.append((name, p))
            size += p.numel()
            if size >= self.CHUNK:
                self._update(chunk, rate)
                chunk, size = [], 0
        if chunk:
            self._update(chunk, rate)

    def _update(self, named: list[tuple[str, torch.Tensor]], rate: float) -> None:
        """The formula above for these tensors. Each line runs over all of them at once (``torch._foreach_*``:
        one call instead of one per tensor); on a CPU it runs the very same per-tensor operation, so the
        numbers are those of the loop written out (tests/test_training_pretrain_step.py checks, bit for bit)."""
        parameters = [p for _, p in named]
        gradients = [p.grad for p in parameters]
        m = [self.moments[name][0] for name, _ in named]
        v = [self.moments[name][1] for name, _ in named]
        torch._foreach_mul_(m, self.beta1)
        torch._foreach_add_(m, gradients, alpha=1.0 - self.beta1)  # m ← β1·m + (1 − β1)·g
        torch._foreach_mul_(v, self.beta2)
        torch._foreach_addcmul_(v, gradients, gradients, value=1.0 - self.beta2)  # v ← β2·v + (1 − β2)·g²
        denominators = torch._foreach_sqrt(v)
        torch._foreach_add_(denominators, self.eps)  # √v + ε
        updates = torch._foreach_div(m, denominators)  # m / (√v + ε)
        del denominators
        for decay in {self.decays[name] for name, _ in named} - {0.0}:  # + decay · param
            chosen = [i for i, (name, _) in enumerate(named) if self.decays[name] == decay]
            torch._foreach_add_([updates[i] for i in chosen], [parameters[i] for i in chosen], alpha=decay)
        torch._foreach_sub_(parameters, updates, alpha=rate)  # param ← param − rate · update

    def zero_grad(self) -> None:
        for _, p in self.parameters:
            p.grad = None


def hub_named_parameters(model) -> list[tuple[str, torch.nn.Parameter]]:
    """A minibert model's parameters (BertForPreTraining, BertForSequenceClassification, ...) under
    the hub's names (as saved), which Google's weight-decay exclusion matches: ``bert.layers.0.attention_norm.weight`` →
    ``bert.encoder.layer.0.attention.output.LayerNorm.weight``."""
    from ...loading.names import HEAD_PREFIXES, minibert_to_checkpoint

    named = []
    for name, parameter in model.named_parameters():
        hub = minibert_to_checkpoint(name.removeprefix("bert."))
        named.append((hub if name.startswith(HEAD_PREFIXES) else "bert." + hub, parameter))
    return named
