"""scripts/bench.py's training rows: one pre-training step (bench_pretrain.py's) against
transformers + AdamW, fp32 and --bf16 (``--only pretrain``), and fine-tuning steps of
all-MiniLM-L6-v2 on real text, each side padded as it pads by default and both padded to 128
(``--only finetune``). bench.py imports these; the rows are built by bench_rows.py.
"""

from __future__ import annotations

import statistics

import numpy as np
import torch
from bench_rows import minilm_dir, row

from minibert.speed.cpu import cpu_flags, has_native_bf16


def bench_pretrain_step(rounds: int) -> list[dict]:
    """One pre-training step (scripts/bench_pretrain.py's, its default BERT-mini shapes): minibert
    fp32 and minibert --bf16 against transformers' BertForPreTraining + torch.optim.AdamW, the three
    interleaved in one run. The bf16 row says what training/run/precision.py warns about: bf16 autocast
    pays where the CPU multiplies bf16 faster than float32 (AMX), not on avx512_bf16 alone."""
    from bench_pretrain import Shapes, time_steps

    shapes = Shapes()
    bf16 = has_native_bf16()
    times, first_loss = time_steps(shapes, rounds, bf16=bf16)
    theirs, work = times["transformers + AdamW"], shapes.batch * shapes.tokens
    rows = [row("pre-training step, fp32", "transformers BertForPreTraining + AdamW", times["minibert"], theirs,
                ">= 1.0x", work=work, unit="tokens", note=shapes.describe())]  # fmt: skip
    if not bf16:
        print("pre-training bf16 row skipped: this CPU has no native bf16 (avx512_bf16 or AMX)", flush=True)
        return rows
    against_fp32 = [fp32 / ours for fp32, ours in zip(times["minibert"], times["minibert --bf16"])]
    amx = "AMX" if "amx_bf16" in cpu_flags() else "no AMX: slower than fp32 expected"
    rows.append(row("same, --bf16 (autocast)", "transformers BertForPreTraining + AdamW", times["minibert --bf16"],
                    theirs, f"> minibert fp32 with AMX ({amx})", work=work, unit="tokens",
                    note=f"{statistics.median(against_fp32):.2f}x minibert fp32 ({min(against_fp32):.2f}–"
                    f"{max(against_fp32):.2f}); first loss {first_loss['minibert --bf16']:.4f} vs fp32 "
                    f"{first_loss['minibert']:.4f}"))  # fmt: skip
    return rows


def finetune_batches(texts: list[str], batches: int, batch_size: int = 32, length: int = 128):
    """Real text as ``minibert finetune`` feeds it: Features (N, 128) padded to --max-seq-length as
    Google's, two random labels; and the rows of each batch, in order."""
    from minibert.tokenizer import BertTokenizer
    from minibert.training.tasks.features import Features

    tokenizer = BertTokenizer.from_pretrained(minilm_dir())
    encoded = tokenizer(texts[: batches * batch_size], padding="max_length", truncation=True, max_length=length)
    ids, mask = np.asarray(encoded["input_ids"], np.int64), np.asarray(encoded["attention_mask"], np.int64)
    labels = np.random.default_rng(0).integers(0, 2, len(ids))
    features = Features(ids, mask, np.zeros_like(ids), labels)
    return features, [np.arange(start, start + batch_size) for start in range(0, len(ids), batch_size)]


PROBLEM = "single_label_classification"


def finetune_contenders(features, rows: list[np.ndarray]) -> dict:
    """Each contender: one fine-tuning step on every batch of ``rows`` (dropout 0.1, fp32)."""
    import transformers

    from minibert.training.run.distributed import World
    from minibert.training.run.optimization import AdamWeightDecay, hub_named_parameters, update
    from minibert.training.tasks import task_named
    from minibert.training.tasks.head import load_classifier

    def theirs(cut: bool):
        model = transformers.BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01, eps=1e-6)
        batches = [{k: torch.from_numpy(v) for k, v in features.batch(r).items()} if cut else
                   {"input_ids": torch.from_numpy(features.input_ids[r]), "input_mask": torch.from_numpy(
                    features.input_mask[r]), "label_ids": torch.from_numpy(features.label_ids[r])} for r in rows]

        def steps():
            for batch in batches:
                loss = model(input_ids=batch["input_ids"], attention_mask=batch["input_mask"],
                             labels=batch["label_ids"]).loss  # fmt: skip
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            return loss.item()

        return steps

    def ours(cut: bool):
        torch.manual_seed(0)  # the loop's seeding before a network is built (training/run/loop.py)
        model = load_classifier(minilm_dir(), ["0", "1"], PROBLEM, continues=False, seed=0).train()
        classify = task_named("classify")
        named, world = hub_named_parameters(model), World()
        parameters, optimizer = [p for _, p in named], AdamWeightDecay(named)
        batches = [{k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in features.batch(r).items()} if cut else
                   {"input_ids": torch.from_numpy(features.input_ids[r]), "input_mask": torch.from_numpy(
                    features.input_mask[r]), "segment_ids": torch.from_numpy(features.segment_ids[r]),
                    "label_ids": torch.from_numpy(features.label_ids[r])} for r in rows]  # fmt: skip

        def steps():
            for batch in batches:
                sums = classify.sums(model, batch, {"batch_size": float(len(batch["label_ids"]))})
                sums.loss.backward()
                value = sums.figures["loss"]
                update(parameters, optimizer, 2e-5, world, 1.0)
            return value

        return steps

    return {"minibert (finetune: cut to the batch's longest)": ours(True),
            "transformers + AdamW, padded to the longest": theirs(True),
            "minibert, padded to 128": ours(False), "transformers + AdamW, padded to 128": theirs(False)}  # fmt: skip


def bench_finetune_step(texts: list[str], rounds: int, batches: int = 4) -> list[dict]:
    """Fine-tuning steps of all-MiniLM-L6-v2 (fp32, batch 32, --max-seq-length 128, real text):
    minibert's step (training/run/optimization.py, as ``minibert finetune`` runs it) against transformers'
    BertForSequenceClassification + torch.optim.AdamW on the same batches, each padded as it pads
    by default (minibert: Features.batch cuts to the batch's longest, and the encoder computes the
    real tokens only; transformers: DataCollatorWithPadding pads to the longest), and both on
    batches padded to 128. The four are
    interleaved (bench_pretrain.interleave); tokens/s counts real tokens."""
    from bench_pretrain import interleave

    features, rows = finetune_batches(texts, batches)
    times, _ = interleave(finetune_contenders(features, rows), rounds)
    names = list(times)
    real = int(sum(features.input_mask[r].sum() for r in rows))
    longest = np.mean([features.input_mask[r].sum(1).max() for r in rows])
    note = (f"{batches} steps of 32 real texts, {real / batches / 32:.0f} real tokens each on average, "
            f"batches' longest {longest:.0f} on average; dropout 0.1; {torch.get_num_threads()} threads")
    return [row("fine-tuning steps, MiniLM fp32, each padded by default", "transformers BertForSequenceClassification"
                " + AdamW, padded to the longest", times[names[0]], times[names[1]], ">= 1.5x (moonshot 2x)",
                work=real, unit="real tokens", note=note),
            row("same, both padded to 128", "the same, padded to 128", times[names[2]], times[names[3]], ">= 1.0x",
                work=real, unit="real tokens", note=note)]  # fmt: skip
