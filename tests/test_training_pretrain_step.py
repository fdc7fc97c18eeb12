"""minibert pretrain computes Google's step: checked against Google's arithmetic written out here,
independently, on transformers' BertForPreTraining (run_pretraining.py's masked-LM and next-sentence
losses, optimization.py's clip_by_global_norm, AdamWeightDecayOptimizer and learning-rate schedule).

The expected values never come from minibert's training code: the reference loop below uses
transformers' model, its own loss formulas, its own optimizer state and its own schedule.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from helpers import run_minibert
from minibert.training.run.optimization import AdamWeightDecay, Schedule, clip_by_global_norm, hub_named_parameters
from random_instances import random_instances, write_instances

transformers = pytest.importorskip("transformers")

TINY = "tests/data/tiny_hub"  # a BertForPreTraining (2 layers, hidden 32, vocab 111), decoder tied
COUNT, BATCH, STEPS, WARMUP = 20, 8, 4, 2  # 20 instances: batch 3 wraps around the end of the file
RATE, DECAY, CLIP = 2e-3, 0.1, 1.0  # big enough that a wrong decay or rate moves weights past the tolerance


# --------------------------------------------------------------------- Google's arithmetic, written out


def google_rate(step: int, peak: float, warmup: int, total: int) -> float:
    """optimization.create_optimizer: polynomial_decay(power 1, end 0) of global_step, replaced
    by peak * global_step / warmup while global_step < warmup; global_step = updates done before."""
    decayed = peak * (1.0 - min(step, total) / total)
    if warmup and step < warmup:
        return peak * (step / warmup)
    return decayed


def google_losses(model, batch):
    """run_pretraining.get_masked_lm_output and get_next_sentence_output on transformers' logits."""
    out = model(input_ids=batch["input_ids"], attention_mask=batch["input_mask"], token_type_ids=batch["segment_ids"])
    logits = out.prediction_logits  # (B, T, V)
    gathered = torch.stack([logits[i, batch["masked_lm_positions"][i]] for i in range(len(logits))])  # (B, P, V)
    log_probs = torch.log_softmax(gathered, dim=-1)
    one_hot = torch.nn.functional.one_hot(batch["masked_lm_ids"], logits.shape[-1]).float()
    per_example = -(log_probs * one_hot).sum(-1)  # (B, P)
    weights = batch["masked_lm_weights"]
    mlm = (weights * per_example).sum() / (weights.sum() + 1e-5)
    nsp_log_probs = torch.log_softmax(out.seq_relationship_logits, dim=-1)
    labels = torch.nn.functional.one_hot(batch["next_sentence_labels"], 2).float()
    nsp = (-(labels * nsp_log_probs).sum(-1)).mean()
    return mlm + nsp


def google_steps(model, instances, steps: int) -> None:
    """Google's training step, ``steps`` times, on transformers' model (in place)."""
    parameters = [(name, p) for name, p in model.named_parameters()]  # the tied decoder appears once
    m = {name: torch.zeros_like(p) for name, p in parameters}
    v = {name: torch.zeros_like(p) for name, p in parameters}
    for step in range(steps):
        rows = [(step * BATCH + i) % len(instances) for i in range(BATCH)]
        batch = {key: torch.from_numpy(np.stack([instances[r][key] for r in rows])) for key in instances[0]}
        batch["next_sentence_labels"] = batch["next_sentence_labels"][:, 0]
        model.zero_grad()
        google_losses(model, batch).backward()
        grads = {name: p.grad.detach().clone() for name, p in parameters}
        global_norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads.values()))
        scale = CLIP / max(float(global_norm), CLIP)  # tf.clip_by_global_norm
        rate = google_rate(step, RATE, WARMUP, STEPS)
        with torch.no_grad():
            for name, p in parameters:
                g = grads[name] * scale
                m[name] = 0.9 * m[name] + 0.1 * g
                v[name] = 0.999 * v[name] + 0.001 * g * g
                update = m[name] / (torch.sqrt(v[name]) + 1e-6)
                if not re.search("LayerNorm|layer_norm|bias", name):  # exclude_from_weight_decay
                    update = update + DECAY * p
                p -= rate * update


# --------------------------------------------------------------------- the tests


