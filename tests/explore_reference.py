"""What the explorer tests compare with: transformers' eager attention and its masked-LM head on
every hidden state, and the page's packed arrays read back as the browser reads them."""

from __future__ import annotations

import base64
import zlib

import numpy as np
import torch


def reference_outputs(model, input_ids, token_type_ids) -> dict:
    """transformers (``attn_implementation="eager"``): attention (L, A, T, T), hidden states
    (L + 1, T, H) and, with an MLM head (``model.cls``), its softmax on every hidden state (L + 1, T, V)."""
    ids = torch.tensor([list(input_ids)])
    types = torch.tensor([list(token_type_ids)])
    with torch.no_grad():
        encoder = model.bert if hasattr(model, "bert") else model
        out = encoder(input_ids=ids, token_type_ids=types, output_attentions=True, output_hidden_states=True)
        result = {"attention": torch.cat(out.attentions).numpy(), "hidden_states": torch.cat(out.hidden_states).numpy()}
        if hasattr(model, "cls"):
            logits = torch.stack([model.cls.predictions(state[0]) for state in out.hidden_states])  # (L + 1, T, V)
            result["probabilities"] = logits.softmax(-1).numpy()
    return result


def unpack(packed: dict) -> np.ndarray:
    """A payload array as the page's script decodes it (explorer-data.js), in numpy."""
    if "raw" in packed:
        dtype = {"float32": "<f4", "int32": "<i4"}[packed["dtype"]]
        return np.frombuffer(base64.b64decode(packed["raw"]), dtype=dtype).reshape(packed["shape"]).copy()
    raw = zlib.decompress(base64.b64decode(packed["deflated"]))
    q = np.frombuffer(raw, dtype={"uint8": "u1", "uint16": "<u2"}[packed["dtype"]]).reshape(packed["shape"])
    return (packed["low"] + q.astype(np.float64) * packed["step"]).astype(np.float32)


def check_guesses(guesses_of_layer, probabilities: np.ndarray, vocabulary: list[str], label: str) -> float:
    """One layer's guesses [[(piece, p), ...] per position] against the reference's probabilities
    (T, V): each guess's probability within 1e-3 of the reference's for that piece, and the same best
    piece wherever the reference's best leads its second by more than 1e-4. Returns the max |Δ|."""
    worst = 0.0
    index = {piece: number for number, piece in enumerate(vocabulary)}
    for position, guesses in enumerate(guesses_of_layer):
        row = probabilities[position]
        for piece, probability in guesses:
            worst = max(worst, abs(probability - float(row[index[piece]])))
        first, second = np.sort(row)[::-1][:2]
        if first - second > 1e-4:
            best = vocabulary[int(np.argmax(row))]
            assert guesses[0][0] == best, f"{label} position {position}: best {guesses[0][0]!r}, reference {best!r}"
        probabilities_shown = [probability for _, probability in guesses]
        assert probabilities_shown == sorted(probabilities_shown, reverse=True), f"{label}: not best first"
    assert worst <= 1e-3, f"{label}: a guess's probability is {worst:.2g} from the reference's (bound 1e-3)"
    return worst


def random_masked_lm(directory, vocab_lines: list[str], *, layers=2, heads=4, hidden=32, positions=64, seed=0,
                     std=0.5):  # fmt: skip
    """A random-weight transformers BertForMaskedLM saved to ``directory`` with this vocabulary,
    weights drawn wide (std 0.5) so that a small model's guesses differ clearly from each other (a
    wide bert-base saturates its softmax: there, BERT's own 0.02)."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(vocab_size=len(vocab_lines), hidden_size=hidden, num_hidden_layers=layers,
                                     num_attention_heads=heads, intermediate_size=37, max_position_embeddings=positions,
                                     initializer_range=std, attn_implementation="eager")  # fmt: skip
    model = transformers.BertForMaskedLM(config).eval()
    model.save_pretrained(directory)
    (directory / "vocab.txt").write_text("\n".join(vocab_lines) + "\n", encoding="utf-8")
    return model
