"""scripts/bench.py's rows on real text: tokenize, forward and pool with all-MiniLM-L6-v2 against
sentence-transformers and transformers (``--only text``), against ONNX Runtime on the Embedder's own
batches (``onnx``), the parallel streams against one stream (``streams``), the tokenizer against
HF tokenizers (``tokenizer``), and long texts in windows as they grow (``window``).
bench.py imports these after putting tests/ on the path; the rows are built by bench_rows.py.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import numpy as np
import torch
from bench_rows import bert_flops, in_turn, minilm_dir, row, side_by_side, timed

from minibert.speed.cpu import cpu_flags


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
    return [*rows, bf16_row(path, texts, run_ours, rounds, work=tokens, flops=flops, peak=peak_bf16)]


def bf16_row(path: str, texts: list[str], run_fp32, rounds: int, *, work: int, flops: float, peak: float) -> dict:
    """The same embedding with dtype=bfloat16 against minibert fp32 (``run_fp32``): speed, and the
    smallest cosine between the two vectors of a text."""
    from minibert import Embedder

    ours_bf16 = Embedder.from_pretrained(path, dtype=torch.bfloat16)

    def run_ours_bf16():
        return ours_bf16.embed(texts, batch_size=32, max_length=256, progress=False)

    bf16_times, fp32_times = side_by_side(run_ours_bf16, run_fp32, rounds)
    a, b = run_fp32(), run_ours_bf16()
    cosine = ((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min()
    return row("same, dtype=bfloat16", "minibert fp32", bf16_times, fp32_times, ">= 2.0x, cos >= 0.999", work=work,
               unit="tokens", flops=flops, peak=peak, note=f"min cosine to fp32 {cosine:.5f}")  # fmt: skip


def bench_onnx(texts: list[str], rounds: int, peak: float | None = None):
    """minibert vs ONNX Runtime on the same batches: all-MiniLM-L6-v2 exported to ONNX (torch's
    exporter) and fused by onnxruntime's BERT optimizer (attention, LayerNorm, GELU, bias fusions),
    fp32. minibert runs ``Embedder.embed_pieces`` (its batching, padding, streams, model and mean
    pooling) on the texts' piece ids; ONNX Runtime gets the very batches the Embedder makes (length
    -sorted, token-budgeted, padded), built before the clock starts, and mean-pools them in numpy.
    Tokenizing is left out of both. Needs `pip install onnx onnxruntime` (not a minibert dependency)."""

    import onnxruntime
    from onnx_peer import export_onnx  # tests/onnx_peer.py
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


def bench_tokenizer(texts: list[str], rounds: int) -> list[dict]:
    """One text per call, real text: minibert (pure Python) vs HF tokenizers (Rust). Two rows.

    * New text, what a user gets: every round loads a fresh tokenizer of each kind (untimed), so
      each round tokenizes texts its tokenizer has never seen. minibert's tokenizer caches each
      word's pieces and each character's class as it meets them; this pass fills those caches.
    * The same texts again through one tokenizer that has already seen them (its caches full): a
      long-running process over repeated text. Not the figure for new text.
    """
    from minibert import BertTokenizer

    path = minilm_dir()
    sample = [text for text in texts if len(text) < 400]
    mean_chars = statistics.mean(map(len, sample))

    def encode_ours(tokenizer):
        for text in sample:
            tokenizer(text)

    def encode_rust(tokenizer):
        for text in sample:
            tokenizer.encode(text)

    fresh = {}  # the tokenizers of this round, loaded before the clock starts

    def load_ours():
        fresh["ours"] = BertTokenizer.from_pretrained(path)

    def load_rust():
        fresh["rust"] = _rust_tokenizer(path)

    times = in_turn({"ours": lambda: encode_ours(fresh["ours"]), "rust": lambda: encode_rust(fresh["rust"])}, rounds,
                    before={"ours": load_ours, "rust": load_rust})  # fmt: skip
    first_pass = row(f"tokenizer, one text per call, {len(sample):,} new texts ({mean_chars:.0f} chars avg): "
                     "a fresh tokenizer each round", "HF tokenizers (Rust) encode, a fresh one each round",
                     times["ours"], times["rust"], ">= 1.0x", work=len(sample), unit="texts",
                     note="texts the tokenizer has not seen: minibert's word cache starts empty")  # fmt: skip
    ours, rust = BertTokenizer.from_pretrained(path), _rust_tokenizer(path)
    times = in_turn({"ours": lambda: encode_ours(ours), "rust": lambda: encode_rust(rust)}, rounds)
    again = row("same texts again, one tokenizer that has seen them", "HF tokenizers (Rust) encode", times["ours"],
                times["rust"], "report", work=len(sample), unit="texts",
                note="minibert's word cache already holds every word: repeated text only")  # fmt: skip
    return [first_pass, again]


def _rust_tokenizer(path: str):
    """HF tokenizers' Tokenizer from the model's tokenizer.json, as its encode is timed: no
    truncation, no padding."""
    from tokenizers import Tokenizer

    rust = Tokenizer.from_file(str(Path(path) / "tokenizer.json"))
    rust.no_truncation()
    rust.no_padding()
    return rust


def bench_window_scaling(sizes: list[int]):
    """Embedder(long_text="window") time per token as the text grows: flat means linear work.
    (Not a side-by-side row: no peer embeds one text longer than its model in windows.)"""
    import corpus  # tests/corpus.py
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
    # The assembly of a text's token vectors from its windows alone, at the same sizes (the model's
    # part is fixed-size windows: linear by construction, and measured above). Its memory grows with
    # the size: 1M tokens hold ~2.9 GB of windows.
    import numpy as np

    from minibert.embedding.windows import assemble_tokens
    from minibert.tokenizer.encoding import window_starts

    room, dim = embedder.max_length - 2, embedder.model.config.hidden_size
    print("assembly of windows alone:", flush=True)
    for tokens in sizes:
        parts = [(start, np.zeros((min(room, tokens - start) + 2, dim), np.float32), None)
                 for start in window_starts(tokens, room, room // 2)]  # fmt: skip
        seconds = timed(lambda parts=parts: assemble_tokens(parts))
        print(f"  {tokens:>9,} tokens: {seconds:8.3f} s, {1e6 * seconds / tokens:7.2f} µs/token", flush=True)
    return results