def with_padding_ids(instances: list[dict]) -> list[dict]:
    """Id 0 ([PAD] in tiny_hub's vocabulary) where the loss reads it, as Google's masking puts it
    there (its random replacement draws from the whole vocabulary): the input at instance 0's first
    masked position, and a real, unmasked token of instance 1. Google's embedding has no padding
    row, so its row 0 gets these inputs' gradient; transformers' padding_idx 0 would drop it."""
    first = instances[0]
    first["input_ids"][first["masked_lm_positions"][0]] = 0
    second = instances[1]
    real = int(second["input_mask"].sum())
    unmasked = [i for i in range(1, real - 1) if i not in second["masked_lm_positions"] and second["input_ids"][i] > 4]
    second["input_ids"][unmasked[0]] = 0
    return instances


@pytest.fixture(scope="module")
def four_steps(tmp_path_factory):
    """minibert pretrain, 4 steps from tiny_hub, dropout 0; and the instances it read (id 0 at real positions)."""
    folder = tmp_path_factory.mktemp("step")
    instances = with_padding_ids(random_instances(COUNT, vocab_size=111, seq_len=16, predictions=4, seed=7))
    data = write_instances(folder / "data.tfrecord", instances)
    result = run_minibert("pretrain", "--data", str(data), "--init", TINY, "--output", str(folder / "run"),
                          "--steps", str(STEPS), "--batch-size", str(BATCH), "--warmup-steps", str(WARMUP),
                          "--learning-rate", str(RATE), "--weight-decay", str(DECAY), "--max-grad-norm", str(CLIP),
                          "--dropout", "0")  # fmt: skip
    assert result.returncode == 0, result.stderr
    return folder / "run", instances


def test_four_steps_equal_googles_arithmetic_on_transformers(four_steps):
    run, instances = four_steps
    reference = transformers.BertForPreTraining.from_pretrained(TINY, attn_implementation="eager").train()
    for module in reference.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    reference.bert.embeddings.word_embeddings.padding_idx = None  # Google's embedding_lookup: no padding row
    google_steps(reference, instances, STEPS)

    trained = transformers.BertForPreTraining.from_pretrained(run)  # the run loads in transformers
    ours = dict(trained.named_parameters())
    initial = dict(transformers.BertForPreTraining.from_pretrained(TINY).named_parameters())
    worst, unmoved = ("", 0.0), []
    for name, expected in reference.named_parameters():
        relative = (ours[name] - expected).abs().max().item() / expected.abs().max().item()
        worst = max(worst, (name, relative), key=lambda item: item[1])
        if torch.equal(expected, initial[name]) and not name.endswith("key.bias"):  # softmax ignores a key bias
            unmoved.append(name)
    print(f"\n4 steps vs Google's arithmetic on transformers: worst max|Δ|/max|w| {worst[1]:.2e} ({worst[0]})")
    assert not unmoved, f"tensors the reference did not update: {unmoved}"
    assert worst[1] <= 1e-4, worst  # the bound: fp32 sums in another order, through 4 Adam steps
    # the tied decoder stayed tied: transformers reads one matrix for both
    assert (
        trained.cls.predictions.decoder.weight.data_ptr() == trained.bert.embeddings.word_embeddings.weight.data_ptr()
    )


def test_learning_rates_logged_are_googles_schedule(four_steps):
    run, _ = four_steps
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in records] == [1, 2, 3, 4]
    expected = [google_rate(step, RATE, WARMUP, STEPS) for step in range(STEPS)]
    assert expected[0] == 0.0  # the first update of a warmup uses rate 0
    assert [record["learning_rate"] for record in records] == pytest.approx(expected, rel=1e-12, abs=0)
    for key in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy", "tokens_per_second", "seconds"):
        assert all(isinstance(record[key], float) for record in records), key


@pytest.mark.parametrize("peak, warmup, total", [(1e-4, 10, 100), (5e-5, 0, 7), (1e-3, 3, 3), (2e-4, 1, 50)])
def test_schedule_is_googles_at_every_step(peak, warmup, total):
    """Fails for a decay from the warmup's end, a rate from the step after the update, or a missing warmup."""
    ours = [Schedule(peak, warmup, total).rate(step) for step in range(total)]
    assert ours == pytest.approx([google_rate(step, peak, warmup, total) for step in range(total)], rel=1e-12, abs=0)


