"""gpu_check.py's speed rows: forward, Embedder.embed against sentence-transformers, training steps;
minibert and the reference alternating round by round."""

from __future__ import annotations

import itertools
import statistics
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import torch
from gpu_setup import (
    DTYPES,
    LEARNING_RATE,
    NUM_LABELS,
    Checkpoints,
    Plan,
    Report,
    encode,
    load_transformers,
    random_batch,
    sync,
    transformers_module,
)


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
    folder, texts = checkpoints.sentence(), texts[: plan.embed_texts]
    warm = texts[: min(256, max(8, len(texts) // 8))]
    vectors: dict[str, np.ndarray] = {}
    contenders = {}
    names = ("minibert fp32", "ST fp32", "minibert fp16", "ST fp16", "minibert fp16 by sequence",
             "minibert fp16 one pass", "minibert fp16 batch 256")  # fmt: skip
    for name in names:  # each loaded and warmed up, guarded
        call = report.run(f"speed: embedding, {name} ready", embed_contender, folder, device, name, texts, warm,
                          vectors)  # fmt: skip
        if call is not None:
            contenders[name] = call
    if not contenders:
        return
    times = interleave(contenders, device, plan.embed_rounds, loop_seconds(report, plan, 3), 0)
    n = len(texts)
    pairs = (("minibert fp32", "ST fp32", f"Embedder.embed minilm {n} texts fp32"),
             ("minibert fp16", "ST fp16", f"Embedder.embed minilm {n} texts fp16"),
             ("minibert fp16", "minibert fp32", "minibert fp16 against minibert fp32"),
             ("minibert fp16 by sequence", "ST fp16", f"Embedder.embed minilm {n} texts fp16, speed/varlen.py"),
             ("ST fp16", "ST fp32", "ST fp16 against ST fp32"),
             ("minibert fp16", "minibert fp16 one pass", "fp16, next chunk tokenized ahead / one pass"),
             ("minibert fp16 batch 256", "minibert fp16", "fp16, batch_size 256 / 32 (token budget)"))  # fmt: skip
    for ours, theirs, what in pairs:
        if ours in times and theirs in times:
            speed_row(report, what, times, ours, theirs, n, "texts")
    pairs = (("minibert fp32", "ST fp32"), ("minibert fp16", "ST fp16"), ("minibert fp16", "ST fp32"),
             ("minibert fp16 by sequence", "minibert fp16"), ("minibert fp16 one pass", "minibert fp16"),
             ("minibert fp16 batch 256", "minibert fp16"), ("ST fp16", "ST fp32"))  # fmt: skip
    present = [(a, b) for a, b in pairs if a in vectors and b in vectors]
    cosines = {f"{a} / {b}": min_cosine(vectors[a], vectors[b]) for a, b in present}
    deltas = {f"{a} / {b}": float(np.abs(vectors[a].astype(np.float64) - vectors[b]).max()) for a, b in present}
    report.add("speed", "embeddings agree (1 - min cosine, max |Δ|): " + "  ".join(
        f"{pair} {1 - cosines[pair]:.1e}, {deltas[pair]:.1e}" for pair in cosines), what="embedding agreement",
        min_cosine=cosines, max_delta=deltas, shapes={name: list(v.shape) for name, v in vectors.items()})  # fmt: skip


def embed_contender(folder: Path, device: torch.device, name: str, texts: list[str], warm: list[str],
                    vectors: dict) -> embed_call:  # fmt: skip
    """minibert's ``Embedder.embed`` or sentence-transformers' ``encode``, in fp32 or fp16 (``name``), run
    once on the ``warm`` texts."""
    fp16 = "fp16" in name
    if name.startswith("minibert"):
        from minibert import Embedder

        embedder = Embedder.from_pretrained(folder, dtype="float16" if fp16 else "float32", device=device)
        embed = embedder.embed
        if name.endswith("by sequence"):
            embed = by_sequence(embed)
        elif name.endswith("one pass"):  # every text tokenized before the first batch, as before chunks.py
            embed = one_pass(embed)
        elif name.endswith("batch 256"):  # 16,384 padded tokens a batch: fewer, larger launches
            embed = with_batch_size(embed, 256)
        call = embed_call(vectors, name, embed, texts)
    else:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(folder), device=str(device))
        model = model.half() if fp16 else model
        call = embed_call(vectors, name, model.encode, texts, convert_to_numpy=True, show_progress_bar=False)
    call.on(warm)()
    return call


@contextmanager
def attending_by_sequence(on: bool):
    """speed/varlen.py on or off while the block runs (it is read as each forward lays out its tokens)."""
    from minibert.speed import varlen

    before, varlen.ON_GPU = varlen.ON_GPU, on
    try:
        yield
    finally:
        varlen.ON_GPU = before


@contextmanager
def attending_in_groups(on: bool):
    """Length groups in training on the GPU too (speed/fast_path.py's GROUPS_IN_TRAINING_ON, the CPU's
    only by default) while the block runs: whether they pay where a step is mostly launches."""
    from minibert.speed import fast_path

    before = fast_path.GROUPS_IN_TRAINING_ON
    fast_path.GROUPS_IN_TRAINING_ON = before | {"cuda"} if on else before
    try:
        yield
    finally:
        fast_path.GROUPS_IN_TRAINING_ON = before


def by_sequence(function):
    """``function`` with packed sequences attending by sequence while it runs."""

    def call(*args, **options):
        with attending_by_sequence(True):
            return function(*args, **options)

    return call


def one_pass(function):
    """``function`` with the Embedder tokenizing every text first, as on a CPU (embedding/chunks.py)."""
    from minibert.embedding import chunks

    def call(*args, **options):
        before, chunks.tokenizes_ahead = chunks.tokenizes_ahead, lambda device: False
        try:
            return function(*args, **options)
        finally:
            chunks.tokenizes_ahead = before

    return call


def with_batch_size(function, batch_size: int):
    """``function`` with ``batch_size`` in place of the one it is called with."""

    def call(*args, **options):
        return function(*args, **{**options, "batch_size": batch_size})

    return call


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
    length = plan.train_length
    padded_random = [{**random_batch(rows, length, device, generator), "labels": y} for y in labelled]
    longest = [{**encode(tokenizer, chunk, length, device), "labels": y} for chunk, y in zip(chunks, labelled)]
    padded = [{**encode(tokenizer, c, length, device, "max_length"), "labels": y} for c, y in zip(chunks, labelled)]
    real_tokens = statistics.mean(float(b["attention_mask"].sum()) / rows for b in longest)
    padded_to = statistics.mean(b["input_ids"].shape[1] for b in longest)

    ours = BertForSequenceClassification.from_pretrained(path, device=device).train()
    ours_optimizer = AdamWeightDecay(hub_named_parameters(ours), weight_decay=0.01)
    transformers = transformers_module()
    theirs = load_transformers(transformers.BertForSequenceClassification, path).to(device).train()
    theirs_optimizer = torch.optim.AdamW(theirs.parameters(), lr=LEARNING_RATE)
    for name in ("fp32", "bf16"):
        autocast = torch.bfloat16 if name == "bf16" else None

        def ours_step(batches, skip_padding, autocast=autocast, by_sequence=False, in_groups=False, host=True):
            batches = [inputs_on_the_cpu(batch) for batch in batches] if host else batches  # as finetune's loop
            return cycling(batches, minibert_step, ours, ours_optimizer, device, autocast, skip_padding, by_sequence,
                           in_groups)  # fmt: skip

        def theirs_step(batches, autocast=autocast):
            return cycling(batches, transformers_step, theirs, theirs_optimizer, device, autocast)

        what = f"train step {plan.train_shape} {rows} rows {name}"
        report.run(f"speed: training {name} padded to {length}", train_loop, report, plan, device,
                   f"{what}, random ids, {length}", {"minibert": ours_step(padded_random, False),
                                                "transformers": theirs_step(padded_random)}, "minibert")  # fmt: skip
        contenders = {  # (finetune skips padding; "padded" keeps it, as transformers does: which pays on this GPU)
            "minibert skip_padding": ours_step(longest, True),
            "minibert skip_padding, inputs on the GPU": ours_step(longest, True, host=False),  # (the mask read there)
            "minibert by sequence": ours_step(longest, True, by_sequence=True),  # speed/varlen.py
            "minibert in groups": ours_step(longest, True, in_groups=True),  # as on a CPU: fast_path.py
            "minibert padded": ours_step(longest, False),
            f"minibert {length}+skip_padding": ours_step(padded, True),
            "transformers": theirs_step(longest),
        }
        report.run(f"speed: training {name} real text", train_loop, report, plan, device,
                   f"{what}, text ({real_tokens:.0f} tokens/row, longest {padded_to:.0f})", contenders,
                   "minibert skip_padding", "minibert skip_padding, inputs on the GPU", "minibert by sequence",
                   "minibert in groups", "minibert padded", f"minibert {length}+skip_padding")  # fmt: skip


def inputs_on_the_cpu(batch: dict) -> dict:
    """A batch whose model inputs stay on the CPU, as ``minibert finetune`` gives them (loop.py's
    forward_and_backward: the model checks them and lays out the mask there, without waiting for
    the GPU, and copies them over); the labels stay on the device."""
    return {**batch, **{name: batch[name].cpu() for name in ("input_ids", "attention_mask", "token_type_ids")}}


def cycling(batches: list[dict], step, *arguments):
    """A call that runs ``step(*arguments, batch)`` on the next batch, round and round."""
    batches = itertools.cycle(batches)
    return lambda: step(*arguments, next(batches))


def autocast_context(device: torch.device, dtype):
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext()


def minibert_step(model, optimizer, device, autocast, skip_padding: bool, by_sequence: bool, in_groups: bool,
                  batch: dict) -> None:  # fmt: skip
    from minibert.training.run.optimization import clip_by_global_norm

    with attending_by_sequence(by_sequence), attending_in_groups(in_groups), autocast_context(device, autocast):
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


