"""PNG heatmaps of the leaderboard: length x depth per model, or models x length for depth-free tasks."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# Figures are built with the object API on an Agg canvas, never through pyplot: no global figure
# registry to leak, no GUI backend to pick, safe to call from any thread.
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from longctx_eval.io import atomic_write_bytes
from longctx_eval.leaderboard_render import (
    depths,
    format_number,
    has_depth,
    length_label,
    lengths,
    lookup,
    primary_metric,
    ranked,
    task_names,
    task_of,
)
from longctx_eval.results import RunResult

CMAP = "viridis"
DPI = 120
MAX_COLS = 3  # subplots per row for the per-model depth grids


def plot_filename(task: str) -> str:
    """File name of a task's heatmap: the task name made filesystem-safe, plus '.png'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", task).strip("-.") + ".png"


def task_figure(task: str, entries: Sequence[RunResult]) -> Figure | None:
    """The task's heatmap figure, or None when no entry reports a plottable value for it."""
    metric = primary_metric(task, entries)
    if metric is None:
        return None
    if has_depth(task, entries, metric):
        return _depth_figure(task, entries, metric)
    return _model_figure(task, entries, metric)


def panel_axes(fig: Figure) -> list[Axes]:
    """The heatmap panels of a figure, without its colorbar axes."""
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def write_png(fig: Figure, path: Path) -> None:
    """Render `fig` to PNG and write it atomically (temp file in the same folder, then os.replace)."""
    buf = io.BytesIO()
    # No Software/date metadata, so the same results give the same bytes.
    FigureCanvasAgg(fig)  # attaches itself as fig.canvas
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    atomic_write_bytes(path, buf.getvalue())


def write_task_plots(entries: Sequence[RunResult], plots_dir: Path) -> dict[str, Path]:
    """Write one heatmap per task under `plots_dir`; returns task name -> PNG path."""
    written: dict[str, Path] = {}
    for task in task_names(entries):
        fig = task_figure(task, entries)
        if fig is not None:
            path = plots_dir / plot_filename(task)
            write_png(fig, path)
            written[task] = path
    return written


def _depth_figure(task: str, entries: Sequence[RunResult], metric: str) -> Figure:
    """One panel per model: rows are depths, columns are lengths (plus 'all' lengths when reported)."""
    models = ranked(task, entries, metric)
    row_keys = depths(task, entries, metric)
    col_keys: list[int | None] = list(lengths(task, entries, metric, with_depth=True))
    pooled_cols = any(
        (t := task_of(e, task)) is not None and lookup(t, metric, None, d) is not None for e in models for d in row_keys
    )
    if pooled_cols:
        col_keys.append(None)
    grids = []
    for entry in models:
        result = task_of(entry, task)
        grids.append(_grid([[lookup(result, metric, c, d) if result else None for c in col_keys] for d in row_keys]))
    vmin, vmax = _limits(grids)
    ncols = min(len(models), MAX_COLS)
    nrows = math.ceil(len(models) / ncols)
    width = max(4.0, 0.75 * len(col_keys) + 1.6)
    height = max(2.6, 0.42 * len(row_keys) + 1.4)
    fig = Figure(figsize=(width * ncols + 1.0, height * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(models) :]:
        ax.remove()
    image = None
    for ax, entry, grid in zip(axes, models, grids, strict=False):
        image = _heatmap(ax, grid, vmin, vmax)
        ax.set_title(entry.model.name, fontsize=10)
        _ticks(ax, [length_label(c) for c in col_keys], [f"{d:.0%}" for d in row_keys])
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("needle depth")
    fig.colorbar(image, ax=list(axes[: len(models)]), shrink=0.85, label=metric)
    fig.suptitle(f"{task}: {metric} by length and depth")
    return fig


def _model_figure(task: str, entries: Sequence[RunResult], metric: str) -> Figure:
    """A single panel: rows are models (best first), columns are lengths plus 'all'."""
    models = ranked(task, entries, metric)
    col_keys: list[int | None] = [*lengths(task, entries, metric, with_depth=False), None]
    grid = _grid([[lookup(t, metric, c, None) if (t := task_of(e, task)) else None for c in col_keys] for e in models])
    vmin, vmax = _limits([grid])
    width = max(5.0, 0.8 * len(col_keys) + 0.12 * max(len(e.model.name) for e in models) + 2.0)
    fig = Figure(figsize=(width, max(2.4, 0.45 * len(models) + 1.5)), layout="constrained")
    ax = fig.subplots()
    image = _heatmap(ax, grid, vmin, vmax)
    _ticks(ax, [length_label(c) for c in col_keys], [e.model.name for e in models])
    ax.set_xlabel("context length (tokens)")
    ax.set_title(f"{task}: {metric} by length")
    fig.colorbar(image, ax=ax, shrink=0.85, label=metric)
    return fig


def _grid(rows: list[list]) -> np.ndarray:
    # Unreported strata become NaN, drawn as blank grey cells rather than as a misleading zero.
    return np.array([[np.nan if r is None else r.value for r in row] for row in rows], dtype=np.float64)


def _limits(grids: Sequence[np.ndarray]) -> tuple[float, float]:
    """0..1 for rates and scores, so colours mean the same across tasks; the data range otherwise."""
    values = np.concatenate([g[np.isfinite(g)] for g in grids]) if grids else np.array([])
    if values.size == 0 or (values.min() >= 0.0 and values.max() <= 1.0):
        return 0.0, 1.0
    lo, hi = float(values.min()), float(values.max())
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def _heatmap(ax: Axes, grid: np.ndarray, vmin: float, vmax: float):
    cmap = _cmap()
    image = ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    fontsize = 9 if grid.shape[1] <= 8 else 7
    for (i, j), value in np.ndenumerate(grid):
        if not np.isfinite(value):
            ax.text(j, i, "–", ha="center", va="center", fontsize=fontsize, color="dimgray")
            continue
        r, g, b, _ = cmap((value - vmin) / (vmax - vmin))
        # Dark text on light cells, white on dark ones (relative luminance).
        color = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
        text = format_number(value, vmin >= 0.0 and vmax <= 1.0)
        ax.text(j, i, text, ha="center", va="center", fontsize=fontsize, color=color)
    return image


def _cmap():
    return colormaps[CMAP].with_extremes(bad="#dddddd")


def _ticks(ax: Axes, xlabels: list[str], ylabels: list[str]) -> None:
    ax.set_xticks(range(len(xlabels)), xlabels)
    ax.set_yticks(range(len(ylabels)), ylabels)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