def test_clipping_is_by_the_global_norm_not_per_tensor():
    """Two gradients of norms 3 and 4: the global norm is 5, so clipping to 1 scales both by 1/5
    (per-tensor clipping would leave each at norm 1). Below the bound nothing changes."""
    first, second = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))
    first.grad, second.grad = torch.tensor([3.0, 0.0]), torch.tensor([4.0])
    assert clip_by_global_norm([first, second], 1.0) == pytest.approx(5.0)
    assert first.grad.tolist() == pytest.approx([0.6, 0.0]) and second.grad.tolist() == pytest.approx([0.8])
    first.grad, second.grad = torch.tensor([0.3, 0.0]), torch.tensor([0.4])
    clip_by_global_norm([first, second], 1.0)
    assert first.grad.tolist() == [pytest.approx(0.3), 0.0] and second.grad.tolist() == [pytest.approx(0.4)]


def test_weight_decay_spares_exactly_googles_layernorm_and_bias_tensors():
    """With zero gradients an update is decay alone: the tensors that move must be exactly those whose
    name in transformers' model (the hub's names) matches none of Google's patterns."""
    from minibert.heads import BertForPreTraining

    model = BertForPreTraining.from_pretrained(TINY)
    before = {name: p.detach().clone() for name, p in hub_named_parameters(model)}
    optimizer = AdamWeightDecay(hub_named_parameters(model), weight_decay=0.5)
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step(0.1)
    moved = {name for name, p in hub_named_parameters(model) if not torch.equal(p, before[name])}
    names = [name for name, _ in transformers.BertForPreTraining.from_pretrained(TINY).named_parameters()]
    expected = {name for name in names if not re.search("LayerNorm|layer_norm|bias", name)}
    assert moved == expected
    for name, p in hub_named_parameters(model):
        if name in expected:  # p ← p − rate · decay · p
            assert torch.allclose(p, before[name] * (1 - 0.1 * 0.5), rtol=1e-6, atol=0)


@pytest.mark.parametrize("chunk", [AdamWeightDecay.CHUNK, 1000])
def test_clip_and_update_are_the_per_tensor_loop_bit_for_bit(chunk, monkeypatch):
    """clip_by_global_norm and AdamWeightDecay run each line over many tensors at once (torch._foreach_*,
    in batches of ``chunk`` elements); the numbers must be exactly those of the formula applied tensor by
    tensor with the same torch operations (written out here), over 3 updates with clipping and decay."""
    from minibert.heads import BertForPreTraining

    monkeypatch.setattr(AdamWeightDecay, "CHUNK", chunk)
    ours, reference = BertForPreTraining.from_pretrained(TINY), BertForPreTraining.from_pretrained(TINY)
    optimizer = AdamWeightDecay(hub_named_parameters(ours), weight_decay=0.1)
    named = hub_named_parameters(reference)
    moments = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in named}
    generator = torch.Generator().manual_seed(3)
    for rate in (1e-2, 5e-3, 2e-3):
        for (_, p), (_, q) in zip(hub_named_parameters(ours), named):
            p.grad = torch.randn(p.shape, generator=generator) * 0.3
            q.grad = p.grad.clone()
        norm = clip_by_global_norm(list(ours.parameters()), 1.0)
        with torch.no_grad():
            expected = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(q.grad) for _, q in named]))
            scale = 1.0 / max(float(expected), 1.0)
            for name, q in named:
                g = q.grad.mul_(scale)
                m, v = moments[name]
                m.mul_(0.9).add_(g, alpha=0.1)
                v.mul_(0.999).addcmul_(g, g, value=0.001)
                update = m / (v.sqrt() + 1e-6)
                if not re.search("LayerNorm|layer_norm|bias", name):
                    update.add_(q, alpha=0.1)
                q.sub_(update, alpha=rate)
        optimizer.step(rate)
        assert norm == float(expected)
    differing = [name for (name, p), (_, q) in zip(hub_named_parameters(ours), named) if not torch.equal(p, q)]
    assert not differing, f"not bit-identical to the per-tensor loop: {differing[:5]}"


