"""A model's page as page-model records: identity and hashes, settings, environment, per task coverage, facts
(throughput marked where it was not measured in full), failures, serving, skips. The site lays it out
(model-*.html); LEADERBOARD.md has no equivalent page.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from longctx_eval.leaderboard.board_table import failed_cell, format_state
from longctx_eval.leaderboard.grid import cell, expected_samples, primary_metric, task_names, task_of
from longctx_eval.leaderboard.length_args import length_args_text
from longctx_eval.leaderboard.model_facts import context_window_text, format_params
from longctx_eval.leaderboard.page_model import Block, Cell, Link, Page, Section, Table, para, text
from longctx_eval.leaderboard.pages import BoardInput, failure_blocks, skipped_blocks
from longctx_eval.leaderboard.throughput_marks import throughput_text
from longctx_eval.results import Coverage, LatencyStats, RunResult, TaskResult, strata_coverage, task_failed
from longctx_eval.scoring.labels import DASH, length_label

FACTS = ("field", "value")


def facts_table(facts: Sequence[tuple[str, str | None]]) -> Table:
    """A two-column table of named facts (those with a value), the name as each row's header."""
    rows = tuple((Cell(k, own=True), Cell(v)) for k, v in facts if v)
    return Table(FACTS, rows, "facts", align="ll")


def model_page(entry: RunResult, board: BoardInput, extra: Sequence[Block] = ()) -> Page:
    """model-*.html: what the model is, per task coverage and its pooled primary metric first, then identity,
    hashes and environment, settings, each task's details, `extra` (its comparisons) and skips."""
    m = entry.model
    facts = [
        ("spec", m.spec),
        ("kind", m.kind),
        # A local model's revision is the folder it was loaded from (its identity is the weights' sha256).
        ("loaded from" if m.revision and m.revision.startswith("/") else "revision", m.revision),
        ("params", format_params(m.params) if m.params is not None else None),
        ("dtype", m.dtype),
        ("tokenizer", m.tokenizer),
        ("context window", context_window_text(m)),
        ("capabilities", ", ".join(m.capabilities)),
    ]
    identity = [
        ("weights sha256", m.sha256),
        ("tokenizer sha256", m.tokenizer_sha256),
        ("chat template sha256", m.chat_template_sha256),
        ("suite", entry.suite.version + (f" @ {entry.suite.git}" if entry.suite.git else "")),
        ("run started", entry.started),
        ("run config hash", entry.config_hash),
        ("python", entry.environment.python),
        ("torch", entry.environment.torch),
        ("transformers", entry.environment.transformers),
        ("platform", entry.environment.platform),
    ]
    blocks: list[Block] = [facts_table(facts)]
    if m.name in board.run_links:
        blocks.append(para("Run file: ", text("json", link=Link("run", board.run_links[m.name])), "."))
    tasks = sorted(entry.tasks, key=lambda t: (t.name, t.capability))
    blocks.append(Section("Coverage", (coverage_table(tasks, entry, board),)))  # what ran and how it scored, first
    blocks.append(Section("Identity and environment", (facts_table(identity),)))
    settings = [(k, json.dumps(v, sort_keys=True)) for k, v in sorted(m.settings.items())]
    blocks.append(
        Section(
            "Settings",
            (Table(("setting", "value"), tuple((Cell(k, k), Cell(v)) for k, v in settings), "facts", align="ll"),)
            if settings
            else (para("None recorded."),),
        )
    )
    blocks.append(Section("Tasks", tuple(task_section(t, entry, board) for t in tasks)))
    blocks += extra
    blocks.append(Section("Skipped", skipped_blocks([entry])))
    return Page(m.name, tuple(blocks), key=m.name)


def board_name(result: TaskResult, entry: RunResult, entries: Sequence[RunResult]) -> str:
    """The board (task table) a model's task result is shown on."""
    return next((b for b in task_names(entries) if task_of(entry, b) is result), result.name)


def _unrun(result: TaskResult, strata: Sequence[Coverage]) -> bool:
    return sum(c.evaluated + c.over_length + c.failed for c in strata) < expected_samples(result, strata)


