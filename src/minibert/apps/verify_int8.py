"""``minibert verify --dtype int8``: what int8 costs a model, measured against its float32 self.

int8 (int8.py) is an approximation, so it is verified against the float32 model (which ``minibert
verify`` checks against transformers), on the same texts: the cosine of each text's sentence vector
(the last hidden states mean-pooled, as the Embedder pools), the largest |Δ| of every layer's hidden
states over the real tokens, and, for a classifier, how many predicted labels change. Every run skips
the padding (``skip_padding=True``), as the Embedder and the tasks do: in int8 a [PAD] row computed
widens the step every real token of its batch is quantized with, so a text's figure changed with the
padding the other texts gave it, and was not what the user gets. (It still depends on the other
texts' own tokens, as a batch of the Embedder does: docs/int8.md, "One text, many batches".) The texts
are cut and cased as the Embedder reads them (a sentence-transformers model's ``max_seq_length``, not
the tokenizer's longer limit: ``verify_batch.as_the_embedder_reads``). A classifier
of one output (a reranker's relevance, a regression's value) has no label to change: its argmax is
always 0. What int8 costs it is the score itself, so its report says the largest |Δ score| and how
many pairs of texts int8 puts in the other order by score (what a reranker returns), and
``minibert verify --dtype int8 --tolerance T`` bounds that |Δ score|.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..heads import BertForSequenceClassification
from ..inputs import AS_ASKED
from ..model import BertModel
from ..speed.int8_check import CALIBRATION_TEXTS, COSINE_FLOOR, sentence_vectors
from ..tokenizer.bert_tokenizer import BertTokenizer
from .verify_batch import as_the_embedder_reads, texts_batch


@dataclass
class Int8Report:
    """int8 against float32 on ``texts``."""

    texts: list[str]
    cosines: list[float]  # per text: sentence vector, int8 vs float32
    layers: list[tuple[str, float, float]]  # (name, max |Δ|, largest |value| in float32 there)
    labels_changed: int | None = None  # a classifier's argmax labels that differ; None for other models
    score_change: float | None = None  # one output (a score): the largest |Δ score|; None for other models
    largest_score: float | None = None  # one output: the largest |score| in float32
    pairs_reordered: int | None = None  # one output: pairs of texts in the other order by score (ties broken)

    @property
    def worst(self) -> float:
        return min(self.cosines)

    @property
    def mean(self) -> float:
        return sum(self.cosines) / len(self.cosines)


def compare_int8_with_float32(name_or_path: str, texts: list[str] | None = None, gemm: str | None = None,
                              device=None, compared: tuple | None = None) -> Int8Report:  # fmt: skip
    """Load ``name_or_path`` in float32 and in int8 and compare them on ``texts`` (default: the
    texts the int8 loader calibrates on). A checkpoint of a sequence classifier is loaded with its
    head, and its labels compared too (one output: its scores). ``gemm``: the float32 model's GEMM
    library (int8 runs its own). int8 runs on the CPU: a ``device`` elsewhere is refused
    (QuantizationError) before anything is read. ``compared``: ``compared_class(name_or_path)``, when
    the caller read it already (``minibert verify`` asks it whether ``--tolerance`` applies)."""
    texts = list(texts or CALIBRATION_TEXTS)
    tokenizer = BertTokenizer.from_pretrained(name_or_path)
    cls, keywords, outputs = compared or compared_class(name_or_path)
    classifier = outputs is not None
    approximate = cls.from_pretrained(name_or_path, dtype="int8", device=device, **keywords)  # (int8 picks no GEMM)
    exact = cls.from_pretrained(name_or_path, gemm=gemm, **keywords)
    tokenizer, max_length = as_the_embedder_reads(name_or_path, tokenizer, exact.config)
    batch = texts_batch(tokenizer, texts, exact.config, max_length)
    real = batch["attention_mask"].bool()  # (B, T)
    with torch.inference_mode():
        asked = {**AS_ASKED, "output_hidden_states": True, "skip_padding": True}  # not the checkpoint's config
        a = getattr(exact, "bert", exact)(**batch, **asked).hidden_states
        b = getattr(approximate, "bert", approximate)(**batch, **asked).hidden_states
        layers = [("embeddings" if index == 0 else f"layer {index}", (x[real] - y[real]).abs().max().item(),
                   x[real].abs().max().item()) for index, (x, y) in enumerate(zip(a, b))]  # fmt: skip
        cosines = F.cosine_similarity(sentence_vectors(exact, batch), sentence_vectors(approximate, batch), dim=1)
        report = Int8Report(texts, cosines.tolist(), layers)
        if classifier:
            exact_logits, approximate_logits = (model(**batch, skip_padding=True, **AS_ASKED).logits
                                                for model in (exact, approximate))  # fmt: skip
            _compare_heads(report, exact_logits, approximate_logits)
    return report


def _compare_heads(report: Int8Report, exact: torch.Tensor, approximate: torch.Tensor) -> None:
    """A classifier's logits (B, labels), float32 and int8: the labels changed, or for one output
    the scores' largest |Δ| and the pairs of texts in the other order."""
    if exact.shape[-1] > 1:
        report.labels_changed = int((exact.argmax(-1) != approximate.argmax(-1)).sum())
        return
    a, b = exact[:, 0], approximate[:, 0]  # (B,)
    report.score_change, report.largest_score = (a - b).abs().max().item(), a.abs().max().item()
    before, after = torch.sign(a[:, None] - a[None, :]), torch.sign(b[:, None] - b[None, :])  # (B, B)
    report.pairs_reordered = int((before != after).triu(1).sum())


