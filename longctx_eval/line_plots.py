"""PNG line plots of the leaderboard: a task's curves (Recall@K, similarity decay) and its metric per slice value.

One line per system, all lengths pooled, with its 95% interval (a band for curves, error bars for slices).
Files sit next to the task's heatmap as 'TASK.CURVE.png' and 'TASK.by-KEY.png' (task names hold no '.').
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from longctx_eval.leaderboard_render import pooled_lengths_of, primary_metric, ranked, task_names, task_of
from longctx_eval.metrics.slicing import ValueKey, value_key
from longctx_eval.plots import plot_filename, write_png
from longctx_eval.result_text import length_label, value_text
from longctx_eval.results import CurveResult, MetricResult, RunResult, SliceValue, TaskResult

Board = list[tuple[str, TaskResult]]


def extra_plot_name(task: str, what: str) -> str:
    """'needle.recall_at_k.png': the task's plot file stem, a dot, then what is plotted (made file-safe)."""
    return plot_filename(task).removesuffix(".png") + "." + re.sub(r"[^A-Za-z0-9_-]+", "-", what).strip("-") + ".png"


def _board(task: str, entries: Sequence[RunResult]) -> tuple[str | None, Board]:
    metric = primary_metric(task, entries)
    if metric is None:
        return None, []
    return metric, [(e.model.name, t) for e in ranked(task, entries, metric) if (t := task_of(e, task)) is not None]


def _colors(n: int) -> list:
    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def _labels(board: Board) -> list[str]:
    """Model names, each with the lengths it pools when the models pool different lengths."""
    pooled = [pooled_lengths_of(r) for _, r in board]
    if all(p == pooled[0] for p in pooled):
        return [name for name, _ in board]
    return [
        f"{name} ({', '.join(length_label(n) for n in p)})" if p else name
        for (name, _), p in zip(board, pooled, strict=True)
    ]


def curve_names(board: Board) -> list[str]:
    """Curves any model of the board reports pooled over lengths, in first-seen order."""
    return list(dict.fromkeys(c.name for _, r in board for c in r.curves if c.length is None))


def curve_figure(task: str, name: str, entries: Sequence[RunResult]) -> Figure | None:
    """One line per system of curve `name` (pooled over lengths) with its 95% band; None when nobody has it."""
    _, board = _board(task, entries)
    found: list[tuple[str, CurveResult]] = []
    for label, (_, result) in zip(_labels(board), board, strict=True):
        curve = next((c for c in result.curves if c.name == name and c.length is None), None)
        if curve is not None and curve.points:
            found.append((label, curve))
    if not found:
        return None
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.subplots()
    unit = True
    for (label, curve), color in zip(found, _colors(len(found)), strict=True):
        x = np.array([p.x for p in curve.points])
        y = np.array([p.value for p in curve.points])
        lo = np.array([p.ci95[0] for p in curve.points])
        hi = np.array([p.ci95[1] for p in curve.points])
        unit = unit and bool(lo.min() >= 0.0 and hi.max() <= 1.0)
        ax.plot(x, y, color=color, label=label, marker="o" if len(x) <= 20 else None, markersize=3, linewidth=1.5)
        ax.fill_between(x, lo, hi, color=color, alpha=0.18, linewidth=0)
    first = found[0][1]
    ax.set_xlabel(first.x_label)
    ax.set_ylabel(first.y_label)
    if unit:
        ax.set_ylim(0.0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(f"{task}: {first.y_label} vs {first.x_label} (all lengths pooled, 95% band)", fontsize=10)
    return fig


def slice_keys(board: Board, metric: str) -> list[str]:
    """Slice keys any model of the board reports `metric` for, in first-seen order."""
    return list(
        dict.fromkeys(k for _, r in board for row in r.slices if row.metric == metric and row.slice for k in row.slice)
    )


def _slice_rows(result: TaskResult, metric: str, key: str) -> dict[ValueKey, MetricResult]:
    out = {}
    for row in result.slices:
        if row.metric == metric and row.length is None and row.slice and key in row.slice:
            vkey = value_key(row.slice[key])
            if vkey is not None:
                out[vkey] = row
    return out


def slice_figure(task: str, key: str, entries: Sequence[RunResult]) -> Figure | None:
    """The primary metric per value of slice `key` (pooled over lengths), one line per system, 95% error bars."""
    metric, board = _board(task, entries)
    if metric is None:
        return None
    per_model = [(label, _slice_rows(r, metric, key)) for label, (_, r) in zip(_labels(board), board, strict=True)]
    per_model = [(label, rows) for label, rows in per_model if rows]
    if not per_model:
        return None
    shown: dict[ValueKey, SliceValue] = {}
    for _, rows in per_model:
        for vkey, row in rows.items():
            assert row.slice is not None
            shown.setdefault(vkey, row.slice[key])
    order = sorted(shown)
    fig = Figure(figsize=(max(5.0, 0.8 * len(order) + 3.0), 4.0), layout="constrained")
    ax = fig.subplots()
    width = 0.5 / max(1, len(per_model))
    unit = True
    for i, ((label, rows), color) in enumerate(zip(per_model, _colors(len(per_model)), strict=True)):
        xs, ys, err = [], [], [[], []]
        for j, vkey in enumerate(order):
            row = rows.get(vkey)
            if row is None:
                continue
            xs.append(j + (i - (len(per_model) - 1) / 2) * width)
            ys.append(row.value)
            err[0].append(max(0.0, row.value - row.ci95[0]))
            err[1].append(max(0.0, row.ci95[1] - row.value))
            unit = unit and row.ci95[0] >= 0.0 and row.ci95[1] <= 1.0
        ax.errorbar(xs, ys, yerr=err, color=color, label=label, marker="o", markersize=4, capsize=3, linewidth=1.2)
    ax.set_xticks(range(len(order)), [value_text(shown[v]) for v in order])
    ax.set_xlabel(key)
    ax.set_ylabel(metric)
    if unit:
        ax.set_ylim(0.0, 1.02)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(f"{task}: {metric} by {key} (all lengths pooled, 95% interval)", fontsize=10)
    return fig


def write_line_plots(entries: Sequence[RunResult], plots_dir: Path) -> dict[str, list[Path]]:
    """Write every task's curve and slice plots under `plots_dir`; returns task -> PNG paths."""
    written: dict[str, list[Path]] = {}
    for task in task_names(entries):
        metric, board = _board(task, entries)
        if metric is None:
            continue
        figures = [(name, curve_figure(task, name, entries)) for name in curve_names(board)]
        figures += [(f"by-{key}", slice_figure(task, key, entries)) for key in slice_keys(board, metric)]
        for what, fig in figures:
            if fig is not None:
                path = plots_dir / extra_plot_name(task, what)
                write_png(fig, path)
                written.setdefault(task, []).append(path)
    return written
