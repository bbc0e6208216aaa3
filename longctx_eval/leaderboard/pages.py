"""The board's pages as page-model records (`page_model.py`), built once: the index (who leads each task, by how
much, whether that is resolvable; then the models and what was not shown) and one page per task (its table,
the leader test, breakdowns, plots). LEADERBOARD.md and the site both lay out these very records.

Adding a view: one function here returning blocks, called from `task_page` or `index_page`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from longctx_eval.leaderboard.board_table import BoardRow, board_view, failed_cell
from longctx_eval.leaderboard.breakdowns import DEFAULT_MIN_N, contrast_section, effective_note, slice_sections
from longctx_eval.leaderboard.details import detail_section
from longctx_eval.leaderboard.grid import cell, primary_metric, ranking, ranking_rule, task_names, task_of
from longctx_eval.leaderboard.legends import MERGE_RULE, cell_legend
from longctx_eval.leaderboard.length_args import length_args_section
from longctx_eval.leaderboard.model_facts import context_window_text, format_params
from longctx_eval.leaderboard.noise import FLOOR_LEGEND, resolvable_difference, unit_metric
from longctx_eval.leaderboard.page_model import (
    Block,
    Bullets,
    Cell,
    Figure,
    Link,
    Page,
    Para,
    Section,
    Table,
    as_value,
    marked,
    name_cell,
    para,
    text,
    with_values,
)
from longctx_eval.leaderboard.semantic import semantic_sections
from longctx_eval.leaderboard.serving import serving_sections
from longctx_eval.leaderboard.significance import LeaderTest, Samples, leader_test, sentence_para
from longctx_eval.leaderboard.throughput_marks import cached_blocks
from longctx_eval.results import RunResult, TaskResult, task_failed
from longctx_eval.scoring.labels import DASH

if TYPE_CHECKING:
    from longctx_eval.leaderboard.merge import MergeNote

DEFINITIONS = "Definitions"
LEADER_HEAD = ("task", "primary metric", "models", "leader", "ahead by", "resolvable?")
"""The columns of `leader_row`, in its order."""
RANK_COMMAND = "longctx-eval run --model A,B --tasks TASK --lengths 4k"
"""What makes a board rank: two models on one task at a shared length (then `longctx-eval leaderboard`)."""


@dataclass(frozen=True)
class BoardInput:
    """What the pages show: merged entries, when, plots (task -> relative paths, heatmap first), run copies
    (model -> relative path), merge notes, unread inputs, min n and per-sample scores for the leader test."""

    entries: Sequence[RunResult]
    updated: str
    plots: Mapping[str, Sequence[str]] = field(default_factory=dict)
    run_links: Mapping[str, str] = field(default_factory=dict)
    notes: Sequence[MergeNote] = ()
    unread: Sequence[tuple[str, str]] = ()
    min_n: int = DEFAULT_MIN_N
    samples: Samples | None = None


@dataclass(frozen=True)
class Board:
    """The whole board: the index page and one page per task, in task order."""

    index: Page
    tasks: dict[str, Page]


def board_pages(board: BoardInput) -> Board:
    """Every page of the board, each computed once."""
    tasks = task_names(board.entries)
    pages = {}
    for task in tasks:
        notes = [n for n in board.notes if n.task is not None and board_of(n, tasks) == task]
        pages[task] = task_page(task, board, notes)
    return Board(index_page(board), pages)


def board_of(note: MergeNote, boards: Sequence[str]) -> str | None:
    """The board (task table) a merge note belongs to, None for a note about the whole model."""
    for board in (f"{note.task} ({note.capability})", note.task):
        if board in boards:
            return board
    return None


def definitions(min_n: int) -> Section:
    """What the cells, the noise floor and the merge rule mean: behind a disclosure, below the answers."""
    return Section(
        DEFINITIONS,
        (para(marked(cell_legend(min_n))), para(marked(FLOOR_LEGEND)), para(marked(MERGE_RULE))),
        behind=True,
    )


def index_page(board: BoardInput) -> Page:
    """The index: who leads each task first, then the models, what was not shown or read, skips, definitions."""
    entries, tasks = board.entries, task_names(board.entries)
    blocks: list[Block] = [para(f"Updated {board.updated} · {len(entries)} model(s) · {len(tasks)} task(s).")]
    leads = [leader_row(task, board) for task in tasks]
    if tasks and not any(row[3].key is not None for row in leads):
        blocks.append(nothing_ranked(board.min_n, rankable_min_n(board)))
    if tasks:
        # the answer (leader, lead, resolvable?) right after the task, in view on a phone before any scrolling
        order = (0, 3, 4, 5, 1, 2)
        head = tuple(LEADER_HEAD[i] for i in order)
        rows = tuple(tuple(row[i] for i in order) for row in leads)
        blocks.append(Section("Leaders", (Table(head, rows, "leaders", align="llrlll"),)))
    rest = [n for n in board.notes if n.task is None or board_of(n, tasks) is None]
    blocks.append(Section("Models", (models_table(entries, board.run_links),)))
    if rest:
        rows = tuple((Cell(n.model, n.model), Cell(n.task or DASH), Cell(n.run), Cell(n.reason)) for n in rest)
        blocks.append(Section("Not shown", (Table(("model", "task", "run", "why"), rows, "notes", align="llll"),)))
    if board.unread:
        unread = tuple((Cell(p, p), Cell(w)) for p, w in board.unread)
        blocks.append(Section("Not read", (Table(("input", "why"), unread, "unread", align="ll"),)))
    blocks.append(Section("Skipped", skipped_blocks(entries)))
    blocks.append(definitions(board.min_n))
    return Page("longctx-eval leaderboard", tuple(blocks))


def rankable_min_n(board: BoardInput) -> int | None:
    """The largest `--min-n` at which some task would rank two models (both with that many samples at a length
    they share), None when no two models share a task and length at all."""
    best = None
    for task in task_names(board.entries):
        metric = primary_metric(task, board.entries)
        results = [t for e in board.entries if (t := task_of(e, task)) is not None]
        if metric is None or len(results) < 2:
            continue
        per_length: dict[int, list[int]] = {}
        for t in results:
            for r in t.results:
                if r.metric == metric and r.length is not None and r.depth is None and not r.slice and r.n > 0:
                    per_length.setdefault(r.length, []).append(r.n)
        for ns in per_length.values():
            if len(ns) >= 2:
                second = sorted(ns)[-2]
                best = second if best is None else max(best, second)
    return best


def nothing_ranked(min_n: int, rankable: int | None = None) -> Para:
    """The one line a board with nothing ranked shows, and the command that makes it rank; `rankable`: the
    `--min-n` that would rank (models share a task and length, but with too few samples: a `--limit` run)."""
    if rankable is not None:
        return para(
            f"Nothing is ranked yet: where models share a task and length, they have fewer than {min_n} samples "
            "(too few to tell them apart; a ",
            marked("`--limit`"),
            " run). To rank, run without ",
            marked("`--limit`"),
            ", or rank these few samples anyway (noisy) with ",
            marked(f"`longctx-eval leaderboard --min-n {rankable}`"),
            ".",
            kind="leader",
        )
    return para(
        f"Nothing is ranked yet: no task has two models sharing a length where both have at least {min_n} "
        "samples. To rank, run a second model on a task and length the first one ran, e.g. ",
        marked(f"`{RANK_COMMAND}`"),
        ", then ",
        marked("`longctx-eval leaderboard`"),
        ".",
        kind="leader",
    )


def leader_row(task: str, board: BoardInput) -> tuple[Cell, ...]:
    """The index's row of a task: its metric, how many models ran it, the leader, its lead over the runner-up
    (the ranking means) and whether that lead is resolvable (the paired test where per-sample scores exist, else
    the resolvable difference at the smaller n)."""
    entries, min_n = board.entries, board.min_n
    metric = primary_metric(task, entries)
    ran = sum(task_of(e, task) is not None for e in entries)
    first = Cell(task, task, link=Link("task", task))
    if metric is None:
        return (
            first,
            Cell("every request failed", own=True),
            Cell(str(ran), ran, own=True),
            *(Cell(DASH, own=True),) * 3,
        )
    rk = ranking(task, entries, metric, min_n)
    metric_cell = Cell(metric, metric, style="code")
    if not rk.ranked:
        low = all(why.startswith("low n") for _, why in rk.unranked)  # grid.ranking's own words
        why = (
            DASH
            if not ran
            else "one model: nothing to rank"
            if ran == 1
            else f"not ranked: n < {min_n}"
            if low
            else "not ranked: no shared length"
        )
        return (
            first,
            metric_cell,
            Cell(str(ran), ran, own=True),
            Cell(why, own=True),
            Cell(DASH, own=True),
            Cell(DASH, own=True),
        )
    leader = rk.ranked[0].model.name
    lead = Cell(leader, leader, style="strong", link=Link("model", leader))
    if len(rk.ranked) < 2:
        return (first, metric_cell, Cell(str(ran), ran, own=True), lead, Cell("alone", own=True), Cell(DASH, own=True))
    a, b = rk.score(rk.ranked[0], task), rk.score(rk.ranked[1], task)
    margin = None if a is None or b is None else a - b
    by = Cell(DASH if margin is None else f"{margin:+.3f} over {rk.ranked[1].model.name}", margin)
    test = leader_test(task, rk.ranked, metric, board.samples, [] if rk.pooled else rk.lengths)
    return (
        first,
        metric_cell,
        Cell(str(ran), ran, own=True),
        lead,
        by,
        resolvable_cell(task, board, metric, margin, test),
    )


def resolvable_cell(task: str, board: BoardInput, metric: str, margin: float | None, test: LeaderTest | None) -> Cell:
    """'yes (paired test, p = 0.003)', 'no (paired test, p = 0.41)', or by the resolvable difference of the two
    leaders' smallest ranked n: 'no: 0.050 < 0.25 at n=30 (no per-sample scores)'."""
    if test is not None and not test.untestable:
        verdict = "yes" if test.ahead else "no"
        return Cell(f"{verdict} (paired test, p = {test.p_value:.2g})", int(test.ahead), own=True)
    rk = ranking(task, board.entries, metric, board.min_n)
    results = [t for e in rk.ranked[:2] if (t := task_of(e, task)) is not None]
    if margin is None or not unit_metric(results, metric):
        return Cell("not testable", own=True)
    columns = [None] if rk.pooled else list(rk.lengths)
    ns = [c.row.n for t in results for n in columns if (c := cell(t, metric, n, None, board.min_n)).row is not None]
    if not ns:
        return Cell("not testable", own=True)
    n = min(ns)
    width = resolvable_difference(n, n)
    verdict = "yes" if abs(margin) > width else "no"
    sign = ">" if abs(margin) > width else "<="
    return Cell(
        f"{verdict}: {abs(margin):.3f} {sign} {min(width, 1):.2f} at n={n} (no paired test)",
        int(verdict == "yes"),
        own=True,
    )


