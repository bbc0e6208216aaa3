"""PNG line plots of the leaderboard: a task's curves (Recall@K, similarity decay) and its metric per slice value.

One line per system, all lengths pooled, with its 95% interval (a band for curves, error bars for slices; none
where n < 5 or the samples come from one haystack or document); a pooled curve is drawn only where all its
samples carry a point, so its population never changes along it.
Files sit next to the task's heatmap as 'TASK.CURVE.png' and 'TASK.by-KEY.png' (task names hold no '.').
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from longctx_eval.leaderboard.grid import pooled_lengths_of, primary_metric, ranked, task_names, task_of
from longctx_eval.leaderboard.heatmaps import literal_text, plot_filename, wrapped, write_png
from longctx_eval.leaderboard.markdown import DEFAULT_MIN_N
from longctx_eval.leaderboard.plot_legend import legend_below
from longctx_eval.metrics.bootstrap import MIN_N_FOR_INTERVAL, has_interval
from longctx_eval.results import CurvePoint, CurveResult, MetricResult, ModelMeta, RunResult, SliceValue, TaskResult
from longctx_eval.scoring.labels import length_label, value_text
from longctx_eval.scoring.slicing import ValueKey, value_key

Board = list[tuple[str, TaskResult]]
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")
SYSTEM_SCALE_CURVES = frozenset({"similarity_decay"})
"""Curves of each system's own retrieval scores (BM25, cosine, fused, MaxSim): one panel per score scale."""
FIG_WIDTH = 6.8


def extra_plot_name(task: str, what: str) -> str:
    """'needle.recall_at_k.png': the task's plot file stem, a dot, then what is plotted (made file-safe)."""
    return plot_filename(task).removesuffix(".png") + "." + re.sub(r"[^A-Za-z0-9_-]+", "-", what).strip("-") + ".png"


def _board(task: str, entries: Sequence[RunResult], min_n: int = DEFAULT_MIN_N) -> tuple[str | None, Board]:
    metric = primary_metric(task, entries)
    if metric is None:
        return None, []
    order = ranked(task, entries, metric, min_n)
    return metric, [(e.model.name, t) for e in order if (t := task_of(e, task)) is not None]


def style(i: int) -> dict:
    """Series i's colour, marker and line style: no two of the first 40 series look alike, so a line drawn over
    another of the same values still shows its own markers and dashes."""
    return {
        "color": colormaps["tab10"](i % 10),
        "marker": MARKERS[i % len(MARKERS)],
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
    }


def _labels(board: Board) -> list[str]:
    """Model names, each with the lengths it pools when the models pool different lengths."""
    pooled = [pooled_lengths_of(r) for _, r in board]
    if all(p == pooled[0] for p in pooled):
        return [name for name, _ in board]
    return [
        f"{name} ({', '.join(length_label(n) for n in p)})" if p else name
        for (name, _), p in zip(board, pooled, strict=True)
    ]


def score_scale(model: ModelMeta) -> str:
    """The scale of a retrieval system's own scores: 'BM25 score', 'cosine similarity', 'fused score (rrf)', ..."""
    settings = model.settings or {}
    if model.kind == "bm25":
        return "BM25 score"
    if model.kind == "hybrid":
        return f"fused score ({settings.get('fusion', 'fusion')})"
    if settings.get("rerank"):
        return f"{settings['rerank']} rerank score"
    if model.kind == "retriever":
        return "cosine similarity"
    return f"{model.kind} score"


def scale_ranks(model: ModelMeta) -> int | None:
    """How many ranks a system's own scores stay on one scale: a reranker's depth (past it its ranking and scores
    are the first stage's, another scale), else None (every rank)."""
    settings = model.settings or {}
    depth = settings.get("rerank_depth")
    return depth if settings.get("rerank") and isinstance(depth, int) and depth > 0 else None


def curve_names(board: Board) -> list[str]:
    """Curves any model of the board reports pooled over lengths, in first-seen order."""
    return list(dict.fromkeys(c.name for _, r in board for c in r.curves if c.length is None))


def full_population(curve: CurveResult) -> list[CurvePoint]:
    """The curve's points carried by all of its samples: a pooled curve whose shorter lengths run out of chunks
    past some rank (8K: ~80) would otherwise change population there and jump."""
    if not curve.points:
        return []
    full = max(p.n for p in curve.points)
    return [p for p in curve.points if p.n == full]


