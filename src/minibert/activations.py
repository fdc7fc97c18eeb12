"""The feed-forward non-linearities a config.json can name in ``hidden_act``.

BERT uses the exact GELU, ``x·Φ(x)`` with Φ the Gaussian CDF written with erf, as Google's first
TensorFlow code did (``0.5·(1 + erf(x/√2))``; transformers' ``gelu``). Google's later code
(modeling.py's ``gelu`` today) uses the tanh approximation ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``,
which transformers calls ``gelu_new`` (and ``gelu_pytorch_tanh``, ``gelu_fast``, ``gelu_accurate``,
``gelu_python_tanh``: the same function written five ways). The two differ by up to ~1e-3, so
confusing them is a silently wrong number: every name below means exactly the function that
transformers' ``ACT2FN`` gives it (the tests compare each one with ``ACT2FN``), and any other name
is refused.

Each function is ``f(x, inplace=False)``; ``inplace=True`` may overwrite x (one buffer fewer), and
is only passed where nothing else holds x: no gradient flows through it, and no forward hook
(``is_hooked``) was shown it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def is_hooked(module: torch.nn.Module) -> bool:
    """Whether a forward hook sees ``module``'s output: one of its own, or one registered for every
    module (``torch.nn.modules.module.register_module_forward_hook``)."""
    return bool(module._forward_hooks or torch.nn.modules.module._global_forward_hooks)


def exact_gelu(x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    """x·Φ(x), Φ(x) = (1 + erf(x/√2)) / 2: BERT's activation."""
    return torch.ops.aten.gelu_(x) if inplace else F.gelu(x)


def tanh_gelu(x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    """0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): the tanh approximation of GELU."""
    return torch.ops.aten.gelu_(x, approximate="tanh") if inplace else F.gelu(x, approximate="tanh")


def _out_of_place(function):
    return lambda x, inplace=False: function(x)


def _laplace(x, mu=0.707107, sigma=0.282095):  # MEGA's bounded activation
    return 0.5 * (1.0 + torch.erf((x - mu).div(sigma * 2.0**0.5)))


ACTIVATIONS = {
    "gelu": exact_gelu,
    "gelu_python": exact_gelu,  # the same erf formula, written in Python
    "gelu_new": tanh_gelu,
    "gelu_pytorch_tanh": tanh_gelu,
    "gelu_python_tanh": tanh_gelu,
    "gelu_fast": tanh_gelu,  # √(2/π) rounded to 0.7978845608
    "gelu_accurate": tanh_gelu,
    "gelu_10": _out_of_place(lambda x: F.gelu(x).clamp(-10, 10)),  # exact GELU clipped to [-10, 10]
    "quick_gelu": _out_of_place(lambda x: x * torch.sigmoid(1.702 * x)),
    "relu": _out_of_place(F.relu),
    "relu2": _out_of_place(lambda x: F.relu(x).square()),
    "relu6": _out_of_place(F.relu6),
    "leaky_relu": _out_of_place(F.leaky_relu),  # negative slope 0.01
    "silu": _out_of_place(F.silu),
    "swish": _out_of_place(F.silu),
    "mish": _out_of_place(F.mish),
    "hardswish": _out_of_place(F.hardswish),
    "sigmoid": _out_of_place(torch.sigmoid),
    "tanh": _out_of_place(torch.tanh),
    "sqrtsoftplus": _out_of_place(lambda x: F.softplus(x).sqrt()),
    "laplace": _out_of_place(_laplace),
    "linear": _out_of_place(lambda x: x),
}

# Names transformers knows that minibert refuses: these activations have learned parameters that
# BERT checkpoints do not store.
REFUSED = {"prelu": "a learned slope", "xielu": "learned alphas"}


def check_activation(name) -> None:
    """Raise ValueError unless ``name`` is an activation minibert computes exactly."""
    if isinstance(name, str) and name in ACTIVATIONS:
        return
    known_but_refused = isinstance(name, str) and name in REFUSED
    why = f"it has {REFUSED[name]}, which minibert does not implement" if known_but_refused else "unknown name"
    shown = repr(name) if len(repr(name)) <= 40 else repr(name)[:37] + "..."  # never a megabyte in an error line
    computed = ", ".join(ACTIVATIONS)
    raise ValueError(f"field hidden_act = {shown} is not supported ({why}); minibert computes: {computed}")


def activation(name: str):
    """The function ``config.hidden_act`` names, as ``f(x, inplace=False)``."""
    check_activation(name)
    return ACTIVATIONS[name]
