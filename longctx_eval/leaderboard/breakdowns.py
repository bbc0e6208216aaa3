"""A task page's breakdowns as page-model blocks: effective-length columns, per-slice tables and contrast tables."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from longctx_eval.leaderboard.length_groups import grouped
from longctx_eval.leaderboard.page_model import Block, Cell, Table, marked, name_cell, own, para, text
from longctx_eval.results import ContrastResult, EffectiveLength, SliceValue, TaskResult
from longctx_eval.scoring.labels import (
    DASH,
    format_cell,
    format_difference,
    format_effective,
    length_label,
    value_text,
)
from longctx_eval.scoring.slicing import ValueKey, value_key

Board = Sequence[tuple[str, TaskResult]]
"""A task's rows, best first: (model name, its result)."""
KINDS = {"absolute": "eff. length", "relative": "rel. eff. length"}
DEFAULT_MIN_N = 30
"""Cells with fewer samples are marked low n and kept out of ranking, effective length and contrasts
(`leaderboard --min-n`)."""


def effective_of(result: TaskResult, metric: str, kind: str) -> EffectiveLength | None:
    """The result's effective length of `kind` for `metric`, None when it has none (one length, older files)."""
    return next((e for e in result.effective_length if e.kind == kind and e.metric == metric), None)


def effective_kinds(board: Board, metric: str) -> list[str]:
    """The effective-length kinds any model of the board reports for `metric` (the extra table columns)."""
    return [k for k in KINDS if any(effective_of(r, metric, k) is not None for _, r in board)]


def _rule(e: EffectiveLength) -> str:
    return f">={e.threshold:.3g}" if e.kind == "absolute" else f">={e.fraction or 0:.0%}"


def _rules(board: Board, metric: str, kind: str) -> set[str]:
    return {_rule(e) for _, r in board if (e := effective_of(r, metric, kind)) is not None}


def low_n_lengths(result: TaskResult, metric: str, lengths: Sequence[int], min_n: int) -> list[int]:
    """Those of `lengths` where the result's pooled-depth `metric` row has fewer than `min_n` samples."""
    rows = {r.length: r.n for r in result.results if r.metric == metric and r.depth is None}
    return [n for n in lengths if rows.get(n, 0) < min_n]


def effective_cells(
    result: TaskResult, board: Board, metric: str, kinds: Sequence[str], min_n: int = DEFAULT_MIN_N
) -> list[str]:
    """One cell per kind: '4K [2K, 8K]', '(window)' when the window ended it, the rule when models differ;
    'low n (1K, 2K)' instead when a length it ran over has fewer than `min_n` samples."""
    cells = []
    for kind in kinds:
        e = effective_of(result, metric, kind)
        if e is None:
            cells.append(DASH)
            continue
        low = low_n_lengths(result, metric, e.lengths, min_n)
        if low:
            cells.append(f"low n ({', '.join(length_label(n) for n in low)})")
            continue
        text = format_effective(e)
        cells.append(text + (f" ({_rule(e)})" if len(_rules(board, metric, kind)) > 1 else ""))
    return cells


def effective_note(board: Board, metric: str, kinds: Sequence[str], min_n: int = DEFAULT_MIN_N) -> list[Block]:
    """The paragraph under the table saying what the effective-length columns mean."""
    if not kinds:
        return []
    parts: list = []
    if "absolute" in kinds:
        rules = sorted(_rules(board, metric, "absolute"))
        thr = rules[0].lstrip(">=") if len(rules) == 1 else "the threshold in the cell"
        ruler = " (RULER's 85.6%)" if thr == "0.856" else " (RULER uses 0.856)"
        parts += [
            own("eff. length", "strong"),
            ": the longest length up to which ",
            text(metric, "code"),
            f" stays at or above {thr}{ruler} at every evaluated length",
        ]
    if "relative" in kinds:
        rules = sorted(_rules(board, metric, "relative"))
        share = rules[0].lstrip(">=") if len(rules) == 1 else "the share in the cell"
        nolima = " (as NoLiMa)" if share == "85%" else " (NoLiMa uses 85%)"
        parts += ["; "] * bool(parts) + [
            own("rel. eff. length", "strong"),
            f": the same with {share}{nolima} of the model's own score at its shortest evaluated length as the "
            "threshold",
        ]
    tail = marked(
        ". [lo, hi]: 95% bootstrap interval (within each length, the haystacks or documents resampled, then the "
        "samples within them); `<N`: below the threshold "
        "already at the shortest length N; (window): it held at every length the model could read, and longer "
        f"lengths were over its context window; low n (lengths): not shown, those lengths have fewer than {min_n} "
        "samples."
    )
    return [para(*parts, tail)]


