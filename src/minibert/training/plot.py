"""The loss curve of a run: metrics.jsonl → loss.png (matplotlib, the optional "plot" extra)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from ..errors import DataError
from ..formats.atomic_files import write_atomically


def read_metrics(run: str | Path) -> list[dict]:
    """The lines of ``RUN/metrics.jsonl`` (one per step), skipping a line cut short by a kill."""
    path = Path(run) / "metrics.jsonl"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        raise DataError(f"{path} does not exist: {run} is not a minibert pretrain run") from None
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int):
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
        axis.plot(steps, [record.get(key) for record in records], label=label, linewidth=1)
    axis.set_xlabel("step")
    axis.set_ylabel("loss (nats)")
    axis.set_title(f"minibert pretrain: {Path(run).name}")
    axis.legend()
    axis.grid(alpha=0.3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(figure)
    output = Path(output) if output is not None else Path(run) / "loss.png"
    write_atomically(output, buffer.getvalue())
    return output
