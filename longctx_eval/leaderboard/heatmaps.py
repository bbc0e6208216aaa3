"""PNG heatmaps of the leaderboard: length x depth per model, or models x length for depth-free tasks."""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

# Figures are built with the object API on an Agg canvas, never through pyplot: no global figure
# registry to leak, no GUI backend to pick, safe to call from any thread.
from matplotlib import colormaps, rc_context
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from longctx_eval.atomic_io import atomic_write_bytes
from longctx_eval.leaderboard.grid import (
    Cell,
    cell,
    depths,
    has_depth,
    lengths,
    lengths_text,
    lookup,
    pooled_lengths_of,
    primary_metric,
    ranked,
    task_names,
    task_of,
)
from longctx_eval.leaderboard.markdown import DEFAULT_MIN_N
from longctx_eval.leaderboard.plot_legend import legend_below
from longctx_eval.results import RunResult, TaskResult
from longctx_eval.scoring.labels import format_number, length_label

CMAP = "viridis"
DPI = 120
MAX_COLS = 3  # subplots per row for the per-model depth grids
# Over-window cells are hatched grey, not-evaluated cells white with a dotted edge: neither is a score.
OVER_WINDOW_STYLE: dict[str, Any] = {"facecolor": "#c8c8c8", "edgecolor": "#7a7a7a", "hatch": "///", "linewidth": 0.0}
NOT_EVALUATED_STYLE: dict[str, Any] = {"facecolor": "white", "edgecolor": "#9a9a9a", "linestyle": ":", "linewidth": 1.0}
LOW_N_MARK = "\u2020"
"""Suffix of a low-n cell's value (a dagger)."""
CHARS_PER_INCH = 11.0
"""Title characters that fit one inch of figure width at 10 pt (wrapped, never clipped)."""


def literal_text() -> AbstractContextManager[None]:
    """Figures built and saved inside draw every text as it is: no `$...$` read as math, so a name from a run
    file can neither change its look nor stop the board with a mathtext parse error."""
    return rc_context({"text.parse_math": False})


def wrapped(text: str, width_in: float, fontsize: float = 10.0) -> str:
    """`text` wrapped to fit `width_in` inches at `fontsize` points, so a title is never clipped."""
    return textwrap.fill(text, max(20, int(width_in * CHARS_PER_INCH * 10.0 / fontsize)))


def plot_filename(task: str) -> str:
    """File name of a task's heatmap: the task name made filesystem-safe ('unnamed' when nothing is left, never a
    hidden '.png'), plus '.png'."""
    return (re.sub(r"[^A-Za-z0-9._-]+", "-", task).strip("-.") or "unnamed") + ".png"


def task_figure(task: str, entries: Sequence[RunResult], min_n: int = DEFAULT_MIN_N) -> Figure | None:
    """The task's heatmap figure, or None when no entry reports a plottable value for it."""
    metric = primary_metric(task, entries)
    if metric is None:
        return None
    if has_depth(task, entries, metric):
        return _depth_figure(task, entries, metric, min_n)
    return _model_figure(task, entries, metric, min_n)


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


def write_task_plots(entries: Sequence[RunResult], plots_dir: Path, min_n: int = DEFAULT_MIN_N) -> dict[str, Path]:
    """Write one heatmap per task under `plots_dir`; returns task name -> PNG path."""
    written: dict[str, Path] = {}
    with literal_text():
        for task in task_names(entries):
            fig = task_figure(task, entries, min_n)
            if fig is not None:
                path = plots_dir / plot_filename(task)
                write_png(fig, path)
                written[task] = path
    return written


def remove_stale_plots(plots_dir: Path, keep: Iterable[Path], tasks: Iterable[tuple[str, str]]) -> list[Path]:
    """Delete PNGs in `plots_dir` named as a plot of one of `tasks` (name, capability) but not in `keep`.

    'name.png' and 'name-capability.png' are this module's naming for a task's heatmap, 'name.WHAT.png' and
    'name-capability.WHAT.png' for its line plots (task names hold no '.'); any other file (another name, a
    temp file, a folder, a link) is left alone. Each unlink is atomic. Returns the removed paths.
    """
    stems = {plot_filename(n).removesuffix(".png") for name, cap in tasks for n in (name, f"{name} ({cap})")}
    kept = {Path(p).name for p in keep}
    names = {f"{stem}.png" for stem in stems}
    if plots_dir.is_dir():
        names |= {p.name for p in plots_dir.glob("*.*.png") if p.name.split(".", 1)[0] in stems}
    removed = []
    for name in sorted(names - kept):
        path = plots_dir / name
        if path.is_file() and not path.is_symlink():
            path.unlink()
            removed.append(path)
    return removed


