"""A cold start: loading initialises no weight (the checkpoint's tensors are the weights, not even
the meta device's reference ops run), and one sentence through the command imports no compiler
(torch._dynamo, torch._inductor), nor transformers or huggingface_hub.
"""

from __future__ import annotations

import subprocess
import sys

import torch

from minibert import BertModel
from tiny_hub import TINY

# ----------------------------------------------------------------------------- cold start


class _CountInitialisation(torch.overrides.TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        from minibert.loading.from_pretrained import _WithoutInitialisation

        if func in _WithoutInitialisation.SKIPPED:
            self.calls.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def test_loading_initialises_no_weight():
    """The checkpoint's tensors are the weights: nothing is randomly initialised first, not even
    on the meta device (where torch's reference ops would import its compiler, ~2 s)."""
    with _CountInitialisation() as counter:
        BertModel.from_pretrained(TINY)
    assert counter.calls == []
    with _CountInitialisation() as counter:  # the control: building a model from a config initialises it
        BertModel(BertModel.from_pretrained(TINY).config)
    assert "normal_" in counter.calls or "kaiming_uniform_" in counter.calls


def test_one_sentence_through_the_command_imports_no_compiler(minilm_dir):

    code = ("import sys; from minibert.apps import cli; cli.main(['embed', '--model', sys.argv[1], 'one sentence']); "
            "print(sorted(m for m in sys.modules if m.startswith(('torch._dynamo', 'torch._inductor', 'transformers',"
            " 'huggingface_hub'))), file=sys.stderr)")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code, str(minilm_dir)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "[]", result.stderr
