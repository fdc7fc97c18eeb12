"""The loss curve of a run: metrics.jsonl → loss.png (matplotlib, the optional "plot" extra).

A pre-training run's lines hold the three losses; a fine-tuning run's (they carry an "epoch") the
loss, and the dev figures (``dev_accuracy``, ...) where it was evaluated, drawn on a second axis."""

from __future__ import annotations

import io
import json
from pathlib import Path

from ..errors import DataError
from ..formats.atomic_files import write_atomically

LOSSES = ("loss", "mlm_loss", "nsp_loss")


def read_metrics(run: str | Path) -> list[dict]:
    """The lines of ``RUN/metrics.jsonl`` (one per step). A last line without its newline was being
    written when the run was killed: it is left out. Any other line that is not a step's JSON
    object (an integer "step", numbers for the losses) is a DataError naming the file and line."""
    path = Path(run) / "metrics.jsonl"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path} does not exist: {run} is not a minibert pretrain run") from None
    except IsADirectoryError:
        raise DataError(f"{path} is a directory, not a run's metrics file") from None
    lines = data.split(b"\n")
    records = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            if number == len(lines):  # no newline after it: cut short by a kill
                continue
            problem = "not UTF-8" if isinstance(error, UnicodeDecodeError) else "not valid JSON"
            raise DataError(f"{path}, line {number}: {problem}") from None
        needed = LOSSES[:1] if isinstance(record, dict) and "epoch" in record else LOSSES  # fine-tuning: loss
        numbers = isinstance(record, dict) and all(
            isinstance(record.get(key), (int, float)) and not isinstance(record.get(key), bool) for key in needed
        )
        if not numbers or not isinstance(record.get("step"), int):
            raise DataError(f'{path}, line {number}: a step\'s line holds an integer "step" and the numbers '
                            f"{', '.join(LOSSES)}")  # fmt: skip
        records.append(record)
    return records


def plot_run(run: str | Path, output: str | Path | None = None) -> Path:
    """Draw the total, masked-LM and next-sentence losses against the step; written atomically
    to ``output`` (default ``RUN/loss.png``). Raises ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_metrics(run)
    if not records:
        raise DataError(f"{Path(run) / 'metrics.jsonl'} holds no steps yet: nothing to plot")
    steps = [record["step"] for record in records]
    figure, axis = plt.subplots(figsize=(7, 4), dpi=100)
    for key, label in (("loss", "total"), ("mlm_loss", "masked LM"), ("nsp_loss", "next sentence")):
        if key in records[0]:
            axis.plot(steps, [record.get(key) for record in records], label=label, linewidth=1)
    dev = sorted({key for record in records for key in record if key.startswith("dev_")})
    if dev:  # a fine-tuning run's dev figures, at the steps where they were measured
        right = axis.twinx()
        for key in dev:
            points = [(record["step"], record[key]) for record in records if record.get(key) is not None]
            right.plot(*zip(*points), marker="o", linestyle="--", label=key.removeprefix("dev_") + " (dev)")
        right.set_ylabel("dev")
        right.legend(loc="center right")
    axis.set_xlabel("step")
    axis.set_ylabel("loss (nats)")
    axis.set_title(f"minibert {'finetune' if dev or 'epoch' in records[0] else 'pretrain'}: {Path(run).name}")
    axis.legend()
    axis.grid(alpha=0.3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(figure)
    output = Path(output) if output is not None else Path(run) / "loss.png"
    write_atomically(output, buffer.getvalue())
    return output
