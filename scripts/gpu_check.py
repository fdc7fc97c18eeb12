"""minibert against transformers and sentence-transformers on one device, side by side: parity, then speed.

On the GPU machine (one command, ~3 minutes on an H200):

    PYTHONPATH=src python3 scripts/gpu_check.py --out $OUT/gpu_check.json

Here, on the CPU, to test every code path first (tiny rounds, ~1-2 minutes on 2 cores):

    python scripts/gpu_check.py --device cpu --quick --out /tmp/gpu_check.json

What it measures (``--sections parity,speed,profile``; all three by default):

* parity. Checkpoints with random weights (seed 0) are made here with transformers, in two shapes:
  all-MiniLM-L6-v2's (384 wide, 6 layers) and bert-base's (768, 12). For each shape and dtype (fp32, bf16,
  fp16), minibert's and transformers' BertForPreTraining run on real texts padded to the batch's longest
  (max_length 128): the max |Δ| of the embeddings, every layer's hidden state (real tokens only), the
  pooler, the masked-LM and the next-sentence logits; and each library's error against float64 (minibert
  in float64, checked against transformers in float64), as max |Δ| / max |truth|. Then a classifier's
  logits in each dtype and, in fp32, one training step's gradients, parameter by parameter under the hub's
  names; and the two tokenizers' ids on the texts.
* speed: median milliseconds, minibert and the reference alternating round by round after a warm-up;
  ratio = reference / minibert (above 1: minibert faster). bert-base forward (64×128 and 16×512) in
  fp32, bf16 and fp16; ``Embedder.embed`` against ``SentenceTransformer.encode`` on the 4,096 texts, fp32
  and fp16 (and how far apart their vectors are); training steps of a bert-base classifier, 32 rows,
  padded to 128 and on real text (transformers padded to each batch's longest, minibert with
  ``skip_padding=True``), fp32 and bf16 autocast.
* profile: the top operations of minibert's fp16 and fp32 embedding (and sentence-transformers' fp16)
  under torch.profiler.

Inputs: ``.gpu/minilm/`` (all-MiniLM-L6-v2's config and tokenizer files, no weights) and
``.gpu/texts.txt`` (4,096 texts, one per line). Nothing is downloaded. Each part runs guarded: a failure
prints ``SECTION FAILED: <part>: <the traceback's last lines>`` and the run goes on; the JSON (``--out``)
is rewritten after every row, so a run cut short still leaves what it measured. Past ``--budget``
seconds, the parts not yet started are skipped.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MINILM = ROOT / ".gpu" / "minilm"
TEXTS = ROOT / ".gpu" / "texts.txt"
TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
SHAPES = {
    "minilm": {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536},
    "bert-base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
NUM_LABELS = 3
LEARNING_RATE = 2e-5


@dataclass(frozen=True)
class Plan:
    """How much of each measurement: the full run for the GPU, a tiny one (--quick) for the CPU."""

    parity_texts: int = 16
    parity_length: int = 128
    parity_shapes: tuple = ("minilm", "bert-base")
    tokenizer_texts: int = 4096
    forward_shape: str = "bert-base"
    forward_batches: tuple = ((64, 128), (16, 512))
    embed_texts: int = 4096
    embed_rounds: int = 3
    train_shape: str = "bert-base"
    train_rows: int = 32
    train_batches: int = 8
    rounds: int = 30
    warmup: int = 3
    loop_seconds: float = 4.0
    profile_texts: int = 96


FULL = Plan()
QUICK = Plan(parity_texts=3, parity_length=32, tokenizer_texts=256, forward_shape="minilm",
             forward_batches=((4, 64), (1, 256)), embed_texts=256, embed_rounds=1, train_shape="minilm",
             train_rows=4, train_batches=2, rounds=2, warmup=1, loop_seconds=2.0, profile_texts=32)  # fmt: skip


# ----------------------------------------------------------------------------- report: rows as they come


class Report:
    """Prints each row as soon as it is measured and rewrites the JSON after each."""

    def __init__(self, out: Path | None, budget_s: float):
        self.out = out
        self.start = time.perf_counter()
        self.budget_s = budget_s
        self.data: dict = {"header": {}, "parity": [], "speed": [], "profile": [], "failures": [], "skipped": [],
                           "seconds": {}}  # fmt: skip

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return self.budget_s - self.elapsed()

    def add(self, section: str, line: str, **values) -> None:
        print(line, flush=True)
        self.data[section].append({"line": line, **values})
        self.save()

    def save(self) -> None:
        if self.out is None:
            return
        temporary = self.out.with_name(self.out.name + ".tmp")
        temporary.write_text(json.dumps(self.data, indent=1, default=str))
        os.replace(temporary, self.out)

    def run(self, name: str, function, *args) -> None:
        """``function(*args)``, guarded: a failure is printed and recorded, and the run goes on."""
        if self.left() <= 0:
            print(f"SKIPPED (past --budget {self.budget_s:.0f} s): {name}", flush=True)
            self.data["skipped"].append(name)
            self.save()
            return
        start = time.perf_counter()
        try:
            function(*args)
        except Exception:  # noqa: BLE001 (one shot on the device: record it and go on)
            lines = traceback.format_exc().strip().splitlines()
            last = "\n    ".join(lines[-6:])
            print(f"SECTION FAILED: {name}:\n    {last}", flush=True)
            self.data["failures"].append({"part": name, "traceback": lines[-30:]})
        finally:
            self.data["seconds"][name] = round(time.perf_counter() - start, 2)
            free_memory()
            self.save()


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ----------------------------------------------------------------------------- checkpoints, made here


def transformers_module():
    import transformers

    transformers.logging.set_verbosity_error()
    with_bars = getattr(transformers.utils.logging, "disable_progress_bar", None)
    if with_bars is not None:
        with_bars()
    return transformers


def load_transformers(cls, path: Path, **kwargs):
    """transformers' ``from_pretrained`` in float32, whatever the checkpoint says (``dtype`` in 5.x, else
    ``torch_dtype``)."""
    major = int(transformers_module().__version__.split(".")[0])
    key = "dtype" if major >= 5 else "torch_dtype"
    return cls.from_pretrained(path, **{key: torch.float32}, **kwargs)


def copy_tokenizer(folder: Path) -> None:
    for name in TOKENIZER_FILES:
        shutil.copy(MINILM / name, folder / name)


class Checkpoints:
    """The random-weight checkpoints, made on first use in a temporary folder."""

    def __init__(self, root: Path):
        self.root = root

    def config(self, shape: str):
        config = transformers_module().BertConfig.from_json_file(str(MINILM / "config.json"))
        for field, value in SHAPES[shape].items():
            setattr(config, field, value)
        return config

    def pretraining(self, shape: str) -> Path:
        """BertForPreTraining (masked-LM and next-sentence heads), transformers' initialisation after seed 0."""
        path = self.root / f"pretraining-{shape}"
        if not path.exists():
            torch.manual_seed(0)
            transformers_module().BertForPreTraining(self.config(shape)).save_pretrained(path)
            copy_tokenizer(path)
        return path

    def classifier(self, shape: str, dropout: bool) -> Path:
        """BertForSequenceClassification (3 labels): the pretraining checkpoint's encoder, a new head (seed 1).
        ``dropout=False``: every dropout 0 in config.json, for gradients that can be compared."""
        path = self.root / f"classifier-{shape}{'' if dropout else '-no-dropout'}"
        if not path.exists():
            torch.manual_seed(1)
            transformers = transformers_module()
            model = load_transformers(transformers.BertForSequenceClassification, self.pretraining(shape),
                                      num_labels=NUM_LABELS)  # fmt: skip
            if not dropout:
                model.config.hidden_dropout_prob = 0.0
                model.config.attention_probs_dropout_prob = 0.0
            model.save_pretrained(path)
            copy_tokenizer(path)
        return path

    def sentence(self) -> Path:
        """A sentence-transformers folder: every .gpu/minilm file, the minilm pretraining checkpoint's encoder."""
        path = self.root / "sentence-minilm"
        if not path.exists():
            shutil.copytree(MINILM, path)
            modules = json.loads((MINILM / "modules.json").read_text())
            for module in modules:  # Normalize's folder holds nothing, and is not shipped here
                if module.get("path"):
                    (path / module["path"]).mkdir(exist_ok=True)
            model = load_transformers(transformers_module().BertModel, self.pretraining("minilm"))
            model.save_pretrained(path)
        return path


