"""gpu_check.py's parity rows: minibert against transformers on one device, every layer, in fp32, bf16
and fp16, and each against float64; a classifier's logits and a training step's gradients."""

from __future__ import annotations

import time
from pathlib import Path

import torch
import torch.nn.functional as F
from gpu_setup import (
    DTYPES,
    MINILM,
    NUM_LABELS,
    Checkpoints,
    Plan,
    Report,
    encode,
    load_transformers,
    spread_by_length,
    transformers_module,
)


def real(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The real tokens' rows of a (B, T, ...) tensor; other tensors as they are."""
    return x[mask] if x.dim() >= 3 else x


def max_delta(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    return float((real(a, mask).double() - real(b, mask).double()).abs().max())


def relative_error(a: torch.Tensor, truth: torch.Tensor, mask: torch.Tensor) -> float:
    return max_delta(a, truth, mask) / max(float(real(truth, mask).double().abs().max()), 1e-300)


def named_outputs(hidden_states, pooler, mlm, nsp) -> dict[str, torch.Tensor]:
    named = {"embeddings": hidden_states[0]}
    named.update({f"layer {i}": h for i, h in enumerate(hidden_states[1:], 1)})
    named.update(pooler=pooler, mlm=mlm, nsp=nsp)
    return named


def minibert_outputs(model, batch: dict, **options) -> dict[str, torch.Tensor]:
    bodies = []  # the encoder's own output, with its pooler (the pre-training output holds the heads' fields only)
    hook = model.bert.register_forward_hook(lambda module, args, output: bodies.append(output))
    try:
        out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], output_hidden_states=True,
                    **options)  # fmt: skip
    finally:
        hook.remove()
    pooler = bodies[0].pooler_output
    return named_outputs(out.hidden_states, pooler, out.prediction_logits, out.seq_relationship_logits)


def transformers_outputs(model, batch: dict) -> dict[str, torch.Tensor]:
    out = model(**batch, output_hidden_states=True)
    pooler = model.bert.pooler(out.hidden_states[-1])  # (transformers' pre-training output has no pooler)
    return named_outputs(out.hidden_states, pooler, out.prediction_logits, out.seq_relationship_logits)


def worst(values: dict[str, float]) -> tuple[str, float]:
    key = max(values, key=values.get)
    return key, values[key]


def parity(report: Report, checkpoints: Checkpoints, device: torch.device, plan: Plan, texts: list[str]) -> None:
    sample = spread_by_length(texts, plan.parity_texts)
    report.run("parity: tokenizers", parity_tokenizers, report, texts[: plan.tokenizer_texts])
    for shape in plan.parity_shapes:
        report.run(f"parity {shape}", parity_shape, report, checkpoints, device, plan, shape, sample)
        report.run(f"parity {shape} classifier", parity_classifier, report, checkpoints, device, plan, shape, sample)


def parity_tokenizers(report: Report, texts: list[str]) -> None:
    from minibert import BertTokenizer

    ours = BertTokenizer.from_pretrained(MINILM)
    theirs = transformers_module().AutoTokenizer.from_pretrained(str(MINILM))
    start = time.perf_counter()
    a = ours(texts, truncation=True, max_length=128)["input_ids"]
    middle = time.perf_counter()
    b = theirs(texts, truncation=True, max_length=128)["input_ids"]
    end = time.perf_counter()
    differ = sum(list(x) != list(y) for x, y in zip(a, b))
    line = (f"tokenizers: {differ} of {len(texts)} texts' ids differ (minibert vs {type(theirs).__name__}, "
            f"max_length 128; {middle - start:.2f} s vs {end - middle:.2f} s)")  # fmt: skip
    report.add("parity", line, kind="tokenizer", differ=differ, texts=len(texts))


def parity_shape(report: Report, checkpoints: Checkpoints, device: torch.device, plan: Plan, shape: str,
                 sample: list[str]) -> None:  # fmt: skip
    from minibert import BertForPreTraining, BertTokenizer

    transformers = transformers_module()
    path = checkpoints.pretraining(shape)
    batch = encode(BertTokenizer.from_pretrained(path), sample, plan.parity_length, device)
    mask = batch["attention_mask"].bool()
    with torch.inference_mode():
        reference = load_transformers(transformers.BertForPreTraining, path).to(device, torch.float64).eval()
        theirs = transformers_outputs(reference, batch)
        del reference
        truth = report.run(f"parity {shape} float64 minibert", lambda: minibert_outputs(
            BertForPreTraining.from_pretrained(path, dtype=torch.float64, device=device), batch))  # fmt: skip
    texts = f"{len(sample)} texts, {int(mask.sum())} real tokens of {mask.numel()}"
    if truth is None:  # (minibert failed in float64: transformers' float64 is the truth instead)
        truth = theirs
        report.add("parity", f"{shape} float64 truth: transformers' (minibert's failed); {texts}", shape=shape)
    else:
        deltas = {key: max_delta(truth[key], theirs[key], mask) for key in truth}
        key, value = worst(deltas)
        report.add("parity", f"{shape} float64 truth: minibert vs transformers, worst max |Δ| {value:.1e} ({key}); "
                   f"{texts}", kind="float64 truth", shape=shape, deltas=deltas)  # fmt: skip
    del theirs
    for name in DTYPES:
        report.run(f"parity {shape} {name}", parity_dtype, report, path, device, shape, name, batch, truth)


