"""How each GEMM backend runs BERT's linear layers; gemm.py chooses among them.

* ``"mkl"``: ``F.linear``, as ``nn.Linear`` calls it (Intel MKL in PyTorch's x86 builds). The bias
  is copied into the output first, then the product is added to it.
* ``"onednn"``: oneDNN (``torch.ops.mkldnn._linear_pointwise``), with each weight reordered once
  into oneDNN's blocked layout ("prepacked") and the bias added inside the GEMM: ``PackedLinear``.
* ``"onednn-fused"``: the same, with the feed-forward activation (GELU, exact or tanh; ReLU)
  applied by oneDNN as the GEMM writes its output ("post-op"): one pass over the (tokens × F)
  tensor fewer.

``use_backend`` swaps the encoder layers' ``nn.Linear`` for ``PackedLinear`` (the same Parameters)
or back. oneDNN runs only where no gradient is needed (inference under ``torch.no_grad()`` /
``inference_mode()``, or nothing the layer multiplies needs one); a forward pass that trains (the
input, the weight or the bias needs a gradient: ``records_gradient``) falls back to ``F.linear``
with the same weights, so fine-tuning a loaded model works unchanged, bias-only (BitFit) too. So
does a layer whose weight is an inference tensor (no version counter: a change could not be seen).
"""

from __future__ import annotations

import copy
import logging
import sys

import torch
import torch.nn.functional as F
from torch import nn

from ..activations import is_hooked
from ..loading.file_pages import refuse_if_read_from_written_over
from . import BACKENDS

# Whether torch.compile is at work in the process (torch.compiler.is_compiling from torch 2.3; torch._dynamo's before).
is_compiling = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling

log = logging.getLogger("minibert.gemm")

# hidden_act → oneDNN's post-op (attr, algorithm): the same function, as activations.py defines it.
FUSIBLE = {
    "gelu": ("gelu", "none"),  # exact: x·Φ(x) with erf
    "gelu_python": ("gelu", "none"),
    "gelu_new": ("gelu", "tanh"),
    "gelu_pytorch_tanh": ("gelu", "tanh"),
    "gelu_python_tanh": ("gelu", "tanh"),
    "gelu_fast": ("gelu", "tanh"),
    "gelu_accurate": ("gelu", "tanh"),
    "relu": ("relu", ""),
}


class WatchedWeight(nn.Parameter):
    """The Parameter class a packed layer's weight takes while it is packed: the same tensor, and it
    counts each time its ``.data`` is handed out or replaced. A write through ``.data``
    (``w.data.zero_()``, ``p.data.add_(...)`` in an old optimizer or a hand-written SGD step) shares
    the storage but not the version counter, so it would leave the packed copy stale without a
    word; any such access counts as a change, and the next packed forward packs again. (A write
    through memory shared outside torch, such as ``w.detach().numpy()``, is not seen: after one,
    call ``model.use_book_modules()`` or load again; docs/performance.md.) Back on ``nn.Linear``, it
    is a plain ``nn.Parameter`` again.

    ``nn.Parameter(w)`` (as torch's parametrizations call it: ``weight_norm``) makes a Parameter of
    another class than torch's own from ``w.detach()``, and takes it only if it keeps the class; so
    there ``detach`` gives a WatchedWeight of the same memory that shares this one's count."""

    @property
    def data(self) -> torch.Tensor:
        self._handed_out()[0] += 1
        return torch._C.TensorBase.data.__get__(self)

    @data.setter
    def data(self, value: torch.Tensor) -> None:
        self._handed_out()[0] += 1
        torch._C.TensorBase.data.__set__(self, value)

    def _handed_out(self) -> list[int]:
        """[how many times ``.data`` was handed out or replaced], shared with the Parameters made from it."""
        return self.__dict__.setdefault("_data_handed_out", [0])

    def detach(self) -> torch.Tensor:
        if sys._getframe(1).f_code is not _PARAMETER_NEW:
            return super().detach()  # (a plain Tensor, as a Parameter's)
        twin = torch.Tensor._make_subclass(WatchedWeight, self, False)  # the same memory and version counter
        twin.__dict__["_data_handed_out"] = self._handed_out()
        return twin

    def __repr__(self) -> str:  # as nn.Parameter's, not "Parameter(WatchedWeight(...))"
        return "Parameter containing:\n" + repr(self.detach().requires_grad_(self.requires_grad))


_PARAMETER_NEW = nn.Parameter.__new__.__code__  # where nn.Parameter(w) asks w.detach() to keep w's class


# what copies rebuild on use
_CACHE_LEFT_OUT = {"_packed": None, "_packed_for": None, "_packed_storage": None, "_inference_noted": False}


