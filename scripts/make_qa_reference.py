"""Make the question-answering reference that tests/test_tasks.py compares ``minibert.answer`` with.

transformers 5 removed the ``question-answering`` pipeline, so its answers come from the last
version that has it, run in an environment of its own:

    python -m venv /opt/tf4env && /opt/tf4env/bin/pip install torch==2.13.0 "transformers==4.57.1"
    /opt/tf4env/bin/python scripts/make_qa_reference.py tests/data/qa_reference

It writes a small random-weight ``BertForQuestionAnswering`` (hidden 32, 2 layers, a vocabulary
of the cases' own words, so the folder is small enough to keep in git), its tokenizer, and
``expected.json``: each case's arguments and the pipeline's answer.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import transformers

CONTEXT = (
    "Ada Lovelace was born in London in 1815. She worked with Charles Babbage on the Analytical Engine, "
    "and her notes describe an algorithm to compute Bernoulli numbers. Many call her the first programmer. "
    "Later, in Paris, the café naïve 東京 and the résumé were unbelievably popular; nobody knows why. "
    "The engine was never built, but a replica of the Difference Engine stands in the Science Museum."
)
QUESTIONS = ["Where was Ada born?", "Who worked with Babbage on the engine?", "What was never built?"]
CASES = [
    {"question": QUESTIONS[0], "context": CONTEXT},
    {"question": QUESTIONS[1], "context": CONTEXT, "top_k": 3},
    {"question": QUESTIONS[2], "context": CONTEXT, "max_seq_len": 48, "doc_stride": 16, "top_k": 4},
    {"question": QUESTIONS[0], "context": CONTEXT, "max_seq_len": 40, "doc_stride": 8, "handle_impossible_answer": True,
     "top_k": 2},
    {"question": QUESTIONS[1], "context": CONTEXT, "max_seq_len": 64, "doc_stride": 20, "max_answer_len": 3},
    {"question": QUESTIONS[2], "context": CONTEXT, "max_seq_len": 56, "doc_stride": 24, "align_to_words": False,
     "top_k": 3},
    {"question": "Who?", "context": "Babbage.", "handle_impossible_answer": True},
    {"question": QUESTIONS[0], "context": CONTEXT[:120], "top_k": 30},
    # a doc_stride past the room beside the question, with a context that fits one window: the pipeline answers
    {"question": QUESTIONS[0], "context": CONTEXT[:40], "doc_stride": 126},
    # an explicit max_seq_len is honoured (tests/test_tasks.py reads this one on a copy whose tokenizer says 64)
    {"question": QUESTIONS[1], "context": CONTEXT, "max_seq_len": 100, "top_k": 2},
    # a long context read through ~90 windows, each answer text found in many of them (their scores added up)
    {"question": QUESTIONS[2], "context": " ".join([CONTEXT] * 10), "max_seq_len": 48, "doc_stride": 16, "top_k": 5},
]  # fmt: skip


def vocabulary() -> list[str]:
    """[PAD] ... [MASK], then each lower-cased word and punctuation mark of the cases, then ## pieces
    for the letters (so any word splits into pieces and nothing is [UNK] but the unknown)."""
    basic = transformers.BasicTokenizer(do_lower_case=True)
    words = {word for text in [CONTEXT, *QUESTIONS, "Who?", "Babbage."] for word in basic.tokenize(text)}
    words -= {"unbelievably", "programmer"}  # these split into pieces: ##ably, ##mer
    pieces = ["un", "##bel", "##ie", "##v", "##ably", "program", "##mer"]
    letters = [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    return list(dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words), *pieces, *letters]))


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.txt").write_text("\n".join(vocabulary()) + "\n", encoding="utf-8")
    tokenizer = transformers.BertTokenizerFast(str(out / "vocab.txt"), model_max_length=128)
    tokenizer.save_pretrained(out)
    torch.manual_seed(0)
    shape = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
    config = transformers.BertConfig(vocab_size=len(vocabulary()), max_position_embeddings=128, **shape)
    model = transformers.BertForQuestionAnswering(config).eval()
    with torch.no_grad():
        model.qa_outputs.weight.mul_(20)  # random weights give flat scores; sharpen them
    model.save_pretrained(out, safe_serialization=True)
    pipeline = transformers.pipeline("question-answering", model=model, tokenizer=tokenizer)
    cases = [{"arguments": case, "expected": pipeline(**case)} for case in CASES]
    batch = {"question": QUESTIONS, "context": [CONTEXT] * 3, "max_seq_len": 48, "doc_stride": 16}
    cases.append({"arguments": batch, "expected": pipeline(**batch)})
    (out / "expected.json").write_text(json.dumps({"transformers": transformers.__version__, "cases": cases},
                                                  indent=1, ensure_ascii=False) + "\n", encoding="utf-8")  # fmt: skip
    print(f"wrote {out}: {len(cases)} cases, transformers {transformers.__version__}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", nargs="?", default="tests/data/qa_reference",
                        help="the folder to write (default tests/data/qa_reference)")  # fmt: skip
    main(Path(parser.parse_args().output))
