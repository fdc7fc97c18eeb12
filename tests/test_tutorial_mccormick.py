"""McCormick & Ryan's "BERT Fine-Tuning Tutorial with PyTorch", the fine-tuning tutorial most
learners start from, runs on minibert with only its ``from transformers import`` lines changed
(tests/data/tutorials/mccormick_finetuning.py: the notebook's cells, as they run on transformers
4.57, on a CPU): its tokenizer calls (``do_lower_case``, ``encode``, ``encode_plus``), the model
with a new 2-label head (``num_labels=2, output_attentions=False, output_hidden_states=False``),
torch's AdamW under ``get_linear_schedule_with_warmup``, its loop (``token_type_ids=None``,
``labels=``, ``return_dict=True``, gradient clipping), ``save_pretrained`` and reloading. The folder
it saves loads in transformers and gives the same logits on the validation sentences, within 1e-4
(MiniLM's logits are of magnitude ~1; two fp32 computations of six layers agree to ~1e-5).
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import assert_close, child_environment

transformers = pytest.importorskip("transformers")
TUTORIAL = Path(__file__).parent / "data" / "tutorials" / "mccormick_finetuning.py"


def _sentences(path: Path, count: int = 96) -> None:
    """A small labelled set in the tutorial's shape (one sentence, a 0/1 label): reviews, good or bad."""
    rng = random.Random(7)
    things = ["film", "meal", "hotel", "book", "concert", "phone", "game", "trip"]
    good, bad = ["wonderful", "great", "lovely", "excellent", "superb"], ["awful", "terrible", "boring", "bad", "dull"]
    rows = []
    for index in range(count):
        label = index % 2
        words = (good if label else bad)[rng.randrange(5)]
        rows.append(f"The {rng.choice(things)} was {words}, {rng.choice(['really', 'quite', 'truly'])}.\t{label}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def test_the_tutorial_runs_with_its_imports_changed(tmp_path, minilm_dir):
    source = TUTORIAL.read_text(encoding="utf-8")
    ours = source.replace("from transformers import", "from minibert import")
    changed = [line for line, original in zip(ours.splitlines(), source.splitlines(), strict=True) if line != original]
    assert changed == ["from minibert import BertTokenizer",
                       "from minibert import BertForSequenceClassification, BertConfig",
                       "from minibert import get_linear_schedule_with_warmup"], changed  # fmt: skip
    (tmp_path / "tutorial.py").write_text(ours, encoding="utf-8")
    _sentences(tmp_path / "sentences.tsv")
    environment = child_environment()
    done = subprocess.run([sys.executable, "tutorial.py", str(minilm_dir), "2", "32"], cwd=tmp_path, env=environment,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Training complete!" in done.stdout and "======== Epoch 2 / 2 ========" in done.stdout, done.stdout[-2000:]
    assert "The BERT model has" in done.stdout and "==== Output Layer ====" in done.stdout

    saved = torch.load(tmp_path / "validation.pt", weights_only=False)  # (the tutorial's stats hold numpy floats)
    reference = transformers.BertForSequenceClassification.from_pretrained(
        str(tmp_path / "model_save"), attn_implementation="eager").eval()  # fmt: skip
    with torch.no_grad():
        theirs = reference(input_ids=saved["input_ids"], attention_mask=saved["attention_mask"]).logits
    worst = assert_close(saved["logits"], theirs, "the saved model's logits in transformers", 1e-4)
    their_tokenizer = transformers.BertTokenizerFast.from_pretrained(str(tmp_path / "model_save"))
    text = "The Hotel was WONDERFUL, truly."
    from minibert import BertTokenizer

    assert BertTokenizer.from_pretrained(tmp_path / "model_save")(text) == their_tokenizer(text).data | {}
    accuracies = [round(float(epoch["Valid. Accur."]), 2) for epoch in saved["stats"]]
    print(f"\nMcCormick's tutorial on minibert: logits in transformers max |Δ| {worst:.1e}; "
          f"validation accuracy by epoch {accuracies}")
