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

The GEMM comes from a library made for it, not a kernel written here, and which one is measured
per CPU (int8_check.choose_library, like the float32 GEMM's library in gemm.py), among the two
inside PyTorch's x86 builds (``LIBRARIES``):

* ``"fbgemm"``: FBGEMM (Facebook's int8 matrix library) through ``torch.ops.quantized.linear_dynamic``
  on weights packed once by ``torch.ops.quantized.linear_prepack``; it quantizes x itself. Its
  kernels use AVX2 and AVX-512 VNNI, never AMX.
* ``"onednn"``: oneDNN's int8 matmul through ``torch.ops.onednn.qlinear_pointwise`` on weights packed
  once by ``torch.ops.onednn.qlinear_prepack``; x is quantized by ``int8_steps.quantize_activations``, to the
  steps ``torch.quantize_per_tensor_dynamic`` chooses: the rule FBGEMM applies inside. It uses AMX
  where the CPU has it: 2.5-3x FBGEMM there.

Both multiply the same int8 weights by the same int8 activations. Where the CPU has int8 dot-product
instructions both sum the products exactly in int32, so they differ only in float32 rounding;
without them FBGEMM sums pairs in 16 bits first (docs/int8.md). Measurements: docs/int8.md.

An int8 model only runs forward: there is no gradient through an int8 weight, and a backward pass
raises ``QuantizationError`` (fine-tune the float32 model, then load it in int8); so does a graph
recorded of it (``NOT_RECORDABLE``: x's scale is computed per call). Saving writes the float32
checkpoint it was loaded from (quantization is a loading choice, never a file format).
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from ..activations import is_hooked
from ..errors import QuantizationError
from ..inputs import recording_graph
from .int8_steps import choose_quantization_params, quantize_activations
from .packed_linear import is_fused_pair

log = logging.getLogger("minibert.int8")

# The quantized engines that run FBGEMM's dynamic int8 linear (x86 = FBGEMM + oneDNN, picked per op).
ENGINES = ("x86", "fbgemm")
LIBRARIES = ("fbgemm", "onednn")  # the int8 GEMMs to choose from, by measurement (int8_check.choose_library)
LIBRARY_NAMES = {"fbgemm": "FBGEMM", "onednn": "oneDNN"}  # as messages spell them
PROJECTIONS = {"attention": ("query", "key", "value", "output"), "feed_forward": ("intermediate", "output")}
# Said where torch.jit.trace, the legacy torch.onnx.export, torch.export or torch.compile records an int8 layer.
NOT_RECORDABLE = (
    "an int8 layer (a model loaded with dtype='int8') cannot be traced, exported or compiled (torch.jit.trace, "
    "torch.onnx.export, torch.export, torch.compile): it quantizes its input with a scale and zero point computed "
    "on each call from that input's range, which a recorded graph would hold as the example's constants; trace the "
    "float32 model instead (from_pretrained without dtype='int8', or model.use_book_modules() first: the "
    "checkpoint's float32 weights), then quantize the export with its runtime's tools (ONNX Runtime's quantize_dynamic)"
)


class Int8Linear(nn.Module):
    """``nn.Linear``'s forward with an int8 weight (per output channel) and int8 activations
    (quantized per call): x (..., in) → (..., out) float32.

        >>> linear = nn.Linear(4, 3)
        >>> Int8Linear(linear)
        Int8Linear(in_features=4, out_features=3, weight=int8 per channel, activations=int8 dynamic, library=fbgemm)
    """

    def __init__(self, linear: nn.Linear, library: str = "fbgemm", post_op: tuple[str, str] | None = None,
                 activation=None):  # fmt: skip
        super().__init__()
        if library not in LIBRARIES:
            raise ValueError(f"the int8 library must be one of {', '.join(LIBRARIES)}; got {library!r}")
        if post_op is not None and library != "onednn":
            raise ValueError("only oneDNN's int8 matmul applies an activation as it writes (FBGEMM's has no post-op)")
        self.in_features, self.out_features, self.library = linear.in_features, linear.out_features, library
        # With post_op (packed_linear.FUSIBLE's (name, algorithm)), the feed-forward's activation is applied
        # as the product is written; ``activation`` keeps the function it stands for (packed_linear's protocol).
        self.post_op, self.activation = post_op, activation
        self.applied = post_op is not None  # whether the last call applied the activation (AppliedBy)
        weight = linear.weight.detach().float()  # (out, in)
        scale = (weight.abs().amax(dim=1) / 127).clamp_min(torch.finfo(torch.float32).tiny)  # (out,)
        bias = None if linear.bias is None else linear.bias.detach().float().clone()
        with warnings.catch_warnings():  # torch 2.10+ calls quantized tensors deprecated; the op is what we use
            warnings.simplefilter("ignore", UserWarning)
            zero_points = torch.zeros(self.out_features, dtype=torch.long)
            quantized = torch.quantize_per_channel(weight, scale.double(), zero_points, 0, torch.qint8)
            if library == "fbgemm":
                self._pack_fbgemm(quantized, bias)
            else:
                self._pack_onednn(quantized.int_repr(), quantized.q_per_channel_scales().float(), bias)

    @property
    def packed(self):
        """The library's packed weight (FBGEMM's TorchScript object, oneDNN's blocked tensor), held in a
        list: torch.export makes each tensor or TorchScript object a module holds a constant before it
        runs forward, and fails on FBGEMM's (``__obj_flatten__``) before ``multiply`` can say why."""
        return self._held[0]

    @packed.setter
    def packed(self, value) -> None:
        self.__dict__["_held"] = [value]

    def _pack_fbgemm(self, quantized: torch.Tensor, bias: torch.Tensor | None) -> None:
        """FBGEMM's packed weight from the int8 weight (out, in) quantized per output channel, packed
        under FBGEMM's engine (``fbgemm_engine``), never the one the process has set."""
        with fbgemm_engine():
            self.packed = torch.ops.quantized.linear_prepack(quantized, bias)

    def _pack_onednn(self, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> None:
        """oneDNN's packed int8 weight (its own blocked layout, one byte a weight; no other copy is
        kept) from the int8 weight (out, in), with its scale per output channel and the bias."""
        self.packed = torch.ops.onednn.qlinear_prepack(weight, None)
        self.weight_scale, self.bias = scale, bias  # (out,) float32; (out,) float32 or None
        self.weight_zero_point = torch.zeros(self.out_features, dtype=torch.long)  # symmetric: all 0

    def __getstate__(self) -> dict:
        """A copy or a pickle holds the weight as plain tensors: the int8 matrix (out, in), with (for
        FBGEMM) its scale per output channel and the bias; ``__setstate__`` packs it again as loading
        did. Neither packed weight is plain data: oneDNN's has no storage to copy, and FBGEMM's,
        left to torch's pickling, is packed again under whatever ``torch.backends.quantized.engine``
        the process has when the copy is made (under qnnpack: outputs 2.2 apart on MiniLM)."""
        state = self.__dict__.copy()
        del state["_held"]
        if self.library == "onednn":
            state["packed"] = self.packed.to_dense().t().contiguous()  # (in, out) blocked → (out, in) int8
        else:
            weight, bias = torch.ops.quantized.linear_unpack(self.packed)  # exact: the int8 values as packed
            state["packed"] = (weight.int_repr(), weight.q_per_channel_scales(), bias)
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        packed = state.pop("packed")
        super().__setstate__(state)
        if self.library == "onednn":
            self._pack_onednn(packed, self.weight_scale, self.bias)
        elif not isinstance(packed, tuple):  # a pickle of an older minibert holds the packed weight itself
            self.packed = packed
        else:
            weight, scale, bias = packed
            zero_points = torch.zeros(self.out_features, dtype=torch.long)
            with warnings.catch_warnings():  # (torch 2.10+ calls quantized tensors deprecated)
                warnings.simplefilter("ignore", UserWarning)
                self._pack_fbgemm(torch._make_per_channel_quantized_tensor(weight, scale, zero_points, 0), bias)

    def multiply(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., in) float32 → x·Wᵀ + b (..., out) float32, in the layer's int8 library: x quantized
        to 8 bits (unsigned, with a zero point) from its own minimum and maximum, per call. Rows
        holding NaN or an infinity: ``_with_non_finite_rows``; no rows (x (0, in), (B, 0, in)): no rows
        out, as ``nn.Linear`` gives. Eager calls only: while torch records a graph (``recording_graph``)
        it is a QuantizationError (``NOT_RECORDABLE``): the range taken per call would be recorded as
        the example's constant."""
        if recording_graph():
            raise QuantizationError(NOT_RECORDABLE)
        if x.numel() == 0:  # no rows (N = 0): nothing to multiply, and an empty tensor has no range to quantize from
            return x.new_empty((*x.shape[:-1], self.out_features))
        extremes = [float(value) for value in torch.aminmax(x)]  # one parallel pass
        if not all(math.isfinite(value) for value in extremes):
            return self._with_non_finite_rows(x)
        if self.library == "fbgemm":
            return _fbgemm_linear(x, self.packed, extremes)
        steps, scale, zero_point = quantize_activations(x, extremes)
        post_op, algorithm = self.post_op if self.applied else ("none", "")
        return torch.ops.onednn.qlinear_pointwise(
            steps, scale, zero_point, self.packed, self.weight_scale, self.weight_zero_point,
            self.bias, 1.0, 0, torch.float32, post_op, [], algorithm,
        )  # fmt: skip

    def _with_non_finite_rows(self, x: torch.Tensor) -> torch.Tensor:
        """``multiply`` where rows of x hold NaN or an infinity, as float32 computes it: those rows
        NaN or infinite (computed in float32 against the int8 weights dequantized, so NaN where
        float32 gives NaN, ±inf where it gives ±inf, but for a weight rounded to 0: NaN there), and
        the other rows in int8 from their own range, the numbers they get in a call without the
        bad rows. One range over the whole tensor would not do: FBGEMM's quantizer skips NaN when
        it takes the range and rounds it to a number (finite outputs where float32 gives NaN), and
        oneDNN's refuses the range. No cost to a finite input: both libraries' quantizers need that
        range, and ``multiply`` hands it to them (``_fbgemm_linear``, ``quantize_activations``)."""
        rows = x.reshape(-1, self.in_features)  # (N, in)
        finite = torch.isfinite(rows).all(dim=1)  # (N,)
        out = torch.empty(rows.shape[0], self.out_features, dtype=x.dtype)
        if bool(finite.any()):
            out[finite] = self.multiply(rows[finite])
        weight, bias = self.dequantized()
        broken = F.linear(rows[~finite], weight, bias)
        out[~finite] = self.activation(broken) if self.applied else broken  # (oneDNN applies it as it writes)
        return out.reshape(*x.shape[:-1], self.out_features)

    def dequantized(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the weight the int8 layer multiplies by, float32 (out, in): each int8 value times its
        channel's scale; the bias), read back from the packed weight."""
        with warnings.catch_warnings():  # (torch 2.10+ calls quantized tensors deprecated)
            warnings.simplefilter("ignore", UserWarning)
            if self.library == "fbgemm":
                weight, bias = torch.ops.quantized.linear_unpack(self.packed)
                return weight.dequantize(), bias
        weight = self.packed.to_dense().t().float()  # (out, in)
        return weight * self.weight_scale[:, None], self.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu" and x.dtype != torch.float32 and _cpu_autocast():
            x = x.float()  # under autocast int8 runs between float32 tensors, as autocast runs ops it has no kernel for
        if x.dtype != torch.float32 or x.device.type != "cpu":  # FBGEMM's own error names neither layer nor why
            raise QuantizationError(
                f"an int8 layer ({self.in_features}->{self.out_features}) got a {str(x.dtype).removeprefix('torch.')} "
                f"input on {x.device}: a model loaded with dtype='int8' runs in float32 on the CPU around its int8 "
                "layers; do not move or cast it (.to(), .half(), .double()) after loading, load it again instead"
            )
        # A forward hook is shown the projection itself; then the feed-forward applies the activation (AppliedBy).
        # So it does where the pair no longer holds (packed_linear.AppliedBy.intact): wrapped or replaced.
        self.applied = self.post_op is not None and not is_hooked(self) and is_fused_pair(self)
        if torch.is_grad_enabled() and x.requires_grad:  # a forward that autograd records: its backward refuses
            return _NoGradient.apply(x, self)
        return self.multiply(x)

    def stored_bytes(self) -> int:
        """The bytes this layer's weights hold by content: one int8 per weight, and 16 bytes per
        output channel (FBGEMM: a float32 scale, an int32 zero point, its int32 column sum and the
        float32 bias; oneDNN: the float32 scale and bias and an int64 zero point). (FBGEMM's packed
        layout also pads the input dimension to its block of rows, 512 on AVX2: measured heap in
        docs/int8.md.)"""
        return self.in_features * self.out_features + 16 * self.out_features

    def extra_repr(self) -> str:
        fused = f", then {self.post_op[0]}" if self.post_op else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, weight=int8 per channel, "
                f"activations=int8 dynamic, library={self.library}{fused}")  # fmt: skip


def _fbgemm_linear(x: torch.Tensor, packed, extremes: list[float] | None) -> torch.Tensor:
    """FBGEMM's dynamic linear, x (..., in) → (..., out) float32, from x's range taken already:
    ``quantized.linear_with_input_q_dq_qweight_dq_output_fp32`` quantizes x to the steps that range
    gives (``choose_quantization_params``: the rule ``linear_dynamic`` applies inside) and multiplies
    as ``linear_dynamic`` does, without a pass of its own over x for the range. The same numbers bit
    for bit (tests/test_speed_int8_libraries.py), so the range that finds a NaN costs nothing here. Without
    that operator (an older torch), or for an empty x, ``linear_dynamic`` itself."""
    fused = getattr(torch.ops.quantized, "linear_with_input_q_dq_qweight_dq_output_fp32", None) if extremes else None
    if fused is None:
        return torch.ops.quantized.linear_dynamic(x, packed, False)
    scale, zero_point = choose_quantization_params(*extremes)
    return fused(x, scale, zero_point, packed)


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


def _cpu_autocast() -> bool:
    """Whether torch.autocast is on for the CPU (``is_autocast_enabled(device)`` from torch 2.4)."""
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch 2.2, 2.3
        return torch.is_autocast_cpu_enabled()


class _NoGradient(torch.autograd.Function):
    """The int8 product, recorded so that a backward pass through it says why it cannot run."""

    @staticmethod
    def forward(ctx, x, layer):
        return layer.multiply(x)

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


def library_unavailable(library: str) -> str | None:
    """Why this int8 library cannot run here, or None (FBGEMM: ``unavailable_reason``; oneDNN's int8
    matmul also needs torch built with oneDNN, and is tried once on a tiny layer)."""
    reason = unavailable_reason()
    if reason is not None or library == "fbgemm":
        return reason
    if not torch.backends.mkldnn.is_available():
        return f"torch {torch.__version__} is built without oneDNN"
    try:
        Int8Linear(nn.Linear(4, 4), "onednn")(torch.ones(1, 4))
    except (RuntimeError, AttributeError) as error:  # AttributeError: no such operator in this torch
        return f"oneDNN's int8 matmul does not run here ({str(error).splitlines()[0][:160]})"
    return None


def quantize(model: nn.Module, release=None, library: str = "fbgemm") -> int:
    """Swap every encoder layer's six projections for ``Int8Linear`` on ``library`` (the model must
    be float32, on the CPU); returns how many. The feed-forward's activation is put back in place
    first if the GEMM backend had fused it (gemm.py's ``onednn-fused``). ``release``: called on each
    float32 weight once its int8 layer is made (a mapped checkpoint's pages given back: seam.py)."""
    from .packed_linear import FUSIBLE, activation_name, encoder_layers, use_backend

    refuse_if_unable(model)
    use_backend(model, "mkl")  # plain nn.Linear everywhere, the activation unfused
    count = 0
    for layer in encoder_layers(model):
        act = activation_name(layer.feed_forward)
        for part_name, names in PROJECTIONS.items():
            part = getattr(layer, part_name)
            for name in names:
                linear = getattr(part, name)
                if library == "onednn" and (part_name, name) == ("feed_forward", "intermediate") and act in FUSIBLE:
                    int8_linear = Int8Linear(linear, library, FUSIBLE[act], layer.feed_forward.activation)
                else:
                    int8_linear = Int8Linear(linear, library)
                setattr(part, name, int8_linear)
                if release is not None:
                    release(linear.weight)
                count += 1
    fuse_activations(model)
    model.gemm_backend, model.int8_library = "int8", library
    return count


def fuse_activations(model: nn.Module) -> None:
    """Where an int8 intermediate projection applies the activation as it writes (oneDNN's post-op,
    measured 0.4 ms of 2.2 saved on MiniLM's at 2,048 rows), the feed-forward's own activation
    becomes packed_linear's ``AppliedBy`` marker, as for float32's ``onednn-fused``; its
    ``use_backend`` puts the function back from the layer's ``activation``."""
    from .packed_linear import AppliedBy, encoder_layers

    for layer in encoder_layers(model):
        intermediate = layer.feed_forward.intermediate
        if isinstance(intermediate, Int8Linear) and intermediate.post_op is not None:
            layer.feed_forward.activation = AppliedBy(layer.feed_forward, intermediate)


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
