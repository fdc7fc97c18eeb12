"""An activation tensor as 8-bit steps: how the int8 layers (int8.py) quantize their input.

oneDNN's int8 matmul takes x already quantized, so ``Int8Linear`` on oneDNN quantizes it here, to
exactly the steps FBGEMM's dynamic linear would choose: both libraries then multiply the same int8
operands, and their outputs differ only by how each sums and rounds (docs/int8.md). FBGEMM quantizes
x itself, but is handed the scale and zero point chosen here from the range ``Int8Linear`` takes
anyway (to find a NaN), instead of taking that range again.

The rule is torch's ``ChooseQuantizationParams``, asymmetric and per tensor over all 256 levels:
x ≈ scale · (steps − zero_point), with the scale and zero point from x's own minimum and maximum
(0 always representable exactly, so padding and ReLU zeros stay 0).

    >>> scale, zero_point = choose_quantization_params(-1.0, 3.0)   # 4 / 255 a step, 0 at step 64
    >>> round(scale * 255, 6), zero_point
    (4.0, 64)
"""

from __future__ import annotations

import math
import struct

import numpy as np
import torch

# torch's ChooseQuantizationParams (ATen/native/quantized/cpu/QuantUtils.h) raises a scale below this.
_SMALL_SCALE = np.float32(6.1e-5)


def quantize_activations(x: torch.Tensor, extremes=None) -> tuple[torch.Tensor, float, int]:
    """x (..., in) float32 → its 8-bit steps (..., in) uint8, with the scale and zero point that
    ``torch.quantize_per_tensor_dynamic(x, torch.quint8, reduce_range=False)`` would choose (so the
    same numbers as FBGEMM's dynamic linear): x ≈ scale · (steps − zero_point), all 256 levels.

    Twice as fast as that call followed by ``int_repr()`` (measured on 2,048×3,072: 1.5 against
    3.1 ms): one parallel pass for the range (``aminmax``, where torch's call makes two serial
    ones), and the quantized tensor's bytes taken as they are instead of copied. ``extremes``:
    x's (minimum, maximum) where the caller has them already. An empty x has no range (torch's
    ``aminmax`` and its own call refuse it): its steps are empty, quantized as the range [0, 0] is."""
    if extremes is None and x.numel() == 0:
        extremes = (0.0, 0.0)
    lowest, highest = extremes or (float(value) for value in torch.aminmax(x))
    if not (math.isfinite(lowest) and math.isfinite(highest)):  # torch's own call, and its own error
        quantized = torch.quantize_per_tensor_dynamic(x, torch.quint8, False)
        return quantized.int_repr(), quantized.q_scale(), quantized.q_zero_point()
    scale, zero_point = choose_quantization_params(lowest, highest)
    quantized = torch.quantize_per_tensor(x, scale, zero_point, torch.quint8)
    steps = torch.empty(0, dtype=torch.uint8).set_(quantized.untyped_storage(), 0, quantized.shape, quantized.stride())
    return steps, scale, zero_point


def choose_quantization_params(lowest: float, highest: float) -> tuple[float, int]:
    """torch's ``ChooseQuantizationParams(min, max, 0, 255)`` (QuantUtils.h), step by step, in its
    own float32 and float64 arithmetic: the range widened to hold 0, the scale (max − min) / 255 (a
    tiny one raised to 6.1e-5, the range stretched with it), the zero point from whichever end adds
    the smaller error, rounded half to even into 0..255.

        >>> choose_quantization_params(-1.0, 3.0)
        (0.01568627450980392, 64)
    """
    f32 = np.float32
    low, high = min(_float32(lowest), 0.0), max(_float32(highest), 0.0)
    scale = (high - low) / 255
    if scale >= _SMALL_SCALE:  # the usual case, its float32 steps below all no-ops: 0.1 of the time in Python
        return _zero_point(low, high, scale)
    low, high = f32(low), f32(high)
    with np.errstate(divide="ignore", over="ignore"):
        if f32(scale) == 0 or math.isinf(f32(1) / f32(scale)):
            scale = 0.1
    if scale < _SMALL_SCALE:
        original = f32(scale)
        scale = float(_SMALL_SCALE)
        if low == 0:
            high = _SMALL_SCALE * f32(255)
        elif high == 0:
            low = -_SMALL_SCALE * f32(255)
        else:
            amplifier = _SMALL_SCALE / original
            low, high = low * amplifier, high * amplifier  # float32, as in C++
    return _zero_point(float(low), float(high), scale)


def _zero_point(low: float, high: float, scale: float) -> tuple[float, int]:
    """(scale, the zero point from whichever end of [low, high] adds the smaller error, rounded half
    to even into 0..255), in float64 as torch computes it."""
    from_min, from_max = 0 - low / scale, 255 - high / scale
    error_min, error_max = 0 - abs(low / scale), 255 - abs(high / scale)
    zero_point = from_min if error_min < error_max else from_max
    return scale, 0 if zero_point < 0 else 255 if zero_point > 255 else round(zero_point)  # half to even


def _float32(value: float) -> float:
    """``value`` rounded to float32 (as C++ converts a double to float), in plain Python."""
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:  # beyond float32's largest: C++ gives an infinity
        return math.copysign(math.inf, value)
