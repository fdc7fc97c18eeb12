"""The int8 rows of scripts/bench.py (``--only int8``): minibert's dtype="int8" against ONNX Runtime's
dynamic int8 model (exported and quantized as sentence-transformers ships it: tests/onnx_peer.py)
and against minibert float32, on the same length-sorted batches of real text, for all-MiniLM-L6-v2
and a bert-base shape (random weights, MiniLM's vocabulary); the cosine of each to float32; the
peak RSS of each after loading and embedding, each in a fresh process.

Run alone: ``python scripts/bench_int8.py [--quick] [--texts N] [--rounds N] [--models minilm,bert-base]``.
Every row needs ONNX Runtime (``pip install onnx onnxruntime``): without it the script says so in one
line before loading anything.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # corpus and onnx_peer: the tests' real text and ONNX peer
sys.path.insert(0, str(Path(__file__).resolve().parent))

import onnx_peer  # noqa: E402
from bench_rows import bert_flops, in_turn, minilm_dir, row  # noqa: E402
from needs import need_onnx  # noqa: E402

import corpus  # noqa: E402


def bert_base_dir(directory: Path) -> Path:
    """A bert-base-shaped checkpoint (12 layers, H 768, F 3072) with random weights and MiniLM's vocabulary."""
    import transformers

    torch.manual_seed(0)
    transformers.BertModel(transformers.BertConfig()).save_pretrained(directory)
    shutil.copy(Path(minilm_dir()) / "vocab.txt", directory / "vocab.txt")
    return directory


def bench_int8_model(name: str, path: str, texts: list[str], rounds: int, directory: Path) -> list[dict]:
    """Three side-by-side rows for one model: int8 vs ONNX Runtime int8, int8 vs float32 (minibert),
    and the cosines of both int8s to float32 in the notes."""
    from minibert import Embedder, EmbedOptions
    from minibert.embedding.batches import TOKENS_PER_TEXT

    fp32, int8 = Embedder.from_pretrained(path), Embedder.from_pretrained(path, dtype="int8")
    config = fp32.model.config
    pieces = [fp32.tokenizer.piece_ids(text)[:254] for text in texts]
    rows = [fp32.tokenizer.build_inputs_with_special_tokens(ids) for ids in pieces]
    lengths = [len(ids) for ids in rows]
    batches = onnx_peer.padded_batches(rows, 32 * TOKENS_PER_TEXT)
    quantized = onnx_peer.quantize_int8(onnx_peer.export_onnx(path, directory))
    session = onnx_peer.session(quantized, torch.get_num_threads())
    options = EmbedOptions(pooling="mean", max_length=256, normalize=False)

    def run(embedder):
        return lambda: embedder.embed_pieces(pieces, options, progress=False)

    def run_ort():
        return onnx_peer.mean_pooled(session, batches, len(rows), config.hidden_size)

    from minibert.speed.int8 import int8_layers

    linear_bytes = sum(param.numel() * 4 for name, param in fp32.model.named_parameters()
                       if name.startswith("layers.") and "norm" not in name.lower())  # fmt: skip
    int8_bytes = sum(layer.stored_bytes() for _, layer in int8_layers(int8.model))
    memory = (f"linear layers by content: int8 {int8_bytes / 2**20:.1f} MiB, float32 {linear_bytes / 2**20:.1f} MiB "
              f"({int8_bytes / linear_bytes:.3f}x)")  # fmt: skip
    exact, ours, theirs = run(fp32)(), run(int8)(), run_ort()
    ours_cos, theirs_cos = onnx_peer.cosines(exact, ours), onnx_peer.cosines(exact, theirs)
    accuracy = (f"cosine to fp32: minibert int8 mean {ours_cos.mean():.4f} worst {ours_cos.min():.4f}, ORT int8 mean "
                f"{theirs_cos.mean():.4f} worst {theirs_cos.min():.4f}")  # fmt: skip
    flops = bert_flops(lengths, config.num_hidden_layers, config.hidden_size, config.intermediate_size)
    import onnxruntime

    times = in_turn({"int8": run(int8), "ort": run_ort, "fp32": run(fp32)}, rounds)
    ort_name = f"ONNX Runtime {onnxruntime.__version__} dynamic int8 (per-channel weights, as sentence-transformers " \
               "exports it)"  # fmt: skip
    return [
        row(f"{name} forward + mean pool, int8", ort_name, times["int8"], times["ort"], ">= 1.0x", work=sum(lengths),
            unit="tokens", note=accuracy),
        row(f"{name} forward + mean pool, int8", f"minibert float32 (GEMM {fp32.model.gemm_backend})", times["int8"],
            times["fp32"], ">= 2x", work=sum(lengths), unit="tokens",
            note=f"{flops / 1e9:.0f} GFLOP per run; {memory}"),
        row(f"{name}: ONNX Runtime int8 (context: what the peer's int8 buys on this CPU)",
            f"minibert float32 (GEMM {fp32.model.gemm_backend})", times["ort"], times["fp32"], "report",
            work=sum(lengths), unit="tokens"),
    ]  # fmt: skip


