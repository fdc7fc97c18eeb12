"""Speed of one pre-training step: minibert's (Google's step) against transformers' BertForPreTraining
with torch.optim.AdamW, on the same shapes, side by side in one process; and minibert's --bf16.

    python scripts/bench_pretrain.py                 # BERT-mini-like: 4 layers, hidden 256, 128 tokens
    python scripts/bench_pretrain.py --layers 12 --hidden 768 --batch 8 --rounds 3   # bert-base

Each round times one step of each contender, interleaved (A B C, then C B A, ...), after a warm-up
step; the table gives tokens per second (batch × sequence length, padding included) from the median
step time and the per-round ratio. What each step does:

    transformers   BertForPreTraining(labels=..., next_sentence_label=...): logits at every position
                   (B, T, V) and its own loss, backward, clip_grad_norm_(1.0), AdamW.step()
    minibert       the step of `minibert pretrain` (training/run/optimization.py): the masked-LM head on the masked
                   positions only (as Google's gather_indexes), backward, global clipping, AdamWeightDecay
    minibert bf16  the same under torch.autocast("cpu", bfloat16), as `--bf16`

Every contender starts from the same weights: transformers' initialisation (seed 0), loaded into
minibert's models as they are (minibert's load_state_dict takes transformers' names). Beside the times,
each one's loss on the batch from those weights before any step, dropout off (a dropout mask is drawn
differently by each implementation): transformers' and minibert's fp32 agree (the same masked-LM and
next-sentence losses), and bf16 shows what it moves.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402
import torch  # noqa: E402


def random_batch(batch: int, tokens: int, predictions: int, vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(tokens // 2, tokens + 1, batch)
    mask = (np.arange(tokens)[None, :] < lengths[:, None]).astype(np.int64)  # (B, T)
    ids = rng.integers(1000, vocab, (batch, tokens)) * mask
    positions = np.stack([np.sort(rng.choice(np.arange(1, length - 1), predictions, replace=False))
                          for length in lengths])  # fmt: skip
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids),
            "masked_lm_positions": positions, "masked_lm_ids": rng.integers(1000, vocab, (batch, predictions)),
            "masked_lm_weights": np.ones((batch, predictions), np.float32),
            "next_sentence_labels": rng.integers(0, 2, batch)}  # fmt: skip


@dataclass
class Contender:
    """One contender: its training step (returns the step's loss), and its loss on the batch from the
    initial weights, taken before any step with dropout off."""

    step: Callable[[], float]
    first_loss: float


def first_loss(model: torch.nn.Module, loss: Callable[[], torch.Tensor]) -> float:
    """``loss()`` of ``model`` as it is, in eval mode (no dropout) and without gradients; the model is
    left in train mode."""
    model.eval()
    with torch.no_grad():
        value = loss().item()
    model.train()
    return value


def transformers_step(config_values: dict, batch: dict) -> tuple[Contender, dict[str, torch.Tensor]]:
    """transformers' step, and a copy of its model's initial weights, under transformers' names: minibert's
    ``load_state_dict`` renames them as ``from_pretrained`` does (loading/names.py's table, the tied decoder
    left out), so minibert_step loads them as they are."""
    import transformers

    torch.manual_seed(0)
    model = transformers.BertForPreTraining(transformers.BertConfig(**config_values)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)
    labels = np.full_like(batch["input_ids"], -100)
    np.put_along_axis(labels, batch["masked_lm_positions"], batch["masked_lm_ids"], axis=1)
    tensors = {key: torch.from_numpy(value) for key, value in batch.items()}
    labels = torch.from_numpy(labels)

    def loss() -> torch.Tensor:
        return model(input_ids=tensors["input_ids"], attention_mask=tensors["input_mask"],
                     token_type_ids=tensors["segment_ids"], labels=labels,
                     next_sentence_label=tensors["next_sentence_labels"]).loss  # fmt: skip

    def step() -> float:
        value = loss()
        value.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return value.item()

    initial = {name: tensor.clone() for name, tensor in model.state_dict().items()}  # (the steps change them)
    return Contender(step, first_loss(model, loss)), initial


def minibert_step(config_values: dict, batch: dict, bf16: bool, initial: dict[str, torch.Tensor]) -> Contender:
    """minibert's step (`minibert pretrain`'s), from the weights ``initial`` (transformers' names)."""
    from minibert.config import BertConfig
    from minibert.heads import BertForPreTraining
    from minibert.training.run.optimization import AdamWeightDecay, clip_by_global_norm, hub_named_parameters
    from minibert.training.tasks import task_named

    model = BertForPreTraining(BertConfig.from_dict(config_values)).train()
    model.load_state_dict(initial)  # strict, renamed: every weight of minibert's from transformers' initialisation
    optimizer = AdamWeightDecay(hub_named_parameters(model))
    tensors = {key: torch.from_numpy(value) for key, value in batch.items()}
    denominators = {"mlm": float(batch["masked_lm_weights"].sum()) + 1e-5,
                    "batch_size": float(len(batch["next_sentence_labels"]))}
    task = task_named("pretraining")
    parameters = list(model.parameters())

    def loss() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return task.sums(model, tensors, denominators).loss

    def step() -> float:
        value = loss()
        value.backward()
        clip_by_global_norm(parameters, 1.0)
        optimizer.step(1e-4)
        optimizer.zero_grad()
        return value.item()

    return Contender(step, first_loss(model, loss))


@dataclass
class Shapes:
    """The model and batch one training step is timed on (the defaults: BERT-mini-like)."""

    layers: int = 4
    hidden: int = 256
    tokens: int = 128
    batch: int = 16
    predictions: int = 20
    vocab: int = 30522

    def config(self) -> dict:
        return {"vocab_size": self.vocab, "hidden_size": self.hidden, "num_hidden_layers": self.layers,
                "num_attention_heads": max(1, self.hidden // 64), "intermediate_size": 4 * self.hidden,
                "max_position_embeddings": max(512, self.tokens)}  # fmt: skip

    def describe(self) -> str:
        return (f"{self.layers} layers, hidden {self.hidden}, vocab {self.vocab}, batch {self.batch} × "
                f"{self.tokens} tokens, {self.predictions} predictions each")  # fmt: skip


def time_steps(shapes: Shapes, rounds: int, bf16: bool = True) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Seconds of each contender's step in each round, interleaved (A B C, C B A, ...) after a
    warm-up step; and each one's first loss: the same initial weights (transformers', loaded into
    minibert's) and batch, before any step, dropout off."""
    config = shapes.config()
    batch = random_batch(shapes.batch, shapes.tokens, shapes.predictions, shapes.vocab)
    theirs, initial = transformers_step(config, batch)
    contenders = {"transformers + AdamW": theirs, "minibert": minibert_step(config, batch, False, initial)}
    if bf16:
        contenders["minibert --bf16"] = minibert_step(config, batch, True, initial)
    times, _ = interleave({name: contender.step for name, contender in contenders.items()}, rounds)
    return times, {name: contender.first_loss for name, contender in contenders.items()}


def interleave(contenders: dict, rounds: int) -> tuple[dict[str, list[float]], dict]:
    """Seconds of each contender (a call) in each round, in turn A B C, then C B A, ..., after one
    warm-up call each; and what each warm-up call returned."""
    first = {name: step() for name, step in contenders.items()}  # warm-up
    times: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders)
    for round_ in range(rounds):
        for name in order if round_ % 2 == 0 else reversed(order):
            started = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - started)
    return times, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = Shapes()
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name}", type=int, default=value)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    from minibert.speed.cpu import describe_machine, has_native_bf16

    shapes = Shapes(**{name: getattr(args, name) for name in asdict(defaults)})
    print(describe_machine())
    print(f"shapes: {shapes.describe()}; fp32 unless said")
    times, first_loss = time_steps(shapes, args.rounds, bf16=has_native_bf16())
    tokens = shapes.batch * shapes.tokens
    reference = times["transformers + AdamW"]
    print("| step | tokens/s (median) | × transformers (median of rounds, min–max) | first loss (same weights) |")
    print("|---|---:|---:|---:|")
    for name, seconds in times.items():
        ratios = [r / s for r, s in zip(reference, seconds)]
        print(f"| {name} | {tokens / statistics.median(seconds):,.0f} | {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}–{max(ratios):.2f}) | {first_loss[name]:.4f} |")  # fmt: skip


if __name__ == "__main__":
    main()