def curve_figure(task: str, name: str, entries: Sequence[RunResult], min_n: int = DEFAULT_MIN_N) -> Figure | None:
    """One line per system of curve `name` (pooled over lengths) with its 95% band; None when nobody has it.

    Curves of the systems' own scores (SYSTEM_SCALE_CURVES) get one panel per score scale, since BM25, cosine
    and fused scores are not comparable on one axis."""
    _, board = _board(task, entries, min_n)
    meta = {e.model.name: e.model for e in entries}
    found: list[tuple[int, str, str, CurveResult, list[CurvePoint]]] = []
    clipped: dict[str, int] = {}  # score scale -> the reranker depth its curves stop at
    for i, (label, (model, result)) in enumerate(zip(_labels(board), board, strict=True)):
        curve = next((c for c in result.curves if c.name == name and c.length is None), None)
        if curve is None:
            continue
        points, scale = full_population(curve), ""
        if name in SYSTEM_SCALE_CURVES and model in meta:
            scale, depth = score_scale(meta[model]), scale_ranks(meta[model])
            if depth is not None and any(p.x > depth for p in points):
                points, clipped[scale] = [p for p in points if p.x <= depth], depth
        if len(points) >= 2:  # one point is no curve (the slice plots show categories)
            found.append((i, label, scale, curve, points))
    if not found:
        return None
    scales = list(dict.fromkeys(f[2] for f in found))
    first = found[0][3]
    ncols = 1 if len(scales) == 1 else 2
    nrows = math.ceil(len(scales) / ncols)
    width_in = FIG_WIDTH * (1.0 if ncols == 1 else 1.55)
    fig = Figure(figsize=(width_in, 1.4 + 3.2 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(scales) :]:
        ax.remove()
    handles, labels = [], []
    cut = any(len(full_population(c)) < len(c.points) for *_, c, _ in found)
    unbanded = False
    for ax, scale in zip(axes, scales, strict=False):
        unit = True
        mine = [f for f in found if f[2] == scale]
        for k, (i, label, _, _, points) in enumerate(mine):
            x = np.array([p.x for p in points])
            y = np.array([p.value for p in points])
            lo = np.array([p.ci95[0] for p in points])
            hi = np.array([p.ci95[1] for p in points])
            banded = np.array([has_interval(p.n, p.clusters) for p in points])  # n < 5 or one cluster: no band
            unit = unit and bool(lo.min() >= 0.0 and hi.max() <= 1.0)
            every = max(1, len(x) // 10)
            s = style(i)
            (line,) = ax.plot(x, y, label=label, markersize=4, linewidth=1.4, markevery=(k % every, every), **s)
            ax.fill_between(x, lo, hi, where=banded, color=s["color"], alpha=0.15, linewidth=0)
            unbanded = unbanded or not banded.all()
            handles.append(line)
            labels.append(label)
        ax.set_xlabel(first.x_label)
        ax.set_ylabel(scale or first.y_label)
        if unit and not scale:  # a system's own scores keep their own range (an RRF score is ~0.016)
            ax.set_ylim(0.0, 1.02)
        ax.grid(True, alpha=0.3)
        if scale:
            depth = clipped.get(scale)
            where = f" (ranks 1-{depth}: past them, the first stage's)" if depth else ""
            ax.set_title(wrapped(f"{first.y_label}: {scale}{where}", width_in / ncols, 9), fontsize=9)
    title = f"{task}: {first.y_label} vs {first.x_label} (all lengths pooled, 95% band)"
    if len(scales) > 1:
        title += "; one panel per score scale"
    if cut:
        title += f"; {first.x_label} only where every pooled sample has a value (fewer at shorter lengths)"
    if unbanded:
        title += f"; no band where n < {MIN_N_FOR_INTERVAL} or one haystack/document"
    fig.suptitle(wrapped(title, width_in, 10), fontsize=10)
    legend_below(fig, handles, labels)
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


def slice_figure(task: str, key: str, entries: Sequence[RunResult], min_n: int = DEFAULT_MIN_N) -> Figure | None:
    """The primary metric per value of slice `key` (pooled over lengths) as points, one series per system, 95%
    error bars, side by side: the values are categories, so no line joins them. None with a single category
    (the page's slice table shows it) or no data. Hollow points: low n."""
    metric, board = _board(task, entries, min_n)
    if metric is None:
        return None
    per_model = [
        (i, label, _slice_rows(r, metric, key))
        for i, (label, (_, r)) in enumerate(zip(_labels(board), board, strict=True))
    ]
    per_model = [(i, label, rows) for i, label, rows in per_model if rows]
    if not per_model:
        return None
    shown: dict[ValueKey, SliceValue] = {}
    for _, _, rows in per_model:
        for vkey, sliced in rows.items():
            assert sliced.slice is not None
            shown.setdefault(vkey, sliced.slice[key])
    if len(shown) < 2:
        return None
    order = sorted(shown)
    width_in = max(5.0, 0.9 * len(order) + 3.0)
    fig = Figure(figsize=(width_in, 4.4), layout="constrained")
    ax = fig.subplots()
    width = 0.6 / max(1, len(per_model))
    unit = True
    low_seen = barless = False
    handles, labels = [], []
    for k, (i, label, rows) in enumerate(per_model):
        s = style(i)
        err: list[list[float]] = [[], []]
        xs, ys, low = [], [], []
        for j, vkey in enumerate(order):
            row = rows.get(vkey)
            if row is None:
                continue
            xs.append(j + (k - (len(per_model) - 1) / 2) * width)
            ys.append(row.value)
            shown_bar = has_interval(row.n, row.clusters)  # n < 5 or one cluster: a point, never a bar
            barless = barless or not shown_bar
            err[0].append(max(0.0, row.value - row.ci95[0]) if shown_bar else 0.0)
            err[1].append(max(0.0, row.ci95[1] - row.value) if shown_bar else 0.0)
            low.append(row.n < min_n)
            unit = unit and row.ci95[0] >= 0.0 and row.ci95[1] <= 1.0
        bars = ax.errorbar(
            xs,
            ys,
            yerr=err,
            color=s["color"],
            marker=s["marker"],
            linestyle="none",
            markersize=6,
            capsize=3,
            elinewidth=1.1,
            label=label,
        )
        ax.scatter(
            [x for x, lo in zip(xs, low, strict=True) if lo],
            [y for y, lo in zip(ys, low, strict=True) if lo],
            marker=s["marker"],
            s=36,
            facecolors="white",
            edgecolors=[s["color"]],
            zorder=3,
        )
        low_seen = low_seen or any(low)
        handles.append(bars)
        labels.append(label)
    ax.set_xticks(range(len(order)), [value_text(shown[v]) for v in order])
    ax.set_xlim(-0.6, len(order) - 0.4)
    ax.set_xlabel(key)
    ax.set_ylabel(metric)
    if unit:
        ax.set_ylim(0.0, 1.02)
    ax.grid(True, axis="y", alpha=0.3)
    title = f"{task}: {metric} by {key} (all lengths pooled, 95% interval)"
    if low_seen:
        title += f"; hollow: low\u00a0n\u00a0(<\u00a0{min_n})"  # kept on one line by the wrapping
    if barless:
        title += f"; no bar where n < {MIN_N_FOR_INTERVAL} or one haystack/document"
    ax.set_title(wrapped(title, width_in - 0.8, 10), fontsize=10)
    legend_below(fig, handles, labels)
    return fig


def write_line_plots(
    entries: Sequence[RunResult], plots_dir: Path, min_n: int = DEFAULT_MIN_N
) -> dict[str, list[Path]]:
    """Write every task's curve and slice plots under `plots_dir`; returns task -> PNG paths."""
    written: dict[str, list[Path]] = {}
    with literal_text():
        for task in task_names(entries):
            metric, board = _board(task, entries, min_n)
            if metric is None:
                continue
            figures = [(name, curve_figure(task, name, entries, min_n)) for name in curve_names(board)]
            figures += [(f"by-{key}", slice_figure(task, key, entries, min_n)) for key in slice_keys(board, metric)]
            for what, fig in figures:
                if fig is not None:
                    path = plots_dir / extra_plot_name(task, what)
                    write_png(fig, path)
                    written.setdefault(task, []).append(path)
    return written