def compared_class(name_or_path: str) -> tuple[type, dict, int | None]:
    """(the class both sides load, its from_pretrained keywords, a sequence classifier's number of
    outputs or None), from one read of the checkpoint's tensor names and shapes (``tensor_shapes``: a
    pickled ``pytorch_model.bin`` is opened for them, so it is opened once, not once per question).

    A sequence classifier loads with its head, and its outputs are its classifier weight's rows. The
    class is the one that loads its heads, as ``minibert convert`` decides (convert.py's ``class_for``):
    from the tensors (a classifier on a pooler; Google's run_classifier.py ``output_weights``),
    config.json's ``architectures`` only telling apart the classes that hold the same ``classifier.*``
    (a token classifier, a multiple-choice head). A config without ``architectures`` (run_classifier.py's
    bert_config.json, some hub configs) was taken for another model's, as ``classify`` and ``rerank``
    never take it. Any other checkpoint compares its encoder, ``BertModel``, with the pooler only if the
    file holds one (a token classifier, QA or masked-LM checkpoint has none)."""
    from ..loading.checkpoint_files import checkpoint_parts, find_checkpoint, tensor_shapes
    from ..loading.head_labels import classifier_in
    from .convert import class_for

    config_file, weights_file = find_checkpoint(name_or_path)
    shapes = tensor_shapes(weights_file)
    if class_for(config_file, shapes)[0] is BertForSequenceClassification:
        return BertForSequenceClassification, {}, classifier_in(shapes)[1][0]
    return BertModel, {"add_pooling_layer": "pooler" in checkpoint_parts(list(shapes))}, None


def format_report(report: Int8Report) -> str:
    lines = [f"{'cosine':>8}  text (int8 sentence vector vs float32)"]
    for text, cosine in zip(report.texts, report.cosines):
        shown = text if len(text) <= 70 else text[:67] + "..."
        lines.append(f"{cosine:8.5f}  {shown}")
    width = max(len(name) for name, _, _ in report.layers)
    lines.append(f"{'output':<{width}}  max |Δ|    largest |float32 value|")
    for name, diff, scale in report.layers:
        lines.append(f"{name:<{width}}  {diff:.3e}  {scale:.3e}")
    lines.append(f"cosine to float32 over {len(report.cosines)} texts: mean {report.mean:.5f}, worst "
                 f"{report.worst:.5f} (the loader's floor: {COSINE_FLOOR})")  # fmt: skip
    if report.labels_changed is not None:
        share = report.labels_changed / len(report.texts)
        lines.append(f"labels changed by int8: {report.labels_changed} of {len(report.texts)} ({share:.1%})")
    if report.score_change is not None:
        pairs = len(report.texts) * (len(report.texts) - 1) // 2
        lines.append(f"one output (a score): largest |Δ score| by int8 {report.score_change:.3e} (largest |float32 "
                     f"score| {report.largest_score:.3e}); pairs of texts in another order: {report.pairs_reordered} "
                     f"of {pairs}")  # fmt: skip
    return "\n".join(lines)
