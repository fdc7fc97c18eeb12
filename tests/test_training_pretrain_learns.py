"""It learns: a small BERT (2 layers, hidden 128) trained from random weights on Debian's fortunes
loses at least 2 nats of masked-LM loss in 120 steps of batch 32, and fill_mask on the run then
predicts common pieces where it predicted rare ones before (slow: a minute on 2 cores).

What such a run teaches is the pieces' frequencies: the loss ends near the best context-free guess
(printed), and fill_mask gives the most frequent pieces whatever the sentence. Using the context
takes longer; this test does not claim it.

120 steps, not docs/pretraining.md's 300: the loss reaches that plateau by step 60 (this test's
former 300-step run, measured: 9.54 nats over the first ten steps, 7.23 at step 20, 6.87 at step
60, 6.76 over the last ten), and 120 steps end 2.6 nats below the start (9.53 → 6.91), while a run
that does not learn (no gradient, no update, a wrong rate or wrong labels) stays near
ln 16,500 ≈ 9.7 however long it runs. The warmup is the recipe's 30 steps, so the first ten steps,
the start the 2 nats are counted from, are the recipe's own.

The data comes through the commands a user runs (issue 34: "through the previous issue's
commands"): the fortunes written as text (one sentence per line, a blank line between fortunes),
`minibert vocab` with its defaults, `minibert pretraining-data`, then `minibert pretrain --config`."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import minibert
from fortune_instances import FORTUNES, fortune_documents
from helpers import run_minibert
from minibert.config import BertConfig
from minibert.formats.tfrecord import read_examples
from minibert.heads import BertForPreTraining
from minibert.tokenizer import BertTokenizer

# The architecture; vocab_size is the vocabulary `minibert vocab` learns (filled in below).
# 64 positions: a fortune is ~40 pieces (two or three sentences), so 128 would be mostly padding.
SMALL = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512,
         "max_position_embeddings": 64}  # fmt: skip
# Google's create_pretraining_data.py defaults except the two that follow the model's 64 positions:
# --max-seq-length 64 (the positions), --max-predictions-per-seq 10 (Google's README: about
# max_seq_length × masked_lm_prob = 64 × 0.15 ≈ 10; the default 20 is for 128); and, as the docs'
# recipe, --dupe-factor 1: one pass over the 5,316 fortunes makes ~10,500 instances, more than the
# 120 × 32 the run reads (Google's 10 passes: 105,000 instances, 14 s to write, 90% never read).
# masked_lm_prob 0.15, short_seq_prob 0.1 and the seed stay Google's.
DATA_FLAGS = ["--max-seq-length", "64", "--max-predictions-per-seq", "10", "--dupe-factor", "1"]
# The peak rate: 1e-4 (Google's, for BERT-base at batch 256 over 1M steps) moves a tiny model too
# little in a few hundred steps; small BERTs (Google's BERT-Tiny/Mini, Turc et al. 2019) train at 1e-3
# and up. Warmup: the recipe's 30 steps, then Google's linear decay to 0 at the last step.
STEPS = 120
TRAIN_FLAGS = ["--steps", str(STEPS), "--batch-size", "32", "--learning-rate", "1e-3", "--warmup-steps", "30"]
# sentences with a frequent word masked (the word, the text)
PROBES = [("the", "what is [MASK] meaning of life?"), ("of", "the end [MASK] the world is near."),
          ("you", "i love [MASK]."), ("is", "time [MASK] money."), ("a", "there was [MASK] man from peru."),
          ("to", "i want [MASK] go home."), ("and", "bread [MASK] butter."), ("it", "do [MASK] now.")]  # fmt: skip


def best_pieces(model: Path) -> list[list[str]]:
    """fill_mask's 5 best pieces for each probe."""
    return [[answer["token_str"] for answer in minibert.fill_mask(text, model=str(model))] for _word, text in PROBES]


def frequent_pieces(data: Path, vocab: Path, instances: int, count: int = 20) -> set[str]:
    """The ``count`` most frequent masked pieces of the instances the run sees."""
    labels = masked_labels(data, instances)
    return set(BertTokenizer(vocab).convert_ids_to_tokens(np.argsort(-np.bincount(labels))[:count].tolist()))