def _depth_figure(task: str, entries: Sequence[RunResult], metric: str, min_n: int) -> Figure:
    """One panel per model: rows are depths, columns are lengths (plus 'all' lengths when reported)."""
    models = ranked(task, entries, metric, min_n)
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
        grids.append([[_cell(result, metric, c, d, min_n) for c in col_keys] for d in row_keys])
    vmin, vmax = _limits([_values(g) for g in grids])
    ncols = min(len(models), MAX_COLS)
    nrows = math.ceil(len(models) / ncols)
    width = max(4.0, 0.75 * len(col_keys) + 1.6)
    height = max(2.6, 0.42 * len(row_keys) + 1.4)
    flat = [c for g in grids for row in g for c in row]
    fig_width = width * ncols + 1.0
    fig = Figure(figsize=(fig_width, height * nrows + 0.6 + _legend_height(flat)), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(models) :]:
        ax.remove()
    image = None
    all_label, own = _pooled_labels(task, models)
    for ax, entry, grid in zip(axes, models, grids, strict=False):
        image = _heatmap(ax, grid, vmin, vmax)
        title = entry.model.name + (f" (all = {own[id(entry)]})" if id(entry) in own and pooled_cols else "")
        ax.set_title(wrapped(title, width), fontsize=10)
        _ticks(ax, [all_label if c is None else length_label(c) for c in col_keys], [f"{d:.0%}" for d in row_keys])
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("needle depth")
    assert image is not None  # models is non-empty: ncols above would have divided by zero
    fig.colorbar(image, ax=list(axes[: len(models)]), shrink=0.85, label=metric)
    fig.suptitle(wrapped(f"{task}: {metric} by length and depth", fig_width, 12), fontsize=12)
    _legend(fig, flat, min_n)
    return fig


def _model_figure(task: str, entries: Sequence[RunResult], metric: str, min_n: int) -> Figure:
    """A single panel: rows are models (ranked ones best first, then the unranked), columns are lengths plus 'all'."""
    models = ranked(task, entries, metric, min_n)
    col_keys: list[int | None] = [*lengths(task, entries, metric, with_depth=False), None]
    grid = [[_cell(task_of(e, task), metric, c, None, min_n) for c in col_keys] for e in models]
    vmin, vmax = _limits([_values(grid)])
    width = max(5.0, 0.8 * len(col_keys) + 0.12 * max(len(e.model.name) for e in models) + 2.0)
    flat = [c for row in grid for c in row]
    fig = Figure(figsize=(width, max(2.4, 0.45 * len(models) + 1.5) + _legend_height(flat)), layout="constrained")
    ax = fig.subplots()
    image = _heatmap(ax, grid, vmin, vmax)
    all_label, own = _pooled_labels(task, models)
    names = [e.model.name + (f" (all = {own[id(e)]})" if id(e) in own else "") for e in models]
    _ticks(ax, [all_label if c is None else length_label(c) for c in col_keys], names)
    ax.set_xlabel("context length (tokens)")
    ax.set_title(wrapped(f"{task}: {metric} by length", width - 1.5, 11), fontsize=11)
    fig.colorbar(image, ax=ax, shrink=0.85, label=metric)
    _legend(fig, flat, min_n)
    return fig


def _pooled_labels(task: str, models: Sequence[RunResult]) -> tuple[str, dict[int, str]]:
    """The 'all' column's label, and per model (by id) the lengths its 'all' cell pools when models differ: a
    pooled cell over 8K-32K must not read as comparable with one over 8K-128K."""
    pooled = {id(e): pooled_lengths_of(t) for e in models if (t := task_of(e, task)) is not None}
    known = [p for p in pooled.values() if p is not None]
    if known and len(known) == len(pooled) and all(p == known[0] for p in known):
        return f"all\n({lengths_text(known[0])})", {}
    return "all", {k: lengths_text(p) for k, p in pooled.items() if p is not None}


def cell_marks(grid: Sequence[Sequence[Cell]]) -> dict[str, int]:
    """How many cells of a grid are over window, not evaluated and partial (what the legend explains)."""
    flat = [c for row in grid for c in row]
    return {
        "over_window": sum(c.state == "over_window" for c in flat),
        "not_evaluated": sum(c.state == "not_evaluated" for c in flat),
        "failed": sum(c.state == "failed" for c in flat),
        "partial": sum(c.partial for c in flat),
        "low_n": sum(c.low_n for c in flat),
    }


