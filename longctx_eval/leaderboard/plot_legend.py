"""A legend under a figure's panels that always fits its width: as many columns as fit (at most `max_cols`), fewer
when the labels are long, and the figure widened when even one column is wider than it, so no legend is clipped."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend import Legend

FIT = 0.96
"""The share of the figure's width a legend may take."""


def legend_below(fig: Figure, handles: Sequence, labels: Sequence[str] | None = None, max_cols: int = 3) -> Legend:
    """One legend under the panels, outside every axis (no line hidden behind it), fitted to the figure's width."""
    FigureCanvasAgg(fig)  # a renderer to measure the legend with
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    count = len(labels) if labels is not None else len(handles)
    legend = None
    for ncols in range(max(1, min(max_cols, count)), 0, -1):
        if legend is not None:
            legend.remove()
        args = (list(handles), list(labels)) if labels is not None else ()
        kwargs = {} if labels is not None else {"handles": list(handles)}
        legend = fig.legend(*args, **kwargs, loc="outside lower center", ncols=ncols, fontsize=8, frameon=False)
        width = legend.get_window_extent(renderer).width
        if width <= FIT * fig.bbox.width:
            return legend
    assert legend is not None
    fig.set_figwidth(fig.get_figwidth() * width / (FIT * fig.bbox.width))  # one column, still wider: widen
    return legend


def legend_fits(fig: Figure) -> bool:
    """Whether every legend of the drawn figure lies inside it (what the plot tests check on every PNG)."""
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    box = fig.bbox
    for legend in fig.legends:
        ext = legend.get_window_extent(renderer)
        if ext.x0 < box.x0 - 0.5 or ext.x1 > box.x1 + 0.5 or ext.y0 < box.y0 - 0.5 or ext.y1 > box.y1 + 0.5:
            return False
    return True
