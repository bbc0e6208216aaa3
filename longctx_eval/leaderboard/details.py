"""A task page's per-length read-out tables (page-model blocks) for tasks with several headline metrics
(posprobe, retrieval, coreference).

The main table of a task shows its primary metric only; a task named in DETAIL_COLUMNS also gets one row per
(model, length) with the metrics that must be read together (for posprobe: a passkey EM next to the attention
read-outs and the pooled, median and clipped answer perplexities, so no single number is read alone), and a
retrieval-capability task every retrieval metric it computed (`leaderboard/retrieval_table.py`), and a coreference
task its scores within and across windows and by antecedent distance (`leaderboard/coref_table.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from longctx_eval.leaderboard.breakdowns import DEFAULT_MIN_N
from longctx_eval.leaderboard.coref_table import coref_section, is_coref
from longctx_eval.leaderboard.page_model import Block, Cell, Table, name_cell, para, text
from longctx_eval.leaderboard.retrieval_table import retrieval_section
from longctx_eval.metrics.bootstrap import has_interval, no_interval_text
from longctx_eval.results import MetricResult, TaskResult
from longctx_eval.scoring.labels import DASH, length_label

Board = Sequence[tuple[str, TaskResult]]
"""A task's rows, best first: (model name, its result)."""

DETAIL_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "posprobe": (
        ("passkey_em", "EM"),
        ("npb", "NPB"),
        ("lae", "LAE (bits)"),
        ("rho_train", "rho_train"),
        ("rho_ref", "rho_ref @L_ref"),
        ("needle_ppl", "needle ppl pooled"),
        ("needle_ppl_median", "needle ppl median"),
        ("needle_ppl_clipped", "needle ppl clipped"),
        ("haystack_ppl", "haystack ppl"),
    ),
}
"""Per task: (metric, column title) of its detail table, in column order."""
DETAIL_NOTES = {
    "posprobe": (
        "Per model and length: passkey EM with its 95% interval; NPB (0 = the retrieval heads' arg-max is the "
        "copied token); LAE (mean attention entropy of the answer queries); rho_train: LAE growth per doubling "
        "from the training length (references), rho_ref @N: from a fixed reference length N (models whose "
        "training window is longer); needle ppl pooled = exp(mean answer NLL), median = median over needles of "
        "each needle's perplexity, clipped = each step's NLL capped at ln 10, all with 95% intervals; haystack "
        "ppl: the filler tokens of the probe sequences. Definitions: docs/posprobe.md."
    ),
}
WITH_CI = {"passkey_em", "needle_ppl", "needle_ppl_median", "needle_ppl_clipped"}
RATIO = "l_over_ltrain"
"""A metric whose per-length value is the length over the training length: shown as its own column."""


def _number(value: float) -> str:
    return f"{value:.3g}" if abs(value) >= 100 else f"{value:.3f}"


def _pooled(result: TaskResult, metric: str, length: int) -> MetricResult | None:
    return next((r for r in result.results if r.metric == metric and r.length == length and r.depth is None), None)


def detail_cell(result: TaskResult, metric: str, length: int) -> str:
    """The value at `length` pooled over depths, its 95% interval for WITH_CI metrics, '@N' for rho_ref."""
    row = _pooled(result, metric, length)
    if row is None:
        return DASH
    text = f"{row.value:.2f}" if metric == "passkey_em" else _number(row.value)
    if metric in WITH_CI and not has_interval(row.n, row.clusters):
        text += f" ({no_interval_text(row.n, row.clusters, result.cluster_noun or 'clusters')})"
    elif metric in WITH_CI:
        lo, hi = (f"{v:.2f}" if metric == "passkey_em" else f"{v:.3g}" for v in row.ci95)
        text += f" [{lo}, {hi}]"
    if metric == "rho_ref" and (ref := _pooled(result, "rho_ref_length", length)) is not None:
        text += f" @{int(ref.value)}"
    return text


def detail_section(board: Board, min_n: int = DEFAULT_MIN_N) -> list[Block]:
    """The task's detail tables (one row per model and evaluated length): posprobe's read-outs, every retrieval
    metric of a retrieval task, a coreference task's window and distance read-outs (cells under `min_n` samples
    marked low n), or nothing for other tasks."""
    if not board:
        return []
    task = board[0][1].name
    columns = DETAIL_COLUMNS.get(task)
    if columns is None:
        return coref_section(board, min_n) if is_coref(board) else retrieval_section(board, min_n)
    shown = [(m, t) for m, t in columns if any(r.metric == m for _, res in board for r in res.results)]
    ratio = any(r.metric == RATIO for _, res in board for r in res.results)
    head = ("model", "L", *(["L/L_train"] if ratio else []), *(t for _, t in shown))
    note = DETAIL_NOTES.get(task)
    intro = para(note) if note else para(text(task, "code"), " per model and length:")
    rows = []
    for name, result in board:
        lengths = sorted({r.length for r in result.results if r.length is not None and r.depth is None})
        for n in lengths:
            cells = [name_cell(name), Cell(length_label(n), n, own=True)]
            if ratio:
                row = _pooled(result, RATIO, n)
                cells.append(Cell(f"{row.value:g}", row.value, own=True) if row is not None else Cell(DASH, own=True))
            for m, _ in shown:
                found = _pooled(result, m, n)
                cells.append(Cell(detail_cell(result, m, n), found.value if found is not None else None, own=True))
            rows.append(tuple(cells))
    return [intro, Table(head, tuple(rows))]