def _weight_key(weight: torch.Tensor) -> tuple:
    """What tells a weight's values apart from those packed: its memory, its version counter (every
    in-place torch op bumps it), the writes through ``.data`` (WatchedWeight), the optimizer steps
    taken in the process (``optimizer_steps``), dtype and shape."""
    handed_out = weight.__dict__.get("_data_handed_out", [0])[0]
    return (weight.data_ptr(), weight._version, handed_out, _optimizer_steps[0], weight.dtype, tuple(weight.shape))


_optimizer_steps = [0]  # steps taken by any torch.optim optimizer since the first packing (follow_optimizer_steps)
_step_hook = []  # the hook's handle, once registered


def follow_optimizer_steps() -> None:
    """Count every ``torch.optim`` optimizer's step from now on (one process-wide post-hook, registered
    once, by the first packing). torch's fused CPU kernels (``AdamW(fused=True)``, ``SGD(fused=True)``)
    write the parameters without bumping their version counter, so the key above could not see their
    update; the count is part of the key, so after any step every packed weight is packed again on
    its next packed forward (a training loop's evaluations repack anyway: the weights did change)."""
    if not _step_hook:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        _step_hook.append(register_optimizer_step_post_hook(_count_step))


def _count_step(optimizer, args, kwargs) -> None:
    _optimizer_steps[0] += 1


class PackedLinear(nn.Linear):
    """An ``nn.Linear`` that multiplies through oneDNN with its weight prepacked.

    It holds the very same ``weight`` and ``bias`` Parameters as the layer it replaces (state dicts,
    optimizers and ``.to()`` see no difference); the packed copy is a cache, rebuilt whenever the
    weight changes (a new tensor, an in-place update, a write through ``.data``: WatchedWeight, a torch.optim step,
    another dtype). With ``post_op`` it also applies the feed-forward activation.
    """

    def __init__(self, linear: nn.Linear, post_op: tuple[str, str] | None = None, activation=None):
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self.post_op, self.activation = post_op, activation  # ("gelu", "none"), activations.exact_gelu
        self._packed, self._packed_for, self._inference_noted = None, None, False
        self._packed_storage = None  # the memory packed, held: no other tensor can take its address (_weight_key)
        self.applied = activation is not None  # whether the last call applied the activation (AppliedBy)

    def packed_weight(self) -> torch.Tensor | None:
        """The weight in oneDNN's layout, or None where oneDNN cannot take it (e.g. a model moved
        to bfloat16 on a CPU without AVX-512 after loading), or where a change of the weight could
        not be seen: an inference tensor (a model moved or copied inside ``torch.inference_mode()``)
        keeps no version counter, so an in-place update would leave a stale packed copy; such a
        layer runs on ``F.linear`` (the same numbers; moved or copied outside, it is packed again).
        So does a weight of another Parameter class than torch's, whose ``.data`` cannot be watched."""
        weight = self.weight
        if type(weight) is nn.Parameter:  # (again after pickling, which rebuilds a plain Parameter)
            weight.__class__ = WatchedWeight
        unseen = None
        if weight.is_inference():
            unseen = "an inference tensor (no version counter)"
        elif type(weight) is not WatchedWeight:
            unseen = f"a {type(weight).__name__} (writes through its .data unseen)"
        if unseen:
            if not self._inference_noted:
                log.info("%s: its weight is %s: running on F.linear", self, unseen)
                self._inference_noted = True
            return None
        follow_optimizer_steps()
        if self._packed_for != _weight_key(weight):
            refuse_if_read_from_written_over(weight)  # (read from a mapped file written over in place: refused)
            with torch.no_grad():
                try:
                    self._packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)
                except RuntimeError:
                    self._packed = None
            self._mark_packed_from(weight)
        return self._packed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        training = records_gradient(self, x)
        usable = x.device.type == "cpu" and x.dtype == self.weight.dtype in (torch.float32, torch.bfloat16)
        # autograd needs F.linear; so does torch.compile, whose inductor packs weights its own way, and so
        # do torch.export and jit's tracer (torch.jit.trace, the legacy torch.onnx.export): a graph holds
        # no oneDNN-packed tensor
        recording = is_compiling() or torch.jit.is_tracing()  # (another thread's compile too: only the kernel changes)
        packed = self.packed_weight() if usable and not training and not recording else None
        # A forward hook is shown the projection itself; then the feed-forward applies the activation (AppliedBy).
        # So it does where the pair no longer holds: this layer wrapped or replaced, the activation replaced.
        applied = self.activation is not None and not is_hooked(self) and is_fused_pair(self)
        if applied != self.applied:  # (written when it changes only: torch.export warned of a side effect per layer)
            self.applied = applied
        if packed is None:
            self.lay_out_weight()
            y = F.linear(x, self.weight, self.bias)
            return self.activation(y) if self.applied else y
        attr, algorithm = self.post_op if self.applied else ("none", "")
        return torch.ops.mkldnn._linear_pointwise(x, packed, self.bias, attr, [], algorithm)

    def lay_out_weight(self) -> None:
        """The weight in its own contiguous (out, in) memory, as everything but the packed GEMM reads
        it. A kernel stored transposed (TensorFlow's (in, out)) stays a view of its file while only
        its packed copy is multiplied (one copy held: ``lay_out_unpacked``); the moment anything
        else would multiply it (training, the book's modules, a move), it is laid out, so the
        numbers never depend on how the file stored it. The packed copy stays valid: same values."""
        weight = self.weight
        if weight.is_contiguous():
            return
        refuse_if_read_from_written_over(weight)  # (read from a mapped file written over in place: refused)
        packed_for_this = self._packed_for == _weight_key(weight)
        with torch.inference_mode(False), torch.no_grad():  # an ordinary tensor, even under inference_mode
            weight.data = weight.data.contiguous()
        if packed_for_this:
            self._mark_packed_from(weight)

    def _mark_packed_from(self, weight: torch.Tensor) -> None:
        """The packed copy is of ``weight``'s values: its key, and its memory held (no other tensor
        can take the address while the key names it)."""
        self._packed_for, self._packed_storage = _weight_key(weight), weight.untyped_storage()

    def _apply(self, fn, recurse=True):  # .to(), .half(), .cuda(): from the laid-out weight
        self.lay_out_weight()
        return super()._apply(fn, recurse)

    def train(self, mode: bool = True):  # training multiplies through F.linear (and may broadcast the weight)
        if mode:
            self.lay_out_weight()
        return super().train(mode)

    def __getstate__(self):  # pickling and deepcopy: the cache is rebuilt on first use
        state = super().__getstate__()
        return dict(state, **_CACHE_LEFT_OUT)

    def __deepcopy__(self, memo):
        """As ``__getstate__``: the cache left out (oneDNN's packed tensor cannot be copied). Its own,
        since torch's parametrizations (weight_norm) give a class without one a ``__deepcopy__`` that
        copies ``__dict__`` whole, and a ``__getstate__`` that refuses."""
        replica = self.__new__(type(self))
        memo[id(self)] = replica
        replica.__dict__ = copy.deepcopy(dict(self.__dict__, **_CACHE_LEFT_OUT), memo)
        return replica

    def extra_repr(self) -> str:
        fused = f", post_op={self.post_op[0]}" if self.post_op else ""
        return f"{super().extra_repr()}, backend=onednn{fused}"


