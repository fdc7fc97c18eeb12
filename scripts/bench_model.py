"""scripts/bench.py's rows on the model itself: this CPU's GEMM peak on MiniLM's layer shapes (the
ceiling of every GFLOP/s column), bert-base's forward on a fixed batch against transformers
(``--only fixed``), and where an embedding run's time goes, operation by operation (``--only profile``).
bench.py imports these after putting tests/ on the path; the rows are built by bench_rows.py.
"""

from __future__ import annotations

import tempfile
import time

import torch
from bench_rows import attention_flops, bert_flops, minilm_dir, row, side_by_side, timed


def gemm_rates(dtype: torch.dtype, tokens: int = 2048) -> dict[str, float]:
    """GFLOP/s of each GEMM backend this CPU runs (speed/gemm.py) on all-MiniLM-L6-v2's real layer shapes:
    one layer's six projections (4 × H→H, H→F, F→H) on ``tokens`` packed tokens, the Embedder's
    default token budget. The fastest is "the machine's GEMM peak" of the GFLOP/s columns."""
    from torch import nn

    from minibert.speed import packed_linear

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
