"""Speed and memory of minibert against its references, measured side by side in one run.

    python scripts/bench.py            # the full run the README reports (~10 minutes on 2 cores)
    python scripts/bench.py --quick    # a CI-sized run (~2 minutes)

Each workload runs minibert and its competitor in the same process, interleaved (A B, B A, ...),
with the same thread count; the table reports the median, min and max of the per-round ratio
(competitor time / minibert time: above 1 means minibert is faster), throughput, and the achieved
GFLOP/s against this machine's measured matmul peak. The real-text rows use real text: Python and
numpy docstrings and Django's translation catalogues (see tests/corpus.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_rows import attention_flops, bert_flops, minilm_dir, row, side_by_side, timed  # noqa: E402
from onnx_peer import export_onnx  # noqa: E402

import corpus  # noqa: E402
from minibert.cpu_info import cpu_flags, describe_machine, has_native_bf16  # noqa: E402


def gemm_rates(dtype: torch.dtype, tokens: int = 2048) -> dict[str, float]:
    """GFLOP/s of each GEMM backend this CPU runs (gemm.py) on all-MiniLM-L6-v2's real layer shapes:
    one layer's six projections (4 × H→H, H→F, F→H) on ``tokens`` packed tokens, the Embedder's
    default token budget. The fastest is "the machine's GEMM peak" of the GFLOP/s columns."""
    from torch import nn

    from minibert import packed_linear

    hidden, intermediate = 384, 1536
    x, wide = torch.randn(tokens, hidden, dtype=dtype), torch.randn(tokens, intermediate, dtype=dtype)
    layers = [nn.Linear(hidden, hidden) for _ in range(4)] + [nn.Linear(hidden, intermediate),
                                                            nn.Linear(intermediate, hidden)]  # fmt: skip
    layers = [layer.to(dtype).requires_grad_(False) for layer in layers]
    flops = 2 * tokens * (4 * hidden * hidden + 2 * hidden * intermediate)
    candidates = {"mkl": layers}
    try:
        packed = [packed_linear.PackedLinear(layer) for layer in layers]
        packed[0](x)
        candidates["onednn"] = packed
    except RuntimeError:  # e.g. bf16 without AVX-512: oneDNN refuses
        pass
    rates = {}
    with torch.inference_mode():
        for name, linears in candidates.items():

            def run(linears=linears):
                for linear in linears[:5]:
                    linear(x)
                linears[5](wide)

            run()
            rates[name] = flops / min(timed(run) for _ in range(7)) / 1e9
    return rates


def matmul_peak(dtype: torch.dtype) -> float:
    """The fastest backend's GFLOP/s on the model's GEMM shapes: the ceiling for the GFLOP/s columns."""
    rates = gemm_rates(dtype)
    print(f"GEMM on MiniLM's shapes, 2,048 tokens, {str(dtype).removeprefix('torch.')}: "
          + ", ".join(f"{name} {rate:.0f} GFLOP/s" for name, rate in rates.items()), flush=True)  # fmt: skip
    return max(rates.values())


def mean_pool_in_order(tokenizer, model, texts: list[str], batch_size: int = 32, max_length: int = 256):
    """transformers used the plain way: texts in their order, each batch padded to its longest."""
    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                texts[start : start + batch_size], padding=True, truncation=True, max_length=max_length,
                return_tensors="pt",
            )  # fmt: skip
            states = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            out.append(((states * mask).sum(1) / mask.sum(1)).numpy())
    return np.concatenate(out)


# ----------------------------------------------------------------------------- workloads


def bench_fixed_shape(rounds: int, peak: float):
    """bert-base-shaped forward on a fixed 8x128 batch, fp32, vs transformers' BertModel (sdpa)."""
    import transformers

    from minibert import BertModel

    torch.manual_seed(0)
    config = transformers.BertConfig(attn_implementation="sdpa")
    theirs = transformers.BertModel(config).eval()
    with tempfile.TemporaryDirectory() as directory:
        theirs.save_pretrained(directory)
        ours = BertModel.from_pretrained(directory)
    ids = torch.randint(1000, 30000, (8, 128))
    mask = torch.ones_like(ids)

    def run_ours():
        with torch.inference_mode():
            ours(ids, mask)

    def run_theirs():
        with torch.inference_mode():
            theirs(input_ids=ids, attention_mask=mask)

    ours_times, theirs_times = side_by_side(run_ours, run_theirs, rounds)
    flops = bert_flops([128] * 8, 12, 768, 3072)
    return row(
        "bert-base forward, fixed 8x128, fp32",
        "transformers BertModel (sdpa)",
        ours_times,
        theirs_times,
        ">= 1.0x",
        work=8 * 128,
        unit="tokens",
        flops=flops,
        peak=peak,
    )


