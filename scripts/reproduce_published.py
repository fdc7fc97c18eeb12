"""Check the numbers that BERT tutorials published for bert-base-uncased, with minibert.

    python scripts/reproduce_published.py                 # needs google-bert/bert-base-uncased (hub or cache)
    python scripts/reproduce_published.py --model DIR     # a local copy of it

Prints a table of expected vs got. The published numbers are rounded (to 4 or 2 decimals), so each
check passes within half a unit of its last printed decimal plus float noise. Without access to
bert-base-uncased the script says so and exits 0 (nothing to check). The same measurements run in
the test suite on the bundled MiniLM checkpoint, against transformers' numbers.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch

MACHINE_LEARNING = "She is a MachineLearning Engineer and works in California"
BANK = ("[CLS] After stealing money from the bank vault, the bank robber was seen fishing on the "
        "Mississippi river bank. [SEP]")  # fmt: skip
FILL = "Hello I'm a [MASK] model."


@dataclass
class Check:
    name: str
    expected: list[float] | list[str]
    tolerance: float  # half a unit of the published precision, plus float noise


PUBLISHED = {
    "ml_hidden_first3": Check(
        "MachineLearning (+2 [PAD]): last_hidden_state[0,0,:3]", [-0.1925, 0.1684, -0.4252], 6e-5
    ),
    "ml_hidden_last3": Check("MachineLearning (+2 [PAD]): last_hidden_state[0,0,-3:]", [-0.2599, 0.3736, 0.0529], 6e-5),
    "ml_pooler8": Check(
        "MachineLearning (+2 [PAD]): pooler_output[0,:8]",
        [-0.9531, -0.4914, -0.8872, 0.9035, 0.8174, -0.2919, 0.9511, 0.4982],
        6e-5,
    ),
    "pair_hidden10": Check(
        "pair thirsty/water: last_hidden_state[0,0,:10]",
        [-0.23, 0.37, -0.34, -0.35, -0.91, 0.01, 0.67, 0.64, 0.10, -0.32],
        6e-3,
    ),
    "pair_pooler10": Check(
        "pair thirsty/water: pooler_output[0,:10]",
        [-0.9803, -0.7672, -0.9958, 0.9636, 0.9004, -0.5488, 0.9910, 0.6867, -0.9878, -1.0000],
        6e-5,
    ),
    "bank_cos_vault": Check("bank: cos(token 10 'bank robber', token 6 'bank vault')", [0.9457], 6e-5),
    "bank_cos_river": Check("bank: cos(token 10 'bank robber', token 19 'river bank')", [0.6797], 6e-5),
    "bank_vector5": Check(
        "bank: sum of last 4 layers, token 10 [:5]", [1.1868, -1.5298, -1.3770, 1.0648, 3.1446], 6e-5
    ),
    "fill_tokens": Check(
        "fill-mask 'Hello I'm a [MASK] model.': top 5", ["fashion", "role", "new", "super", "fine"], 0
    ),
    "fill_scores": Check("fill-mask: top 4 scores", [0.1073, 0.0877, 0.0534, 0.0467], 6e-5),
}

# forward(input_ids, attention_mask, token_type_ids) -> (last_hidden_state, pooler_output, hidden_states)
Forward = Callable[[torch.Tensor, torch.Tensor | None, torch.Tensor | None], tuple]


def measure(forward: Forward, tokenizer, fill_logits: Callable | None = None) -> dict[str, list]:
    """Compute every published quantity with ``forward`` (minibert's or the reference's)."""
    got: dict[str, list] = {}
    # 1. one sentence padded with two [PAD] to 16 tokens, mask 0 on the pads, no token type ids
    ids = tokenizer(MACHINE_LEARNING)["input_ids"]
    ids = ids + [tokenizer.pad_token_id] * (16 - len(ids))
    mask = [1 if index != tokenizer.pad_token_id else 0 for index in ids]
    hidden, pooler, _ = forward(torch.tensor([ids]), torch.tensor([mask]), None)
    got["ml_hidden_first3"] = hidden[0, 0, :3].tolist()
    got["ml_hidden_last3"] = hidden[0, 0, -3:].tolist()
    got["ml_pooler8"] = pooler[0, :8].tolist()
    # 2. a sentence pair with its segment ids
    pair = tokenizer("I was thirsty!", "I drank water :D", return_tensors="pt")
    hidden, pooler, _ = forward(pair["input_ids"], pair["attention_mask"], pair["token_type_ids"])
    got["pair_hidden10"] = hidden[0, 0, :10].tolist()
    got["pair_pooler10"] = pooler[0, :10].tolist()
    # 3. word vectors as the sum of the last four layers; every segment id 1, as in the tutorial
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(BANK))
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert (tokens[6], tokens[10], tokens[19]) == ("bank", "bank", "bank"), tokens
    _, _, states = forward(torch.tensor([ids]), None, torch.ones(1, len(ids), dtype=torch.long))
    summed = torch.stack(states[-4:]).sum(0)[0]  # (T, H)
    cosine = torch.nn.functional.cosine_similarity
    got["bank_cos_vault"] = [cosine(summed[10], summed[6], dim=0).item()]
    got["bank_cos_river"] = [cosine(summed[10], summed[19], dim=0).item()]
    got["bank_vector5"] = summed[10, :5].tolist()
    # 4. the model card's fill-mask example
    if fill_logits is not None:
        batch = tokenizer(FILL, return_tensors="pt")
        position = batch["input_ids"][0].tolist().index(tokenizer.mask_token_id)
        probabilities = fill_logits(batch)[0, position].softmax(-1)
        scores, top = probabilities.topk(5)
        got["fill_tokens"] = tokenizer.convert_ids_to_tokens(top.tolist())
        got["fill_scores"] = scores[:4].tolist()
    return got


def minibert_backend(model):
    """forward and fill_logits functions for a minibert BertForPreTraining (or BertModel)."""
    bert = getattr(model, "bert", model)

    def forward(input_ids, attention_mask, token_type_ids):
        with torch.inference_mode():
            out = bert(input_ids, attention_mask, token_type_ids, output_hidden_states=True)
        return out.last_hidden_state, out.pooler_output, out.hidden_states

    def fill_logits(batch):
        with torch.inference_mode():
            return model(**batch).prediction_logits

    return forward, (fill_logits if hasattr(model, "mlm_head") else None)


def report(got: dict[str, list]) -> bool:
    print(f"{'check':<58} {'status':<6} expected → got")
    ok = True
    for key, check in PUBLISHED.items():
        if key not in got:
            continue
        values = got[key]
        if check.tolerance == 0:
            passed = values == check.expected
        else:
            passed = all(abs(a - b) <= check.tolerance for a, b in zip(values, check.expected))
        ok &= passed
        shown = values if check.tolerance == 0 else [round(v, 4) for v in values]
        print(f"{check.name:<58} {'ok' if passed else 'FAIL':<6} {check.expected} → {shown}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="google-bert/bert-base-uncased")
    args = parser.parse_args()
    from minibert import BertForPreTraining, BertTokenizer
    from minibert.errors import ModelNotFoundError

    try:
        model = BertForPreTraining.from_pretrained(args.model)
        tokenizer = BertTokenizer.from_pretrained(args.model)
    except ModelNotFoundError as error:
        print(f"skipped: {args.model} is not reachable here ({error})")
        return 0
    forward, fill_logits = minibert_backend(model)
    return 0 if report(measure(forward, tokenizer, fill_logits)) else 1


if __name__ == "__main__":
    sys.exit(main())
