"""Breakdown tables compare only models evaluated at the same lengths: a pooled value (all lengths) of a model run at
32K-128K says nothing beside one of a model run at 1K-4K. Models are grouped by the lengths their pooled rows pool,
one table per group, each introduced by its lengths."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from longctx_eval.leaderboard.page_model import Block, Para, Table, own, para
from longctx_eval.results import TaskResult
from longctx_eval.scoring.labels import length_label

Board = Sequence[tuple[str, TaskResult]]
"""A task's rows, best first: (model name, its result)."""


def pooled_lengths(result: TaskResult) -> tuple[int, ...]:
    """The lengths a result's pooled rows pool: `pooled_lengths` where recorded, else its evaluated lengths."""
    if result.pooled_lengths is not None:
        return tuple(sorted(result.pooled_lengths))
    found = {r.length for r in result.results if r.length is not None and r.depth is None and r.n > 0}
    return tuple(sorted(found)) or tuple(sorted(result.lengths or ()))


def length_groups(board: Board) -> list[tuple[tuple[int, ...], list[tuple[str, TaskResult]]]]:
    """The board's models grouped by the lengths they pool, groups in the order of their best model."""
    groups: dict[tuple[int, ...], list[tuple[str, TaskResult]]] = {}
    for name, result in board:
        groups.setdefault(pooled_lengths(result), []).append((name, result))
    return list(groups.items())


def lengths_text(lengths: Sequence[int]) -> str:
    """'1K, 2K, 4K', or 'no length' for a result with nothing evaluated."""
    return ", ".join(length_label(n) for n in lengths) or "no length"


def grouped(board: Board, intro: Para, table_of: Callable[[Board], Table | None]) -> list[Block]:
    """`intro` and `table_of(board)` when every model pools the same lengths; else one table per group of models
    sharing their lengths (a group with nothing to show left out), each under a line naming the lengths, after
    `intro` and a line saying why. Nothing when no table has anything to show."""
    groups = [(lengths, t) for lengths, rows in length_groups(board) if (t := table_of(rows)) is not None]
    if len(groups) <= 1:
        return [intro, groups[0][1]] if groups else []
    blocks: list[Block] = [
        intro,
        para(
            "One table per group of models evaluated at the same lengths (a value pooled over other lengths is not "
            "comparable):",
            kind="note",
        ),
    ]
    for lengths, table in groups:
        blocks += [Para((own("Evaluated at "), own(lengths_text(lengths), "strong"), own(":"))), table]
    return blocks
