"""Helpers shared by the tests: ONE way to compare numbers and report the difference."""

from __future__ import annotations

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