PROBE = """
import json, sys
sys.path.insert(0, sys.argv[4])
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
which, path, texts = sys.argv[1], sys.argv[2], json.loads(open(sys.argv[3]).read())
import torch
if which == "ort":
    import onnx_peer
    session = onnx_peer.session(sys.argv[5], torch.get_num_threads())
    rows = json.loads(open(sys.argv[6]).read())
    onnx_peer.mean_pooled(session, onnx_peer.padded_batches(rows, 2048), len(rows), int(sys.argv[7]))
else:
    from minibert import Embedder
    Embedder.from_pretrained(path, dtype=which).embed(texts, progress=False)
import gc; gc.collect()
print(json.dumps({"peak": status("VmHWM:"), "after": status("VmRSS:")}))
"""


def bench_peak_rss(path: str, texts: list[str], quantized: Path, hidden: int, directory: Path) -> dict:
    """Peak RSS of a fresh process that loads the model and embeds ``texts``: minibert float32,
    minibert int8, ONNX Runtime int8."""
    from minibert import BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(path)
    rows = [tokenizer.build_inputs_with_special_tokens(tokenizer.piece_ids(text)[:254]) for text in texts]
    (directory / "texts.json").write_text(json.dumps(texts))
    (directory / "rows.json").write_text(json.dumps(rows))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    peaks = {}
    for which in ("float32", "int8", "ort"):
        out = subprocess.run([sys.executable, "-c", PROBE, which, path, str(directory / "texts.json"),
                              str(ROOT / "tests"), str(quantized), str(directory / "rows.json"), str(hidden)],
                             capture_output=True, text=True, check=True, env=env)  # fmt: skip
        peaks[which] = {key: value / 2**20 for key, value in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    return peaks


def bench_int8(texts: list[str], rounds: int, models=("minilm", "bert-base")) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        directory = Path(directory)
        checkpoints = {"minilm": lambda: ("MiniLM-L6", minilm_dir()),
                       "bert-base": lambda: ("bert-base shape", str(bert_base_dir(directory / "base")))}  # fmt: skip
        unknown = sorted(set(models) - set(checkpoints))
        if unknown:
            raise SystemExit(f"unknown model {unknown[0]!r}: the models are {', '.join(checkpoints)}")
        for name, path in (checkpoints[model]() for model in models):
            work = directory / name.replace(" ", "-")
            work.mkdir()
            found = bench_int8_model(name, path, texts, rounds, work)
            peaks = bench_peak_rss(path, texts[:200], work / "model_qint8.onnx", 384 if "MiniLM" in name else 768,
                                   work)  # fmt: skip
            found[1]["note"] += "; RSS peak / after (load + embed 200 texts, fresh process): " + ", ".join(
                f"{which} {peak['peak']:.0f} / {peak['after']:.0f} MiB" for which, peak in peaks.items())
            rows.extend(found)
            for found_row in found:
                print(json.dumps(found_row), flush=True)
    print(classifier_labels(), flush=True)
    return rows


def classifier_labels() -> str:
    """The share of labels int8 changes on a real classification head: rxnfp's 50 reaction classes
    (rxnfp==0.1.0, installed --no-deps) on 40 real reaction types (tests/reactions.py)."""
    try:
        import rxnfp
    except ImportError:
        return "classifier: rxnfp is not installed (pip install --no-deps rxnfp==0.1.0): labels not measured"
    from reactions import REACTIONS, rxnfp_words

    from minibert.apps.verify_int8 import compare_int8_with_float32

    directory = str(Path(rxnfp.__file__).parent / "models" / "transformers" / "bert_ft_10k_25s")
    report = compare_int8_with_float32(directory, [rxnfp_words(reaction) for reaction in REACTIONS])
    return (f"classifier (rxnfp's 50 reaction classes, {len(report.texts)} real reactions): labels changed by int8 "
            f"{report.labels_changed} of {len(report.texts)} ({report.labels_changed / len(report.texts):.1%}); "
            f"cosine to float32 mean {report.mean:.4f}, worst {report.worst:.4f}")  # fmt: skip


if __name__ == "__main__":
    import argparse

    from minibert.speed.cpu import describe_machine

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="300 texts, 3 rounds (default: 3,000 texts, 7 rounds)")
    parser.add_argument("--texts", type=int, help="this many real texts instead")
    parser.add_argument("--rounds", type=int, help="this many interleaved rounds instead")
    parser.add_argument("--models", default="minilm,bert-base", help="which, comma-separated: minilm, bert-base")
    args = parser.parse_args()
    need_onnx("for ONNX Runtime's int8 model, the peer of every row")  # before the minutes of loading and exporting
    print(describe_machine(), flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    texts = corpus.benchmark_texts(args.texts or (300 if args.quick else 3000))
    bench_int8(texts, args.rounds or (3 if args.quick else 7), args.models.split(","))
