"""Numerical verification against Hugging Face transformers, layer by layer.

This module imports transformers *only when called*: it is the one place where minibert meets
its reference, used by ``minibert verify`` and ``scripts/compare_hf.py``. Nothing else in the
package needs transformers.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch

from ..model import BertModel
from ..tokenizer.bert_tokenizer import BertTokenizer
from .verify_batch import texts_batch

SAMPLE_TEXTS = [
    "I love Paris",
    "She is a MachineLearning Engineer and works in California",
    "After stealing money from the bank vault, the bank robber was seen fishing on the Mississippi river bank.",
    "Les élèves ont réussi l'examen. Ученики сдали экзамен. 学生们通过了考试。 🎉",
]


# Each head class's outputs compared: (row, the output's field, per token: compared at the real tokens only).
HEAD_OUTPUTS = {
    "BertForPreTraining": [("masked-LM logits", "prediction_logits", True),
                           ("next-sentence logits", "seq_relationship_logits", False)],
    "BertForMaskedLM": [("masked-LM logits", "logits", True)],
    "BertForNextSentencePrediction": [("next-sentence logits", "logits", False)],
    "BertForSequenceClassification": [("classifier logits", "logits", False)],
    "BertForTokenClassification": [("token-classifier logits", "logits", True)],
    "BertForQuestionAnswering": [("answer-start logits", "start_logits", True),
                                 ("answer-end logits", "end_logits", True)],
    "BertForMultipleChoice": [("multiple-choice logits", "logits", False)],
}  # fmt: skip
REFERENCE = "transformers (the reference)"


def compare_with_transformers(
    name_or_path: str, texts: list[str] | None = None, heads: bool | None = None, gemm: str | None = None,
    device=None,
) -> list[tuple[str, float]]:
    """Run ``texts`` through minibert and transformers; return [(output name, max |Δ|), ...] over
    the embeddings, every layer, every attention map, the pooler when the checkpoint has one and
    (unless ``heads`` is False) the logits of its heads, each side loading the class that loads them
    all (convert.py's ``class_for``: the pre-training heads, a sequence or token classifier, a
    multiple-choice or question-answering head; HEAD_OUTPUTS). Real tokens only (padding is not
    compared). Both models run on ``device`` (default the CPU), in float32.

    A TensorFlow checkpoint, which transformers 5 cannot read, is converted for the reference as
    ``minibert convert`` converts it, into a temporary folder. A failure of the reference, loading or
    running, is a RuntimeError that says it is transformers' (REFERENCE), not minibert's."""
    from ..loading.checkpoint_files import checkpoint_parts, find_checkpoint, tensor_names
    from .convert import class_for

    transformers = _import_transformers()
    texts = texts or SAMPLE_TEXTS
    tokenizer = BertTokenizer.from_pretrained(name_or_path)
    config_file, weights_file = find_checkpoint(name_or_path)  # the files minibert reads, fetched or bundled
    names = tensor_names(weights_file)  # (read once: a pickle's are read by opening it)
    pooler = "pooler" in checkpoint_parts(names)
    head = "BertModel" if heads is False else class_for(config_file, names)[0].__name__
    with _reference_folder(name_or_path, weights_file, config_file) as folder:  # (its files read while it runs)
        ours, theirs = _pair(transformers, head, name_or_path, folder, pooler, gemm, device)
        encoders = (getattr(ours, "bert", ours), getattr(theirs, "bert", theirs))
        pooled = encoders  # the pooler: the encoder's, unless the head class is built without the checkpoint's
        if pooler and encoders[0].pooler is None:  # (as in transformers: the token, QA and MLM heads have none)
            pooled = _pair(transformers, "BertModel", name_or_path, folder, pooler, gemm, device)
        batch = {key: value.to(ours.device) for key, value in texts_batch(tokenizer, texts, ours.config).items()}
        with torch.inference_mode():
            rows = _encoder_rows(encoders, pooled if pooler else None, batch)
            return rows + (_head_rows(head, ours, theirs, batch) if head != "BertModel" else [])


def _encoder_rows(encoders: tuple, pooled: tuple | None, batch: dict) -> list[tuple[str, float]]:
    """The embeddings, every layer, the pooler (``pooled``: the pair whose pooler is compared, None
    for a checkpoint without one) and every attention map, at the real tokens."""
    real = batch["attention_mask"].bool()
    every = {"output_hidden_states": True, "output_attentions": True, "return_dict": True}  # whatever config says
    a, b = encoders[0](**batch, **every), _reference_run(lambda: encoders[1](**batch, **every))
    rows = [("embeddings" if index == 0 else f"layer {index}", _max_diff(x[real], y[real]))
            for index, (x, y) in enumerate(zip(a.hidden_states, b.hidden_states))]  # fmt: skip
    if pooled is not None:
        c, d = (a, b) if pooled is encoders else (pooled[0](**batch, return_dict=True),
                                                  _reference_run(lambda: pooled[1](**batch, return_dict=True)))
        rows.append(("pooler_output", _max_diff(c.pooler_output, d.pooler_output)))
    for index, (x, y) in enumerate(zip(a.attentions, b.attentions)):
        rows.append((f"attention {index + 1}", _max_diff(x.transpose(1, 2)[real], y.transpose(1, 2)[real])))
    return rows


def _head_rows(head: str, ours, theirs, batch: dict) -> list[tuple[str, float]]:
    """The head's logits, both sides, on the batch (a per-token output at the real tokens): a
    multiple-choice head reads it as one question whose choices are the texts (B, T) → (1, B, T)."""
    real = batch["attention_mask"].bool()
    if head == "BertForMultipleChoice":
        batch = {key: value.unsqueeze(0) for key, value in batch.items()}
    c, d = ours(**batch, return_dict=True), _reference_run(lambda: theirs(**batch, return_dict=True))
    rows = []
    for row, field, per_token in HEAD_OUTPUTS[head]:
        x, y = getattr(c, field), getattr(d, field)
        rows.append((row, _max_diff(x[real], y[real]) if per_token else _max_diff(x, y)))
    return rows


def _pair(transformers, class_name: str, name_or_path: str, folder: str, pooler: bool, gemm, device) -> tuple:
    """(minibert's ``class_name`` loaded from ``name_or_path``, transformers' from ``folder``), in eval
    mode, float32 on both sides (transformers 5 keeps a checkpoint's stored dtype: bfloat16 for some);
    a BertModel with a pooler when the checkpoint has one (``pooler``)."""
    from .. import heads

    pooler = {"add_pooling_layer": pooler} if class_name == "BertModel" else {}
    ours = getattr(heads, class_name, BertModel).from_pretrained(name_or_path, gemm=gemm, device=device, **pooler)
    theirs = _reference_run(lambda: getattr(transformers, class_name).from_pretrained(
        folder, attn_implementation="eager", **pooler), f"to load {name_or_path} as {class_name}")  # fmt: skip
    return ours, theirs.float().to(ours.device).eval()


@contextlib.contextmanager
def _reference_folder(name_or_path: str, weights_file: Path, config_file: Path) -> Iterator[str]:
    """The folder transformers reads: the checkpoint's own (a bundled name is no hub id: its files),
    or for a TensorFlow checkpoint, which transformers 5 cannot read, the checkpoint converted as
    ``minibert convert`` converts it, in a temporary folder removed after (said on stderr)."""
    if weights_file.suffix != ".index":
        yield str(Path(config_file).parent)
        return
    from .convert import convert_checkpoint

    print(f"minibert: {name_or_path} is a TensorFlow checkpoint, which transformers 5 cannot read: the reference "
          "reads it converted as `minibert convert` converts it (in a temporary folder)", file=sys.stderr)  # fmt: skip
    logger, level = logging.getLogger("minibert"), logging.getLogger("minibert").level
    with tempfile.TemporaryDirectory(prefix="minibert-verify-") as temporary:
        logger.setLevel(logging.WARNING)  # its notes (the casing, the labels): minibert said them when it loaded
        try:
            converted = convert_checkpoint(name_or_path, Path(temporary) / "converted")
        finally:
            logger.setLevel(level)
        yield str(converted)


def _reference_run(call, doing: str = "on the sample batch"):
    """``call()``, transformers' side; its failure said as the reference's: RuntimeError, one line."""
    try:
        return call()
    except Exception as error:  # whatever transformers raises: its message, labelled as its own
        said = " ".join(str(error).split()) or type(error).__name__
        raise RuntimeError(f"{REFERENCE} failed {doing}: {said}") from None


def _import_transformers():
    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        raise RuntimeError(
            "minibert verify compares with transformers, which is not installed: pip install 'minibert[verify]'"
        ) from None
    transformers.utils.logging.disable_progress_bar()  # its "Loading weights" bar: nobody asked for progress
    transformers.utils.logging.set_verbosity_error()
    return transformers


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()  # NaN where either side has one (torch's max keeps it)


def format_table(rows: list[tuple[str, float]], tolerance: float = 1e-5) -> str:
    width = max(len(name) for name, _ in rows)
    lines = [f"{'output':<{width}}  max |Δ|     within {tolerance:g}"]
    for name, diff in rows:
        lines.append(f"{name:<{width}}  {diff:.3e}  {'yes' if diff <= tolerance else 'NO'}")
    return "\n".join(lines)


def verdict(rows: list[tuple[str, float]], tolerance: float) -> tuple[str, str | None]:
    """(the summary line, why the comparison fails or None). A NaN |Δ| (either side computed NaN,
    or both an infinity) fails: ``max`` and ``>`` let it pass (NaN compares false), which printed
    "max |Δ| 0" and exited 0 under a row marked NO."""
    nan = [name for name, diff in rows if math.isnan(diff)]
    worst = max((diff for _, diff in rows if not math.isnan(diff)), default=0.0)
    if nan:
        more = f" and {len(nan) - 1} more" if len(nan) > 1 else ""
        return (f"max |Δ| over {len(rows)} outputs: NaN in {', '.join(nan)}",
                f"NaN in {nan[0]}{more}: minibert's or transformers' output there is not a number")  # fmt: skip
    summary = f"max |Δ| over {len(rows)} outputs: {worst:.3e}"
    return summary, (f"outputs differ from transformers by {worst:.3e} > {tolerance:g}" if worst > tolerance else None)