# ----------------------------------------------------------------------------- inputs


def read_texts() -> list[str]:
    return [line for line in TEXTS.read_text(encoding="utf-8").splitlines() if line.strip()]


def spread_by_length(texts: list[str], n: int) -> list[str]:
    """``n`` texts from the shortest to the longest of the first 512: a batch with padding and truncation."""
    ranked = sorted(texts[:512], key=len)
    if n == 1:
        return ranked[len(ranked) // 2 : len(ranked) // 2 + 1]
    return [ranked[round(i * (len(ranked) - 1) / (n - 1))] for i in range(n)]


def encode(tokenizer, texts: list[str], length: int, device: torch.device, padding="longest") -> dict:
    batch = tokenizer(texts, padding=padding, truncation=True, max_length=length, return_tensors="pt")
    return {key: batch[key].to(device) for key in ("input_ids", "attention_mask", "token_type_ids")}


def random_batch(rows: int, length: int, device: torch.device, generator: torch.Generator) -> dict:
    ids = torch.randint(1000, 30000, (rows, length), generator=generator)
    ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
    return {"input_ids": ids.to(device), "attention_mask": torch.ones_like(ids).to(device),
            "token_type_ids": torch.zeros_like(ids).to(device)}  # fmt: skip


# ----------------------------------------------------------------------------- 0. header


def git(*arguments: str) -> str:
    try:
        done = subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return done.stdout.strip() if done.returncode == 0 else f"unknown ({done.stderr.strip()[:80]})"
    except Exception as error:  # noqa: BLE001
        return f"unknown ({error})"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def header(report: Report, device: torch.device, plan: Plan, quick: bool) -> None:
    import minibert

    transformers = transformers_module()
    info = {"device": str(device), "torch": torch.__version__, "cuda": torch.version.cuda,
            "transformers": transformers.__version__, "minibert": minibert.__version__,
            "minibert commit": git("rev-parse", "--short", "HEAD"),
            "files changed since that commit": len(git("status", "--porcelain").splitlines()),
            "python": platform.python_version(), "cpu": cpu_model(), "cpu threads": torch.get_num_threads(),
            "float32 matmul precision": torch.get_float32_matmul_precision(), "quick": quick,
            "plan": asdict(plan)}  # fmt: skip
    try:
        import sentence_transformers

        info["sentence-transformers"] = sentence_transformers.__version__
    except Exception as error:  # noqa: BLE001
        info["sentence-transformers"] = f"not importable ({error})"
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        info.update({"gpu": torch.cuda.get_device_name(device), "capability": f"{properties.major}.{properties.minor}",
                     "gpu memory GiB": round(properties.total_memory / 2**30, 1),
                     "cudnn": torch.backends.cudnn.version(), "tf32 matmul": torch.backends.cuda.matmul.allow_tf32,
                     "bf16 supported": torch.cuda.is_bf16_supported()})  # fmt: skip
    report.data["header"] = info
    named = info.get("gpu", info["cpu"])
    print(f"device: {device} = {named}", flush=True)
    for key, value in info.items():
        if key != "plan":
            print(f"  {key}: {value}", flush=True)
    report.save()


# ----------------------------------------------------------------------------- 1. parity


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
    out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], output_hidden_states=True,
                **options)  # fmt: skip
    return named_outputs(out.hidden_states, out.pooler_output, out.prediction_logits, out.seq_relationship_logits)


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
        truth = minibert_outputs(BertForPreTraining.from_pretrained(path, dtype=torch.float64, device=device), batch)
        reference = load_transformers(transformers.BertForPreTraining, path).to(device, torch.float64).eval()
        theirs = transformers_outputs(reference, batch)
        del reference
    deltas = {key: max_delta(truth[key], theirs[key], mask) for key in truth}
    key, value = worst(deltas)
    tokens = int(mask.sum())
    report.add("parity", f"{shape} float64 truth: minibert vs transformers, worst max |Δ| {value:.1e} ({key}); "
               f"{len(sample)} texts, {tokens} real tokens of {mask.numel()}", kind="float64 truth", shape=shape,
               deltas=deltas)  # fmt: skip
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
    truth = BertForSequenceClassification.from_pretrained(path, dtype=torch.float64, device=device)
    with torch.inference_mode():
        truth_logits = truth(**batch).logits
    for name, dtype in DTYPES.items():
        with torch.inference_mode():
            ours = BertForSequenceClassification.from_pretrained(path, dtype=dtype, device=device)(**batch).logits
            reference = load_transformers(transformers.BertForSequenceClassification, path).to(device, dtype).eval()
            theirs = reference(**batch).logits
            del reference
        delta = max_delta(ours, theirs, None)
        errors = {"minibert": relative_error(ours, truth_logits, None),
                  "transformers": relative_error(theirs, truth_logits, None)}  # fmt: skip
        line = (f"{shape:>9} {name}  classifier logits: minibert vs transformers {delta:.1e}; max |Δ|/max|float64|: "
                f"minibert {errors['minibert']:.1e}  transformers {errors['transformers']:.1e}")  # fmt: skip
        report.add("parity", line, kind="classifier logits", shape=shape, dtype=name, delta=delta,
                   relative_vs_float64=errors)  # fmt: skip
    truth_gradients = gradients(truth, batch, labels, ours=True)
    del truth
    ours = gradients(BertForSequenceClassification.from_pretrained(path, device=device), batch, labels, ours=True)
    theirs = gradients(load_transformers(transformers.BertForSequenceClassification, path).to(device), batch, labels,
                       ours=False)  # fmt: skip
    report_gradients(report, shape, ours, theirs, truth_gradients)


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
    common = sorted(set(ours) & set(theirs))
    deltas = {name: float((ours[name].double() - theirs[name].double()).abs().max()) for name in common}
    scale = {name: float(theirs[name].double().abs().max()) for name in common}
    relative = {name: deltas[name] / scale[name] for name in common if scale[name] > 0}
    errors = {lib: worst({name: relative_error(grads[name], truth[name], None) for name in common
                          if float(truth[name].abs().max()) > 0})
              for lib, grads in (("minibert", ours), ("transformers", theirs))}  # fmt: skip
    name, delta = worst(deltas)
    relative_name, relative_delta = worst(relative)
    line = (f"{shape:>9} fp32  gradients of one step: {len(common)} parameters matched by name (minibert "
            f"{len(ours)}, transformers {len(theirs)}); max |Δ| {delta:.1e} ({name}); worst |Δ|/max|grad| "
            f"{relative_delta:.1e} ({relative_name})\n{'':14} max |Δ|/max|float64| per parameter: "
            + "  ".join(f"{lib} {v:.1e} ({k})" for lib, (k, v) in errors.items()))  # fmt: skip
    unmatched = sorted(set(ours) ^ set(theirs))
    if unmatched:
        line += f"\n{'':14} unmatched names: {unmatched[:8]}{' ...' if len(unmatched) > 8 else ''}"
    report.add("parity", line, kind="gradients", shape=shape, matched=len(common), minibert=len(ours),
               transformers=len(theirs), max_delta=delta, worst_relative=relative_delta, unmatched=unmatched,
               relative_vs_float64=errors)  # fmt: skip


