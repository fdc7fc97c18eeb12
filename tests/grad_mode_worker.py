"""One case of tests/test_speed_grad_modes.py, run in a fresh process (a fresh GEMM cache, no earlier
choice, no packed weights): ``python grad_mode_worker.py CASE MODEL_DIR INPUTS OUT``.

MINIBERT_GEMM and MINIBERT_CACHE_DIR come from the environment. INPUTS is a torch file with the
batch (and texts); OUT receives a dict of tensors (and strings) that the test compares with
transformers' own outputs. A refused case writes {"error": "<type>: <message>"}.
"""

from __future__ import annotations

import copy
import os
import pickle
import sys

import torch

import minibert


def load_and_run(model_dir, batch, out_dir):
    with torch.inference_mode():
        model = minibert.BertModel.from_pretrained(model_dir)
        out = model(**batch)
    return {
        "last_hidden_state": out.last_hidden_state,
        "pooler_output": out.pooler_output,
        "backend": model.gemm_backend,
    }


def embed(model_dir, texts, out_dir):
    with torch.inference_mode():
        vectors = minibert.Embedder.from_pretrained(model_dir).embed(texts, progress=False)
    return {"vectors": torch.as_tensor(vectors)}


def train(model_dir, batch, out_dir):
    """Loaded under no_grad, then one gradient step on a fixed loss; the updated weights are saved
    (transformers loads them) and run again under inference_mode (the packed copies must follow)."""
    with torch.no_grad():
        model = minibert.BertModel.from_pretrained(model_dir)
        model(**batch)  # the packed weights are built now, before the update
    real = batch["attention_mask"].bool()
    loss = model(**batch).last_hidden_state[real].pow(2).mean()
    loss.backward()
    query = model.layers[0].attention.query.weight
    intermediate = model.layers[-1].feed_forward.intermediate.weight
    result = {"loss": loss.detach(), "grad_query_0": query.grad.clone(), "grad_intermediate_last": intermediate.grad}
    with torch.no_grad():
        for parameter in (p for p in model.parameters() if p.grad is not None):  # (not the pooler's)
            parameter.add_(parameter.grad, alpha=-10.0)  # a step large enough to change every output
    model.save_pretrained(out_dir)
    with torch.inference_mode():
        result["after_step"] = model(**batch).last_hidden_state
    return result


def bf16_and_back(model_dir, batch, out_dir):
    """Moved to bfloat16 and back to float32, inside inference_mode and (a second copy) back outside."""
    with torch.inference_mode():
        model = minibert.BertModel.from_pretrained(model_dir)
        model(**batch)
        model.to(torch.bfloat16)
        in_bf16 = model(**batch).last_hidden_state.float()
        inside = copy.deepcopy(model).float()  # weights made in inference_mode: inference tensors
        back_inside = inside(**batch).last_hidden_state
    model.float()  # outside: ordinary tensors again
    with torch.inference_mode():
        back_outside = model(**batch).last_hidden_state
    return {"bf16": in_bf16, "back_inside": back_inside, "back_outside": back_outside}


def copies(model_dir, batch, out_dir):
    """deepcopy and pickle of a loaded model that has run (its packed weights built), outside and
    inside inference_mode; each copy runs, then the original runs after its copies."""
    model = minibert.BertModel.from_pretrained(model_dir)
    with torch.inference_mode():
        model(**batch)
    result = {}
    for where in ("outside", "inside"):
        mode = torch.inference_mode() if where == "inside" else torch.no_grad()
        with mode:
            result[f"deepcopy_{where}"] = copy.deepcopy(model)(**batch).last_hidden_state
            result[f"pickle_{where}"] = pickle.loads(pickle.dumps(model))(**batch).last_hidden_state
    with torch.inference_mode():
        result["original"] = model(**batch).last_hidden_state
    return result


def head(model_dir, batch, out_dir):
    with torch.inference_mode():
        model = minibert.BertForPreTraining.from_pretrained(model_dir)
        out = model(**batch)
    return {
        "prediction_logits": out.prediction_logits,
        "seq_relationship_logits": out.seq_relationship_logits,
        "backend": model.gemm_backend,
    }


def float16(model_dir, batch, out_dir):
    """float16 weights: oneDNN's linear cannot take them (a clear refusal when asked for by name)."""
    with torch.inference_mode():
        model = minibert.BertModel.from_pretrained(model_dir, dtype=torch.float16, gemm=os.environ["MINIBERT_GEMM"])
        return {"last_hidden_state": model(**batch).last_hidden_state.float()}


CASES = {f.__name__: f for f in (load_and_run, embed, train, bf16_and_back, copies, head, float16)}


def main(case: str, model_dir: str, inputs: str, out: str) -> None:
    data = torch.load(inputs)
    argument = data["texts"] if case == "embed" else data["batch"]
    try:
        result = CASES[case](model_dir, argument, out + ".model")
    except (minibert.MinibertError, ValueError) as error:
        result = {"error": f"{type(error).__name__}: {error}"}
    torch.save(result, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