def masked_labels(data: Path, instances: int) -> np.ndarray:
    return np.concatenate([np.asarray(example["masked_lm_ids"])[np.asarray(example["masked_lm_weights"]) > 0]
                           for example in itertools.islice(read_examples(data), instances)])  # fmt: skip


def write_fortunes(path: Path) -> Path:
    """The English fortunes in Google's input format: a sentence a line, a blank line between documents."""
    path.write_text("".join("\n".join(sentences) + "\n\n" for sentences in fortune_documents()), encoding="utf-8")
    return path


def unigram_entropy(data: Path, instances: int) -> float:
    """The MLM loss of the best context-free guess (each piece's frequency among the masked labels of the
    instances the run sees), in nats: a run below it uses the context, not only the pieces' frequencies."""
    counts = np.bincount(masked_labels(data, instances))
    shares = counts[counts > 0] / counts.sum()
    return float(-(shares * np.log(shares)).sum())


def mean_mlm_loss(records: list[dict]) -> float:
    return sum(record["mlm_loss"] for record in records) / len(records)


@pytest.mark.slow
@pytest.mark.skipif(not FORTUNES.exists(), reason="apt-get install fortunes")
def test_a_small_bert_learns_the_fortunes(tmp_path):
    text = write_fortunes(tmp_path / "fortunes.txt")
    (tmp_path / "vocab").mkdir()
    result = run_minibert("vocab", "--input", str(text), "--output", str(tmp_path / "vocab"))  # the defaults
    assert result.returncode == 0, result.stderr
    vocab = tmp_path / "vocab" / "vocab.txt"
    data = tmp_path / "fortunes.tfrecord"
    result = run_minibert("pretraining-data", "--input", str(text), "--vocab", str(vocab), "--output", str(data),
                          *DATA_FLAGS)  # fmt: skip
    assert result.returncode == 0, result.stderr
    data_report = result.stderr.strip()
    config = tmp_path / "config.json"
    vocab_size = len(vocab.read_text(encoding="utf-8").splitlines())
    config.write_text(json.dumps({"vocab_size": vocab_size, **SMALL}))

    before = tmp_path / "before"  # the same random weights the run starts from (pretrain's default --seed)
    torch.manual_seed(12345)
    BertForPreTraining(BertConfig.from_json_file(config)).save_pretrained(before)
    BertTokenizer(vocab).save_pretrained(before)

    run = tmp_path / "run"
    result = run_minibert("pretrain", "--data", str(data), "--config", str(config), "--vocab", str(vocab),
                          "--output", str(run), *TRAIN_FLAGS, "--save-every", "50")  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in records] == list(range(1, STEPS + 1))
    first, last = mean_mlm_loss(records[:10]), mean_mlm_loss(records[-10:])
    step_seconds = sum(record["seconds"] for record in records) / len(records)
    guesses_before, guesses_after = best_pieces(before), best_pieces(run)
    hits_before, hits_after = (sum(word in best for (word, _text), best in zip(PROBES, guesses, strict=True))
                               for guesses in (guesses_before, guesses_after))  # fmt: skip
    print(f"\n{data_report}\nvocabulary {vocab_size} pieces; MLM loss {first:.2f} → {last:.2f} nats "
          f"(first 10 vs last 10 of {STEPS} steps of 32; {step_seconds:.2f} s a step; the frequencies alone: "
          f"{unigram_entropy(data, STEPS * 32):.2f}); NSP accuracy (last 50) "
          f"{sum(r['nsp_accuracy'] for r in records[-50:]) / 50:.2f}; "
          f"fill_mask probes in the top 5: {hits_before} before, {hits_after} after")  # fmt: skip
    for (_word, text), before_best, after_best in list(zip(PROBES, guesses_before, guesses_after, strict=True))[:3]:
        print(f"{text} before {before_best} after {after_best}")
    assert first - last >= 2.0
    frequent = frequent_pieces(data, vocab, STEPS * 32)  # the 20 most frequent of ~16,500 pieces
    assert all(set(best) <= frequent for best in guesses_after), guesses_after
    assert not any(set(best) & frequent for best in guesses_before), guesses_before
    assert hits_after > hits_before
    assert (run / "loss.png").stat().st_size > 1000
