"""The semantic-drift plot of a task: `TASK.semantic-drift.png`, each model's mean BERTScore F1 per batch group.

One line per model with its 95% band and a dotted line at its own mean, x = answers served (so systems served in
batches of different sizes share an axis). Batches run shortest contexts first, so a drift line mixes serving time
with length; the title says so. Read from run.json `semantic.drift` alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from longctx_eval.leaderboard.grid import task_names, task_of
from longctx_eval.leaderboard.heatmaps import literal_text, wrapped, write_png
from longctx_eval.leaderboard.line_plots import FIG_WIDTH, extra_plot_name, style
from longctx_eval.leaderboard.plot_legend import legend_below
from longctx_eval.results import DriftPoint, RunResult

DRIFT_PLOT = "semantic-drift"


def _served(points: Sequence[DriftPoint]) -> np.ndarray:
    """Each point's x: the answers served up to and including it (comparable across batch sizes)."""
    return np.cumsum([p.n for p in points]).astype(float)


def drift_figure(task: str, entries: Sequence[RunResult]) -> Figure | None:
    """Mean BERTScore F1 per batch group, one line per model with its 95% band; None without a model that has two
    groups."""
    series = []
    for i, entry in enumerate(entries):
        result = task_of(entry, task)
        section = getattr(result, "semantic", None) if result is not None else None
        if section is not None and len(section.drift) >= 2:
            series.append((i, entry.model.name, section))
    if not series:
        return None
    fig = Figure(figsize=(FIG_WIDTH, 4.6), layout="constrained")
    ax = fig.subplots()
    handles, labels = [], []
    for i, name, section in series:
        points = section.drift
        x = _served(points)
        s = style(i)
        (line,) = ax.plot(x, [p.bertscore_f1 for p in points], markersize=4, linewidth=1.4, **s)
        lo, hi = [p.ci95[0] for p in points], [p.ci95[1] for p in points]
        ax.fill_between(x, lo, hi, color=s["color"], alpha=0.15, linewidth=0)
        pooled = points[0].bertscore_f1 - points[0].delta_f1
        ax.axhline(pooled, color=s["color"], linewidth=0.8, linestyle=":", alpha=0.8)
        handles.append(line)
        labels.append(f"{name} (mean {pooled:.3f})")
    ax.set_xlabel("answers served (runner batches in serving order; shortest contexts first)")
    ax.set_ylabel("BERTScore F1 (batch group mean)")
    ax.grid(True, alpha=0.3)
    title = f"{task}: semantic drift, BERTScore F1 per batch group with 95% band; dotted: each model's mean"
    fig.suptitle(wrapped(title, FIG_WIDTH, 10), fontsize=10)
    legend_below(fig, handles, labels)
    return fig


def write_drift_plots(entries: Sequence[RunResult], plots_dir: Path) -> dict[str, list[Path]]:
    """Write `TASK.semantic-drift.png` for every task with a drift to draw; returns task -> [its path]."""
    written: dict[str, list[Path]] = {}
    with literal_text():
        for task in task_names(entries):
            fig = drift_figure(task, entries)
            if fig is not None:
                path = plots_dir / extra_plot_name(task, DRIFT_PLOT)
                write_png(fig, path)
                written[task] = [path]
    return written