def parity_dtype(report: Report, path: Path, device: torch.device, shape: str, name: str, batch: dict,
                 truth: dict) -> None:  # fmt: skip
    from minibert import BertForPreTraining

    transformers = transformers_module()
    dtype, mask = DTYPES[name], batch["attention_mask"].bool()
    runs = {}
    with torch.inference_mode():
        ours = BertForPreTraining.from_pretrained(path, dtype=dtype, device=device)
        runs["minibert"] = minibert_outputs(ours, batch)
        runs["minibert skip_padding"] = minibert_outputs(ours, batch, skip_padding=True)
        del ours
        theirs = load_transformers(transformers.BertForPreTraining, path).to(device, dtype).eval()
        attention = getattr(theirs.config, "_attn_implementation", "default")
        runs["transformers"] = transformers_outputs(theirs, batch)
        del theirs
        if dtype == torch.float32:
            eager = load_transformers(transformers.BertForPreTraining, path, attn_implementation="eager")
            runs["transformers eager"] = transformers_outputs(eager.to(device, dtype).eval(), batch)
            del eager
    reference = runs["transformers"]
    deltas = {key: max_delta(runs["minibert"][key], reference[key], mask) for key in reference}
    layer, layer_delta = worst({key: value for key, value in deltas.items() if key.startswith("layer")})
    others = {lib: worst({key: max_delta(out[key], reference[key], mask) for key in reference})
              for lib, out in runs.items() if lib not in ("minibert", "transformers")}  # fmt: skip
    errors = {lib: {key: relative_error(out[key], truth[key], mask) for key in truth} for lib, out in runs.items()}
    worst_errors = {lib: worst(values) for lib, values in errors.items()}
    line = (f"{shape:>9} {name}  minibert vs transformers ({attention}): embeddings {deltas['embeddings']:.1e}  "
            f"worst {layer} {layer_delta:.1e}  pooler {deltas['pooler']:.1e}  mlm {deltas['mlm']:.1e}  "
            f"nsp {deltas['nsp']:.1e}")  # fmt: skip
    line += "".join(f"\n{'':14} {lib} vs transformers: worst {v:.1e} ({k})" for lib, (k, v) in others.items())
    line += f"\n{'':14} max |Δ|/max|float64|: " + "  ".join(
        f"{lib} {v:.1e} ({k})" for lib, (k, v) in worst_errors.items()
    )
    report.add("parity", line, kind="pretraining", shape=shape, dtype=name, attention=attention, vs_transformers=deltas,
               others_vs_transformers=others, relative_vs_float64=errors)  # fmt: skip


def parity_classifier(report: Report, checkpoints: Checkpoints, device: torch.device, plan: Plan, shape: str,
                      sample: list[str]) -> None:  # fmt: skip
    """A classifier's logits in every dtype, and one fp32 training step's gradients (dropout 0)."""
    from minibert import BertForSequenceClassification, BertTokenizer

    transformers = transformers_module()
    path = checkpoints.classifier(shape, dropout=False)
    batch = encode(BertTokenizer.from_pretrained(path), sample, plan.parity_length, device)
    labels = torch.arange(len(sample), device=device) % NUM_LABELS
    truth = report.run(f"parity {shape} classifier float64 minibert", float64_run, BertForSequenceClassification,
                       path, device, batch)  # fmt: skip
    ours_truth = truth is not None
    if not ours_truth:  # transformers' float64 is the truth instead
        truth = float64_run(transformers.BertForSequenceClassification, path, device, batch)
    truth, truth_logits = truth
    for name in DTYPES:
        report.run(f"parity {shape} classifier {name}", classifier_logits, report, path, device, shape, name, batch,
                   truth_logits)  # fmt: skip
    report.run(f"parity {shape} gradients", parity_gradients, report, path, device, shape, batch, labels, truth,
               ours_truth)  # fmt: skip


