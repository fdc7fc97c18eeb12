"""Google's training step, written out: the losses, the learning rate, global clipping, AdamWeightDecay.

One step serves pre-training (``run_pretraining.py``) and fine-tuning (``run_classifier.py``): only
the loss differs, and ``update`` (sum over processes, clip, AdamWeightDecay) is the same call.
Everything here is what google-research/bert (bert-tensorflow 1.0.4) computes, in PyTorch:

    loss = MLM + NSP
      MLM = Σ w·CE(masked piece) / (Σ w + 1e-5)       w = masked_lm_weights: 1.0 real, 0.0 padding
      NSP = mean CE(next-sentence label)               over the batch
    gradients clipped by their *global* norm (one norm over every tensor, not one per tensor)
    AdamWeightDecay (no bias correction):
      m ← 0.9 m + 0.1 g       v ← 0.999 v + 0.001 g²
      update = m / (√v + 1e-6) + 0.01 · param          (no decay for LayerNorm and bias tensors)
      param ← param − rate · update
    fine-tuning: loss = mean CE(label) over the batch, from the pooled [CLS] vector after dropout
      (regression: mean squared error; several labels per text: mean sigmoid cross-entropy;
      tagging: mean CE over the labelled pieces of the batch;
      SQuAD: (mean CE(start position) + mean CE(end position)) / 2, softmax over all T positions)
    rate = peak · s / warmup while s < warmup, else peak · (1 − s / steps)
      s = updates done *before* this one (the first update of a warmup uses rate 0)

A batch can be split (over processes under torchrun, or over ``--accumulate`` micro-batches).
Google's denominators are the *global* batch's: Σ w over every instance of the batch and the
batch's size. So each piece computes sums, divides them by the global denominators, and the
gradients of the pieces are *added*: the result is the gradient of the whole batch's loss.
(Averaging per-piece losses, each divided by its own Σ w, gives a different gradient whenever the
pieces hold different numbers of masked positions.)

Shape legend: B = instances in the piece, T = tokens, P = masked positions per instance
(max_predictions_per_seq), H = hidden size, V = vocabulary size.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

MLM_EPSILON = 1e-5  # Google's: Σ w + 1e-5, so a batch without masked positions has loss 0, not NaN
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


@dataclass
class BatchSums:
    """What a piece of a batch adds up, so that pieces combine into the whole batch's figures."""

    loss: torch.Tensor  # this piece's share of the global loss (already divided by the global denominators)
    mlm_loss: float  # Σ w·CE, divided by the global Σ w + 1e-5
    nsp_loss: float  # Σ CE, divided by the global batch size
    mlm_correct: float  # Σ w · [argmax = label]
    nsp_correct: float  # Σ [argmax = label]


def pretraining_sums(model, batch: dict[str, torch.Tensor], mlm_denominator: float, batch_size: int) -> BatchSums:
    """Forward ``batch`` (a piece of a global batch) through a minibert ``BertForPreTraining`` and
    return Google's losses for it, divided by the global batch's ``mlm_denominator`` (Σ w + 1e-5)
    and ``batch_size``.

    Only the masked positions go through the masked-LM head (as Google's ``gather_indexes``): a
    (B, P, V) score tensor instead of (B, T, V). The encoder runs its plain path: the fast path's
    packing (fast_path.py) gathers and scatters tokens, and in the backward pass those cost more
    than the padding they skip."""
    out = model.bert(batch["input_ids"], batch["input_mask"], batch["segment_ids"], use_fast_path=False)
    hidden = out.last_hidden_state  # (B, T, H)
    positions = batch["masked_lm_positions"]  # (B, P)
    gathered = hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))  # (B, P, H)
    mlm_logits = model.mlm_head(gathered, model.bert.embeddings.word_embeddings.weight).float()  # (B, P, V)
    nsp_logits = model.nsp_head(out.pooler_output).float()  # (B, 2)

    labels, weights = batch["masked_lm_ids"], batch["masked_lm_weights"]  # (B, P), (B, P)
    per_prediction = F.cross_entropy(mlm_logits.flatten(0, 1), labels.flatten(), reduction="none")  # (B·P,)
    mlm = (weights.flatten() * per_prediction).sum() / mlm_denominator
    nsp = F.cross_entropy(nsp_logits, batch["next_sentence_labels"], reduction="sum") / batch_size
    with torch.no_grad():
        mlm_correct = (weights * (mlm_logits.argmax(-1) == labels)).sum()
        nsp_correct = (nsp_logits.argmax(-1) == batch["next_sentence_labels"]).sum()
    return BatchSums(mlm + nsp, mlm.detach().item(), nsp.detach().item(), mlm_correct.item(), nsp_correct.item())


