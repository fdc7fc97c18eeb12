"""``--task answer``: a span of the context answers the question (SQuAD, Google's ``run_squad.py``).

SQuAD files → windows (squad_examples.py, squad_features.py) as arrays the loop batches, the
question-answering network (``BertForQuestionAnswering``: one linear layer giving a start and an
end score per piece, Google's ``cls/squad/output_weights``), and the dev evaluation: the logits →
Google's predictions (squad_predictions.py) → exact match and F1 (squad_metrics.py).

Google's batches are padded to ``max_seq_length`` and the start/end softmax runs over every
position, padding included; a batch cut to its longest row would change that softmax, so SQuAD
batches keep their full width (``SquadFeatures.batch``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ...errors import DataError
from ...heads import BertForQuestionAnswering
from ...inputs import AS_ASKED
from ...loading.names import ANSWER_WEIGHTS
from ...pretrained import evaluating
from .features import Features
from .finetuning import Finetuning
from .head import checkpoint_tensors, draw_new_head, load_tokenizer
from .squad_examples import SquadExample, read_squad_examples
from .squad_features import SquadFeature, convert_examples_to_features
from .squad_metrics import squad_scores
from .squad_predictions import predict_answers, write_predictions
from .task import PieceSums, TrainingData


@dataclass
class SquadFeatures(Features):
    """The windows as arrays (N windows, T = max_seq_length); ``label_ids`` (N, 2): start, end
    (training; 0, 0 = [CLS] for no answer in the window). Keeps the examples and windows for predictions."""

    examples: list[SquadExample] = field(default_factory=list)
    windows: list[SquadFeature] = field(default_factory=list)
    skipped: int = 0  # training answers that could not be recovered from the words (Google skips them)
    do_lower_case: bool = True  # the tokenizer's: get_final_text lower-cases the words as the pieces were

    def batch(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The rows at full width (Google's softmax covers the padding positions too)."""
        return {"input_ids": self.input_ids[rows], "input_mask": self.input_mask[rows],
                "segment_ids": self.segment_ids[rows], "label_ids": self.label_ids[rows]}  # fmt: skip

    def tfrecord_columns(self) -> dict[str, np.ndarray]:
        """The training windows as run_squad.py's ``FeatureWriter`` writes them (``is_training``):
        ``unique_ids`` (one int, from 1000000000), ``input_ids``, ``input_mask``, ``segment_ids`` (T
        ints each), ``start_positions``, ``end_positions`` (one int each; 0 = [CLS]) and
        ``is_impossible`` (1 for a v2.0 question without an answer)."""

        def column(values: list[int]) -> np.ndarray:  # (N, 1)
            return np.array(values, dtype=np.int64).reshape(len(self.windows), 1)

        return {"unique_ids": column([window.unique_id for window in self.windows]), "input_ids": self.input_ids,
                "input_mask": self.input_mask, "segment_ids": self.segment_ids,
                "start_positions": self.label_ids[:, :1], "end_positions": self.label_ids[:, 1:],
                "is_impossible": column([int(window.is_impossible) for window in self.windows])}  # fmt: skip


def squad_features(path: str, tokenizer, is_training: bool, options) -> SquadFeatures:
    examples, skipped = read_squad_examples(path, is_training, options.version_2_with_negative)
    windows = convert_examples_to_features(examples, tokenizer, options.max_seq_length, options.doc_stride,
                                           options.max_query_length, is_training, source=path)  # fmt: skip
    if not windows:  # no question, or none whose context has a word piece: nothing to train on or to score
        why = (f"none of its questions ({len(examples)}) has a context with a word piece (each is empty, or "
               "zero-width characters only)" if examples else f"it has no questions ({skipped} skipped: the answer "
               "is not in the words)" if skipped else "it has no questions")  # fmt: skip
        raise DataError(f"{path}: the file gives no windows: {why}")
    ids, mask, segments = (np.array([getattr(w, name) for w in windows], dtype=np.int64).reshape(len(windows), -1)
                           for name in ("input_ids", "input_mask", "segment_ids"))  # fmt: skip
    positions = [[w.start_position or 0, w.end_position or 0] for w in windows]
    labels = np.array(positions, dtype=np.int64).reshape(len(windows), 2)
    return SquadFeatures(ids, mask, segments, labels, examples, windows, skipped, tokenizer.do_lower_case)


def has_answer_head(model: str) -> bool:
    """Whether the checkpoint has a question-answering head to continue (transformers' ``qa_outputs``,
    run_squad's ``cls/squad/output_weights``); one that does not score a start and an end (2 outputs)
    is refused, naming --model."""
    shapes = checkpoint_tensors(model)
    for key in (key for name in ANSWER_WEIGHTS for key in (name, "bert." + name) if key in shapes):
        outputs = int(shapes[key].shape[0])
        if outputs != 2:
            raise DataError(f"--model {model} has a question-answering head ({key}) of {outputs} outputs; --task "
                            "answer scores a start and an end (2): choose a model without one (its encoder is "
                            "used) or one trained for SQuAD")  # fmt: skip
        return True
    return False


