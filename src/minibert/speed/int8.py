"""int8: the encoder's linear layers multiplied in 8-bit integers, asked for by name (``dtype="int8"``).

A reader learning BERT can skip this file: it is a loading choice, like the GEMM library (gemm.py),
and enters a loaded model through the same seam (seam.py). ``BertModel(config)`` built by hand
never uses it, and ``model.use_book_modules()`` gives back the plain float32 ``nn.Linear`` layers.

What is int8, and what stays float32
------------------------------------
Each encoder layer's six projections (Q, K, V, the attention output, the feed-forward network's two
projections) become ``Int8Linear``: ``y = x·Wᵀ + b`` with

* W stored as int8, **one scale per output channel** (per row of W): ``W ≈ scale[o] · Wq[o, :]``,
  ``scale[o] = max|W[o, :]| / 127``. One scale for the whole matrix (per tensor) lets the row with
  the largest weight set the step for every row; per channel, each row keeps its own 255 levels.
* x quantized **at run time** (dynamically) to 8 bits from its own minimum and maximum, per call:
  no calibration data is needed, and a batch with larger activations gets a larger step.
* the product accumulated in int32 and scaled back to float32, the bias added in float32.

Attention's scores and softmax, LayerNorm, GELU, the residual stream, the embeddings, the pooler and
the task heads stay float32: they are a sliver of the FLOPs and most of the sensitivity.

The GEMM is FBGEMM's (Facebook's int8 matrix library, inside PyTorch's x86 builds), reached
through ``torch.ops.quantized.linear_dynamic`` on weights packed once by
``torch.ops.quantized.linear_prepack``: a library made for it, not a kernel written here. Why this
one, and the measured alternatives: docs/int8.md.

An int8 model only runs forward: there is no gradient through an int8 weight, and a backward pass
raises ``QuantizationError`` (fine-tune the float32 model, then load it in int8). Saving writes the
float32 checkpoint it was loaded from (quantization is a loading choice, never a file format).
"""

from __future__ import annotations

import contextlib
import logging
import warnings

import torch
from torch import nn

from ..config_fields import LABEL_FIELDS  # the config fields from_pretrained replaces
from ..errors import QuantizationError

log = logging.getLogger("minibert.int8")

# The quantized engines that run FBGEMM's dynamic int8 linear (x86 = FBGEMM + oneDNN, picked per op).
ENGINES = ("x86", "fbgemm")
PROJECTIONS = {"attention": ("query", "key", "value", "output"), "feed_forward": ("intermediate", "output")}


class Int8Linear(nn.Module):
    """``nn.Linear``'s forward with an int8 weight (per output channel) and int8 activations
    (quantized per call): x (..., in) → (..., out) float32.

        >>> linear = nn.Linear(4, 3)
        >>> Int8Linear(linear)
        Int8Linear(in_features=4, out_features=3, weight=int8 per channel, activations=int8 dynamic)
    """

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        weight = linear.weight.detach().float()  # (out, in)
        scale = (weight.abs().amax(dim=1) / 127).clamp_min(torch.finfo(torch.float32).tiny)  # (out,)
        bias = None if linear.bias is None else linear.bias.detach().float().clone()
        with warnings.catch_warnings():  # torch 2.10+ calls quantized tensors deprecated; the op is what we use
            warnings.simplefilter("ignore", UserWarning)
            zero_points = torch.zeros(self.out_features, dtype=torch.long)
            quantized = torch.quantize_per_channel(weight, scale.double(), zero_points, 0, torch.qint8)
            with fbgemm_engine():
                self.packed = torch.ops.quantized.linear_prepack(quantized, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or x.device.type != "cpu":  # FBGEMM's own error names neither layer nor why
            raise QuantizationError(
                f"an int8 layer ({self.in_features}->{self.out_features}) got a {str(x.dtype).removeprefix('torch.')} "
                f"input on {x.device}: a model loaded with dtype='int8' runs in float32 on the CPU around its int8 "
                "layers; do not move or cast it (.to(), .half(), .double()) after loading, load it again instead"
            )
        if torch.is_grad_enabled() and x.requires_grad:  # a forward that autograd records: its backward refuses
            return _NoGradient.apply(x, self.packed)
        return torch.ops.quantized.linear_dynamic(x, self.packed, False)

    def stored_bytes(self) -> int:
        """The bytes this layer's weights hold by content: one int8 per weight, and per output
        channel a float32 scale, an int32 zero point, FBGEMM's int32 column sum and the float32
        bias. (FBGEMM's packed layout also pads the input dimension to its block of rows, 512 on
        AVX2: measured heap in docs/int8.md.)"""
        return self.in_features * self.out_features + 16 * self.out_features

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, weight=int8 per channel, "
                "activations=int8 dynamic")  # fmt: skip