def bench_real_text(texts: list[str], rounds: int, peak_fp32: float, peak_bf16: float):
    """Tokenize + forward + mean pool of real text with all-MiniLM-L6-v2 (batch 32, max_length 256)."""
    import transformers
    from sentence_transformers import SentenceTransformer

    from minibert import Embedder

    path = minilm_dir()
    ours = Embedder.from_pretrained(path)
    st_model = SentenceTransformer(path, device="cpu")
    st_model.max_seq_length = 256
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    hf_model = transformers.BertModel.from_pretrained(path, attn_implementation="sdpa").eval()
    lengths = [min(len(ours.tokenizer.piece_ids(t)) + 2, 256) for t in texts]
    tokens = sum(lengths)
    flops = bert_flops(lengths, 6, 384, 1536)

    def run_ours():
        return ours.embed(texts, batch_size=32, max_length=256, progress=False)

    def run_st():
        return st_model.encode(texts, batch_size=32, show_progress_bar=False)

    def run_hf_in_order():
        return mean_pool_in_order(hf_tokenizer, hf_model, texts)

    import warnings

    warnings.simplefilter("ignore")  # the truncation warning is expected here
    rows = []
    ours_times, st_times = side_by_side(run_ours, run_st, rounds)
    rows.append(
        row(
            "real text: tokenize+forward+mean pool, MiniLM fp32",
            "sentence-transformers encode",
            ours_times,
            st_times,
            ">= 1.5x",
            work=tokens,
            unit="tokens",
            flops=flops,
            peak=peak_fp32,
        )
    )
    ours_times, hf_times = side_by_side(run_ours, run_hf_in_order, rounds)
    padded = sum(len(lengths[i : i + 32]) * max(lengths[i : i + 32]) for i in range(0, len(lengths), 32))
    rows.append(
        row(
            "same",
            "transformers, texts in order, padded to longest",
            ours_times,
            hf_times,
            ">= 3.5x",
            work=tokens,
            unit="tokens",
            flops=flops,
            peak=peak_fp32,
            note=f"in-order batches compute {padded / tokens:.2f}x the real tokens",
        )
    )
    if peak_bf16 is None:  # no bf16 units: emulated bf16 is slower than fp32, and would take minutes to time
        print("bf16 row skipped: this CPU has no native bf16 (avx512_bf16 or AMX)", flush=True)
        return rows
    ours_bf16 = Embedder.from_pretrained(path, dtype=torch.bfloat16)

    def run_ours_bf16():
        return ours_bf16.embed(texts, batch_size=32, max_length=256, progress=False)

    bf16_times, fp32_times = side_by_side(run_ours_bf16, run_ours, rounds)
    a, b = run_ours(), run_ours_bf16()
    cosine = ((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min()
    rows.append(
        row(
            "same, dtype=bfloat16",
            "minibert fp32",
            bf16_times,
            fp32_times,
            ">= 2.0x, cos >= 0.999",
            work=tokens,
            unit="tokens",
            flops=flops,
            peak=peak_bf16,
            note=f"min cosine to fp32 {cosine:.5f}",
        )
    )
    return rows


def bench_onnx(texts: list[str], rounds: int, peak: float | None = None):
    """minibert vs ONNX Runtime on the same batches: all-MiniLM-L6-v2 exported to ONNX (torch's
    exporter) and fused by onnxruntime's BERT optimizer (attention, LayerNorm, GELU, bias fusions),
    fp32. minibert runs ``Embedder.embed_pieces`` (its batching, padding, streams, model and mean
    pooling) on the texts' piece ids; ONNX Runtime gets the very batches the Embedder makes (length
    -sorted, token-budgeted, padded), built before the clock starts, and mean-pools them in numpy.
    Tokenizing is left out of both. Needs `pip install onnx onnxruntime` (not a minibert dependency)."""
    import tempfile

    import onnxruntime
    from onnxruntime.transformers import optimizer

    from minibert import Embedder, EmbedOptions
    from minibert.embedding.batches import TOKENS_PER_TEXT, token_budget_batches

    path = minilm_dir()
    embedder = Embedder.from_pretrained(path)
    tokenizer = embedder.tokenizer
    pieces = [tokenizer.piece_ids(text)[:254] for text in texts]
    rows = [tokenizer.build_inputs_with_special_tokens(ids) for ids in pieces]
    lengths = [len(ids) for ids in rows]
    order = sorted(range(len(rows)), key=lambda i: -lengths[i])
    batches = []
    for batch in token_budget_batches(order, lengths, 32 * TOKENS_PER_TEXT):
        width = lengths[batch[0]]
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for position, index in enumerate(batch):
            ids[position, : lengths[index]], mask[position, : lengths[index]] = rows[index], 1
        batches.append((batch, ids, mask))

    with tempfile.TemporaryDirectory() as directory:
        exported = str(export_onnx(path, directory))  # tests/onnx_peer.py: the same export as the int8 peer's
        fused = optimizer.optimize_model(exported, model_type="bert", num_heads=12, hidden_size=384)
        fused_path = f"{directory}/model.fused.onnx"
        fused.save_model_to_file(fused_path)
        fusions = {name: count for name, count in fused.get_fused_operator_statistics().items() if count}
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        session = onnxruntime.InferenceSession(fused_path, options, providers=["CPUExecutionProvider"])

    def run_ours():
        return embedder.embed_pieces(pieces, EmbedOptions(pooling="mean", max_length=256), progress=False)

    def run_ort():
        out = np.empty((len(texts), 384), dtype=np.float32)
        for batch, ids, mask in batches:
            (states,) = session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )
            weights = mask[..., None].astype(np.float32)
            out[batch] = (states * weights).sum(1) / weights.sum(1)
        return out

    a, b = run_ours(), run_ort()
    cosine = ((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min()
    ours_times, ort_times = side_by_side(run_ours, run_ort, rounds)
    fused_names = ", ".join(f"{name} {count}" for name, count in sorted(fusions.items()))
    target = ">= 1.2x (AVX-512)" if "avx512f" in cpu_flags() else ">= 1.05x (AVX2)"
    flops = bert_flops(lengths, 6, 384, 1536)
    return row("MiniLM forward + mean pool, the Embedder's batches, fp32", f"ONNX Runtime {onnxruntime.__version__}, "
               "BERT optimizer fusions", ours_times, ort_times, target, work=sum(lengths), unit="tokens",
               flops=flops, peak=peak, note=f"GEMM {embedder.model.gemm_backend}; max |Δ| {np.abs(a - b).max():.1e}, "
               f"min cosine {cosine:.7f}; fused: {fused_names}")  # fmt: skip


GEMM_OPS = {"aten::addmm", "aten::mm", "mkldnn::_linear_pointwise"}


def bench_profile(texts: list[str], peak: float) -> None:
    """Where an embedding run's time goes, per operation (PyTorch's profiler, the batches on one
    stream: the profiler sees this thread only): the GEMMs (their GFLOP/s against the machine's
    GEMM peak), the attention kernel, and every other operation by its own time."""
    from torch.profiler import ProfilerActivity, profile

    from minibert import Embedder, EmbedOptions

    embedder = Embedder.from_pretrained(minilm_dir())
    pieces = [embedder.tokenizer.piece_ids(text)[:254] for text in texts]
    lengths = [len(ids) + 2 for ids in pieces]
    config = embedder.model.config
    total_flops = bert_flops(lengths, config.num_hidden_layers, config.hidden_size, config.intermediate_size)
    dense = total_flops - attention_flops(lengths, config.num_hidden_layers, config.hidden_size)
    options = EmbedOptions(pooling="mean", max_length=256)

    def run(streams: bool):
        embedder.embed_pieces(pieces, options, progress=False, streams=streams)

    run(False)
    wall = min(timed(lambda: run(False)) for _ in range(3))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        run(False)
        profiled = time.perf_counter() - start
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    seconds = {e.key: e.self_cpu_time_total / 1e6 for e in events if e.self_cpu_time_total > 0}
    gemm = sum(t for key, t in seconds.items() if key in GEMM_OPS)
    print(f"\nWhere the time goes: {len(texts)} texts, {sum(lengths):,} tokens, one stream, GEMM "
          f"{embedder.model.gemm_backend}; {profiled:.2f} s under the profiler, {wall:.2f} s without")  # fmt: skip
    print("| operation | seconds | share | note |\n|---|---|---|---|")
    achieved = dense / gemm / 1e9
    print(
        f"| GEMMs ({', '.join(sorted(k for k in seconds if k in GEMM_OPS))}) | {gemm:.2f} | "
        f"{100 * gemm / profiled:.0f}% | {achieved:.0f} GFLOP/s, {100 * achieved / peak:.0f}% of the GEMM peak |"
    )
    shown = 0
    for key, t in seconds.items():
        if key in GEMM_OPS or shown >= 14:
            continue
        print(f"| {key} | {t:.3f} | {100 * t / profiled:.1f}% | |")
        shown += 1
    rest = profiled - sum(seconds.values())
    print(f"| Python and the profiler (time in no operation) | {rest:.2f} | {100 * rest / profiled:.0f}% | |")
    whole = total_flops / wall / 1e9
    print(
        f"whole run without the profiler: {whole:.0f} GFLOP/s over all of BERT's FLOPs, "
        f"{100 * whole / peak:.0f}% of the GEMM peak ({peak:.0f} GFLOP/s)"
    )


def bench_streams(texts: list[str], rounds: int):
    """What the parallel streams (streams.py) bring: ``Embedder.embed`` as shipped against the
    same call with every batch run one after the other on all threads."""
    import warnings

    from minibert import Embedder

    embedder = Embedder.from_pretrained(minilm_dir())
    lengths = [min(len(embedder.tokenizer.piece_ids(text)) + 2, 256) for text in texts]

    def run_in_streams():
        return embedder.embed(texts, max_length=256, progress=False)

    def run_one_stream():
        return embedder.embed(texts, max_length=256, progress=False, streams=False)

    warnings.simplefilter("ignore")  # the truncation warning is expected here
    a, b = run_in_streams(), run_one_stream()
    ours_times, one_times = side_by_side(run_in_streams, run_one_stream, rounds)
    return row("real text: Embedder.embed, MiniLM fp32, parallel streams", "the same, one stream on all threads",
               ours_times, one_times, "> 1.0x", work=sum(lengths), unit="tokens",
               note=f"{torch.get_num_threads()} threads; max |Δ| {np.abs(a - b).max():.1e}")  # fmt: skip


def bench_pretrain_step(rounds: int) -> list[dict]:
    """One pre-training step (scripts/bench_pretrain.py's, its default BERT-mini shapes): minibert
    fp32 and minibert --bf16 against transformers' BertForPreTraining + torch.optim.AdamW, the three
    interleaved in one run. The bf16 row says what training/precision.py warns about: bf16 autocast
    pays where the CPU multiplies bf16 faster than float32 (AMX), not on avx512_bf16 alone."""
    from bench_pretrain import Shapes, time_steps

    shapes = Shapes()
    bf16 = has_native_bf16()
    times, first_loss = time_steps(shapes, rounds, bf16=bf16)
    theirs, work = times["transformers + AdamW"], shapes.batch * shapes.tokens
    rows = [row("pre-training step, fp32", "transformers BertForPreTraining + AdamW", times["minibert"], theirs,
                ">= 1.0x", work=work, unit="tokens", note=shapes.describe())]  # fmt: skip
    if not bf16:
        print("pre-training bf16 row skipped: this CPU has no native bf16 (avx512_bf16 or AMX)", flush=True)
        return rows
    against_fp32 = [fp32 / ours for fp32, ours in zip(times["minibert"], times["minibert --bf16"])]
    amx = "AMX" if "amx_bf16" in cpu_flags() else "no AMX: slower than fp32 expected"
    rows.append(row("same, --bf16 (autocast)", "transformers BertForPreTraining + AdamW", times["minibert --bf16"],
                    theirs, f"> minibert fp32 with AMX ({amx})", work=work, unit="tokens",
                    note=f"{statistics.median(against_fp32):.2f}x minibert fp32 ({min(against_fp32):.2f}–"
                    f"{max(against_fp32):.2f}); first loss {first_loss['minibert --bf16']:.4f} vs fp32 "
                    f"{first_loss['minibert']:.4f}"))  # fmt: skip
    return rows


def finetune_batches(texts: list[str], batches: int, batch_size: int = 32, length: int = 128):
    """Real text as ``minibert finetune`` feeds it: Features (N, 128) padded to --max-seq-length as
    Google's, two random labels; and the rows of each batch, in order."""
    from minibert.tokenizer import BertTokenizer
    from minibert.training.finetune.features import Features

    tokenizer = BertTokenizer.from_pretrained(minilm_dir())
    encoded = tokenizer(texts[: batches * batch_size], padding="max_length", truncation=True, max_length=length)
    ids, mask = np.asarray(encoded["input_ids"], np.int64), np.asarray(encoded["attention_mask"], np.int64)
    labels = np.random.default_rng(0).integers(0, 2, len(ids))
    features = Features(ids, mask, np.zeros_like(ids), labels)
    return features, [np.arange(start, start + batch_size) for start in range(0, len(ids), batch_size)]


PROBLEM = "single_label_classification"


def finetune_contenders(features, rows: list[np.ndarray]) -> dict:
    """Each contender: one fine-tuning step on every batch of ``rows`` (dropout 0.1, fp32)."""
    import transformers

    from minibert.training.distributed import World
    from minibert.training.finetune.head import load_classifier
    from minibert.training.step import AdamWeightDecay, classification_sums, hub_named_parameters, update

    def theirs(cut: bool):
        model = transformers.BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01, eps=1e-6)
        batches = [{k: torch.from_numpy(v) for k, v in features.batch(r).items()} if cut else
                   {"input_ids": torch.from_numpy(features.input_ids[r]), "input_mask": torch.from_numpy(
                    features.input_mask[r]), "label_ids": torch.from_numpy(features.label_ids[r])} for r in rows]

        def steps():
            for batch in batches:
                loss = model(input_ids=batch["input_ids"], attention_mask=batch["input_mask"],
                             labels=batch["label_ids"]).loss  # fmt: skip
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            return loss.item()

        return steps

    def ours(cut: bool):
        model = load_classifier(minilm_dir(), ["0", "1"], PROBLEM, continues=False, dropout=None, seed=0)
        named, world = hub_named_parameters(model), World()
        parameters, optimizer = [p for _, p in named], AdamWeightDecay(named)
        batches = [{k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in features.batch(r).items()} if cut else
                   {"input_ids": torch.from_numpy(features.input_ids[r]), "input_mask": torch.from_numpy(
                    features.input_mask[r]), "segment_ids": torch.from_numpy(features.segment_ids[r]),
                    "label_ids": torch.from_numpy(features.label_ids[r])} for r in rows]  # fmt: skip

        def steps():
            for batch in batches:
                loss, value, _ = classification_sums(model, batch, len(batch["label_ids"]), PROBLEM)
                loss.backward()
                update(parameters, optimizer, 2e-5, world, 1.0)
            return value

        return steps

    return {"minibert (finetune: cut to the batch's longest)": ours(True),
            "transformers + AdamW, padded to the longest": theirs(True),
            "minibert, padded to 128": ours(False), "transformers + AdamW, padded to 128": theirs(False)}  # fmt: skip


def bench_finetune_step(texts: list[str], rounds: int, batches: int = 4) -> list[dict]:
    """Fine-tuning steps of all-MiniLM-L6-v2 (fp32, batch 32, --max-seq-length 128, real text):
    minibert's step (training/step.py, as ``minibert finetune`` runs it) against transformers'
    BertForSequenceClassification + torch.optim.AdamW on the same batches, each padded as it pads
    by default (minibert: Features.batch cuts to the batch's longest, and the encoder computes the
    real tokens only; transformers: DataCollatorWithPadding pads to the longest), and both on
    batches padded to 128. The four are
    interleaved (bench_pretrain.interleave); tokens/s counts real tokens."""
    from bench_pretrain import interleave

    features, rows = finetune_batches(texts, batches)
    times, _ = interleave(finetune_contenders(features, rows), rounds)
    names = list(times)
    real = int(sum(features.input_mask[r].sum() for r in rows))
    longest = np.mean([features.input_mask[r].sum(1).max() for r in rows])
    note = (f"{batches} steps of 32 real texts, {real / batches / 32:.0f} real tokens each on average, "
            f"batches' longest {longest:.0f} on average; dropout 0.1; {torch.get_num_threads()} threads")
    return [row("fine-tuning steps, MiniLM fp32, each padded by default", "transformers BertForSequenceClassification"
                " + AdamW, padded to the longest", times[names[0]], times[names[1]], ">= 1.5x (moonshot 2x)",
                work=real, unit="real tokens", note=note),
            row("same, both padded to 128", "the same, padded to 128", times[names[2]], times[names[3]], ">= 1.0x",
                work=real, unit="real tokens", note=note)]  # fmt: skip


def bench_tokenizer(texts: list[str], rounds: int):
    """One text per call, real text: minibert (pure Python) vs HF tokenizers (Rust)."""
    from tokenizers import Tokenizer

    from minibert import BertTokenizer

    path = minilm_dir()
    ours = BertTokenizer.from_pretrained(path)
    rust = Tokenizer.from_file(str(Path(path) / "tokenizer.json"))
    rust.no_truncation()
    rust.no_padding()
    sample = [text for text in texts if len(text) < 400]

    def run_ours():
        for text in sample:
            ours(text)

    def run_rust():
        for text in sample:
            rust.encode(text)

    ours_times, rust_times = side_by_side(run_ours, run_rust, rounds)
    mean_chars = statistics.mean(map(len, sample))
    return row(
        f"tokenizer, one text per call ({mean_chars:.0f} chars avg)",
        "HF tokenizers (Rust) encode",
        ours_times,
        rust_times,
        ">= 1.0x",
        work=len(sample),
        unit="texts",
    )


def bench_import(rounds: int):
    ours_code = "import minibert; minibert.BertModel"
    theirs_code = "import transformers; transformers.BertModel"

    def run(code):
        return lambda: subprocess.run(
            [sys.executable, "-c", code], check=True, env=dict(os.environ, PYTHONPATH=str(ROOT))
        )

    ours_times, theirs_times = side_by_side(run(ours_code), run(theirs_code), rounds)
    result = row(
        "import minibert (+ BertModel)", "import transformers + BertModel", ours_times, theirs_times, "<= 0.6x the time"
    )
    result["note"] = f"time ratio minibert/transformers = {1 / result['ratio_median']:.2f}"
    return result


def bench_cold_start(rounds: int):
    """One sentence through the CLI, from a cold process, against the floor every torch program
    pays: `python -c "import torch"`. Target: at most that + 0.8 s on the bundled MiniLM."""
    command = [sys.executable, "-m", "minibert", "embed", "--model", minilm_dir(), "one sentence"]
    floor = [sys.executable, "-c", "import torch"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def run(argv):
        return lambda: subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    ours_times, theirs_times = side_by_side(run(command), run(floor), rounds)
    extra = statistics.median(ours_times) - statistics.median(theirs_times)
    result = row("minibert embed 'one sentence' (cold)", 'python -c "import torch"', ours_times, theirs_times,
                 "<= import torch + 0.8 s")  # fmt: skip
    result["note"] = (
        f"{statistics.median(ours_times):.2f} s vs {statistics.median(theirs_times):.2f} s: "
        f"+{extra:.2f} s over import torch"
    )
    return result


MEMORY_PROBE = r"""
import sys, json, os
import torch
def status(field):  # /proc/self/status, in bytes; VmHWM is this process's peak RSS (reset at exec)
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
def rss():
    return status("VmRSS")
which, path = sys.argv[1], sys.argv[2]
import time
if which == "minibert":
    import minibert.weights, minibert.model, minibert.formats.tf_checkpoint, safetensors.torch
    base = rss()
    start = time.perf_counter()
    model = minibert.BertModel.from_pretrained(path)
else:
    import transformers
    base = rss()
    start = time.perf_counter()
    model = transformers.BertModel.from_pretrained(path)
seconds = time.perf_counter() - start
peak = status("VmHWM")
print(json.dumps({"base": base, "peak": peak, "seconds": seconds}))
"""


def _probe(which: str, directory) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, which, str(directory)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_tf_checkpoint(rounds: int):
    """Loading Google's TensorFlow checkpoint of a bert-base-shaped model (CRC32C of every tensor
    checked) against loading the same weights from model.safetensors: time and peak memory, each
    load in a fresh process, interleaved. Needs a Python with TensorFlow to write the checkpoint
    (MINIBERT_TF_PYTHON, or this one)."""
    tf_python = os.environ.get("MINIBERT_TF_PYTHON", sys.executable)
    if subprocess.run([tf_python, "-c", "import tensorflow"], capture_output=True).returncode != 0:
        print("tf: skipped (no TensorFlow: set MINIBERT_TF_PYTHON)", flush=True)
        return None
    import transformers

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as directory:
        hub, google = Path(directory) / "hub", Path(directory) / "uncased_L-12_H-768_A-12"
        transformers.BertModel(transformers.BertConfig()).save_pretrained(hub)
        (hub / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
        subprocess.run([tf_python, str(ROOT / "scripts" / "make_tf_checkpoint.py"), str(hub), str(google)],
                       check=True, capture_output=True)  # fmt: skip
        size = (hub / "model.safetensors").stat().st_size
        tf_times, st_times, tf_memory, st_memory = [], [], [], []
        for _ in range(rounds):
            for source, times, memory in ((google, tf_times, tf_memory), (hub, st_times, st_memory)):
                probe = _probe("minibert", source)
                times.append(probe["seconds"])
                memory.append((probe["peak"] - probe["base"]) / size)
    ratios = sorted(st / tf for st, tf in zip(st_times, tf_times))
    return {
        "workload": "load bert-base from Google's TF checkpoint (CRC32C checked)",
        "against": "minibert loading model.safetensors",
        "target": "report",
        "ratio_median": statistics.median(ratios),
        "ratio_min": ratios[0],
        "ratio_max": ratios[-1],
        "note": f"TF {statistics.median(tf_times):.2f} s, safetensors {statistics.median(st_times):.2f} s; "
        f"peak memory TF {statistics.median(tf_memory):.2f}x, safetensors {statistics.median(st_memory):.2f}x "
        "the weights",
    }


def bench_memory():
    """Peak RSS above the process baseline while loading bert-base-shaped weights (safetensors)."""
    import transformers

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as directory:
        transformers.BertModel(transformers.BertConfig()).save_pretrained(directory)
        size = (Path(directory) / "model.safetensors").stat().st_size
        results = {}
        for which in ("minibert", "transformers"):
            probe = _probe(which, directory)
            results[which] = (probe["peak"] - probe["base"]) / size
    return {
        "workload": "peak memory loading bert-base weights (440 MB safetensors)",
        "against": "the weights' size",
        "target": "<= 1.3x",
        "ratio_median": results["minibert"],
        "ratio_min": results["minibert"],
        "ratio_max": results["minibert"],
        "note": f"minibert {results['minibert']:.2f}x the file size, transformers {results['transformers']:.2f}x",
    }


def bench_window_scaling(sizes: list[int]):
    """Embedder(long_text="window") time per token as the text grows: flat means linear work.
    (Not a side-by-side row: no peer embeds one text longer than its model in windows.)"""
    from minibert import Embedder

    embedder = Embedder.from_pretrained(minilm_dir())
    words = " ".join(corpus.docstrings()).split()
    print("\nlong_text='window', one text, time per token:", flush=True)
    results = []
    for tokens in sizes:
        text, ids = "", []
        count = max(1, int(tokens * 0.8))
        while len(ids) < tokens:  # grow the text until it has the wanted number of pieces
            text = " ".join(words[i % len(words)] for i in range(count))
            ids = embedder.tokenizer.piece_ids(text)
            count = int(count * tokens / max(1, len(ids))) + 1
        ids = ids[:tokens]
        text = embedder.tokenizer.decode(ids)
        pieces = len(embedder.tokenizer.piece_ids(text))
        seconds = timed(lambda text=text: embedder.embed([text], long_text="window"))
        results.append((pieces, seconds))
        print(f"  {pieces:>9,} tokens: {seconds:8.2f} s, {1e6 * seconds / pieces:7.1f} µs/token", flush=True)
    # The assembly of a text's token vectors from its windows alone, up to 1M tokens (the model's
    # part is fixed-size windows: linear by construction, and measured above).
    import numpy as np

    from minibert.embedding.embedder import _assemble_tokens
    from minibert.tokenizer.encoding import window_starts

    room, dim = embedder.max_length - 2, embedder.model.config.hidden_size
    print("assembly of windows alone:", flush=True)
    for tokens in (1_000, 10_000, 100_000, 1_000_000):
        parts = [(start, np.zeros((min(room, tokens - start) + 2, dim), np.float32), None)
                 for start in window_starts(tokens, room, room // 2)]  # fmt: skip
        seconds = timed(lambda parts=parts: _assemble_tokens(parts))
        print(f"  {tokens:>9,} tokens: {seconds:8.3f} s, {1e6 * seconds / tokens:7.2f} µs/token", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer texts and rounds (for CI)")
    parser.add_argument("--json", help="also write the rows to this file")
    workloads = (
        "fixed, text, streams, onnx, int8, profile, pretrain, finetune, tokenizer, import, cold, memory, tf, window"
    )
    parser.add_argument("--only", nargs="*", help=f"workload names: {workloads}")
    parser.add_argument(
        "--window-sizes",
        default="1000,10000,100000,1000000",
        help="token counts for the 'window' workload (comma-separated)",
    )
    args = parser.parse_args()
    rounds = 3 if args.quick else 7
    texts = corpus.benchmark_texts(300 if args.quick else 3000)
    only = set(args.only or ["fixed", "text", "streams", "onnx", "profile", "pretrain", "finetune", "tokenizer",
                             "import", "cold", "memory", "tf"])  # fmt: skip
    print(describe_machine(), flush=True)
    peak_fp32 = peak_bf16 = None
    if only & {"fixed", "text", "onnx", "profile"}:  # the GFLOP/s ceiling (bf16: only with bf16 units)
        peak_fp32 = matmul_peak(torch.float32)
        peak_bf16 = matmul_peak(torch.bfloat16) if has_native_bf16() else None
        bf16 = f"{peak_bf16:.0f} GFLOP/s" if peak_bf16 else "not measured (no native bf16)"
        print(f"matmul peak: fp32 {peak_fp32:.0f} GFLOP/s, bf16 {bf16}", flush=True)
    rows = []
    if "fixed" in only:
        rows.append(bench_fixed_shape(rounds, peak_fp32))
    if "text" in only:
        rows.extend(bench_real_text(texts, max(3, rounds // 2), peak_fp32, peak_bf16))
    if "streams" in only:
        rows.append(bench_streams(texts, rounds))
    if "onnx" in only:
        try:
            rows.append(bench_onnx(texts, rounds, peak_fp32))
        except ModuleNotFoundError as missing:  # an optional peer: the other rows still count
            print(f"ONNX Runtime row skipped: {missing.name} is not installed (pip install onnx onnxruntime)")
    if "int8" in only:  # only when asked: it exports and quantizes two models (scripts/bench_int8.py)
        try:
            from bench_int8 import bench_int8

            rows.extend(bench_int8(texts, rounds))
        except ModuleNotFoundError as missing:
            print(f"int8 rows skipped: {missing.name} is not installed (pip install onnx onnxruntime)")
    if "profile" in only:
        bench_profile(texts, peak_fp32)
    if "pretrain" in only:
        rows.extend(bench_pretrain_step(rounds))
    if "finetune" in only:
        rows.extend(bench_finetune_step(texts, rounds))
    if "tokenizer" in only:
        rows.append(bench_tokenizer(texts, rounds))
    if "import" in only:
        rows.append(bench_import(rounds))
    if "cold" in only:
        rows.append(bench_cold_start(rounds))
    if "memory" in only:
        rows.append(bench_memory())
    if "tf" in only and (row_tf := bench_tf_checkpoint(rounds)) is not None:
        rows.append(row_tf)
    if "window" in only:
        bench_window_scaling([int(size) for size in args.window_sizes.split(",")])
    print()
    print("| workload | against | target | ratio median (min–max) | minibert throughput | GFLOP/s | note |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['ratio_median']:.2f}x ({r['ratio_min']:.2f}–{r['ratio_max']:.2f})"
        print(
            f"| {r['workload']} | {r['against']} | {r['target']} | {ratio} | {r.get('throughput', '')} | "
            f"{r.get('gflops', '')} | {r.get('note', '')} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