def onednn_refuses(dtype: torch.dtype) -> str | None:
    """Why ``PackedLinear`` cannot multiply weights of ``dtype`` on this CPU, or None where it can:
    torch built without oneDNN, a dtype other than float32 and bfloat16, or bfloat16 on a CPU with
    neither AVX-512 (bw, vl, dq) nor AVX-NE-CONVERT, which oneDNN says on a tiny reorder."""
    if not torch.backends.mkldnn.is_available():
        return "torch was built without oneDNN"
    if dtype not in (torch.float32, torch.bfloat16):
        return f"dtype {dtype}"
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(8, 8, dtype=dtype), None)
    except RuntimeError as error:
        return str(error).split("\n")[0]
    return None


def records_gradient(layer: nn.Module, x: torch.Tensor) -> bool:
    """Whether autograd records ``layer``'s call on ``x``: gradients are on, and x or any Parameter
    of the layer's own needs one. Any, not just the weight: BitFit fine-tunes the biases alone, the
    weights frozen, and layer 0's input (the frozen embeddings' output) needs no gradient; oneDNN's
    op, which has no autograd formula, would leave such a bias's ``grad`` None without an error."""
    if not torch.is_grad_enabled():
        return False
    return x.requires_grad or any(p is not None and p.requires_grad for p in layer._parameters.values())