@contextlib.contextmanager
def fbgemm_engine():
    """torch's quantized engine set to FBGEMM while a weight is packed, then put back as it was.

    The engine is process-wide state (``torch.backends.quantized.engine``) that the packing reads:
    under "qnnpack" the same weights give other numbers (measured: |Δ| up to 0.48 on one layer's
    outputs), under "onednn" (or "x86" on a CPU with VNNI, which then hands linear layers to oneDNN)
    another layout that keeps a second copy of the weights. So the engine is chosen here, not
    inherited from whatever ran before: int8's numbers and memory do not depend on it."""
    engines = torch.backends.quantized.supported_engines
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = next(engine for engine in ("fbgemm", *ENGINES) if engine in engines)
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


class _NoGradient(torch.autograd.Function):
    """The int8 product, recorded so that a backward pass through it says why it cannot run."""

    @staticmethod
    def forward(ctx, x, packed):
        return torch.ops.quantized.linear_dynamic(x, packed, False)

    @staticmethod
    def backward(ctx, grad):
        raise QuantizationError(
            "a backward pass reached a layer loaded in int8 (dtype='int8' runs inference only: int8 weights have "
            "no gradient); train or fine-tune the float32 model, then load it with dtype='int8'"
        )


def unavailable_reason() -> str | None:
    """Why int8 cannot run here, or None: FBGEMM needs torch's x86 quantized engine and AVX2."""
    from .cpu import cpu_flags

    engines = torch.backends.quantized.supported_engines
    if not any(engine in engines for engine in ENGINES):
        return f"torch {torch.__version__} has no x86 quantized engine (it has {', '.join(engines) or 'none'})"
    flags = cpu_flags()
    if flags and "avx2" not in flags:
        return "this CPU has no AVX2, which FBGEMM's int8 GEMM needs"
    return None


def has_int8_dot_product() -> bool:
    """Whether the CPU multiplies int8 by int8 into int32 in one instruction (AVX-512 VNNI, AVX-VNNI
    or AMX); without it FBGEMM emulates the dot product with two AVX2 instructions."""
    from .cpu import cpu_flags

    return bool(cpu_flags() & {"avx512_vnni", "avx_vnni", "amx_int8"})


def quantize(model: nn.Module, release=None) -> int:
    """Swap every encoder layer's six projections for ``Int8Linear`` (the model must be float32,
    on the CPU); returns how many. The feed-forward's activation is put back in place first if the
    GEMM backend had fused it (gemm.py's ``onednn-fused``). ``release``: called on each float32
    weight once its int8 layer is made (a mapped checkpoint's pages given back: seam.py)."""
    from .packed_linear import encoder_layers, use_backend

    refuse_if_unable(model)
    use_backend(model, "mkl")  # plain nn.Linear everywhere, the activation unfused
    count = 0
    for layer in encoder_layers(model):
        for part_name, names in PROJECTIONS.items():
            part = getattr(layer, part_name)
            for name in names:
                linear = getattr(part, name)
                setattr(part, name, Int8Linear(linear))
                if release is not None:
                    release(linear.weight)
                count += 1
    model.gemm_backend = "int8"
    return count


def refuse_if_unable(model: nn.Module) -> None:
    """QuantizationError where int8 cannot run: no engine or AVX2 here, or the model is not on the CPU."""
    reason = unavailable_reason()
    if reason is not None:
        raise QuantizationError(f"dtype='int8' cannot run here: {reason}")
    parameter = next(model.parameters())
    if parameter.device.type != "cpu":
        raise QuantizationError(f"dtype='int8' runs on the CPU (FBGEMM); this model is on {parameter.device}")


def int8_layers(model: nn.Module) -> list[tuple[str, Int8Linear]]:
    return [(name, module) for name, module in model.named_modules() if isinstance(module, Int8Linear)]


def is_int8(model: nn.Module) -> bool:
    return any(isinstance(module, Int8Linear) for module in model.modules())


def float32_twin(model: nn.Module) -> nn.Module:
    """The same model in float32: its checkpoint read again (the float32 weights are not kept in
    memory, that is int8's point), with every tensor the int8 model holds copied over it (the
    embeddings and heads, in case they were changed after loading)."""
    source = getattr(model, "name_or_path", None)
    if source is None:
        raise QuantizationError("this int8 model does not know its checkpoint (name_or_path), so its float32 "
                                "weights cannot be read again; load it with from_pretrained")  # fmt: skip
    loaded_from = getattr(model, "int8_weights_file", None)  # (path, signature) recorded by int8_check.load_int8
    if loaded_from is not None and file_signature(loaded_from[0]) != loaded_from[1]:
        raise QuantizationError(
            f"{loaded_from[0]} changed (or was removed) since this model was loaded in int8 from it, so its float32 "
            "weights cannot be read again (they would be another model's); load the model again"
        )
    twin = type(model).from_pretrained(source, gemm="mkl", new_heads=True, **_label_config(model))
    twin.load_state_dict(model.state_dict(), strict=False)
    return twin


def file_signature(path) -> tuple | None:
    """What tells a checkpoint file apart from the one read earlier at the same path: its size, its
    modification time, and its inode and change time (which no ``touch`` or copy of times can set back)."""
    import os

    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns)


def _label_config(model: nn.Module) -> dict:
    extra = getattr(model.config, "extra", {})
    return {name: extra[name] for name in LABEL_FIELDS if name in extra}
