"""ONNX Runtime as the int8 peer: a BERT checkpoint exported to ONNX and quantized the way
sentence-transformers ships its ``model_qint8_avx512_vnni.onnx`` files, run on the batches the
Embedder makes. Used by tests/test_speed_int8_accuracy.py and scripts/bench_int8.py.

sentence-transformers' ``export_dynamic_quantized_onnx_model(model, "avx512_vnni", ...)`` calls
Optimum's ``AutoQuantizationConfig.avx512_vnni(is_static=False)``: dynamic quantization,
QOperator format, weights QInt8 symmetric **per channel**, activations QUInt8 asymmetric (per
tensor, computed at run time), ``reduce_range=False``, on ONNX Runtime's default operator list
(MatMul, and Gather: the embedding tables too). ``quantize_dynamic`` below makes those choices
(Optimum is not installed here: it pins its own transformers).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


def export_onnx(checkpoint: str | Path, directory: str | Path) -> Path:
    """transformers' BertModel of ``checkpoint`` as ONNX (torch's TorchScript exporter, opset 17,
    dynamic batch and length): input_ids, attention_mask, token_type_ids → last_hidden_state."""
    import transformers

    body = transformers.BertModel.from_pretrained(str(checkpoint), attn_implementation="eager").eval()

    class LastHiddenState(torch.nn.Module):  # the three inputs by name, one output: what the exporter traces
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state  # fmt: skip

    example = tuple(torch.ones(2, 8, dtype=torch.long) for _ in range(3))  # (B, T) ids, mask, types
    exported = Path(directory) / "model.onnx"
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]}
    torch.onnx.export(LastHiddenState(body), example, str(exported), input_names=names,
                      output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17,
                      dynamo=False)  # fmt: skip
    return exported


def quantize_int8(exported: Path) -> Path:
    """``exported`` quantized as sentence-transformers' avx512_vnni files are (see the module's docstring)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantized = exported.with_name("model_qint8.onnx")
    quantize_dynamic(str(exported), str(quantized), per_channel=True, reduce_range=False, weight_type=QuantType.QInt8)
    return quantized


def session(model_file: Path, threads: int):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])


def padded_batches(rows: list[list[int]], budget_tokens: int) -> list[tuple[list[int], np.ndarray, np.ndarray]]:
    """The Embedder's batches of ``rows`` (token ids with [CLS] and [SEP]): longest first, at most
    ``budget_tokens`` padded tokens each; (row numbers, ids (b, T), mask (b, T)) built up front."""
    from minibert.embedding.batches import token_budget_batches

    lengths = [len(ids) for ids in rows]
    order = sorted(range(len(rows)), key=lambda i: -lengths[i])
    batches = []
    for batch in token_budget_batches(order, lengths, budget_tokens):
        ids = np.zeros((len(batch), lengths[batch[0]]), dtype=np.int64)
        mask = np.zeros_like(ids)
        for position, index in enumerate(batch):
            ids[position, : lengths[index]], mask[position, : lengths[index]] = rows[index], 1
        batches.append((batch, ids, mask))
    return batches


def mean_pooled(session, batches, count: int, hidden: int) -> np.ndarray:
    """Each row's last hidden states mean-pooled over its real tokens, in the rows' own order: (count, hidden)."""
    out = np.empty((count, hidden), dtype=np.float32)
    for batch, ids, mask in batches:
        (states,) = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        weights = mask[..., None].astype(np.float32)
        out[batch] = (states * weights).sum(1) / weights.sum(1)
    return out


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