# ----------------------------------------------------------------------------- 2. speed


def interleave(contenders: dict, device: torch.device, rounds: int, seconds: float, warmup: int) -> dict:
    """Milliseconds per call of each contender, alternating (and reversing the order every other round),
    after ``warmup`` calls of each; at most ``rounds`` rounds, fewer (at least 2) past ``seconds``."""
    for _ in range(warmup):
        for call in contenders.values():
            call()
    sync(device)
    times = {name: [] for name in contenders}
    names = list(contenders)
    start = time.perf_counter()
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            sync(device)
            begin = time.perf_counter()
            contenders[name]()
            sync(device)
            times[name].append((time.perf_counter() - begin) * 1000)
        if round_ >= 1 and time.perf_counter() - start > seconds:
            break
    return times


def speed_row(report: Report, what: str, times: dict, ours: str, theirs: str, work: int | None = None,
              unit: str = "") -> None:  # fmt: skip
    mine, reference = statistics.median(times[ours]), statistics.median(times[theirs])
    ratio = reference / mine
    rates = f"   ({work / mine * 1000:,.0f} vs {work / reference * 1000:,.0f} {unit}/s)" if work else ""
    line = (f"{what:<42} {ours} {mine:9.2f} ms   {theirs} {reference:9.2f} ms   ratio {ratio:5.2f}x"
            f"{rates}  n={len(times[ours])}")  # fmt: skip
    report.add("speed", line, what=what, ours=ours, theirs=theirs, ours_ms=mine, theirs_ms=reference, ratio=ratio,
               ours_all_ms=times[ours], theirs_all_ms=times[theirs], work=work, unit=unit)  # fmt: skip