def _cell(result: TaskResult | None, metric: str, length: int | None, depth: float | None, min_n: int) -> Cell:
    return cell(result, metric, length, depth, min_n) if result is not None else Cell(None, "missing")


def _values(grid: Sequence[Sequence[Cell]]) -> np.ndarray:
    # Anything but a value (unreported, over window, not evaluated) is NaN: never drawn as a misleading zero.
    return np.array(
        [[c.row.value if c.state == "value" and c.row is not None else np.nan for c in row] for row in grid],
        dtype=np.float64,
    ).reshape(len(grid), len(grid[0]) if grid else 0)


def _limits(grids: Sequence[np.ndarray]) -> tuple[float, float]:
    """0..1 for rates and scores, so colours mean the same across tasks; the data range otherwise."""
    values = np.concatenate([g[np.isfinite(g)] for g in grids]) if grids else np.array([])
    if values.size == 0 or (values.min() >= 0.0 and values.max() <= 1.0):
        return 0.0, 1.0
    lo, hi = float(values.min()), float(values.max())
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def _heatmap(ax: Axes, cells: Sequence[Sequence[Cell]], vmin: float, vmax: float):
    cmap = _cmap()
    grid = _values(cells)
    image = ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    fontsize = 9 if grid.shape[1] <= 8 else 7
    for (i, j), value in np.ndenumerate(grid):
        c = cells[i][j]
        if c.state == "over_window":
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, **OVER_WINDOW_STYLE))
            ax.text(j, i, "n/a", ha="center", va="center", fontsize=fontsize, color="black")
            continue
        if c.state in ("not_evaluated", "failed"):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, **NOT_EVALUATED_STYLE))
            mark = "n/e" if c.state == "not_evaluated" else "failed"
            ax.text(j, i, mark, ha="center", va="center", fontsize=fontsize, color="dimgray")
            continue
        if not np.isfinite(value):
            ax.text(j, i, "–", ha="center", va="center", fontsize=fontsize, color="dimgray")
            continue
        r, g, b, _ = cmap((value - vmin) / (vmax - vmin))
        # Dark text on light cells, white on dark ones (relative luminance).
        color = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
        text = format_number(value, vmin >= 0.0 and vmax <= 1.0) + ("*" if c.partial else "")
        text += LOW_N_MARK if c.low_n else ""
        ax.text(j, i, text, ha="center", va="center", fontsize=fontsize, color=color)
    return image


def _legend_height(cells: Sequence[Cell]) -> float:
    """Extra figure height (inches) for the legend row, 0 when no cell needs explaining."""
    marks = [c.state in ("over_window", "not_evaluated", "failed") or c.partial or c.low_n for c in cells]
    return 0.3 * math.ceil(_legend_count(cells) / LEGEND_COLS) if any(marks) else 0.0


LEGEND_COLS = 2
"""Legend entries per row under a heatmap (more rows rather than a legend wider than the figure)."""


def _legend_count(cells: Sequence[Cell]) -> int:
    states = {c.state for c in cells}
    return sum(
        [
            "over_window" in states,
            "not_evaluated" in states,
            "failed" in states,
            any(c.partial for c in cells),
            any(c.low_n for c in cells),
        ]
    )


def _legend(fig: Figure, cells: Sequence[Cell], min_n: int = DEFAULT_MIN_N) -> None:
    """A legend under the panels for the marks the figure uses: over window, not evaluated, partial, low n."""
    handles = []
    if any(c.state == "over_window" for c in cells):
        handles.append(Patch(**OVER_WINDOW_STYLE, label="n/a: over the model's context window"))
    if any(c.state == "not_evaluated" for c in cells):
        handles.append(Patch(**NOT_EVALUATED_STYLE, label="n/e: not evaluated (--limit)"))
    if any(c.state == "failed" for c in cells):
        handles.append(Patch(**NOT_EVALUATED_STYLE, label="failed: every request failed (see the page)"))
    if any(c.partial for c in cells):
        handles.append(Patch(facecolor="none", edgecolor="none", label="*: partial, fewer samples than planned"))
    if any(c.low_n for c in cells):
        label = f"{LOW_N_MARK}: low n, fewer than {min_n} samples (not ranked)"
        handles.append(Patch(facecolor="none", edgecolor="none", label=label))
    if handles:
        legend_below(fig, handles, max_cols=LEGEND_COLS)


def _cmap():
    return colormaps[CMAP].with_extremes(bad="#dddddd")


def _ticks(ax: Axes, xlabels: list[str], ylabels: list[str]) -> None:
    ax.set_xticks(range(len(xlabels)), xlabels)
    ax.set_yticks(range(len(ylabels)), ylabels)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
