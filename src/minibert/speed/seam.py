"""Where speed enters a loaded model, and the one switch that takes it out again.

``BertModel(config)`` built by hand is model.py's code and nothing else. ``from_pretrained``
(loading/from_pretrained.py) ends with one call, ``speed_up(model, gemm)``, and this is everything it changes; each
change computes the same numbers as the book's modules, up to the order of float sums
(tests/test_speed_book_modules.py compares both with transformers on real weights):

====================================  ===============================================  ==========================
what is swapped                       into                                             why
====================================  ===============================================  ==========================
the encoder layers' six ``nn.Linear`` ``PackedLinear`` (packed_linear.py; the same     oneDNN's prepacked GEMM is
(Q, K, V, attention output, the       Parameters), on the backends ``onednn`` /        up to 2.3x MKL's on some
feed-forward's two projections)       ``onednn-fused``, when measured faster on this    AVX-512 CPUs
                                      CPU (gemm.choose)
``FeedForward.activation``            identity, the activation applied by the            one pass over the
                                      intermediate GEMM as it writes (``onednn-fused``)  (tokens × F) tensor fewer
the same six ``nn.Linear``, only      ``int8.Int8Linear``: int8 weights per channel,     asked for by name: an
with ``dtype="int8"``                 activations int8 per call (FBGEMM or oneDNN),     approximation, measured
                                      checked against float32 at load (int8_check.py)   (docs/int8.md)
====================================  ===============================================  ==========================

int8 is the one swap that changes the numbers beyond float rounding, so it is never automatic.

The attention's fast path (fast_path.py: the fused kernel, and packing away padding where a caller
asks for it by name) is not a swapped module: it is ``BertModel.use_fast_path``, on by default.

``model.use_book_modules()`` gives back the book's exact modules on a loaded model: plain
``nn.Linear``, the activation in place, and ``use_fast_path = False`` (the attention formula as
model.py writes it). ``model.use_book_modules(False)`` puts the speed back, as it was loaded:

    >>> from minibert import BertConfig, BertModel
    >>> model = BertModel(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
    ...                              intermediate_size=64, vocab_size=100))
    >>> model.use_book_modules().use_fast_path, model.book_modules
    (False, True)
    >>> model.use_book_modules(False).use_fast_path, model.book_modules
    (True, False)
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import torch
from torch import nn

from ..errors import QuantizationError


@dataclass(frozen=True)
class Speed:
    """What a model runs besides the book's modules (kept while it runs them, to be put back)."""

    gemm_backend: str  # speed.BACKENDS: "mkl" = the book's nn.Linear (F.linear, MKL on x86)
    fast_attention: dict[str, bool]  # each BertModel inside (by module name): its use_fast_path
    int8: dict[str, nn.Module] = field(default_factory=dict)  # module name → its Int8Linear (dtype="int8")
    weights: dict[str, int] = field(default_factory=dict)  # an int8 model's parameters as swapped: fingerprints


def fingerprints(model: nn.Module, layers) -> dict[str, int]:
    """For the parameters of ``layers`` (module names: the int8 projections, while their float32
    book modules stand in), each one's CRC32 of its bytes: what tells whether they changed since
    (trained, or written through ``.data``, which bumps no version counter). Only they matter: the
    int8 layers put back hold them as loaded, while the embeddings, LayerNorms and heads stay as
    trained. By content alone: a copy holds the same bytes under new version counters (pickle,
    ``torch.save`` and ``torch.load``, ``load_state_dict(model.state_dict())``), and is the same
    model. A CRC catches every change within 32 consecutive bits, so any one value changed; a
    change spread further is missed with odds of 2**-32 (a sum of the values missed two swapped).
    One pass, no copy (~20 ms for MiniLM's 11 M projection weights)."""
    return {f"{layer}.{name}": _crc32(parameter)
            for layer in layers for name, parameter in model.get_submodule(layer).named_parameters()}  # fmt: skip


def _crc32(tensor: torch.Tensor) -> int:
    """zlib's CRC32 of the tensor's bytes, in its logical order (a transposed view read as laid out)."""
    return zlib.crc32(tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy())