@torch.no_grad()
def answer_logits(model, features: SquadFeatures, batch_size: int = 64) -> dict[int, tuple[list, list]]:
    """unique_id → (start logits, end logits) of every window, in eval mode (the model's mode put back after)."""
    logits = {}
    with evaluating(model):
        for start in range(0, len(features), batch_size):
            rows = np.arange(start, min(start + batch_size, len(features)))
            tensors = [torch.from_numpy(np.ascontiguousarray(a[rows]))
                       for a in (features.input_ids, features.input_mask, features.segment_ids)]  # fmt: skip
            out = model(*tensors, **AS_ASKED)
            for row, starts, ends in zip(rows, out.start_logits.float().tolist(), out.end_logits.float().tolist()):
                logits[features.windows[row].unique_id] = (starts, ends)
    return logits


class Answer(Finetuning):
    name = "answer"

    def read(self, options) -> tuple:
        """(train windows, dev windows, no labels, head continues?, tokenizer)."""
        tokenizer = load_tokenizer(options.model)
        train = squad_features(options.train, tokenizer, True, options)
        dev = squad_features(options.dev, tokenizer, False, options) if options.dev else None
        return train, dev, None, has_answer_head(options.model), tokenizer

    def examples_counted(self, features: SquadFeatures) -> int:
        return len(features.examples)  # run_squad.py's num_train_steps counts questions, not their windows

    def dev_fingerprint(self, data: TrainingData) -> dict | None:
        """The dev windows' SHA-256 with the questions' ids and gold answers (a dev file's windows
        carry no answer: another answer would score the same windows otherwise)."""
        described = super().dev_fingerprint(data)
        if described is not None:
            gold = json.dumps([(example.qas_id, example.gold_answers) for example in data.dev.examples])
            both = described["fingerprint"] + hashlib.sha256(gold.encode("utf-8")).hexdigest()
            described["fingerprint"] = hashlib.sha256(both.encode("ascii")).hexdigest()
        return described

    def network(self, options, data: TrainingData) -> BertForQuestionAnswering:
        """The network, float32; a new head as Google's run_squad (head.py ``draw_new_head``), of 2
        outputs whatever the checkpoint's config says (run_squad makes its own ``[2, H]`` weights on
        any checkpoint: an NLI classifier or a tagger is a start as good as a plain encoder), its
        classifier's problem_type left behind: the run folder's config is a question answerer's."""
        new_head = {} if data.head_continues else {"num_labels": 2, "problem_type": None}
        network = BertForQuestionAnswering.from_pretrained(options.model, new_heads=True, gemm=options.gemm,
                                                           **new_head).float()  # fmt: skip
        if not data.head_continues:
            draw_new_head(network.qa_outputs, options.seed)
        return network

    def sums(self, model, piece: dict[str, torch.Tensor], denominators: dict[str, float]) -> PieceSums:
        """SQuAD's loss (``run_squad.create_model``/``model_fn``): a start and an end score per position
        (``qa_outputs``, no dropout), cross-entropy of each against its position over all T positions,
        (start + end) / 2, summed and divided by the global batch size. ``label_ids`` (B, 2): start, end."""
        out = model.bert(piece["input_ids"], piece["input_mask"], piece["segment_ids"], use_fast_path=False, **AS_ASKED)
        logits = model.qa_outputs(out.last_hidden_state).float()  # (B, T, 2)
        start_logits, end_logits = logits.unbind(-1)  # (B, T) each
        starts, ends = piece["label_ids"].unbind(-1)  # (B,) each
        loss = (F.cross_entropy(start_logits, starts, reduction="sum")
                + F.cross_entropy(end_logits, ends, reduction="sum")) / (2 * denominators["batch_size"])  # fmt: skip
        correct = ((start_logits.argmax(-1) == starts) & (end_logits.argmax(-1) == ends)).sum()
        return PieceSums(loss, {"loss": loss.detach(), "correct": correct})

    def evaluate(self, model, data: TrainingData, options, run: Path) -> dict[str, float]:
        """Dev predictions (written to the run folder as Google's files) and their exact match and F1."""
        dev = data.dev
        predictions, nbest, null_odds = predict_answers(
            dev.examples, dev.windows, answer_logits(model, dev), do_lower_case=dev.do_lower_case,
            version_2=options.version_2_with_negative, null_score_diff_threshold=options.null_score_diff_threshold)
        write_predictions(run, predictions, nbest, null_odds)
        return squad_scores({e.qas_id: e.gold_answers for e in dev.examples}, predictions,
                            version_2=options.version_2_with_negative)

    def main_metric(self, options) -> str:
        return "f1"

    def describe_outputs(self, data: TrainingData) -> str:
        train = data.train
        return (f"answers: a start and an end score per piece; {len(train)} windows of {len(train.examples)} "
                f"questions, {train.skipped} skipped (answer not found in the words)")  # fmt: skip


TASK = Answer()