def test_import_minibert_does_not_import_the_training_room():
    import subprocess
    import sys

    code = (
        "import sys, minibert, minibert.apps.cli; "
        "print(sorted(m for m in sys.modules if m.startswith('minibert.training')))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]", found


def test_bf16_autocast_trains_with_the_loss_bf16_allows(four_steps, tmp_path):
    """--bf16: the first step's loss (the same weights and batch) within 2% of fp32's. bfloat16 keeps
    8 bits of precision (a rounding moves a value by up to 2⁻⁸ ≈ 0.4%); the loss, a mean over many
    such values, moves by a few roundings at most, so 2% (5 of them) fails only for a wrong computation."""
    run, _ = four_steps
    data = next(run.parent.glob("*.tfrecord"))
    losses = {}
    for name, extra in (("fp32", []), ("bf16", ["--bf16"])):
        output = tmp_path / name
        result = run_minibert("pretrain", "--data", str(data), "--init", TINY, "--output", str(output), "--steps", "1",
                              "--batch-size", str(BATCH), "--dropout", "0", *extra)  # fmt: skip
        assert result.returncode == 0, result.stderr
        losses[name] = json.loads((output / "metrics.jsonl").read_text().splitlines()[0])["loss"]
    print(f"\nfirst-step loss: fp32 {losses['fp32']:.6f}, bf16 {losses['bf16']:.6f}")
    assert losses["bf16"] != losses["fp32"]  # autocast did run in bfloat16
    assert abs(losses["bf16"] - losses["fp32"]) <= 0.02 * losses["fp32"]


def test_records_without_predictions_train_next_sentence_alone_as_google(tmp_path):
    """Google's script with --max_predictions_per_seq=0 writes the three masked-LM features empty
    (TensorFlow reads them with FixedLenFeature([0])). minibert refused them ("has 0 values, expected
    0"); run_pretraining.py trains on them, its masked-LM loss Σ w·CE / (Σ w + 1e-5) = 0: the step's
    loss is the next-sentence loss alone, here on transformers' model."""
    from minibert.heads import BertForPreTraining
    from minibert.training.tasks.tfrecord_instances import read_instances
    from tf_reference import run_reference

    words = [line.strip() for line in open(f"{TINY}/vocab.txt", encoding="utf-8")][5:60]
    sentences = [" ".join(words[(7 * i + j) % len(words)] for j in range(3 + i % 4)) + " ." for i in range(24)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(sentences[i : i + 4]) for i in range(0, 24, 4)) + "\n", encoding="utf-8")
    data = tmp_path / "google.tfrecord"
    flags = {"input_file": str(corpus), "vocab_file": f"{TINY}/vocab.txt", "output_file": str(data),
             "max_seq_length": 16, "max_predictions_per_seq": 0, "dupe_factor": 2, "random_seed": 3,
             "do_lower_case": True, "masked_lm_prob": 0.15, "short_seq_prob": 0.1}  # fmt: skip
    [result] = run_reference({"script": None, "jobs": [{"mode": "create", "flags": flags, "name": "p0"}]})
    assert result["error"] is None, result["error"]
    [google] = result["instances"]  # as TensorFlow parses them
    instances = read_instances([data], BertForPreTraining.from_pretrained(TINY).config)
    assert instances.predictions == 0 and len(instances) == len(google) >= 8
    assert instances.arrays["input_ids"].tolist() == [example["input_ids"] for example in google]

    count = len(google)
    run = run_minibert("pretrain", "--data", str(data), "--init", TINY, "--output", str(tmp_path / "run"), "--steps",
                       "1", "--batch-size", str(count), "--dropout", "0")  # fmt: skip
    assert run.returncode == 0, run.stderr
    [record] = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    reference = transformers.BertForPreTraining.from_pretrained(TINY, attn_implementation="eager").eval()
    arrays = {name: [example[name] for example in google] for name in google[0]}
    batch = {name: torch.tensor(values, dtype=torch.float32 if name == "masked_lm_weights" else torch.long)
             for name, values in arrays.items()}  # fmt: skip
    assert batch["masked_lm_positions"].shape == (count, 0)
    batch["next_sentence_labels"] = batch["next_sentence_labels"][:, 0]
    with torch.no_grad():
        expected = google_losses(reference, batch).item()
    assert record["mlm_loss"] == 0.0
    assert record["loss"] == pytest.approx(expected, rel=1e-5) and record["nsp_loss"] == record["loss"]
