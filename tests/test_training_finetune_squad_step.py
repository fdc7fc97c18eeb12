"""SQuAD's step against Google's arithmetic, written out here on transformers' BertForQuestionAnswering.

The run (``minibert finetune --task answer`` as a function) and the reference start from the same
weights — transformers' BertForQuestionAnswering on the tiny BERT, saved with its ``qa_outputs``
head, which the run continues — and replay the same windows (the run's ``order.jsonl``). The windows'
input arrays are minibert's features, which test_training_finetune_squad_features.py proves equal
to Google's ``convert_examples_to_features``; they are the *inputs* here, not an expected value.
The reference is ``run_squad.model_fn``'s loss — for start and end, −mean Σ one_hot(position, T) ·
log_softmax(logits over all T positions, padding included), their mean — and Google's optimizer
(test_training_finetune_step.google_steps's AdamWeightDecayOptimizer, typed from optimization.py).
Dropout is 0 so both compute the same function.

Tolerance as test_training_finetune_step.py: after 4 updates every weight tensor within 1e-4 of its
largest |value| (the two differ only by the order of float32 sums, ~1e-6 relative per gradient).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from test_training_finetune_step import TINY, google_rate, google_steps  # noqa: E402

from minibert.training import FinetuneOptions, finetune  # noqa: E402
from minibert.training.tasks.answer import squad_features  # noqa: E402
from minibert.training.tasks.head import load_tokenizer  # noqa: E402
from squad_files import write_squad  # noqa: E402


def start_checkpoint(directory: Path) -> Path:
    torch.manual_seed(7)
    model = transformers.BertForQuestionAnswering.from_pretrained(TINY, attn_implementation="eager")
    model.save_pretrained(directory)
    for name in ("vocab.txt", "tokenizer_config.json"):
        (directory / name).write_bytes((TINY / name).read_bytes())
    return directory


def squad_loss(arrays):
    """run_squad.model_fn's loss on the windows ``rows`` of ``arrays`` (input ids, mask, segments, (start, end))."""
    def loss_of(model, _tokenizer, rows):
        out = model(input_ids=arrays[0][rows], attention_mask=arrays[1][rows], token_type_ids=arrays[2][rows])
        seq_length = arrays[0].shape[1]

        def compute_loss(logits, positions):
            one_hot = torch.nn.functional.one_hot(positions, seq_length).float()
            return -(one_hot * torch.log_softmax(logits, dim=-1)).sum(-1).mean()

        starts, ends = arrays[3][rows, 0], arrays[3][rows, 1]
        return (compute_loss(out.start_logits, starts) + compute_loss(out.end_logits, ends)) / 2
    return loss_of


def test_four_squad_steps_equal_googles_arithmetic(tmp_path):
    start = start_checkpoint(tmp_path / "start")
    train = write_squad(tmp_path / "train.json", paragraphs=2, fortunes_per_context=3, questions=4, version_2=True,
                        training=True)  # fmt: skip
    peak = 1e-3
    options = FinetuneOptions(model=str(start), train=str(train), output=str(tmp_path / "run"), epochs=2,
                              task="answer", batch_size=4, learning_rate=peak, warmup_proportion=0.5, dropout=0.0,
                              seed=3, max_seq_length=48, doc_stride=16, max_query_length=12,
                              version_2_with_negative=True)  # fmt: skip
    run = finetune(options)
    order = [json.loads(line)["examples"] for line in (run / "order.jsonl").read_text().splitlines()]
    rates = [json.loads(line)["learning_rate"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(order) == 4 and rates == [google_rate(peak, done, 2, 4) for done in range(4)]

    tokenizer = load_tokenizer(str(start))
    features = squad_features(str(train), tokenizer, True, options)
    assert len(features) > len(features.examples), "long contexts: several windows per question"
    assert (features.label_ids[:, 0] == 0).any() and (features.label_ids[:, 0] > 0).any()
    arrays = [torch.from_numpy(a) for a in (features.input_ids, features.input_mask, features.segment_ids,
                                             features.label_ids)]  # fmt: skip
    cls = transformers.BertForQuestionAnswering
    expected = google_steps(start, order, peak, 2, cls, squad_loss(arrays))
    # Adam and the clip hide a constant factor in the loss; the logged first loss (start weights) shows it
    first_loss = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])["loss"]
    with torch.no_grad():
        reference_model = cls.from_pretrained(start, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                              attn_implementation="eager")  # fmt: skip
        reference_loss = float(squad_loss(arrays)(reference_model, None, order[0]))
    assert abs(first_loss - reference_loss) <= 1e-5 * reference_loss, (first_loss, reference_loss)
    ours = cls.from_pretrained(run, attn_implementation="eager")
    worst = 0.0
    for name, weight in ours.named_parameters():
        reference = expected[name]
        if name == "qa_outputs.bias":  # its gradient is 0: Σ_t (softmax − one_hot) = 0 (a shift of all T scores)
            bound = 3.2 * sum(rates)  # Adam's |m / √v| ≤ 0.1 / √0.001 ≈ 3.2 per update on rounding noise
            assert float(weight.detach().abs().max()) <= bound and float(reference.abs().max()) <= bound
            continue
        scale = float(reference.abs().max())
        difference = float((weight.detach() - reference).abs().max())
        worst = max(worst, difference / scale)
        assert difference <= 1e-4 * scale, f"{name}: max |Δ| {difference:.3g} (largest |w| {scale:.3g})"
    moved = float((ours.qa_outputs.weight - cls.from_pretrained(start).qa_outputs.weight).abs().max().detach())
    assert moved > 1e-4, "the head did not train: the comparison would prove nothing"
    print(f"max |Δ| / max |w| over the tensors: {worst:.2e}")
