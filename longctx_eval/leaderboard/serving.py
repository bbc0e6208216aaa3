"""A task page's serving tables (page-model blocks): what served models report (run.json `serving` and `composite`).

Per served model: requests (ok, failed, retries), first-token (TTFT) and end-to-end latency P50/P95, aggregate
output tokens/s and the per-request P50 (scoring/latency.py), and the composite score with each component, its
raw input and the weights (scoring/composite.py), so nobody has to trust the weights.
"""

from __future__ import annotations

from collections.abc import Sequence

from longctx_eval.leaderboard.page_model import Block, Cell, Table, marked, name_cell, para
from longctx_eval.results import CompositeScore, LatencyStats, TaskResult
from longctx_eval.scoring.labels import DASH

Board = Sequence[tuple[str, TaskResult]]
"""A task's rows in table order: (model name, its result)."""

SERVING_NOTE = (
    "Served models (`serving` in the run file, recomputed from each prediction's timings at scoring): requests "
    "ok / failed (failed: after every retry; not scored, a rerun retries them) and retries; **TTFT**: time to "
    "first token; **end to end**: time to the last token; P50 / P95 over the successful requests, seconds; "
    "**output tok/s**: output tokens over the time at least one request was in flight (aggregate), and the "
    "median request's own output tokens / end-to-end time:"
)
COMPOSITE_NOTE = (
    "Composite score of served models (`composite`): sum(weight x component) / sum(weights); components in [0, 1]: "
    "throughput = output tok/s / 1000, latency = 1 - P95 / 0.2 s (of the latency named), recall = the task's "
    "pooled primary metric, fidelity = mean embedding similarity of answer and reference over n answers (each "
    "clipped to [0, 1]; the field and embedder named); a failed request counts 0 in recall and fidelity; raw "
    "inputs in parentheses:"
)


def _p50_p95(stats: LatencyStats | None) -> str:
    return DASH if stats is None else f"{stats.p50:.3g} / {stats.p95:.3g}"


def _number(value: float | None) -> str:
    return DASH if value is None else f"{value:,.1f}"


def serving_rows(board: Board) -> list[list[str]]:
    """Per served model: name, requests, ok / failed, retries, TTFT and end-to-end P50 / P95, output tok/s."""
    rows = []
    for name, result in board:
        s = result.serving
        if s is None:
            continue
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(s.failure_kinds.items()))
        per_request = s.output_tokens_per_s.p50 if s.output_tokens_per_s is not None else None
        rows.append(
            [
                name,
                str(s.requests),
                f"{s.ok} / {s.failed}" + (f" ({kinds})" if kinds else ""),
                str(s.retries),
                _p50_p95(s.ttft_s),
                _p50_p95(s.e2e_s),
                _number(s.throughput.output_tokens_per_s),
                _number(per_request),
            ]
        )
    return rows


def failed_note(c: CompositeScore) -> str:
    """' (3 failed requests counted 0)', or nothing when none failed."""
    if not c.failed_as_zero:
        return ""
    return f" ({c.failed_as_zero} failed request{'s' * (c.failed_as_zero != 1)} counted 0)"


def composite_rows(board: Board) -> list[list[str]]:
    """Per model with a composite: name, value, each component with its raw input, and the weights."""
    rows = []
    for name, result in board:
        c = result.composite
        if c is None:
            continue
        w = c.weights
        rows.append(
            [
                name,
                f"{c.value:.3f}" + failed_note(c),
                f"{c.throughput:.3f} ({c.output_tokens_per_s:,.1f} tok/s)",
                f"{c.latency:.3f} ({c.latency_metric} P95 {c.latency_p95_s:.3g} s)",
                f"{c.recall:.3f} ({c.recall_metric})",
                f"{c.fidelity:.3f} ({c.fidelity_metric or 'MiniLM cosine'}, n={c.fidelity_n})",
                f"{w.throughput:g} / {w.latency:g} / {w.recall:g} / {w.fidelity:g}",
            ]
        )
    return rows


SERVING_HEAD = [
    "model",
    "requests",
    "ok / failed",
    "retries",
    "TTFT P50 / P95 (s)",
    "end to end P50 / P95 (s)",
    "output tok/s (aggregate)",
    "output tok/s (request P50)",
]
COMPOSITE_HEAD = ["model", "composite", "throughput", "latency", "recall", "fidelity", "weights (t / l / r / f)"]


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    body = tuple((name_cell(row[0]), *(Cell(c, _key(c)) for c in row[1:])) for row in rows)
    return Table(tuple(head), body)


def _key(cell: str) -> object:
    """The number a serving cell starts with ('1,234.5', '0.12 / 0.30'), else the text; None for a dash."""
    head = cell.split(" ", 1)[0].replace(",", "")
    try:
        return float(head)
    except ValueError:
        return None if cell == DASH else cell


def serving_sections(board: Board) -> list[Block]:
    """The task's serving table and composite table, nothing when no model of it was served."""
    blocks: list[Block] = []
    served = serving_rows(board)
    if served:
        blocks += [para(marked(SERVING_NOTE)), _table(SERVING_HEAD, served)]
    composite = composite_rows(board)
    if composite:
        blocks += [para(marked(COMPOSITE_NOTE)), _table(COMPOSITE_HEAD, composite)]
    return blocks