def coverage_table(tasks: Sequence[TaskResult], entry: RunResult, board: BoardInput) -> Table:
    """One row per task: planned, evaluated, over-window and failed samples, and the pooled primary metric."""
    rows = []
    for result in tasks:
        name = board_name(result, entry, board.entries)
        metric = primary_metric(name, board.entries)
        strata = strata_coverage(result.coverage)
        planned = sum(c.planned for c in strata) if strata else None
        evaluated = sum(c.evaluated for c in strata) if strata else result.n_samples - result.over_length
        pooled = cell(result, metric, None, None) if metric else None
        if task_failed(result):
            shown, key, mark = failed_cell(result), None, "failed"
        elif pooled is not None:
            value = pooled.row.value if pooled.state == "value" and pooled.row is not None else None
            shown, key, mark = format_state(pooled), value, "partial" if pooled.partial else ""
        else:
            shown, key, mark = DASH, None, ""
        lengths = result.lengths or []
        rows.append(
            (
                Cell(name, name, link=Link("task", name)),
                Cell((f"{metric}: " if metric else "") + shown, key, mark),  # the score first: in view on a phone
                Cell(", ".join(length_label(n) for n in lengths), min(lengths or [0]), own=True),
                Cell(DASH if planned is None else str(planned), planned, own=True),
                Cell(
                    str(evaluated),
                    evaluated,
                    "partial" if planned is not None and _unrun(result, strata) else "",
                    own=True,
                ),
                Cell(str(result.over_length), result.over_length, own=True),
                Cell(str(result.errors), result.errors, "failed" if result.errors else "", own=True),
            )
        )
    head = ("task", "primary metric, all lengths", "lengths", "planned", "evaluated", "over window", "failed")
    return Table(head, tuple(rows), "coverage", align="lllrrrr")


def task_section(result: TaskResult, entry: RunResult, board: BoardInput) -> Section:
    """One task of the model: its facts, coverage per stratum (behind a disclosure), failures and serving."""
    name = board_name(result, entry, board.entries)
    state = " (failed: every request failed)" if task_failed(result) else ""
    facts = [
        ("version", result.version),
        ("capability", result.capability),
        ("samples", f"{result.n_samples} ({result.over_length} over-length, {result.errors} failed)"),
        ("lengths", ", ".join(length_label(n) for n in result.lengths or [])),
        ("limit", str(result.limit) if result.limit is not None else None),
        ("seed", str(result.seed) if result.seed is not None else None),
        ("args", json.dumps(result.args, sort_keys=True) if result.args else None),
        ("args by length", length_args_text(result) or None),
        ("started", result.started),
        ("dataset sha256", result.dataset_hash),
        ("config hash", result.config_hash),
        ("scorer sha256", result.scorer_sha256),
        ("throughput", throughput_text(result.throughput)),
    ]
    blocks: list[Block] = [para("Task page: ", text(name, link=Link("task", name)), state), facts_table(facts)]
    if result.coverage:
        strata = sorted(
            strata_coverage(result.coverage), key=lambda c: (c.length, -1.0 if c.depth is None else c.depth)
        )
        rows = tuple(
            (
                Cell(length_label(c.length), c.length, own=True),
                Cell(DASH if c.depth is None else f"{c.depth:g}", c.depth, own=True),
                Cell(str(c.planned), c.planned, own=True),
                Cell(str(c.evaluated), c.evaluated, "partial" if _unrun(result, [c]) else "", own=True),
                Cell(str(c.over_length), c.over_length, own=True),
                Cell(str(c.failed), c.failed, "failed" if c.failed else "", own=True),
            )
            for c in strata
        )
        head = ("length", "depth", "planned", "evaluated", "over window", "failed")
        blocks.append(Section(f"Coverage per stratum ({len(rows)})", (Table(head, rows, "coverage"),), behind=True))
    blocks += failure_blocks([(entry.model.name, result)])
    if result.serving is not None:
        blocks += serving_blocks(result)
    return Section(name, tuple(blocks))


def serving_blocks(result: TaskResult) -> list[Block]:
    """A served task's requests, retries, aggregate throughput and latency percentiles."""
    s = result.serving
    assert s is not None
    named: list[tuple[str, LatencyStats | None]] = [
        ("first token (s)", s.ttft_s),
        ("last token, end to end (s)", s.e2e_s),
        ("inter-token (s)", s.itl_s),
        ("per output token (s)", s.tpot_s),
        ("output tokens/s per request", s.output_tokens_per_s),
    ]
    rows = tuple(
        (
            Cell(label, label, own=True),
            Cell(str(stats.n), stats.n, own=True),
            *(Cell(f"{v:.4g}", v, own=True) for v in (stats.mean, stats.p50, stats.p95, stats.p99)),
        )
        for label, stats in named
        if stats is not None
    )
    t = s.throughput
    agg = ", ".join(
        f"{label} {v:.4g}"
        for label, v in (
            ("requests/s", t.requests_per_s),
            ("output tokens/s", t.output_tokens_per_s),
            ("total tokens/s", t.total_tokens_per_s),
        )
        if v is not None
    )
    retries = ", ".join(f"{k} {v}" for k, v in sorted(s.retries_by_reason.items())) or "none"
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(s.failure_kinds.items()))
    shown = (
        f"Serving: {s.requests} requests, {s.ok} ok, {s.failed} failed{f' ({kinds})' if kinds else ''}, "
        f"{s.retries} retries ({retries}); "
        f"aggregate {agg or DASH} over {s.wall_s:.2f} s; prompt lengths checked {s.length_checked}, "
        f"{s.length_mismatches} mismatched."
    )
    blocks: list[Block] = [para(text(shown))]
    if rows:
        blocks.append(Table(("latency", "n", "mean", "P50", "P95", "P99"), rows, "serving"))
    return blocks