def classifier_logits(report: Report, path: Path, device: torch.device, shape: str, name: str, batch: dict,
                      truth_logits: torch.Tensor) -> None:  # fmt: skip
    from minibert import BertForSequenceClassification

    dtype = DTYPES[name]
    with torch.inference_mode():
        ours = BertForSequenceClassification.from_pretrained(path, dtype=dtype, device=device)(**batch).logits
        reference = load_transformers(transformers_module().BertForSequenceClassification, path)
        theirs = reference.to(device, dtype).eval()(**batch).logits
        del reference
    delta = max_delta(ours, theirs, None)
    errors = {"minibert": relative_error(ours, truth_logits, None),
              "transformers": relative_error(theirs, truth_logits, None)}  # fmt: skip
    line = (f"{shape:>9} {name}  classifier logits: minibert vs transformers {delta:.1e}; max |Δ|/max|float64|: "
            f"minibert {errors['minibert']:.1e}  transformers {errors['transformers']:.1e}")  # fmt: skip
    report.add("parity", line, kind="classifier logits", shape=shape, dtype=name, delta=delta,
               relative_vs_float64=errors)  # fmt: skip


def parity_gradients(report: Report, path: Path, device: torch.device, shape: str, batch: dict, labels: torch.Tensor,
                     truth, ours_truth: bool) -> None:  # fmt: skip
    from minibert import BertForSequenceClassification

    truth_gradients = gradients(truth, batch, labels, ours=ours_truth)
    ours = gradients(BertForSequenceClassification.from_pretrained(path, device=device), batch, labels, ours=True)
    theirs = load_transformers(transformers_module().BertForSequenceClassification, path).to(device)
    theirs = gradients(theirs, batch, labels, ours=False)
    report_gradients(report, shape, ours, theirs, truth_gradients)


def float64_run(cls, path: Path, device: torch.device, batch: dict):
    """A classifier (minibert's class or transformers') in float64, and its logits on ``batch``."""
    if cls.__module__.startswith("minibert"):
        model = cls.from_pretrained(path, dtype=torch.float64, device=device)
    else:
        model = load_transformers(cls, path).to(device, torch.float64).eval()
    with torch.inference_mode():
        return model, model(**batch).logits


def gradients(model, batch: dict, labels: torch.Tensor, ours: bool) -> dict[str, torch.Tensor]:
    """Every parameter's gradient after one cross-entropy backward pass, by the hub's name (train mode, dropout 0)."""
    from minibert.training.run.optimization import hub_named_parameters

    model.train()
    model.zero_grad(set_to_none=True)
    logits = model(**batch).logits
    F.cross_entropy(logits, labels).backward()
    named = hub_named_parameters(model) if ours else model.named_parameters()
    return {name: p.grad.detach().clone() for name, p in named if p.grad is not None}


def report_gradients(report: Report, shape: str, ours: dict, theirs: dict, truth: dict) -> None:
    """Gradients compared parameter by parameter. Relative errors leave out the parameters whose float64
    gradient is below 1e-6 of the largest: the attention key biases, whose true gradient is zero (softmax
    ignores a shift common to all keys), so that only rounding is left there."""
    common = sorted(set(ours) & set(theirs) & set(truth))
    size = {name: float(truth[name].double().abs().max()) for name in common}
    largest = max(size.values())
    scaled = [name for name in common if size[name] > 1e-6 * largest]
    deltas = {name: max_delta(ours[name], theirs[name], None) for name in common}
    name, delta = worst(deltas)
    relative_name, relative_delta = worst({name: deltas[name] / size[name] for name in scaled})
    errors = {lib: worst({name: relative_error(grads[name], truth[name], None) for name in scaled})
              for lib, grads in (("minibert", ours), ("transformers", theirs))}  # fmt: skip
    line = (f"{shape:>9} fp32  gradients of one step: {len(common)} parameters matched by name (minibert {len(ours)}, "
            f"transformers {len(theirs)}); max |Δ| {delta:.1e} ({name}) = {delta / largest:.1e} of the largest; "
            f"worst |Δ|/max|float64| {relative_delta:.1e} ({relative_name})\n{'':14} max |Δ|/max|float64| per "
            f"parameter ({len(common) - len(scaled)} with a float64 gradient < 1e-6 of the largest left out): "
            + "  ".join(f"{lib} {v:.1e} ({k})" for lib, (k, v) in errors.items()))  # fmt: skip
    unmatched = sorted(set(ours) ^ set(theirs))
    if unmatched:
        line += f"\n{'':14} unmatched names: {unmatched[:8]}{' ...' if len(unmatched) > 8 else ''}"
    report.add("parity", line, kind="gradients", shape=shape, matched=len(common), minibert=len(ours),
               transformers=len(theirs), max_delta=delta, largest=largest, worst_relative=relative_delta,
               left_out=sorted(set(common) - set(scaled)), unmatched=unmatched, relative_vs_float64=errors)  # fmt: skip


# ----------------------------------------------------------------------------- 2. speed


