"""A task's main table (model x length of its primary metric) as rows of cells with sort keys and state marks:
the table every renderer shows, through `leaderboard/pages.py`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from longctx_eval.leaderboard.breakdowns import DEFAULT_MIN_N, KINDS, effective_cells, effective_kinds, effective_of
from longctx_eval.leaderboard.grid import (
    Cell,
    Ranking,
    cell,
    lengths,
    lengths_text,
    pooled_lengths_of,
    ranking,
    task_of,
)
from longctx_eval.leaderboard.noise import floor_cells, resolution_cells, unit_metric
from longctx_eval.results import RunResult, TaskResult, failure_summary, task_failed
from longctx_eval.scoring.labels import format_cell, length_label


def format_state(c: Cell) -> str:
    """A table cell: the value with interval and n ('n=2/5' when partial; 'n=100 over 4 haystacks, n_eff 31.2'
    when its samples share clusters), or the stratum's state."""
    if c.state == "over_window":
        return "n/a (over window)"
    if c.state == "failed":
        return f"{c.failed} failed" + (f" ({c.over_length} over window)" if c.over_length else "")
    if c.state == "not_evaluated":
        return "not evaluated"
    if c.row is None or c.planned is None:
        return format_cell(c.row, noun=c.noun) + (" (low n)" if c.low_n else "")
    partial = f"n={c.row.n}/{c.planned if c.expected is None else c.expected}" if c.partial else None
    text = format_cell(c.row, partial, c.noun)
    cut = c.expected is not None and c.planned is not None and c.expected < c.planned
    notes = ["low n"] * c.low_n + [f"limit: {c.expected} of {c.planned}"] * cut
    notes += [f"{c.over_length} over window"] * bool(c.over_length)
    notes += [f"{c.failed} failed"] * bool(c.failed)
    return text + (f" ({', '.join(notes)})" if notes else "")


def failed_cell(task: TaskResult) -> str:
    """The pooled cell of a task whose every request failed: 'failed: reason'."""
    return f"failed: {failure_summary(task.failures) or 'unknown error'}"


@dataclass(frozen=True)
class BoardCell:
    """One cell of a task table: its plain text, its sort key (None: kept out of sorting) and its state mark.

    `md`: the cell as Markdown when it is the renderer's own text (numbers, intervals, states); None for a cell
    holding a value from a run file, which LEADERBOARD.md escapes (`md_text`)."""

    text: str
    key: object = None
    mark: str = ""
    md: str | None = None


@dataclass(frozen=True)
class BoardRow:
    """One row of a task table: a model (or a foot row: noise floor, resolvable difference) and its cells after
    the name, as plain text (each renderer escapes the name and the cells holding values); `why` a model is not
    ranked, in `grid.ranking`'s own words (no value in them)."""

    name: str
    cells: list[BoardCell]
    result: TaskResult | None = None
    why: str = ""
    foot: bool = False


@dataclass(frozen=True)
class BoardView:
    """A task's table as both renderers lay it out: the header, ranked rows, unranked rows, foot rows."""

    head: list[str]
    columns: list[int | None]
    ranked: list[BoardRow]
    unranked: list[BoardRow]
    foot: list[BoardRow]
    kinds: list[str]
    version_text: str
    ranking: Ranking


def board_view(task: str, entries: Sequence[RunResult], metric: str, min_n: int = DEFAULT_MIN_N) -> BoardView:
    """The task's table: per model its cells (value, interval, n, state, low n), ranked ones first, then the
    unranked ones, then the noise-floor and resolvable-difference rows."""
    versions = sorted({t.version for e in entries if (t := task_of(e, task)) is not None})
    version = f"(v{versions[0]})" if len(versions) == 1 else ""
    cols: list[int | None] = [*lengths(task, entries, metric, with_depth=False), None]
    rank = ranking(task, entries, metric, min_n)
    results = [(e.model.name, t) for e in rank.order if (t := task_of(e, task)) is not None]
    kinds = effective_kinds(results, metric)
    pooled = [pooled_lengths_of(t) for _, t in results]
    common = pooled[0] if pooled and all(p is not None and p == pooled[0] for p in pooled) else None
    all_label = f"all ({lengths_text(common)})" if common is not None else "all"
    head = ["model", *([] if version else ["version"]), *(length_label(c) for c in cols[:-1]), all_label]
    head += [KINDS[k] for k in kinds]

    def row(name: str, result: TaskResult, why: str = "") -> BoardRow:
        cells = []
        if not version:
            cells.append(BoardCell(result.version, result.version))
        for c in cols:
            state = cell(result, metric, c, None, min_n)
            text = failed_cell(result) if c is None and task_failed(result) else format_state(state)
            own = pooled_lengths_of(result)
            if c is None and common is None and own is not None and state.state == "value":
                text += f" over {lengths_text(own)}"
            usable = state.state == "value" and state.row is not None and not state.low_n
            mark = (
                "low-n"
                if state.low_n
                else "partial"
                if state.partial
                else ""
                if state.state == "value"
                else state.state
            )
            own_text = None if c is None and task_failed(result) else text  # a failed cell holds failure reasons
            cells.append(BoardCell(text, state.row.value if usable and state.row else None, mark, own_text))
        for kind, text in zip(kinds, effective_cells(result, results, metric, kinds, min_n), strict=True):
            e = effective_of(result, metric, kind)
            shown = e is not None and not text.startswith("low n")
            cells.append(BoardCell(text, e.value if shown and e is not None else None, md=text))
        return BoardRow(name, cells, result, why)

    ranked_rows = [row(e.model.name, t) for e in rank.ranked if (t := task_of(e, task)) is not None]
    unranked_rows = [row(e.model.name, t, why) for e, why in rank.unranked if (t := task_of(e, task)) is not None]
    board = [t for _, t in results]
    lead = [] if version else [BoardCell("")]
    foot = []
    floors = floor_cells(board, metric, cols)
    if floors is not None:
        cells = [*lead, *(BoardCell(f, md=f) for f in floors)]
        foot.append(BoardRow("noise floor", cells + [BoardCell("")] * len(kinds), foot=True))
    if unit_metric(board, metric):
        ns = [
            [c.row.n for t in board if (c := cell(t, metric, n, None, min_n)).state == "value" and c.row is not None]
            for n in cols
        ]
        cells = [*lead, *(BoardCell(t, md=t) for t in resolution_cells(ns))]
        foot.append(BoardRow("resolvable difference", cells + [BoardCell("")] * len(kinds), foot=True))
    return BoardView(head, cols, ranked_rows, unranked_rows, foot, kinds, version, rank)
