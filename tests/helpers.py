"""Helpers shared by the tests: one way to compare numbers and report the difference."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

# A test of oneDNN's kernels (the gemm="onednn" backends): skipped where torch was built without them.
needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")


def max_abs_diff(actual, expected) -> float:
    actual = torch.as_tensor(actual, dtype=torch.float64)
    expected = torch.as_tensor(expected, dtype=torch.float64)
    if actual.shape != expected.shape:
        raise AssertionError(f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if actual.numel() == 0:
        return 0.0
    return (actual - expected).abs().max().item()


def assert_close(actual, expected, name: str, atol: float = 1e-5, rtol: float = 0.0) -> float:
    """Assert |actual - expected| <= atol + rtol·|expected| everywhere (with rtol 0: max |Δ| <= atol);
    the message reports the max and mean |Δ|. Returns the measured max |Δ| so callers can report it."""
    actual = torch.as_tensor(actual, dtype=torch.float64)
    expected = torch.as_tensor(expected, dtype=torch.float64)
    worst = max_abs_diff(actual, expected)
    mean = (actual - expected).abs().mean().item() if actual.numel() else 0.0
    bound = f"{atol:g}" if not rtol else f"{atol:g} + {rtol:g}·|expected|"
    within = worst <= atol if not rtol else bool(((actual - expected).abs() <= atol + rtol * expected.abs()).all())
    assert within, f"{name}: max |Δ| = {worst:.3g} (mean {mean:.3g}) exceeds {bound}"
    return worst


def run_with_body(model, batch: dict, **options):
    """A model with heads run once: (its output, its encoder's output). A heads' output holds the heads'
    fields only (in minibert as in transformers); the encoder's (hidden states, pooler) is taken by a
    hook on ``model.bert`` as the heads' forward calls it."""
    bodies = []
    hook = model.bert.register_forward_hook(lambda module, args, output: bodies.append(output))
    try:
        with torch.no_grad():
            output = model(**batch, **options)
    finally:
        hook.remove()
    (body,) = bodies
    return output, body


def compare_outputs(ours, theirs, mask, label: str, atol: float = 1e-5, exact=None) -> dict:
    """Compare every hidden state, the pooler and the attention weights.

    With ``exact`` (the reference's outputs in float64) each tensor is compared with it, within
    ``bound_from_exact``, at EVERY position, [PAD] rows included (BertModel computes them as
    transformers does). Without it, the real tokens' rows only: at [PAD] rows fp32 itself lands
    ~10-40x further from exact (all-MiniLM-L6-v2's layer 4: transformers 1.7e-4 there, 4e-6 at real
    rows), which a fixed ``atol`` cannot bound; only the float64 result can."""
    every = torch.ones_like(mask, dtype=torch.bool) if exact is not None else mask.bool()  # (B, T) rows compared
    report = {}

    def check(name, a, b, exact_value=None):
        bound = atol if exact_value is None else bound_from_exact(b, exact_value, atol)
        target = b if exact_value is None else exact_value
        report[name] = assert_close(a, target, f"{label} {name}" + ("" if exact_value is None else " vs exact"), bound)

    assert len(ours.hidden_states) == len(theirs.hidden_states)
    exact_states = exact.hidden_states if exact is not None else [None] * len(theirs.hidden_states)
    for index, (a, b, e) in enumerate(zip(ours.hidden_states, theirs.hidden_states, exact_states)):
        check("embeddings" if index == 0 else f"layer {index}", a[every], b[every], None if e is None else e[every])
    check("last_hidden_state", ours.last_hidden_state[every], theirs.last_hidden_state[every],
          None if exact is None else exact.last_hidden_state[every])  # fmt: skip
    check("pooler", ours.pooler_output, theirs.pooler_output, None if exact is None else exact.pooler_output)
    if ours.attentions is not None:
        # (B, N, T, T): every query row; padded keys carry ~0 weight in both
        exact_maps = exact.attentions if exact is not None else [None] * len(theirs.attentions)
        for index, (a, b, e) in enumerate(zip(ours.attentions, theirs.attentions, exact_maps)):
            rows = lambda t: None if t is None else t.permute(0, 2, 1, 3)[every]  # noqa: E731
            check(f"attention {index + 1}", rows(a), rows(b), rows(e))
    padded = "no padding" if bool(mask.bool().all()) else "[PAD] rows too" if exact is not None else "real rows"
    print(f"\n{label} ({padded}): max |Δ| " + ", ".join(f"{k} {v:.1e}" for k, v in report.items()))
    return report


def compare_real_tokens_with_exact(ours, theirs, exact, mask, label: str, atol: float = 1e-5) -> float:
    """Every hidden state of ``ours`` at the real tokens (``mask``), against ``exact`` (float64) within
    ``bound_from_exact`` of ``theirs`` there: for a path that leaves [PAD] rows as zeros
    (``skip_padding=True``), or two paths that are each another fp32 order. Returns the max |Δ|."""
    real = mask.bool()
    worst = 0.0
    for depth, (a, b, e) in enumerate(zip(ours.hidden_states, theirs.hidden_states, exact.hidden_states)):
        bound = bound_from_exact(b[real], e[real], atol)
        worst = max(worst, assert_close(a[real], e[real], f"{label}, depth {depth}, vs float64", bound))
    return worst


def bound_from_exact(theirs, exact, atol: float = 1e-5) -> float:
    """The bound for a deep model's output against the exact (float64) result: the parity
    tolerance ``atol`` beyond the rounding fp32 itself brings at this depth, as the reference
    measures it (twice its own fp32 error: two fp32 computations are equally likely to land
    furthest). Rounding compounds through the layers (all-MiniLM-L6-v2's layer 5 is 8.5e-6 from
    exact in transformers itself), and another correct GEMM order (oneDNN's, chosen on some CPUs:
    speed/gemm.py) lands elsewhere in that spread; a wrong weight or function is off by 1e-3 and more."""
    return atol + 2 * max_abs_diff(theirs, exact)


def exact_reference(reference):
    """A float64 copy of a transformers model: its outputs are the exact numbers, to fp32's eyes."""
    import copy

    return copy.deepcopy(reference).double()


def assert_same_ids(ours, reference, texts: list[str], label: str, *, pairs: int, max_unknown: float) -> None:
    """minibert's ids equal a `tokenizers` Tokenizer's on every text and on ``pairs`` pairs of
    neighbouring texts; and the comparison is not vacuous (at most ``max_unknown`` of the ids are
    [UNK], so a wrong or truncated vocabulary cannot pass by mapping everything to [UNK])."""
    mismatches = [text for text in texts if ours(text)["input_ids"] != reference.encode(text).ids]
    pairs_of_texts = list(zip(texts[:pairs], texts[1 : pairs + 1]))
    mismatches += [a for a, b in pairs_of_texts if ours(a, b)["input_ids"] != reference.encode(a, b).ids]
    assert not mismatches, f"{label}: {len(mismatches)} texts differ, first {mismatches[0][:80]!r}"
    ids = [i for text in texts for i in ours(text)["input_ids"]]
    unknown = ids.count(ours.unk_token_id) / len(ids)
    assert unknown < max_unknown, f"{label}: a vacuous comparison ({unknown:.0%} [UNK])"
    print(f"\n{label}: {len(texts)} texts and {len(pairs_of_texts)} pairs, ids identical ({unknown:.1%} [UNK])")


def worst_relative_difference(ours: list, reference: list) -> float:
    """The largest max |Δ| of paired gradient tensors, each relative to the reference tensor's own
    largest entry, or to a thousandth of the largest gradient anywhere, whichever is more. A gradient
    that is 0 in exact arithmetic (the key biases: softmax ignores a shift shared by every key) comes
    out as the rounding noise of sums that cancel, whose terms are the size of the other gradients."""
    largest = max(r.abs().max().item() for r in reference)
    return max((o - r).abs().max().item() / max(r.abs().max().item(), 1e-3 * largest)
               for o, r in zip(ours, reference))  # fmt: skip


def child_environment(*first: str, **variables: str) -> dict[str, str]:
    """``os.environ`` for a child process (a command, a script, torchrun) that must import the minibert
    under test: its src/ first on PYTHONPATH (after the ``first`` folders), then what the path held;
    ``variables`` set on top."""
    source = str(Path(__import__("minibert").__file__).resolve().parents[1])
    path = [*first, source, os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(part for part in path if part), **variables}


def run_minibert(*args: str, umask: int | None = None, stdin: bytes | None = None) -> SimpleNamespace:
    """`minibert ARGS` run in this process (the command is cli.main; a subprocess would spend
    seconds importing torch again): .returncode, .stdout and .stderr (str). Optionally under
    another umask, or with ``stdin`` bytes as standard input."""
    from minibert.apps import cli

    out, err = io.StringIO(), io.StringIO()
    saved_stdin, saved_umask = sys.stdin, None
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    if umask is not None:
        saved_umask = os.umask(umask)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as exit_:  # argparse's usage errors
                code = exit_.code
    finally:
        sys.stdin = saved_stdin
        if saved_umask is not None:
            os.umask(saved_umask)
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@contextlib.contextmanager
def pipe_holding(data: bytes, fifo: Path | None = None):
    """A path that can be read once, as a shell's ``<(printf ...)`` gives: ``/dev/fd/N`` of a pipe
    already holding ``data`` (less than the pipe's 64 KiB, so the write does not wait), or, with
    ``fifo``, a named FIFO made there that a thread writes when a reader opens it."""
    import threading

    if fifo is None:
        read_end, write_end = os.pipe()
        os.write(write_end, data)
        os.close(write_end)
        try:
            yield f"/dev/fd/{read_end}"
        finally:
            os.close(read_end)
        return
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as handle:  # waits for the reader
            handle.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        yield str(fifo)
    finally:
        if writer.is_alive():  # never opened: a reader of our own lets the writer finish
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(timeout=5)


def assert_refused_by_the_lock(result, run) -> None:
    """A command run into a folder this process holds (training/run/lock.py): exit 1, one line that
    names the folder and this process, and nothing written beside the lock file."""
    import os

    from minibert.training.run.lock import LOCK_FILE

    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("minibert: error:"), result.stderr
    assert str(run) in lines[0] and f"process {os.getpid()}" in lines[0], lines[0]
    assert sorted(entry.name for entry in run.iterdir()) == [LOCK_FILE]  # nothing written


@contextlib.contextmanager
def sigint_as_from_a_terminal():
    """This process's SIGINT as Ctrl-C in a terminal finds it (Python's KeyboardInterrupt) for the block:
    for a test that sends SIGINT to its own process, a command run in it. A shell's background job
    (CI's) starts the suite with SIGINT ignored, and minibert rightly leaves it ignored: the command
    then ran to its end and exited 0 (seen in a run started as ``nohup bash .ci/run &``)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def signals_as_from_a_terminal() -> None:
    """A `preexec_fn` for a child that a test stops with a signal: SIGINT (Ctrl-C), SIGQUIT, SIGHUP
    and SIGTERM back to their defaults, as in a terminal. A shell that runs the suite as a background
    job (CI does) starts it with SIGINT and SIGQUIT ignored, `nohup` with SIGHUP ignored; the child
    inherits that, and minibert rightly leaves an ignored signal ignored (docs/cli.md): the signal
    would be lost and the test would time the run out instead."""
    for signum in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def sigkill_once_metrics_hold(command: list[str], metrics: Path, lines: int, environment: dict) -> None:
    """Start ``command`` (a training run), SIGKILL it once its ``metrics`` (metrics.jsonl) holds
    ``lines`` lines (past a checkpoint, mid-run), and wait for it; fails if it ended first."""
    process = subprocess.Popen(command, env=environment, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= lines:
            break
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()


def refused_at_load(directory, *fragments: str) -> str:
    """``BertModel.from_pretrained(directory)`` refused at once (under 5 s) with one short line of
    ``CheckpointError`` holding every fragment; the message returned."""
    from minibert import BertModel
    from minibert.errors import CheckpointError

    started = time.perf_counter()
    with pytest.raises(CheckpointError) as caught:
        BertModel.from_pretrained(directory)
    message = str(caught.value)
    assert time.perf_counter() - started < 5, "refusing should be immediate"
    assert len(message) < 700 and "\n" not in message.strip(), message
    for fragment in fragments:
        assert fragment in message, message
    return message


def run_python(code: str, env: dict, *args: str) -> subprocess.CompletedProcess:
    """``code`` run by a fresh ``python -c`` with ``args`` and the environment ``env`` (5 minutes at most)."""
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)