def models_table(entries: Sequence[RunResult], run_links: Mapping[str, str]) -> Table:
    """One row per model: spec, kind, params, dtype, tokenizer, context window, tasks, suite, started, run file."""
    rows = []
    for e in sorted(entries, key=lambda e: e.model.name):
        m = e.model
        suite = e.suite.version + (f" @ {e.suite.git[:12]}" if e.suite.git else "")
        link = run_links.get(m.name)
        rows.append(
            (
                name_cell(m.name),
                Cell(m.spec, m.spec, style="code"),
                Cell(m.kind, m.kind),
                Cell(format_params(m.params), m.params),
                Cell(m.dtype or DASH, m.dtype),
                Cell(m.tokenizer, m.tokenizer),
                Cell(context_window_text(m), m.context_window),
                Cell(str(len(e.tasks)), len(e.tasks), own=True),
                Cell(suite, suite),
                Cell(e.started, e.started),
                Cell("json", link=Link("run", link), own=True) if link else Cell(DASH, own=True),
            )
        )
    head = ("model", "spec", "kind", "params", "dtype", "tokenizer", "context window", "tasks", "suite", "started")
    return Table((*head, "run file"), tuple(rows), "models", align="lllrllrrlll")


def skipped_blocks(entries: Sequence[RunResult]) -> tuple[Block, ...]:
    """The tasks each model skipped, with kind and reason, or one line saying none was."""
    rows = sorted((e.model.name, s.task, s.kind or DASH, s.reason) for e in entries for s in e.skipped)
    if not rows:
        return (para("No task was skipped."),)
    cells = tuple((Cell(m, m, link=Link("model", m)), Cell(t, t), Cell(k, k), Cell(r, r)) for m, t, k, r in rows)
    return (Table(("model", "task", "kind", "reason"), cells, "skipped", align="llll"),)