def loop_seconds(report: Report, plan: Plan, factor: float = 1.0) -> float:
    return max(0.0, min(plan.loop_seconds * factor, report.left() / 4))


def speed(report: Report, checkpoints: Checkpoints, device: torch.device, plan: Plan, texts: list[str]) -> None:
    for name in DTYPES:
        report.run(f"speed: forward {name}", speed_forward, report, checkpoints, device, plan, name)
    report.run("speed: embedding", speed_embedding, report, checkpoints, device, plan, texts)
    report.run("speed: training", speed_training, report, checkpoints, device, plan, texts)


def speed_forward(report: Report, checkpoints: Checkpoints, device: torch.device, plan: Plan, name: str) -> None:
    from minibert import BertModel

    dtype, path = DTYPES[name], checkpoints.pretraining(plan.forward_shape)
    ours = BertModel.from_pretrained(path, dtype=dtype, device=device)
    theirs = load_transformers(transformers_module().BertModel, path).to(device, dtype).eval()
    generator = torch.Generator().manual_seed(0)
    for rows, length in plan.forward_batches:
        batch = random_batch(rows, length, device, generator)
        contenders = {"minibert": lambda b=batch: ours(b["input_ids"], b["attention_mask"], b["token_type_ids"]),
                      "transformers": lambda b=batch: theirs(**b)}  # fmt: skip
        with torch.inference_mode():
            times = interleave(contenders, device, plan.rounds, loop_seconds(report, plan), plan.warmup)
        speed_row(report, f"forward {plan.forward_shape} {rows}×{length} {name}", times, "minibert", "transformers",
                  rows * length, "tokens")  # fmt: skip