def classification_sums(model, batch: dict[str, torch.Tensor], batch_size: int, problem: str
                        ) -> tuple[torch.Tensor, float, float]:  # fmt: skip
    """Fine-tuning's loss on a piece of a global batch of ``batch_size`` (``run_classifier.create_model``):
    the classifier on the pooled output after dropout; the per-example losses summed and divided by
    the global batch size (so the pieces' gradients add up to the batch's mean). ``problem``:
    "single_label_classification" (CE), "regression" (squared error, one output) or
    "multi_label_classification" (sigmoid CE per label, averaged over the labels too).
    Returns (loss, loss as a number, correct predictions: right argmax, or every label right).

    The encoder computes the real tokens only (``skip_padding``: fast_path.py packs them, as the
    embedding path does): the classifier reads [CLS] alone, and a [PAD] row changes no real token
    (its key is masked out), so the loss and every gradient are those of the padded batch — with
    about half the work on typical sentence-pair batches (tests/test_training_finetune_padding.py)."""
    out = model.bert(batch["input_ids"], batch["input_mask"], batch["segment_ids"], use_fast_path=True,
                     skip_padding=True)  # fmt: skip
    logits = model.classifier(model.dropout(out.pooler_output)).float()  # (B, K)
    labels = batch["label_ids"]  # (B,) ids, (B,) scores, or (B, K) 0/1
    if problem == "regression":
        loss = F.mse_loss(logits.squeeze(-1), labels.float(), reduction="sum") / batch_size
        correct = 0.0
    elif problem == "multi_label_classification":
        per_label = F.binary_cross_entropy_with_logits(logits, labels.float(), reduction="none")  # (B, K)
        loss = per_label.mean(-1).sum() / batch_size
        correct = float(((logits > 0) == (labels > 0.5)).all(-1).sum())
    else:
        loss = F.cross_entropy(logits, labels, reduction="sum") / batch_size
        correct = float((logits.argmax(-1) == labels).sum())
    return loss, loss.detach().item(), correct


def token_classification_sums(model, batch: dict[str, torch.Tensor], labelled: int
                              ) -> tuple[torch.Tensor, float, float]:  # fmt: skip
    """Tagging's loss on a piece of a global batch: cross-entropy at every labelled piece (label
    -100: not labelled), summed and divided by ``labelled``, the global batch's count of labelled
    pieces — the mean over them, as transformers' BertForTokenClassification computes for one batch.
    Returns (loss, loss as a number, correct labelled pieces). Real tokens only, as ``classification_sums``:
    a [PAD] piece is never labelled."""
    out = model.bert(batch["input_ids"], batch["input_mask"], batch["segment_ids"], use_fast_path=True,
                     skip_padding=True)  # fmt: skip
    logits = model.classifier(model.dropout(out.last_hidden_state)).float()  # (B, T, K)
    labels = batch["label_ids"]  # (B, T), -100 where no label counts
    loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum") / labelled
    correct = float(((logits.argmax(-1) == labels) & (labels != -100)).sum())
    return loss, loss.detach().item(), correct


def answer_sums(model, batch: dict[str, torch.Tensor], batch_size: int) -> tuple[torch.Tensor, float, float]:
    """SQuAD's loss on a piece of a global batch (``run_squad.create_model``/``model_fn``): a start
    and an end score per position (``qa_outputs``, no dropout), cross-entropy of each against its
    position over all T positions, (start + end) / 2, summed and divided by the global batch size.
    ``label_ids`` (B, 2): start, end. Returns (loss, loss as a number, windows with both ends right)."""
    out = model.bert(batch["input_ids"], batch["input_mask"], batch["segment_ids"], use_fast_path=False)
    logits = model.qa_outputs(out.last_hidden_state).float()  # (B, T, 2)
    start_logits, end_logits = logits.unbind(-1)  # (B, T) each
    starts, ends = batch["label_ids"].unbind(-1)  # (B,) each
    loss = (F.cross_entropy(start_logits, starts, reduction="sum")
            + F.cross_entropy(end_logits, ends, reduction="sum")) / (2 * batch_size)  # fmt: skip
    correct = float(((start_logits.argmax(-1) == starts) & (end_logits.argmax(-1) == ends)).sum())
    return loss, loss.detach().item(), correct


def update(parameters: list[torch.nn.Parameter], optimizer: AdamWeightDecay, rate: float, world,
           max_grad_norm: float, before_step: Callable[[float], None] | None = None) -> float:  # fmt: skip
    """The update after every piece's ``backward()``: gradients summed over the processes (``world``:
    distributed.py), clipped by their global norm, AdamWeightDecay at ``rate``, gradients cleared.
    ``before_step(norm)``, if given, sees the norm before the weights change (and may stop the run).
    Returns the gradient norm before clipping."""
    world.sum_gradients(parameters)
    gradient_norm = clip_by_global_norm(parameters, max_grad_norm)
    if before_step is not None:
        before_step(gradient_norm)
    optimizer.step(rate)
    optimizer.zero_grad()
    return gradient_norm


def clip_by_global_norm(parameters: Iterable[torch.nn.Parameter], max_norm: float) -> float:
    """Scale every gradient by ``max_norm / max(norm, max_norm)``, where ``norm`` is the norm of all
    gradients together (TensorFlow's ``clip_by_global_norm``). Returns that norm (before clipping)."""
    gradients = [p.grad for p in parameters if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(gradients)))  # the norm of the tensors' norms
    scale = max_norm / max(float(norm), max_norm)
    if scale != 1.0:
        torch._foreach_mul_(gradients, scale)
    return float(norm)


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
    from ..weights import HEAD_PREFIXES, minibert_to_checkpoint

    named = []
    for name, parameter in model.named_parameters():
        hub = minibert_to_checkpoint(name.removeprefix("bert."))
        named.append((hub if name.startswith(HEAD_PREFIXES) else "bert." + hub, parameter))
    return named