class AppliedBy:
    """The feed-forward's activation where its intermediate projection ``layer`` applies it as the
    GEMM writes (a post-op, or the layer's own call of the function): nothing is left to do, unless
    the layer, hooked, gave the projection itself on its last call (``layer.applied`` False), so
    that the hook saw what transformers' ``intermediate.dense`` gives.

    The hand-off holds only while the pair is the one built: ``feed_forward.intermediate`` is still
    ``layer`` and ``feed_forward.activation`` still this marker (``intact``, by identity). A LoRA-style
    wrapper around the projection, a fresh ``nn.Linear`` in its place or another activation breaks
    it; then the layer gives the plain product and the activation is applied here (or by the new
    function), so the numbers stay those of the book: GEMM, then activation."""

    def __init__(self, feed_forward: nn.Module, layer: nn.Module):
        self.feed_forward, self.layer = feed_forward, layer
        layer.fused_by = self  # (a plain attribute: not a submodule)

    def intact(self) -> bool:
        return self.feed_forward.intermediate is self.layer and self.feed_forward.activation is self

    def __call__(self, x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
        return x if self.intact() and self.layer.applied else self.layer.activation(x, inplace)


def is_fused_pair(layer: nn.Module) -> bool:
    """Whether ``layer`` may apply the feed-forward's activation itself: its AppliedBy's pair holds."""
    fused_by = layer.__dict__.get("fused_by")
    return fused_by is not None and fused_by.intact()


def use_backend(model: nn.Module, backend: str) -> None:
    """Run ``model``'s encoder layers' projections on ``backend`` (one of BACKENDS); undoes any
    earlier choice. The heads keep ``nn.Linear``: they are a sliver of the work."""
    if backend not in BACKENDS:
        raise ValueError(f"gemm backend must be one of {', '.join(BACKENDS)} (or 'auto'), got {backend!r}")
    for layer in encoder_layers(model):
        feed_forward = layer.feed_forward
        feed_forward.activation = feed_forward_activation(feed_forward)  # unfused: the original function back
        for part in (layer.attention, feed_forward):
            for parent in list(part.modules()):  # (a packed layer inside a wrapper, a LoRA's base_layer, too)
                for name, child in list(parent.named_children()):
                    if isinstance(child, nn.Linear) and (parent is part or isinstance(child, PackedLinear)):
                        setattr(parent, name, _plain(child) if backend == "mkl" else PackedLinear(child))
        act = activation_name(feed_forward)
        if backend == "onednn-fused" and act in FUSIBLE and isinstance(feed_forward.intermediate, PackedLinear):
            feed_forward.intermediate = PackedLinear(feed_forward.intermediate, FUSIBLE[act], feed_forward.activation)
            feed_forward.activation = AppliedBy(feed_forward, feed_forward.intermediate)
    model.gemm_backend = backend


def encoder_layers(model: nn.Module) -> list[nn.Module]:
    """model.py's EncoderLayers (found by their parts: this module sits below model.py)."""
    return [module for module in model.modules() if hasattr(module, "attention") and hasattr(module, "feed_forward")]


def _plain(linear: nn.Linear) -> nn.Linear:
    if type(linear) is nn.Linear:
        return linear
    linear.lay_out_weight()
    if type(linear.weight) is WatchedWeight:  # the book's own class back
        linear.weight.__class__ = nn.Parameter
    plain = nn.Linear.__new__(nn.Linear)
    nn.Module.__init__(plain)
    plain.in_features, plain.out_features = linear.in_features, linear.out_features
    plain.weight, plain.bias = linear.weight, linear.bias
    return plain


def feed_forward_activation(feed_forward):
    """The feed-forward's activation function, also where oneDNN applies it (``onednn-fused``)."""
    if isinstance(feed_forward.activation, AppliedBy):  # (its own layer's: the intermediate may have been replaced)
        return feed_forward.activation.layer.activation
    return feed_forward.activation


def activation_name(feed_forward) -> str | None:
    """The config name of the feed-forward's activation function (the first name that means it)."""
    from ..activations import ACTIVATIONS

    activation = feed_forward_activation(feed_forward)
    return next((name for name, f in ACTIVATIONS.items() if f is activation), None)


def lay_out_unpacked(model: nn.Module, release=None) -> None:
    """Lay out afresh every weight that is still a view in another layout (a TensorFlow kernel as
    loaded) unless the packed GEMM is the only thing that multiplies it; ``release`` (the loader's)
    gives the view's file pages back. A packed projection keeps its view, with its pages given
    back: oneDNN's copy is the one held."""
    packed = {id(module.weight) for module in model.modules()
              if isinstance(module, PackedLinear) and module.packed_weight() is not None}  # fmt: skip
    for module in model.modules():
        for tensor in [*module._parameters.values(), *module._buffers.values()]:
            if tensor is not None and not tensor.is_contiguous() and id(tensor) not in packed:
                view = tensor.data
                with torch.inference_mode(False), torch.no_grad():
                    tensor.data = view.contiguous()
                if release is not None:
                    release(view)
