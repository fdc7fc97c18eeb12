"""Loading in int8 without silent wrong numbers: each model is measured against its float32 self.

int8 (int8.py) is an approximation, and how good depends on the model: a checkpoint with a few huge
activations (outliers) quantizes far worse than one without. So ``load_int8`` runs the model on
``CALIBRATION_TEXTS`` in float32, quantizes it, runs it again, and compares the two sentence vectors
of each text (the encoder's last hidden states, mean-pooled over the real tokens: what every head and
the Embedder read, computed as the Embedder computes them, padding skipped): if the worst cosine
falls below ``COSINE_FLOOR`` the model is refused for int8 with the measured figure, never run. The
verdict is cached with the other measurements (cache.py: ~/.cache/minibert/gemm.json), keyed by the
checkpoint file (path, size, modification time, inode, change time), the CPU and torch: a later load
of the same file pays nothing.

Before quantizing, ``choose_library`` picks the int8 GEMM library (int8.LIBRARIES: FBGEMM or oneDNN)
the way gemm.py picks float32's: each one that runs here is timed against float32 on one layer's six
projections (``int8_speedups``: measure.py's one rule, like bf16's), once per CPU, torch, thread
count and shapes, and cached; ``$MINIBERT_INT8`` (fbgemm, onednn, auto) names one instead. The
cosine verdict is kept per library, since their numbers may differ (docs/int8.md).

The same module says once per process, as a warning, where int8 is measured slower than float32 on
this CPU, or where the CPU has no int8 dot-product instructions (AVX-512 VNNI, AVX-VNNI, AMX) and FBGEMM
emulates them: int8 still runs (it was asked for by name), and the user learns what it buys here.
``dtype="fastest"`` never picks int8: it changes the numbers more than bfloat16 does, so it is always
asked for by name.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import QuantizationError
from ..inputs import AS_ASKED
from ..loading.config_fields import LABEL_FIELDS
from ..loading.hub import HubOptions
from .cache import cache_key, read_cache, write_cache
from .cpu import cpu_name
from .int8 import (
    LIBRARIES,
    LIBRARY_NAMES,
    Int8Linear,
    has_int8_dot_product,
    library_unavailable,
    quantize,
    refuse_if_unable,
)
from .int8_twin import Int8Source, file_signature
from .measure import time_candidates_against_float32

log = logging.getLogger("minibert.int8")

# The worst cosine (int8 vs float32, per calibration text) a model may show and still be run in
# int8. ONNX Runtime's dynamic int8 export of all-MiniLM-L6-v2 measures 0.969 at worst on 800 real
# texts (issue 42, Zen 4); minibert's int8 of the models the tests load measures above 0.98 on these
# texts (docs/int8.md). 0.95 leaves room for models a little harder than those, and refuses the
# ones where int8 has changed what a text means (cosines of 0.9 and below).
COSINE_FLOOR = 0.95  # a change of the recipe (int8.py) or the calibration bumps cache.CACHE_VERSION
CALIBRATION_TEXTS = (
    "I love Paris",
    "She is a MachineLearning Engineer and works in California",
    "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi river bank.",
    "Les élèves ont réussi l'examen. Ученики сдали экзамен. 学生们通过了考试。 🎉",
    "Return a new sorted list from the items in iterable. A custom key function can be supplied to customize "
    "the sort order, and the reverse flag can be set to request the result in descending order.",
    "How do I restart a pod in Kubernetes?",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "1 2 3 4 5 6 7 8 9 10 — numbers, dates (2024-05-01) and $12.50 prices",
)
SPECIAL_TOKENS = 2  # [CLS] and [SEP]: the fewest positions a tokenized text takes
SPEED_TOKENS = 1024  # rows of the int8-vs-float32 timing: what one embedding batch gives a GEMM
# oneDNN must be this much faster than FBGEMM to be chosen: FBGEMM is the library the accuracy figures
# were first measured on (docs/int8.md), and a tie should not flip between runs with the machine's noise.
LIBRARY_MARGIN = 0.05
_warned: set[str] = set()
INT8_INSTRUCTIONS = "AVX-512 VNNI, AVX-VNNI or AMX"  # what has_int8_dot_product looks for


@dataclass(frozen=True)
class Int8Library:
    """The int8 GEMM library a model runs on, and what it measured against float32 here."""

    name: str  # int8.LIBRARIES
    speedup: float  # float32 seconds / int8 seconds, one layer's six projections (int8_speedups)
    reason: str  # "measured" (this process or cached: the same verdict) or "MINIBERT_INT8"


@dataclass(frozen=True)
class Int8Check:
    """How close a model loaded in int8 stays to its float32 self on the calibration texts."""

    mean_cosine: float
    worst_cosine: float
    texts: int
    reason: str  # "measured" or "cached"


@dataclass(frozen=True)
class LoadedFrom:
    """What from_pretrained read a model from: the files it resolved, and the name, revision and hub
    options it resolved them with, which the calibration's tokenizer is read with too (the same
    repository, revision and cache). The hub options are used while loading and never kept on the
    model (a token is a secret): what the model keeps is ``int8_twin.Int8Source``, the files."""

    config_file: Path
    weights_file: Path
    name_or_path: str
    revision: str | None = None
    hub: HubOptions = field(default_factory=HubOptions)


def load_int8(model: nn.Module, loaded_from: LoadedFrom | None = None, release=None) -> Int8Check:
    """Quantize ``model`` (int8.quantize) and check it against float32 on the calibration texts
    (or take the cached verdict for this checkpoint file); refuse it below ``COSINE_FLOOR``.

    ``release`` (a mapped checkpoint's, seam.py): each layer's float32 pages are given back once the
    float32 reference has run through it, and each projection's once it is in int8, so the whole
    float32 model is never held beside its int8 layers."""
    refuse_if_unable(model)  # before the calibration runs the model (on "meta" it would fail deep inside torch)
    config = getattr(model, "bert", model).config
    library = choose_library(config.hidden_size, config.intermediate_size)
    batch = calibration_batch(model, loaded_from)
    weights_file = None if loaded_from is None else loaded_from.weights_file
    key = _check_key(weights_file, library.name, config, batch) if weights_file is not None else None
    if loaded_from is not None:  # float32_twin reads these files again, and refuses if they have changed since
        model.int8_source = Int8Source.of(loaded_from.config_file, weights_file)
    cached = _cached_check(key)
    if cached is None:
        before = sentence_vectors(model, batch, release)  # (texts, H) float32
        quantize(model, release, library.name)
        cosines = F.cosine_similarity(before, sentence_vectors(model, batch), dim=1)  # (texts,)
        check = Int8Check(float(cosines.mean()), float(cosines.min()), len(cosines), "measured")
        if key is not None and math.isfinite(check.worst_cosine) and math.isfinite(check.mean_cosine):
            write_cache(key, {"int8_mean_cosine": check.mean_cosine, "int8_worst_cosine": check.worst_cosine,
                              "texts": check.texts})  # fmt: skip
    else:
        quantize(model, release, library.name)
        check = cached
    from .malloc import hand_back_freed_memory

    hand_back_freed_memory()  # the float32 projections quantize freed leave the process's RSS (docs/int8.md)
    model.int8_check = check
    source = getattr(model, "name_or_path", "this model")
    if not check.worst_cosine >= COSINE_FLOOR:  # (a NaN cosine is no pass)
        raise QuantizationError(
            f"{source}: refused for dtype='int8': its int8 sentence vectors reach a cosine of only "
            f"{check.worst_cosine:.6f} to float32 on the worst of {check.texts} calibration texts (mean "
            f"{check.mean_cosine:.4f}; the floor is {COSINE_FLOOR}); load it in float32"
        )
    log.info("%s in int8: cosine to float32 %.4f mean, %.4f worst on %d calibration texts (%s; %s's int8 GEMMs)",
             source, check.mean_cosine, check.worst_cosine, check.texts, check.reason, library.name)  # fmt: skip
    _say_what_int8_buys(config, library)
    return check


def calibration_batch(model: nn.Module, loaded_from: LoadedFrom | None = None) -> dict[str, torch.Tensor]:
    """``CALIBRATION_TEXTS`` through the checkpoint's tokenizer (``calibration_tokenizer``), padded
    and cut to the model's positions (at most 128 tokens); a checkpoint without a tokenizer of its
    vocabulary (weights only), or a model of one position (no room for a text's [CLS] and [SEP]:
    the tokenizer would refuse ``max_length=1``), gets the same number of rows of seeded random ids,
    32 of them or as many as the model has positions: whatever loads in float32 loads in int8."""
    config = getattr(model, "bert", model).config
    longest = min(128, config.max_position_embeddings)  # a model of 32 positions loads in float32: in int8 too
    if longest < SPECIAL_TOKENS:
        log.debug("int8 calibration on random ids (the model has %d position: no room for [CLS] and [SEP])", longest)
        tokenizer = None
    else:
        tokenizer = calibration_tokenizer(model, loaded_from)
    if tokenizer is not None:
        return dict(tokenizer(list(CALIBRATION_TEXTS), padding=True, truncation=True, max_length=longest,
                              return_tensors="pt"))  # fmt: skip
    generator = torch.Generator().manual_seed(0)
    first = 1000 if config.vocab_size > 2000 else 0  # BERT's vocabularies keep [unused] and special pieces below 1000
    input_ids = torch.randint(first, config.vocab_size, (len(CALIBRATION_TEXTS), min(32, longest)), generator=generator)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}


def calibration_tokenizer(model: nn.Module, loaded_from: LoadedFrom | None = None):
    """The checkpoint's tokenizer, read from where the model was (its name, revision and hub
    options), or None where there is none, or where its ids reach past the model's ``vocab_size``
    (``config.check_vocabulary``: the folder's tokenizer is another model's, and the calibration
    would fail on the model's own input check, as if the user's input were wrong)."""
    from dataclasses import asdict

    from ..tokenizer.bert_tokenizer import BertTokenizer

    name = loaded_from.name_or_path if loaded_from is not None else getattr(model, "name_or_path", None)
    try:
        if loaded_from is None:
            tokenizer = BertTokenizer.from_pretrained(name)
        else:
            tokenizer = BertTokenizer.from_pretrained(name, revision=loaded_from.revision, **asdict(loaded_from.hub))
        getattr(model, "bert", model).config.check_vocabulary(tokenizer.vocab, f"{name}'s tokenizer")
        return tokenizer
    except Exception as error:  # noqa: BLE001 - no vocabulary beside the weights: random ids still measure
        log.debug("int8 calibration on random ids (no tokenizer of this model at %s: %s)", name, error)
        return None


def sentence_vectors(model: nn.Module, batch: dict[str, torch.Tensor], release=None) -> torch.Tensor:
    """The encoder's last hidden states mean-pooled over each row's real tokens: (B, H) float32,
    computed as the Embedder computes them, padding skipped (``skip_padding=True``). In int8 that is
    no detail: each projection quantizes its input from the range of every row it is given, so [PAD]
    rows computed would widen the step the real tokens get, and a text's figure would change with the
    padding the batch's longest text gives it (MiniLM's "ok" beside a text of 170 tokens: 0.967, where
    the Embedder's vectors give 0.975): not the vectors a user gets. ``release``: called on each encoder layer's weights
    once the layer has run."""
    from .packed_linear import encoder_layers

    body = getattr(model, "bert", model)  # a model with heads holds the encoder as .bert

    def give_back(layer, args, output) -> None:  # (returns None: the layer's output stays as it is)
        for parameter in layer.parameters():
            release(parameter)

    hooks = [layer.register_forward_hook(give_back) for layer in (encoder_layers(body) if release else [])]
    try:
        with torch.inference_mode():
            out = body(**batch, skip_padding=True, **AS_ASKED)  # (AS_ASKED: not config's outputs)
            states = out.last_hidden_state.float()  # (B, T, H)
    finally:
        for hook in hooks:
            hook.remove()
    mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)  # (B, T, 1)
    return (states * mask).sum(1) / mask.sum(1).clamp_min(1)


def _check_key(weights_file: Path, library: str, config, batch: dict[str, torch.Tensor]) -> str | None:
    """The cosine verdict's key: the machine (cache.cache_key; no thread count changes a cosine), the
    int8 library, the checkpoint file, down to its inode and change time, and what else decides the
    cosine: the config the weights run under (``hidden_act``, ``layer_norm_eps``, ...: hub revisions
    that change only config.json share one weights file) and the calibration ids (the vocabulary)."""
    signature = file_signature(weights_file)  # size, mtime, inode, ctime of each file: a replaced one is measured again
    if signature is None:
        return None
    files = [f"{size} bytes, mtime {mtime}, inode {inode}, ctime {ctime}" for size, mtime, inode, ctime in signature]
    computed = {name: value for name, value in config.to_dict().items() if name not in LABEL_FIELDS}  # (not labels)
    settings = hashlib.sha256(json.dumps(computed, sort_keys=True, default=str).encode()).hexdigest()[:16]
    ids = hashlib.sha256(batch["input_ids"].numpy().tobytes()).hexdigest()[:16]
    return cache_key("int8 vs float32", f"library {library}", str(Path(weights_file).resolve()), *files,
                     f"config {settings}", f"calibration ids {ids}", threads=False)  # fmt: skip


def _cached_check(key: str | None) -> Int8Check | None:
    record = read_cache().get(key) if key is not None else None
    if not isinstance(record, dict):
        return None
    mean, worst, texts = record.get("int8_mean_cosine"), record.get("int8_worst_cosine"), record.get("texts")
    if not all(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
               for value in (mean, worst, texts)):  # fmt: skip
        return None
    return Int8Check(float(mean), float(worst), int(texts), "cached")


# --- is int8 faster here? -------------------------------------------------------------------------


def choose_library(hidden: int, intermediate: int) -> Int8Library:
    """The int8 GEMM library for a model of these shapes: ``$MINIBERT_INT8`` where it names one
    (refused if it cannot run here), else the one measured fastest against float32 here
    (``int8_speedups``), FBGEMM unless oneDNN is ``LIBRARY_MARGIN`` faster."""
    requested = os.environ.get("MINIBERT_INT8", "auto").strip().lower() or "auto"
    if requested != "auto" and requested not in LIBRARIES:
        raise ValueError(f"MINIBERT_INT8 must be one of auto, {', '.join(LIBRARIES)}; got {requested!r}")
    if requested != "auto":
        reason = library_unavailable(requested)
        if reason is not None:
            raise QuantizationError(f"MINIBERT_INT8 asks for {requested}, which cannot run here: {reason}")
        return Int8Library(requested, int8_speedups(hidden, intermediate)[requested], "MINIBERT_INT8")
    speedups = int8_speedups(hidden, intermediate)
    faster = speedups.get("onednn", 0.0) > speedups["fbgemm"] * (1 + LIBRARY_MARGIN)
    name = "onednn" if faster else "fbgemm"
    return Int8Library(name, speedups[name], "measured")


def int8_speedups(hidden: int, intermediate: int, budget: float = 0.4) -> dict[str, float]:
    """{library: float32 seconds / int8 seconds} for one encoder layer's six projections (4 × H→H,
    H→F, F→H) on ``SPEED_TOKENS`` rows of random data, at the process's thread count, for each int8
    library that runs here: the best of the same interleaved rounds, float32 and every library, within
    ``budget`` seconds per library (at least three, the first a warm-up:
    ``measure.time_candidates_against_float32``). float32 runs on the faster of the GEMM backends
    a float32 model may run on here (MKL, oneDNN prepacked). Cached per CPU, torch, threads
    and shapes."""
    key = cache_key("int8 speed vs float32", f"{hidden}x{intermediate}")
    record = read_cache().get(key)
    speedups = record.get("speedups") if isinstance(record, dict) else None
    if (isinstance(speedups, dict) and isinstance(speedups.get("fbgemm"), float)
            and all(name in LIBRARIES and isinstance(value, float) for name, value in speedups.items())):  # fmt: skip
        return speedups
    candidates = {library: functools.partial(Int8Linear, library=library) for library in LIBRARIES
                  if library_unavailable(library) is None}  # fmt: skip
    times = time_candidates_against_float32(hidden, intermediate, candidates, tokens=SPEED_TOKENS,
                                            budget=budget * len(candidates), max_rounds=24, min_rounds=3)  # fmt: skip
    speedups = {library: round(measured.speedup, 3) for library, measured in times.items()}
    float32_backend = next((measured.float32_backend for measured in times.values()), None)  # (one for all)
    log.debug("int8 speed vs float32 on %s: %s", float32_backend, speedups)
    write_cache(key, {"speedups": speedups, "float32_backend": float32_backend})
    return speedups


def _say_what_int8_buys(config, library: Int8Library) -> None:
    """One warning per process and shape where int8 is not what it is on a CPU made for it: slower
    than float32 here (it buys no speed), or faster but without int8 dot-product instructions (FBGEMM
    emulates them with two AVX2 instructions and a 16-bit intermediate, so it gains far less than the
    2-4x such CPUs show; the library that runs named: oneDNN emulates them too)."""
    shapes = f"{config.hidden_size}x{config.intermediate_size}"
    if shapes in _warned:
        return
    dot_product = has_int8_dot_product()
    speedup = library.speedup
    if speedup > 1.0 and dot_product:
        return
    _warned.add(shapes)
    if speedup <= 1.0:
        why = "" if dot_product else f" (no int8 dot-product instructions: {INT8_INSTRUCTIONS})"
        log.warning("int8 (%s) measured %.2fx float32 (on its faster GEMM library here) on %s%s for %s "
                    "projections: dtype='int8' runs, but buys no speed here", library.name, speedup, cpu_name(), why,
                    shapes)  # fmt: skip
    else:
        log.warning("int8 (%s) measured %.2fx float32 on %s for %s projections: this CPU has no int8 dot-product "
                    "instructions (%s), so %s emulates them with AVX2 and int8 gains less here than on a CPU "
                    "that has them", library.name, speedup, cpu_name(), shapes, INT8_INSTRUCTIONS,
                    LIBRARY_NAMES[library.name])  # fmt: skip
