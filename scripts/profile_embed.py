"""Where the time of an embedding run goes, and how fast minibert could be at best.

    python scripts/profile_embed.py              # 3,000 real texts (~3 minutes on 2 cores)
    python scripts/profile_embed.py --texts 600

Runs ``Embedder.embed`` (all-MiniLM-L6-v2, fp32, mean pooling, max_length 256) under the PyTorch
profiler and splits its time into three parts:

* matrix multiplications (``addmm``/``mm``, or oneDNN's ``_linear_pointwise``: the projections;
  bench_model.GEMM_OPS, the set of scripts/bench.py's profile), with their achieved GFLOP/s against
  this machine's measured matmul peak;
* attention: the fused kernel (``scaled_dot_product_attention``) and, for the short sequences that
  this CPU's measured verdict writes out (fast_path.written_out), that formula's two batched matmuls
  (``bmm``) and its ``_softmax``, as docs/performance.md counts them;
* everything else: LayerNorm, GELU, packing, bias copies, tokenization, Python.

It then times minibert, transformers batching the same texts in order (padded to the longest of
each batch of 32) and sentence-transformers side by side: one warm-up call each, then --rounds
rounds, the order turning every round (bench_rows.in_turn, as scripts/bench.py times). It prints
the ratio they reach today (median of the rounds, min–max) and the ratio minibert would reach if
everything but the matmuls and attention took no time at all: a ceiling for any further
work that keeps fp32 and PyTorch's kernels. The CPU is printed first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "src"))  # this checkout's minibert, whatever is installed
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from bench_model import GEMM_OPS, matmul_peak  # noqa: E402
from bench_rows import attention_flops, bert_flops, in_turn, minilm_dir  # noqa: E402
from bench_text import mean_pool_in_order  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import corpus  # noqa: E402
from minibert.speed.cpu import describe_machine  # noqa: E402

# The written-out attention's own operations (Q·Kᵀ and ·V, the softmax): attention's time, not the GEMMs'.
WRITTEN_OUT_ATTENTION = {"aten::bmm", "aten::baddbmm", "aten::_softmax"}


def split(events) -> dict[str, dict[str, float]]:
    """The profiler's events (``prof.key_averages()``) by part: {"matrix multiplications": {operation:
    seconds of its own time}, "attention": {...}}; what neither holds is "everything else"."""
    parts: dict[str, dict[str, float]] = {"matrix multiplications": {}, "attention": {}}
    for event in events:
        if event.key in GEMM_OPS:
            part = "matrix multiplications"
        elif "scaled_dot_product" in event.key or event.key in WRITTEN_OUT_ATTENTION:
            part = "attention"
        else:
            continue
        parts[part][event.key] = event.self_cpu_time_total / 1e6
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=3000, help="how many real texts (default 3000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the comparison (default 3)")
    args = parser.parse_args()
    print(describe_machine(), flush=True)
    warnings.simplefilter("ignore")  # the truncation warning is expected here

    import transformers
    from sentence_transformers import SentenceTransformer

    from minibert import Embedder

    path = minilm_dir()
    texts = corpus.benchmark_texts(args.texts)
    embedder = Embedder.from_pretrained(path)
    lengths = [min(len(embedder.tokenizer.piece_ids(text)) + 2, 256) for text in texts]
    config = embedder.model.config
    total_flops = bert_flops(lengths, config.num_hidden_layers, config.hidden_size, config.intermediate_size)
    attention_work = attention_flops(lengths, config.num_hidden_layers, config.hidden_size)
    dense = total_flops - attention_work  # the projections and the feed-forward network

    def run_ours(streams: bool = True):
        embedder.embed(texts, batch_size=32, max_length=256, progress=False, streams=streams)

    run_ours()  # warm-up
    # The profiler records the operations of the thread that runs it, so the split is taken with
    # the batches on one stream (this thread, all threads); the timings below use the streams.
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        run_ours(streams=False)
        total = time.perf_counter() - start
    parts = split(prof.key_averages())
    gemm, attention = (sum(parts[part].values()) for part in ("matrix multiplications", "attention"))
    other = total - gemm - attention  # also holds the profiler's own overhead: the ceiling below is generous

    st_model = SentenceTransformer(path, device="cpu")
    st_model.max_seq_length = 256
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.BertModel.from_pretrained(path, attn_implementation="sdpa").eval()
    times = in_turn({  # one warm-up call each, then A B C, B C A, ...: a slow spell of the machine hits all three
        "minibert": run_ours,
        "sentence-transformers": lambda: st_model.encode(texts, batch_size=32, show_progress_bar=False),
        "transformers in order": lambda: mean_pool_in_order(tokenizer, model, texts),
    }, args.rounds)  # fmt: skip
    ours, st, in_order = (statistics.median(times[name]) for name in ("minibert", "sentence-transformers",
                                                                       "transformers in order"))  # fmt: skip

    peak = matmul_peak(torch.float32)
    print(f"{len(texts)} texts, {sum(lengths):,} real tokens; matmul peak {peak:.0f} GFLOP/s fp32")
    print(f"minibert embed: {total:.1f} s under the profiler, on one stream")
    achieved, operations = dense / gemm / 1e9, ", ".join(sorted(parts["attention"]))
    for name, seconds, note in (
        ("matrix multiplications", gemm, f"{achieved:.0f} GFLOP/s, {100 * achieved / peak:.0f}% of peak"),
        ("attention", attention, f"{attention_work / attention / 1e9:.0f} GFLOP/s: {operations}"),
        ("everything else", other, "LayerNorm, GELU, packing, bias copies, tokenizer, Python"),
    ):  # fmt: skip
        print(f"  {name:<24} {seconds:6.1f} s  {100 * seconds / total:4.1f}%  {note}")
    floor = ours * (gemm + attention) / total  # this run's time with "everything else" free (shares of one stream)
    print(f"\nwithout the profiler, medians of {args.rounds} interleaved rounds: minibert {ours:.1f} s, "
          f"sentence-transformers {st:.1f} s, transformers in order {in_order:.1f} s")  # fmt: skip
    for name, ceiling in (("sentence-transformers", " with everything else free"), ("transformers in order", "")):
        ratios = sorted(theirs / mine for mine, theirs in zip(times["minibert"], times[name]))
        print(f"ratio vs {name}: {statistics.median(ratios):.2f}x now ({ratios[0]:.2f}–{ratios[-1]:.2f}), at most "
              f"{statistics.median(times[name]) / floor:.2f}x{ceiling}")  # fmt: skip


if __name__ == "__main__":
    main()
