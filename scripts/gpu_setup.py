"""gpu_check.py's set-up: what a run measures (Plan), how it reports (Report), the checkpoints it makes
(random weights, transformers' layout), the texts and batches."""

from __future__ import annotations

import gc
import json
import os
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

# Offline and quiet, set here once: gpu_check.py, gpu_parity.py and gpu_speed.py import this module before
# anything that reads them (transformers and sentence-transformers are imported where they are used).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MINILM = ROOT / ".gpu" / "minilm"
TEXTS = ROOT / ".gpu" / "texts.txt"
TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
SHAPES = {
    "minilm": {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536},
    "bert-base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
    "tiny": {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512},  # --quick
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
    train_length: int = 128
    train_batches: int = 8
    rounds: int = 30
    warmup: int = 3
    loop_seconds: float = 4.0
    profile_texts: int = 96


FULL = Plan()
QUICK = Plan(parity_texts=3, parity_length=32, parity_shapes=("minilm",), tokenizer_texts=256, forward_shape="tiny",
             forward_batches=((2, 64), (1, 128)), embed_texts=16, embed_rounds=1, train_shape="tiny", train_rows=2,
             train_length=32, train_batches=2, rounds=1, warmup=1, loop_seconds=1.0, profile_texts=8)  # fmt: skip


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
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.out.with_name(self.out.name + ".tmp")
            temporary.write_text(json.dumps(self.data, indent=1, default=str))
            os.replace(temporary, self.out)
        except (OSError, TypeError, ValueError) as error:  # the rows are printed anyway
            print(f"could not write {self.out}: {error}", flush=True)

    def run(self, name: str, function, *args):
        """``function(*args)``, guarded: a failure is printed and recorded, and the run goes on (None returned)."""
        if self.left() <= 0:
            print(f"SKIPPED (past --budget {self.budget_s:.0f} s): {name}", flush=True)
            self.data["skipped"].append(name)
            self.save()
            return None
        start = time.perf_counter()
        try:
            return function(*args)
        except Exception:  # noqa: BLE001 (one shot on the device: record it and go on)
            lines = traceback.format_exc().strip().splitlines()
            last = "\n    ".join(lines[-6:])
            print(f"SECTION FAILED: {name}:\n    {last}", flush=True)
            self.data["failures"].append({"part": name, "traceback": lines[-30:]})
            return None
        finally:
            self.data["seconds"][name] = round(time.perf_counter() - start, 2)
            free_memory()
            self.save()


def free_memory() -> None:
    if torch.cuda.is_available():  # (on a CPU, reference counting frees the models; gc.collect takes seconds)
        gc.collect()
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