def speed_embedding(report: Report, checkpoints: Checkpoints, device: torch.device, plan: Plan,
                    texts: list[str]) -> None:  # fmt: skip
    from sentence_transformers import SentenceTransformer

    from minibert import Embedder

    folder, texts = checkpoints.sentence(), texts[: plan.embed_texts]
    vectors: dict[str, np.ndarray] = {}
    contenders = {}
    for name, dtype in (("fp32", "float32"), ("fp16", "float16")):
        embedder = Embedder.from_pretrained(folder, dtype=dtype, device=device)
        model = SentenceTransformer(str(folder), device=str(device))
        model = model.half() if name == "fp16" else model
        contenders[f"minibert {name}"] = embed_call(vectors, f"minibert {name}", embedder.embed, texts)
        contenders[f"ST {name}"] = embed_call(vectors, f"ST {name}", model.encode, texts, convert_to_numpy=True,
                                              show_progress_bar=False)  # fmt: skip
    interleave({name: call.on(texts[:256]) for name, call in contenders.items()}, device, 1, 0.0, 0)  # warm-up
    times = interleave(contenders, device, plan.embed_rounds, loop_seconds(report, plan, 3), 0)
    n = len(texts)
    speed_row(report, f"Embedder.embed minilm {n} texts fp32", times, "minibert fp32", "ST fp32", n, "texts")
    speed_row(report, f"Embedder.embed minilm {n} texts fp16", times, "minibert fp16", "ST fp16", n, "texts")
    speed_row(report, "minibert fp16 against minibert fp32", times, "minibert fp16", "minibert fp32", n, "texts")
    speed_row(report, "ST fp16 against ST fp32", times, "ST fp16", "ST fp32", n, "texts")
    pairs = (("minibert fp32", "ST fp32"), ("minibert fp16", "ST fp16"), ("minibert fp16", "ST fp32"),
             ("ST fp16", "ST fp32"))  # fmt: skip
    cosines = {f"{a} / {b}": min_cosine(vectors[a], vectors[b]) for a, b in pairs}
    report.add("speed", "embeddings agree, min cosine over the texts: "
               + "  ".join(f"{pair} {value:.6f}" for pair, value in cosines.items()), what="embedding agreement",
               min_cosine=cosines, shapes={name: list(v.shape) for name, v in vectors.items()})  # fmt: skip


