"""Pictures of what BERT computes: one attention map, and the distribution of hidden values per layer.

    pip install matplotlib          # or: pip install -e ".[plot]"
    python scripts/plot_attention.py --text "The cat sat on the mat because it was tired." --layer 3 --head 5

Layers are numbered as ``hidden_states`` numbers them: 0 is the embeddings (no attention), 1 the
first encoder layer (its attention weights are ``attentions[0]``, its output ``hidden_states[1]``),
up to L, the last. Heads count from 0. A layer or head the model does not have is an error. The
explorer (``minibert explore``) counts the same way: its "layer 3, head 5" is ``--layer 3 --head 5``.

Writes attention.png (the weights of one head: who attends to whom) and hidden_values.png (a
histogram of the hidden-state values of each layer) into --out (default: the current directory),
atomically, and prints what each picture shows.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import torch
from needs import default_model, need


def attention_map(out, layer: int, head: int) -> torch.Tensor:
    """The attention weights (T, T) of ``head`` (from 0) in encoder ``layer`` (from 1, as
    hidden_states numbers it) of a one-text batch: row i = where token i looks. ValueError if the
    model has no such layer or head."""
    layers, heads = len(out.attentions), out.attentions[0].shape[1]
    if not 1 <= layer <= layers:
        raise ValueError(f"--layer {layer} does not exist: this model's encoder layers are 1..{layers}, numbered "
                         "as hidden_states numbers them (0 is the embeddings, which have no attention)")  # fmt: skip
    if not 0 <= head < heads:
        raise ValueError(f"--head {head} does not exist: this model's heads are 0..{heads - 1}")
    return out.attentions[layer - 1][
        0, head
    ]  # (T, T): the weights inside layer `layer`, which make hidden_states[layer]


def attention_title(layer: int, head: int, out) -> str:
    """What the attention picture shows, in words."""
    layers, heads = len(out.attentions), out.attentions[0].shape[1]
    return (f"attention weights of layer {layer} of {layers} (its output is hidden_states[{layer}]), "
            f"head {head} (of 0..{heads - 1})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="hub id or directory (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--text", default="The cat sat on the mat because it was tired.")
    parser.add_argument("--layer", type=int, default=3, help="encoder layer, 1..L, as hidden_states numbers them")
    parser.add_argument("--head", type=int, default=0, help="attention head, from 0")
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    matplotlib = need("matplotlib", "to draw the pictures", install="matplotlib  (or the [plot] extra)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minibert.errors import MinibertError
    from minibert.explorer.loading import load_for_exploring
    from minibert.formats.atomic_files import why_not_a_folder, write_atomically

    script = Path(sys.argv[0]).name
    reason = why_not_a_folder(args.out)
    if reason:  # before the model is loaded
        raise SystemExit(f"{script}: --out {args.out} {reason}")
    try:  # every checkpoint's encoder, with a pooler or without (a BertForMaskedLM), as `minibert explore` loads it
        loaded = load_for_exploring(args.model or default_model())
        model, tokenizer = loaded.encoder.use_book_modules(), loaded.tokenizer  # the attention model.py writes out
        batch = tokenizer(args.text, return_tensors="pt", verbose=False)
        length, limit = batch["input_ids"].shape[1], model.config.max_position_embeddings
        if length > limit:
            raise ValueError(f"--text is {length} tokens long (with [CLS] and [SEP]), more than the model's {limit} "
                             "positions: shorten it")  # fmt: skip
        with torch.inference_mode():
            out = model(**batch, output_attentions=True, output_hidden_states=True)
        weights = attention_map(out, args.layer, args.head)
    except (MinibertError, OSError, ValueError) as error:
        raise SystemExit(f"{script}: {error}") from None
    tokens = tokenizer.convert_ids_to_tokens(batch["input_ids"][0])

    def save(figure, name, what):
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
        try:
            write_atomically(Path(args.out) / name, buffer.getvalue())
        except OSError as error:  # a full disk, a read-only folder: named with the file (atomic_files.py)
            raise SystemExit(f"{script}: {error}") from None
        print(f"wrote {Path(args.out) / name}: {what}")

    title = attention_title(args.layer, args.head, out)
    figure, axis = plt.subplots(figsize=(7, 6))
    image = axis.imshow(weights.numpy(), cmap="viridis")
    axis.set_xticks(range(len(tokens)), tokens, rotation=90)
    axis.set_yticks(range(len(tokens)), tokens)
    axis.set_xlabel("attended-to token (key)")
    axis.set_ylabel("attending token (query); each row sums to 1")
    axis.set_title(title, fontsize=9)
    figure.colorbar(image)
    save(figure, "attention.png", title)

    figure, axis = plt.subplots(figsize=(8, 4))
    for index, states in enumerate(out.hidden_states):
        label = "hidden_states[0]: embeddings" if index == 0 else f"hidden_states[{index}]: layer {index}"
        axis.hist(states.flatten().numpy(), bins=80, histtype="step", label=label)
    axis.set_yscale("log")
    axis.set_xlabel("hidden value")
    axis.set_ylabel("count")
    axis.legend(fontsize=7)
    histogram_title = (
        f"distribution of the values of each hidden state (embeddings, then layers 1..{len(out.attentions)})"
    )
    axis.set_title(histogram_title, fontsize=9)
    save(figure, "hidden_values.png", histogram_title)


if __name__ == "__main__":
    main()