def slice_sections(board: Board, metric: str, min_n: int = DEFAULT_MIN_N) -> list[Block]:
    """Per slice key: `metric` per value of the key, all lengths pooled, one row per model; a value from fewer
    than `min_n` samples is marked '(low n)' and never sorted on."""
    keys = list(dict.fromkeys(k for _, r in board for row in r.slices if row.slice for k in row.slice))
    blocks: list[Block] = []
    for key in keys:
        intro = para("By ", text(key, "code"), " (", text(metric, "code"), ", all lengths pooled):")
        blocks += grouped(board, intro, partial(slice_table, key=key, metric=metric, min_n=min_n))
    return blocks


def slice_table(board: Board, key: str, metric: str, min_n: int = DEFAULT_MIN_N) -> Table | None:
    """`metric` per value of the slice `key`, all lengths pooled, one row per model; None when no model has one."""
    cells: dict[tuple[str, ValueKey], Cell] = {}
    shown: dict[ValueKey, SliceValue] = {}
    for name, result in board:
        for row in result.slices:
            if row.metric == metric and row.length is None and row.slice and key in row.slice:
                vkey = value_key(row.slice[key])
                if vkey is None:
                    continue
                shown.setdefault(vkey, row.slice[key])
                low = row.n < min_n
                shown_text = format_cell(row) + (" (low n)" if low else "")
                cells[(name, vkey)] = Cell(shown_text, None if low else row.value, "low-n" * low, own=True)
    if not shown:
        return None
    order = sorted(shown)
    head = ("model", *(value_text(shown[v]) for v in order))
    rows = tuple((name_cell(name), *(cells.get((name, v), Cell(DASH, own=True)) for v in order)) for name, _ in board)
    return Table(head, rows)


def contrast_cell(c: ContrastResult, min_n: int = DEFAULT_MIN_N) -> str:
    """'0.31 [0.12, 0.50]', or 'low n (3 vs 3)' when either side has fewer than `min_n` samples."""
    if min(c.n_a, c.n_b) < min_n:
        return f"low n ({c.n_a} vs {c.n_b})"
    return format_difference(c)


def contrast_section(board: Board, min_n: int = DEFAULT_MIN_N) -> list[Block]:
    """Every contrast: the difference per length and pooled, with interval; the pooled cell adds both sides.

    A side with fewer than `min_n` samples keeps the difference off the page ('low n (3 vs 3)')."""
    found = [(name, c) for name, r in board for c in r.contrasts]
    if not found:
        return []
    names = list(dict.fromkeys(c.name for _, c in found))
    defined = {
        c.name: (
            text(c.metric, "code"),
            own(" at "),
            text(f"{c.key}={value_text(c.a)}"),
            own(" minus at "),
            text(f"{c.key}={value_text(c.b)}"),
        )
        for _, c in found
    }
    pieces: list = ["Contrasts ("]
    for i, n in enumerate(names):
        pieces += ["; "] * bool(i) + [text(n, "code"), ": ", defined[n]]
    pieces.append(
        f"; 95% interval from resampling each side on its own; low n (a vs b): a side has fewer than {min_n} "
        "samples, no difference shown):"
    )
    return grouped(board, para(*pieces), lambda rows: contrast_table(rows, names, min_n))


def contrast_table(board: Board, names: Sequence[str], min_n: int = DEFAULT_MIN_N) -> Table | None:
    """One row per model and contrast: the difference per length and pooled ('all', with both sides)."""
    found = [(name, c) for name, r in board for c in r.contrasts]
    if not found:
        return None
    lengths = sorted({c.length for _, c in found if c.length is not None})
    head = ("model", "contrast", *(length_label(n) for n in lengths), "all")

    def cell(c: ContrastResult | None, pooled: bool = False) -> Cell:
        if c is None:
            return Cell(DASH, own=True)
        if min(c.n_a, c.n_b) < min_n:
            return Cell(contrast_cell(c, min_n), mark="low-n", own=True)
        shown = format_difference(c)
        if pooled:
            shown += f" ({c.value_a:.2f} n={c.n_a} vs {c.value_b:.2f} n={c.n_b})"
        return Cell(shown, c.difference, own=True)

    rows = []
    for model, _ in board:
        for cname in names:
            mine = {c.length: c for m, c in found if m == model and c.name == cname}
            if mine:
                cells = [cell(mine.get(n)) for n in lengths] + [cell(mine.get(None), pooled=True)]
                rows.append((name_cell(model), Cell(cname, cname), *cells))
    return Table(head, tuple(rows), align="ll" + "r" * (len(head) - 2))
