"""Every retrieval metric of a retrieval-capability task, per model and length: the board's main table shows the
primary metric only, and MRR, nDCG and the other recall@k would otherwise be computed and shown nowhere.

One page-model table, which LEADERBOARD.md and the site both lay out, so both carry the same columns: MRR,
nDCG@k, recall@k (every k the run computed; cross_paragraph's fact_recall@k and all_facts@k),
each cell with its n and interval as every other cell (`scoring/labels.format_cell`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from longctx_eval.leaderboard.page_model import Block, Cell, Table, name_cell, para
from longctx_eval.results import MetricResult, TaskResult
from longctx_eval.scoring.labels import DASH, format_cell, length_label

Board = Sequence[tuple[str, TaskResult]]
"""A task's rows, best first: (model name, its result)."""

RETRIEVE = "retrieve"
"""The capability whose tasks get the table."""
FAMILIES = (
    ("mrr", "MRR"),
    ("ndcg", "nDCG"),
    ("recall", "Recall"),
    ("fact_recall", "fact recall"),
    ("all_facts", "all facts"),
)
"""Metric families in column order, with their column titles (`@k` appended; k ascending within a family)."""
_METRIC = re.compile(r"(?P<family>[a-z_]+?)(?:@(?P<k>\d+))?")


def metric_order(metric: str) -> tuple[int, int] | None:
    """(family position, k) of a retrieval metric name ('mrr', 'ndcg@10', 'recall@5', ...), None for others."""
    match = _METRIC.fullmatch(metric)
    if match is None:
        return None
    families = [f for f, _ in FAMILIES]
    family, k = match["family"], match["k"]
    if family not in families or (family == "mrr") != (k is None):
        return None
    return families.index(family), int(k or 0)


def column_title(metric: str) -> str:
    """'MRR', 'nDCG@10', 'Recall@5', 'fact recall@3', 'all facts@1'."""
    family, _, k = metric.partition("@")
    title = dict(FAMILIES)[family]
    return f"{title}@{k}" if k else title


def retrieval_columns(board: Board) -> list[str]:
    """The retrieval metrics any shown retrieval result reports, in column order."""
    found = {r.metric for _, res in board if res.capability == RETRIEVE for r in res.results}
    return sorted((m for m in found if metric_order(m) is not None), key=lambda m: metric_order(m) or (0, 0))


def _row(result: TaskResult, metric: str, length: int | None) -> MetricResult | None:
    return next(
        (r for r in result.results if r.metric == metric and r.length == length and r.depth is None and not r.slice),
        None,
    )


def retrieval_cell(row: MetricResult | None, min_n: int) -> Cell:
    """The metric's value with its n and interval, marked '(low n)' under `min_n` samples (then never sorted on),
    or a dash."""
    if row is None:
        return Cell(DASH, own=True)
    low = row.n < min_n
    return Cell(format_cell(row) + (" (low n)" if low else ""), None if low else row.value, "low-n" * low, own=True)


def retrieval_section(board: Board, min_n: int) -> list[Block]:
    """One row per model and evaluated length, then its pooled row ('all'); nothing for a task no retriever ran."""
    columns = retrieval_columns(board)
    if not columns:
        return []
    head = ("model", "L", *(column_title(m) for m in columns))
    intro = para(
        "Every retrieval metric (per length, then all lengths pooled; 95% interval, n samples; low n: fewer than "
        f"{min_n}):"
    )
    rows = []
    for name, result in board:
        if result.capability != RETRIEVE:
            continue
        lengths = sorted({r.length for r in result.results if r.length is not None and r.depth is None})
        for length in [*lengths, None]:
            cells = [retrieval_cell(_row(result, m, length), min_n) for m in columns]
            if all(c.text == DASH for c in cells):
                continue
            key = length if length is not None else float("inf")
            rows.append((name_cell(name), Cell(length_label(length), key, own=True), *cells))
    return [intro, Table(head, tuple(rows), align="ll" + "r" * len(columns))]