class embed_call:  # noqa: N801 (used as a function)
    """A call of ``function(texts, batch_size=32, **options)`` that keeps its last result in ``vectors[name]``."""

    def __init__(self, vectors: dict, name: str, function, texts: list[str], **options):
        self.vectors, self.name = vectors, name
        self.arguments = (function, texts, options)

    def __call__(self) -> None:
        function, texts, options = self.arguments
        self.vectors[self.name] = function(texts, batch_size=32, **options)

    def on(self, texts: list[str]) -> embed_call:
        """The same call on other texts (its result kept apart)."""
        function, _, options = self.arguments
        return embed_call({}, self.name, function, texts, **options)


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    cosines = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(cosines.min())


def speed_training(report: Report, checkpoints: Checkpoints, device: torch.device, plan: Plan,
                   texts: list[str]) -> None:  # fmt: skip
    from minibert import BertForSequenceClassification, BertTokenizer
    from minibert.training.run.optimization import AdamWeightDecay, hub_named_parameters

    path = checkpoints.classifier(plan.train_shape, dropout=True)
    tokenizer = BertTokenizer.from_pretrained(path)
    generator = torch.Generator().manual_seed(0)
    rows, count = plan.train_rows, plan.train_batches
    labelled = [(torch.randint(0, NUM_LABELS, (rows,), generator=generator).to(device)) for _ in range(count)]
    chunks = [texts[i * rows : (i + 1) * rows] for i in range(count)]
    padded_random = [{**random_batch(rows, 128, device, generator), "labels": y} for y in labelled]
    longest = [{**encode(tokenizer, chunk, 128, device), "labels": y} for chunk, y in zip(chunks, labelled)]
    to_128 = [{**encode(tokenizer, c, 128, device, "max_length"), "labels": y} for c, y in zip(chunks, labelled)]
    real_tokens = statistics.mean(float(b["attention_mask"].sum()) / rows for b in longest)
    padded_to = statistics.mean(b["input_ids"].shape[1] for b in longest)

    ours = BertForSequenceClassification.from_pretrained(path, device=device).train()
    ours_optimizer = AdamWeightDecay(hub_named_parameters(ours), weight_decay=0.01)
    transformers = transformers_module()
    theirs = load_transformers(transformers.BertForSequenceClassification, path).to(device).train()
    theirs_optimizer = torch.optim.AdamW(theirs.parameters(), lr=LEARNING_RATE)
    for name in ("fp32", "bf16"):
        autocast = torch.bfloat16 if name == "bf16" else None

        def ours_step(batches, skip_padding, autocast=autocast):
            return cycling(batches, minibert_step, ours, ours_optimizer, device, autocast, skip_padding)

        def theirs_step(batches, autocast=autocast):
            return cycling(batches, transformers_step, theirs, theirs_optimizer, device, autocast)

        what = f"train step {plan.train_shape} {rows} rows {name}"
        report.run(f"speed: training {name} padded to 128", train_loop, report, plan, device,
                   f"{what}, random ids, 128", {"minibert": ours_step(padded_random, False),
                                                "transformers": theirs_step(padded_random)}, "minibert")  # fmt: skip
        contenders = {
            "minibert skip_padding": ours_step(longest, True),
            "minibert 128+skip_padding": ours_step(to_128, True),
            "transformers": theirs_step(longest),
        }
        report.run(f"speed: training {name} real text", train_loop, report, plan, device,
                   f"{what}, text ({real_tokens:.0f} tokens/row, longest {padded_to:.0f})", contenders,
                   "minibert skip_padding", "minibert 128+skip_padding")  # fmt: skip


def cycling(batches: list[dict], step, *arguments):
    """A call that runs ``step(*arguments, batch)`` on the next batch, round and round."""
    batches = itertools.cycle(batches)
    return lambda: step(*arguments, next(batches))


def autocast_context(device: torch.device, dtype):
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext()