def task_page(task: str, board: BoardInput, notes: Sequence[MergeNote] = ()) -> Page:
    """A task: the leader test and its table first, then failures, breakdowns, warnings, notes, plots."""
    entries, min_n = board.entries, board.min_n
    metric = primary_metric(task, entries)
    if metric is None:
        failed = [(e.model.name, t) for e in entries if (t := task_of(e, task)) is not None and task_failed(t)]
        blocks: list[Block] = []
        if failed:
            rows = tuple((name_cell(m), Cell(failed_cell(t))) for m, t in sorted(failed))
            blocks += [
                para("Every request failed; nothing was scored."),
                Table(("model", "state"), rows, "board", align="ll"),
            ]
            blocks += failure_blocks(failed)
        else:
            blocks.append(para("No results reported."))
        blocks += warning_blocks(task, entries) + note_blocks(notes)
        return Page(task, tuple(blocks), key=task)
    view = board_view(task, entries, metric, min_n)
    rk = view.ranking
    test = leader_test(task, rk.ranked, metric, board.samples, [] if rk.pooled else rk.lengths)
    blocks = [sentence_para(test)] if test is not None else []
    rule = ranking_rule(task, entries, metric, min_n, as_value)
    blocks.append(
        para("Primary metric: ", text(metric, "code"), ".", *((" ", with_values(rule, "code")) if rule else ()))
    )
    if view.ranked:
        blocks.append(board_table(view.head, view.ranked, view.foot))
    if view.unranked:
        pieces: list = ["Not ranked (listed, not compared): "]
        for i, r in enumerate(view.unranked):
            pieces += ["; "] * bool(i) + [text(r.name, "strong"), f": {r.why}"]  # `why`: grid.ranking's own words
        blocks.append(para(*pieces, "."))
        blocks.append(
            board_table(
                view.head, view.unranked, [] if view.ranked else view.foot, "board unranked" if view.ranked else "board"
            )
        )
    results = [(r.name, r.result) for r in [*view.ranked, *view.unranked] if r.result is not None]
    counts = [(n, t) for n, t in results if t.over_length or t.errors]
    if counts:
        pieces = ["Over-length and failed samples: "]
        for i, (n, t) in enumerate(counts):
            pieces += ["; "] * bool(i) + [text(n), f" {t.over_length} over-length, {t.errors} failed of {t.n_samples}"]
        blocks.append(para(*pieces, "."))
    blocks += failure_blocks(results) + length_args_section(results)
    blocks += effective_note(results, metric, view.kinds, min_n) + slice_sections(results, metric, min_n)
    blocks += contrast_section(results, min_n) + serving_sections(results) + semantic_sections(results)
    blocks += detail_section(results, min_n)
    blocks += cached_blocks(results)
    blocks += warning_blocks(task, entries) + note_blocks(notes)
    blocks += [
        Figure(Link("plot", path), f"{task} {plot_kind(path)}", plot_kind(path)) for path in board.plots.get(task, [])
    ]
    blocks.append(Section(DEFINITIONS, (para(marked(cell_legend(min_n))), para(marked(FLOOR_LEGEND))), behind=True))
    return Page(task, tuple(blocks), view.version_text, task)


