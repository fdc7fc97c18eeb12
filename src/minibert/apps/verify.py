"""Numerical verification against Hugging Face transformers, layer by layer.

This module imports transformers *only when called*: it is the one place where minibert meets
its reference, used by ``minibert verify`` and ``scripts/compare_hf.py``. Nothing else in the
package needs transformers.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import torch

from ..heads import BertForMaskedLM, BertForPreTraining
from ..model import BertModel
from ..tokenizer.bert_tokenizer import BertTokenizer

SAMPLE_TEXTS = [
    "I love Paris",
    "She is a MachineLearning Engineer and works in California",
    "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi river bank.",
    "Les élèves ont réussi l'examen. Ученики сдали экзамен. 学生们通过了考试。 🎉",
]


def compare_with_transformers(
    name_or_path: str, texts: list[str] | None = None, heads: bool | None = None, gemm: str | None = None,
    device=None,
) -> list[tuple[str, float]]:
    """Run ``texts`` through minibert and transformers; return [(output name, max |Δ|), ...] over
    the embeddings, every layer, every attention map and, when the checkpoint has them, the pooler
    and the masked-LM and next-sentence logits (checkpoint_parts). Real tokens only (padding is not compared). Both
    models run on ``device`` (default the CPU), in float32."""
    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        raise RuntimeError(
            "minibert verify compares with transformers, which is not installed: pip install 'minibert[verify]'"
        ) from None
    transformers.utils.logging.disable_progress_bar()  # its "Loading weights" bar: nobody asked for progress
    transformers.utils.logging.set_verbosity_error()
    texts = texts or SAMPLE_TEXTS
    tokenizer = BertTokenizer.from_pretrained(name_or_path)
    from ..loading.checkpoint_files import checkpoint_parts, find_checkpoint, tensor_names

    config_file, weights_file = find_checkpoint(name_or_path)  # the files minibert reads, fetched or bundled
    folder = str(Path(config_file).parent)  # what transformers reads: the same files (a bundled name is no hub id)
    parts = checkpoint_parts(tensor_names(weights_file))
    if heads is None:
        heads = bool(parts & {"masked-LM", "next-sentence"})
    pooler = "pooler" in parts
    if heads and not {"pooler", "next-sentence"} <= parts:  # a masked-LM checkpoint: the MLM head on its own
        head_class, head_name = BertForMaskedLM, "BertForMaskedLM"
    elif heads:
        head_class, head_name = BertForPreTraining, "BertForPreTraining"
    if heads:
        ours_full = head_class.from_pretrained(name_or_path, gemm=gemm, device=device)
        ours = ours_full.bert
        # float32 as minibert's default (transformers 5 keeps a checkpoint's stored dtype: bfloat16 for some)
        theirs_full = getattr(transformers, head_name).from_pretrained(folder, attn_implementation="eager")
        theirs_full = theirs_full.float()
        theirs = theirs_full.to(ours.device).bert
        pooler = head_class is BertForPreTraining
    else:  # a token classifier or QA model is saved without a pooler (transformers' add_pooling_layer=False)
        ours = BertModel.from_pretrained(name_or_path, gemm=gemm, device=device, add_pooling_layer=pooler)
        theirs = transformers.BertModel.from_pretrained(folder, attn_implementation="eager",
                                                        add_pooling_layer=pooler).float()  # fmt: skip
    theirs.to(ours.device).eval()
    longest = min(tokenizer.model_max_length, ours.config.max_position_embeddings)  # (a tokenizer may set no limit)
    batch = tokenizer(texts, padding=True, truncation=True, max_length=longest, return_tensors="pt")
    batch = {key: value.to(ours.device) for key, value in batch.items()}
    real = batch["attention_mask"].bool()
    rows = []
    with torch.inference_mode():
        every = {"output_hidden_states": True, "output_attentions": True, "return_dict": True}  # whatever config says
        a, b = ours(**batch, **every), theirs(**batch, **every)
        for index, (x, y) in enumerate(zip(a.hidden_states, b.hidden_states)):
            rows.append(("embeddings" if index == 0 else f"layer {index}", _max_diff(x[real], y[real])))
        if pooler:
            rows.append(("pooler_output", _max_diff(a.pooler_output, b.pooler_output)))
        for index, (x, y) in enumerate(zip(a.attentions, b.attentions)):
            rows.append((f"attention {index + 1}", _max_diff(x.transpose(1, 2)[real], y.transpose(1, 2)[real])))
        if heads:
            c, d = ours_full(**batch, return_dict=True), theirs_full.eval()(**batch, return_dict=True)
            if head_class is BertForMaskedLM:
                rows.append(("masked-LM logits", _max_diff(c.logits[real], d.logits[real])))
            else:
                rows.append(("masked-LM logits", _max_diff(c.prediction_logits[real], d.prediction_logits[real])))
                rows.append(("next-sentence logits", _max_diff(c.seq_relationship_logits,
                                                               d.seq_relationship_logits)))  # fmt: skip
    return rows


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()


def format_table(rows: list[tuple[str, float]], tolerance: float = 1e-5) -> str:
    width = max(len(name) for name, _ in rows)
    lines = [f"{'output':<{width}}  max |Δ|     within {tolerance:g}"]
    for name, diff in rows:
        lines.append(f"{name:<{width}}  {diff:.3e}  {'yes' if diff <= tolerance else 'NO'}")
    return "\n".join(lines)