def minibert_step(model, optimizer, device, autocast, skip_padding: bool, batch: dict) -> None:
    from minibert.training.run.optimization import clip_by_global_norm

    with autocast_context(device, autocast):
        loss = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], labels=batch["labels"],
                     skip_padding=skip_padding).loss  # fmt: skip
    loss.backward()
    clip_by_global_norm(list(model.parameters()), 1.0)
    optimizer.step(LEARNING_RATE)
    optimizer.zero_grad()


def transformers_step(model, optimizer, device, autocast, batch: dict) -> None:
    with autocast_context(device, autocast):
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()


def train_loop(report: Report, plan: Plan, device: torch.device, what: str, contenders: dict, *ours: str) -> None:
    times = interleave(contenders, device, plan.rounds, loop_seconds(report, plan, 1.5), plan.warmup)
    for name in ours:
        speed_row(report, what, times, name, "transformers", plan.train_rows, "rows")


# ----------------------------------------------------------------------------- 3. profile


def profile(report: Report, checkpoints: Checkpoints, device: torch.device, plan: Plan, texts: list[str]) -> None:
    from sentence_transformers import SentenceTransformer

    from minibert import Embedder

    folder, sample = checkpoints.sentence(), texts[: plan.profile_texts]
    for name in ("float16", "float32"):
        embedder = Embedder.from_pretrained(folder, dtype=name, device=device)
        report.run(f"profile minibert {name}", profile_one, report, device, f"minibert Embedder.embed {name}",
                   embed_call({}, name, embedder.embed, sample))  # fmt: skip
    model = SentenceTransformer(str(folder), device=str(device)).half()
    report.run("profile ST float16", profile_one, report, device, "sentence-transformers encode float16",
               embed_call({}, "ST", model.encode, sample, show_progress_bar=False))  # fmt: skip


def profile_one(report: Report, device: torch.device, what: str, call) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    call()  # warm
    sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profiler(activities=activities) as run:
        start = time.perf_counter()
        call()
        sync(device)
        wall = (time.perf_counter() - start) * 1000
    averages = run.key_averages()
    keys = ("cuda_time_total", "device_time_total") if device.type == "cuda" else ("cpu_time_total",)
    table = None
    for key in keys:
        try:
            table = averages.table(sort_by=key, row_limit=12)
            break
        except Exception:  # noqa: BLE001 (the name of the device column changed across torch versions)
            continue
    texts = len(call.arguments[1])
    report.add("profile", f"{what}, {texts} texts: {wall:.1f} ms under the profiler\n{table}", what=what, wall_ms=wall,
               table=table)  # fmt: skip


# ----------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda if available, else cpu")
    parser.add_argument("--quick", action="store_true", help="tiny rounds and batches (to test it on a CPU)")
    parser.add_argument("--out", type=Path, help="the JSON of every row (rewritten after each)")
    parser.add_argument("--sections", default="parity,speed,profile", help="comma-separated (default: all three)")
    parser.add_argument("--budget", type=float, default=270.0, help="seconds; parts not started by then are skipped")
    args = parser.parse_args()
    sections = {name.strip() for name in args.sections.split(",") if name.strip()}
    unknown = sections - {"parity", "speed", "profile"}
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    plan = QUICK if args.quick else FULL
    report = Report(args.out, args.budget)
    warnings.simplefilter("ignore")  # truncation and deprecation notices: the rows are what matters here
    texts = read_texts()
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as folder:
        checkpoints = Checkpoints(Path(folder))
        report.run("header", header, report, device, plan, args.quick)
        for name, function in (("parity", parity), ("speed", speed), ("profile", profile)):
            if name in sections:
                print(f"\n== {name} ({report.elapsed():.0f} s) ==", flush=True)
                report.run(name, function, report, checkpoints, device, plan, texts)
    report.data["seconds"]["total"] = round(report.elapsed(), 1)
    report.save()
    failures, skipped = report.data["failures"], report.data["skipped"]
    print(f"\ndone in {report.elapsed():.0f} s on {report.data['header'].get('gpu', device)}: {len(failures)} parts "
          f"failed{': ' + ', '.join(f['part'] for f in failures) if failures else ''}; {len(skipped)} skipped",
          flush=True)  # fmt: skip
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
