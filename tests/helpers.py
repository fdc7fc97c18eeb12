"""Helpers shared by the tests: ONE way to compare numbers and report the difference."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from types import SimpleNamespace

import torch


def max_abs_diff(actual, expected) -> float:
    actual = torch.as_tensor(actual, dtype=torch.float64)
    expected = torch.as_tensor(expected, dtype=torch.float64)
    if actual.shape != expected.shape:
        raise AssertionError(f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if actual.numel() == 0:
        return 0.0
    return (actual - expected).abs().max().item()


def assert_close(actual, expected, name: str, atol: float = 1e-5) -> float:
    """Assert max |actual - expected| <= atol; the message reports the max and mean |Δ|.

    Returns the measured max |Δ| so callers can report it."""
    actual = torch.as_tensor(actual, dtype=torch.float64)
    expected = torch.as_tensor(expected, dtype=torch.float64)
    worst = max_abs_diff(actual, expected)
    mean = (actual - expected).abs().mean().item() if actual.numel() else 0.0
    assert worst <= atol, f"{name}: max |Δ| = {worst:.3g} (mean {mean:.3g}) exceeds {atol:g}"
    return worst


def compare_outputs(ours, theirs, mask, label: str, atol: float = 1e-5) -> dict:
    """Compare every hidden state (real tokens only), the pooler and the attention weights."""
    real = mask.bool()
    report = {}
    assert len(ours.hidden_states) == len(theirs.hidden_states)
    for index, (a, b) in enumerate(zip(ours.hidden_states, theirs.hidden_states)):
        name = "embeddings" if index == 0 else f"layer {index}"
        report[name] = assert_close(a[real], b[real], f"{label} {name}", atol)
    report["last_hidden_state"] = assert_close(
        ours.last_hidden_state[real], theirs.last_hidden_state[real], f"{label} last_hidden_state", atol
    )
    report["pooler"] = assert_close(ours.pooler_output, theirs.pooler_output, f"{label} pooler", atol)
    if ours.attentions is not None:
        # (B, N, T, T): rows of real query tokens; padded keys carry ~0 weight in both
        for index, (a, b) in enumerate(zip(ours.attentions, theirs.attentions)):
            report[f"attention {index + 1}"] = assert_close(
                a.permute(0, 2, 1, 3)[real], b.permute(0, 2, 1, 3)[real], f"{label} attention {index + 1}", atol
            )
    print(f"\n{label}: max |Δ| " + ", ".join(f"{k} {v:.1e}" for k, v in report.items()))
    return report


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