def board_table(head: Sequence[str], rows: Sequence[BoardRow], foot: Sequence[BoardRow], kind: str = "board") -> Table:
    """The task's main table: model rows (sortable) and foot rows (noise floor, resolvable difference)."""

    def cells(r: BoardRow) -> tuple[Cell, ...]:
        first = Cell(r.name, style="em", own=True) if r.foot else name_cell(r.name)
        rest = (Cell(c.md if c.md is not None else c.text, c.key, c.mark, own=c.md is not None) for c in r.cells)
        return (first, *rest)

    return Table(tuple(head), tuple(cells(r) for r in rows), kind, tuple(cells(r) for r in foot))


def failure_blocks(results: Sequence[tuple[str, TaskResult]]) -> list[Block]:
    """Why requests failed, per model: each reason with its count."""
    items = []
    for name, t in results:
        if t.failures:
            pieces: list = [text(name), ": "]
            for i, (reason, n) in enumerate(t.failures.items()):
                pieces += ["; "] * bool(i) + [text(reason), f" ({n})"]
            items.append(para(*pieces))
    if not items:
        return []
    return [para("Why requests failed (not scored; a rerun retries them):"), Bullets(tuple(items), "failures")]


def warning_blocks(task: str, entries: Sequence[RunResult]) -> list[Block]:
    """The task's warnings, per model."""
    items = [
        para(text(e.model.name), ": ", text(w), ".")
        for e in sorted(entries, key=lambda e: e.model.name)
        if (t := task_of(e, task)) is not None
        for w in t.warnings
    ]
    return [para("Warnings:"), Bullets(tuple(items), "warnings")] if items else []


def note_blocks(notes: Sequence[MergeNote]) -> list[Block]:
    """The merge's notes of a task: results not shown or replaced, and why."""
    if not notes:
        return []
    title = {"not_shown": "Not shown", "replaced": "Replaced", "other_model": "Not shown"}
    items = [para(f"{title[n.kind]}: ", text(n.model), " ", text(n.run), ": ", text(n.reason), ".") for n in notes]
    return [Bullets(tuple(items), "notes")]


def plot_kind(path: str) -> str:
    """'heatmap' for a task's main plot 'task.png', else what follows the task in 'task.KIND.png'."""
    name = path.rsplit("/", 1)[-1].removesuffix(".png")
    return name.split(".", 1)[1].replace("-", " ").replace("_", " ") if "." in name else "heatmap"