def speed_up(model: nn.Module, gemm: str | None = None, int8_from=None, release=None) -> None:
    """The one place where a loaded model gets its speed: the GEMM backend measured on this CPU (or
    ``gemm``: "auto", "mkl", "onednn", "onednn-fused"; see gemm.py). Attention's fast path is on
    already (``BertModel.use_fast_path``). ``int8_from`` (``int8_check.LoadedFrom``: the files and
    name the model was read from, when loaded with ``dtype="int8"``): the encoder's projections in
    int8, checked against float32 (int8_check.py).

    ``release(tensor)`` (from the loader, for a mapped checkpoint: loading/file_pages.py) gives a
    weight's pages back once it is no longer read as it is: a projection once packed into oneDNN's
    layout, or turned into int8. So a loaded model holds each weight once."""
    if next(model.parameters()).device.type == "cpu":
        from .gemm import choose

        choose(model, "mkl" if int8_from is not None else gemm)  # int8 replaces the projections: none packed
    if int8_from is not None:
        from .int8_check import load_int8

        load_int8(model, int8_from, release)
    elif release is not None:
        from .packed_linear import PackedLinear

        for module in model.modules():
            if isinstance(module, PackedLinear) and module.packed_weight() is not None:
                release(module.weight)  # packed now; its float32 pages come back only if read
    from .packed_linear import lay_out_unpacked

    lay_out_unpacked(model, release)  # a weight stored transposed: laid out, unless only its packed copy is read


def refuse_gemm_for_int8(gemm: str | None) -> None:
    """``gemm`` checked as gemm.choose checks it (a name that is none of its choices, here or in
    ``$MINIBERT_GEMM``, is the same ValueError), then refused where it names a library: it picks
    the float32 projections' GEMM, and ``dtype="int8"`` replaces those projections with int8 ones
    (their library is ``$MINIBERT_INT8``'s, or measured: int8_check.choose_library), so it would
    not be used. Before a file is read, as every argument of from_pretrained is checked."""
    from .gemm import requested_backend

    requested, source = requested_backend(gemm)
    if source == "gemm" and requested != "auto":
        raise ValueError(f"gemm={gemm!r} picks the float32 linear layers' library, but dtype='int8' runs the encoder's "
                         "projections in int8, on an int8 library of their own (MINIBERT_INT8, docs/int8.md): leave "
                         "gemm out")  # fmt: skip


def use_book_modules(model: nn.Module, book: bool = True) -> None:
    """``book=True``: every layer back to model.py's classes (plain ``nn.Linear``, the activation in
    place) and attention written out (``use_fast_path = False``); ``book=False``: the speed the model
    had before, back. Either way twice is the same as once. A model whose mapped weights file was
    written over in place is refused first (loading/file_pages.py), as its forward pass is."""
    from ..loading.file_pages import refuse_if_model_file_written_over
    from .int8 import fuse_activations, int8_layers
    from .int8_twin import float32_twin
    from .packed_linear import use_backend

    refuse_if_model_file_written_over(model)  # the weights are read: laid out afresh, int8's twin, fingerprints
    saved: Speed | None = getattr(model, "_speed", None)
    if book and saved is None:
        encoders = [(name, module) for name, module in model.named_modules() if hasattr(module, "use_fast_path")]
        fast = {name: encoder.use_fast_path for name, encoder in encoders}
        int8, backend = dict(int8_layers(model)), getattr(model, "gemm_backend", "mkl")
        use_backend(model, "mkl")  # (first: an int8 layer that applies the activation gives it back)
        if int8:  # the float32 weights were not kept (a quarter of the memory): read again from the checkpoint
            twin = float32_twin(model)
            for name in int8:
                model.set_submodule(name, twin.get_submodule(name))
        model._speed = Speed(backend, fast, int8, fingerprints(model, int8))
        for name in fast:
            model.get_submodule(name).use_fast_path = False
    elif not book and saved is not None:
        now = fingerprints(model, saved.int8)
        if now != saved.weights:
            changed = [name for name, print_ in now.items() if saved.weights.get(name) != print_]
            raise QuantizationError(
                f"this int8 model's float32 weights changed since use_book_modules() ({len(changed)} tensors of its "
                f"int8 projections, e.g. {changed[0]}): its int8 layers hold them as loaded, so going back would run "
                "a mix of both; "
                "keep the book's modules, or save_pretrained() the model and load that with dtype='int8'"
            )
        use_backend(model, "mkl" if saved.int8 else saved.gemm_backend)
        for name, layer in saved.int8.items():
            model.set_submodule(name, layer)
        if saved.int8:
            fuse_activations(model)
            model.gemm_backend = saved.gemm_backend
        for name, fast in saved.fast_attention.items():
            model.get_submodule(name).use_fast_path = fast
        model._speed = None
